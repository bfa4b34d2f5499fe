"""Shrinkage towards the data-independent release plus noise: the linear reference mechanisms.

Notation of arXiv:2410.07414 section 2.2: membership b of N out of K, f(D) = Z^T b / N, and the
data-independent release t = f(theta) = Z^T theta / N (theta the prior mean).  The mechanism

    x = clip(t + (1 - a) o (f(D) - t) + s o e, 0, 1),   e_j i.i.d. Laplace(1) or N(0, 1),

with per-attribute shrinkage a in [0, 1]^|Q| and noise scales s >= 0, holds every reference
mechanism of the utility-budget frontier: a = 0 with one scale is the Laplace or Gaussian
mechanism, one a with one scale is shrinkage plus noise, a_j in {0, 1} without noise is
suppression of attributes, and per-attribute (a_j, s_j) the optimum against the linear decoder
(:mod:`bngp.defenses.budget`).  It is also the family the BNGP defender G holds with a zero output
layer (:class:`bngp.defenses.network.Defender`: shrinkage alpha and full-rank noise sigma), so a
game can start from any of them.

**Utility loss in closed form.**  The deviation before clipping is D = c + s e with c = -a (f(D) - t);
clipping to [0, 1] caps it at x = f(D)_j below and 1 - x above, so the realised loss is
g(D) = min(-D, x) for D < 0 and min(D, 1 - x) for D > 0, and with F(z) = P(D < z) and
M(z) = E[D 1{D < z}],

    E g(D) = M(1 - x) - 2 M(0) + M(-x) + x F(-x) + (1 - x)(1 - F(1 - x)),

where for Gaussian e, u = (z - c)/s: F = Phi(u), M = c Phi(u) - s phi(u); for Laplace e: F = e^u/2
and M = e^u (z - s)/2 for u <= 0, F = 1 - e^-u/2 and M = c - e^-u (z + s)/2 for u > 0.

**Guarantee.**  Replacing one of N members moves each f(D)_j by at most 1/N, and the mechanism is
post-processing of (1 - a) o f(D) / s plus unit noise: with Laplace noise it is eps-DP with
eps = sum_j (1 - a_j) / (N s_j) (the L1 sensitivity |Q|/N of the paper, App. L.3, at a = 0 and one
scale); with Gaussian noise mu-GDP with mu = ||(1 - a) / (N s)||_2 (Dong, Roth & Su 2022), reported
with its eps at delta = 1e-5 (Balle & Wang 2018).  An attribute released exactly (s_j = 0, a_j < 1)
makes eps infinite (no guarantee); a suppressed one (a_j = 1) costs nothing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from scipy.special import ndtr

from bngp.errors import InputError
from bngp.release.noise import sample_laplace
from bngp.release.noise_law import NoiseLaw
from .base import Defense, Guarantee
from .calibration import gaussian_epsilon

__all__ = ["NOISE_LAWS", "REPORTED_DELTA", "ShrinkNoiseDefense", "StatisticLevels", "clipped_deviation_loss",
           "clipped_deviation_loss_and_slopes"]

#: the laws of the unit noise e.
NOISE_LAWS = ("laplace", "gaussian")
#: scales beyond which a bound of [0, 1] no longer changes the clipped loss in float64: P(e < -u) and the partial
#: means there are below 1e-19 of the scale (Gaussian: Phi(-9) = 1.1e-19; Laplace: e^-44 / 2 = 4e-20).
_FAR = {"gaussian": 9.0, "laplace": 44.0}
#: the delta at which a Gaussian shrinkage mechanism's eps is reported.
REPORTED_DELTA = 1e-5


def _check_law(law: str) -> str:
    if law not in NOISE_LAWS:
        raise InputError(f"`noise` must be one of {', '.join(NOISE_LAWS)}, got {law!r}.")
    return law


def _cdf_and_partial_mean(law: str, z: np.ndarray, c: np.ndarray, s: np.ndarray
                          ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """F(z) = P(D < z), M(z) = E[D 1{D < z}] and psi(u) for D = c + s e, s > 0, u = (z - c) / s (module
    docstring); psi is the density-like term with E[e 1{alpha < e < beta}] = psi(alpha) - psi(beta): the standard
    normal density for Gaussian e, (1 + |u|) e^-|u| / 2 for Laplace e."""
    u = (z - c) / s
    if law == "gaussian":
        density = np.exp(-0.5 * u * u) / math.sqrt(2.0 * math.pi)
        cdf = ndtr(u)
        return cdf, c * cdf - s * density, density
    below = u <= 0
    tail = 0.5 * np.exp(-np.abs(u))
    cdf = np.where(below, tail, 1.0 - tail)
    mean = np.where(below, tail * (z - s), c - tail * (z + s))
    return cdf, mean, tail * (1.0 + np.abs(u))


def clipped_deviation_loss(law: str, shift: np.ndarray, scale: np.ndarray, x_hat: np.ndarray) -> np.ndarray:
    """E|clip(x_hat + shift + scale e, 0, 1) - x_hat| over e, elementwise (module docstring).

    Args:
        law: "laplace" (e ~ Laplace(1), E|e| = 1) or "gaussian" (e ~ N(0, 1)).
        shift: c, the deterministic part of the deviation (broadcast with the others).
        scale: s >= 0; where s = 0 the loss is |clip(x_hat + c) - x_hat|.
        x_hat: f(D) in [0, 1].

    Returns:
        float64 array of the broadcast shape.
    """
    return _clipped_deviation(law, shift, scale, x_hat, slope=False)[0]


def clipped_deviation_loss_and_slopes(law: str, shift: np.ndarray, scale: np.ndarray, x_hat: np.ndarray
                                      ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`clipped_deviation_loss` and its derivatives in the scale and in the shift, elementwise, from the same
    pass.

    With g the realised loss (module docstring), g' = -1 on (-x, 0), +1 on (0, 1 - x) and 0 outside, so with
    u_z = (z - c) / s:
    d/ds E g(c + s e) = E[g'(c + s e) e] = 2 psi(u_0) - psi(u_-x) - psi(u_1-x), psi the standard normal density for
    Gaussian e and (1 + |u|) e^-|u| / 2 for Laplace e (E[e 1{a < e < b}] = psi(a) - psi(b));
    d/dc E g(c + s e) = E g'(c + s e) = F(1 - x) + F(-x) - 2 F(0).
    Where s = 0: the derivative in s is returned as 0 (a caller scaling every s by a factor multiplies it by s),
    and the one in c is g'(c) (0 at the kinks c = 0, -x, 1 - x).  Returns (loss, d/ds, d/dc), float64 arrays of
    the broadcast shape.
    """
    loss, slopes = _clipped_deviation(law, shift, scale, x_hat, slope=True)
    return loss, *slopes


