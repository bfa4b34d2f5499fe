"""The attack interface and the record of what an attacker knows.

Conventions (shared/reference/attacks.md): member = 1; an attack returns one real score per
target per release, higher = more likely member.  An attack is set up (:meth:`Attack.fit`)
only with the knowledge it is defined to have, recorded in :class:`AttackKnowledge`, and
never sees evaluation labels.  Scoring is vectorised over targets x releases.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from bngp.errors import InputError
from bngp.noise_law import NoiseLaw

__all__ = ["AttackKnowledge", "Attack", "ReleaseSimulator", "NoiseLaw"]

#: simulate(n_releases, seed) -> (releases (R, Q), memberships (R, K)): shadow releases the
#: attacker generates itself against the (known) defense on the known population.
ReleaseSimulator = Callable[[int, int], tuple[np.ndarray, np.ndarray]]


@dataclass(frozen=True, eq=False)
class AttackKnowledge:
    """Side information an attack may use; each attack declares which fields it requires.

    Attributes:
        reference_frequencies: p_bar (|Q|,), from a reference panel disjoint from the population.
        reference_genotypes: (R, |Q|) reference individuals (non-members).
        population: (K, |Q|) genotypes of the individuals who may be members (the targets).
        n_members: dataset size n when known (the "n of K" prior).
        membership_prior: marginal membership probabilities theta (K,).
        noise_law: the defense's noise law (for the optimal LRT).
        simulate: shadow-release simulator against the defense (learned attacks).
    """

    reference_frequencies: np.ndarray | None = None
    reference_genotypes: np.ndarray | None = None
    population: np.ndarray | None = None
    n_members: int | None = None
    membership_prior: np.ndarray | None = None
    noise_law: NoiseLaw | None = None
    simulate: ReleaseSimulator | None = None
    extras: dict = field(default_factory=dict)

    def available(self) -> frozenset[str]:
        """Names of the fields that are set."""
        names = (
            "reference_frequencies",
            "reference_genotypes",
            "population",
            "n_members",
            "membership_prior",
            "noise_law",
            "simulate",
        )
        return frozenset(name for name in names if getattr(self, name) is not None)


class Attack(ABC):
    """A membership-inference attack on released summary statistics."""

    #: registry name, e.g. "lrt".
    name: ClassVar[str] = "attack"
    #: knowledge fields this attack needs (subset of AttackKnowledge field names).
    requires: ClassVar[frozenset[str]] = frozenset()
    #: one sentence stating the attacker's knowledge and how its direction/threshold is set.
    knowledge_statement: ClassVar[str] = ""

    def fit(self, knowledge: AttackKnowledge, seed: int = 0) -> "Attack":
        """Set the attack up from the knowledge it is allowed to have; returns self."""
        missing = self.requires - knowledge.available()
        if missing:
            raise InputError(f"attack `{self.name}` needs {', '.join(sorted(missing))}, which was not provided.")
        self._fit(knowledge, seed)
        return self

    def _fit(self, knowledge: AttackKnowledge, seed: int) -> None:
        """Learn what the attack needs (default: nothing)."""

    @abstractmethod
    def score(self, targets: np.ndarray, releases: np.ndarray) -> np.ndarray:
        """Membership scores, shape (n_releases, n_targets); higher = more likely member.

        Args:
            targets: (n_targets, |Q|) binary genotypes of the individuals under test.
            releases: (n_releases, |Q|) released statistics in [0, 1] (or (|Q|,)).
        """

    def describe(self) -> dict:
        """Name and knowledge statement for reports."""
        return {"name": self.name, "knowledge": self.knowledge_statement}
