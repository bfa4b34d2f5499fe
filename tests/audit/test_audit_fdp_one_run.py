"""f-DP one-run audit (Mahloujifar, Melis, Chaudhuri, arXiv:2410.22235): known answers, monotonicity,
soundness, comparison with the Steinke-Nasr-Jagielski bound, bad input.

Soundness margin: at most the 99.9% quantile of Bin(200, 0.05) (= 20) of 200 repetitions may
reject a true hypothesis at beta = 0.05 (a valid audit fails this with probability below 0.1%).
"""

import json
import math

import numpy as np
import pytest
from scipy import special, stats

from bngp.audit import (
    default_one_run_candidates,
    eps_delta_tradeoff,
    fdp_one_run_audit,
    fdp_one_run_rejects,
    fdp_one_run_search,
    gaussian_tradeoff,
    gdp_epsilon,
    gdp_one_run_bound,
    one_run_audit,
    one_run_search,
)
from bngp.errors import InputError

REPS = 200
MAX_EXCEEDANCES = int(stats.binom.ppf(0.999, REPS, 0.05))

#: jax_privacy's tests/auditing_test.py, test_epsilon_one_run_close('one_fdp'): 10,000 held-in and
#: 10,000 held-out canaries with deterministic N(1, 1) / N(0, 1) quantile scores (a mu = 1 Gaussian
#: mechanism: eps = 4.887 at delta = 1e-6), significance 0.05, delta 1e-6, expected eps 2.164749.
JAX_EPSILON = 2.164749
#: what jax_privacy's Bonferroni search picks there (replicated outside this repository): the 406
#: top scores guessed "in", 379 of them right, at level 0.05 / 386 (its 386 Pareto-frontier thresholds).
JAX_GUESSES, JAX_CORRECT, JAX_THRESHOLDS = 406, 379, 386


def _deterministic_normal(shift, n):
    return stats.norm.ppf(np.linspace(0, 1, n, endpoint=False) + 1 / (2 * n)) + shift


def _jax_setting():
    n = 10_000
    scores = np.concatenate((_deterministic_normal(1.0, n), _deterministic_normal(0.0, n)))
    members = np.concatenate((np.ones(n), np.zeros(n)))
    return scores, members


def _reference_rejects(m, k, v, beta, mu):
    """Plain scalar transcription of the recursion (no nudges), for cross-checking."""
    r, h = beta * v / m, beta * (k - v) / m
    for i in range(v - 1, -1, -1):
        new_h = max(h, float(special.ndtr(special.ndtri(r) - mu)))
        r, h = r + i / (k - i) * (new_h - h), new_h
    return r + h > k / m


def test_reproduces_jax_privacy_on_identical_guesses():
    scores, members = _jax_setting()
    res = fdp_one_run_audit(
        scores, members, k_plus=JAX_GUESSES, k_minus=0, confidence=1 - 0.05 / JAX_THRESHOLDS, delta=1e-6
    )
    assert (res.n_guesses, res.n_correct, res.n_canaries) == (JAX_GUESSES, JAX_CORRECT, 20_000)
    assert res.epsilon_lb == pytest.approx(JAX_EPSILON, abs=2e-5)
    assert res.epsilon_lb >= 2.0
    assert res.epsilon_lb == pytest.approx(gdp_epsilon(res.mu_lb, 1e-6), rel=1e-12)


def test_default_search_beats_jax_privacy_on_its_setting():
    scores, members = _jax_setting()
    res = fdp_one_run_search(scores, members, delta=1e-6)
    assert res.union_bound == f"bonferroni over {len(default_one_run_candidates(20_000))} (k+, k-) candidates"
    assert JAX_EPSILON < res.epsilon_lb < gdp_epsilon(1.0, 1e-6)  # 2.95 measured, true 4.89
    assert 0.6 < res.mu_lb < 1.0
    assert json.loads(json.dumps(res.to_dict()))["mu_lb"] == res.mu_lb


