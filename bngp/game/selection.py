"""Closed-form refits of the in-game attacker and the selection of the defender state to deliver.

Every ``AttackerSettings.refit_every`` defender steps the in-game attacker's linear part is refitted in
closed form on releases of the current defender (eval mode): for the K-output H (App. L.8) its head is the
ridge map from what H reads of the releases to memberships (:func:`bngp.linear.fit_ridge`; for a defender that
releases only in the candidates' row space, ``DefenderSpec.row_space_output``, the row-space coordinates,
:meth:`bngp.attacks.network.Attacker.read_coordinates`), recalibrated, or the population inversion when
that validates better; for H(x, d_k) its per-SNV weights and their logistic calibration
(:mod:`bngp.attacks.per_individual_network`).  Each refit then scores the current defender against the
refitted attacker by the defender's own objective (:func:`bngp.game.objectives.selection_score`, section
3.3) on ``REFIT_VALIDATION_DRAWS`` held-out draws; the best state is delivered
(``SelectionSettings.enabled``), and ``SelectionSettings.patience`` stops training once it has not been
bettered (:func:`bngp.game.early_stop.patience_stalled`).  The kept state is restored after training by
:meth:`bngp.game.checks.PostTrainingChecks.restore_best`.
"""

from __future__ import annotations

import copy

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


