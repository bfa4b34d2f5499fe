"""Calibration of the DP mechanisms: pure functions (eps, delta, sensitivity) <-> noise scale.

Laplace (Dwork, McSherry, Nissim & Smith 2006): b = Delta_1 / eps.  Gaussian (Balle & Wang
2018, Thm. 8, the exact analytic calibration, via dp_accounting and checked to lie on the
private side); mu-GDP with mu = Delta_2 / sigma (Dong, Roth & Su 2022).  l-inf K-norm
(Hardt & Talwar 2010; Steinke & Ullman 2016): a = Delta_inf / eps.  Randomized response
(Warner 1965): flip probability 1 / (1 + e^eps).  Sensitivities come from
:mod:`bngp.defenses.sensitivity`; the Gaussian profile is the one of :mod:`bngp.audit.tradeoff`.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from bngp.audit.tradeoff import gdp_delta
from bngp.errors import InputError
from bngp.validation import check_delta, check_epsilon, check_nonnegative
from .sensitivity import Sensitivity

__all__ = [
    "check_epsilon",
    "check_delta",
    "laplace_scale",
    "laplace_epsilon",
    "gaussian_delta",
    "gaussian_sigma",
    "gaussian_epsilon",
    "gaussian_mu",
    "linf_scale",
    "linf_epsilon",
    "flip_probability",
]


def _sensitivity_value(sensitivity: float | Sensitivity) -> float:
    value = sensitivity.value if isinstance(sensitivity, Sensitivity) else float(sensitivity)
    if not math.isfinite(value) or value <= 0:
        raise InputError(f"`sensitivity` must be a finite number > 0, got {value:g}.")
    return value


def laplace_scale(epsilon: float, sensitivity: float | Sensitivity) -> float:
    """Laplace scale b = Delta_1 / eps (Dwork et al. 2006), in frequency units.

    >>> laplace_scale(1.25e5, 12.5)  # paper App. L.3
    0.0001
    """
    return _sensitivity_value(sensitivity) / check_epsilon(epsilon)


def laplace_epsilon(scale: float, sensitivity: float | Sensitivity) -> float:
    """eps = Delta_1 / b of the Laplace mechanism with scale b."""
    return _sensitivity_value(sensitivity) / check_epsilon(scale, "scale")


def gaussian_delta(sigma: float, epsilon: float, sensitivity: float | Sensitivity) -> float:
    """The privacy profile delta(eps) of the Gaussian mechanism (Balle & Wang 2018, Thm. 8): that
    of mu-GDP with mu = Delta_2 / sigma (:func:`bngp.audit.tradeoff.gdp_delta`)."""
    return gdp_delta(_sensitivity_value(sensitivity) / check_epsilon(sigma, "sigma"), check_nonnegative("epsilon", epsilon))


def _raise_until(value: float, satisfied: Callable[[float], bool], what: str) -> float:
    """Smallest value on a geometric ladder above ``value`` (relative steps from 1e-12) that
    satisfies ``satisfied``: moves a root-finder's answer onto the private side."""
    step = max(abs(value), 1e-300) * 1e-12
    for _ in range(200):
        if satisfied(value):
            return value
        value += step
        step *= 2.0
    raise InputError(f"could not calibrate {what} on the private side.")


def gaussian_sigma(epsilon: float, delta: float, sensitivity: float | Sensitivity) -> float:
    """The smallest sigma making the Gaussian mechanism (eps, delta)-DP (Balle & Wang 2018).

    sigma = Delta_2 * dp_accounting.get_sigma_gaussian(eps, delta), then raised (by relative
    steps of at most a few 1e-12) until :func:`gaussian_delta` (sigma, eps) <= delta.
    """
    from dp_accounting import get_sigma_gaussian

    epsilon = check_epsilon(epsilon)
    delta = check_delta(delta, allow_zero=False)
    scale = _sensitivity_value(sensitivity)
    sigma = scale * float(get_sigma_gaussian(epsilon, delta))
    return _raise_until(sigma, lambda s: gaussian_delta(s, epsilon, scale) <= delta, "the Gaussian sigma")


def gaussian_epsilon(sigma: float, delta: float, sensitivity: float | Sensitivity) -> float:
    """The smallest eps with delta(eps) <= delta for the Gaussian mechanism (Balle & Wang 2018).

    eps = dp_accounting.get_epsilon_gaussian(sigma / Delta_2, delta), raised onto the private side.
    """
    from dp_accounting import get_epsilon_gaussian

    sigma = check_epsilon(sigma, "sigma")
    delta = check_delta(delta, allow_zero=False)
    scale = _sensitivity_value(sensitivity)
    epsilon = float(get_epsilon_gaussian(sigma / scale, delta))
    return _raise_until(epsilon, lambda e: gaussian_delta(sigma, e, scale) <= delta, "the Gaussian epsilon")


def gaussian_mu(sigma: float, sensitivity: float | Sensitivity) -> float:
    """mu = Delta_2 / sigma: the Gaussian mechanism is mu-GDP (Dong, Roth & Su 2022)."""
    return _sensitivity_value(sensitivity) / check_epsilon(sigma, "sigma")


def linf_scale(epsilon: float, sensitivity: float | Sensitivity) -> float:
    """Scale a = Delta_inf / eps of the l-inf K-norm mechanism (Steinke & Ullman 2016)."""
    return _sensitivity_value(sensitivity) / check_epsilon(epsilon)


def linf_epsilon(scale: float, sensitivity: float | Sensitivity) -> float:
    """eps = Delta_inf / a of the l-inf K-norm mechanism with scale a."""
    return _sensitivity_value(sensitivity) / check_epsilon(scale, "scale")


def flip_probability(epsilon: float) -> float:
    """p = 1 / (1 + e^eps): the bit-flip probability of eps-DP randomized response (Warner 1965).

    Computed as e^-eps / (1 + e^-eps), which is exact for large eps (p underflows to 0 past
    eps ~ 745).
    """
    tail = math.exp(-check_epsilon(epsilon))
    return tail / (1.0 + tail)
