"""Bit-transmission audit (Xiang, Wang, Wang): reference values, soundness, tightness, labelling.

Reference values (audits.md sec. 4): gamma = 0.95, delta = 1e-5, Clopper-Pearson, expected
error counts rounded to the nearest integer.  Soundness margin: at most the 99.9% quantile of
Bin(R, 0.05) of R repetitions may exceed the true parameter.
"""

import math

import numpy as np
import pytest
from scipy import special, stats

from bngp.audit import (
    bits_audit,
    bits_audit_from_counts,
    error_rate_upper_bound,
    gdp_epsilon,
    laplace_epsilon,
    per_bit_error_floor,
    theta_from_error_rate,
)
from bngp.errors import InputError

REPS = 1000
MAX_EXCEEDANCES = int(stats.binom.ppf(0.999, REPS, 0.05))


def _expected_errors(n, rate):
    return int(round(n * rate))


@pytest.mark.parametrize(
    "eps, n, expected",
    [(1.0, 1_000, 0.881), (1.0, 10_000, 0.963), (4.0, 1_000, 3.601)],
)
def test_randomized_response_reference(eps, n, expected):
    k = _expected_errors(n, 1 / (1 + math.exp(eps)))
    res = bits_audit_from_counts(n, k, confidence=0.95, delta=1e-5, family="eps-delta")
    assert res.epsilon_lb == pytest.approx(expected, abs=5e-4)
    assert res.epsilon_assumption.startswith("none")


@pytest.mark.parametrize("n, expected", [(1_000, 3.670), (10_000, 4.159)])
def test_gaussian_reference(n, expected):
    k = _expected_errors(n, special.ndtr(-0.5))
    res = bits_audit_from_counts(n, k, delta=1e-5, family="gdp")
    assert res.epsilon_lb == pytest.approx(expected, abs=5e-4)
    assert res.parameter == "mu" and "GDP" in res.epsilon_assumption


def test_laplace_reference():
    k = _expected_errors(1_000, math.exp(-0.5) / 2)
    laplace = bits_audit_from_counts(1_000, k, delta=1e-5, family="laplace")
    assert laplace.theta_lb == pytest.approx(0.844, abs=5e-4)
    assert laplace.epsilon_lb == pytest.approx(laplace_epsilon(laplace.theta_lb, 1e-5))
    generic = bits_audit_from_counts(1_000, k, delta=0.0, family="eps-delta")
    assert generic.epsilon_lb == pytest.approx(0.718, abs=5e-4)


def test_tightness_randomized_response_eps4_10k_canaries():
    k = _expected_errors(10_000, 1 / (1 + math.exp(4.0)))
    assert bits_audit_from_counts(10_000, k).epsilon_lb >= 3.8  # 3.874
    rng = np.random.default_rng(4)
    bits = rng.integers(0, 2, 10_000)
    keep = rng.random(10_000) < math.exp(4.0) / (1 + math.exp(4.0))
    res = bits_audit(np.where(keep, bits, 1 - bits), bits)
    assert 3.8 <= res.epsilon_lb <= 4.0


def test_error_floor_round_trip():
    for family, theta in [("gdp", 1.3), ("laplace", 0.7), ("eps-delta", 2.0)]:
        p = per_bit_error_floor(family, theta, 1e-5)
        assert theta_from_error_rate(family, p, 1e-5) == pytest.approx(theta, rel=1e-9)
    assert theta_from_error_rate("gdp", 0.5) == 0.0
    assert theta_from_error_rate("eps-delta", 0.7) == 0.0


def test_hoeffding_is_valid_but_looser():
    cp = bits_audit_from_counts(1_000, 269)
    hoeffding = bits_audit_from_counts(1_000, 269, interval="hoeffding")
    assert hoeffding.error_rate_upper == pytest.approx(0.269 + math.sqrt(math.log(20) / 2000))
    assert 0 < hoeffding.epsilon_lb < cp.epsilon_lb


def test_signal_free_guesses_give_zero():
    rng = np.random.default_rng(0)
    res = bits_audit(rng.integers(0, 2, 5000), rng.integers(0, 2, 5000))
    assert res.epsilon_lb == 0.0 and res.theta_lb == 0.0
    assert bits_audit_from_counts(100, 100).epsilon_lb == 0.0


def _soundness(error_rate, n, true_theta, family, interval="clopper-pearson"):
    """Simulate error counts of independent per-bit errors and count exceedances of theta_L."""
    errors = np.random.default_rng(2718).binomial(n, error_rate, size=REPS)
    thetas = np.array(
        [bits_audit_from_counts(n, int(k), family=family, interval=interval).theta_lb for k in errors]
    )
    assert int(np.sum(thetas > true_theta)) <= MAX_EXCEEDANCES
    return thetas


def test_soundness_randomized_response():
    thetas = _soundness(1 / (1 + math.e), 1_000, 1.0, "eps-delta")
    assert np.median(thetas) > 0.8
    _soundness(1 / (1 + math.e), 1_000, 1.0, "eps-delta", interval="hoeffding")


def test_soundness_gaussian():
    thetas = _soundness(special.ndtr(-0.5), 1_000, 1.0, "gdp")
    assert np.median(thetas) > 0.8
    eps = np.array([gdp_epsilon(theta, 1e-5) for theta in thetas])
    assert int(np.sum(eps > gdp_epsilon(1.0, 1e-5))) <= MAX_EXCEEDANCES


def test_soundness_laplace_simulated_bits():
    # x = b + Lap(1), guess 1 iff x > 1/2: error probability e^(-1/2) / 2, the Laplace floor.
    rng = np.random.default_rng(31)
    thetas = []
    for _ in range(200):
        bits = rng.integers(0, 2, 1_000)
        guesses = (bits + rng.laplace(0.0, 1.0, 1_000) > 0.5).astype(int)
        thetas.append(bits_audit(guesses, bits, family="laplace").theta_lb)
    assert int(np.sum(np.array(thetas) > 1.0)) <= int(stats.binom.ppf(0.999, 200, 0.05))


def test_error_rate_upper_bound_is_clopper_pearson():
    assert error_rate_upper_bound(1_000, 269) == pytest.approx(stats.beta.ppf(0.95, 270, 731), rel=1e-9)
    assert error_rate_upper_bound(10, 10) == 1.0


@pytest.mark.parametrize(
    "call",
    [
        lambda: bits_audit(np.array([]), np.array([])),
        lambda: bits_audit(np.array([0, 1]), np.array([0, 1, 1])),
        lambda: bits_audit(np.array([0, 2]), np.array([0, 1])),
        lambda: bits_audit(np.array([0, np.nan]), np.array([0, 1])),
        lambda: bits_audit_from_counts(10, 11),
        lambda: bits_audit_from_counts(10, 3, confidence=1.3),
        lambda: bits_audit_from_counts(10, 3, delta=-1e-5),
        lambda: bits_audit_from_counts(10, 3, family="renyi"),
        lambda: bits_audit_from_counts(10, 3, interval="wald"),
        lambda: bits_audit_from_counts(10, 3, family="gdp", delta=0.0),
    ],
)
def test_bad_input(call):
    with pytest.raises(InputError):
        call()
