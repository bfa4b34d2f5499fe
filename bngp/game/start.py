"""The reference mechanisms at a utility budget, ranked by a converged linear attack; the best one is
where a budget-trained defender starts (arXiv:2410.07414 section 3.3, the utility-budget objective).

Each reference of :mod:`bngp.defenses.budget` is attacked by the ridge and whitened linear maps from
release to membership (:func:`bngp.linear.fit_ridge_and_whitened`), fitted to convergence in the number of
shadow releases with the penalty chosen by validation AUC over the whole spectrum
(:func:`bngp.linear.fit_converged_jointly`), and scored on fresh test releases: the stronger map's AUC
(pooled over releases and individuals) and TPR at 1% and 0.1% FPR.  The uniform shrinkage is chosen the
same way, over a grid of a.  Time-sharing is scored for the record but never chosen (its mean AUC is
linear in the mixing probability, and every release it makes is either useless or fully revealing).

Every reference is a :class:`~bngp.defenses.shrinkage.ShrinkNoiseDefense`, which the defender G holds
exactly with a zero output layer (shrinkage alpha = a, full-rank noise sigma = s, noise law Laplace or
Gaussian): :func:`start_defender` sets G to it.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field, replace
from functools import partial

import numpy as np
import torch
from scipy.optimize import brentq

from bngp.data.population import Population
from bngp.data.priors import UniformSubsetPrior
from bngp.defenses.base import Defense
from bngp.defenses.budget import BudgetSetting, UtilityBudget, reference_at_budget
from bngp.defenses.network import Defender
from bngp.defenses.shrinkage import ShrinkNoiseDefense, clipped_deviation_loss
from bngp.errors import InputError
from bngp.memory import require_memory
from bngp.metrics import auc, tpr_at_fpr
from bngp.release.sampling import release_mechanism, sample_releases
from bngp.linear import converged_fit_bytes, default_shadow_releases, fit_converged_jointly, fit_ridge_and_whitened, max_shadow_releases
from bngp.rng import SeedLike, resolve_seed, spawn_seeds, torch_generator

from .config import GameConfig

__all__ = ["SHRINK_GRID", "TEST_RELEASES", "SURFACE_DRAWS", "BudgetSurface", "LinearAttackScore", "ReferenceScore",
           "ReferenceRanking",
           "check_linear_attack_memory", "linear_attack_score", "rank_references", "start_defender"]

#: the uniform shrinkages tried for the ``shrinkage`` reference.
SHRINK_GRID = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8)
#: fresh releases on which a converged linear map is scored.
TEST_RELEASES = 500
#: validation releases of the converged fits.
_VALIDATION_RELEASES = 500
#: calibration draws on which :class:`BudgetSurface` evaluates the closed-form loss.
SURFACE_DRAWS = 256


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

    def to_dict(self) -> dict:
        return {"label": self.label, "auc": self.auc, "tpr_at_1pct_fpr": self.tpr_at_1pct,
                "tpr_at_0.1pct_fpr": self.tpr_at_01pct, "shadow_releases": self.releases, "loss": self.loss,
                "epsilon": self.epsilon, "mechanism": self.mechanism, "chosen": self.chosen}


@dataclass(frozen=True, eq=False)
class ReferenceRanking:
    """Every reference at one budget with its score, and the best one (the defender's start)."""

    budget: UtilityBudget
    scores: tuple[ReferenceScore, ...]
    best: ShrinkNoiseDefense
    seed: int
    defenses: dict[str, Defense] = field(default_factory=dict, repr=False)

    @property
    def best_score(self) -> ReferenceScore:
        return next(score for score in self.scores if score.chosen)

    def started(self, config: GameConfig) -> GameConfig:
        """``config`` for a defender started from :attr:`best`: the reference's noise law, and the in-game
        refits on as many shadow releases as the converged attack that ranked it needed."""
        return replace(config, defender=replace(config.defender, noise_law=self.best.law),
                       attacker=replace(config.attacker, refit_releases=self.best_score.releases))

    def to_dict(self) -> dict:
        return {"budget": self.budget.to_dict(), "seed": self.seed, "best": self.best_score.label,
                "references": [score.to_dict() for score in self.scores]}


def _sampler(population: Population, n_members: int, defense: Defense, seed: int):
    prior = UniformSubsetPrior(population.n_individuals, n_members)
    mechanism = release_mechanism(population.genotypes, defense.composition)
    calls = [0]

    def sample(n: int) -> tuple[torch.Tensor, torch.Tensor]:
        calls[0] += 1
        generator = torch_generator(spawn_seeds(seed, calls[0])[-1])
        b = prior.sample_torch(int(n), generator)
        x = sample_releases(mechanism, defense, b, generator)
        return torch.as_tensor(x, dtype=torch.float64), b.double()

    return sample, prior


@dataclass(frozen=True)
class LinearAttackScore:
    """How the converged linear attack reads a defense: its AUC (pooled over releases and individuals), TPR at
    1% and 0.1% FPR, and the shadow releases of its converged fit."""

    auc: float
    tpr_at_1pct: float
    tpr_at_01pct: float
    releases: int

    def to_dict(self) -> dict:
        return {"auc": self.auc, "tpr_at_1pct_fpr": self.tpr_at_1pct, "tpr_at_0.1pct_fpr": self.tpr_at_01pct,
                "shadow_releases": self.releases}


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
                        test_releases: int = TEST_RELEASES) -> LinearAttackScore:
    """The stronger of the converged ridge and whitened maps on ``test_releases`` fresh releases of
    ``defense`` (module docstring), every draw derived from ``seed`` (an int, None or a Generator,
    :func:`bngp.rng.resolve_seed`).  Refused first, with :class:`bngp.errors.InsufficientMemoryError`,
    where it would not fit in the available memory (:func:`check_linear_attack_memory`)."""
    check_linear_attack_memory(population, defense.composition, test_releases=test_releases)
    sample, prior = _sampler(population, n_members, defense, resolve_seed(seed))
    k, width = population.n_individuals, population.n_attributes * defense.composition
    validation = sample(_VALIDATION_RELEASES)
    fits = fit_converged_jointly(partial(fit_ridge_and_whitened, prior_mean=prior.marginals), sample,
                                 start=default_shadow_releases(k, width), maximum=max_shadow_releases(k, width),
                                 validation=validation)
    test_x, test_b = sample(test_releases)
    labels = test_b.numpy()
    best = None
    for fit, curve in fits:
        scores = fit.predict(test_x).numpy()
        candidate = LinearAttackScore(auc(scores, labels), tpr_at_fpr(scores, labels, 0.01),
                                      tpr_at_fpr(scores, labels, 0.001), int(curve.releases[-1]))
        if best is None or candidate.auc > best.auc:
            best = candidate
    return best


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
    candidates.append(("time-sharing", reference_at_budget("time-sharing", setting, resolved)))
    seeds = spawn_seeds(seed, len(candidates))
    scored = []
    for index, ((label, defense), stream) in enumerate(zip(candidates, seeds), start=1):
        started = time.perf_counter()
        score = linear_attack_score(defense, population, n_members, stream)
        if progress:
            print(f"[references] {index}/{len(candidates)} {label}: AUC {score.auc:.4f}, TPR at 1% FPR "
                  f"{score.tpr_at_1pct:.3f} ({score.releases:,} shadow releases, {time.perf_counter() - started:.1f} s)",
                  file=sys.stderr, flush=True)
        shrinking = isinstance(defense, ShrinkNoiseDefense)
        epsilon = defense.guarantee.epsilon if shrinking and defense.guarantee is not None else None
        scored.append(ReferenceScore(label, score.auc, score.tpr_at_1pct, score.tpr_at_01pct, score.releases,
                                     setting.loss(defense) if shrinking else None, epsilon,
                                     defense.summary() if shrinking else {"probability": defense.probability}))
    eligible = [index for index, score in enumerate(scored) if score.label != "time-sharing"]
    best_index = min(eligible, key=lambda index: (scored[index].auc, scored[index].tpr_at_1pct))
    scored[best_index] = replace(scored[best_index], chosen=True)
    defenses = {label: defense for label, defense in candidates}
    return ReferenceRanking(resolved, tuple(scored), candidates[best_index][1], seed, defenses)