def _clipped_deviation(law: str, shift, scale, x_hat, slope: bool
                       ) -> tuple[np.ndarray, tuple[np.ndarray, np.ndarray] | None]:
    """The loss (and, with ``slope``, its derivatives in s and c) of :func:`clipped_deviation_loss_and_slopes`.

    Where the deviation's centre c lies more than _FAR[law] scales from the kink at 0 and from both bounds, the
    loss is |c| and the derivatives 0 and sign(c) up to terms below the float64 rounding of |c| (the module
    docstring's tails), as without noise; the closed form is evaluated only on the other entries: those the noise
    carries across the kink alone (far from the bounds: E|c + s e| = E[D] - 2 M(0)) and those near a bound (the
    whole form)."""
    law = _check_law(law)
    # flat and contiguous (a broadcast operand copied once), so that the entries below are gathered by their indices:
    # far faster than boolean masks of two-dimensional arrays
    arrays = np.broadcast_arrays(np.asarray(shift, np.float64), np.asarray(scale, np.float64),
                                 np.asarray(x_hat, np.float64))
    shape = arrays[0].shape
    shift, scale, x_hat = (np.ascontiguousarray(array).reshape(-1) for array in arrays)
    if np.any(scale < 0):
        raise InputError("noise scales must be >= 0.")
    moved = x_hat + shift
    loss = np.abs(np.clip(moved, 0.0, 1.0) - x_hat)
    if slope:  # g'(c) where nothing reaches: sign(c) where x + c lies inside (0, 1), else 0
        slopes = (np.zeros_like(loss), np.sign(shift))
        np.multiply(slopes[1], (moved > 0.0) & (moved < 1.0), out=slopes[1])
    else:
        slopes = None
    reach = _FAR[law] * scale
    noisy = scale > 0
    near = noisy & (np.minimum(moved, 1.0 - moved) < reach)
    far = np.flatnonzero(noisy & ~near & (np.abs(shift) < reach))
    near = np.flatnonzero(near)
    if far.size:
        c, t = np.take(shift, far), np.take(scale, far)
        f_zero, m_zero, psi_zero = _cdf_and_partial_mean(law, np.zeros_like(c), c, t)
        np.put(loss, far, np.maximum(c - 2.0 * m_zero, 0.0))  # E|D| = E[D] - 2 E[D 1{D < 0}]
        if slope:
            np.put(slopes[0], far, 2.0 * psi_zero)
            np.put(slopes[1], far, 1.0 - 2.0 * f_zero)
    if near.size:
        x, c, t = np.take(x_hat, near), np.take(shift, near), np.take(scale, near)
        f_low, m_low, psi_low = _cdf_and_partial_mean(law, -x, c, t)
        f_zero, m_zero, psi_zero = _cdf_and_partial_mean(law, np.zeros_like(x), c, t)
        f_high, m_high, psi_high = _cdf_and_partial_mean(law, 1.0 - x, c, t)
        np.put(loss, near, np.maximum(m_high - 2.0 * m_zero + m_low + x * f_low + (1.0 - x) * (1.0 - f_high), 0.0))
        if slope:
            np.put(slopes[0], near, 2.0 * psi_zero - psi_low - psi_high)
            np.put(slopes[1], near, f_high + f_low - 2.0 * f_zero)
    return loss.reshape(shape), None if slopes is None else tuple(part.reshape(shape) for part in slopes)


