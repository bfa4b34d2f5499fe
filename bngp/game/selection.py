"""Closed-form refits of the in-game attacker and the selection of the defender state to deliver.

Every ``AttackerSettings.refit_every`` defender steps the in-game attacker's linear part is refitted in
closed form on releases of the current defender (eval mode): for the K-output H (App. L.8) its head is the
ridge map from releases to memberships (:func:`bngp.linear.fit_ridge`), recalibrated, or the population
inversion when that validates better; for H(x, d_k) its per-SNV weights and their logistic calibration
(:mod:`bngp.attacks.per_individual_network`).  Each refit then scores the current defender against the
refitted attacker by the defender's own objective (:func:`bngp.game.objectives.selection_score`, section
3.3) on ``REFIT_VALIDATION_DRAWS`` held-out draws; the best state is delivered
(``SelectionSettings.enabled``), and ``SelectionSettings.patience`` stops training once it has not been
bettered (:func:`bngp.game.early_stop.patience_stalled`).
"""

from __future__ import annotations

import copy
from typing import Any

import torch

from bngp.attacks.per_individual_network import REFIT_RELEASES, PopulationBoundAttacker
from bngp.attacks.training import prefer_population_inversion
from bngp.linear import default_shadow_releases, fit_ridge

from . import objectives
from .config import REFIT_VALIDATION_DRAWS
from .early_stop import patience_stalled
from .players import Players

__all__ = ["Refits"]

#: releases a refit draws at a time (:meth:`Refits._attacker_releases`).
_REFIT_BLOCK = 2000


