"""Noise shaped to the candidate population: the same utility, spent where the statistics can move.

Notation of :mod:`bngp.data.geometry`: every f(D) lies in t + row(Zc), with orthonormal basis V
(|Q| x r, r <= K - 1) and Cov(f(D)) = V diag(lambda) V^T.  Isotropic noise spends (|Q| - r) / |Q| of its
variance outside that space, where it hides nothing from an attacker who knows the candidates.

**Shrinkage plus row-space noise** (:class:`ShapedNoiseDefense`)::

    x = clip(t + (1 - a)(f(D) - t) + V (w o g), 0, 1),   g ~ N(0, I_r),

one shrinkage a and per-direction scales w (``flat``: w_i = s; ``eigen``: w_i = s lambda_i^(1/4), the
noise covariance s^2 V Lambda^(1/2) V^T).  Each attribute's noise is Gaussian with variance
sum_i V_ji^2 w_i^2, so its expected clipped loss is the closed form of
:func:`~bngp.defenses.shrinkage.clipped_deviation_loss` at that marginal scale (a mean absolute value
depends on a coordinate's variance alone, whatever the correlation between coordinates).  The
guarantee: replacing one member by another candidate moves the coordinates V^T (x - t) before noise by
(1 - a) V^T (z_k - z_l) / N, so the release is mu-GDP for that relation with
mu = (1 - a) max_{k != l} ||diag(1 / w) V^T (z_k - z_l)||_2 / N (the Gaussian mechanism in the
coordinates, Dong, Roth & Su 2022; the part of x outside the row space is t, and clipping is
post-processing).

The release keeps only the signal's coordinates: it is t + (1 - a) V V^T (f(D) - t) + noise, which equals
the formula above for every dataset of candidates, so that a direction below the rank tolerance
(:data:`bngp.data.geometry.RANK_TOLERANCE`) is never released without noise.

**A DP mechanism projected onto the population** (:class:`ProjectedDefense`): x = clip(P(f(D) + n), 0, 1)
with P(y) = t + V V^T (y - t) the projection onto the affine hull of the candidates' possible statistics
(:meth:`bngp.data.geometry.PopulationSpace.project`); since f(D) lies in it, P(f(D) + n) = f(D) + V V^T n.
P uses only the public candidates, so the release is post-processing of the DP mechanism and keeps its
(eps, delta) for every neighbouring relation whose datasets are drawn from the candidates (the projection
mechanism of Nikolov, Talwar & Zhang, STOC 2013).  For Gaussian noise of scale sigma its per-attribute
variance drops from sigma^2 to sigma^2 ||V_j||^2, the attribute's leverage (mean r / |Q|): at the same
eps about sqrt(r / |Q|) of the loss.

Only what is public shapes the noise: the candidates of the population file, never the members' rows
(:data:`bngp.data.geometry.THREAT_MODEL`).
"""

from __future__ import annotations

import math

import numpy as np
import torch

from bngp.data.geometry import PopulationSpace
from bngp.errors import InputError
from bngp.release.noise_law import NoiseLaw
from .base import Defense, Guarantee
from .calibration import gaussian_epsilon
from .shrinkage import (REPORTED_DELTA, ShrinkNoiseDefense, StatisticLevels, clipped_deviation_loss,
                        clipped_deviation_loss_and_slopes)

__all__ = ["WEIGHTINGS", "ShapedNoiseDefense", "ProjectedDefense", "direction_weights", "pairwise_sensitivity"]

#: the per-direction weightings of the row-space noise (module docstring).
WEIGHTINGS = ("flat", "eigen")


def direction_weights(space: PopulationSpace, weighting: str) -> np.ndarray:
    """The unit per-direction scales of ``weighting``: 1 (``flat``) or lambda_i^(1/4) normalised to mean square 1
    (``eigen``)."""
    if weighting == "flat":
        return np.ones(space.rank)
    if weighting == "eigen":
        weights = space.variances ** 0.25
        return weights / math.sqrt(float(np.mean(weights**2)))
    raise InputError(f"`weighting` must be one of {', '.join(WEIGHTINGS)}, got {weighting!r}.")


