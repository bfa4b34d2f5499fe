"""Attacks on composed releases (arXiv:2410.07414, section 4.4 / Theorem 5 and App. L.6).

A defense with
``composition`` c > 1 releases c |Q| outputs, c copies of f(D) each with its own noise.  With
f(D) = b Z / sum(b) (Z the K x |Q| genotypes), the concatenation is

    F(D) = [f(D), ..., f(D)] = b [Z, ..., Z] / sum(b) = f_{Z^(c)}(D),

the allele frequencies of the same members on the tiled attributes Z^(c) = [Z, ..., Z]
(K x c |Q|), so x = clip(F(D) + xi, 0, 1) *is* a release of allele frequencies on c |Q|
attributes.  :class:`TiledAttack` therefore runs any attack on that view: it is fitted on the
knowledge with the population, the reference panel and p_bar tiled (the simulator already draws
c |Q|-wide releases, and a noise law, where the defense has one, is that of the whole c |Q| noise
vector), and scores the tiled targets [d, ..., d] against the whole release.  The copies of an
attribute are perfectly linked, which attacks assuming independent SNVs (score, Homer, the
LRTs) do not model; their scores stay valid test statistics (the bounds hold for any score
fitted independently of the audited releases), possibly weaker than an attack that models the
repeats.  The Bayesian attacker reads a release of any width natively, with one inversion
block per copy (:func:`bngp.attacks.network.block_inversion_head`), and so do the linear
attackers, which pool the copies first (:mod:`bngp.attacks.pooling`); they are not tiled.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from .base import Attack, AttackKnowledge
from .inputs import check_targets
from bngp.validation import check_positive_int

__all__ = ["TiledAttack", "for_composition"]


def _tile(array: np.ndarray | None, composition: int) -> np.ndarray | None:
    """[a, ..., a] along the last axis (``composition`` copies), None kept."""
    if array is None:
        return None
    values = np.asarray(array)
    return np.tile(values, (1,) * (values.ndim - 1) + (composition,))


class TiledAttack(Attack):
    """An attack on a release of c copies of f(D), run on the tiled attributes (module docstring).

    Args:
        attack: the unfitted attack to run on the view.
        composition: c >= 2, the copies of f(D) in the release.
    """

    def __init__(self, attack: Attack, composition: int) -> None:
        self.inner = attack
        self.composition = check_positive_int("composition", composition, minimum=2)
        self.name = attack.name
        self.requires = attack.requires
        self.knowledge_statement = attack.knowledge_statement
        self.log_odds = attack.log_odds
        self.n_attributes_: int | None = None

    @property
    def orientation_(self) -> int:
        return self.inner.orientation_

    @property
    def threshold_(self) -> float | None:
        return self.inner.threshold_

    @property
    def orientation_note_(self) -> str | None:
        return self.inner.orientation_note_

    @property
    def shadow_auc_(self) -> float | None:
        return self.inner.shadow_auc_

    def set_device(self, device) -> "TiledAttack":
        """The inner attack's device (:meth:`bngp.attacks.base.Attack.set_device`)."""
        self.inner.set_device(device)
        return self

    def tiled_knowledge(self, knowledge: AttackKnowledge) -> AttackKnowledge:
        """``knowledge`` on the tiled attributes: population, reference panel and p_bar tiled."""
        c = self.composition
        return replace(
            knowledge,
            reference_frequencies=_tile(knowledge.reference_frequencies, c),
            reference_genotypes=_tile(knowledge.reference_genotypes, c),
            population=_tile(knowledge.population, c),
            composition=1,
            extras=dict(knowledge.extras),
        )

    def _fit(self, knowledge: AttackKnowledge, seed: int) -> None:
        if knowledge.population is not None:
            self.n_attributes_ = int(np.shape(knowledge.population)[1])
        elif knowledge.reference_frequencies is not None:
            self.n_attributes_ = int(np.size(knowledge.reference_frequencies))
        self.inner.fit(self.tiled_knowledge(knowledge), seed=seed)

    def score(self, targets: np.ndarray, releases: np.ndarray) -> np.ndarray:
        """Scores of [d, ..., d] on the whole release, shape (n_releases, n_targets)."""
        targets = check_targets(targets, self.n_attributes_)
        return self.inner.score(_tile(targets, self.composition), releases)

    def describe(self) -> dict:
        return {
            **self.inner.describe(),
            "release_view": (
                f"the release of {self.composition} copies of f(D) scored as allele frequencies on the "
                f"{self.composition}-fold tiled attributes [Z, ..., Z] (targets, population and reference panel "
                "tiled alike)"
            ),
        }


def for_composition(attack: Attack, composition: int) -> Attack:
    """``attack`` itself for a single release (``composition`` = 1) or an attack that reads
    composed releases natively (``reads_composed_release``); otherwise its :class:`TiledAttack`."""
    composition = check_positive_int("composition", composition)
    if composition == 1 or attack.reads_composed_release or isinstance(attack, TiledAttack):
        return attack
    return TiledAttack(attack, composition)
