"""Floating-point-safe noise for releases meant for publication, through OpenDP.

Textbook floating-point Laplace sampling (x + b * log(u)) leaks the input through the
pattern of representable outputs (Mironov 2012, "On significance of the least significant
bits for differential privacy", CCS).  OpenDP's samplers avoid this: ``make_laplace`` and
``make_gaussian`` round the input to a grid 2^k and add discrete Laplace / discrete Gaussian
noise on that grid (Canonne, Kamath & Steinke 2020), so every output is a function of the
noisy grid value alone; ``make_randomized_response_bitvec`` flips bits with exact Bernoulli
draws.

Randomness: OpenDP draws from the operating system's cryptographically secure generator.
It cannot be seeded, so these releases are *not replayable*; this is deliberate for real
publication.  Training-time noise uses the seeded torch samplers of :mod:`bngp.defenses.dp`.

Accounting: the discrete Laplace on a grid satisfies the same eps as the continuous one with
the same scale (OpenDP's privacy map reports eps = sensitivity / scale, after rounding the
sensitivity up to the grid).  OpenDP certifies its discrete Gaussian in zero-concentrated DP,
rho = Delta^2 / (2 sigma^2), the continuous Gaussian's value (CKS20 Thm. 4).  The (eps, delta)
recorded by :class:`~bngp.defenses.dp.GaussianDefense` is the Balle & Wang (2018) profile of the
*continuous* Gaussian; the discrete Gaussian's exact profile (CKS20 Thm. 7) approaches it as
the grid step shrinks relative to sigma, but it is not proved by OpenDP.  Where a certified
statement is needed, use the zCDP rho reported in the defense's ``describe()``.

Calling any function here enables OpenDP's "contrib" feature flag (process-wide).
"""

from __future__ import annotations

import numpy as np

from bngp.errors import InputError
from bngp.validation import check_binary_matrix, check_finite_array

__all__ = ["opendp_laplace", "opendp_gaussian", "opendp_randomized_response"]


def _opendp():
    """Import OpenDP and enable its "contrib" features (needed by its measurements)."""
    import opendp.prelude as dp

    dp.enable_features("contrib")
    return dp


def _check_scale(name: str, value: float) -> float:
    value = float(value)
    if not np.isfinite(value) or value <= 0:
        raise InputError(f"`{name}` must be a finite number > 0, got {value:g}.")
    return value


def _vector_noise(values: np.ndarray, measurement_for_size) -> np.ndarray:
    rows = check_finite_array("x_hat", values, ndim=2)
    measurement = measurement_for_size(rows.shape[1])
    return np.stack([np.asarray(measurement(row.tolist()), dtype=np.float64) for row in rows])


def opendp_laplace(values: np.ndarray, scale: float) -> np.ndarray:
    """y = values + Laplace(scale) noise per entry, through OpenDP's ``make_laplace``.

    Args:
        values: (B, Q) float array (each row is released independently).
        scale: Laplace scale b (density exp(-|z|/b)/(2b)), in the units of ``values``.

    Returns:
        (B, Q) float64 noisy values (not clipped).  Not replayable (OS randomness).
    """
    scale = _check_scale("scale", scale)
    dp = _opendp()

    def measurement(size: int):
        domain = dp.vector_domain(dp.atom_domain(T=float, nan=False), size=size)
        return dp.m.make_laplace(domain, dp.l1_distance(T=float), scale=scale)

    return _vector_noise(values, measurement)


def opendp_gaussian(values: np.ndarray, sigma: float) -> np.ndarray:
    """y = values + N(0, sigma^2) noise per entry, through OpenDP's ``make_gaussian``.

    Args:
        values: (B, Q) float array (each row is released independently).
        sigma: the standard deviation, in the units of ``values``.

    Returns:
        (B, Q) float64 noisy values (not clipped).  Not replayable (OS randomness).
    """
    sigma = _check_scale("sigma", sigma)
    dp = _opendp()

    def measurement(size: int):
        domain = dp.vector_domain(dp.atom_domain(T=float, nan=False), size=size)
        return dp.m.make_gaussian(domain, dp.l2_distance(T=float), scale=sigma)

    return _vector_noise(values, measurement)


def opendp_randomized_response(bits: np.ndarray, flip_probability: float) -> np.ndarray:
    """Flip every bit independently with probability ``flip_probability``, through OpenDP.

    Uses ``make_randomized_response_bitvec`` (RAPPOR's permanent randomized response, Erlingsson
    et al. 2014) whose parameter f replaces a bit by a fair coin with probability f, i.e. flips
    it with probability f/2; here f = 2 * flip_probability.

    Args:
        bits: (N, Q) 0/1 matrix, one record per row.
        flip_probability: p in (0, 1/2].

    Returns:
        (N, Q) uint8 randomized bits.  Not replayable (OS randomness).
    """
    matrix = check_binary_matrix("bits", bits)
    p = float(flip_probability)
    if not 0 < p <= 0.5:
        raise InputError(f"`flip_probability` must be in (0, 0.5], got {p:g}.")
    dp = _opendp()
    n_bits = matrix.shape[1]
    measurement = dp.m.make_randomized_response_bitvec(
        dp.bitvector_domain(max_weight=n_bits), dp.discrete_distance(), f=2.0 * p
    )
    out = np.empty_like(matrix)
    for i, row in enumerate(matrix):
        packed = measurement(np.packbits(row).tobytes())
        out[i] = np.unpackbits(np.frombuffer(packed, dtype=np.uint8))[:n_bits]
    return out
