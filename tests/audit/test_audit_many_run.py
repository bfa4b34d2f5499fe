"""Many-run Clopper-Pearson and GDP audits: known answers, exact search, soundness, edge cases.

Soundness margin: with R repetitions and a valid 95% bound, the number of repetitions whose
bound exceeds the true eps is dominated by Bin(R, 0.05); the tests allow at most its 99.9%
quantile (21 for R = 200), so a correct audit fails them with probability below 0.1%.
"""

import math

import numpy as np
import pytest
from scipy import special, stats

from bngp.audit import gdp_audit, gdp_epsilon, many_run_audit, roc_summary
from bngp.audit.thresholds import epsilon_objective, gdp_objective
from bngp.errors import InputError

REPS = 200
MAX_EXCEEDANCES = int(stats.binom.ppf(0.999, REPS, 0.05))


def _runs(rng, n0, n1, member_scores, nonmember_scores):
    scores = np.concatenate([nonmember_scores(rng, n0), member_scores(rng, n1)])
    members = np.concatenate([np.zeros(n0, dtype=int), np.ones(n1, dtype=int)])
    return scores, members


def _brute_force(scores, members, confidence, delta, objective):
    """Exact Clopper-Pearson quantiles at every distinct threshold (reference implementation)."""
    beta = 1 - confidence
    n1 = int(members.sum())
    n0 = members.size - n1
    values = []
    for t in np.concatenate(([np.inf], np.unique(scores))):
        fp = int(np.sum((scores >= t) & (members == 0)))
        fn = int(np.sum((scores < t) & (members == 1)))
        a = 1.0 if fp == n0 else stats.beta.ppf(1 - beta / (2 * n0), fp + 1, n0 - fp)
        b = 1.0 if fn == n1 else stats.beta.ppf(1 - beta / (2 * n1), fn + 1, n1 - fn)
        values.append(float(objective(np.array([a]), np.array([b]))[0]))
    return max(max(values), 0.0)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_pruned_search_equals_brute_force(seed):
    rng = np.random.default_rng(seed)
    n = 600
    members = rng.integers(0, 2, n)
    # Rounded scores create ties; a shift creates signal.
    scores = np.round(rng.normal(size=n) + 1.5 * members, 1)
    fast = many_run_audit(scores, members, confidence=0.95, delta=1e-3, strategy="bonferroni")
    slow = _brute_force(scores, members, 0.95, 1e-3, epsilon_objective(1e-3))
    assert fast.epsilon_lb == pytest.approx(slow, rel=1e-6, abs=1e-9)
    fast_mu = gdp_audit(scores, members, confidence=0.95, strategy="bonferroni").mu_lb
    slow_mu = _brute_force(scores, members, 0.95, 0.0, gdp_objective)
    assert fast_mu == pytest.approx(slow_mu, rel=1e-6, abs=1e-9)


def test_perfect_separation_known_answer():
    # FP = FN = 0: alpha_u = 1 - e^(1/N0), beta_u = 1 - e^(1/N1), e = beta / (2 N).
    n = 1000
    members = np.repeat([0, 1], n)
    res = many_run_audit(members.astype(float), members, confidence=0.95, strategy="bonferroni")
    upper = 1 - (0.05 / (2 * n)) ** (1 / n)
    assert res.epsilon_lb == pytest.approx(math.log((1 - upper) / upper), rel=1e-9)
    assert (res.false_positives, res.false_negatives) == (0, 0)
    assert res.union_bound.startswith("bonferroni over 1000 FP levels and 1000 FN levels")
    assert res.thresholds_examined == 3
    mu = gdp_audit(members.astype(float), members, strategy="bonferroni").mu_lb
    assert mu == pytest.approx(-2 * special.ndtri(upper), rel=1e-9)


def test_explicit_threshold_known_answer():
    members = np.repeat([0, 1], 100)
    scores = np.concatenate([np.r_[np.ones(10), np.zeros(90)], np.r_[np.ones(80), np.zeros(20)]])
    res = many_run_audit(scores, members, strategy="explicit", thresholds=[0.5])
    a = stats.beta.ppf(0.975, 11, 90)
    b = stats.beta.ppf(0.975, 21, 80)
    assert res.epsilon_lb == pytest.approx(max(math.log((1 - a) / b), math.log((1 - b) / a)), rel=1e-8)
    assert res.union_bound == "bonferroni over 1 thresholds fixed in advance"
    assert (res.false_positives, res.false_negatives, res.thresholds_examined) == (10, 20, 1)


