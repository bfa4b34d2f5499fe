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
from .players import held_fixed
from .selection import Refits

__all__ = ["TrainingStep"]


class TrainingStep(Refits):
    """The players with one training step and the held-out evaluation (module docstring)."""

    def training_step(self) -> dict[str, float]:
        """``AttackerSettings.steps`` attacker updates, then one defender update; returns the losses."""
        if self.config.attacker.refit_every and self.step % self.config.attacker.refit_every == 0:
            self.refit_attacker()
        self.defender.train()
        self.attacker.train()
        attacker_loss = torch.tensor(0.0)
        with self.timer("attacker steps"):
            for _ in range(self.config.attacker.steps):
                b, r = self._draw(self.config.batch_size)
                with torch.no_grad():
                    x, _ = self._attacker_release(b, r)
                individuals = self._draw_individuals()
                targets = b if individuals is None else b[:, individuals]
                attacker_loss = F.binary_cross_entropy_with_logits(self._attack(x, individuals), targets)
                self.opt_a.zero_grad(set_to_none=True)
                attacker_loss.backward()
                self.opt_a.step()
        with self.timer("defender step"):
            return self._defender_step(attacker_loss)

    def _defender_step(self, attacker_loss: torch.Tensor) -> dict[str, float]:
        """One defender update against the current attacker; returns the losses."""
        b, r = self._draw(self.config.batch_size)
        x, statistic = self._attacker_release(b, r)  # the whole release when there is an opponent (no composition)
        individuals = self._draw_individuals()
        # H held fixed: the backward computes the gradients through H for the defender only,
        # not H's own (which the next attacker update would discard)
        with held_fixed(self.attacker):
            logits = self._attack(x, individuals)
            if self.opponent is None:
                leakage = self._leakage(logits, b, individuals)
            else:
                leakage = self._opponent_loss(b, x)
            weighted, plain = self._utility(x, statistic)
            defender_loss = objectives.defender_loss(self.config.objective, self.multiplier, leakage, weighted, plain)
            violation = torch.zeros(())
            if self.dp_bounds is not None:
                violation = self._dp_violation(torch.sigmoid(logits), individuals)
                defender_loss = defender_loss + self.config.objective.dp_penalty * violation
            self.opt_d.zero_grad(set_to_none=True)
            defender_loss.backward()
        self.opt_d.step()
        self.defender.project_()
        if self._budget_surface is not None:
            self._budget_surface.project(self.defender)
        self.multiplier = objectives.updated_multiplier(self.config.objective, self.multiplier, leakage.item(), plain.item())
        self.step += 1
        if self.step % self.config.decay_every == 0:
            self.sched_d.step()
            self.sched_a.step()
        return {
            "attacker_loss": attacker_loss.item(),
            "defender_loss": defender_loss.item(),
            "privacy_loss": leakage.item(),
            "utility_loss": plain.item(),
            "weighted_utility_loss": weighted.item(),
            "dp_violation": violation.item(),
            "multiplier": self.multiplier,
        }

    @torch.no_grad()
    def evaluate_heldout(self) -> dict[str, float]:
        """The current attacker on the fixed held-out batch: AUC, cross-entropy, collapse flag."""
        self.defender.eval()
        self.attacker.eval()
        x, statistic = self._attacker_release(self._eval_b, self._eval_r, torch_generator(self.seeds["evaluation-noise"]))
        logits = self._attack(x)
        probabilities = torch.sigmoid(logits)
        cross_entropy = float(F.binary_cross_entropy_with_logits(logits, self._eval_b))
        _, plain = self._utility(x, statistic)
        spread = float(probabilities.std(dim=0).mean())
        at_prior = spread < 1e-3 and abs(self.prior_entropy - cross_entropy) < 1e-3
        self.defender.train()
        self.attacker.train()
        extra = {} if self.dp_bounds is None else {"heldout_dp_violation": float(self._dp_violation(probabilities))}
        alpha = self.defender.shrinkage()
        if alpha is not None:
            extra["shrinkage_mean"] = float(alpha.mean())
        if self.opponent is not None:
            extra["heldout_opponent_tpr"] = float(self._opponent_loss(self._eval_b, x))
        return {
            **extra,
            "heldout_auc": auc(probabilities.cpu().numpy(), self._eval_b.cpu().numpy()),
            "heldout_cross_entropy": cross_entropy,
            "heldout_privacy_loss": self.prior_entropy - cross_entropy,
            "heldout_utility_loss": float(plain),
            "attacker_output_spread": spread,
            "attacker_at_prior": float(at_prior),
        }
