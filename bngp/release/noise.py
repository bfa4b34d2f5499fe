"""Seeded noise samplers of the release (float64, inverse CDF, from a torch Generator).

Laplace(b): z = b log(2u) if u < 1/2 else -b log(2(1 - u)); Gaussian N(0, sigma^2); the l-inf
K-norm law with density proportional to exp(-||z||_inf / a) (Hardt & Talwar 2010; Steinke &
Ullman 2016).  Fast and replayable, and *not* floating-point safe (Mironov 2012): releases meant
for publication use the OpenDP samplers of :mod:`bngp.defenses.secure_sampling`.
:func:`sample_noise` draws the noise of a :class:`~bngp.release.noise_law.NoiseLaw` (the law an
attacker may be told), with the same samplers.
"""

from __future__ import annotations

import numpy as np
import torch

from bngp.rng import torch_generator
from .noise_law import NoiseLaw

__all__ = ["sample_laplace", "sample_gaussian", "sample_linf", "sample_noise"]


def _open_uniform(shape: tuple[int, ...], generator: torch.Generator) -> torch.Tensor:
    """U in (0, 1]: torch's float64 uniforms r = k / 2^53 shifted by 2^-54 towards the cell
    midpoint.  Below 1/2 the sum is exact; above, it rounds to even (to r or r + 2^-53), and the
    last cell gives U = 1 (probability 2^-53).  Used where U = 1 is harmless (-log U, 2U - 1);
    the Laplace sampler takes the exact midpoints instead (:func:`_laplace_of`)."""
    return torch.rand(shape, generator=generator, dtype=torch.float64) + 2.0**-54


def _laplace_of(r: torch.Tensor, scale: float) -> torch.Tensor:
    """The Laplace(scale) inverse CDF at the exact cell midpoints u = r + 2^-54 of torch's float64
    uniforms ``r`` = k / 2^53 (overwritten): b log(2u) if u < 1/2 else -b log(2(1 - u)).

    v = 1 - 2u = (2^53 - 1 - 2k) / 2^53 is an odd multiple of 2^-53 in (-1, 1), computed exactly as
    (1 - 2^-53) - 2r, and 1 - |v| is then exactly 2u below 1/2 and 2(1 - u) above, so
    z = copysign(b log(1 - |v|), -v) is the formula at the midpoint, bit for bit: one logarithm,
    no branch, never infinite (|z| <= 53 b log 2), and the support is symmetric about 0."""
    v = r.mul_(-2.0).add_(1.0 - 2.0**-53)
    magnitude = v.abs().neg_().add_(1.0).log_().mul_(scale)
    return magnitude.copysign_(v.neg_())


def sample_laplace(shape: tuple[int, ...], scale: float, generator: torch.Generator) -> torch.Tensor:
    """i.i.d. Laplace(scale) draws as float64: z = b log(2u) if u < 1/2 else -b log(2(1 - u)),
    u the midpoints of torch's float64 uniform grid (:func:`_laplace_of`)."""
    return _laplace_of(torch.rand(shape, generator=generator, dtype=torch.float64), scale)


def sample_gaussian(shape: tuple[int, ...], sigma: float, generator: torch.Generator) -> torch.Tensor:
    """i.i.d. N(0, sigma^2) draws as float64."""
    return sigma * torch.randn(shape, generator=generator, dtype=torch.float64)


def sample_linf(n_rows: int, dim: int, scale: float, generator: torch.Generator) -> torch.Tensor:
    """Draws of the l-inf K-norm law, density proportional to exp(-||z||_inf / scale) on R^dim.

    r = scale * sum_{i <= dim + 1} -log(U_i) ~ Gamma(dim + 1, scale) (a sum of exponentials),
    then z = r * (2V - 1) with V uniform on (0, 1)^dim: the law exp(-||z||_K / a) in dimension
    d is that of r * U with r ~ Gamma(d + 1, a) and U uniform in the unit ball K, here the
    cube [-1, 1]^d (Hardt & Talwar 2010; Steinke & Ullman 2016).

    Returns:
        (n_rows, dim) float64 tensor.
    """
    radius = -torch.log(_open_uniform((n_rows, dim + 1), generator)).sum(dim=1, keepdim=True)
    return (scale * radius) * (2.0 * _open_uniform((n_rows, dim), generator) - 1.0)


def sample_noise(law: NoiseLaw, shape: tuple[int, int], rng: np.random.Generator) -> np.ndarray:
    """Noise of ``law`` for a (n_releases, n_outputs) batch as a float64 numpy array, drawn by the
    samplers above from a torch Generator seeded by ``rng`` (one draw of ``rng`` per call)."""
    n_releases, n_outputs = shape
    if law.kind == "none" or law.scale == 0:
        return np.zeros(shape)
    generator = torch_generator(int(rng.integers(2**63)))
    if law.kind == "laplace":
        return sample_laplace(shape, law.scale, generator).numpy()
    if law.kind == "gaussian":
        return sample_gaussian(shape, law.scale, generator).numpy()
    return sample_linf(n_releases, n_outputs, law.scale, generator).numpy()
