"""Privacy calculators for generated samples (Lin, Sekar, Fanti, *On the Privacy Properties of GAN-generated Samples*, AISTATS 2021).

* Theorem 1: n samples from a GAN trained on m records are (eps, delta)-DP for every eps > 0
  and every

      delta > n Gamma (2 Delta / m + tau) / (eps (1 - e^-eps)) + 2 xi,

  where Gamma bounds how well the discriminator class represents log-density ratios of
  generators (Eq. 1), Delta bounds the discriminators, tau = tau_{k, xi} is the approximation
  + optimisation + sampling error (Eq. 2) and xi the failure probability.  With tau, xi -> 0
  delta = O(n / m).
* Theorem 2 / Corollary 1: any membership attack's ROC lies below TPR = min(1, FPR + r), r the
  total variation between the generated and the real distribution, so AUC <= 1/2 + r - r^2/2;
  inverted, an observed TPR - FPR or AUC implies r >= max(TPR - FPR) and
  r >= 1 - sqrt(2 (1 - AUC)).
* (eps, delta)-DP implies TV <= (e^eps - 1 + 2 delta) / (e^eps + 1) (Kairouz et al. 2015);
  inverted, a total variation r forces eps >= ln((1 + r - 2 delta) / (1 - r)).

Observed TPR/FPR/AUC are point estimates; the inverses below turn them into point values of
r, not confidence bounds.
"""

from __future__ import annotations

import math

import numpy as np

from bngp.audit.inputs import check_delta
from bngp.errors import InputError
from bngp.validation import check_finite_array, check_positive_int

__all__ = [
    "auc_upper_bound",
    "epsilon_lower_bound_from_tv",
    "gan_sample_delta",
    "gan_sample_epsilon",
    "roc_tpr_upper_bound",
    "tv_lower_bound_from_auc",
    "tv_lower_bound_from_roc",
    "tv_upper_bound_from_dp",
]

_BISECTION_STEPS = 200


def _check_tv(tv: float) -> float:
    tv = float(tv)
    if not (0.0 <= tv <= 1.0):
        raise InputError(f"`tv` must be in [0, 1], got {tv}.")
    return tv


def _check_nonnegative(name: str, value: float) -> float:
    value = float(value)
    if not math.isfinite(value) or value < 0:
        raise InputError(f"`{name}` must be a finite number >= 0, got {value}.")
    return value


def _gan_constant(n_samples: int, n_records: int, gamma: float, sensitivity: float, tau: float) -> float:
    """n Gamma (2 Delta / m + tau)."""
    n_samples = check_positive_int("n_samples", n_samples)
    n_records = check_positive_int("n_records", n_records)
    gamma = _check_nonnegative("gamma", gamma)
    sensitivity = _check_nonnegative("sensitivity", sensitivity)
    tau = _check_nonnegative("tau", tau)
    return n_samples * gamma * (2.0 * sensitivity / n_records + tau)


def gan_sample_delta(
    n_samples: int,
    n_records: int,
    epsilon: float,
    *,
    gamma: float = 1.0,
    sensitivity: float = 1.0,
    tau: float = 0.0,
    xi: float = 0.0,
) -> float:
    """Theorem 1's delta threshold: n Gamma (2 Delta/m + tau) / (eps (1 - e^-eps)) + 2 xi.

    Any delta strictly above the returned value is achieved at ``epsilon``.

    Args:
        n_samples: n, the number of generated samples released.
        n_records: m, the number of training records.
        epsilon: eps > 0.
        gamma: Gamma_{F,G} (Eq. 1; 1 for invertible l-layer generators, Bai et al. 2018).
        sensitivity: Delta, the bound on the discriminators (assumption A2).
        tau: tau_{k, xi}, the GAN's generalisation error term (Eq. 2).
        xi: the failure probability.

    Example:
        >>> f"{gan_sample_delta(1, 10_000, 1.0):.4g}"
        '0.0003164'
    """
    constant = _gan_constant(n_samples, n_records, gamma, sensitivity, tau)
    epsilon = float(epsilon)
    if not math.isfinite(epsilon) or epsilon <= 0:
        raise InputError(f"`epsilon` must be a finite number > 0, got {epsilon}.")
    xi = _check_nonnegative("xi", xi)
    return constant / (epsilon * -math.expm1(-epsilon)) + 2.0 * xi