def test_signal_free_scores_give_zero():
    members = np.repeat([0, 1], 500)
    for audit in (many_run_audit, gdp_audit):
        assert audit(np.zeros(1000), members).epsilon_lb == 0.0
        noise = np.random.default_rng(7).normal(size=1000)
        assert audit(noise, members).epsilon_lb == 0.0
        assert audit(noise, members, strategy="split").epsilon_lb == 0.0


def test_split_strategy_records_seed_and_no_union_bound():
    rng = np.random.default_rng(0)
    members = rng.integers(0, 2, 4000)
    scores = rng.normal(size=4000) + 3.0 * members
    res = many_run_audit(scores, members, strategy="split", seed=11)
    assert res.seed == 11 and res.union_bound.startswith("none")
    assert res.error_fpr == res.error_fnr == pytest.approx(0.025)
    assert res.n_members + res.n_nonmembers == 2000
    again = many_run_audit(scores, members, strategy="split", seed=11)
    assert again.epsilon_lb == res.epsilon_lb > 1.0



def _probe_rest(scores, members, seed):
    """The scores "auto" keeps after its probe (a reimplementation of its seeded draw)."""
    from bngp.audit.inputs import tagged_rng
    from bngp.audit.thresholds import _PROBE_TAG, SUPPORT_PROBE

    rng, _ = tagged_rng(seed, _PROBE_TAG)
    labels = members.astype(bool)
    probe = np.concatenate([rng.choice(np.flatnonzero(~labels), SUPPORT_PROBE, replace=False),
                            rng.choice(np.flatnonzero(labels), SUPPORT_PROBE, replace=False)])
    rest = np.ones(scores.size, dtype=bool)
    rest[probe] = False
    return scores[rest], members[rest], np.unique(scores[probe])


@pytest.mark.parametrize("audit", [many_run_audit, gdp_audit])
def test_auto_uses_the_support_of_discrete_scores(audit):
    # Two-valued scores: the probe sees {0, 1}, so "auto" is the explicit threshold 1 on the
    # other scores (one threshold paid for), which beats the grid's randomly broken ties here.
    scores, members = _randomized_response(2.0, 1000)(np.random.default_rng(3))
    res = audit(scores, members, seed=5)
    rest_scores, rest_members, support = _probe_rest(scores, members, 5)
    assert list(support) == [0.0, 1.0]
    explicit = audit(rest_scores, rest_members, strategy="explicit", thresholds=[1.0])
    assert res.epsilon_lb == explicit.epsilon_lb and res.thresholds_examined == 1
    assert res.n_members + res.n_nonmembers == 2000 - 32 and res.seed == 5 and "probe" in res.union_bound
    assert res.epsilon_lb > audit(scores, members, seed=5, strategy="grid").epsilon_lb


def test_auto_runs_the_grid_on_continuous_scores_and_small_samples():
    rng = np.random.default_rng(4)
    members = np.repeat([0, 1], 500)
    scores = rng.normal(size=1000) + 1.5 * members
    res = many_run_audit(scores, members, seed=2)
    rest_scores, rest_members, support = _probe_rest(scores, members, 2)
    assert support.size == 32 and res.method == "many-run order-statistic grid"
    assert res.epsilon_lb == many_run_audit(rest_scores, rest_members, seed=2, strategy="grid").epsilon_lb
    small = np.repeat([0, 1], 63)  # fewer than 4 x 16 per side: no probe, the grid on every score
    few = rng.normal(size=126) + 3.0 * small
    assert many_run_audit(few, small).epsilon_lb == many_run_audit(few, small, strategy="grid").epsilon_lb > 0

def _soundness(mechanism, true_epsilon, audit, **kwargs):
    rng = np.random.default_rng(12345)
    bounds = np.array([audit(*mechanism(rng), **kwargs).epsilon_lb for _ in range(REPS)])
    exceed = int(np.sum(bounds > true_epsilon))
    assert exceed <= MAX_EXCEEDANCES, (exceed, bounds.max())
    return bounds


def _randomized_response(eps, n):
    keep = math.exp(eps) / (1 + math.exp(eps))

    def mechanism(rng):
        return _runs(
            rng,
            n,
            n,
            lambda r, k: (r.random(k) < keep).astype(float),
            lambda r, k: (r.random(k) >= keep).astype(float),
        )

    return mechanism


def _additive(noise, n):
    def mechanism(rng):
        return _runs(rng, n, n, lambda r, k: 1.0 + noise(r, k), noise)

    return mechanism


def test_soundness_randomized_response():
    bounds = _soundness(_randomized_response(1.0, 1000), 1.0, many_run_audit, strategy="explicit", thresholds=[0.5])
    assert np.median(bounds) > 0.6  # the test has power: bounds come close to eps = 1
    _soundness(_randomized_response(1.0, 1000), 1.0, many_run_audit)