class Refits:
    """The attacker's closed-form refits and the defender selection, on the :class:`Players` it holds
    (module docstring); they read and update its state (H, its optimiser, ``best``, ``selections``)."""

    def __init__(self, players: Players) -> None:
        #: the state the refits act on.
        self.players = players

    @torch.no_grad()
    def refit_attacker(self, score_defender: bool = True) -> None:
        """Refit the in-game attacker's head on releases of the current defender: ridge regression,
        or the block-calibrated population inversion when it validates better (as a fresh attacker does);
        for the per-individual attacker, its linear part; with ``score_defender``, also score the
        current defender against it (``SelectionSettings.enabled``).  The plain paper network
        (init "paper") has no head and is not refitted."""
        players = self.players
        per_individual = isinstance(players.attacker, PopulationBoundAttacker)
        if not per_individual and players.attacker.head is None:
            return
        # as many shadow releases as for the whole release (the pooled input's map is the whole map
        # restricted to the fixed copies' sufficient statistic: no weaker on the same releases)
        n = players.config.attacker.refit_releases or (
            REFIT_RELEASES if per_individual
            else default_shadow_releases(players.population.n_individuals, players.mechanism.n_outputs)
        )
        with players.timer("refit: releases"):
            x, b, (validation_x, validation_statistic, validation_b) = self._refit_releases(n)
        with players.timer("refit: fit"):
            if per_individual:
                # No K-output head here: the ridge map from x to the K memberships, its separate
                # recalibration (calibrate_head) and the population-inversion head
                # (prefer_population_inversion) do not apply to H(x, d_k).  Its closed-form part,
                # per-SNV weights and their logistic calibration (which is the recalibration), is
                # fitted instead; like the head's refit, it zeroes the output MLP's last layer.
                players.attacker.refit(x, b)
            else:
                self._refit_population_attacker(x, b, validation_x, validation_b)
        for parameter in players.attacker.refit_parameters():
            players.opt_a.state.pop(parameter, None)
        if score_defender and self.selects_defender:
            with players.timer("selection"):
                self._consider_defender(validation_x, validation_statistic, validation_b)

    @torch.no_grad()
    def _refit_releases(self, n: int) -> tuple[torch.Tensor, torch.Tensor, tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
        """A refit's draws from the current defender (eval mode): n releases as the in-game attacker
        reads them and their memberships, then (releases, f(D), memberships) of
        ``REFIT_VALIDATION_DRAWS`` validation draws."""
        players = self.players
        b, r = players.draw(n)
        validation_b, validation_r = players.draw(REFIT_VALIDATION_DRAWS)
        players.defender.eval()
        x = self._attacker_releases(b, r)
        validation_x, validation_statistic = players.attacker_release(validation_b, validation_r)
        players.defender.train()
        return x, b, (validation_x, validation_statistic, validation_b)

    def _attacker_releases(self, b: torch.Tensor, r: torch.Tensor) -> torch.Tensor:
        """The releases of (b, r) as the in-game attacker reads them (:meth:`Players.attacker_draws`), drawn
        by blocks of ``_REFIT_BLOCK`` rows, each written in place into one tensor.  With pooled copies
        only the pooled releases are formed (a whole composed refit set is 5,368 x 25,000 at paper
        scale); an attacker reading the row-space coordinates gets them formed directly."""
        players = self.players
        x = torch.empty((b.shape[0], players.attacker_spec.n_outputs if players.reads_coordinates else players.read_width),
                        device=players.device)
        for start in range(0, b.shape[0], _REFIT_BLOCK):
            stop = min(start + _REFIT_BLOCK, b.shape[0])
            players.attacker_draws(b[start:stop], r[start:stop], out=x[start:stop])
        return x

    def _refit_population_attacker(
        self, x: torch.Tensor, b: torch.Tensor, validation_x: torch.Tensor, validation_b: torch.Tensor
    ) -> None:
        """The K-output attacker's head on its input x: the ridge map, recalibrated, or the population inversion."""
        players = self.players
        read = players.attacker.read  # the releases, or their row-space coordinates (float32, as G's basis is)
        fit = fit_ridge(read(x), b, (read(validation_x), validation_b), prior_mean=players.theta)
        players.attacker.initialise_from_ridge(fit, players.theta)
        players.attacker.calibrate_head(validation_x, validation_b)
        prefer_population_inversion(
            players.attacker, players.population.genotypes, players.n_members, players.theta, x, b, validation_x, validation_b
        )

    @property
    def selects_defender(self) -> bool:
        """Whether the best defender state is kept (see ``SelectionSettings.enabled``)."""
        config = self.players.config
        return config.selection.enabled and bool(config.attacker.refit_every) and self.players.opponent is None

    @torch.no_grad()
    def _consider_defender(self, x: torch.Tensor, statistic: torch.Tensor, b: torch.Tensor) -> None:
        """Score the current defender against the just-refitted attacker head on held-out draws
        by the defender's objective; keep its state if it is the best so far.

        Under a budget objective only states that meet the budget on these draws compete (by
        the objective they minimise); while none has, the one that misses it by least is kept."""
        players = self.players
        players.attacker.eval()
        logits = players.attack(x)
        players.attacker.train()
        weighted, plain = players.utility(x, statistic)
        leakage = players.leakage(logits, b)
        score = objectives.selection_score(players.config.objective, float(leakage), float(weighted), float(plain))
        if players.dp_bounds is not None:
            score = score + players.config.objective.dp_penalty * float(players.dp_violation(torch.sigmoid(logits)))
        players.selections.append({"step": players.step, "score": float(score), "privacy_loss": float(leakage),
                                   "utility_loss": float(plain)})
        if players.best is None or float(score) < players.best[0]:
            players.best = (float(score), players.step, copy.deepcopy(players.defender.state_dict()))

    def selection_stalled(self) -> bool:
        """Whether ``config.selection.patience`` stops training before this step: at a refit step
        s_best + P * ``AttackerSettings.refit_every``, s_best the kept state's step (the refit it would make
        now is the run's final scoring instead, :meth:`bngp.game.checks.PostTrainingChecks.restore_best`)."""
        players = self.players
        patience, every = players.config.selection.patience, players.config.attacker.refit_every
        if players.stopped_at is not None:  # a resumed run that had stopped
            return True
        if patience is None or not self.selects_defender or players.best is None:
            return False
        return patience_stalled(players.step, players.best[1], patience, every)