@pytest.mark.parametrize(
    "m, k, v, confidence", [(20_000, 406, 379, 1 - 0.05 / 386), (1_000, 100, 100, 0.95), (5_000, 800, 560, 0.9)]
)
def test_gaussian_bound_is_the_edge_of_the_rejection_region(m, k, v, confidence):
    res = gdp_one_run_bound(m, k, v, confidence=confidence, delta=1e-5)
    beta = 1 - confidence
    assert res.mu_lb > 0
    assert _reference_rejects(m, k, v, beta, res.mu_lb)
    assert not _reference_rejects(m, k, v, beta, res.mu_lb * (1 + 1e-5) + 1e-9)
    # The general form (any curve, tabulated) agrees up to its table step and never rejects more.
    assert fdp_one_run_rejects(gaussian_tradeoff(0.99 * res.mu_lb), m, k, v, confidence=confidence)
    assert not fdp_one_run_rejects(gaussian_tradeoff(res.mu_lb * (1 + 1e-5)), m, k, v, confidence=confidence)


def test_more_correct_guesses_never_lower_the_bound():
    bounds = [gdp_one_run_bound(2_000, 200, v, delta=1e-5).mu_lb for v in range(100, 201, 4)]
    assert bounds[0] == 0.0 and bounds[-1] > 1.0
    assert all(later >= earlier for earlier, later in zip(bounds, bounds[1:]))
    curve = eps_delta_tradeoff(1.0, 1e-6)
    decisions = [fdp_one_run_rejects(curve, 2_000, 200, v) for v in range(100, 201, 4)]
    assert decisions == sorted(decisions)  # False ... False True ... True
    assert any(decisions) and not all(decisions)


def test_union_bound_of_the_search():
    rng = np.random.default_rng(0)
    members = rng.integers(0, 2, 2000)
    scores = members + rng.normal(size=2000)
    pairs = [(50, 50), (100, 100), (200, 0)]
    res = fdp_one_run_search(scores, members, candidates=pairs)
    assert res.union_bound == "bonferroni over 3 (k+, k-) candidates" and res.thresholds_examined == 3
    single = fdp_one_run_audit(scores, members, k_plus=res.k_plus, k_minus=res.k_minus, confidence=1 - 0.05 / 3)
    assert res.mu_lb == single.mu_lb and (res.k_plus, res.k_minus) in pairs
    fixed = fdp_one_run_audit(scores, members, k_plus=res.k_plus, k_minus=res.k_minus)
    assert fixed.union_bound == "none" and fixed.mu_lb > res.mu_lb


def _exceedances(mechanism, true_mu, audit=fdp_one_run_audit, **kwargs):
    rng = np.random.default_rng(2024)
    bounds = []
    for _ in range(REPS):
        members = rng.integers(0, 2, 1000)
        bounds.append(audit(mechanism(rng, members), members, **kwargs).mu_lb)
    bounds = np.array(bounds)
    assert int(np.sum(bounds > true_mu)) <= MAX_EXCEEDANCES
    return bounds


@pytest.mark.parametrize(
    "audit, kwargs", [(fdp_one_run_audit, {"k_plus": 50, "k_minus": 50}), (fdp_one_run_search, {})]
)
def test_null_mechanism_rarely_gives_a_positive_bound(audit, kwargs):
    # Scores independent of membership (mu = 0): a positive mu_lb means mu = 0 was rejected.
    bounds = _exceedances(lambda rng, members: rng.normal(size=members.size), 0.0, audit, **kwargs)
    assert np.median(bounds) == 0.0


def test_soundness_gaussian_mechanism():
    bounds = _exceedances(lambda rng, members: members + rng.normal(size=members.size), 1.0, k_plus=50, k_minus=50)
    assert np.median(bounds) > 0.4


def test_fdp_bound_beats_steinke_on_the_same_guesses():
    rng = np.random.default_rng(5)
    members = rng.integers(0, 2, 5000)
    scores = members + rng.normal(size=5000)  # mu = 1: eps = 4.38 at delta = 1e-5
    for k_plus, k_minus in [(5, 5), (50, 50), (250, 250), (1000, 0), (2500, 2500)]:
        fdp = fdp_one_run_audit(scores, members, k_plus=k_plus, k_minus=k_minus, delta=1e-5)
        steinke = one_run_audit(scores, members, k_plus=k_plus, k_minus=k_minus, delta=1e-5)
        assert fdp.n_correct == steinke.n_correct
        assert fdp.epsilon_lb >= steinke.epsilon_lb > 0
    fdp = fdp_one_run_search(scores, members, delta=1e-5).epsilon_lb
    steinke = one_run_search(scores, members, delta=1e-5).epsilon_lb
    assert steinke < fdp < gdp_epsilon(1.0, 1e-5)