@torch.no_grad()
def start_defender(defender: Defender, reference: ShrinkNoiseDefense) -> None:
    """Set G to release exactly ``reference``: a zero output layer (and linear skip), shrinkage alpha = a
    towards t, full-rank noise sigma = s of the reference's law."""
    spec = defender.spec
    if not (spec.shrink and spec.full_rank_noise):
        raise InputError("a defender starts from a reference only with shrinkage and full-rank noise.")
    if spec.noise_law != reference.law:
        raise InputError(f"the defender's noise law is {spec.noise_law}, the reference's {reference.law}.")
    if reference.target.size != spec.n_outputs:
        raise InputError(f"the reference releases {reference.target.size} attributes, the defender {spec.n_outputs}.")
    defender.net[-1].weight.zero_()
    defender.net[-1].bias.zero_()
    if defender.skip is not None:
        defender.skip.weight.zero_()
    defender.set_shrink_target(reference.target)
    defender.shrink_weight.copy_(torch.as_tensor(reference.shrink, dtype=torch.float32))
    defender.noise_scale.copy_(torch.as_tensor(reference.scale, dtype=torch.float32))


@dataclass(frozen=True, eq=False)
class BudgetSurface:
    """Holds the shrinkage-plus-noise part of G on its utility budget during training.

    After each defender update, G's per-attribute part (shrinkage alpha towards t, noise scales sigma of
    law L) is moved back onto {alpha, sigma : E mean_j |clip(f(D) + alpha (t - f(D)) + sigma e) - f(D)| = U}
    along the ray through the origin of its noise: sigma <- c sigma with c found by Brent's method on the
    closed-form loss (:func:`bngp.defenses.shrinkage.clipped_deviation_loss`) over :data:`SURFACE_DRAWS`
    calibration memberships; when the shrinkage alone costs more than U, sigma <- 0 and alpha <- c alpha.
    The update thus moves the release along the budget surface, trading shrinkage for noise and noise
    between attributes, instead of off it and back (a Lagrange multiplier chasing the loss under Adam's
    steps of fixed size overshoots both ways).  G's network output is not part of the closed form; the
    multiplier of the utility-budget objective still prices it.
    """

    statistics: np.ndarray
    target: np.ndarray
    law: str
    budget: float

    @classmethod
    def of(cls, start: ShrinkNoiseDefense, population: Population, prior, budget: float) -> "BudgetSurface":
        setting = BudgetSetting.of(population, int(round(float(np.sum(prior.marginals)))), draws=SURFACE_DRAWS)
        return cls(setting.statistics, start.target, start.law, float(budget))

    def loss(self, shrink: np.ndarray, scale: np.ndarray) -> float:
        """The closed-form expected loss of (alpha, sigma) on the surface's draws."""
        shift = shrink * (self.target - self.statistics)
        return float(clipped_deviation_loss(self.law, shift, scale, self.statistics).mean())

    @torch.no_grad()
    def project(self, defender: Defender) -> None:
        """Move G's (alpha, sigma) onto the budget (class docstring); nothing when already within 0.1%."""
        shrink = defender.shrink_weight.detach().double().cpu().numpy()
        scale = defender.noise_scale.detach().double().cpu().numpy()
        if abs(self.loss(shrink, scale) - self.budget) <= 1e-3 * self.budget:
            return
        if self.loss(shrink, np.zeros_like(scale)) > self.budget or not np.any(scale > 0):
            factor = brentq(lambda c: self.loss(c * shrink, np.zeros_like(scale)) - self.budget, 0.0, 1.0, xtol=1e-12) \
                if self.loss(shrink, np.zeros_like(scale)) > self.budget else 1.0
            shrink, scale = factor * shrink, np.zeros_like(scale)
        else:
            high = 2.0
            while self.loss(shrink, high * scale) < self.budget:
                high *= 2.0
            factor = brentq(lambda c: self.loss(shrink, c * scale) - self.budget, 0.0, high, xtol=1e-12)
            scale = factor * scale
        defender.shrink_weight.copy_(torch.as_tensor(shrink, dtype=defender.shrink_weight.dtype))
        defender.noise_scale.copy_(torch.as_tensor(scale, dtype=defender.noise_scale.dtype))
