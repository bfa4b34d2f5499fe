"""The delivery of a trained defender and its checks: the selected state, the fresh attacker, the
data-independent release, the start.

* :meth:`PostTrainingChecks.restore_best`: the final defender is scored by one more refit and the best
  state scored by a refitted attacker (:mod:`bngp.game.selection`) is restored and evaluated.
* :meth:`PostTrainingChecks.fresh_attacker_check`: the linear and whitened attackers fitted to convergence
  (:func:`bngp.linear.fit_converged_jointly`) and a new network attacker trained against the frozen
  defender (:func:`bngp.attacks.training.train_attacker`); the strongest AUC is the defender's privacy,
  the in-game attacker's may flatter it.
* A release that is f(theta) whatever the data, under an exchangeable prior, is checked without fitting:
  every attacker's posterior is the prior (AUC 0.5, cross-entropy h(theta)).
* :meth:`PostTrainingChecks.check_against_start`: a defender started from a reference mechanism is
  delivered only where a converged linear attack reads it less than the start
  (:func:`bngp.references.linear_attack_score`).
"""

from __future__ import annotations

from functools import partial
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from bngp.attacks.network import AttackerSpec
from bngp.attacks.training import AttackerTrainingConfig, train_attacker
from bngp.metrics import release_aucs
from bngp.linear import (
    DEFAULT_VALIDATION_RELEASES,
    LearningCurve,
    LinearFit,
    default_shadow_releases,
    fit_converged_jointly,
    fit_ridge_and_whitened,
    max_shadow_releases,
)
from bngp.rng import SeedLike, resolve_seed, spawn_seeds

from .players import Players
from .selection import Refits
from bngp.references import linear_attack_score
from .step import TrainingStep

__all__ = ["PostTrainingChecks"]


