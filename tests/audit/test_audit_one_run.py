"""One-run audit (Steinke, Nasr, Jagielski 2023): known answers, union bound, soundness, tightness.

Soundness margin: at most the 99.9% quantile of Bin(200, 0.05) (= 20) of 200 repetitions may
exceed the true eps (a valid audit fails this with probability below 0.1%).
"""

import math

import numpy as np
import pytest
from scipy import stats

from bngp.audit import binomial_bound, default_one_run_candidates, gdp_epsilon, one_run_audit, one_run_search
from bngp.errors import InputError

REPS = 200
MAX_EXCEEDANCES = int(stats.binom.ppf(0.999, REPS, 0.05))


def _canaries(rng, m):
    return rng.integers(0, 2, m)


def test_fixed_guesses_match_the_binomial_bound():
    members = np.array([1] * 60 + [0] * 40)
    scores = np.arange(100, 0, -1, dtype=float)  # members ranked first
    res = one_run_audit(scores, members, k_plus=50, k_minus=30, confidence=0.95)
    assert (res.n_guesses, res.n_correct) == (80, 80)
    assert res.epsilon_lb == binomial_bound(80, 80, confidence=0.95).epsilon_lb
    assert res.union_bound == "none" and res.thresholds_examined == 1


def test_delta_term_lowers_the_bound():
    members = np.array([1] * 60 + [0] * 40)
    scores = np.arange(100, 0, -1, dtype=float)
    pure = one_run_audit(scores, members, k_plus=50, k_minus=30).epsilon_lb
    approx = one_run_audit(scores, members, k_plus=50, k_minus=30, delta=1e-4)
    assert approx.epsilon_lb == binomial_bound(80, 80, confidence=0.95, delta=1e-4, m=100).epsilon_lb
    assert approx.epsilon_lb < pure


def test_search_pays_a_union_bound():
    rng = np.random.default_rng(0)
    members = _canaries(rng, 2000)
    scores = members + rng.normal(size=2000)
    pairs = [(50, 50), (100, 100), (200, 200)]
    res = one_run_search(scores, members, candidates=pairs)
    assert res.union_bound == "bonferroni over 3 (k+, k-) candidates"
    single = one_run_audit(scores, members, k_plus=res.k_plus, k_minus=res.k_minus, confidence=1 - 0.05 / 3)
    assert res.epsilon_lb == pytest.approx(single.epsilon_lb, rel=1e-12)
    assert (res.k_plus, res.k_minus) in pairs


def test_default_candidates():
    pairs = default_one_run_candidates(1000)
    assert (5, 5) in pairs and (500, 500) in pairs and (10, 0) in pairs
    assert all(1 <= a + b <= 1000 for a, b in pairs)
    assert len(pairs) == len(set(pairs))


def test_ties_are_broken_at_random_with_recorded_seed():
    members = np.array([1, 0] * 50)
    scores = np.zeros(100)
    res = one_run_audit(scores, members, k_plus=50, k_minus=50, seed=3)
    assert res.seed == 3 and res.epsilon_lb == 0.0
    # Stable sorting would have guessed by position, which here equals the label pattern.
    assert res.n_correct < 70


def test_signal_free_scores_give_zero():
    rng = np.random.default_rng(2)
    members = _canaries(rng, 1000)
    assert one_run_search(rng.normal(size=1000), members).epsilon_lb == 0.0
    assert one_run_search(np.ones(1000), members, delta=1e-5).epsilon_lb == 0.0


def _count_exceedances(mechanism, true_epsilon, **kwargs):
    rng = np.random.default_rng(2024)
    bounds = []
    for _ in range(REPS):
        members = _canaries(rng, 1000)
        scores, extra = mechanism(rng, members)
        bounds.append(one_run_audit(scores, members, **extra, **kwargs).epsilon_lb)
    bounds = np.array(bounds)
    assert int(np.sum(bounds > true_epsilon)) <= MAX_EXCEEDANCES
    return bounds


def test_soundness_randomized_response():
    keep = math.exp(1.0) / (1 + math.exp(1.0))

    def mechanism(rng, members):
        out = np.where(rng.random(members.size) < keep, members, 1 - members).astype(float)
        ones = int(out.sum())  # guess every canary: "in" for 1, "out" for 0 (a function of the output)
        return out, {"k_plus": ones, "k_minus": members.size - ones}

    bounds = _count_exceedances(mechanism, 1.0)
    assert np.median(bounds) > 0.7


def test_soundness_laplace():
    def mechanism(rng, members):
        return members + rng.laplace(0.0, 1.0, members.size), {"k_plus": 100, "k_minus": 100}

    _count_exceedances(mechanism, 1.0)


def test_soundness_gaussian_with_delta():
    def mechanism(rng, members):
        return members + rng.normal(0.0, 1.0, members.size), {"k_plus": 50, "k_minus": 50}

    _count_exceedances(mechanism, gdp_epsilon(1.0, 1e-5), delta=1e-5)


def test_tightness_gaussian():
    # mu = 2 Gaussian (eps = 9.997 at delta = 1e-5), 10,000 canaries, default search.
    rng = np.random.default_rng(7)
    members = _canaries(rng, 10_000)
    res = one_run_search(members + rng.normal(0.0, 0.5, 10_000), members, delta=1e-5)
    assert 2.5 < res.epsilon_lb < gdp_epsilon(2.0, 1e-5)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"k_plus": 0, "k_minus": 0},
        {"k_plus": 60, "k_minus": 50},
        {"k_plus": -1, "k_minus": 5},
        {"k_plus": 5, "k_minus": 5, "confidence": 1.0},
        {"k_plus": 5, "k_minus": 5, "delta": -0.5},
        {"k_plus": 5, "k_minus": 5, "seed": -3},
    ],
)
def test_bad_input(kwargs):
    members = np.array([1, 0] * 50)
    with pytest.raises(InputError):
        one_run_audit(np.arange(100.0), members, **kwargs)


def test_bad_candidates():
    members = np.array([1, 0] * 50)
    with pytest.raises(InputError):
        one_run_search(np.arange(100.0), members, candidates=[])
    with pytest.raises(InputError):
        one_run_search(np.arange(100.0), members, candidates=[(1, 2, 3)])
