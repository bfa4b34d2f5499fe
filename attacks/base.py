"""The attack interface and the record of what an attacker knows.

Conventions: member = 1; an attack returns one real score per
target per release, higher = more likely member.  An attack is set up (:meth:`Attack.fit`)
only with the knowledge it is defined to have, recorded in :class:`AttackKnowledge`, and
never sees evaluation labels.  Scoring is vectorised over targets x releases.

Honest orientation: a fitted attack records the
direction of its raw statistic (``orientation_``, +1 or -1), the decision threshold on its
score (``threshold_``) and a note when the raw statistic had to be flipped
(``orientation_note_``); all three are set from data the attack may have (its own shadow
releases, the reference panel), never from evaluation labels.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar, Protocol

import numpy as np
import torch

from .inputs import (
    check_pair,
    check_releases,
    check_releases_torch,
    check_targets,
    check_targets_torch,
    compute_dtype,
)
from bngp.errors import InputError
from bngp.linear import LinearFit
from bngp.metrics import auc
from bngp.release.mechanism import Mechanism
from bngp.release.noise_law import NoiseLaw
from bngp.release.sampling import NoiseSource, release_mechanism, sample_releases
from bngp.rng import SeedLike, resolve_seed, torch_generator

if TYPE_CHECKING:
    from bngp.data.population import Population
    from bngp.device import DeviceName
    from bngp.data.priors import MembershipPrior

__all__ = ["AttackKnowledge", "Attack", "CoordinateReading", "CoordinateSource", "TorchAttack", "ReleaseSimulator",
           "NoiseLaw", "release_simulator", "attack_knowledge"]

#: simulate(n_releases, seed) -> (releases (R, Q), memberships (R, K)): shadow releases the
#: attacker generates itself against the (known) defense on the known population.
ReleaseSimulator = Callable[[int, int], tuple[np.ndarray, np.ndarray]]


class CoordinateReading(Protocol):
    """How a linear attack reads a release in r coordinates c(x) (:class:`bngp.reading.ReleaseReading`)."""

    @property
    def width(self) -> int:
        """r, the number of coordinates."""

    def lift(self, fit: LinearFit) -> LinearFit:
        """A linear fit of the coordinates as the same map of the whole release."""

    @property
    def hull(self) -> tuple[torch.Tensor, torch.Tensor] | None:
        """(V, t) float32 where every release is t + V c up to clipping, so that an attack of any kind loses
        nothing reading the coordinates (x - t) V; None otherwise."""


class CoordinateSource(Protocol):
    """Shadow releases read in coordinates that lose nothing a linear map of the release can use
    (:class:`bngp.reading.CoordinateSimulator`)."""

    @property
    def reading(self) -> CoordinateReading | None:
        """The reading, or None where the coordinates would lose something (then the whole release is read)."""

    def sample(self, n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
        """(coordinates (n, r), memberships (n, K)) float64 tensors of n fresh releases drawn from ``seed``, as
        the release simulator draws them from the same seed."""


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
        composition: copies of f(D) in a release (App. L.6); an attack that does not read such a
            release natively runs on its tiled view (:func:`bngp.attacks.composed.for_composition`).
        coordinates: the same simulator read in the candidates' row-space coordinates (a
            :class:`CoordinateSource`, :class:`bngp.reading.CoordinateSimulator` from the harness; its
            ``reading`` None where they would lose what a linear map of the release can use): the linear
            attacks fit there and lift the map to the release.
    """

    reference_frequencies: np.ndarray | None = None
    reference_genotypes: np.ndarray | None = None
    population: np.ndarray | None = None
    n_members: int | None = None
    membership_prior: np.ndarray | None = None
    noise_law: NoiseLaw | None = None
    simulate: ReleaseSimulator | None = None
    composition: int = 1
    extras: dict = field(default_factory=dict)
    coordinates: CoordinateSource | None = None

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