class PostTrainingChecks:
    """The delivery of the trained defender and its checks (module docstring), on the :class:`Players` it
    holds, refitting the attacker with the :class:`Refits` and evaluating it with the :class:`TrainingStep`
    it is given."""

    def __init__(self, players: Players, refits: Refits, stepper: TrainingStep) -> None:
        #: the trained state the checks read (and restore a state into).
        self.players = players
        #: the refits that score the final state and fit H to a restored one.
        self.refits = refits
        #: the held-out evaluation of a restored state.
        self.stepper = stepper

    def restore_best(self) -> dict[str, Any] | None:
        """Score the final defender (one more refit), restore the best scored state and evaluate
        it on the held-out batch; None when no selection is made."""
        players = self.players
        if not self.refits.selects_defender:
            return None
        self.refits.refit_attacker()
        score, step, state = players.best
        if step != players.step:  # the final state is not the best: restore it and refit against it
            players.defender.load_state_dict(state)
            self.refits.refit_attacker(score_defender=False)
        return {"step": step, "score": score, **self.stepper.evaluate_heldout()}

    def fresh_attacker_check(self, steps: int, seed: SeedLike, progress: bool = False) -> dict:
        """Fit the linear and whitened attackers to convergence against the frozen defender, then
        train a new network attacker warm-started from the linear one's ridge map (as in
        evaluation, which fits that map once for both) for up to ``steps`` steps, stopped early
        by ``config.fresh_check.patience`` (its training curve records where); held-out AUC and
        cross-entropy over 512 fresh draws.  Every draw derives from ``seed`` (an int, None or a
        Generator, :func:`bngp.rng.resolve_seed`)."""
        players = self.players
        seed = resolve_seed(seed)
        init = "paper" if players.config.attacker.init == "paper" else "shadow-ridge"
        config = AttackerTrainingConfig(steps=steps, batch_size=players.config.batch_size, init=init,
                                        patience=players.config.fresh_check.patience)
        test_seed, linear_seed = spawn_seeds(seed, 2)
        x, b = players.release_sampler(test_seed)(512)
        if self._releases_data_independent(x):
            return self._data_independent_check(steps, config.patience)
        labels = b.cpu().numpy()
        check: dict[str, Any] = {}
        fits = self._converged_linear_fits(linear_seed)
        for name, (fit, curve) in fits.items():
            with torch.no_grad():
                scores = fit.predict(x).cpu().numpy()
            check[f"{name}_auc"] = float(release_aucs(scores, labels).mean())
            check[f"{name}_learning_curve"] = curve.to_dict()
        attacker = train_attacker(
            players.release_sampler(seed),
            AttackerSpec(players.mechanism.n_outputs, players.population.n_individuals, init=init),
            config,
            seed=seed,
            population=players.population.genotypes,
            n_members=players.n_members,
            theta=players.theta,
            progress=progress,
            description="fresh-attacker check",
            device=players.device,
            warm_fit=fits["linear"] if init == "shadow-ridge" else None,
        )
        with torch.no_grad():
            logits = attacker(x)
            probabilities = torch.sigmoid(logits)
        check.update({
            "steps": steps,
            "patience": config.patience,
            "auc": float(release_aucs(logits.cpu().numpy(), labels).mean()),
            "bgp_risk": float(F.binary_cross_entropy_with_logits(logits, b)),
            "prior_entropy": players.prior_entropy,
            "warm_start": attacker.warm_start,
            "training_curve": attacker.training_curve,
        })
        check["strongest_auc"] = max(check["auc"], check["linear_auc"], check["whitened_auc"])
        if players.dp_bounds is not None:
            check["dp_bound_violation_rate"] = self._dp_bound_violation_rate(probabilities)
        return check

    def _dp_bound_violation_rate(self, probabilities: torch.Tensor) -> float:
        """The share of an attacker's probabilities (R, K) outside the DPH^eps bounds."""
        lower, upper = self.players.dp_bounds
        return float(((probabilities < lower - 1e-6) | (probabilities > upper + 1e-6)).float().mean())

    def _releases_data_independent(self, x: torch.Tensor) -> bool:
        """Whether no attacker can do better than the prior against the frozen defender: G releases
        f(theta) whatever the data (:meth:`Defender.is_data_independent`), nothing else is released
        (no fixed composed copies), the check's releases ``x`` are identical bit for bit, and the prior
        is the same for every individual (with individual priors, ranking by the prior alone beats
        0.5 on any release)."""
        players = self.players
        theta = np.asarray(players.theta)
        return (not players.config.defender.fixed_gaussian_sigmas and players.defender.is_data_independent()
                and bool((x == x[0]).all()) and float(theta.max() - theta.min()) == 0.0)

    def _data_independent_check(self, steps: int, patience: int | None) -> dict:
        """The fresh-attacker check of a data-independent release, without fitting: the release is
        independent of b, so every attacker's posterior is the (exchangeable) prior and every
        individual ties: AUC 0.5, cross-entropy the prior entropy (no attacker is trained)."""
        players = self.players
        return {
            "data_independent": True,
            "statement": "the defender releases f(theta) whatever the data (shrinkage 1, zero output, no noise; "
                         "the check's 512 releases identical) under an exchangeable prior: every attacker's "
                         "posterior is the prior, so no attacker was fitted",
            "linear_auc": 0.5, "whitened_auc": 0.5, "steps": steps, "patience": patience, "auc": 0.5,
            "bgp_risk": players.prior_entropy, "prior_entropy": players.prior_entropy, "warm_start": None,
            "training_curve": None, "strongest_auc": 0.5,
            # an attacker at the prior (0 for the bounds of objectives.dp_bounds, which contain theta)
            **({"dp_bound_violation_rate": self._dp_bound_violation_rate(
                torch.as_tensor(np.asarray(players.theta), dtype=players.dp_bounds[0].dtype, device=players.dp_bounds[0].device)
            )} if players.dp_bounds is not None else {}),
        }

    def _converged_linear_fits(self, seed: int) -> dict[str, tuple[LinearFit, LearningCurve]]:
        """The linear and whitened attackers fitted to convergence on the same shadow releases of the
        frozen defender (simulated once from ``seed``), both from the whitened fit's decomposition
        (:func:`bngp.linear.fit_ridge_and_whitened`); the releases are freed on return: the network
        attacker trained next does not hold them (up to 20,000 x 5,000 at paper scale)."""
        players = self.players
        sampler = players.release_sampler(seed)
        start = default_shadow_releases(players.population.n_individuals, players.mechanism.n_outputs)
        maximum = max_shadow_releases(players.population.n_individuals, players.mechanism.n_outputs)
        validation = sampler(DEFAULT_VALIDATION_RELEASES)
        linear, whitened = fit_converged_jointly(partial(fit_ridge_and_whitened, prior_mean=players.theta), sampler,
                                                 start=start, maximum=maximum, validation=validation)
        return {"linear": linear, "whitened": whitened}

    def check_against_start(self, selection: dict[str, Any] | None) -> dict[str, Any] | None:
        """Never worse than the start: when the kept state is not the reference G started from, both are
        attacked by the same converged linear attack (:func:`bngp.references.linear_attack_score`, the same
        seed) and the kept state stays only if its AUC is lower; otherwise G returns to the start.  The
        outcome is recorded in ``start_record`` (``TrainingSummary.start``: ``kept``, ``reason``, the scores, how
        far the kept state had moved from the start, and, written before the selection, how far the final state
        of the training had).  Returns the selection."""
        players = self.players
        record = dict(players.start_record or {})
        n_members = int(round(players.n_members))
        trained_step = None if selection is None else selection["step"]
        record["trained_step"] = trained_step
        record["kept_state_moved"] = self.moved_from_start()
        if trained_step in (None, 0):
            record.update(kept="start", reason="the game kept its first state, the start")
            players.start_record = record
            return selection
        players.defender.eval()
        seed = players.seeds["start-check"]
        start_score = linear_attack_score(players.start, players.population, n_members, seed)
        trained_score = linear_attack_score(players.delivered_defense(), players.population, n_members, seed)
        record["start_check"] = {"seed": seed, "start": start_score.to_dict(), "trained": trained_score.to_dict()}
        if trained_score.auc < start_score.auc:
            record.update(kept="trained", reason=f"converged linear attack AUC {trained_score.auc:.4f} < start's {start_score.auc:.4f}")
            players.start_record = record
            return selection
        record.update(kept="start", reason=f"converged linear attack AUC {trained_score.auc:.4f} >= start's {start_score.auc:.4f}")
        players.start_record = record
        players.defender.load_state_dict(players.start_state)
        self.refits.refit_attacker(score_defender=False)
        return {"step": 0, "score": None, "returned_to_start": True, **self.stepper.evaluate_heldout()}

    @torch.no_grad()
    def moved_from_start(self) -> dict[str, float]:
        """How far G's current state is from its start: the mean shrinkage and noise scale at the start and now,
        mean |alpha - a| (per direction in the row space) and mean |sigma - s| (each attribute's scale), and the
        largest |weight| of G's output layer (0 at the start)."""
        players = self.players
        start = players.start
        start_shrink = getattr(start, "direction_shrink", start.shrink) if players.defender.noise_basis is not None \
            else start.shrink
        shrink = players.defender.shrink_weight.detach().double().cpu().numpy()
        scale = players.defender.marginal_noise_scales().cpu().numpy()
        output = players.defender.net[-1]
        return {"shrink_mean": [float(start_shrink.mean()), float(shrink.mean())],
                "scale_mean": [float(start.scale.mean()), float(scale.mean())],
                "shrink_mean_abs_change": float(np.abs(shrink - start_shrink).mean()),
                "scale_mean_abs_change": float(np.abs(scale - start.scale).mean()),
                "output_layer_max_abs": float(max(output.weight.abs().max(), output.bias.abs().max()))}