#: levels over which :meth:`StatisticLevels.mean_of` evaluates a closed form at once (bounds its float64 temporaries:
#: a beacon's 2,500 x 10^6 calibration holds millions of levels).
LEVEL_CHUNK = 2**20


@dataclass(frozen=True, eq=False)
class StatisticLevels:
    """Rows of statistics f(D) (B, |Q|) held as the distinct values each attribute takes and how often.

    f(D)_j = (Z^T b)_j / N takes at most N + 1 values, so over many draws each attribute repeats a few: the mean
    over the rows and attributes of any g(f(D)_j, j) is sum_p weights_p g(values_p, columns_p) / (B |Q|),
    exactly (up to the order of the sum), in P evaluations of g instead of B |Q|.

    Attributes:
        statistics: the rows themselves (B, |Q|), for what depends on a whole row.
        values: the distinct values of each attribute, attribute by attribute (P,).
        columns: the attribute of each value (P,).
        weights: how many rows hold it (P,), summing to B |Q|.
    """

    statistics: np.ndarray
    values: np.ndarray
    columns: np.ndarray
    weights: np.ndarray

    @classmethod
    def of(cls, statistics: np.ndarray) -> "StatisticLevels":
        statistics = np.asarray(statistics, dtype=np.float64)
        rows, width = statistics.shape
        ordered = np.sort(statistics, axis=0)
        first = np.ones_like(ordered, dtype=bool)
        first[1:] = ordered[1:] != ordered[:-1]
        columns, starts = np.nonzero(first.T)  # attribute by attribute, each value's first row
        positions = columns * rows + starts
        weights = np.diff(np.append(positions, rows * width)).astype(np.float64)
        return cls(statistics, ordered[starts, columns], columns, weights)

    def mean(self, values: np.ndarray) -> float:
        """The mean over rows and attributes of a quantity given at each level (P,)."""
        return float(np.dot(values, self.weights) / self.statistics.size)

    def mean_of(self, terms):
        """The means over rows and attributes of the quantities ``terms(part)`` gives at the levels ``part`` (a slice;
        one array or a tuple of arrays), evaluated :data:`LEVEL_CHUNK` levels at a time so that their temporaries stay
        bounded: a float, or a tuple of floats.  With at most :data:`LEVEL_CHUNK` levels, :meth:`mean` of each."""
        total = None
        for start in range(0, max(self.values.size, 1), LEVEL_CHUNK):
            part = slice(start, start + LEVEL_CHUNK)
            given = terms(part)
            single = not isinstance(given, tuple)
            sums = [float(np.dot(value, self.weights[part])) for value in ((given,) if single else given)]
            total = sums if total is None else [a + b for a, b in zip(total, sums)]
        means = tuple(value / self.statistics.size for value in total)
        return means[0] if single else means


