"""Known answers and conservativeness of the binomial test and Clopper-Pearson limits."""

import math

import numpy as np
import pytest
from scipy import stats

from bngp.audit import binomial_bound, binomial_p_value, clopper_pearson_lower, clopper_pearson_upper
from bngp.audit.binomial import _delta_term, _p_value
from bngp.errors import InputError


def test_panoramia_ceiling_reference_values():
    # audits.md sec. 3: bound(5000, 5000, 0.025) = 7.2115, and 6.40 with 100 thresholds.
    assert binomial_bound(5000, 5000, confidence=1 - 0.025).epsilon_lb == pytest.approx(7.2115, abs=5e-5)
    assert binomial_bound(5000, 5000, confidence=1 - 0.025 / 100).epsilon_lb == pytest.approx(6.40, abs=5e-3)


def test_all_correct_closed_form():
    # v = r: P[Bin(r, q) >= r] = q^r < beta  <=>  q < beta^(1/r).
    r, beta = 200, 0.05
    q = beta ** (1.0 / r)
    expected = math.log(q / (1 - q))
    assert binomial_bound(r, r, confidence=1 - beta).epsilon_lb == pytest.approx(expected, rel=1e-9)


def test_pure_bound_is_rejected_and_tight():
    for r, v in [(10, 9), (100, 80), (1000, 620), (5000, 4990)]:
        bound = binomial_bound(r, v, confidence=0.95).epsilon_lb
        assert binomial_p_value(r, v, bound) < 0.05
        assert binomial_p_value(r, v, bound + 1e-6) >= 0.05


def test_no_signal_gives_zero():
    assert binomial_bound(100, 50, confidence=0.95).epsilon_lb == 0.0
    assert binomial_bound(100, 0, confidence=0.95).epsilon_lb == 0.0
    assert binomial_bound(100, 55, confidence=0.95, delta=1e-5, m=1000).epsilon_lb == 0.0


def test_delta_term_matches_full_sum_from_above():
    # The windowed computation never falls below the exact max over all i.
    rng = np.random.default_rng(3)
    for _ in range(200):
        r = int(rng.integers(1, 3000))
        v = int(rng.integers(1, r + 1))
        q = float(rng.uniform(0.5, 1.0))
        pmf = stats.binom.pmf(np.arange(v - 1, -1, -1), r, q)
        exact = float(np.max(np.cumsum(pmf) / np.arange(1, v + 1)))
        windowed = _delta_term(r, v, q)
        assert windowed >= exact * (1 - 1e-11) - 1e-300
        assert windowed <= exact * (1 + 1e-9) + 1e-12


def test_delta_bound_is_rejected_and_below_pure_bound():
    for r, v, m in [(200, 190, 1000), (1000, 900, 10_000), (50, 50, 100)]:
        with_delta = binomial_bound(r, v, confidence=0.95, delta=1e-5, m=m)
        pure = binomial_bound(r, v, confidence=0.95)
        assert 0 < with_delta.epsilon_lb <= pure.epsilon_lb
        assert _p_value(m, r, v, with_delta.epsilon_lb, 1e-5) < 0.05
        assert with_delta.delta == 1e-5 and with_delta.n_canaries == m


def test_delta_term_is_kept():
    # A large delta must lower the bound (a public copy of this code dropped the term).
    small = binomial_bound(1000, 900, confidence=0.95, delta=1e-6, m=1000).epsilon_lb
    large = binomial_bound(1000, 900, confidence=0.95, delta=1e-3, m=1000).epsilon_lb
    assert large < small - 0.05


def test_p_value_known_answer():
    assert binomial_p_value(10, 10, 0.0) == pytest.approx(0.5**10, rel=1e-8)
    q = 1 / (1 + math.exp(-1.0))
    assert binomial_p_value(100, 80, 1.0) == pytest.approx(stats.binom.sf(79, 100, q), rel=1e-8)


def test_clopper_pearson_limits():
    n, alpha = 1000, 0.05
    assert clopper_pearson_upper(0, n, alpha) == pytest.approx(1 - alpha ** (1 / n), rel=1e-9)
    assert clopper_pearson_upper(n, n, alpha) == 1.0
    assert clopper_pearson_lower(0, n, alpha) == 0.0
    assert clopper_pearson_lower(n, n, alpha) == pytest.approx(alpha ** (1 / n), rel=1e-9)
    k = np.array([1, 10, 500, 999])
    upper = clopper_pearson_upper(k, n, alpha)
    np.testing.assert_allclose(upper, stats.beta.ppf(1 - alpha, k + 1, n - k), rtol=1e-9)
    # Conservative: P[Bin(n, upper) <= k] <= alpha.
    assert np.all(stats.binom.cdf(k, n, upper) <= alpha)


@pytest.mark.parametrize(
    "call",
    [
        lambda: binomial_bound(10, 11),
        lambda: binomial_bound(0, 0),
        lambda: binomial_bound(10, 5, confidence=1.3),
        lambda: binomial_bound(10, 5, delta=-0.1),
        lambda: binomial_bound(10, 5, delta=1e-5, m=5),
        lambda: binomial_p_value(10, 5, float("nan")),
        lambda: clopper_pearson_upper(5, 4, 0.05),
    ],
)
def test_bad_input(call):
    with pytest.raises(InputError):
        call()
