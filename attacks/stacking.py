"""An attacker that pools the evidence of several attacks (stacking on simulated releases).

Each base attack a = 1..m scores every individual against a release, s_a(d_k, x).  On
``n_stacking_releases`` releases the attacker simulates against the defense (never the
evaluation's), the scores are centred within each release by their mean over the known
population (a per-release AUC does not see a shift common to the release, and a target's
score does not depend on which other targets are scored with it) and divided by their
spread, z_a = (s_a - mean_{k in population} s_a) / sd_a,
and the pooled logistic regression P(b_k = 1 | x) = sigmoid(sum_a w_a z_a + c) is fitted by
cross-entropy over all (release, individual) pairs (Wolpert 1992, stacked generalisation).
The score is sum_a w_a z_a + c: no base attack's direction is assumed, and the combination can
only be weaker than its best base by the estimation error of m + 1 weights.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

import numpy as np
import torch

from .composed import for_composition
from .base import Attack, AttackKnowledge
from .inputs import check_binary_panel
from .registry import attack_requirements, get_attack, register_attack
from .shadow import ShadowData, simulated_shadow
from bngp.errors import InputError
from bngp.linear import logistic_calibration
from bngp.rng import spawn_seeds
from bngp.validation import check_positive_int

__all__ = ["StackedAttack", "DEFAULT_STACKING_BASE"]

#: base attacks the stacked attacker fits itself when they are not handed to it already fitted.
DEFAULT_STACKING_BASE = ("linear", "whitened", "reconstruction", "score")


@register_attack("stacked")
class StackedAttack(Attack):
    """Logistic stacking of base attacks on releases simulated against the defense.

    Args:
        base: attacks to fit when they are not supplied by :meth:`use_fitted` (those whose
            knowledge is missing are left out).
        n_stacking_releases: simulated releases on which the combination is fitted.
    """

    requires: ClassVar[frozenset[str]] = frozenset({"population", "simulate"})
    log_odds: ClassVar[bool] = True
    #: it pools the scores of attacks that each read the composed release their own way.
    reads_composed_release: ClassVar[bool] = True
    #: fitted last in an evaluation, on every other fitted attack and its scores (:meth:`use_fitted`).
    pools_other_attacks: ClassVar[bool] = True
    knowledge_statement: ClassVar[str] = (
        "Knows what its base attacks know and can simulate releases against the defense: combines the base "
        "attacks' scores (centred per release) by a logistic regression fitted on simulated releases; scores "
        "are log-odds, no threshold or flip chosen."
    )

    def __init__(self, base: tuple[str, ...] = DEFAULT_STACKING_BASE, n_stacking_releases: int = 200) -> None:
        self.base = tuple(base)
        self.n_stacking_releases = check_positive_int("n_stacking_releases", n_stacking_releases, minimum=2)
        self._supplied: dict[str, Attack] = {}
        self._supplied_scores: dict[str, np.ndarray] = {}
        self._supplied_stacking: ShadowData | None = None
        self._device = None
        self.bases_: dict[str, Attack] = {}
        self.weights_: np.ndarray | None = None
        self.spread_: np.ndarray | None = None
        self.population_: np.ndarray | None = None

    def use_fitted(self, attacks: dict[str, Attack], stacking_scores: Mapping[str, np.ndarray] | None = None,
                   stacking: ShadowData | None = None) -> "StackedAttack":
        """Pool these already fitted attacks (as well as the base ones); returns self.
        ``stacking``: the stacking releases of the next :meth:`fit` (:meth:`stacking_releases` of its
        knowledge and seed), already drawn; ``stacking_scores``: what some of the attacks already
        scored the population on them, (``n_stacking_releases``, K) each, used as they are instead of
        scoring again (the evaluation draws them once and scores them in its helper process,
        :mod:`bngp.workers`)."""
        self._supplied = {name: attack for name, attack in attacks.items() if not isinstance(attack, StackedAttack)}
        self._supplied_scores = dict(stacking_scores or {})
        self._supplied_stacking = stacking
        return self

    def stacking_releases(self, knowledge: AttackKnowledge, seed: int) -> ShadowData:
        """The releases simulated against the defense on which :meth:`fit` with ``seed`` fits the
        combination (labelled on the known population)."""
        return simulated_shadow(knowledge, self.n_stacking_releases, spawn_seeds(seed, 1)[0])

    def set_device(self, device) -> "StackedAttack":
        """The device of the base attacks it fits itself (:meth:`bngp.attacks.base.Attack.set_device`)."""
        self._device = device
        return self

    def _fit(self, knowledge: AttackKnowledge, seed: int) -> None:
        check_binary_panel("population", knowledge.population)
        available = knowledge.available()
        bases = dict(self._supplied)
        missing = [name for name in self.base if name not in bases and attack_requirements(name) <= available]
        for name, attack_seed in zip(missing, spawn_seeds(seed, len(missing) + 1)[1:]):
            base = for_composition(get_attack(name), knowledge.composition)
            if self._device is not None:
                base.set_device(self._device)
            bases[name] = base.fit(knowledge, seed=attack_seed)
        if not bases:
            raise InputError("the stacked attack has no base attack whose knowledge is available.")
        stacking, self._supplied_stacking = self._supplied_stacking, None
        if stacking is None:
            stacking = self.stacking_releases(knowledge, seed)
        self.bases_ = bases
        self.population_ = np.asarray(knowledge.population)
        known, self._supplied_scores = self._supplied_scores, {}
        raw = self._centred(stacking.targets, stacking.releases, known)
        self.spread_ = raw.reshape(-1, raw.shape[-1]).std(axis=0) + 1e-300
        features = torch.from_numpy((raw / self.spread_).reshape(-1, raw.shape[-1]))
        self.weights_ = logistic_calibration(features, torch.from_numpy(stacking.labels.reshape(-1).astype(np.float64))).numpy()

    def _base_scores(self, targets: np.ndarray, releases: np.ndarray, known: Mapping[str, np.ndarray] | None = None) -> np.ndarray:
        known = known or {}
        expected = (np.atleast_2d(releases).shape[0], targets.shape[0])
        for name, scores in known.items():
            if name in self.bases_ and np.shape(scores) != expected:
                raise InputError(f"`base_scores[{name!r}]` must have shape {expected} (releases, targets), got {np.shape(scores)}.")
        return np.stack([np.asarray(known[name]) if name in known else attack.score(targets, releases)
                         for name, attack in self.bases_.items()], axis=-1)

    def _centred(self, targets: np.ndarray, releases: np.ndarray, known: Mapping[str, np.ndarray] | None = None) -> np.ndarray:
        """(R, n, m) base scores, each centred by its mean over the known population on the same
        release, so a target's score does not depend on which other targets are scored with it;
        ``known``: base scores of ``targets`` already computed on these releases."""
        same = targets.shape == self.population_.shape and np.array_equal(targets, self.population_)
        population = self._base_scores(self.population_, releases, known if same else None)
        scores = population if same else self._base_scores(targets, releases, known)
        return scores - population.mean(axis=1, keepdims=True)

    def score(self, targets: np.ndarray, releases: np.ndarray, *,
              base_scores: Mapping[str, np.ndarray] | None = None) -> np.ndarray:
        """Pooled log-odds of ``targets`` on ``releases``.  ``base_scores``: what some base attacks
        already scored ``targets`` on these releases (an evaluation's scores, (R, n) each), used as
        they are instead of scoring again; the others are scored here."""
        if self.weights_ is None:
            raise InputError("the stacked attack must be fitted before scoring (call fit).")
        features = self._centred(targets, np.atleast_2d(releases), base_scores) / self.spread_
        return features @ self.weights_[:-1] + self.weights_[-1]

    def describe(self) -> dict:
        record = super().describe()
        if self.weights_ is not None:
            record["weights"] = {name: float(w) for name, w in zip(self.bases_, self.weights_[:-1] / self.spread_)}
        return record
