"""Raw membership statistics shared by the attacks, in torch (differentiable) and numpy.

Every statistic here is affine in the binary target vector d_k:

    stat(d_k, x) = sum_j d_kj * w_j(x) + c(x),

so scoring n targets against R releases is one matrix product (R x |Q|) @ (|Q| x n) plus a
per-release offset.  :func:`affine_statistic` evaluates that product in blocks of SNVs
(converting each block of the compact integer targets to float inside the CPU cache, which
makes the conversion nearly free) and in blocks of releases, so memory stays bounded by a
few megabytes beyond the inputs and the (R, n) output.

Statistics:

- :func:`lrs_torch` -- Sankararaman et al. (2009), arXiv:2410.07414 App. M:
  lrs(d_k, x) = sum_j [d_kj log(p_bar_j / x_j) + (1 - d_kj) log((1 - p_bar_j) / (1 - x_j))],
  x and p_bar clipped to [epsilon, 1 - epsilon].  Low lrs = evidence of membership.
- :func:`dwork_score_torch` -- Dwork, Smith, Steinke, Ullman, Vadhan (2015):
  score(y, x) = <y - p_bar, x - p_bar>.
- :func:`homer_torch` -- Homer et al. (2008): D(y) = sum_j (|y_j - p_bar_j| - |y_j - x_j|).
  For binary y, |y_j - x_j| = (1 - y_j)|x_j| + y_j |1 - x_j| exactly (any real x), which
  keeps the absolute values (subdifferentiable) and the affine form.
- :func:`weighted_score_torch` -- the variance-weighted score
  sum_j (d_kj - p_bar_j)(x_j - p_bar_j) / (p_bar_j (1 - p_bar_j)), the Gaussian-approximation
  log-likelihood-ratio direction (used as a feature by the learned attackers).

The numpy functions (:func:`lrs`, :func:`dwork_score`, :func:`homer`,
:func:`weighted_score`) validate their inputs and call the torch implementation without
gradients.  The releases' dtype is the compute dtype: float32 releases are scored in
float32 (the fast path), float64 releases in float64.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from bngp.data.bits import BitMatrix

from .inputs import check_pair, check_reference_frequencies, check_releases, check_targets, compute_dtype

__all__ = [
    "affine_statistic",
    "lrs_torch",
    "dwork_score_torch",
    "homer_torch",
    "weighted_score_torch",
    "lrs",
    "dwork_score",
    "homer",
    "weighted_score",
    "DEFAULT_EPSILON",
]

#: default clipping of frequencies away from 0 and 1 in the log-likelihood statistics.
DEFAULT_EPSILON = 1e-3

#: float elements of one converted block of targets (4 MiB in float32: stays in cache).
_BLOCK_ELEMENTS = 1 << 20
#: releases processed at once (bounds the (releases x SNV-block) coefficient arrays).
_RELEASE_BLOCK = 4096

#: coefficients(x_block, columns) -> (w (R_block, c), c_part (R_block,)): the slope on d_kj
#: and the contribution of these columns to the per-release offset.
Coefficients = Callable[[torch.Tensor, slice], tuple[torch.Tensor, torch.Tensor]]


def _snv_block(n_targets: int, n_attributes: int) -> int:
    block = max(64, (_BLOCK_ELEMENTS // max(n_targets, 1)) // 64 * 64)
    return min(block, n_attributes)


def affine_statistic(
    targets: torch.Tensor | np.ndarray | BitMatrix,
    releases: torch.Tensor,
    coefficients: Coefficients,
) -> torch.Tensor:
    """Evaluate sum_j d_kj w_j(x_r) + c(x_r) for all releases r and targets k, shape (R, n).

    Args:
        targets: (n, |Q|) binary targets, any numeric/bool dtype (numpy or torch) or bit-packed
            (:class:`bngp.data.bits.BitMatrix`, unpacked one SNV block at a time); never
            converted to float as a whole.
        releases: (R, |Q|) float tensor; its dtype is the compute dtype.
        coefficients: per-SNV-block slopes and offset contributions (see :data:`Coefficients`).

    Differentiable in anything ``coefficients`` depends on (the releases, parameters);
    without gradients a single conversion buffer is reused and the product accumulates in
    place.
    """
    packed = isinstance(targets, BitMatrix)
    if isinstance(targets, np.ndarray):
        targets = torch.from_numpy(targets)
    dtype = releases.dtype
    n_targets, n_attributes = targets.shape
    block = _snv_block(n_targets, n_attributes)
    pieces = []
    for r0 in range(0, releases.shape[0], _RELEASE_BLOCK):
        x = releases[r0 : r0 + _RELEASE_BLOCK]
        out = torch.zeros((x.shape[0], n_targets), dtype=dtype)
        offset = torch.zeros(x.shape[0], dtype=dtype)
        buffer = torch.empty((n_targets, block), dtype=dtype)
        for j0 in range(0, n_attributes, block):
            columns = slice(j0, min(j0 + block, n_attributes))
            slope, offset_part = coefficients(x[:, columns], columns)
            slope = slope.to(dtype)
            offset = offset + offset_part.to(dtype)
            width = columns.stop - columns.start
            block_targets = torch.from_numpy(targets.columns(columns.start, columns.stop)) if packed \
                else targets[:, columns]
            if slope.requires_grad and torch.is_grad_enabled():
                out = out + slope @ block_targets.to(dtype).T
            else:
                chunk = buffer[:, :width]
                chunk.copy_(block_targets)
                out.addmm_(slope, chunk.T)
        pieces.append(out + offset[:, None])
    return pieces[0] if len(pieces) == 1 else torch.cat(pieces, dim=0)


def _as_frequencies(reference_frequencies: torch.Tensor | np.ndarray, dtype: torch.dtype) -> torch.Tensor:
    return torch.as_tensor(reference_frequencies).to(dtype)


def lrs_torch(
    targets: torch.Tensor | np.ndarray,
    releases: torch.Tensor,
    reference_frequencies: torch.Tensor | np.ndarray,
    epsilon: float = DEFAULT_EPSILON,
) -> torch.Tensor:
    """lrs(d_k, x_r) of Sankararaman et al. (2009) for all pairs, shape (R, n); low = member.

    lrs = sum_j [d_kj log(p_j / x_j) + (1 - d_kj) log((1 - p_j) / (1 - x_j))], with x and p
    clipped to [epsilon, 1 - epsilon].  Evaluated as
    lrs = sum_j d_kj (logit p_j - logit x_j) + sum_j [log(1 - p_j) - log(1 - x_j)].
    """
    p = _as_frequencies(reference_frequencies, releases.dtype).clamp(epsilon, 1 - epsilon)
    logit_p = torch.logit(p)
    log_not_p = torch.log1p(-p)

    def coefficients(x: torch.Tensor, columns: slice) -> tuple[torch.Tensor, torch.Tensor]:
        x = x.clamp(epsilon, 1 - epsilon)
        offset = log_not_p[columns].sum() - torch.log1p(-x).sum(dim=1)
        return logit_p[columns] - torch.logit(x), offset

    return affine_statistic(targets, releases, coefficients)


def dwork_score_torch(
    targets: torch.Tensor | np.ndarray,
    releases: torch.Tensor,
    reference_frequencies: torch.Tensor | np.ndarray,
) -> torch.Tensor:
    """<d_k - p_bar, x_r - p_bar> (Dwork et al. 2015) for all pairs, shape (R, n); high = member."""
    p = _as_frequencies(reference_frequencies, releases.dtype)

    def coefficients(x: torch.Tensor, columns: slice) -> tuple[torch.Tensor, torch.Tensor]:
        centred = x - p[columns]
        return centred, -(centred @ p[columns])

    return affine_statistic(targets, releases, coefficients)


def homer_torch(
    targets: torch.Tensor | np.ndarray,
    releases: torch.Tensor,
    reference_frequencies: torch.Tensor | np.ndarray,
) -> torch.Tensor:
    """D(d_k, x_r) = sum_j (|d_kj - p_bar_j| - |d_kj - x_rj|) (Homer et al. 2008), shape (R, n).

    Uses |d - a| = (1 - d)|a| + d|1 - a| for binary d, so the statistic is affine in d:
    D = sum_j (p_j - |x_j|) + sum_j d_kj [(1 - p_j - |1 - x_j|) - (p_j - |x_j|)].
    """
    p = _as_frequencies(reference_frequencies, releases.dtype)

    def coefficients(x: torch.Tensor, columns: slice) -> tuple[torch.Tensor, torch.Tensor]:
        pj = p[columns]
        non_carrier = pj - torch.abs(x)
        carrier = (1 - pj) - torch.abs(1 - x)
        return carrier - non_carrier, non_carrier.sum(dim=1)

    return affine_statistic(targets, releases, coefficients)


def weighted_score_torch(
    targets: torch.Tensor | np.ndarray,
    releases: torch.Tensor,
    reference_frequencies: torch.Tensor | np.ndarray,
    epsilon: float = DEFAULT_EPSILON,
) -> torch.Tensor:
    """sum_j (d_kj - p_j)(x_rj - p_j) / (p_j (1 - p_j)), p clipped to [epsilon, 1 - epsilon], shape (R, n)."""
    p = _as_frequencies(reference_frequencies, releases.dtype).clamp(epsilon, 1 - epsilon)
    weight = 1.0 / (p * (1 - p))

    def coefficients(x: torch.Tensor, columns: slice) -> tuple[torch.Tensor, torch.Tensor]:
        slope = (x - p[columns]) * weight[columns]
        return slope, -(slope @ p[columns])

    return affine_statistic(targets, releases, coefficients)


def _numpy_statistic(
    function: Callable[..., torch.Tensor],
    targets: np.ndarray,
    releases: np.ndarray,
    reference_frequencies: np.ndarray,
    **options: float,
) -> np.ndarray:
    targets = check_targets(targets)
    releases = check_releases(releases)
    check_pair(targets, releases)
    p = check_reference_frequencies(reference_frequencies, targets.shape[1])
    x = torch.from_numpy(releases).to(compute_dtype(releases))
    with torch.no_grad():
        return function(targets, x, p, **options).numpy()


def lrs(
    targets: np.ndarray, releases: np.ndarray, reference_frequencies: np.ndarray, epsilon: float = DEFAULT_EPSILON
) -> np.ndarray:
    """numpy form of :func:`lrs_torch` (validated inputs), shape (R, n)."""
    return _numpy_statistic(lrs_torch, targets, releases, reference_frequencies, epsilon=epsilon)


def dwork_score(targets: np.ndarray, releases: np.ndarray, reference_frequencies: np.ndarray) -> np.ndarray:
    """numpy form of :func:`dwork_score_torch` (validated inputs), shape (R, n)."""
    return _numpy_statistic(dwork_score_torch, targets, releases, reference_frequencies)


def homer(targets: np.ndarray, releases: np.ndarray, reference_frequencies: np.ndarray) -> np.ndarray:
    """numpy form of :func:`homer_torch` (validated inputs), shape (R, n)."""
    return _numpy_statistic(homer_torch, targets, releases, reference_frequencies)


def weighted_score(
    targets: np.ndarray, releases: np.ndarray, reference_frequencies: np.ndarray, epsilon: float = DEFAULT_EPSILON
) -> np.ndarray:
    """numpy form of :func:`weighted_score_torch` (validated inputs), shape (R, n)."""
    return _numpy_statistic(weighted_score_torch, targets, releases, reference_frequencies, epsilon=epsilon)