def pairwise_sensitivity(space: PopulationSpace, direction_scales: np.ndarray, kept: np.ndarray | float = 1.0) -> float:
    """max_{k != l} ||diag(kept / w) V^T (z_k - z_l)||_2 / N over the candidates (V^T (z_k - t) = s o U_k), for
    per-direction retentions ``kept`` = 1 - a_i (a direction with none kept costs nothing)."""
    kept = np.broadcast_to(np.asarray(kept, dtype=np.float64), (space.rank,))
    ratio = np.divide(kept, direction_scales, out=np.zeros(space.rank), where=kept > 0)
    scaled = space.left * (space.singular_values * ratio)
    norms = np.einsum("ki,ki->k", scaled, scaled)
    squared = norms[:, None] + norms[None, :] - 2.0 * (scaled @ scaled.T)
    return math.sqrt(max(float(squared.max()), 0.0)) / space.n_members


class ShapedNoiseDefense(ShrinkNoiseDefense):
    """x = clip(t + V diag(1 - a) V^T (f(D) - t) + V (w o g), 0, 1) (module docstring): shrinkage a_i and noise
    scale w_i per direction of the candidates' row space (one a for all: t + (1 - a)(f(D) - t) + V (w o g)).

    ``scale`` (of :class:`~bngp.defenses.shrinkage.ShrinkNoiseDefense`) holds each attribute's marginal noise
    scale sqrt(sum_i V_ji^2 w_i^2) and ``shrink`` the mean of a on every attribute (exact when a is one number,
    a record otherwise); the loss, the noise and the guarantee use the per-direction a.

    Args:
        space: the candidates' geometry (:class:`bngp.data.geometry.PopulationSpace`).
        shrink: a in [0, 1], one number or one per direction (r,).
        direction_scales: w (r,) >= 0.
        weighting: how w was shaped ("flat", "eigen", "optimal" or "given"), for reports.
        marginal: the marginal scales when already known (a multiple of another mechanism's).
    """

    def __init__(self, space: PopulationSpace, shrink: float | np.ndarray, direction_scales: np.ndarray, n_members: int,
                 label: str = "shaped", details: dict | None = None, name: str = "shaped",
                 weighting: str = "given", marginal: np.ndarray | None = None, _shift: np.ndarray | None = None) -> None:
        direction_scales = np.asarray(direction_scales, dtype=np.float64).reshape(-1)
        if direction_scales.size != space.rank or not np.all(np.isfinite(direction_scales)) \
                or np.any(direction_scales < 0):
            raise InputError(f"the row-space noise needs {space.rank} finite scales >= 0.")
        direction_shrink = np.broadcast_to(np.asarray(shrink, dtype=np.float64), (space.rank,)).copy()
        if not np.all((direction_shrink >= 0) & (direction_shrink <= 1)):
            raise InputError("the shrinkage a must lie in [0, 1].")
        width = space.n_attributes
        if marginal is None:
            marginal = np.sqrt(np.maximum(space.marginal_variances(direction_scales), 0.0))
        uniform = not space.rank or np.ptp(direction_shrink) == 0
        mean = (float(direction_shrink[0]) if space.rank else 0.0) if uniform else float(direction_shrink.mean())
        super().__init__(np.full(width, mean), marginal, space.target,
                         "gaussian", n_members, label, details, name)
        self.space = space
        self.direction_shrink = direction_shrink
        self.direction_scales = direction_scales
        self.weighting = weighting
        self._shift = _shift

    def _parameters(self) -> tuple[np.ndarray, ...]:
        """What fixes the release's law: (a_i, w_i, t, and V through U and s of the same candidates)."""
        return self.direction_shrink, self.direction_scales, self.target, self.space.left, self.space.singular_values

    @property
    def uniform(self) -> bool:
        """Whether one shrinkage a holds for every direction."""
        return bool(np.ptp(self.direction_shrink) == 0) if self.space.rank else True

    def scaled(self, factor: float) -> "ShapedNoiseDefense":
        """The same mechanism with every direction's scale times ``factor``."""
        return type(self)(self.space, self.direction_shrink, factor * self.direction_scales, self.n_members,
                          self.label, self.details, self.name, self.weighting, factor * self.scale, self._shift)

    def with_scale(self, scale: np.ndarray) -> "ShapedNoiseDefense":
        """The same mechanism with marginal scales ``scale``, which must be a multiple c of the current ones
        (the noise's shape is fixed; c scales every direction)."""
        scale = np.asarray(scale, dtype=np.float64).reshape(-1)
        reference = float(np.max(self.scale))
        if reference == 0:
            raise InputError("a shaped mechanism without noise has no shape to rescale.")
        factor = float(scale[int(np.argmax(self.scale))]) / reference
        if not np.allclose(scale, factor * self.scale, rtol=1e-9, atol=1e-15):
            raise InputError("the marginal scales of a shaped mechanism change only by one common factor.")
        return self.scaled(factor)

    def signal_shift(self, x_hat: np.ndarray | torch.Tensor) -> np.ndarray | torch.Tensor:
        """The deterministic part of the deviation, V diag(1 - a) V^T (x_hat - t) - (x_hat - t), row by row
        (numpy or float64 torch, as given): only the signal's coordinates are released, so outside the row
        space x is t whatever f(D) (rounding, a direction below the rank tolerance) and the guarantee in the
        coordinates covers the whole release."""
        if isinstance(x_hat, torch.Tensor):
            centred = x_hat.detach().cpu().double() - torch.as_tensor(self.target, dtype=torch.float64)
            kept = torch.as_tensor(1.0 - self.direction_shrink, dtype=torch.float64)
            return self.space.apply(self.space.apply_transpose(centred) * kept) - centred
        centred, coordinates = self.space.centred_coordinates(x_hat)
        return self.space.embed(coordinates * (1.0 - self.direction_shrink)) - centred

    def expected_loss(self, x_hat: np.ndarray | StatisticLevels) -> float:
        """E mean_j |x_j - f(D)_j| over the noise, averaged over the rows of ``x_hat`` (B, |Q|, or their
        :class:`~bngp.defenses.shrinkage.StatisticLevels`): the closed form at the marginal scales; with one
        shrinkage a the shift a (t - f(D)) of each attribute depends on its own f(D)_j, otherwise the shift of
        :meth:`signal_shift` (computed once per shrinkage and reused by :meth:`scaled` for the same rows)."""
        if self.uniform:
            return super().expected_loss(x_hat)
        x_hat = self._rows_with_shift(x_hat)
        return float(clipped_deviation_loss("gaussian", self._shift, self.scale, x_hat).mean())

    def expected_loss_and_slope(self, x_hat: np.ndarray | StatisticLevels) -> tuple[float, float]:
        """:meth:`expected_loss` and its derivative in a common factor of the scales, at 1 (the parent's, with the
        shift of :meth:`signal_shift` where the shrinkage differs between directions)."""
        if self.uniform:
            return super().expected_loss_and_slope(x_hat)
        x_hat = self._rows_with_shift(x_hat)
        loss, by_scale, _ = clipped_deviation_loss_and_slopes("gaussian", self._shift, self.scale, x_hat)
        return float(loss.mean()), float((by_scale * self.scale).mean())

    def _rows_with_shift(self, x_hat: np.ndarray | StatisticLevels) -> np.ndarray:
        """The rows of ``x_hat`` (float64), with :meth:`signal_shift` of them held in ``_shift`` (formed once per
        shrinkage and shape of the rows)."""
        if isinstance(x_hat, StatisticLevels):
            x_hat = x_hat.statistics
        x_hat = np.asarray(x_hat, dtype=np.float64)
        if self._shift is None or self._shift.shape != x_hat.shape:
            self._shift = self.signal_shift(x_hat)
        return x_hat

    def noise(self, b: torch.Tensor, x_hat: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        rows, width = x_hat.shape
        if width != self.target.size:
            raise InputError(f"this mechanism releases {self.target.size} attributes, the statistic has {width}.")
        unit = torch.randn((rows, self.space.rank), generator=generator, dtype=torch.float64)
        scales = torch.as_tensor(self.direction_scales, dtype=torch.float64)
        kept = torch.as_tensor(1.0 - self.direction_shrink, dtype=torch.float64)
        centred = x_hat.detach().cpu().double() - torch.as_tensor(self.target, dtype=torch.float64)
        # xi = V (diag(1 - a) V^T (x_hat - t) + w o g) - (x_hat - t): the signal shift of signal_shift and the
        # noise in one pass through the basis each way
        coordinates = self.space.apply_transpose(centred).mul_(kept).add_(unit.mul_(scales))
        return self.space.apply(coordinates).sub_(centred).to(device=x_hat.device)

    @property
    def noise_law(self) -> NoiseLaw | None:
        return None

    def privacy_parameters(self) -> tuple[float, float | None]:
        """(eps at :data:`REPORTED_DELTA`, mu) of mu-GDP for one member replaced by another candidate."""
        kept = 1.0 - self.direction_shrink
        if not np.any(kept > 0):
            return 0.0, 0.0
        if np.any((kept > 0) & (self.direction_scales == 0)):
            return math.inf, math.inf
        mu = pairwise_sensitivity(self.space, self.direction_scales, kept)
        return gaussian_epsilon(1.0, REPORTED_DELTA, mu), mu

    @property
    def guarantee(self) -> Guarantee | None:
        epsilon, mu = self.privacy_parameters()
        if math.isinf(epsilon):
            return None
        return Guarantee("shaped-gaussian", epsilon, REPORTED_DELTA, None, "population", "replace among candidates", mu)

    def summary(self) -> dict:
        return {**super().summary(), "space": "population", "weighting": self.weighting, "rank": self.space.rank,
                "direction_scale_mean": float(self.direction_scales.mean()),
                "direction_shrink_min": float(self.direction_shrink.min()) if self.space.rank else 0.0,
                "direction_shrink_max": float(self.direction_shrink.max()) if self.space.rank else 0.0}


class ProjectedDefense(Defense):
    """A DP mechanism's release projected onto the affine hull of the candidates' statistics (module
    docstring): xi = V V^T n for the inner mechanism's noise n.

    Args:
        inner: the DP mechanism (any additive defense with one copy of f(D)).
        space: the candidates' geometry.
    """

    def __init__(self, inner: Defense, space: PopulationSpace) -> None:
        if inner.composition != 1:
            raise InputError("only a mechanism on one copy of f(D) is projected onto the population.")
        self.inner = inner
        self.space = space
        self.name = inner.name

    def noise(self, b: torch.Tensor, x_hat: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        if x_hat.shape[1] != self.space.n_attributes:
            raise InputError(f"this mechanism releases {self.space.n_attributes} attributes, the statistic has "
                             f"{x_hat.shape[1]}.")
        raw = self.inner.noise(b, x_hat, generator).detach().cpu().double()
        target = torch.as_tensor(self.space.target, dtype=torch.float64)
        statistic = x_hat.detach().cpu().double()
        # xi = P(f(D) + n) - f(D), P(y) = t + V V^T (y - t): post-processing of the inner release for every f(D)
        # (= V V^T n when f(D) lies in the affine hull)
        return (target + self.space.apply(self.space.apply_transpose(statistic + raw - target))
                - statistic).to(device=x_hat.device)

    @property
    def guarantee(self) -> Guarantee | None:
        """The inner mechanism's guarantee (post-processing by a map of public data)."""
        inner = self.inner.guarantee
        if inner is None:
            return None
        return Guarantee(f"{inner.mechanism}-projected", inner.epsilon, inner.delta, inner.sensitivity, inner.norm,
                         inner.neighbouring, inner.gdp_mu)

    def describe(self) -> dict:
        inner = self.inner.describe()
        law = inner.pop("noise_law", None)
        return {**inner, "space": "population", "rank": self.space.rank,
                "projected_noise": law,  # the law before the projection: the released noise is V V^T of it
                "guarantee": None if self.guarantee is None else self.guarantee.to_dict()}
