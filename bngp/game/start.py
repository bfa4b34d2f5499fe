"""Where a budget-trained defender starts, and how it stays on its budget: G set to the best reference
mechanism of :func:`bngp.references.rank_references` (arXiv:2410.07414 section 3.3, the utility-budget
objective), and the budget surface its per-attribute part is held on during training.

Every reference is a :class:`~bngp.defenses.shrinkage.ShrinkNoiseDefense`, which the defender G holds
exactly with a zero output layer (shrinkage alpha = a, full-rank noise sigma = s, noise law Laplace or
Gaussian; for noise shaped to the population, sigma one scale per direction of the candidates' row space):
:func:`start_defender` sets G to it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import cached_property

import numpy as np
import torch
from scipy.optimize import brentq

from bngp.data.population import Population
from bngp.defenses.budget import BudgetSetting
from bngp.defenses.network import Defender
from bngp.defenses.shaped import ShapedNoiseDefense
from bngp.defenses.shrinkage import ShrinkNoiseDefense, clipped_deviation_loss, clipped_deviation_loss_and_slopes
from bngp.errors import InputError
from bngp.references import ReferenceRanking

from .config import GameConfig

__all__ = ["SURFACE_DRAWS", "BudgetSurface", "defender_row_space_rank", "start_config", "start_defender"]

#: calibration draws on which :class:`BudgetSurface` evaluates the closed-form loss.
SURFACE_DRAWS = 256
#: how close to the budget, relative, the surface puts the loss (far below the 0.1% it tolerates before moving G).
_SURFACE_TOLERANCE = 1e-6
#: the Newton steps :meth:`BudgetSurface.project` takes on a factor of the noise or of the shrinkage before its
#: bracketing root finders.
_NEWTON_STEPS = 3


def start_config(ranking: ReferenceRanking, config: GameConfig) -> GameConfig:
    """``config`` for a defender started from ``ranking.best``: the reference's noise law, and the in-game
    refits on as many shadow releases as the converged attack that ranked it needed (G's noise lies in
    the row space when the reference's does: :func:`defender_row_space_rank`)."""
    return replace(config, defender=replace(config.defender, noise_law=ranking.best.law),
                   attacker=replace(config.attacker, refit_releases=ranking.best_score.releases))


def defender_row_space_rank(reference: ShrinkNoiseDefense | None) -> int:
    """The ``DefenderSpec.row_space_rank`` G needs to hold ``reference`` exactly: r for noise in the candidates'
    row space (:class:`~bngp.defenses.shaped.ShapedNoiseDefense`), else 0."""
    return reference.space.rank if isinstance(reference, ShapedNoiseDefense) else 0


@torch.no_grad()
def start_defender(defender: Defender, reference: ShrinkNoiseDefense) -> None:
    """Set G to release exactly ``reference``: a zero output layer (and linear skip), shrinkage alpha = a
    towards t, full-rank noise sigma = s of the reference's law (in the row space V with per-direction scales w
    for a shaped reference)."""
    spec = defender.spec
    if not (spec.shrink and spec.full_rank_noise):
        raise InputError("a defender starts from a reference only with shrinkage and full-rank noise.")
    if spec.noise_law != reference.law:
        raise InputError(f"the defender's noise law is {spec.noise_law}, the reference's {reference.law}.")
    if reference.target.size != spec.n_outputs:
        raise InputError(f"the reference releases {reference.target.size} attributes, the defender {spec.n_outputs}.")
    if spec.row_space_rank != defender_row_space_rank(reference):
        raise InputError(f"the defender's noise has row-space rank {spec.row_space_rank}, the reference's "
                         f"{defender_row_space_rank(reference)}.")
    defender.net[-1].weight.zero_()
    defender.net[-1].bias.zero_()
    if defender.skip is not None:
        defender.skip.weight.zero_()
    defender.set_shrink_target(reference.target)
    if isinstance(reference, ShapedNoiseDefense):
        defender.set_noise_basis(reference.space.dense_basis())
        defender.shrink_weight.copy_(torch.as_tensor(reference.direction_shrink, dtype=torch.float32))
        defender.noise_scale.copy_(torch.as_tensor(reference.direction_scales, dtype=torch.float32))
    else:
        defender.shrink_weight.copy_(torch.as_tensor(reference.shrink, dtype=torch.float32))
        defender.noise_scale.copy_(torch.as_tensor(reference.scale, dtype=torch.float32))


def _root_near(excess, guess: float, upper: float | None) -> float:
    """The root of ``excess``, increasing on [0, ``upper``] (no upper end: [0, inf)) and negative at 0, found near
    ``guess``: a bracket of relative half-width 1% around it, widened fourfold until it holds the sign change (its
    ends kept inside [0, ``upper``]), then Brent's method to a relative 1e-9 (below the float32 resolution in which
    G holds its parameters; absolute 1e-12 near 0); each value is computed once."""
    values: dict[float, float] = {}

    def cached(c: float) -> float:
        if c not in values:
            values[c] = excess(c)
        return values[c]

    guess = min(max(float(guess), 1e-12), upper if upper is not None else np.inf)
    width = 0.01
    while True:
        low = guess * (1.0 - width) if width < 1.0 else 0.0
        high = guess * (1.0 + width) if upper is None else min(guess * (1.0 + width), upper)
        if (low == 0.0 or cached(low) < 0.0) and cached(high) >= 0.0:
            break
        if (upper is not None and high == upper and low == 0.0) or width > 1e12:
            raise InputError("no point of this ray of the defender's parameters meets the utility budget.")
        width *= 4.0
    if values.get(high) == 0.0:
        return high
    return brentq(cached, low, high, xtol=1e-12, rtol=1e-9)


def _secant_or_root(excess, at_zero: float, at_one: float, tolerance: float) -> float:
    """A root of ``excess`` (increasing on [0, inf), ``at_zero`` < 0 and ``at_one`` its values at 0 and 1) to within
    ``tolerance`` of 0: the chord through (0, at_zero) and (1, at_one), then one secant step from (1, at_one), each
    kept when its value is within the tolerance; else :func:`_root_near` from the last point."""
    guess = -at_zero / max(at_one - at_zero, 1e-300)
    value = excess(guess)
    if abs(value) <= tolerance:
        return guess
    if value != at_one:
        step = guess - value * (guess - 1.0) / (value - at_one)
        if step > 0.0:
            value = excess(step)
            if abs(value) <= tolerance:
                return step
            guess = step
    return _root_near(excess, guess, None)


@dataclass(frozen=True, eq=False)
class BudgetSurface:
    """Holds the shrinkage-plus-noise part of G on its utility budget during training.

    After each defender update, G's per-attribute (or, in the row space, per-direction) part (shrinkage alpha
    towards t, noise scales sigma of law L) is moved back onto {alpha, sigma : E mean_j |clip(f(D) + alpha (t - f(D)) + sigma e) - f(D)| = U}
    along the ray through the origin of its noise: sigma <- c sigma with c found on the closed-form loss
    (:func:`bngp.defenses.shrinkage.clipped_deviation_loss`) over :data:`SURFACE_DRAWS` calibration memberships,
    to a relative 1e-6 (Newton's method from c = 1 on the closed form's derivative in the scale, at most
    :data:`_NEWTON_STEPS` steps; else a chord, a secant step, then Brent's method); when the shrinkage alone
    costs more than U, sigma <- 0 and alpha <- c alpha (Newton's method on the derivative in c likewise, else
    Brent's method).
    The update thus moves the release along the budget surface, trading shrinkage for noise and noise
    between attributes, instead of off it and back (a Lagrange multiplier chasing the loss under Adam's
    steps of fixed size overshoots both ways).  G's network output is not part of the closed form; the
    multiplier of the utility-budget objective still prices it.
    """

    statistics: np.ndarray
    target: np.ndarray
    law: str
    budget: float
    basis: np.ndarray | None = None
    _shifts: dict = field(default_factory=dict, repr=False)

    @classmethod
    def of(cls, start: ShrinkNoiseDefense, population: Population, prior, budget: float) -> "BudgetSurface":
        setting = BudgetSetting.of(population, int(round(float(np.sum(prior.marginals)))), draws=SURFACE_DRAWS)
        basis = start.space.dense_basis() if isinstance(start, ShapedNoiseDefense) else None
        return cls(setting.statistics, start.target, start.law, float(budget), basis)

    @classmethod
    def on_setting(cls, start: ShrinkNoiseDefense, setting: BudgetSetting, budget: float) -> "BudgetSurface":
        """The surface on the calibration memberships of ``setting``, those the budget and the references were
        calibrated on: ``start`` (calibrated there) lies on it."""
        basis = start.space.dense_basis() if isinstance(start, ShapedNoiseDefense) else None
        return cls(setting.statistics, start.target, start.law, float(budget), basis)

    def _shift(self, shrink: np.ndarray, factor: float = 1.0) -> np.ndarray:
        """The deterministic part of the deviation at the shrinkage c alpha (c = ``factor``): c alpha o (t - f(D)), or
        in the row space V diag(1 - c alpha) V^T (f(D) - t) - (f(D) - t) = D_0 - c V diag(alpha) V^T (f(D) - t),
        linear in c (D_0 formed once; the product of the last alpha and the shift at c = 1 kept: not to be modified)."""
        if self.basis is None:
            return (factor * shrink) * (self.target - self.statistics)
        key = shrink.tobytes()
        if key not in self._shifts:
            self._shifts.clear()
            product = (self._centred[1] * shrink) @ self.basis.T
            self._shifts[key] = (product, self._unshrunk - product)
        product, at_one = self._shifts[key]
        return at_one if factor == 1.0 else self._unshrunk - factor * product

    @cached_property
    def _unshrunk(self) -> np.ndarray:
        """D_0 = V V^T (f(D) - t) - (f(D) - t), the deviation without shrinkage or noise (0 up to rounding: f(D) - t
        lies in the row space)."""
        centred, coordinates = self._centred
        return coordinates @ self.basis.T - centred

    @cached_property
    def _squared_basis(self) -> np.ndarray:
        """V o V, which maps per-direction noise variances to per-attribute ones."""
        return self.basis**2

    @cached_property
    def _centred(self) -> tuple[np.ndarray, np.ndarray]:
        """(f(D) - t, V^T (f(D) - t)) of the surface's draws, fixed for its life."""
        centred = self.statistics - self.target
        return centred, centred @ self.basis

    def loss(self, shrink: np.ndarray, scale: np.ndarray, factor: float = 1.0) -> float:
        """The closed-form expected loss of (c alpha, sigma) (c = ``factor``) on the surface's draws; in the row space
        alpha and sigma hold one value per direction, and attribute j's noise scale is sqrt(sum_i V_ji^2 sigma_i^2)."""
        if self.basis is not None:
            scale = np.sqrt(self._squared_basis @ scale**2)
        return float(clipped_deviation_loss(self.law, self._shift(shrink, factor), scale, self.statistics).mean())

    def loss_and_slopes(self, shrink: np.ndarray, scale: np.ndarray, factor: float = 1.0) -> tuple[float, float, float]:
        """:meth:`loss` of (c alpha, sigma) (c = ``factor``) and its derivatives d/dk loss(c alpha, k sigma) at k = 1
        (the mean of s_j dE_j/ds_j, s_j the attribute's scale, which k scales too) and d/dc loss(c alpha, sigma)
        (the mean of dE_j/dc_j times the shift's derivative in c), from one pass of
        :func:`bngp.defenses.shrinkage.clipped_deviation_loss_and_slopes`."""
        if self.basis is not None:
            scale = np.sqrt(self._squared_basis @ scale**2)
        loss, by_scale, by_shift = clipped_deviation_loss_and_slopes(self.law, self._shift(shrink, factor), scale,
                                                                     self.statistics)
        moved = shrink * (self.target - self.statistics) if self.basis is None else -self._shifts[shrink.tobytes()][0]
        return float(loss.mean()), float((by_scale * scale).mean()), float((by_shift * moved).mean())

    def loss_and_gradient(self, shrink: np.ndarray, scale: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
        """:meth:`loss` of per-direction (alpha, sigma) in the row space and its gradient in each alpha_i and sigma_i:
        with attribute j's scale s_j = sqrt(sum_i V_ji^2 sigma_i^2) and shift c_dj = D_0dj - sum_i V_ji alpha_i y_di
        on draw d (y = V^T (f(D) - t)), d loss / d sigma_i = sigma_i mean_{d,j} (dE/ds)_dj V_ji^2 / s_j and
        d loss / d alpha_i = -mean_{d,j} (dE/dc)_dj V_ji y_di, from one pass of
        :func:`bngp.defenses.shrinkage.clipped_deviation_loss_and_slopes` (an attribute without noise contributes
        no scale slope)."""
        if self.basis is None:
            raise InputError("the per-direction gradient of the loss needs noise in the candidates' row space.")
        marginal = np.sqrt(self._squared_basis @ scale**2)
        loss, by_scale, by_shift = clipped_deviation_loss_and_slopes(self.law, self._shift(shrink), marginal,
                                                                     self.statistics)
        draws, width = by_scale.shape
        per_scale = np.divide(by_scale.mean(axis=0), marginal, out=np.zeros(width), where=marginal > 0)
        scale_gradient = scale * (per_scale @ self._squared_basis) / width
        shrink_gradient = -np.einsum("di,di->i", by_shift @ self.basis, self._centred[1]) / (draws * width)
        return float(loss.mean()), shrink_gradient, scale_gradient

    def _newton(self, evaluate, value: float, slope: float) -> float | None:
        """c with |loss(c) - U| within the surface's tolerance, by Newton's method from c = 1 (``value`` = loss(1),
        ``slope`` its derivative; ``evaluate``(c) gives (loss(c), its derivative)) in at most :data:`_NEWTON_STEPS`
        steps; None when a step leaves c > 0 or a derivative is not positive."""
        factor = 1.0
        for _ in range(_NEWTON_STEPS):
            if not slope > 0.0:
                return None
            factor -= (value - self.budget) / slope
            if not factor > 0.0:
                return None
            value, slope = evaluate(factor)
            if abs(value - self.budget) <= _SURFACE_TOLERANCE * self.budget:
                return factor
        return None

    @torch.no_grad()
    def project(self, defender: Defender) -> None:
        """Move G's (alpha, sigma) onto the budget (class docstring); nothing when already within 0.1%."""
        shrink = defender.shrink_weight.detach().double().cpu().numpy()
        scale = defender.noise_scale.detach().double().cpu().numpy()
        current, by_scale, _ = self.loss_and_slopes(shrink, scale)
        if abs(current - self.budget) <= 1e-3 * self.budget:
            return
        noisy = bool(np.any(scale > 0))

        def scaled(c: float) -> tuple[float, float]:  # d/dc loss(alpha, c sigma) = (d/dk loss(alpha, k c sigma)) / c
            value, slope, _ = self.loss_and_slopes(shrink, c * scale)
            return value, slope / c

        factor = self._newton(scaled, current, by_scale) if noisy else None
        if factor is not None:
            defender.noise_scale.copy_(torch.as_tensor(factor * scale, dtype=defender.noise_scale.dtype))
            return
        zero = np.zeros_like(scale)
        floor, _, by_shrink = self.loss_and_slopes(shrink, zero)
        if floor > self.budget or not noisy:
            if floor > self.budget:  # the loss of c alpha grows from 0 at c = 0 to floor at c = 1
                factor = self._newton(lambda c: self.loss_and_slopes(shrink, zero, c)[::2], floor, by_shrink)
                if factor is None:
                    factor = _root_near(lambda c: self.loss(shrink, zero, c) - self.budget, self.budget / floor, 1.0)
                shrink = factor * shrink
            scale = zero
        else:  # the loss of c sigma grows from floor at c = 0 through current at c = 1: start where a line says
            factor = _secant_or_root(lambda c: self.loss(shrink, c * scale) - self.budget, floor - self.budget,
                                     current - self.budget, _SURFACE_TOLERANCE * self.budget)
            scale = factor * scale
        defender.shrink_weight.copy_(torch.as_tensor(shrink, dtype=defender.shrink_weight.dtype))
        defender.noise_scale.copy_(torch.as_tensor(scale, dtype=defender.noise_scale.dtype))