def test_general_form_on_known_curves():
    # Perfect guesses cannot happen under perfect privacy (f(x) = 1 - x) beyond chance 2^-v.
    assert fdp_one_run_rejects(lambda x: 1 - x, 1000, 10, 10, confidence=0.99)  # 2^-10 < 0.01
    assert not fdp_one_run_rejects(lambda x: 1 - x, 1000, 5, 5, confidence=0.99)  # 2^-5 > 0.01
    assert not fdp_one_run_rejects(eps_delta_tradeoff(0.0, 0.999), 1000, 100, 100)  # almost no privacy claimed
    # A scalar-only callable is accepted too.
    assert fdp_one_run_rejects(lambda x: max(0.0, 1 - math.e * x, (1 - x) / math.e), 1000, 100, 95)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"k_plus": 0, "k_minus": 0},
        {"k_plus": 60, "k_minus": 50},
        {"k_plus": -1, "k_minus": 5},
        {"k_plus": 5, "k_minus": 5, "confidence": 1.0},
        {"k_plus": 5, "k_minus": 5, "delta": 0.0},
        {"k_plus": 5, "k_minus": 5, "delta": -0.5},
        {"k_plus": 5, "k_minus": 5, "seed": -3},
    ],
)
def test_bad_audit_input(kwargs):
    members = np.array([1, 0] * 50)
    with pytest.raises(InputError):
        fdp_one_run_audit(np.arange(100.0), members, **kwargs)


@pytest.mark.parametrize(
    "call",
    [
        lambda: fdp_one_run_audit(np.arange(4.0), np.array([1, 0, 2, 0]), k_plus=1, k_minus=1),
        lambda: fdp_one_run_audit(np.array([0.1, np.nan, 0.3, 0.4]), np.array([1, 0, 1, 0]), k_plus=1, k_minus=1),
        lambda: fdp_one_run_search(np.arange(4.0), np.array([1, 0, 1, 0]), candidates=[]),
        lambda: gdp_one_run_bound(10, 11, 1),
        lambda: gdp_one_run_bound(10, 5, 6),
        lambda: gdp_one_run_bound(10, 5, 3, delta=0.0),
        lambda: gdp_one_run_bound(10, 5, 3, confidence=0.0),
        lambda: fdp_one_run_rejects("gaussian", 10, 5, 3),
        lambda: fdp_one_run_rejects(lambda x: x, 10, 5, 3),  # increasing: not a trade-off function
        lambda: fdp_one_run_rejects(lambda x: np.full_like(x, 0.99), 10, 5, 3),  # above 1 - x
        lambda: fdp_one_run_rejects(lambda x: 2 - x, 10, 5, 3),  # outside [0, 1]
        lambda: gaussian_tradeoff(-1.0),
        lambda: eps_delta_tradeoff(1.0, 1.5),
    ],
)
def test_bad_input_raises_the_typed_error(call):
    with pytest.raises(InputError):
        call()


def test_gaussian_epsilon_is_labelled_as_assuming_a_gaussian_curve():
    # Randomized response with eps = 1 is not Gaussian: the eps of the rejected GDP curve exceeds
    # the true eps (an estimate, as the record says), while the Steinke-Nasr-Jagielski bound on
    # the same guesses stays below it.
    rng = np.random.default_rng(0)
    keep = special.expit(1.0)
    members = np.repeat([0, 1], 1000)
    scores = np.concatenate([rng.random(1000) >= keep, rng.random(1000) < keep]).astype(float)
    res = fdp_one_run_search(scores, members, delta=1e-5)
    assert (res.mu_kind, res.epsilon_kind) == ("lower bound", "lower bound under assumption")
    assert "Gaussian" in res.epsilon_assumption and res.epsilon_lb > 1.0
    assert one_run_search(scores, members, delta=1e-5).epsilon_lb < 1.0
