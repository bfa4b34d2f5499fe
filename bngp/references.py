"""The reference mechanisms at a utility budget, ranked by a converged linear attack: what every defender at a
budget is measured against, and where a budget-trained defender starts (arXiv:2410.07414 section 3.3, the
utility-budget objective).

Each reference of :mod:`bngp.defenses.budget` is attacked by the ridge and whitened linear maps from
release to membership (:func:`bngp.linear.fit_ridge_and_whitened`), fitted to convergence in the number of
shadow releases with the penalty chosen by validation AUC over the whole spectrum
(:func:`bngp.linear.fit_converged_jointly`), and scored on fresh test releases: the stronger map's AUC
(pooled over releases and individuals) and TPR at 1% and 0.1% FPR, its scores read as they are or
standardised within each release (:func:`within_release`), whichever reads more.  The uniform shrinkage
is chosen the same way, over a grid of a.  Time-sharing is scored for the record but never chosen (its
mean AUC is linear in the mixing probability, and every release it makes is either useless or fully
revealing).

With no more candidates than attributes (K - 1 < |Q|, :func:`bngp.data.geometry.shaping_applies`) the ranking
also holds Gaussian noise confined to the candidates' row space, flat and eigen-weighted, with every
shrinkage of the grid (:func:`bngp.defenses.budget.shaped_at_budget`), and the linear-decoder optimum with
one shrinkage and one noise scale per direction (:func:`bngp.defenses.budget.row_space_optimal_at_budget`).
The linear attack reads the releases of the references in the row-space coordinates (:func:`release_coordinates`):
V^T (x - t) for noise that is isotropic or in the row space and for time-sharing, V^T (x_E - t_E) on the
attributes E that suppression releases: r <= K - 1 values instead of |Q|, nothing lost to a linear map
(:mod:`bngp.data.geometry`), on as many shadow releases as the whole release's curve may draw, and noise shaped to
the row space is drawn in the coordinates themselves (:meth:`ReleaseReading.draw`); per-attribute noise (the
linear-decoder optimum) is read whole.

Every reference is a :class:`~bngp.defenses.shrinkage.ShrinkNoiseDefense`, which the defender G holds
exactly (:func:`bngp.game.start.start_defender`).
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field, replace
from functools import cached_property, partial

import numpy as np
import torch

from bngp.data.geometry import PopulationSpace, shaping_applies
from bngp.data.population import Population
from bngp.data.priors import MembershipPrior, UniformSubsetPrior
from bngp.defenses.base import Defense
from bngp.defenses.budget import BudgetSetting, TimeSharingDefense, UtilityBudget, reference_at_budget, \
    row_space_optimal_at_budget, shaped_at_budget
from bngp.defenses.shaped import WEIGHTINGS, ProjectedDefense, ShapedNoiseDefense
from bngp.defenses.shrinkage import ShrinkNoiseDefense
from bngp.defenses.trained import TrainedDefense
from bngp.errors import InputError, InsufficientMemoryError
from bngp.memory import require_memory
from bngp.metrics import auc, tpr_at_fpr
from bngp.release.mechanism import Mechanism
from bngp.release.sampling import release_mechanism, release_tensor
from bngp.linear import LinearFit, converged_fit_bytes, coordinate_curve_start, default_shadow_releases, \
    fit_converged_jointly, fit_ridge_and_whitened, max_shadow_releases
from bngp.rng import SeedLike, resolve_seed, spawn_seeds, torch_generator

__all__ = ["SHAPED_GAUSSIAN", "SHAPED_OPTIMUM", "SHRINK_GRID", "TEST_RELEASES", "CoordinateSimulator", "LinearAttackScore",
           "ReferenceScore", "ReferenceRanking", "ReleaseReading", "check_linear_attack_memory", "linear_attack_score",
           "rank_references", "release_coordinates", "within_release"]

#: the uniform shrinkages tried for the ``shrinkage`` reference.
SHRINK_GRID = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8)
#: the ranking's label of Gaussian noise in the candidates' row space (no shrinkage, flat weighting).
SHAPED_GAUSSIAN = "gaussian population flat"
#: the ranking's label of the linear-decoder optimum in the row space (per-direction shrinkage and noise).
SHAPED_OPTIMUM = "linear-optimal population"
#: fresh releases on which a converged linear map is scored.
TEST_RELEASES = 500
#: validation releases of the converged fits.
_VALIDATION_RELEASES = 500
#: releases formed at a time when a :class:`ReleaseReading` draws coordinates (bounds its float32 B x |Q| temporaries).
_DRAW_BLOCK = 4096


@dataclass(frozen=True)
class ReferenceScore:
    """A reference mechanism and how a converged linear attack reads it.

    Attributes:
        label: "laplace", "gaussian", "shrinkage a=0.4", "suppression", "linear-optimal", "time-sharing".
        auc: the stronger linear map's AUC on the test releases (pooled over releases and individuals).
        tpr_at_1pct, tpr_at_01pct: its TPR at 1% and 0.1% FPR.
        releases: shadow releases of the converged fit (the last size of the learning curve).
        loss: the expected utility loss (closed form over the calibration draws; None for time-sharing,
            whose loss is p L0 by construction).
        epsilon: the mechanism's eps (Laplace: eps-DP; Gaussian: at delta = 1e-5), or None without a guarantee.
        mechanism: :meth:`ShrinkNoiseDefense.summary`, or the time-sharing probability.
        chosen: whether it is the start of the defender (the lowest AUC, time-sharing excluded).
        seconds: the wall time of its converged linear attack (releases drawn, fits, test releases scored).
    """

    label: str
    auc: float
    tpr_at_1pct: float
    tpr_at_01pct: float
    releases: int
    loss: float | None
    epsilon: float | None
    mechanism: dict
    chosen: bool = False
    seconds: float | None = None

    def to_dict(self) -> dict:
        return {"label": self.label, "auc": self.auc, "tpr_at_1pct_fpr": self.tpr_at_1pct,
                "tpr_at_0.1pct_fpr": self.tpr_at_01pct, "shadow_releases": self.releases, "loss": self.loss,
                "epsilon": self.epsilon, "mechanism": self.mechanism, "chosen": self.chosen, "seconds": self.seconds}


@dataclass(frozen=True, eq=False)
class ReferenceRanking:
    """Every reference at one budget with its score, and the best one (the defender's start); ``skipped`` says why
    the references shaped to the population are missing where they would apply (memory); ``build_seconds`` is
    the wall time of building (calibrating) the references, before any is scored."""

    budget: UtilityBudget
    scores: tuple[ReferenceScore, ...]
    best: ShrinkNoiseDefense
    seed: int
    defenses: dict[str, Defense] = field(default_factory=dict, repr=False)
    skipped: str | None = None
    build_seconds: float | None = None

    @property
    def best_score(self) -> ReferenceScore:
        return next(score for score in self.scores if score.chosen)

    def to_dict(self) -> dict:
        record = {"budget": self.budget.to_dict(), "seed": self.seed, "best": self.best_score.label,
                  "build_seconds": self.build_seconds, "references": [score.to_dict() for score in self.scores]}
        if self.skipped:
            record["skipped"] = self.skipped
        return record


@dataclass(frozen=True, eq=False)
class ReleaseReading:
    """What the converged linear attack reads of a release instead of its |Q| values: the candidates' row-space
    coordinates V^T (x - t), or V^T (w o (x - t)) for the attribute weights w of ``weights``
    (:func:`release_coordinates`)."""

    space: PopulationSpace
    weights: np.ndarray | None = None

    @property
    def width(self) -> int:
        return self.space.rank

    def __call__(self, releases: np.ndarray) -> np.ndarray:
        if self.weights is None:
            return self.space.coordinates(releases)
        return self.space.weighted_coordinates(releases, self.weights)

    @cached_property
    def _basis(self) -> torch.Tensor:
        """V as float32 (|Q|, r): the releases are float32, and so is the product that reads them."""
        return torch.as_tensor(self.space.basis, dtype=torch.float32)

    @cached_property
    def _target(self) -> torch.Tensor:
        return torch.as_tensor(self.space.target, dtype=torch.float32)

    @torch.no_grad()
    def draw(self, mechanism: Mechanism, defense: Defense, b: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        """The coordinates of releases of ``defense`` for memberships ``b`` (B, K), float64 (B, r): the law of
        ``self(sample_releases(mechanism, defense, b, generator))``, formed by blocks of :data:`_DRAW_BLOCK`
        releases in float32, the releases' own precision.

        Noise shaped to this row space (:class:`~bngp.defenses.shaped.ShapedNoiseDefense` on the same basis, with
        no weights, memberships of N each) is drawn in the coordinates themselves: x - t = V c before clipping,
        c = diag(1 - a) V^T (f(D) - t) + w o g with V^T (f(D) - t) = S U^T (b - theta) / N (Zc = U S V^T,
        :mod:`bngp.data.geometry`), so the coordinates of the clipped release are c + V^T (clip(t + V c, 0, 1) -
        (t + V c)): one |Q|-wide product forms the release and a second reads what clipping moved, where the
        whole release costs the statistic's K x |Q| product and two passes through the basis (the second pass reads
        only the attributes clipped in some release of a block: a tenth of them or fewer on genomes)."""
        if self._shaped_here(defense, b):
            return self._draw_shaped(defense, b, generator)
        blocks = []
        weights = None if self.weights is None else torch.as_tensor(self.weights, dtype=torch.float32)
        for start in range(0, b.shape[0], _DRAW_BLOCK):
            centred = release_tensor(mechanism, defense, b[start:start + _DRAW_BLOCK], generator).sub_(self._target)
            if weights is not None:
                centred.mul_(weights)
            blocks.append((centred @ self._basis).double())
        return torch.cat(blocks) if blocks else torch.zeros((0, self.width), dtype=torch.float64)

    def lift(self, fit: LinearFit) -> LinearFit:
        """A linear fit of these coordinates as the same map of the whole release
        (:meth:`~bngp.linear.LinearFit.of_coordinates`)."""
        return fit.of_coordinates(self.space.basis, self.space.target, self.weights)

    def _shaped_here(self, defense: Defense, b: torch.Tensor) -> bool:
        """Whether :meth:`draw` draws ``defense``'s releases in the coordinates (its docstring)."""
        if not isinstance(defense, ShapedNoiseDefense) or self.weights is not None or defense.composition != 1:
            return False
        inner, outer = defense.space, self.space
        same = inner is outer or (inner.basis.shape == outer.basis.shape and np.array_equal(inner.basis, outer.basis)
                                  and np.array_equal(inner.target, outer.target))
        return same and bool(torch.all(b.sum(dim=1) == outer.n_members))

    def _draw_shaped(self, defense: ShapedNoiseDefense, b: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        space = self.space
        unit = torch.randn((b.shape[0], space.rank), generator=generator, dtype=torch.float64)
        left = torch.as_tensor(space.left * (space.singular_values / space.n_members))  # U S / N, (K, r)
        theta = space.n_members / space.n_individuals
        kept = torch.as_tensor(1.0 - defense.direction_shrink)
        scales = torch.as_tensor(defense.direction_scales)
        coordinates = ((b.double() - theta) @ left).mul_(kept).add_(unit.mul_(scales))
        for start in range(0, coordinates.shape[0], _DRAW_BLOCK):
            block = coordinates[start:start + _DRAW_BLOCK]
            raw = (block.float() @ self._basis.T).add_(self._target)
            moved = raw.clamp(0.0, 1.0).sub_(raw)  # what clipping moved: 0 on every attribute inside [0, 1]
            clipped = torch.nonzero(moved.any(dim=0)).reshape(-1)  # the attributes clipped in some release of the block
            if clipped.numel():
                block += (moved[:, clipped] @ self._basis[clipped]).double()
        return coordinates


def _released_attributes(defense: ShrinkNoiseDefense) -> np.ndarray | None:
    """For a release with per-attribute shrinkage a_j and no noise (suppression): 1 on the attributes it releases
    (a_j < 1: x_j - t_j = (1 - a_j)(f(D)_j - t_j), never clipped), whose coordinates V^T (x_E - t_E) lose nothing
    of x_E (:func:`release_coordinates`); None for a release with noise, whose clipping at each attribute's own
    bounds the coordinates would not see (it is read whole), or one that releases nothing."""
    kept = defense.shrink < 1
    if np.any(defense.scale > 0) or not kept.any():
        return None
    return kept.astype(np.float64)


def release_coordinates(defense: Defense, population: Population, n_members: int,
                        space: PopulationSpace | None = None) -> ReleaseReading | None:
    """What a linear attack reads of the releases of ``defense`` instead of the release x (a
    :class:`ReleaseReading` of the candidates' row space), or None (the whole release); ``space``:
    ``population``'s geometry when already built.

    Noise confined to the candidates' row space (:class:`~bngp.defenses.shaped.ShapedNoiseDefense`,
    :class:`~bngp.defenses.shaped.ProjectedDefense` whose basis spans a subspace of it) leaves x - t in it up to
    clipping; for isotropic noise with one shrinkage the part of x outside it is independent of b: either way
    the best linear map from x to b depends on x only through the coordinates V^T (x - t) (:mod:`bngp.data.geometry`),
    r <= K - 1 values instead of |Q|.  A release with per-attribute shrinkage and no noise (suppression) is read
    through V^T (x_E - t_E) on the attributes E it releases: if two memberships gave the same coordinates, with
    x_E - t_E = D V y (D the positive retentions on E, 0 elsewhere) V^T D V y = 0, so ||D^(1/2) V y|| = 0 and
    x_E is the same: nothing of x_E is lost.  Time-sharing releases t or f(D), both on the affine hull: read in
    the coordinates V^T (x - t) too.  Per-attribute noise is read whole: N M Sigma^-1 (x - t) is sufficient
    before clipping, but each attribute is clipped at its own bounds, which a whole-release map can read and the
    statistic cannot.  A mechanism shaped to any other space (another panel) is read whole: the coordinates of
    the candidates' space are those of the population, never of the mechanism.  Where the basis would not fit
    in memory the release is read whole."""
    if not shaping_applies(population) or defense.composition != 1:
        return None
    shaped = isinstance(defense, (ShapedNoiseDefense, ProjectedDefense))
    per_attribute = isinstance(defense, ShrinkNoiseDefense) and not shaped
    isotropic = per_attribute and np.ptp(defense.shrink) == 0 and np.ptp(defense.scale) == 0
    sharing = isinstance(defense, TimeSharingDefense)  # t or f(D): both on the affine hull, never clipped
    weights = None
    if not (shaped or isotropic or sharing):
        weights = _released_attributes(defense) if per_attribute else None
        if weights is None:
            return None
    if space is None:
        try:
            space = PopulationSpace.of(population, n_members)
        except InsufficientMemoryError:  # the basis does not fit: the whole release, as without it
            return None
    if shaped:
        inner = defense.space.basis
        if inner.shape[0] != space.n_attributes or not np.allclose(space.target, defense.space.target, atol=1e-12):
            return None
        captured = float(np.sum((space.basis.T @ inner) ** 2))
        if captured < inner.shape[1] * (1.0 - 1e-9):
            return None
    return ReleaseReading(space, weights)


@dataclass(eq=False)
class CoordinateSimulator:
    """Shadow releases of ``defense`` as a linear attack reads them where the row-space coordinates lose nothing
    (:func:`release_coordinates`, built on first use; ``reading`` None: the whole release): what an attacker who
    knows the candidates and can simulate the mechanism draws (arXiv:2410.07414 section 2).  :meth:`sample` draws
    as :func:`bngp.attacks.base.release_simulator` does from the same seed, read by :meth:`ReleaseReading.draw`."""

    population: Population
    prior: MembershipPrior
    defense: Defense
    n_members: int | None

    @cached_property
    def mechanism(self) -> Mechanism:
        return release_mechanism(self.population.genotypes, self.defense.composition)

    @cached_property
    def reading(self) -> ReleaseReading | None:
        if self.n_members is None:
            return None
        return _as_read(self.defense, self.population, self.n_members, None)[1]

    def sample(self, n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
        """(coordinates (n, r), memberships (n, K)) float64 tensors of n fresh releases drawn from ``seed``."""
        b = torch.as_tensor(self.prior.sample(int(n), np.random.default_rng(seed)), dtype=torch.float32)
        return self.reading.draw(self.mechanism, self.defense, b, torch_generator(seed)), b.double()


def _as_read(defense: Defense, population: Population, n_members: int,
             space: PopulationSpace | None) -> tuple[Defense, ReleaseReading | None]:
    """``defense`` as a linear attack reads it, and its reading (:func:`release_coordinates`; ``space``: the
    population's geometry when already built, else built here at most once): a trained defender whose network
    output is zero is the shrinkage-plus-noise mechanism it releases
    (:meth:`~bngp.defenses.trained.TrainedDefense.closed_form`), read as the references are; else itself."""
    if isinstance(defense, TrainedDefense):
        if space is None and defense.artifact.defender.noise_basis is not None and shaping_applies(population):
            try:
                space = PopulationSpace.of(population, n_members)
            except InsufficientMemoryError:  # no basis: the closed form of noise shaped to it is not known
                pass
        defense = defense.closed_form(space) or defense
    return defense, release_coordinates(defense, population, n_members, space)


def _sampler(population: Population, n_members: int, defense: Defense, seed: int, reading: ReleaseReading | None):
    prior = UniformSubsetPrior(population.n_individuals, n_members)
    mechanism = release_mechanism(population.genotypes, defense.composition)
    calls = [0]

    def sample(n: int) -> tuple[torch.Tensor, torch.Tensor]:
        calls[0] += 1
        generator = torch_generator(spawn_seeds(seed, calls[0])[-1])
        b = prior.sample_torch(int(n), generator)
        if reading is not None:
            return reading.draw(mechanism, defense, b, generator), b.double()
        return release_tensor(mechanism, defense, b, generator).cpu(), b.double()

    return sample, prior


@dataclass(frozen=True)
class LinearAttackScore:
    """How the converged linear attack reads a defense: its AUC (pooled over releases and individuals), TPR at
    1% and 0.1% FPR, the shadow releases of its converged fit, and whether its scores were standardised within
    each release (:func:`within_release`)."""

    auc: float
    tpr_at_1pct: float
    tpr_at_01pct: float
    releases: int
    standardised: bool = False

    def to_dict(self) -> dict:
        return {"auc": self.auc, "tpr_at_1pct_fpr": self.tpr_at_1pct, "tpr_at_0.1pct_fpr": self.tpr_at_01pct,
                "shadow_releases": self.releases, "standardised_within_release": self.standardised}


def within_release(scores: np.ndarray) -> np.ndarray:
    """Scores (R, K) standardised within each release (row): (s - mean) / std, 0 where a row is constant.  Every
    release has N members among the K candidates, so an attacker ranks the candidates of each release; a
    mechanism that moves all of a release's scores together (a per-release offset, such as a few directions of
    the row space released exactly beside much noise) hides nothing from that ranking, though the pooled AUC of
    the raw scores would read it as private."""
    centred = scores - scores.mean(axis=1, keepdims=True)
    spread = centred.std(axis=1, keepdims=True)
    return np.divide(centred, spread, out=np.zeros_like(centred), where=spread > 0)


def check_linear_attack_memory(population: Population, composition: int = 1, hint: str = "",
                               test_releases: int = TEST_RELEASES) -> None:
    """Raise :class:`bngp.errors.InsufficientMemoryError` (naming the sizes, then ``hint``) when the
    converged linear attack of :func:`linear_attack_score` on the releases of a defense of
    ``population`` (``composition`` releases of |Q| values each) needs more memory than is available
    (:func:`bngp.linear.converged_fit_bytes`)."""
    k, width = population.n_individuals, population.n_attributes * int(composition)
    require_memory(converged_fit_bytes(k, width, _VALIDATION_RELEASES + test_releases),
                   f"the converged linear attack at {k:,} individuals x {width:,} released values", hint)


def linear_attack_score(defense: Defense, population: Population, n_members: int, seed: SeedLike,
                        test_releases: int = TEST_RELEASES, *, space: PopulationSpace | None = None,
                        whole: bool = False) -> LinearAttackScore:
    """The stronger of the converged ridge and whitened maps on ``test_releases`` fresh releases of
    ``defense`` (module docstring), every draw derived from ``seed`` (an int, None or a Generator,
    :func:`bngp.rng.resolve_seed`), read in the row-space coordinates of :func:`release_coordinates` where they
    apply (``space``: the population's geometry, already built) unless ``whole``, and drawn there directly
    (:meth:`ReleaseReading.draw`).  A trained defender whose network output is zero is attacked as the
    shrinkage-plus-noise mechanism it releases (:meth:`~bngp.defenses.trained.TrainedDefense.closed_form`).  Refused first, with
    :class:`bngp.errors.InsufficientMemoryError`, where it would not fit in the available memory
    (:func:`check_linear_attack_memory`)."""
    check_linear_attack_memory(population, defense.composition, test_releases=test_releases)
    defense, coordinates = (defense, None) if whole else _as_read(defense, population, n_members, space)
    sample, prior = _sampler(population, n_members, defense, resolve_seed(seed), coordinates)
    # in coordinates the curve may still draw as many shadow releases as the whole release's would
    k, width = population.n_individuals, population.n_attributes * defense.composition
    start, maximum = default_shadow_releases(k, width), max_shadow_releases(k, width)
    if coordinates is not None:
        start = coordinate_curve_start(start, maximum)
    validation = sample(_VALIDATION_RELEASES)
    fits = fit_converged_jointly(partial(fit_ridge_and_whitened, prior_mean=prior.marginals), sample,
                                 start=start, maximum=maximum, validation=validation)
    test_x, test_b = sample(test_releases)
    labels = test_b.numpy()
    best = None
    for fit, curve in fits:
        raw = fit.predict(test_x).numpy()
        for standardised, scores in ((False, raw), (True, within_release(raw))):
            candidate = LinearAttackScore(auc(scores, labels), tpr_at_fpr(scores, labels, 0.01),
                                          tpr_at_fpr(scores, labels, 0.001), int(curve.releases[-1]), standardised)
            if best is None or candidate.auc > best.auc:
                best = candidate
    return best


def _shaped_candidates(setting: BudgetSetting, budget: UtilityBudget,
                       shrink_grid: tuple[float, ...]) -> tuple[list[tuple[str, Defense]], str | None]:
    """The references shaped to the candidates' row space at the budget (module docstring), and why there are
    none when the row space's basis does not fit in memory."""
    try:
        setting.space
    except InsufficientMemoryError as error:
        return [], f"no references shaped to the population: {error}"
    candidates: list[tuple[str, Defense]] = []
    for weighting in WEIGHTINGS:
        for shrink in (0.0, *shrink_grid):
            try:
                defense = shaped_at_budget(setting, budget, shrink, weighting)
            except InputError:  # the shrinkage alone spends more than the budget
                continue
            name = "gaussian" if shrink == 0 else f"shrinkage a={shrink:g}"
            candidates.append((f"{name} population {weighting}", defense))
    try:
        candidates.append((SHAPED_OPTIMUM, row_space_optimal_at_budget(setting, budget)))
    except InputError:  # no shrinkage in the row space fits the budget
        pass
    return candidates, None


def rank_references(population: Population, n_members: int, budget: str | float, seed: SeedLike = 0, *,
                    laws: tuple[str, ...] = ("laplace",), shrink_grid: tuple[float, ...] = SHRINK_GRID,
                    setting: BudgetSetting | None = None, progress: bool = False) -> ReferenceRanking:
    """Every reference of :mod:`bngp.defenses.budget` at ``budget`` (absolute or ``Fx``), each scored by
    :func:`linear_attack_score` (each with its own seed spawned from ``seed``); the uniform shrinkage at every a
    of ``shrink_grid`` whose shrinkage alone fits the budget; the best (lowest AUC, then lowest TPR at 1% FPR)
    that is not time-sharing is the start.

    Args:
        seed: an int, None or a Generator (:func:`bngp.rng.resolve_seed`); the ranking records the int.
        laws: the noise laws of the shrinkage and linear-optimal references ("laplace", "gaussian").
        setting: a :class:`BudgetSetting` of (population, n_members) already built.
        progress: a line on stderr per reference scored.
    """
    seed = resolve_seed(seed)
    building = time.perf_counter()
    setting = setting or BudgetSetting.of(population, n_members)
    resolved = setting.resolve(budget)
    candidates: list[tuple[str, Defense]] = [("laplace", reference_at_budget("laplace", setting, resolved)),
                                             ("gaussian", reference_at_budget("gaussian", setting, resolved))]
    for law in laws:
        for shrink in shrink_grid:
            try:
                defense = reference_at_budget("shrinkage", setting, resolved, shrink=shrink, law=law)
            except InputError:  # the shrinkage alone spends more than the budget
                continue
            candidates.append((f"shrinkage {law} a={shrink:g}", defense))
        candidates.append((f"linear-optimal {law}", reference_at_budget("linear-optimal", setting, resolved, law=law)))
    candidates.append(("suppression", reference_at_budget("suppression", setting, resolved)))
    shaped, skipped = _shaped_candidates(setting, resolved, shrink_grid) if shaping_applies(population) else ([], None)
    candidates += shaped
    if skipped and progress:
        print(f"[references] {skipped}", file=sys.stderr, flush=True)
    candidates.append(("time-sharing", reference_at_budget("time-sharing", setting, resolved)))
    build_seconds = time.perf_counter() - building
    seeds = spawn_seeds(seed, len(candidates))
    scored = []
    for index, ((label, defense), stream) in enumerate(zip(candidates, seeds), start=1):
        started = time.perf_counter()
        score = linear_attack_score(defense, population, n_members, stream,
                                    space=setting.space if shaping_applies(population) and not skipped else None,
                                    whole=skipped is not None)
        seconds = time.perf_counter() - started
        if progress:
            print(f"[references] {index}/{len(candidates)} {label}: AUC {score.auc:.4f}, TPR at 1% FPR "
                  f"{score.tpr_at_1pct:.3f} ({score.releases:,} shadow releases, {seconds:.1f} s)",
                  file=sys.stderr, flush=True)
        shrinking = isinstance(defense, ShrinkNoiseDefense)
        epsilon = defense.guarantee.epsilon if shrinking and defense.guarantee is not None else None
        scored.append(ReferenceScore(label, score.auc, score.tpr_at_1pct, score.tpr_at_01pct, score.releases,
                                     setting.loss(defense) if shrinking else None, epsilon,
                                     defense.summary() if shrinking else {"probability": defense.probability},
                                     seconds=seconds))
    eligible = [index for index, score in enumerate(scored) if score.label != "time-sharing"]
    best_index = min(eligible, key=lambda index: (scored[index].auc, scored[index].tpr_at_1pct))
    scored[best_index] = replace(scored[best_index], chosen=True)
    defenses = {label: defense for label, defense in candidates}
    return ReferenceRanking(resolved, tuple(scored), candidates[best_index][1], seed, defenses, skipped, build_seconds)