def release_simulator(mechanism: Mechanism, prior: "MembershipPrior", defense: NoiseSource) -> ReleaseSimulator:
    """simulate(n, seed) -> (releases (n, n_outputs), memberships (n, K)): draws b ~ ``prior`` and
    the defense's releases of them, both from ``seed``."""

    def simulate(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
        b = prior.sample(n, np.random.default_rng(seed))
        return sample_releases(mechanism, defense, b, torch_generator(seed)), b

    return simulate


def attack_knowledge(
    population: "Population", prior: "MembershipPrior", defense: NoiseSource, n_members: int | None,
    coordinates: CoordinateSource | None = None,
) -> AttackKnowledge:
    """Everything any attack may be given against ``defense`` on ``population`` under ``prior``;
    each attack uses only what it declares.  The one set-up of the evaluation, the best
    responses and the mechanism audits: the simulator releases exactly what the defense
    releases (:func:`bngp.release.sampling.release_mechanism` of its ``composition``);
    ``coordinates``: the same releases read in the candidates' row space
    (:class:`bngp.reading.CoordinateSimulator`, which the harness above the attacks builds)."""
    mechanism = release_mechanism(population.genotypes, defense.composition)
    return AttackKnowledge(
        reference_frequencies=population.reference_frequencies,
        reference_genotypes=population.reference,
        population=population.genotypes,
        n_members=n_members,
        membership_prior=prior.marginals,
        noise_law=getattr(defense, "noise_law", None),
        simulate=release_simulator(mechanism, prior, defense),
        composition=defense.composition,
        coordinates=coordinates,
    )


class Attack(ABC):
    """A membership-inference attack on released summary statistics."""

    #: registry name, e.g. "lrt".
    name: ClassVar[str] = "attack"
    #: knowledge fields this attack needs (subset of AttackKnowledge field names).
    requires: ClassVar[frozenset[str]] = frozenset()
    #: one sentence stating the attacker's knowledge and how its direction/threshold is set.
    knowledge_statement: ClassVar[str] = ""
    #: True when :meth:`score_torch` is available (scores differentiable in the releases).
    differentiable: ClassVar[bool] = False
    #: True when scores are posterior log-odds, so sigmoid(score) is a membership probability
    #: and its held-out cross-entropy estimates the BGP risk.
    log_odds: ClassVar[bool] = False
    #: whether the attack reads a release of c copies of f(D) (composition, App. L.6) as it is;
    #: the others run on its tiled view (:func:`bngp.attacks.composed.for_composition`).
    reads_composed_release: ClassVar[bool] = False
    #: whether the attack trains a network with :class:`bngp.attacks.training.AttackerTrainingConfig`
    #: settings, given to its constructor as ``config`` (an evaluation's ``attacker`` settings).
    trained_by_config: ClassVar[bool] = False

    # What an attack needs from the other attacks of an evaluation (:func:`bngp.evaluate.evaluate_defense`
    # asks these, never the attacks' names).  An attack that declares any of them is fitted in the
    # evaluation's own process, where the other attacks' fits are.
    #: the name, in the evaluation, of an attack whose converged fit this one starts from when that
    #: attack was fitted first (:meth:`start_from`); None: it starts from nothing.
    warm_start_from: ClassVar[str | None] = None
    #: the name, in the evaluation, of an attack fitted together with this one from one set of
    #: shadow releases (:meth:`fit_together_with`, offered by the one fitted first while the other
    #: waits; the other then only calibrates); None: fitted alone.
    fitted_together_with: ClassVar[str | None] = None
    #: whether the attack pools the fits and scores of every other attack of the evaluation
    #: (stacking): fitted last, after all of them; it then has ``use_fitted``, ``stacking_releases``
    #: and ``score(..., base_scores=)`` (:class:`bngp.attacks.stacking.StackedAttack`).
    pools_other_attacks: ClassVar[bool] = False

    #: +1 if the raw statistic is used as is, -1 if it is flipped; chosen from shadow data only.
    orientation_: int = 1
    #: decision threshold on :meth:`score` (declare member when score > threshold_), set at a
    #: target false-positive rate on shadow data; None for attacks that have none.
    threshold_: float | None = None
    #: why the orientation is what it is when the raw statistic was flipped, else None.
    orientation_note_: str | None = None
    #: mean per-release AUC of the raw (unflipped) statistic on the attack's shadow releases.
    shadow_auc_: float | None = None

    def fit(self, knowledge: AttackKnowledge, seed: SeedLike = 0) -> "Attack":
        """Set the attack up from the knowledge it is allowed to have, its shadow draws derived from
        ``seed`` (an int, None or a Generator, :func:`bngp.rng.resolve_seed`); returns self."""
        self.check_knowledge(knowledge)
        self._fit(knowledge, resolve_seed(seed))
        return self

    @property
    def builds_on_others(self) -> bool:
        """Whether the attack's fit uses or hands over other attacks' fits (:attr:`warm_start_from`,
        :attr:`fitted_together_with`, :attr:`pools_other_attacks`)."""
        return self.warm_start_from is not None or self.fitted_together_with is not None or self.pools_other_attacks

    def start_from(self, fitted: Attack) -> Attack:
        """Start the next :meth:`fit` from ``fitted``, the evaluation's fitted :attr:`warm_start_from`
        attack (default: ignored); returns self."""
        return self

    def fit_together_with(self, partner: Attack) -> Attack:
        """At the next :meth:`fit`, also fit ``partner``, the evaluation's unfitted
        :attr:`fitted_together_with` attack, where the attack can (default: it fits alone); returns self."""
        return self

    def set_device(self, device: DeviceName | torch.device) -> Attack:
        """Train and run the attack's network on ``device`` (:func:`bngp.device.resolve_device`);
        returns self.  Only attacks that train a network use it (the learned Bayesian attacker,
        arXiv:2410.07414 section 3.2); the attacks computed in closed form run on the CPU
        whatever the device, and ignore it."""
        return self

    def check_knowledge(self, knowledge: AttackKnowledge) -> None:
        """Raise :class:`InputError` naming the knowledge fields the attack needs and ``knowledge`` lacks."""
        missing = self.requires - knowledge.available()
        if missing:
            raise InputError(f"attack `{self.name}` needs {', '.join(sorted(missing))}, which was not provided.")

    def _fit(self, knowledge: AttackKnowledge, seed: int) -> None:
        """Learn what the attack needs (default: nothing)."""

    @abstractmethod
    def score(self, targets: np.ndarray, releases: np.ndarray) -> np.ndarray:
        """Membership scores, shape (n_releases, n_targets); higher = more likely member.

        Args:
            targets: (n_targets, |Q|) binary genotypes of the individuals under test.
            releases: (n_releases, |Q|) released statistics in [0, 1] (or (|Q|,)).
        """

    def score_torch(self, targets: torch.Tensor, releases: torch.Tensor) -> torch.Tensor:
        """Differentiable scores (n_releases, n_targets), for training a defender against the attack.

        Raises:
            InputError: for attacks whose scores are not differentiable in the releases.
        """
        raise InputError(f"attack `{self.name}` has no differentiable (torch) form.")

    def decide(self, targets: np.ndarray, releases: np.ndarray) -> np.ndarray:
        """Membership decisions score > threshold_, shape (n_releases, n_targets), bool."""
        if self.threshold_ is None:
            raise InputError(f"attack `{self.name}` has no decision threshold; fit it first.")
        return self.score(targets, releases) > self.threshold_

    def _calibrate(
        self,
        raw_scores: np.ndarray,
        labels: np.ndarray,
        *,
        source: str,
        alpha: float | None = None,
        threshold: float | None = None,
    ) -> None:
        """Fix orientation_ and threshold_ from labelled shadow scores (never evaluation labels).

        The raw statistic keeps its direction when its mean per-release AUC on the shadow
        releases is >= 0.5, otherwise it is flipped and ``orientation_note_`` says so.  The
        threshold is the (1 - alpha) quantile of the oriented scores of shadow non-members
        (false-positive rate alpha on the shadow data), unless ``threshold`` fixes it (on the
        raw scale, e.g. 0 for the adaptive LRT whose threshold is built into its score).

        Args:
            raw_scores: (R, M) raw statistic on shadow releases x shadow individuals.
            labels: (R, M) 0/1 shadow memberships.
            source: description of the shadow releases, used in the note.
            alpha: target false-positive rate in (0, 1) (when ``threshold`` is None).
            threshold: fixed threshold on the raw statistic instead of the quantile.
        """
        if (alpha is None) == (threshold is None):
            raise InputError("exactly one of `alpha` and `threshold` must be given.")
        raw_scores = np.asarray(raw_scores, dtype=np.float64)
        labels = np.asarray(labels)
        rows = [i for i in range(labels.shape[0]) if 0 < labels[i].sum() < labels.shape[1]]
        if not rows:
            raise InputError(f"attack `{self.name}`: the shadow releases must contain members and non-members.")
        self.shadow_auc_ = float(np.mean([auc(raw_scores[i], labels[i]) for i in rows]))
        self.orientation_ = 1 if self.shadow_auc_ >= 0.5 else -1
        self.orientation_note_ = (
            None
            if self.orientation_ == 1
            else (
                f"raw statistic anti-correlated with membership on {source} "
                f"(shadow AUC {self.shadow_auc_:.3f}); flipped"
            )
        )
        if threshold is not None:
            self.threshold_ = float(self.orientation_ * threshold)
        else:
            negatives = self.orientation_ * raw_scores[labels == 0]
            self.threshold_ = float(np.quantile(negatives, 1 - alpha, method="higher"))

    def describe(self) -> dict:
        """Name, knowledge statement and the fitted orientation/threshold for reports."""
        return {
            "name": self.name,
            "knowledge": self.knowledge_statement,
            "requires": sorted(self.requires),
            "orientation": self.orientation_,
            "threshold": self.threshold_,
            "orientation_note": self.orientation_note_,
            "shadow_auc": self.shadow_auc_,
        }


class TorchAttack(Attack):
    """An attack whose raw statistic is written once, in torch.

    :meth:`score` validates numpy inputs and evaluates :meth:`_raw_torch` without gradients
    (float32 releases in float32, others in float64); :meth:`score_torch` evaluates the same
    code with gradients.  Both multiply by the fitted ``orientation_``.
    """

    differentiable: ClassVar[bool] = True
    #: |Q| the attack was fitted on (None before fit).
    n_attributes_: int | None = None

    @abstractmethod
    def _raw_torch(self, targets: torch.Tensor | np.ndarray, releases: torch.Tensor) -> torch.Tensor:
        """Raw statistic (R, n) for binary targets (n, |Q|) and float releases (R, |Q|)."""

    def _raw_numpy(self, targets: np.ndarray, releases: np.ndarray) -> np.ndarray:
        """Raw statistic on already validated numpy arrays (float64 result, no gradients)."""
        x = torch.from_numpy(np.asarray(releases)).to(compute_dtype(releases))
        with torch.no_grad():
            return self._raw_torch(targets, x).to(torch.float64).numpy()

    def _check_fitted(self) -> int:
        if self.n_attributes_ is None:
            raise InputError(f"attack `{self.name}` must be fitted before scoring (call fit).")
        return self.n_attributes_

    def _release_width(self, n_attributes: int) -> int:
        """Columns of a release this attack scores: |Q| (an attack that reads a composed release of
        c copies of f(D) natively returns c |Q|)."""
        return n_attributes

    def score(self, targets: np.ndarray, releases: np.ndarray) -> np.ndarray:
        n_attributes = self._check_fitted()
        targets = check_targets(targets, n_attributes)
        releases = check_releases(releases)
        width = self._release_width(n_attributes)
        if width == n_attributes:
            check_pair(targets, releases)
        elif releases.shape[1] != width:
            raise InputError(f"`releases` must have {width} columns (the defense's release), got {releases.shape[1]}.")
        return self.orientation_ * self._raw_numpy(targets, releases)

    def score_torch(self, targets: torch.Tensor, releases: torch.Tensor) -> torch.Tensor:
        n_attributes = self._check_fitted()
        targets = check_targets_torch(targets, n_attributes)
        releases = check_releases_torch(releases, self._release_width(n_attributes))
        return self.orientation_ * self._raw_torch(targets, releases)
