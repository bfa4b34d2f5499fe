"""One step of the BNGP game and the held-out evaluation (arXiv:2410.07414, section 3, App. L.8).

A step is ``AttackerSettings.steps`` attacker updates, each minimising the cross-entropy CEL(H(x), b) over
a batch of draws b ~ sigma, r ~ U[0, 1]^q (its minimiser is the posterior, Lemma 3), then one defender
update on the objective of section 3.3 (:func:`bngp.game.objectives.defender_loss`) with H held fixed,
the BGBP penalty (section 4.3) when ``ObjectiveSettings.dp_epsilon`` is set, and one dual-ascent step of
a budget's multiplier.  A refit (:mod:`bngp.game.selection`) precedes every ``refit_every``-th step.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from bngp.metrics import auc
from bngp.rng import torch_generator

from . import objectives
from .players import Players, held_fixed
from .selection import Refits

__all__ = ["TrainingStep"]


class TrainingStep:
    """One training step and the held-out evaluation (module docstring), on the :class:`Players` it holds,
    with the :class:`Refits` that precede every ``refit_every``-th step."""

    def __init__(self, players: Players, refits: Refits) -> None:
        #: the state a step updates.
        self.players = players
        #: the closed-form refits a step starts with when due.
        self.refits = refits

    def training_step(self) -> dict[str, float]:
        """``AttackerSettings.steps`` attacker updates, then one defender update; returns the losses."""
        players = self.players
        config = players.config
        if config.attacker.refit_every and players.step % config.attacker.refit_every == 0:
            self.refits.refit_attacker()
        players.defender.train()
        players.attacker.train()
        attacker_loss = torch.tensor(0.0)
        with players.timer("attacker steps"):
            for _ in range(config.attacker.steps):
                b, r = players.draw(config.batch_size)
                x = players.attacker_draws(b, r)
                individuals = players.draw_individuals()
                targets = b if individuals is None else b[:, individuals]
                attacker_loss = F.binary_cross_entropy_with_logits(players.attack(x, individuals), targets)
                players.opt_a.zero_grad(set_to_none=True)
                attacker_loss.backward()
                players.opt_a.step()
        with players.timer("defender step"):
            return self._defender_step(attacker_loss)

    def _defender_step(self, attacker_loss: torch.Tensor) -> dict[str, float]:
        """One defender update against the current attacker; returns the losses."""
        players = self.players
        config = players.config
        b, r = players.draw(config.batch_size)
        # what H reads, and the release (the whole release when there is an opponent: no composition)
        read, x, statistic = players.defender_release(b, r)
        individuals = players.draw_individuals()
        # H held fixed: the backward computes the gradients through H for the defender only,
        # not H's own (which the next attacker update would discard)
        with held_fixed(players.attacker):
            logits = players.attack(read, individuals)
            if players.opponent is None:
                leakage = players.leakage(logits, b, individuals)
            else:
                leakage = players.opponent_loss(b, x)
            weighted, plain = players.utility(x, statistic)
            defender_loss = objectives.defender_loss(config.objective, players.multiplier, leakage, weighted, plain)
            violation = torch.zeros(())
            if players.dp_bounds is not None:
                violation = players.dp_violation(torch.sigmoid(logits), individuals)
                defender_loss = defender_loss + config.objective.dp_penalty * violation
            players.opt_d.zero_grad(set_to_none=True)
            defender_loss.backward()
        players.opt_d.step()
        players.defender.project_()
        if players.budget_surface is not None:
            players.budget_surface.project(players.defender)
        players.multiplier = objectives.updated_multiplier(config.objective, players.multiplier, leakage.item(), plain.item())
        players.step += 1
        if players.step % config.decay_every == 0:
            players.sched_d.step()
            players.sched_a.step()
        return {
            "attacker_loss": attacker_loss.item(),
            "defender_loss": defender_loss.item(),
            "privacy_loss": leakage.item(),
            "utility_loss": plain.item(),
            "weighted_utility_loss": weighted.item(),
            "dp_violation": violation.item(),
            "multiplier": players.multiplier,
        }

    @torch.no_grad()
    def evaluate_heldout(self) -> dict[str, float]:
        """The current attacker on the fixed held-out batch: AUC, cross-entropy, collapse flag."""
        players = self.players
        players.defender.eval()
        players.attacker.eval()
        x, statistic = players.attacker_release(players.eval_b, players.eval_r, torch_generator(players.seeds["evaluation-noise"]))
        logits = players.attack(x)
        probabilities = torch.sigmoid(logits)
        cross_entropy = float(F.binary_cross_entropy_with_logits(logits, players.eval_b))
        _, plain = players.utility(x, statistic)
        spread = float(probabilities.std(dim=0).mean())
        at_prior = spread < 1e-3 and abs(players.prior_entropy - cross_entropy) < 1e-3
        players.defender.train()
        players.attacker.train()
        extra = {} if players.dp_bounds is None else {"heldout_dp_violation": float(players.dp_violation(probabilities))}
        alpha = players.defender.shrinkage()
        if alpha is not None:
            extra["shrinkage_mean"] = float(alpha.mean())
        if players.opponent is not None:
            extra["heldout_opponent_tpr"] = float(players.opponent_loss(players.eval_b, x))
        return {
            **extra,
            "heldout_auc": auc(probabilities.cpu().numpy(), players.eval_b.cpu().numpy()),
            "heldout_cross_entropy": cross_entropy,
            "heldout_privacy_loss": players.prior_entropy - cross_entropy,
            "heldout_utility_loss": float(plain),
            "attacker_output_spread": spread,
            "attacker_at_prior": float(at_prior),
        }
