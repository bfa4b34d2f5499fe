"""Reference mechanisms calibrated to a utility budget, and the budget itself.

A data steward states a budget U on the utility loss mean_j |x_j - f(D)_j| (frequency units,
the loss of arXiv:2410.07414 App. L.3 with one weight per attribute), either absolutely or
relative to L0 = E mean_j |t_j - f(D)_j|, the loss of the data-independent release t = f(theta),
which leaks nothing: only budgets U < L0 ask for a trade-off.  ``0.5x`` means U = L0 / 2.

Every reference here is a :class:`~bngp.defenses.shrinkage.ShrinkNoiseDefense`
x = clip(t + (1 - a) o (f(D) - t) + s o e, 0, 1) whose expected loss, over the prior's memberships
and the noise, is U (the closed form of :func:`~bngp.defenses.shrinkage.clipped_deviation_loss`,
averaged over :func:`calibration_draws` memberships drawn with :data:`CALIBRATION_SEED`; the noise is
scaled by Brent's method):

- ``laplace`` / ``gaussian``: a = 0, one scale (plain DP noise; Dwork et al. 2006, Balle & Wang 2018);
- ``shrinkage``: one a for every attribute, one scale (the shrinkage itself must cost less than U);
- ``suppression``: a_j in {0, 1}, no noise: the attributes whose release exposes individuals most
  per unit of loss are replaced by t_j (in the spirit of Venkatesaramani et al., "Enabling
  trade-offs in privacy and utility in genomic data beacons and summary statistics", Genome
  Research 33, 2023): attribute j is ranked by r_j = E_k[((Z_kj - t_j)^2 / (t_j (1 - t_j)))^2] / E|f(D)_j - t_j|,
  the second moment of an individual's log-likelihood-ratio increment (Sankararaman et al. 2009)
  per unit of loss, and suppressed in that order until the budget is spent (the last one shrunk
  only as far as the budget allows);
- ``linear-optimal``: per-attribute (a_j, s_j) optimised against the linear-Gaussian decoder
  (:mod:`bngp.defenses.linear_optimum`), then one factor on every s_j to meet U exactly;
- ``time-sharing`` (:class:`TimeSharingDefense`): t with probability p = U / L0, else f(D).  By mean AUC
  it beats every noise mechanism at the same loss; every release it makes is useless or fully
  revealing, which TPR at low FPR shows.  It is drawn for reference, never chosen as a defender.

The SPECs registered here (``--defense``): ``budget-laplace:budget=U``, ``budget-gaussian:budget=U``,
``shrinkage:budget=U,shrink=A[,noise=laplace|gaussian]``, ``suppression:budget=U``,
``linear-optimal:budget=U[,noise=laplace|gaussian]``, ``time-sharing:budget=U``; U absolute or ``Fx``.
``budget-gaussian``, ``shrinkage`` and ``linear-optimal`` take ``space=population`` (Gaussian noise in the
candidates' row space, :mod:`bngp.defenses.shaped`; ``weighting=flat|eigen`` for the first two).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from bngp.data.geometry import PopulationSpace, column_blocks
from bngp.data.population import Population
from bngp.data.priors import UniformSubsetPrior
from bngp.errors import InputError
from bngp.release.mechanism import allele_frequencies
from bngp.release.sampling import release_mechanism, sample_releases
from bngp.rng import make_rng, torch_generator
from .base import Defense
from .linear_optimum import optimise_direction_precisions, optimise_precisions
from .context import DefenseContext, DefenseFactory
from .shaped import WEIGHTINGS, ShapedNoiseDefense, direction_weights
from .shrinkage import NOISE_LAWS, ShrinkNoiseDefense, StatisticLevels

__all__ = [
    "data_independent_factory",
    "spec_factory",
    "CALIBRATION_DRAWS",
    "CALIBRATION_SEED",
    "CALIBRATION_VALUES",
    "calibration_draws",
    "MEASUREMENT_SEED",
    "REFERENCE_KINDS",
    "SPACES",
    "UtilityBudget",
    "BudgetSetting",
    "TimeSharingDefense",
    "parse_budget",
    "dp_at_budget",
    "shrinkage_at_budget",
    "suppression_at_budget",
    "linear_optimal_at_budget",
    "shaped_at_budget",
    "row_space_optimal_at_budget",
    "time_sharing_at_budget",
    "reference_at_budget",
]

#: memberships over which a mechanism's expected loss is averaged (the same draws for every mechanism), at most.
CALIBRATION_DRAWS = 2000
#: the most statistics (memberships x |Q|) the calibration holds (float64, 256 MiB): :func:`calibration_draws`.
CALIBRATION_VALUES = 2**25
#: the fewest calibration memberships.
_MIN_CALIBRATION_DRAWS = 16
#: the seed of those draws: fixed, so that every calibration and every measurement of a loss against a
#: budget reads the same memberships.
CALIBRATION_SEED = 20241009
#: the seed of the noise of :meth:`BudgetSetting.measured_loss`.
MEASUREMENT_SEED = CALIBRATION_SEED + 1
#: where a reference's noise lives: every attribute, or the candidates' row space (:mod:`bngp.defenses.shaped`).
SPACES = ("attributes", "population")
#: halvings of the bracket on the model budget of the row-space optimum (:func:`row_space_optimal_at_budget`).
_MODEL_BUDGET_BISECTIONS = 6
#: the references :func:`reference_at_budget` builds.
REFERENCE_KINDS = ("laplace", "gaussian", "shrinkage", "suppression", "linear-optimal", "time-sharing")


def parse_budget(text: str | float) -> tuple[float, bool]:
    """``"0.0073"`` -> (0.0073, False); ``"0.5x"`` -> (0.5, True) (relative to L0)."""
    raw = str(text).strip()
    relative = raw.lower().endswith("x")
    number = raw[:-1] if relative else raw
    try:
        value = float(number)
    except ValueError:
        raise InputError(f"a utility budget is a number (mean |x - f(D)|) or a fraction of the data-independent "
                         f"release's loss such as 0.5x, got {raw!r}.") from None
    if not (math.isfinite(value) and value > 0):
        raise InputError(f"a utility budget must be > 0, got {raw!r}.")
    return value, relative


@dataclass(frozen=True)
class UtilityBudget:
    """A utility budget resolved on a population.

    Attributes:
        value: U, the largest mean |x - f(D)| allowed (frequency units).
        data_independent_loss: L0, the loss of t = f(theta).
        given: the budget as the user wrote it ("0.5x" or "0.0073").
    """

    value: float
    data_independent_loss: float
    given: str

    @property
    def fraction(self) -> float:
        """U / L0."""
        return self.value / self.data_independent_loss

    def to_dict(self) -> dict:
        return {"budget": self.value, "given": self.given, "data_independent_loss": self.data_independent_loss,
                "fraction_of_data_independent": self.fraction}

    def describe(self) -> str:
        return f"{self.value:.5g} ({self.fraction:.3g} of the data-independent release's {self.data_independent_loss:.5g})"


@dataclass(frozen=True, eq=False)
class BudgetSetting:
    """What calibrating to a budget needs of a population: N, t = f(theta) and f(D) on
    :func:`calibration_draws` memberships of the "N of K" prior drawn with :data:`CALIBRATION_SEED`."""

    population: Population
    n_members: int
    target: np.ndarray
    memberships: np.ndarray
    statistics: np.ndarray

    @classmethod
    def of(cls, population: Population, n_members: int, draws: int | None = None) -> "BudgetSetting":
        """The setting of ``population`` for datasets of ``n_members``, over ``draws`` memberships (default
        :func:`calibration_draws` of its width)."""
        draws = calibration_draws(population.n_attributes) if draws is None else int(draws)
        prior = UniformSubsetPrior(population.n_individuals, n_members)
        b = prior.sample(draws, make_rng(CALIBRATION_SEED))
        statistics = np.asarray(allele_frequencies(b, population.genotypes), dtype=np.float64)
        theta = torch.as_tensor(prior.marginals, dtype=torch.float32)[None]
        target = allele_frequencies(theta, population.genotypes)[0].double().numpy()
        return cls(population, int(n_members), target, b, statistics)

    @property
    def data_independent_loss(self) -> float:
        """L0 = mean |t - f(D)| over the calibration draws."""
        return float(np.abs(self.target - self.statistics).mean())

    def resolve(self, text: str | float) -> UtilityBudget:
        """The budget of ``text`` (absolute, or ``Fx`` = F L0); it must lie below L0."""
        value, relative = parse_budget(text)
        base = self.data_independent_loss
        budget = value * base if relative else value
        if budget >= base:
            raise InputError(f"the utility budget {budget:.5g} is not below the data-independent release's loss "
                             f"{base:.5g}: releasing f(theta), which leaks nothing, already meets it.")
        return UtilityBudget(budget, base, str(text).strip())

    @property
    def levels(self) -> StatisticLevels:
        """The calibration draws' statistics as the distinct values of each attribute (the same mean loss),
        computed once."""
        cached = self.__dict__.get("_levels")
        if cached is None:
            cached = StatisticLevels.of(self.statistics)
            object.__setattr__(self, "_levels", cached)
        return cached

    def loss(self, defense: ShrinkNoiseDefense) -> float:
        """The expected loss of ``defense`` over the calibration draws and the noise (closed form, evaluated once
        per distinct value of each attribute: :class:`~bngp.defenses.shrinkage.StatisticLevels`)."""
        return defense.expected_loss(self.levels)

    def measured_loss(self, defense: Defense) -> float:
        """mean |x - f(D)| of one release of ``defense`` per calibration draw, its noise drawn with
        :data:`MEASUREMENT_SEED`: the one measurement of a loss against a budget, for any defense (a
        trained defender's run and ``bngp evaluate`` of it read the same number)."""
        mechanism = release_mechanism(self.population.genotypes, defense.composition)
        releases = sample_releases(mechanism, defense, torch.as_tensor(self.memberships),
                                   torch_generator(MEASUREMENT_SEED))
        return float(np.abs(releases - np.tile(self.statistics, defense.composition)).mean())

    def calibrated(self, shrink: np.ndarray, shape: np.ndarray, law: str, budget: UtilityBudget, label: str,
                   details: dict | None = None) -> ShrinkNoiseDefense:
        """The mechanism with shrinkage ``shrink`` and scales c x ``shape``, c > 0 such that its expected loss
        is the budget."""
        record = {"budget": budget.to_dict(), **(details or {})}
        base = ShrinkNoiseDefense(shrink, np.zeros_like(shape), self.target, law, self.n_members, label, record)
        floor = self.loss(base)
        if floor > budget.value * (1 + 1e-9):
            raise InputError(f"the shrinkage alone costs {floor:.5g}, above the budget {budget.value:.5g}.")
        if not np.any(shape > 0):
            return base
        return self.scaled_to(lambda factor: base.with_scale(factor * shape), budget,
                              budget.value / float(np.mean(shape)))

    def scaled_to(self, build, budget: UtilityBudget, high: float) -> ShrinkNoiseDefense:
        """``build(c)`` at the c > 0 whose expected loss is the budget, to a relative 1e-12 in c; ``build(c)`` must
        scale every noise scale of ``build(1)`` by c, ``build(0)`` must be within the budget and the loss must grow
        with c.  Newton's steps on the closed form's derivative in c
        (:meth:`~bngp.defenses.shrinkage.ShrinkNoiseDefense.expected_loss_and_slope`) from ``high``, kept inside the
        bracket the values give (:func:`_newton_from`).  Where ``build(0)`` spends the budget
        already (one shrinkage a = U / L0 costs exactly U), ``build(0)``."""

        def excess(factor: float) -> tuple[float, float]:
            """The loss of build(c) less the budget, and its derivative in c."""
            loss, slope = build(factor).expected_loss_and_slope(self.levels)
            return loss - budget.value, slope / factor

        if self.loss(build(0.0)) - budget.value >= 0:  # build(0) spends the budget already (within 1e-9)
            return build(0.0)
        return build(_newton_from(excess, high, budget.value))

    @property
    def space(self) -> PopulationSpace:
        """The candidates' geometry (:class:`bngp.data.geometry.PopulationSpace`), computed once."""
        cached = self.__dict__.get("_space")
        if cached is None:
            cached = PopulationSpace.of(self.population, self.n_members)
            object.__setattr__(self, "_space", cached)
        return cached


def calibration_draws(width: int) -> int:
    """The calibration memberships at ``width`` attributes: :data:`CALIBRATION_DRAWS`, fewer where their statistics
    would hold more than :data:`CALIBRATION_VALUES` values, at least 16 (each one's loss is a mean over |Q| values)."""
    return max(_MIN_CALIBRATION_DRAWS, min(CALIBRATION_DRAWS, CALIBRATION_VALUES // max(1, int(width))))


def _newton_from(excess, point: float, budget: float) -> float:
    """The root of an increasing ``excess`` (c -> (value, derivative)) on (0, inf), negative at 0: Newton's steps from
    ``point``, each kept inside the bracket the values so far give (its midpoint, or twice the point while nothing
    above the root is known, where a step would leave it), until a step is below 1e-14 + 1e-12 c (the tolerances
    Brent's method had).  A root beyond 1e12 is refused (no noise scale reaches ``budget``)."""
    low, high = 0.0, math.inf
    value, slope = excess(point)
    for _ in range(200):
        if value == 0.0:
            return point
        if value < 0:
            low = point
        else:
            high = point
        step = point - value / slope if slope > 0 else math.nan
        if not low < step < high:
            step = 0.5 * (low + high) if math.isfinite(high) else 2.0 * point
        if step > 1e12:
            raise InputError(f"no noise scale reaches the budget {budget:.5g}.")
        if abs(step - point) <= 1e-14 + 1e-12 * abs(step) or (high < math.inf and high - low <= 1e-14 + 1e-12 * high):
            return step
        point = step
        value, slope = excess(point)
    return point


def dp_at_budget(setting: BudgetSetting, budget: UtilityBudget, law: str = "laplace") -> ShrinkNoiseDefense:
    """Plain Laplace or Gaussian noise (a = 0, one scale) at the budget."""
    width = setting.target.size
    return setting.calibrated(np.zeros(width), np.ones(width), law, budget, law)


def shrinkage_at_budget(setting: BudgetSetting, budget: UtilityBudget, shrink: float,
                        law: str = "laplace") -> ShrinkNoiseDefense:
    """One shrinkage a towards t on every attribute, then one noise scale, at the budget."""
    if not 0.0 <= shrink <= 1.0:
        raise InputError(f"`shrink` must be in [0, 1], got {shrink:g}.")
    width = setting.target.size
    return setting.calibrated(np.full(width, float(shrink)), np.ones(width), law, budget, "shrinkage",
                              {"shrink": float(shrink)})


def _exposure_per_loss(setting: BudgetSetting) -> np.ndarray:
    """r_j of the module docstring (0 for an attribute every individual shares), from the candidates block by block
    of attributes."""
    frequency, moment = np.empty(setting.target.size), np.empty(setting.target.size)
    for start, stop, block in column_blocks(setting.population.genotypes):
        dense = np.asarray(block, dtype=np.float64)
        mean = dense.mean(axis=0)
        spread = mean * (1.0 - mean)
        frequency[start:stop] = mean
        moment[start:stop] = (((dense - mean) ** 2 / np.where(spread > 0, spread, 1.0)) ** 2).mean(axis=0)
    spread = frequency * (1.0 - frequency)
    cost = np.abs(setting.statistics - setting.target).mean(axis=0)
    return np.where((spread > 0) & (cost > 0), moment / np.where(cost > 0, cost, 1.0), 0.0)


def suppression_at_budget(setting: BudgetSetting, budget: UtilityBudget) -> ShrinkNoiseDefense:
    """Attributes replaced by t_j in order of exposure per unit of loss until the budget is spent."""
    width = setting.target.size
    cost = np.abs(setting.statistics - setting.target).mean(axis=0) / width  # each one's share of the mean loss
    order = np.argsort(-_exposure_per_loss(setting), kind="stable")
    spent = np.cumsum(cost[order])
    whole = int(np.searchsorted(spent, budget.value, side="right"))
    shrink = np.zeros(width)
    shrink[order[:whole]] = 1.0
    if whole < width:
        left = budget.value - (spent[whole - 1] if whole else 0.0)
        shrink[order[whole]] = min(1.0, left / cost[order[whole]]) if cost[order[whole]] > 0 else 0.0
    return setting.calibrated(shrink, np.zeros(width), "laplace", budget, "suppression",
                              {"suppressed": whole})


def shaped_at_budget(setting: BudgetSetting, budget: UtilityBudget, shrink: float = 0.0,
                     weighting: str = "flat") -> ShapedNoiseDefense:
    """One shrinkage a towards t, then Gaussian noise in the candidates' row space weighted ``weighting``
    (:class:`~bngp.defenses.shaped.ShapedNoiseDefense`), its scale calibrated to the budget."""
    if not 0.0 <= shrink <= 1.0:
        raise InputError(f"`shrink` must be in [0, 1], got {shrink:g}.")
    space = setting.space
    label = "gaussian" if shrink == 0 else "shrinkage"
    record = {"budget": budget.to_dict(), "shrink": float(shrink), "space": "population", "weighting": weighting}
    shape = ShapedNoiseDefense(space, shrink, direction_weights(space, weighting), setting.n_members, label, record,
                               weighting=weighting)
    floor = setting.loss(shape.scaled(0.0))
    if floor > budget.value * (1 + 1e-9):
        raise InputError(f"the shrinkage alone costs {floor:.5g}, above the budget {budget.value:.5g}.")
    return setting.scaled_to(shape.scaled, budget, budget.value / max(float(np.mean(shape.scale)), 1e-300))


def linear_optimal_at_budget(setting: BudgetSetting, budget: UtilityBudget, law: str = "laplace") -> ShrinkNoiseDefense:
    """Per-attribute shrinkage and noise optimised against the linear-Gaussian decoder
    (:func:`~bngp.defenses.linear_optimum.optimise_precisions`), its noise rescaled to the budget; with
    Laplace noise each s_j is the Laplace scale of the same variance (sigma_j / sqrt 2)."""
    optimum = optimise_precisions(np.asarray(setting.population.genotypes), setting.n_members, budget.fraction)
    shape = optimum.sigma / math.sqrt(2.0) if law == "laplace" else optimum.sigma
    return setting.calibrated(optimum.shrink, shape, law, budget, "linear-optimal",
                              {"model_auc": optimum.model_auc, "model_loss": optimum.model_loss})


def row_space_optimal_at_budget(setting: BudgetSetting, budget: UtilityBudget) -> ShapedNoiseDefense:
    """Shrinkage and Gaussian noise per direction of the candidates' row space optimised against the
    linear-Gaussian decoder, its noise rescaled to the budget.

    In the coordinates y = V^T (x - t) the release is y_i = (1 - a_i) s_i U_i^T (b - theta) / N + w_i g_i: the
    model of :mod:`~bngp.defenses.linear_optimum` with the K x r matrix U diag(s) in place of the centred
    genotypes (its column variances are the eigenvalues lambda_i of Cov(f(D))), so
    :func:`~bngp.defenses.linear_optimum.optimise_direction_precisions` gives each direction its Wiener shrinkage
    and noise (the decoder's posterior in closed form: U has orthonormal columns).  Its loss model counts
    directions, not attributes; the exact per-attribute loss is the closed form of
    :class:`~bngp.defenses.shaped.ShapedNoiseDefense`, and where the optimum's shrinkage alone spends more
    than the budget the model budget is lowered until it does not: by 0.8 at a time to a model budget that fits,
    then by bisection (:data:`_MODEL_BUDGET_BISECTIONS` halvings) towards the largest that fits."""
    space = setting.space
    record = {"budget": budget.to_dict(), "space": "population", "weighting": "optimal"}

    def shaped_at(fraction: float) -> tuple[ShapedNoiseDefense, bool]:
        optimum = optimise_direction_precisions(space.left, space.singular_values, setting.n_members, fraction)
        shape = ShapedNoiseDefense(space, optimum.shrink, optimum.sigma, setting.n_members, "linear-optimal",
                                   {**record, "model_auc": optimum.model_auc, "model_budget": fraction},
                                   weighting="optimal")
        return shape, setting.loss(shape.scaled(0.0)) <= budget.value * (1 + 1e-9)

    fraction, above = budget.fraction, None
    for _ in range(12):
        shape, fits = shaped_at(fraction)
        if fits:
            break
        above, fraction = fraction, fraction * 0.8
    else:
        raise InputError(f"no shrinkage in the row space fits the budget {budget.value:.5g}.")
    if above is not None:
        below = fraction
        for _ in range(_MODEL_BUDGET_BISECTIONS):
            middle = 0.5 * (below + above)
            candidate, fits = shaped_at(middle)
            if fits:
                shape, below = candidate, middle
            else:
                above = middle
    return setting.scaled_to(shape.scaled, budget, budget.value / max(float(np.mean(shape.scale)), 1e-300))


class TimeSharingDefense(Defense):
    """Release t = f(theta) with probability p, else f(D): xi = B (t - f(D)), B ~ Bernoulli(p) per release."""

    name = "time-sharing"

    def __init__(self, target: np.ndarray, probability: float, budget: UtilityBudget | None = None) -> None:
        if not 0.0 <= probability <= 1.0:
            raise InputError(f"the time-sharing probability must be in [0, 1], got {probability:g}.")
        self.target = np.asarray(target, dtype=np.float64)
        self.probability = float(probability)
        self.budget = budget

    def noise(self, b: torch.Tensor, x_hat: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        chosen = (torch.rand((x_hat.shape[0], 1), generator=generator, dtype=torch.float64) < self.probability)
        target = torch.as_tensor(self.target, dtype=torch.float64)
        return (chosen * (target - x_hat.detach().cpu().double())).to(x_hat.device)

    def describe(self) -> dict:
        return {"name": self.name, "label": "time-sharing", "probability": self.probability,
                "budget": None if self.budget is None else self.budget.to_dict(), "guarantee": None}


def time_sharing_at_budget(setting: BudgetSetting, budget: UtilityBudget) -> TimeSharingDefense:
    """t with probability p = U / L0, else f(D): its expected loss is p L0 = U."""
    return TimeSharingDefense(setting.target, budget.fraction, budget)


def reference_at_budget(kind: str, setting: BudgetSetting, budget: UtilityBudget, *, shrink: float | None = None,
                        law: str = "laplace", space: str = "attributes", weighting: str = "flat") -> Defense:
    """The reference ``kind`` (:data:`REFERENCE_KINDS`) at the budget; with ``space="population"`` (Gaussian
    ``budget-gaussian`` and ``shrinkage`` only) its noise confined to the candidates' row space, weighted
    ``weighting`` (:func:`shaped_at_budget`)."""
    if law not in NOISE_LAWS:
        raise InputError(f"`noise` must be one of {', '.join(NOISE_LAWS)}, got {law!r}.")
    if space not in SPACES:
        raise InputError(f"`space` must be one of {', '.join(SPACES)}, got {space!r}.")
    if weighting not in WEIGHTINGS:
        raise InputError(f"`weighting` must be one of {', '.join(WEIGHTINGS)}, got {weighting!r}.")
    if space == "population":
        if kind not in ("gaussian", "shrinkage", "linear-optimal") or law != "gaussian":
            raise InputError("`space=population` shapes Gaussian noise only (budget-gaussian, or shrinkage or "
                             "linear-optimal with noise=gaussian): rotated into the row space, Laplace noise has no "
                             "closed-form loss.")
        if kind == "linear-optimal":
            return row_space_optimal_at_budget(setting, budget)
        if kind == "shrinkage" and shrink is None:
            raise InputError("the shrinkage reference needs `shrink=A`.")
        return shaped_at_budget(setting, budget, 0.0 if kind == "gaussian" else shrink, weighting)
    if kind in ("laplace", "gaussian"):
        return dp_at_budget(setting, budget, kind)
    if kind == "shrinkage":
        if shrink is None:
            raise InputError("the shrinkage reference needs `shrink=A`.")
        return shrinkage_at_budget(setting, budget, shrink, law)
    if kind == "suppression":
        return suppression_at_budget(setting, budget)
    if kind == "linear-optimal":
        return linear_optimal_at_budget(setting, budget, law)
    if kind == "time-sharing":
        return time_sharing_at_budget(setting, budget)
    raise InputError(f"unknown reference {kind!r}; known: {', '.join(REFERENCE_KINDS)}.")


def spec_factory(spec_name: str, kind: str, keys: tuple[str, ...]) -> DefenseFactory:
    def build(params: dict[str, str], context: DefenseContext) -> Defense:
        unknown = [key for key in params if key not in ("budget", *keys)]
        if unknown:
            raise InputError(f"defense `{spec_name}` does not take `{unknown[0]}`; allowed: budget, {', '.join(keys)}.")
        if "budget" not in params:
            raise InputError(f"defense `{spec_name}` needs `budget=U` (mean |x - f(D)|, or a fraction such as 0.5x).")
        setting = BudgetSetting.of(context.population, context.n_members)
        budget = setting.resolve(params["budget"])
        shrink = None
        if "shrink" in keys:
            if "shrink" not in params:
                raise InputError(f"defense `{spec_name}` needs `shrink=A` (in [0, 1]).")
            try:
                shrink = float(params["shrink"])
            except ValueError:
                raise InputError(f"`shrink` of defense `{spec_name}` must be a number, got {params['shrink']!r}.") from None
        space = params.get("space", "attributes")
        if "weighting" in params and space != "population":
            raise InputError(f"`weighting` of defense `{spec_name}` shapes noise in the population's row space; "
                             "give it with `space=population`.")
        law = params.get("noise", "gaussian" if space == "population" else "laplace")
        if kind == "gaussian":
            law = "gaussian"
        defense = reference_at_budget(kind, setting, budget, shrink=shrink, law=law, space=space,
                                      weighting=params.get("weighting", "flat"))
        if isinstance(defense, ShrinkNoiseDefense):
            defense.name = spec_name
        return defense

    build.__doc__ = f"``{spec_name}:budget=U[,{',' .join(k + '=...' for k in keys)}]``: {kind} at a utility budget."
    return build


def data_independent_factory(params: dict[str, str], context: DefenseContext) -> Defense:
    """``data-independent``: the data-independent release x = f(theta) (shrinkage 1, no noise; loss L0,
    arXiv:2410.07414 section 3.3)."""
    if params:
        raise InputError(f"defense `data-independent` takes no parameters, got `{next(iter(params))}`.")
    setting = BudgetSetting.of(context.population, context.n_members)
    width = setting.target.size
    return ShrinkNoiseDefense(np.ones(width), np.zeros(width), setting.target, "laplace", context.n_members,
                              label="data-independent", name="data-independent")
