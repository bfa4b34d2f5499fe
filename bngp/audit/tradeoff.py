"""Converting trade-off-family parameters into (eps, delta).

Gaussian DP (Dong, Roth, Su 2019, "Gaussian differential privacy", Cor. 2.13): a mu-GDP
mechanism is (eps, delta(eps))-DP for every eps >= 0 with

    delta(eps) = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2).

Laplace (shift mu_l between Lap(0, 1) and Lap(mu_l, 1)): the hockey-stick divergence is

    delta(eps) = 1 - exp((eps - mu_l) / 2) for 0 <= eps < mu_l, and 0 for eps >= mu_l,

so eps(delta) = max(0, mu_l + 2 ln(1 - delta)).

Both delta(eps) are decreasing in eps and increasing in the family parameter, so a lower
bound on the parameter gives a lower bound on eps at a fixed delta.  The eps returned here
is the low end of a bisection bracket whose invariant is delta(eps) >= target, i.e. it never
exceeds the exact root.
"""

from __future__ import annotations

import math

from scipy import special

from bngp.audit.inputs import check_delta
from bngp.errors import InputError

__all__ = ["gdp_delta", "gdp_epsilon", "laplace_delta", "laplace_epsilon"]

_BISECTION_STEPS = 80


def _check_parameter(name: str, value: float) -> float:
    value = float(value)
    if not math.isfinite(value) or value < 0:
        raise InputError(f"`{name}` must be a finite number >= 0, got {value}.")
    return value


def gdp_delta(mu: float, epsilon: float) -> float:
    """delta(eps) of a mu-GDP mechanism (Dong, Roth, Su 2019, Cor. 2.13).

    Example:
        >>> round(gdp_delta(1.0, 0.0), 6)  # total variation of N(0,1) vs N(1,1)
        0.382925
    """
    mu = _check_parameter("mu", mu)
    epsilon = _check_parameter("epsilon", epsilon)
    if mu == 0.0:
        return 0.0
    first = special.ndtr(-epsilon / mu + mu / 2.0)
    second = math.exp(epsilon + special.log_ndtr(-epsilon / mu - mu / 2.0))
    return max(float(first - second), 0.0)


def gdp_epsilon(mu: float, delta: float) -> float:
    """Smallest eps >= 0 with delta(eps) <= ``delta`` for a mu-GDP mechanism.

    Returns 0 when mu-GDP already gives (0, delta)-DP and ``inf`` when delta = 0 and mu > 0.
    The result never exceeds the exact root (conservative for a lower bound on eps).

    Example:
        >>> round(gdp_epsilon(1.0, 1e-5), 3)
        4.377
    """
    mu = _check_parameter("mu", mu)
    delta = check_delta(delta)
    if mu == 0.0 or gdp_delta(mu, 0.0) <= delta:
        return 0.0
    if delta == 0.0:
        return math.inf
    low, high = 0.0, max(1.0, mu * mu)
    while gdp_delta(mu, high) > delta:
        low, high = high, 2.0 * high
    for _ in range(_BISECTION_STEPS):
        middle = 0.5 * (low + high)
        if gdp_delta(mu, middle) > delta:
            low = middle
        else:
            high = middle
    return low


def laplace_delta(mu_l: float, epsilon: float) -> float:
    """delta(eps) = max(0, 1 - exp((eps - mu_l)/2)) for Lap(0, 1) vs Lap(mu_l, 1).

    Example:
        >>> round(laplace_delta(1.0, 0.0), 6)
        0.393469
    """
    mu_l = _check_parameter("mu_l", mu_l)
    epsilon = _check_parameter("epsilon", epsilon)
    return max(0.0, -math.expm1((epsilon - mu_l) / 2.0))


def laplace_epsilon(mu_l: float, delta: float) -> float:
    """eps(delta) = max(0, mu_l + 2 ln(1 - delta)) for Lap(0, 1) vs Lap(mu_l, 1).

    Example:
        >>> laplace_epsilon(1.0, 0.0)
        1.0
    """
    mu_l = _check_parameter("mu_l", mu_l)
    delta = check_delta(delta)
    return max(0.0, mu_l + 2.0 * math.log1p(-delta))