class Refits(Players):
    """The players with the attacker's closed-form refits and the defender selection (module docstring)."""

    @torch.no_grad()
    def refit_attacker(self, score_defender: bool = True) -> None:
        """Refit the in-game attacker's head on releases of the current defender: ridge regression,
        or the block-calibrated population inversion when it validates better (as a fresh attacker does);
        for the per-individual attacker, its linear part; with ``score_defender``, also score the
        current defender against it (``SelectionSettings.enabled``).  The plain paper network
        (init "paper") has no head and is not refitted."""
        per_individual = isinstance(self.attacker, PopulationBoundAttacker)
        if not per_individual and self.attacker.head is None:
            return
        # as many shadow releases as for the whole release (the pooled input's map is the whole map
        # restricted to the fixed copies' sufficient statistic: no weaker on the same releases)
        n = self.config.attacker.refit_releases or (
            REFIT_RELEASES if per_individual
            else default_shadow_releases(self.population.n_individuals, self.mechanism.n_outputs)
        )
        with self.timer("refit: releases"):
            x, b, (validation_x, validation_statistic, validation_b) = self._refit_releases(n)
        with self.timer("refit: fit"):
            if per_individual:
                # No K-output head here: the ridge map from x to the K memberships, its separate
                # recalibration (calibrate_head) and the population-inversion head
                # (prefer_population_inversion) do not apply to H(x, d_k).  Its closed-form part,
                # per-SNV weights and their logistic calibration (which is the recalibration), is
                # fitted instead; like the head's refit, it zeroes the output MLP's last layer.
                self.attacker.refit(x, b)
            else:
                self._refit_population_attacker(x, b, validation_x, validation_b)
        for parameter in self.attacker.refit_parameters():
            self.opt_a.state.pop(parameter, None)
        if score_defender and self.selects_defender:
            with self.timer("selection"):
                self._consider_defender(validation_x, validation_statistic, validation_b)

    @torch.no_grad()
    def _refit_releases(self, n: int) -> tuple[torch.Tensor, torch.Tensor, tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
        """A refit's draws from the current defender (eval mode): n releases as the in-game attacker
        reads them and their memberships, then (releases, f(D), memberships) of
        ``REFIT_VALIDATION_DRAWS`` validation draws."""
        b, r = self._draw(n)
        validation_b, validation_r = self._draw(REFIT_VALIDATION_DRAWS)
        self.defender.eval()
        x = self._attacker_releases(b, r)
        validation_x, validation_statistic = self._attacker_release(validation_b, validation_r)
        self.defender.train()
        return x, b, (validation_x, validation_statistic, validation_b)

    def _attacker_releases(self, b: torch.Tensor, r: torch.Tensor) -> torch.Tensor:
        """The releases of (b, r) as the in-game attacker reads them (:meth:`_attacker_release`), drawn
        by blocks of ``_REFIT_BLOCK`` rows, each written in place into one tensor.  With pooled copies
        only the pooled releases are formed (a whole composed refit set is 5,368 x 25,000 at paper
        scale)."""
        x = torch.empty((b.shape[0], self.attacker_spec.n_outputs), device=self.device)  # H's input width
        for start in range(0, b.shape[0], _REFIT_BLOCK):
            stop = min(start + _REFIT_BLOCK, b.shape[0])
            self._attacker_release(b[start:stop], r[start:stop], out=x[start:stop])
        return x

    def _refit_population_attacker(
        self, x: torch.Tensor, b: torch.Tensor, validation_x: torch.Tensor, validation_b: torch.Tensor
    ) -> None:
        """The K-output attacker's head on its input x: the ridge map, recalibrated, or the population inversion."""
        self.attacker.initialise_from_ridge(fit_ridge(x, b, (validation_x, validation_b), prior_mean=self.theta), self.theta)
        self.attacker.calibrate_head(validation_x, validation_b)
        prefer_population_inversion(
            self.attacker, self.population.genotypes, self.n_members, self.theta, x, b, validation_x, validation_b
        )

    @property
    def selects_defender(self) -> bool:
        """Whether the best defender state is kept (see ``SelectionSettings.enabled``)."""
        return self.config.selection.enabled and bool(self.config.attacker.refit_every) and self.opponent is None

    @torch.no_grad()
    def _consider_defender(self, x: torch.Tensor, statistic: torch.Tensor, b: torch.Tensor) -> None:
        """Score the current defender against the just-refitted attacker head on held-out draws
        by the defender's objective; keep its state if it is the best so far.

        Under a budget objective only states that meet the budget on these draws compete (by
        the objective they minimise); while none has, the one that misses it by least is kept."""
        self.attacker.eval()
        logits = self._attack(x)
        self.attacker.train()
        weighted, plain = self._utility(x, statistic)
        leakage = self._leakage(logits, b)
        score = objectives.selection_score(self.config.objective, float(leakage), float(weighted), float(plain))
        if self.dp_bounds is not None:
            score = score + self.config.objective.dp_penalty * float(self._dp_violation(torch.sigmoid(logits)))
        self.selections.append({"step": self.step, "score": float(score), "privacy_loss": float(leakage),
                                "utility_loss": float(plain)})
        if self.best is None or float(score) < self.best[0]:
            self.best = (float(score), self.step, copy.deepcopy(self.defender.state_dict()))

    def _selection_stalled(self) -> bool:
        """Whether ``config.selection.patience`` stops training before this step: at a refit step
        s_best + P * ``AttackerSettings.refit_every``, s_best the kept state's step (the refit it would make
        now is the run's final scoring instead, :meth:`_restore_best`)."""
        patience, every = self.config.selection.patience, self.config.attacker.refit_every
        if self.stopped_at is not None:  # a resumed run that had stopped
            return True
        if patience is None or not self.selects_defender or self.best is None:
            return False
        return patience_stalled(self.step, self.best[1], patience, every)

    def _restore_best(self) -> dict[str, Any] | None:
        """Score the final defender (one more refit), restore the best scored state and evaluate
        it on the held-out batch; None when no selection is made."""
        if not self.selects_defender:
            return None
        self.refit_attacker()
        score, step, state = self.best
        if step != self.step:  # the final state is not the best: restore it and refit against it
            self.defender.load_state_dict(state)
            self.refit_attacker(score_defender=False)
        return {"step": step, "score": score, **self.evaluate_heldout()}
