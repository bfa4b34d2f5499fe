"""Audit as bit transmission (Xiang, Wang, Wang, *Privacy Audit as Bits Transmission: (Im)possibilities for Audit by One Run*).

n secret bits, each 0/1 with probability 1/2 and carried by its own canary (one noise source
per canary, so per-bit errors are independent); the auditor guesses every bit (no
abstention) and makes k mistakes.  For a mechanism whose trade-off curve is f, every bit is
guessed wrongly with probability at least the per-bit error floor p_f^e = h^-1(1 - u_f(1/2))
(Xiang, Wang, Wang sec. 4), which for a symmetric f is the fixed point x* = f(x*):

    GDP(mu):          p = Phi(-mu / 2)                 ->  mu_L  = -2 Phi^-1(p_hat)
    (eps, delta):     p = (1 - delta) / (1 + e^eps)    ->  eps_L = ln((1 - delta - p_hat) / p_hat)
    Laplace(mu_l):    p = e^(-mu_l / 2) / 2            ->  mu_L  = -2 ln(2 p_hat)

The error count stochastically dominates Bin(n, p_f^e), so an upper confidence bound p_hat on
the error rate gives theta_L, a lower bound on the family parameter, at confidence gamma:

* Clopper-Pearson (default): p_hat = BetaPPF(gamma; k + 1, n - k) (= 1 when k = n);
* Hoeffding: p_hat = k / n + sqrt(ln(1 / (1 - gamma)) / (2 n)) (valid, looser).

(The paper's "advanced CI" loop is slightly anti-conservative and is not offered.)  theta_L
is then converted into eps at the given delta (:mod:`bngp.audit.tradeoff`).  Only the
generic (eps, delta) family is assumption-free; the GDP and Laplace conversions are valid
only if the mechanism's trade-off curve belongs to that family, and the result says so.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import special

from bngp.audit.binomial import clopper_pearson_upper
from bngp.audit.inputs import check_confidence, check_delta, check_labels
from bngp.audit.results import AuditResult
from bngp.audit.tradeoff import gdp_epsilon, laplace_epsilon
from bngp.errors import InputError
from bngp.validation import check_positive_int

__all__ = [
    "FAMILIES",
    "INTERVALS",
    "BitsResult",
    "bits_audit",
    "bits_audit_from_counts",
    "error_rate_upper_bound",
    "per_bit_error_floor",
    "theta_from_error_rate",
]

#: trade-off families understood by the bits audit.
FAMILIES = ("eps-delta", "gdp", "laplace")
#: upper confidence bounds on the error rate.
INTERVALS = ("clopper-pearson", "hoeffding")

_PARAMETER_NAMES = {"eps-delta": "epsilon", "gdp": "mu", "laplace": "mu_l"}
_ASSUMPTIONS = {
    "eps-delta": "none: the generic (eps, delta) family gives an assumption-free bound",
    "gdp": "the mechanism is mu-GDP (Gaussian trade-off); eps converted from mu_L at delta",
    "laplace": "the mechanism has a Laplace(mu_l) trade-off; eps converted from mu_L at delta",
}


def _check_family(family: str) -> str:
    if family not in FAMILIES:
        raise InputError(f"`family` must be one of {', '.join(FAMILIES)}, got {family!r}.")
    return family


def per_bit_error_floor(family: str, theta: float, delta: float = 0.0) -> float:
    """The smallest per-bit error p_f^e of a mechanism in ``family`` with parameter theta.

    Example:
        >>> round(per_bit_error_floor("eps-delta", 1.0), 4)  # randomized response, eps = 1
        0.2689
    """
    family = _check_family(family)
    theta = float(theta)
    if not math.isfinite(theta) or theta < 0:
        raise InputError(f"`theta` must be a finite number >= 0, got {theta}.")
    delta = check_delta(delta)
    if family == "gdp":
        return float(special.ndtr(-theta / 2.0))
    if family == "laplace":
        return 0.5 * math.exp(-theta / 2.0)
    return (1.0 - delta) / (1.0 + math.exp(theta))


def _theta(family: str, p_hat: np.ndarray, delta: float) -> np.ndarray:
    """Vectorised inverse of the error floor, clipped at 0 (p_hat >= floor(0) gives 0)."""
    p_hat = np.asarray(p_hat, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        if family == "gdp":
            theta = -2.0 * special.ndtri(p_hat)
        elif family == "laplace":
            theta = -2.0 * np.log(2.0 * p_hat)
        else:
            theta = np.log(1.0 - delta - p_hat) - np.log(p_hat)
    return np.where(np.isnan(theta), 0.0, np.maximum(theta, 0.0))


def theta_from_error_rate(family: str, p_hat: float, delta: float = 0.0) -> float:
    """theta_L: the largest family parameter whose error floor is still >= ``p_hat`` (>= 0).

    Example:
        >>> round(theta_from_error_rate("gdp", 0.5 * math.erfc(0.5 / math.sqrt(2))), 6)
        1.0
    """
    family = _check_family(family)
    p_hat = float(p_hat)
    if not (0.0 < p_hat <= 1.0):
        raise InputError(f"`p_hat` must be in (0, 1], got {p_hat}.")
    return float(_theta(family, np.array(p_hat), check_delta(delta)))


def _upper(n: int, k: np.ndarray, confidence: float, interval: str) -> np.ndarray:
    if interval == "clopper-pearson":
        return clopper_pearson_upper(k, n, 1.0 - confidence)
    margin = math.sqrt(math.log(1.0 / (1.0 - confidence)) / (2.0 * n))
    return np.minimum(np.asarray(k, dtype=np.float64) / n + margin, 1.0)


def error_rate_upper_bound(
    n_bits: int, n_errors: int, *, confidence: float = 0.95, interval: str = "clopper-pearson"
) -> float:
    """Upper confidence bound p_hat on the per-bit error rate (module docstring).

    Example:
        >>> round(error_rate_upper_bound(1000, 269), 4)
        0.2931
    """
    n_bits = check_positive_int("n_bits", n_bits, minimum=1)
    n_errors = check_positive_int("n_errors", n_errors, minimum=0, maximum=n_bits)
    confidence = check_confidence(confidence)
    if interval not in INTERVALS:
        raise InputError(f"`interval` must be one of {', '.join(INTERVALS)}, got {interval!r}.")
    return float(_upper(n_bits, np.array(n_errors), confidence, interval))


@dataclass(frozen=True)
class BitsResult(AuditResult):
    """Bit-transmission audit result.

    Attributes:
        epsilon_lb: eps at ``delta`` implied by theta_L under ``family`` (see
            ``epsilon_assumption``).
        family: the trade-off family ("eps-delta", "gdp" or "laplace").
        parameter: the family parameter's name ("epsilon", "mu" or "mu_l").
        theta_lb: theta_L, the lower bound on the family parameter.
        epsilon_assumption: what ``epsilon_lb`` assumes about the mechanism.
        interval: "clopper-pearson" or "hoeffding".
        n_bits: n.
        n_errors: k, the wrong guesses.
        error_rate: k / n.
        error_rate_upper: p_hat, the upper confidence bound on the error rate.
    """

    epsilon_lb: float
    family: str
    parameter: str
    theta_lb: float
    epsilon_assumption: str
    interval: str
    n_bits: int
    n_errors: int
    error_rate: float
    error_rate_upper: float


def _epsilon(family: str, theta: float, delta: float) -> float:
    if family == "gdp":
        return gdp_epsilon(theta, delta)
    if family == "laplace":
        return laplace_epsilon(theta, delta)
    return theta


def bits_audit_from_counts(
    n_bits: int,
    n_errors: int,
    *,
    confidence: float = 0.95,
    delta: float = 1e-5,
    family: str = "eps-delta",
    interval: str = "clopper-pearson",
) -> BitsResult:
    """Bit-transmission audit from the number of bits and of wrong guesses.

    Example (Xiang, Wang, Wang's reference, randomized response eps = 1, expected errors):
        >>> round(bits_audit_from_counts(1000, 269).epsilon_lb, 3)
        0.881
    """
    n_bits = check_positive_int("n_bits", n_bits, minimum=1)
    n_errors = check_positive_int("n_errors", n_errors, minimum=0, maximum=n_bits)
    confidence = check_confidence(confidence)
    delta = check_delta(delta)
    family = _check_family(family)
    if interval not in INTERVALS:
        raise InputError(f"`interval` must be one of {', '.join(INTERVALS)}, got {interval!r}.")
    if family == "gdp" and delta == 0.0:
        raise InputError(
            "`delta` must be > 0 for the GDP family (a mu-GDP mechanism with mu > 0 has eps = inf at delta = 0)."
        )
    p_hat = float(_upper(n_bits, np.array(n_errors), confidence, interval))
    theta = float(_theta(family, np.array(p_hat), delta))
    return BitsResult(
        method=f"bits transmission ({interval})",
        confidence=confidence,
        delta=delta,
        thresholds_examined=1,
        union_bound="none",
        epsilon_lb=_epsilon(family, theta, delta),
        family=family,
        parameter=_PARAMETER_NAMES[family],
        theta_lb=theta,
        epsilon_assumption=_ASSUMPTIONS[family],
        interval=interval,
        n_bits=n_bits,
        n_errors=n_errors,
        error_rate=n_errors / n_bits,
        error_rate_upper=p_hat,
    )


def bits_audit(
    guesses: np.ndarray,
    bits: np.ndarray,
    *,
    confidence: float = 0.95,
    delta: float = 1e-5,
    family: str = "eps-delta",
    interval: str = "clopper-pearson",
) -> BitsResult:
    """Bit-transmission audit from the auditor's guesses and the true secret bits.

    Args:
        guesses: guessed bit per canary (0/1).
        bits: true secret bit per canary (0/1), each drawn with probability 1/2.
        confidence: gamma, the confidence of the upper bound on the error rate.
        delta: the delta at which eps is reported.
        family: trade-off family assumed for the conversion ("eps-delta" assumes nothing).
        interval: "clopper-pearson" or "hoeffding".
    """
    truth = check_labels("bits", bits)
    guessed = check_labels("guesses", guesses, length=truth.shape[0])
    errors = int(np.count_nonzero(guessed != truth))
    return bits_audit_from_counts(
        truth.shape[0], errors, confidence=confidence, delta=delta, family=family, interval=interval
    )
