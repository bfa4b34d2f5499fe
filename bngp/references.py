"""The reference mechanisms at a utility budget, ranked by a converged linear attack: what every defender at a
budget is measured against, and where a budget-trained defender starts (arXiv:2410.07414 section 3.3, the
utility-budget objective).

Each reference of :mod:`bngp.defenses.budget` is attacked by the ridge and whitened linear maps from
release to membership (:func:`bngp.linear.fit_ridge_and_whitened`), fitted to convergence in the number of
shadow releases with the penalty chosen by validation AUC over the whole spectrum
(:func:`bngp.linear.fit_converged_jointly`), and scored on fresh test releases beside the linear MMSE map at the
mechanism's known law (:func:`known_law_fit`: the attacker knows the candidates and the mechanism, section 2): the
strongest map's AUC (pooled over releases and individuals) and TPR at 1% and 0.1% FPR, its scores read as they
are or standardised within each release (:func:`within_release`), whichever reads more.  Each map is also read
at its posterior's mode over the memberships' hull (:class:`bngp.linear.BoxDecoder`, the box-constrained
reconstruction: a release exact in many directions is decoded exactly, which no linear map does), with the map's
error covariance in closed form for the known law and estimated on shadow releases for a fitted map (on fresh ones
for the converged maps, on the fit's own for the screening ridge).  The uniform shrinkage
is chosen the same way, over a grid of a.  The ranking screens first (:func:`screening_score`, the known-law map
alone where there is one): a reference whose screening already reads above the best converged reading by more
than :data:`SCREEN_MARGIN` cannot be the best and keeps its screening reading (``converged`` False).  Time-sharing is scored for the record but never chosen (its
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
from collections.abc import Callable
from functools import partial

import numpy as np
import torch

from bngp.data import geometry
from bngp.data.geometry import PopulationSpace, shaping_applies
from bngp.data.population import Population
from bngp.data.priors import UniformSubsetPrior
from bngp.defenses.base import Defense
from bngp.defenses.budget import BudgetSetting, UtilityBudget, reference_at_budget, row_space_optimal_at_budget, \
    shaped_at_budget
from bngp.defenses.shaped import WEIGHTINGS
from bngp.defenses.shrinkage import ShrinkNoiseDefense
from bngp.errors import InputError, InsufficientMemoryError
from bngp.memory import require_memory
from bngp.metrics import auc, clustered_auc_se, clustered_tpr_se, tpr_at_fpr
from bngp.reading import ReleaseReading, as_read, draw_bytes, known_law_fit, reads_in_coordinates
from bngp.release.sampling import release_mechanism, release_tensor
from bngp.linear import BoxDecoder, LinearFit, box_bytes, converged_fit_bytes, coordinate_curve_start, \
    default_shadow_releases, error_covariance, fit_converged_jointly, fit_ridge, fit_ridge_and_whitened, \
    max_shadow_releases
from bngp.rng import SeedLike, resolve_seed, spawn_seeds, torch_generator

__all__ = ["ALWAYS_CONVERGED", "SCREEN_MARGIN", "SHAPED_GAUSSIAN", "SHAPED_OPTIMUM", "SHRINK_GRID", "TEST_RELEASES",
           "LinearAttackScore", "ReferenceScore", "ReferenceRanking", "check_linear_attack_memory",
           "linear_attack_bytes", "linear_attack_score", "rank_references", "screening_score", "within_release"]

#: the uniform shrinkages tried for the ``shrinkage`` reference.
SHRINK_GRID = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8)
#: the ranking's label of Gaussian noise in the candidates' row space (no shrinkage, flat weighting).
SHAPED_GAUSSIAN = "gaussian population flat"
#: the ranking's label of the linear-decoder optimum in the row space (per-direction shrinkage and noise).
SHAPED_OPTIMUM = "linear-optimal population"
#: how far above the lowest converged AUC a screening reading may be for the ranking to read that reference to
#: convergence (:func:`rank_references`): twice a learning curve's tolerance.
SCREEN_MARGIN = 0.01
#: the references the ranking always reads to convergence: the matched rows a release decision names
#: (:func:`bngp.decision.release_decision`) and time-sharing, which is never chosen.
ALWAYS_CONVERGED = ("laplace", "gaussian", SHAPED_GAUSSIAN, "time-sharing")
#: fresh releases on which a converged linear map is scored.
TEST_RELEASES = 500
#: validation releases of the converged fits.
_VALIDATION_RELEASES = 500


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
        seconds: the wall time of its converged linear attack (releases drawn, fits, test releases scored), with its
            screening (:func:`screening_score`) when it was screened first.
        converged: False when the ranking left it at its screening reading (:func:`rank_references`): ``auc`` and
            the TPRs are then what a quicker attack reads, which the converged attack reads at least as high.
        map: the map that read it (:class:`LinearAttackScore`).
        auc_se: the AUC's standard error over the test releases (:class:`LinearAttackScore`).
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
    converged: bool = True
    map: str = "ridge"
    auc_se: float | None = None

    def to_dict(self) -> dict:
        return {"label": self.label, "auc": self.auc, "tpr_at_1pct_fpr": self.tpr_at_1pct,
                "tpr_at_0.1pct_fpr": self.tpr_at_01pct, "shadow_releases": self.releases, "loss": self.loss,
                "epsilon": self.epsilon, "mechanism": self.mechanism, "chosen": self.chosen, "seconds": self.seconds,
                "converged": self.converged, "map": self.map, "auc_se": self.auc_se}


@dataclass(frozen=True, eq=False)
class ReferenceRanking:
    """Every reference at one budget with its score, and the best one (the defender's start); ``skipped`` says why
    references are missing where they would apply (memory: those shaped to the population, the per-attribute
    linear-decoder optimum read on the whole release, the row-space optimum without a held basis); ``build_seconds`` is
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
    each release (:func:`within_release`); ``converged`` False for a screening reading (:func:`screening_score`),
    which the converged attack reads at least as high; ``map`` the map that read it ("ridge", "whitened" or "known
    law", :func:`known_law_fit`; 0 shadow releases for the known law alone; "... + box" where its box-constrained
    decoding, :class:`bngp.linear.BoxDecoder`, read higher); ``auc_se`` and ``tpr_at_1pct_se`` the standard errors
of the AUC and the TPR at 1% FPR over the test releases (:func:`bngp.metrics.clustered_auc_se`,
:func:`bngp.metrics.clustered_tpr_se`; None where not computed)."""

    auc: float
    tpr_at_1pct: float
    tpr_at_01pct: float
    releases: int
    standardised: bool = False
    converged: bool = True
    map: str = "ridge"
    auc_se: float | None = None
    tpr_at_1pct_se: float | None = None

    def to_dict(self) -> dict:
        return {"auc": self.auc, "tpr_at_1pct_fpr": self.tpr_at_1pct, "tpr_at_0.1pct_fpr": self.tpr_at_01pct,
                "shadow_releases": self.releases, "standardised_within_release": self.standardised,
                "converged": self.converged, "map": self.map, "auc_se": self.auc_se,
                "tpr_at_1pct_fpr_se": self.tpr_at_1pct_se}


def within_release(scores: np.ndarray) -> np.ndarray:
    """Scores (R, K) standardised within each release (row): (s - mean) / std, 0 where a row is constant.  Every
    release has N members among the K candidates, so an attacker ranks the candidates of each release; a
    mechanism that moves all of a release's scores together (a per-release offset, such as a few directions of
    the row space released exactly beside much noise) hides nothing from that ranking, though the pooled AUC of
    the raw scores would read it as private."""
    centred = scores - scores.mean(axis=1, keepdims=True)
    spread = centred.std(axis=1, keepdims=True)
    return np.divide(centred, spread, out=np.zeros_like(centred), where=spread > 0)


def linear_attack_bytes(population: Population, composition: int = 1, test_releases: int = TEST_RELEASES,
                        coordinates: bool = False) -> int:
    """An upper estimate of the peak memory of :func:`linear_attack_score` on the releases of a defense of
    ``population`` (``composition`` releases of |Q| values each), read whole
    (:func:`bngp.linear.converged_fit_bytes` at |Q| outputs) or, with ``coordinates``, in the r <= K - 1 row-space
    coordinates (the same fit on r outputs over as many shadow releases as the whole release's curve may draw, and
    the draws' temporaries, :func:`bngp.reading.draw_bytes`; the geometry checks its own), with the box-constrained
    decoding of the test releases (:func:`bngp.linear.box_bytes`)."""
    k, width = population.n_individuals, population.n_attributes * int(composition)
    held_out = _VALIDATION_RELEASES + test_releases
    if not coordinates:
        return converged_fit_bytes(k, width, held_out) + box_bytes(k, test_releases)
    rank, releases = min(k - 1, width), max(max_shadow_releases(k, width), held_out)
    held = width * rank <= geometry.HELD_BASIS_VALUES  # PopulationSpace.of's rule
    return converged_fit_bytes(k, rank, held_out, releases) + draw_bytes(width, k, releases, held) \
        + box_bytes(k, test_releases)


def check_linear_attack_memory(population: Population, composition: int = 1, hint: str = "",
                               test_releases: int = TEST_RELEASES, coordinates: bool = False) -> None:
    """Raise :class:`bngp.errors.InsufficientMemoryError` (naming the sizes, then ``hint``) when the
    converged linear attack of :func:`linear_attack_score` on the releases of a defense of
    ``population`` (``composition`` releases of |Q| values each), read whole or in the row-space coordinates
    (``coordinates``), needs more memory than is available (:func:`linear_attack_bytes`)."""
    k, width = population.n_individuals, population.n_attributes * int(composition)
    read = f"{min(k - 1, width):,} row-space coordinates of {width:,}" if coordinates else f"{width:,}"
    require_memory(linear_attack_bytes(population, composition, test_releases, coordinates),
                   f"the converged linear attack at {k:,} individuals x {read} released values", hint)


def linear_attack_score(defense: Defense, population: Population, n_members: int, seed: SeedLike,
                        test_releases: int = TEST_RELEASES, *, space: PopulationSpace | None = None,
                        whole: bool = False, box: bool = True) -> LinearAttackScore:
    """The strongest of the converged ridge and whitened maps and the map at the mechanism's known law
    (:func:`known_law_fit`, where it has one) on ``test_releases`` fresh releases of
    ``defense`` (module docstring), every draw derived from ``seed`` (an int, None or a Generator,
    :func:`bngp.rng.resolve_seed`), read in the row-space coordinates of :func:`release_coordinates` where they
    apply (``space``: the population's geometry, already built) unless ``whole``, and drawn there directly
    (:meth:`ReleaseReading.draw`).  A trained defender whose network output is zero is attacked as the
    shrinkage-plus-noise mechanism it releases (:meth:`~bngp.defenses.trained.TrainedDefense.closed_form`).  With
    ``box`` each map is also read by its box-constrained decoding (module docstring; without it, the linear maps
    alone, as a comparison reads them).  Refused first, with
    :class:`bngp.errors.InsufficientMemoryError`, where it would not fit in the available memory
    (:func:`check_linear_attack_memory`)."""
    defense, coordinates, sample, prior, test, known = _reading(defense, population, n_members, seed, test_releases,
                                                                space, whole)
    # in coordinates the curve may still draw as many shadow releases as the whole release's would
    k, width = population.n_individuals, population.n_attributes * defense.composition
    start, maximum = default_shadow_releases(k, width), max_shadow_releases(k, width)
    if coordinates is not None:
        start = coordinate_curve_start(start, maximum)
    validation = sample(_VALIDATION_RELEASES)
    fits = fit_converged_jointly(partial(fit_ridge_and_whitened, prior_mean=prior.marginals), sample,
                                 start=start, maximum=maximum, validation=validation)
    releases = int(max(curve.releases[-1] for _, curve in fits))
    fitted = [fit for fit, _ in fits]
    maps = fitted + ([known] if known is not None else [])
    covariances = [None] * len(maps)
    if box and known is not None:  # the known law's box decoding, with its closed-form error covariance
        covariances[-1] = known.error_covariance
    elif box:  # fresh shadow releases for the fitted maps' error covariances
        x, b = sample(start)
        covariances = [error_covariance(fit, x, b) for fit in fitted]
        del x, b
    return _tested(maps, releases, test, True, n_members, covariances)


def screening_score(defense: Defense, population: Population, n_members: int, seed: SeedLike,
                    test_releases: int = TEST_RELEASES, *, space: PopulationSpace | None = None,
                    whole: bool = False) -> LinearAttackScore:
    """A quick lower reading of :func:`linear_attack_score` (same arguments, ``converged`` False), on the same test
    releases when given the same seed: the map at the mechanism's known law (:func:`known_law_fit`), which
    :func:`linear_attack_score` tests beside its fitted maps, so that it reads a defense at least this high; where
    the law gives no map, the ridge map alone, fitted once on the first size of the whole release's learning curve
    (:func:`bngp.linear.default_shadow_releases` of the width read: 2K releases in r <= K - 1 coordinates), which
    the converged fits, starting no lower, read at least as high up to the fits' own variation.
    :func:`rank_references` uses it to leave out references that cannot be the best."""
    defense, coordinates, sample, prior, test, known = _reading(defense, population, n_members, seed, test_releases,
                                                                space, whole)
    if known is not None:
        return _tested([known], 0, test, False, n_members, [known.error_covariance])
    width = coordinates.width if coordinates is not None else population.n_attributes * defense.composition
    releases = default_shadow_releases(population.n_individuals, width)
    validation = sample(_VALIDATION_RELEASES)
    x, b = sample(releases)
    fit = fit_ridge(x, b, validation, prior_mean=prior.marginals)
    covariance = error_covariance(fit, x, b)
    del x, b
    return _tested([fit], releases, test, False, n_members, [covariance])


def _reading(defense: Defense, population: Population, n_members: int, seed: SeedLike, test_releases: int,
             space: PopulationSpace | None, whole: bool):
    """What :func:`linear_attack_score` and :func:`screening_score` share, after the memory check of the reading: the
    defense as read and its reading (:func:`bngp.reading.as_read`, None with ``whole``), the shadow sampler and its
    prior, the test releases (a stream of their own, so both read the same ones from the same ``seed``) and the
    known-law map (:func:`known_law_fit`, or None)."""
    read_whole = whole or not reads_in_coordinates(defense, population)
    if read_whole:  # refused before the geometry is built
        check_linear_attack_memory(population, defense.composition, test_releases=test_releases)
    defense, coordinates = (defense, None) if whole else as_read(defense, population, n_members, space)
    if not read_whole:  # in coordinates, or whole where the geometry did not fit
        check_linear_attack_memory(population, defense.composition, test_releases=test_releases,
                                   coordinates=coordinates is not None)
    shadow_seed, test_seed = spawn_seeds(resolve_seed(seed), 2)
    sample, prior = _sampler(population, n_members, defense, shadow_seed, coordinates)
    test = _sampler(population, n_members, defense, test_seed, coordinates)[0](test_releases)
    return defense, coordinates, sample, prior, test, known_law_fit(defense, population, n_members, coordinates)


def _tested(fits: list[LinearFit], releases: int, test: tuple[torch.Tensor, torch.Tensor], converged: bool,
            n_members: int, covariances: list[torch.Tensor | None]) -> LinearAttackScore:
    """The best reading of the maps ``fits`` (fitted on up to ``releases`` shadow releases) on the ``test`` releases:
    each map's scores, and its box-constrained decoding where ``covariances`` gives its error covariance
    (:class:`bngp.linear.BoxDecoder`, memberships of ``n_members``), as they are and standardised within each
    release (:func:`within_release`), whichever reads the higher AUC."""
    test_x, test_b = test
    labels = test_b.numpy()
    best = None
    for fit, covariance in zip(fits, covariances, strict=True):
        name = "known law" if fit.criterion == "known law" else "ridge" if fit.shrinkage is None else "whitened"
        readings = [(name, fit.predict(test_x).numpy())]
        if covariance is not None:
            readings.append((f"{name} + box", BoxDecoder.of(fit, covariance, n_members).decode(test_x).numpy()))
        for label, raw in readings:
            for standardised, scores in ((False, raw), (True, within_release(raw))):
                candidate = LinearAttackScore(auc(scores, labels), tpr_at_fpr(scores, labels, 0.01),
                                              tpr_at_fpr(scores, labels, 0.001), releases, standardised, converged,
                                              label)
                if best is None or candidate.auc > best.auc:
                    best, best_scores = candidate, scores
    return replace(best, auc_se=clustered_auc_se(best_scores, labels),
                   tpr_at_1pct_se=clustered_tpr_se(best_scores, labels, 0.01))


def _shaped_candidates(setting: BudgetSetting, budget: UtilityBudget,
                       shrink_grid: tuple[float, ...]) -> tuple[list[tuple[str, Defense]], str | None, list[str]]:
    """The references shaped to the candidates' row space at the budget (module docstring); why there are none when
    the row space does not fit in memory; and why the row-space optimum is missing where the basis is not held."""
    try:
        setting.space
    except InsufficientMemoryError as error:
        return [], f"no references shaped to the population: {str(error).rstrip('.')}", []
    candidates: list[tuple[str, Defense]] = []
    for weighting in WEIGHTINGS:
        for shrink in (0.0, *shrink_grid):
            try:
                defense = shaped_at_budget(setting, budget, shrink, weighting)
            except InputError:  # the shrinkage alone spends more than the budget
                continue
            name = "gaussian" if shrink == 0 else f"shrinkage a={shrink:g}"
            candidates.append((f"{name} population {weighting}", defense))
    if not setting.space.holds_basis:
        return candidates, None, [f"no {SHAPED_OPTIMUM}: its search forms the marginal noise scales of every shape it "
                                  f"tries, each a pass through the candidates at {setting.space.n_attributes:,} "
                                  "attributes, whose basis is not held"]
    try:
        candidates.append((SHAPED_OPTIMUM, row_space_optimal_at_budget(setting, budget)))
    except InputError:  # no shrinkage in the row space fits the budget
        pass
    return candidates, None, []


def _candidates(population: Population, setting: BudgetSetting, budget: UtilityBudget, laws: tuple[str, ...],
                shrink_grid: tuple[float, ...]) -> tuple[list[tuple[str, Defense]], str | None, list[str]]:
    """Every reference of :func:`rank_references` at ``budget``, labelled, time-sharing last; why those shaped to the
    population are missing where they would apply; and why others are missing (the per-attribute linear-decoder
    optimum, read on the whole release, where that attack would not fit in memory)."""
    candidates: list[tuple[str, Defense]] = [("laplace", reference_at_budget("laplace", setting, budget)),
                                             ("gaussian", reference_at_budget("gaussian", setting, budget))]
    missing = []
    try:  # the per-attribute optimum forms the centred candidates and is read on the whole release
        check_linear_attack_memory(population)
        whole_fits = True
    except InsufficientMemoryError as error:
        whole_fits = False
        missing.append(f"no per-attribute linear-optimal reference: {str(error).rstrip('.')}")
    for law in laws:
        for shrink in shrink_grid:
            try:
                defense = reference_at_budget("shrinkage", setting, budget, shrink=shrink, law=law)
            except InputError:  # the shrinkage alone spends more than the budget
                continue
            candidates.append((f"shrinkage {law} a={shrink:g}", defense))
        if whole_fits:
            candidates.append((f"linear-optimal {law}", reference_at_budget("linear-optimal", setting, budget,
                                                                            law=law)))
    candidates.append(("suppression", reference_at_budget("suppression", setting, budget)))
    shaped, skipped, left_out = (_shaped_candidates(setting, budget, shrink_grid) if shaping_applies(population)
                                 else ([], None, []))
    candidates += shaped
    candidates.append(("time-sharing", reference_at_budget("time-sharing", setting, budget)))
    return candidates, skipped, missing + left_out


def rank_references(population: Population, n_members: int, budget: str | float, seed: SeedLike = 0, *,
                    laws: tuple[str, ...] = ("laplace",), shrink_grid: tuple[float, ...] = SHRINK_GRID,
                    setting: BudgetSetting | None = None, screen: bool = True,
                    progress: bool = False) -> ReferenceRanking:
    """Every reference of :mod:`bngp.defenses.budget` at ``budget`` (absolute or ``Fx``), each scored by
    :func:`linear_attack_score` (each with its own seed spawned from ``seed``); the uniform shrinkage at every a
    of ``shrink_grid`` whose shrinkage alone fits the budget; the best (lowest AUC, then lowest TPR at 1% FPR)
    that is not time-sharing is the start.

    With ``screen``, every reference is first read by :func:`screening_score` (on the test releases its converged
    attack would read), a lower reading of the converged attack.  The converged attack then reads, in increasing order
    of that reading, every reference whose screening reads at most the lowest converged AUC so far (time-sharing
    apart) plus :data:`SCREEN_MARGIN`, and always those of :data:`ALWAYS_CONVERGED` (the rows a release decision
    names).  A reference left at its screening reading (``converged`` False) reads above the best by more than
    the margin, so the converged attack would only read it higher still: it cannot be the best, and the best is
    the one the ranking without screening would choose, up to the test releases' sampling error.

    Args:
        seed: an int, None or a Generator (:func:`bngp.rng.resolve_seed`); the ranking records the int.
        laws: the noise laws of the shrinkage and linear-optimal references ("laplace", "gaussian").
        setting: a :class:`BudgetSetting` of (population, n_members) already built.
        screen: screen the references first (above); without it every reference is read by the converged attack.
        progress: a line on stderr per reference scored.
    """
    seed = resolve_seed(seed)
    building = time.perf_counter()
    setting = setting or BudgetSetting.of(population, n_members)
    resolved = setting.resolve(budget)
    candidates, unshaped, missing = _candidates(population, setting, resolved, laws, shrink_grid)
    skipped = "; ".join(([unshaped] if unshaped else []) + missing) or None
    if skipped and progress:
        print(f"[references] {skipped}", file=sys.stderr, flush=True)
    build_seconds = time.perf_counter() - building
    seeds = spawn_seeds(seed, len(candidates))
    reading = {"space": setting.space if shaping_applies(population) and not unshaped else None,
               "whole": unshaped is not None}
    seconds = [0.0] * len(candidates)

    def read(index: int, score: Callable[..., LinearAttackScore], stream: int) -> LinearAttackScore:
        started = time.perf_counter()
        label, defense = candidates[index]
        result = score(defense, population, n_members, stream, **reading)
        seconds[index] += time.perf_counter() - started
        if progress:
            kind = "converged" if result.converged else "screening"
            print(f"[references] {index + 1}/{len(candidates)} {label} ({kind}): AUC {result.auc:.4f}, TPR at 1% FPR "
                  f"{result.tpr_at_1pct:.3f} ({result.releases:,} shadow releases, {seconds[index]:.1f} s)",
                  file=sys.stderr, flush=True)
        return result

    if screen:
        readings = [read(index, screening_score, stream) for index, stream in enumerate(seeds)]
        lowest = np.inf
        for index in sorted(range(len(candidates)), key=lambda index: readings[index].auc):
            label = candidates[index][0]
            if label in ALWAYS_CONVERGED or readings[index].auc <= lowest + SCREEN_MARGIN:
                readings[index] = read(index, linear_attack_score, seeds[index])
                if label != "time-sharing":
                    lowest = min(lowest, readings[index].auc)
    else:
        readings = [read(index, linear_attack_score, stream) for index, stream in enumerate(seeds)]
    scored = []
    for (label, defense), score, spent in zip(candidates, readings, seconds):
        shrinking = isinstance(defense, ShrinkNoiseDefense)
        epsilon = defense.guarantee.epsilon if shrinking and defense.guarantee is not None else None
        scored.append(ReferenceScore(label, score.auc, score.tpr_at_1pct, score.tpr_at_01pct, score.releases,
                                     setting.loss(defense) if shrinking else None, epsilon,
                                     defense.summary() if shrinking else {"probability": defense.probability},
                                     seconds=spent, converged=score.converged, map=score.map, auc_se=score.auc_se))
    eligible = [index for index, score in enumerate(scored) if score.label != "time-sharing" and score.converged]
    best_index = min(eligible, key=lambda index: (scored[index].auc, scored[index].tpr_at_1pct))
    scored[best_index] = replace(scored[best_index], chosen=True)
    defenses = {label: defense for label, defense in candidates}
    return ReferenceRanking(resolved, tuple(scored), candidates[best_index][1], seed, defenses, skipped, build_seconds)
