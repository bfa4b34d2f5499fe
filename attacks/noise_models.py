"""Per-SNV law of a released frequency around its mean, for the optimal (Neyman-Pearson) LRT.

A release coordinate is x_j = clip(x_hat_j + xi_j, 0, 1).  Given the hypothesis on one
individual, x_hat_j is the mean of n binary values; the attacker approximates the sampling
of the other members by a Gaussian of variance v_j (central limit theorem) and convolves it
with the defense's noise law:

- ``none``:     N(0, v)
- ``gaussian``: N(0, v + sigma^2)
- ``laplace``:  N(0, v) * Laplace(b)  (closed form with the normal CDF, below)
- ``linf``:     N(0, v) * Uniform(-R, R) with R = (|Q| + 1) * scale.  The L-inf K-norm
  mechanism with density proportional to exp(-||z||_inf / scale) draws z = r u with
  r ~ Gamma(|Q| + 1, scale) and u uniform in [-1, 1]^|Q|; given r the coordinates are
  i.i.d. Uniform(-r, r), and r concentrates at its mean (|Q| + 1) scale (relative spread
  1/sqrt(|Q|)), which gives this product approximation.

Clipping is a censoring: P(x_j = 0) = F(-mu_j), P(x_j = 1) = F(mu_j - 1) with F the CDF of the
total noise, so :func:`censored_loglik` uses log F at the bounds and log f inside.  All
formulas are in log space (torch.special.log_ndtr, erfcx), in float64, and differentiable.

Laplace(b) convolved with N(0, s^2), c = s^2 / (2 b^2):
    f(z) = e^c / (2b) [e^{-z/b} Phi(z/s - s/b) + e^{z/b} Phi(-z/s - s/b)]
    F(z) = 1/2 [Phi(z/s) - e^{c - z/b} Phi(z/s - s/b)] + 1/2 [Phi(z/s) + e^{c + z/b} Phi(-z/s - s/b)]
(the two halves are P(G + E <= z) and P(G - E <= z) with E ~ Exp(b); for z <= 0 the first is
at most the second, so log F is computed as log(second) + log1p(first / second)).

Uniform(-R, R) convolved with N(0, s^2), g(t) = t Phi(t) + phi(t):
    f(z) = [Phi((R - |z|)/s) - Phi((-R - |z|)/s)] / (2R)
    F(z) = s / (2R) [g((z + R)/s) - g((z - R)/s)]
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch.special import erfcx, log_ndtr, ndtr

from bngp.errors import InputError
from bngp.release.noise_law import NoiseLaw

__all__ = ["TotalNoise", "total_noise", "censored_loglik"]

_LOG_HALF = math.log(0.5)
_LOG_SQRT_2PI = 0.5 * math.log(2 * math.pi)
#: below this ratio of the defense's noise scale to the sampling sd the convolution is
#: replaced by a Gaussian with the summed variance (the closed forms lose precision there).
_NEGLIGIBLE_RATIO = 1e-3


def _gaussian_logpdf(z: torch.Tensor, var: torch.Tensor) -> torch.Tensor:
    return -0.5 * z * z / var - 0.5 * torch.log(var) - _LOG_SQRT_2PI


def _gaussian_logcdf(z: torch.Tensor, var: torch.Tensor) -> torch.Tensor:
    return log_ndtr(z / torch.sqrt(var))


def _log1mexp(a: torch.Tensor) -> torch.Tensor:
    """log(1 - exp(a)) for a <= 0 (accurate on both sides of log 2)."""
    a = a.clamp(max=-1e-300)
    return torch.where(a > -math.log(2), torch.log(-torch.expm1(a)), torch.log1p(-torch.exp(a)))


def _laplace_logpdf(z: torch.Tensor, var: torch.Tensor, b: float) -> torch.Tensor:
    s = torch.sqrt(var)
    c = var / (2 * b * b)
    left = -z / b + log_ndtr(z / s - s / b)
    right = z / b + log_ndtr(-z / s - s / b)
    return c - math.log(2 * b) + torch.logaddexp(left, right)


def _laplace_logcdf_nonpositive(z: torch.Tensor, var: torch.Tensor, b: float) -> torch.Tensor:
    s = torch.sqrt(var)
    c = var / (2 * b * b)
    log_phi = log_ndtr(z / s)
    log_second = _LOG_HALF + torch.logaddexp(log_phi, c + z / b + log_ndtr(-z / s - s / b))
    ratio = torch.exp(_LOG_HALF + log_phi - log_second) - torch.exp(
        _LOG_HALF + c - z / b + log_ndtr(z / s - s / b) - log_second
    )
    return log_second + torch.log1p(ratio.clamp(min=0.0))


def _uniform_logpdf(z: torch.Tensor, var: torch.Tensor, half_width: float) -> torch.Tensor:
    s = torch.sqrt(var)
    upper = log_ndtr((half_width - torch.abs(z)) / s)
    lower = log_ndtr((-half_width - torch.abs(z)) / s)
    return upper + _log1mexp(lower - upper) - math.log(2 * half_width)


def _log_g(t: torch.Tensor) -> torch.Tensor:
    """log(t Phi(t) + phi(t)) = log E[(Z + t)^+], stable for t of either sign."""
    positive = t.clamp(min=0.0)
    u = (-t).clamp(min=0.0)
    on_positive = torch.log(positive * ndtr(positive) + torch.exp(-0.5 * positive * positive - _LOG_SQRT_2PI))
    mills = math.sqrt(math.pi / 2) * erfcx(u / math.sqrt(2))
    on_negative = -0.5 * u * u - _LOG_SQRT_2PI + torch.log((1.0 - u * mills).clamp(min=1e-300))
    return torch.where(t >= 0, on_positive, on_negative)


def _uniform_logcdf_nonpositive(z: torch.Tensor, var: torch.Tensor, half_width: float) -> torch.Tensor:
    s = torch.sqrt(var)
    upper = _log_g((z + half_width) / s)
    lower = _log_g((z - half_width) / s)
    return torch.log(s / (2 * half_width)) + upper + _log1mexp(lower - upper)


@dataclass(frozen=True)
class TotalNoise:
    """Sampling noise N(0, v) convolved with a symmetric defense noise law.

    Attributes:
        kind: "gaussian" (v + extra_variance), "laplace" (scale), or "uniform" (half width).
        scale: the Laplace scale b or the uniform half width R (unused for "gaussian").
        extra_variance: variance added to v for "gaussian" (sigma^2 of a Gaussian defense, or
            the variance of a negligible Laplace/uniform noise).
    """

    kind: str
    scale: float = 0.0
    extra_variance: float = 0.0

    def logpdf(self, z: torch.Tensor, var: torch.Tensor) -> torch.Tensor:
        """log f(z) of the total noise, elementwise (z and var broadcast)."""
        if self.kind == "laplace":
            return _laplace_logpdf(z, var, self.scale)
        if self.kind == "uniform":
            return _uniform_logpdf(z, var, self.scale)
        return _gaussian_logpdf(z, var + self.extra_variance)

    def logcdf(self, z: torch.Tensor, var: torch.Tensor) -> torch.Tensor:
        """log F(z) of the total noise, elementwise (symmetric law: F(z) = 1 - F(-z))."""
        if self.kind == "gaussian":
            return _gaussian_logcdf(z, var + self.extra_variance)
        nonpositive = -torch.abs(z)
        if self.kind == "laplace":
            low = _laplace_logcdf_nonpositive(nonpositive, var, self.scale)
        else:
            low = _uniform_logcdf_nonpositive(nonpositive, var, self.scale)
        return torch.where(z <= 0, low, _log1mexp(low))


def total_noise(law: NoiseLaw, n_attributes: int, min_sampling_variance: float) -> TotalNoise:
    """The :class:`TotalNoise` for a defense noise law on |Q| = ``n_attributes`` coordinates.

    Args:
        law: the defense's noise law.
        n_attributes: |Q| (sets the L-inf radius (|Q| + 1) scale).
        min_sampling_variance: the smallest v_j used; a noise whose scale is below
            1e-3 sqrt(v_min) is folded into the Gaussian with its own variance.
    """
    if not isinstance(law, NoiseLaw):
        raise InputError(f"`noise_law` must be a NoiseLaw, got {type(law).__name__}.")
    s_min = math.sqrt(min_sampling_variance)
    if law.kind == "gaussian":
        return TotalNoise("gaussian", extra_variance=law.scale**2)
    if law.kind == "laplace":
        if law.scale <= _NEGLIGIBLE_RATIO * s_min:
            return TotalNoise("gaussian", extra_variance=2 * law.scale**2)
        return TotalNoise("laplace", scale=law.scale)
    if law.kind == "linf":
        half_width = (n_attributes + 1) * law.scale
        if half_width <= _NEGLIGIBLE_RATIO * s_min:
            return TotalNoise("gaussian", extra_variance=half_width**2 / 3)
        return TotalNoise("uniform", scale=half_width)
    return TotalNoise("gaussian")


def censored_loglik(x: torch.Tensor, mean: torch.Tensor, var: torch.Tensor, noise: TotalNoise) -> torch.Tensor:
    """log-likelihood of released values x = clip(mean + total noise, 0, 1), elementwise.

    log F(-mean) where x <= 0, log F(mean - 1) where x >= 1, log f(x - mean) inside.
    """
    inside = noise.logpdf(x - mean, var)
    at_zero = noise.logcdf(-mean, var)
    at_one = noise.logcdf(mean - 1, var)
    return torch.where(x <= 0, at_zero, torch.where(x >= 1, at_one, inside))