def test_soundness_laplace():
    _soundness(_additive(lambda r, k: r.laplace(0.0, 1.0, k), 1000), 1.0, many_run_audit)


def test_soundness_gaussian():
    # N(0,1) vs N(1,1) is 1-GDP: eps(1e-5) = 4.377 and mu = 1.
    mechanism = _additive(lambda r, k: r.normal(0.0, 1.0, k), 1000)
    _soundness(mechanism, gdp_epsilon(1.0, 1e-5), many_run_audit, delta=1e-5)
    rng = np.random.default_rng(99)
    mus = np.array([gdp_audit(*mechanism(rng)).mu_lb for _ in range(REPS)])
    assert int(np.sum(mus > 1.0)) <= MAX_EXCEEDANCES
    assert np.median(mus) > 0.6


def test_gdp_tightness_large_sample():
    rng = np.random.default_rng(5)
    scores, members = _additive(lambda r, k: r.normal(0.0, 1.0, k), 50_000)(rng)
    res = gdp_audit(scores, members, delta=1e-5)
    assert 0.9 < res.mu_lb <= 1.0
    assert res.epsilon_lb == pytest.approx(gdp_epsilon(res.mu_lb, 1e-5))
    assert "GDP" in res.epsilon_assumption


def test_members_are_the_positive_class():
    # Swapping labels must not be silently "fixed": low scores for members give no bound.
    rng = np.random.default_rng(1)
    members = np.repeat([0, 1], 1000)
    scores = rng.normal(size=2000) + 4.0 * members
    assert many_run_audit(scores, members).epsilon_lb > 2.0
    assert many_run_audit(-scores, members).epsilon_lb == 0.0


def test_roc_summary():
    members = np.array([1, 1, 0, 1, 0, 0])
    scores = np.array([6.0, 5.0, 4.0, 3.0, 2.0, 1.0])
    s = roc_summary(scores, members, fpr_targets=(0.0, 0.5))
    assert s.auc == pytest.approx(8 / 9)
    assert s.advantage == pytest.approx(2 / 3)
    assert s.tpr_at_fpr == {"0": pytest.approx(2 / 3), "0.5": pytest.approx(1.0)}
    ties = roc_summary(np.zeros(4), np.array([0, 1, 0, 1]))
    assert ties.auc == 0.5 and ties.advantage == 0.0


@pytest.mark.parametrize(
    "scores, members, kwargs",
    [
        (np.array([]), np.array([]), {}),
        (np.array([1.0, 2.0]), np.array([1, 1]), {}),
        (np.array([1.0, 2.0]), np.array([0, 0]), {}),
        (np.array([1.0, np.nan]), np.array([0, 1]), {}),
        (np.array([1.0, 2.0]), np.array([0, 2]), {}),
        (np.array([1.0, 2.0]), np.array([0, 1, 1]), {}),
        (np.array([1.0, 2.0]), np.array([0, 1]), {"confidence": 1.3}),
        (np.array([1.0, 2.0]), np.array([0, 1]), {"confidence": 0.0}),
        (np.array([1.0, 2.0]), np.array([0, 1]), {"delta": -1e-5}),
        (np.array([1.0, 2.0]), np.array([0, 1]), {"strategy": "gird"}),
        (np.array([1.0, 2.0]), np.array([0, 1]), {"strategy": "explicit"}),
        (np.array([1.0, 2.0]), np.array([0, 1]), {"thresholds": [1.0]}),
    ],
)
def test_bad_input(scores, members, kwargs):
    with pytest.raises(InputError):
        many_run_audit(scores, members, **kwargs)


def test_gdp_needs_positive_delta():
    with pytest.raises(InputError, match="delta"):
        gdp_audit(np.array([1.0, 2.0]), np.array([0, 1]), delta=0.0)


@pytest.mark.slow
def test_one_million_scores_under_two_seconds():
    import time

    rng = np.random.default_rng(0)
    members = rng.integers(0, 2, 1_000_000)
    scores = rng.normal(size=1_000_000) + members
    start = time.perf_counter()
    res = many_run_audit(scores, members, strategy="bonferroni")
    assert time.perf_counter() - start < 2.0
    assert res.thresholds_examined == 1_000_001
    start = time.perf_counter()
    grid = many_run_audit(scores, members)
    assert time.perf_counter() - start < 0.5
    assert grid.thresholds_examined == 38 and grid.epsilon_lb > res.epsilon_lb
