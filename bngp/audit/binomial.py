"""Binomial confidence limits and the binomial test behind the one-run and PANORAMIA audits.

Clopper-Pearson (1934) one-sided limits for k successes out of n:

    upper(k, n; b) = BetaPPF(1 - b; k + 1, n - k)   (= 1 when k = n)
    lower(k, n; b) = BetaPPF(b; k, n - k + 1)       (= 0 when k = 0)

The core binomial test (Steinke, Nasr, Jagielski 2023, "Privacy auditing with one (1)
training run", Theorem 3.1 / Prop. 5.7; PANORAMIA (arXiv:2402.09477), Prop. 1-3 and App. E):
among r guesses, v correct; under an (eps, delta)-DP mechanism with m canaries, and with
q = e^eps / (1 + e^eps),

    p(eps) = P[Bin(r, q) >= v] + 2 m delta max_{i=1..v} (1/i) P[v - i <= Bin(r, q) < v]

is a valid p-value for the hypothesis "the mechanism is (eps, delta)-DP".  The bound is
``sup{eps >= 0 : p(eps) < beta}`` (0 when eps = 0 is not rejected).  With delta = 0 the tail
P[Bin(r, q) >= v] = I_q(v, r - v + 1) is increasing in q, so the supremum is exactly
``logit(BetaPPF(beta; v, r - v + 1))``; with delta > 0 it is found by bracketing in steps of
1 and bisection, returning the low end (a rejected value), which errs on the conservative
side.  Every eps' above the true eps is also a true hypothesis, so reporting any rejected
eps is valid at level beta.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import special

from bngp.audit.inputs import check_confidence, check_delta
from bngp.audit.results import AuditResult
from bngp.errors import InputError
from bngp.validation import check_in_open_interval, check_positive_int

__all__ = [
    "BinomialBound",
    "binomial_bound",
    "binomial_p_value",
    "clopper_pearson_lower",
    "clopper_pearson_upper",
]

#: relative nudge applied to computed quantiles, in the conservative direction, to absorb the
#: ~1e-15 relative error of scipy's incomplete-beta inverse.
_NUDGE = 1e-12
#: bisection stops when the bracket is narrower than this (in eps).
_TOLERANCE = 1e-9
#: largest eps tried while bracketing (q = expit(eps) is 1.0 in float64 well before this).
_EPS_CAP = 200.0
#: the delta term's running averages are computed exactly within this many standard
#: deviations below the mean of Bin(r, q); the rest is bounded from above.
_WINDOW_SDS = 12.0
#: relative inflation of computed p-values covering rounding in the incomplete beta function
#: and the log-gamma pmf (both accurate to ~1e-13 relative).
_SLACK = 1e-9


def _as_counts(name: str, values: np.ndarray | int | float) -> np.ndarray:
    array = np.asarray(values, dtype=np.float64)
    if not np.all(np.isfinite(array)) or np.any(array < 0):
        raise InputError(f"`{name}` must be finite and >= 0, got {values!r}.")
    return array


def clopper_pearson_upper(k: np.ndarray | int, n: np.ndarray | int, alpha: float) -> np.ndarray:
    """One-sided upper (1 - alpha) Clopper-Pearson limit of a binomial proportion.

    ``BetaPPF(1 - alpha; k + 1, n - k)``, computed as ``1 - BetaPPF(alpha; n - k, k + 1)``
    for accuracy in small tails; 1 where ``k >= n``.  Vectorised over ``k`` and ``n``.

    Args:
        k: observed successes (0 <= k <= n; real values are accepted for expected counts).
        n: trials (> 0).
        alpha: one-sided error probability in (0, 1).

    Returns:
        float64 array (0-d for scalar inputs) of upper limits in (0, 1].
    """
    k_arr, n_arr = np.broadcast_arrays(_as_counts("k", k), _as_counts("n", n))
    if np.any(k_arr > n_arr) or np.any(n_arr <= 0):
        raise InputError("`k` must satisfy 0 <= k <= n with n > 0.")
    check_in_open_interval("alpha", alpha, 0.0, 1.0)
    full = k_arr >= n_arr
    a = np.where(full, 1.0, n_arr - k_arr)
    lower_tail = special.betaincinv(a, k_arr + 1.0, alpha)
    upper = 1.0 - lower_tail * (1.0 - _NUDGE)
    return np.where(full, 1.0, np.minimum(upper, 1.0))


def clopper_pearson_lower(k: np.ndarray | int, n: np.ndarray | int, alpha: float) -> np.ndarray:
    """One-sided lower (1 - alpha) Clopper-Pearson limit: ``BetaPPF(alpha; k, n - k + 1)``, 0 at k = 0."""
    k_arr, n_arr = np.broadcast_arrays(_as_counts("k", k), _as_counts("n", n))
    if np.any(k_arr > n_arr) or np.any(n_arr <= 0):
        raise InputError("`k` must satisfy 0 <= k <= n with n > 0.")
    check_in_open_interval("alpha", alpha, 0.0, 1.0)
    zero = k_arr <= 0
    value = special.betaincinv(np.where(zero, 1.0, k_arr), n_arr - k_arr + 1.0, alpha)
    return np.where(zero, 0.0, value * (1.0 - _NUDGE))


def _pure_bound(r: np.ndarray, v: np.ndarray, beta: float | np.ndarray) -> np.ndarray:
    """Vectorised delta = 0 bound: ``max(0, logit(BetaPPF(beta'; v, r - v + 1)))`` (0 where v = 0).

    beta' = beta / (1 + 2 _SLACK) leaves room for the slack of :func:`_p_value`, so the p-value
    at the returned bound stays below beta.
    """
    r = np.asarray(r, dtype=np.float64)
    v = np.asarray(v, dtype=np.float64)
    some = v > 0
    level = np.asarray(beta, dtype=np.float64) / (1.0 + 2.0 * _SLACK)
    q = special.betaincinv(np.where(some, v, 1.0), np.where(some, r - v + 1.0, 1.0), level)
    return np.where(some & (q > 0.5), np.maximum(special.logit(q), 0.0), 0.0)


def _binomial_pmf(j: np.ndarray, r: int | np.ndarray, q: float) -> np.ndarray:
    """P[Bin(r, q) = j] from log-gamma terms (0 log 0 = 0 at q = 1); broadcasts j and r."""
    log_pmf = (
        special.gammaln(r + 1.0)
        - special.gammaln(j + 1.0)
        - special.gammaln(r - j + 1.0)
        + special.xlogy(j, q)
        + special.xlog1py(r - j, -q)
    )
    return np.exp(log_pmf)


def _delta_term(r: int, v: int, q: float) -> float:
    """Upper bound (exact up to ~1e-20) on ``max_{i=1..v} (1/i) P[v - i <= Bin(r, q) < v]``.

    The running averages are computed over the window j = lo..v-1 with lo about 12 standard
    deviations below the mean; for longer ranges (i > v - lo) the average is at most the
    window's average plus P[Bin < lo] / (v - lo), which is added so that the result never
    falls below the exact maximum.
    """
    if v == 0:
        return 0.0
    spread = np.sqrt(r * q * (1.0 - q))
    low = min(max(0, int(np.floor(r * q - _WINDOW_SDS * spread - 1.0))), v - 1)
    pmf = _binomial_pmf(np.arange(v - 1, low - 1, -1, dtype=np.float64), r, q)
    term = float(np.max(np.cumsum(pmf) / np.arange(1, v - low + 1)))
    if low > 0:
        term += float(special.bdtr(low - 1, r, q)) / (v - low)
    return term


def _p_value(m: int, r: int, v: int, epsilon: float, delta: float) -> float:
    """The p-value of the module docstring, inflated by ``_SLACK`` for floating-point error."""
    if v == 0:
        return 1.0
    q = float(special.expit(epsilon))
    p = float(special.bdtrc(v - 1, r, q))
    if delta > 0.0:
        p += 2.0 * m * delta * _delta_term(r, v, q)
    return min(p * (1.0 + _SLACK), 1.0)


def binomial_p_value(r: int, v: int, epsilon: float, *, m: int = 0, delta: float = 0.0) -> float:
    """p-value of "(eps, delta)-DP" after v correct guesses out of r (m canaries).

    ``P[Bin(r, q) >= v] + 2 m delta max_{i=1..v} (1/i) P[v - i <= Bin(r, q) < v]`` with
    ``q = e^eps / (1 + e^eps)`` (Steinke, Nasr, Jagielski 2023, Prop. 5.7), capped at 1.
    With ``delta`` replaced by the closeness slack gamma this is PANORAMIA's (c, gamma) test
    (PANORAMIA (arXiv:2402.09477), App. E, Prop. 3).

    Example:
        >>> round(binomial_p_value(10, 10, 0.0), 6)  # ten right coin-flip guesses
        0.000977
    """
    r = check_positive_int("r", r, minimum=1)
    v = check_positive_int("v", v, minimum=0, maximum=r)
    m = check_positive_int("m", m, minimum=0)
    delta = check_delta(delta)
    if delta > 0 and m < r:
        raise InputError(f"`m` (number of canaries) must be >= r = {r} when delta > 0, got {m}.")
    epsilon = float(epsilon)
    if not np.isfinite(epsilon) or epsilon < 0:
        raise InputError(f"`epsilon` must be a finite number >= 0, got {epsilon}.")
    return _p_value(m, r, v, epsilon, delta)


def _p_value_floor(m: int, r: np.ndarray, v: np.ndarray, epsilon: float, delta: float) -> np.ndarray:
    """Vectorised lower bound on the p-value (before the slack), for screening.

    Uses two terms of the maximum over i: i = 1 and i = v - k with k = floor(r q) (the part
    of the distribution between its centre and v); 1 where v = 0.
    """
    q = float(special.expit(epsilon))
    r = np.asarray(r, dtype=np.int64)
    v = np.asarray(v, dtype=np.float64)
    below = np.maximum(v - 1.0, 0.0)
    centre = np.minimum(np.floor(r * q), below)
    near = _binomial_pmf(below, r, q)
    under_centre = np.where(centre >= 1.0, special.bdtr(np.maximum(centre - 1.0, 0.0), r, q), 0.0)
    wide = (special.bdtr(below, r, q) - under_centre) / np.maximum(v - centre, 1.0)
    floor = special.bdtrc(below, r, q) + 2.0 * m * delta * np.maximum(near, wide)
    return np.where(v > 0, floor, 1.0)


def _refine(m: int, r: int, v: int, beta: float, delta: float, low: float, high: float) -> float:
    """Bisection between ``low`` (with p(low) < beta, checked by the caller) and ``high``.

    Keeps the invariant p(low) < beta and returns ``low``: always a rejected value.
    """
    while high - low > _TOLERANCE:
        middle = 0.5 * (low + high)
        if _p_value(m, r, v, middle, delta) < beta:
            low = middle
        else:
            high = middle
    return low


def _bound(m: int, r: int, v: int, beta: float, delta: float) -> float:
    """``sup{eps >= 0 : p(eps) < beta}``: closed form at delta = 0, else bracket + bisection."""
    if delta == 0.0:
        return float(_pure_bound(np.array(r), np.array(v), beta))
    if _p_value(m, r, v, 0.0, delta) >= beta:
        return 0.0
    low, high = 0.0, 1.0
    while _p_value(m, r, v, high, delta) < beta:
        low, high = high, high + 1.0
        if high > _EPS_CAP:
            return low
    return _refine(m, r, v, beta, delta, low, high)


@dataclass(frozen=True)
class BinomialBound(AuditResult):
    """The binomial-test lower bound for one set of guesses.

    Attributes:
        epsilon_lb: ``sup{eps >= 0 : p(eps) < 1 - confidence}``; in PANORAMIA this is
            c_lb (baseline guesses) or {c+eps}_lb (MIA guesses).
        n_guesses: r, the number of guesses (predicted members for PANORAMIA).
        n_correct: v, the correct guesses (true positives for PANORAMIA).
        n_canaries: m, the canary count that multiplies delta (0 when delta = 0).
    """

    epsilon_lb: float
    n_guesses: int
    n_correct: int
    n_canaries: int


def binomial_bound(
    r: int,
    v: int,
    *,
    confidence: float = 0.95,
    delta: float = 0.0,
    m: int = 0,
) -> BinomialBound:
    """Lower bound on eps from v correct guesses out of r, at the given confidence.

    ``sup{x >= 0 : P[Bin(r, sigmoid(x)) >= v] + 2 m delta max_i (1/i) P[v-i <= Bin < v]
    < beta}``, beta = 1 - confidence (module docstring; PANORAMIA Cor. 2, Steinke et al.
    2023 Theorem 3.1).  No union bound: ``confidence`` is the per-test level.

    Example:
        >>> round(binomial_bound(5000, 5000, confidence=1 - 0.025).epsilon_lb, 4)
        7.2115
    """
    r = check_positive_int("r", r, minimum=1)
    v = check_positive_int("v", v, minimum=0, maximum=r)
    m = check_positive_int("m", m, minimum=0)
    beta = 1.0 - check_confidence(confidence)
    delta = check_delta(delta)
    if delta > 0 and m < r:
        raise InputError(f"`m` (number of canaries) must be >= r = {r} when delta > 0, got {m}.")
    return BinomialBound(
        method="binomial test",
        confidence=1.0 - beta,
        delta=delta,
        thresholds_examined=1,
        union_bound="none",
        epsilon_lb=_bound(m, r, v, beta, delta),
        n_guesses=r,
        n_correct=v,
        n_canaries=m,
    )