class ShrinkNoiseDefense(Defense):
    """x = clip(t + (1 - a) o (f(D) - t) + s o e, 0, 1) (module docstring); the noise is
    xi = a o (t - f(D)) + s o e.

    Args:
        shrink: a, (|Q|,) in [0, 1].
        scale: s, (|Q|,) >= 0.
        target: t = f(theta), (|Q|,).
        law: "laplace" or "gaussian".
        n_members: N, for the guarantee.
        label: the reference's name in reports ("laplace", "shrinkage", "suppression", ...).
        details: a JSON-able record of how it was chosen (budget, shrinkage grid, ...).
        name: the SPEC name it was built from (``describe()["name"]``).
    """

    def __init__(self, shrink: np.ndarray, scale: np.ndarray, target: np.ndarray, law: str, n_members: int,
                 label: str = "shrink", details: dict | None = None, name: str = "shrinkage") -> None:
        self.law = _check_law(law)
        self.shrink = np.asarray(shrink, dtype=np.float64).reshape(-1)
        self.scale = np.asarray(scale, dtype=np.float64).reshape(-1)
        self.target = np.asarray(target, dtype=np.float64).reshape(-1)
        width = self.target.size
        if self.shrink.size != width or self.scale.size != width:
            raise InputError(f"shrinkage, scales and target must all have |Q| = {width} entries.")
        if not (np.all(np.isfinite(self.shrink)) and np.all((self.shrink >= 0) & (self.shrink <= 1))):
            raise InputError("the shrinkage a must lie in [0, 1].")
        if not (np.all(np.isfinite(self.scale)) and np.all(self.scale >= 0)):
            raise InputError("the noise scales s must be finite and >= 0.")
        if n_members < 1:
            raise InputError(f"`n_members` must be >= 1, got {n_members}.")
        self.n_members = int(n_members)
        self.label = label
        self.details = dict(details or {})
        self.name = name

    def with_scale(self, scale: np.ndarray) -> "ShrinkNoiseDefense":
        """The same mechanism with other noise scales."""
        return ShrinkNoiseDefense(self.shrink, scale, self.target, self.law, self.n_members, self.label, self.details,
                                  self.name)

    def expected_loss(self, x_hat: np.ndarray | StatisticLevels) -> float:
        """E mean_j |x_j - f(D)_j| over the noise, averaged over the rows of ``x_hat`` (B, |Q|), given as they are or
        as their :class:`StatisticLevels` (each attribute's loss depends on its own f(D)_j alone: the same mean)."""
        if isinstance(x_hat, StatisticLevels):
            return x_hat.mean_of(lambda part: clipped_deviation_loss(self.law, *self._level_arguments(x_hat, part)))
        shift, scale, values, mean = self._closed_form_arguments(x_hat)
        return mean(clipped_deviation_loss(self.law, shift, scale, values))

    def expected_loss_and_slope(self, x_hat: np.ndarray | StatisticLevels) -> tuple[float, float]:
        """:meth:`expected_loss` and its derivative d/dk, at k = 1, of the loss of the same mechanism with every
        scale times k: the mean of s_j dE_j/ds_j (:func:`clipped_deviation_loss_and_slopes`)."""
        if isinstance(x_hat, StatisticLevels):
            def terms(part: slice) -> tuple[np.ndarray, np.ndarray]:
                shift, scale, values = self._level_arguments(x_hat, part)
                loss, by_scale, _ = clipped_deviation_loss_and_slopes(self.law, shift, scale, values)
                return loss, by_scale * scale

            return x_hat.mean_of(terms)
        shift, scale, values, mean = self._closed_form_arguments(x_hat)
        loss, by_scale, _ = clipped_deviation_loss_and_slopes(self.law, shift, scale, values)
        return mean(loss), mean(by_scale * scale)

    def _level_arguments(self, levels: "StatisticLevels", part: slice) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(shift a (t - f(D)), scale, f(D)) of the closed form at the levels ``part`` of ``levels``."""
        columns, values = levels.columns[part], levels.values[part]
        return self.shrink[columns] * (self.target[columns] - values), self.scale[columns], values

    def _closed_form_arguments(self, x_hat: np.ndarray):
        """(shift a (t - f(D)), scale, f(D), the mean over rows and attributes) of the closed form at ``x_hat``'s
        rows."""
        x_hat = np.asarray(x_hat, dtype=np.float64)
        return self.shrink * (self.target - x_hat), self.scale, x_hat, lambda terms: float(terms.mean())

    def noise(self, b: torch.Tensor, x_hat: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        rows, width = x_hat.shape
        if width != self.target.size:
            raise InputError(f"this mechanism releases {self.target.size} attributes, the statistic has {width}.")
        if self.law == "laplace":
            unit = sample_laplace((rows, width), 1.0, generator)
        else:
            unit = torch.randn((rows, width), generator=generator, dtype=torch.float64)
        xi = unit.mul_(torch.as_tensor(self.scale, dtype=torch.float64))
        if np.any(self.shrink):  # the shift a o (t - x_hat), formed in one float64 copy of x_hat
            shift = x_hat.detach().cpu().to(torch.float64, copy=True).neg_()
            shift.add_(torch.as_tensor(self.target, dtype=torch.float64)).mul_(torch.as_tensor(self.shrink,
                                                                                                dtype=torch.float64))
            xi.add_(shift)
        return xi.to(device=x_hat.device)

    def columns(self, start: int, stop: int) -> "ShrinkNoiseDefense":
        """The same mechanism on the attributes [start, stop) alone: each attribute's release depends on its own
        statistic, shrinkage, scale and noise, so these are the columns [start, stop) of its releases, in law."""
        return ShrinkNoiseDefense(self.shrink[start:stop], self.scale[start:stop], self.target[start:stop], self.law,
                                  self.n_members, self.label, self.details, self.name)

    def _parameters(self) -> tuple[np.ndarray, ...]:
        """What fixes the release's law besides the noise law: (a, s, t)."""
        return self.shrink, self.scale, self.target

    def same_release(self, other: object) -> bool:
        """Whether ``other`` releases the same law: the same class and noise law, and the same parameters up to
        the float32 rounding of a defender that holds them (relative 1e-6, absolute 1e-9 of the largest)."""
        if type(other) is not type(self) or other.law != self.law or other.composition != self.composition:
            return False
        return all(mine.shape == theirs.shape and np.allclose(mine, theirs, rtol=1e-6,
                                                              atol=1e-9 * max(float(np.abs(mine).max(initial=0.0)), 1e-300))
                   for mine, theirs in zip(self._parameters(), other._parameters()))

    @property
    def noise_law(self) -> NoiseLaw | None:
        """The i.i.d. law when there is no shrinkage and one scale (plain Laplace or Gaussian)."""
        if np.any(self.shrink) or np.ptp(self.scale) > 0:
            return None
        return NoiseLaw(self.law, float(self.scale[0])) if self.scale[0] > 0 else NoiseLaw("none", 0.0)

    def privacy_parameters(self) -> tuple[float, float | None]:
        """(eps, mu): eps-DP for Laplace noise, or mu-GDP and its eps at :data:`REPORTED_DELTA`."""
        kept = 1.0 - self.shrink
        exposed = kept > 0
        if np.any(exposed & (self.scale == 0)):
            return math.inf, (math.inf if self.law == "gaussian" else None)
        ratio = np.where(exposed, kept / (self.n_members * np.where(self.scale > 0, self.scale, 1.0)), 0.0)
        if self.law == "laplace":
            return float(ratio.sum()), None
        mu = float(np.sqrt(np.sum(ratio**2)))
        if mu == 0:
            return 0.0, 0.0
        return gaussian_epsilon(1.0, REPORTED_DELTA, mu), mu

    @property
    def guarantee(self) -> Guarantee | None:
        """The eps-DP (Laplace) or mu-GDP (Gaussian) guarantee; None when an attribute is released exactly."""
        epsilon, mu = self.privacy_parameters()
        if math.isinf(epsilon):
            return None
        delta = REPORTED_DELTA if self.law == "gaussian" else 0.0
        return Guarantee(f"shrinkage-{self.law}", epsilon, delta, 1.0 / self.n_members, "linf", "replace", mu)

    def summary(self) -> dict:
        """The mechanism in a few numbers: law, shrinkage and scales (mean, range), suppressed and
        exactly released attributes."""
        return {
            "label": self.label,
            "noise": self.law,
            "shrink_mean": float(self.shrink.mean()),
            "shrink_min": float(self.shrink.min()),
            "shrink_max": float(self.shrink.max()),
            "scale_mean": float(self.scale.mean()),
            "scale_max": float(self.scale.max()),
            "suppressed": int(np.sum(self.shrink >= 1.0)),
            "exact": int(np.sum((self.shrink == 0) & (self.scale == 0))),
        }

    def describe(self) -> dict:
        guarantee = self.guarantee
        return {"name": self.name, **self.summary(), **self.details,
                "guarantee": None if guarantee is None else guarantee.to_dict()}