def gan_sample_epsilon(
    n_samples: int,
    n_records: int,
    delta: float,
    *,
    gamma: float = 1.0,
    sensitivity: float = 1.0,
    tau: float = 0.0,
    xi: float = 0.0,
) -> float:
    """Inverse of :func:`gan_sample_delta`: the smallest eps whose delta threshold is <= ``delta``.

    eps (1 - e^-eps) is increasing, so the threshold decreases in eps; the returned eps is
    the high end of a bisection bracket (the guarantee holds at it, erring on the private
    side).  ``inf`` when ``delta <= 2 xi``.

    Example:
        >>> round(gan_sample_epsilon(1, 10_000, 3.1640e-4), 3)
        1.0
    """
    constant = _gan_constant(n_samples, n_records, gamma, sensitivity, tau)
    delta = check_delta(delta)
    xi = _check_nonnegative("xi", xi)
    budget = delta - 2.0 * xi
    if budget <= 0.0:
        return math.inf
    if constant == 0.0:
        return 0.0
    low, high = 0.0, 1.0
    while constant / (high * -math.expm1(-high)) > budget:
        low, high = high, 2.0 * high
    for _ in range(_BISECTION_STEPS):
        middle = 0.5 * (low + high)
        if middle == low or middle == high:
            break
        if constant / (middle * -math.expm1(-middle)) > budget:
            low = middle
        else:
            high = middle
    return high


def roc_tpr_upper_bound(fpr: np.ndarray | float, tv: float) -> np.ndarray:
    """Theorem 2: TPR <= min(1, FPR + r) for every attack, r = total variation.

    Example:
        >>> roc_tpr_upper_bound(np.array([0.0, 0.5, 0.9]), 0.2).tolist()
        [0.2, 0.7, 1.0]
    """
    rates = check_finite_array("fpr", np.atleast_1d(np.asarray(fpr, dtype=np.float64)))
    if np.any((rates < 0) | (rates > 1)):
        raise InputError("`fpr` must lie in [0, 1].")
    return np.minimum(1.0, rates + _check_tv(tv))


def tv_lower_bound_from_roc(fpr: np.ndarray, tpr: np.ndarray) -> float:
    """Inverse of Theorem 2: r >= max(TPR - FPR, 0) over the observed ROC points.

    Example:
        >>> tv_lower_bound_from_roc(np.array([0.0, 0.1, 1.0]), np.array([0.0, 0.4, 1.0]))
        0.30000000000000004
    """
    fprs = check_finite_array("fpr", np.atleast_1d(np.asarray(fpr, dtype=np.float64)), ndim=1)
    tprs = check_finite_array("tpr", np.atleast_1d(np.asarray(tpr, dtype=np.float64)), ndim=1)
    if fprs.shape != tprs.shape:
        raise InputError(f"`fpr` and `tpr` must have the same length, got {fprs.shape[0]} and {tprs.shape[0]}.")
    if np.any((fprs < 0) | (fprs > 1) | (tprs < 0) | (tprs > 1)):
        raise InputError("`fpr` and `tpr` must lie in [0, 1].")
    return float(max(np.max(tprs - fprs), 0.0))


def auc_upper_bound(tv: float) -> float:
    """Corollary 1: AUC <= 1/2 + r - r^2 / 2.

    Example:
        >>> round(auc_upper_bound(0.2), 10)
        0.68
    """
    tv = _check_tv(tv)
    return 0.5 + tv - 0.5 * tv * tv


def tv_lower_bound_from_auc(auc: float) -> float:
    """Inverse of Corollary 1: r >= 1 - sqrt(2 (1 - AUC)), clipped to [0, 1].

    Example:
        >>> round(tv_lower_bound_from_auc(0.68), 10)
        0.2
    """
    auc = float(auc)
    if not (0.0 <= auc <= 1.0):
        raise InputError(f"`auc` must be in [0, 1], got {auc}.")
    return max(0.0, 1.0 - math.sqrt(2.0 * (1.0 - auc)))


def tv_upper_bound_from_dp(epsilon: float, delta: float = 0.0) -> float:
    """(eps, delta)-DP implies TV <= (e^eps - 1 + 2 delta) / (e^eps + 1) (capped at 1).

    Example:
        >>> round(tv_upper_bound_from_dp(1.0), 4)
        0.4621
    """
    epsilon = _check_nonnegative("epsilon", epsilon)
    delta = check_delta(delta)
    return min(1.0, (math.expm1(epsilon) + 2.0 * delta) / (math.exp(epsilon) + 1.0))


def epsilon_lower_bound_from_tv(tv: float, delta: float = 0.0) -> float:
    """Inverse of :func:`tv_upper_bound_from_dp`: eps >= ln((1 + r - 2 delta) / (1 - r)), >= 0.

    0 when r <= delta (allowed at eps = 0); ``inf`` when r = 1 (no finite eps allows it).

    Example:
        >>> round(epsilon_lower_bound_from_tv(tv_upper_bound_from_dp(1.0)), 10)
        1.0
    """
    tv = _check_tv(tv)
    delta = check_delta(delta)
    if tv <= delta:
        return 0.0
    if tv >= 1.0:
        return math.inf
    return max(0.0, math.log((1.0 + tv - 2.0 * delta) / (1.0 - tv)))
