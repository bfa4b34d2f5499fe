"""The empirical trade-off curve and its simultaneous region; claims checked against it.

Known answers: for non-member scores N(0, 1) and member scores N(mu, 1) the test "member iff
score > t" has FPR alpha(t) = Phi(-t) and FNR beta(t) = Phi(t - mu) = G_mu(alpha(t)), the
mu-GDP trade-off curve (Dong, Roth, Su, arXiv:1905.02383).
"""

import dataclasses
import json
import math
import time

import numpy as np
import pytest
from scipy import special, stats

from bngp.audit import (
    Claim,
    EmpiricalTradeoff,
    check_claim,
    check_claim_error_rate,
    count_levels,
    empirical_tradeoff,
    gaussian_tradeoff,
    gdp_epsilon,
    parse_claim,
    per_bit_error_floor,
)
from bngp.audit.results import to_jsonable
from bngp.errors import DataFormatError, InputError

#: repetitions of the coverage tests, and the least count of successes accepted: the 0.001
#: quantile of Bin(200, 0.95) is 179, so a region with true coverage exactly 0.95 fails this test
#: with probability <= 0.001 (and the seeds are fixed).
REPETITIONS = 200
MIN_COVERED = int(stats.binom.ppf(0.001, REPETITIONS, 0.95))


def _gaussian_sample(rng, n, mu):
    members = np.repeat([0, 1], n)
    return rng.normal(size=2 * n) + mu * members, members


def _covers(curve, alpha_true, beta_true, slack=1e-12):
    """Whether every rectangle of the region holds the true (FPR, FNR) of its threshold."""
    return bool(
        np.all(curve.alpha_lower - slack <= alpha_true)
        and np.all(alpha_true <= curve.alpha_upper + slack)
        and np.all(curve.beta_lower - slack <= beta_true)
        and np.all(beta_true <= curve.beta_upper + slack)
    )


def test_large_n_curve_lies_in_the_band_of_the_gaussian_tradeoff():
    mu, n = 1.5, 20_000
    curve = empirical_tradeoff(*_gaussian_sample(np.random.default_rng(0), n, mu), confidence=0.95)
    t = curve.thresholds
    alpha_true, beta_true = special.ndtr(-t), special.ndtr(t - mu)
    assert _covers(curve, alpha_true, beta_true)
    # the band holds G_mu: G_mu(alpha_upper) <= FNR(t) <= beta_upper and the same from below.
    g = gaussian_tradeoff(mu)
    assert np.all(g(curve.alpha_upper) <= curve.beta_upper + 1e-12)
    assert np.all(g(curve.alpha_lower) >= curve.beta_lower - 1e-12)
    # the point estimates follow G_mu and the band is not vacuous at this n.
    assert np.max(np.abs(curve.beta - g(curve.alpha))) < 0.02
    assert np.max(curve.alpha_upper - curve.alpha_lower) < 0.05
    assert np.max(curve.beta_upper - curve.beta_lower) < 0.05
    assert curve.alpha_upper[0] < 1e-3  # tight near FPR 0 (order-statistic limits)
    assert curve.alpha[0] == 0.0 and curve.alpha[-1] == 1.0 and curve.beta[-1] == 0.0
    assert np.all(np.diff(curve.alpha) > 0) and np.all(np.diff(curve.beta) <= 0)


@pytest.mark.parametrize("distribution", ["gaussian", "discrete"])
def test_region_covers_the_true_curve_in_repeated_experiments(distribution):
    """Coverage of the whole region (every threshold at once) over 200 seeded repetitions at
    n = 40 per class must be >= 1 - beta up to the binomial margin (>= 179 of 200, see
    MIN_COVERED); the discrete case (scores 0, 1, 2 with ties) exercises the tie handling."""
    rng = np.random.default_rng(12345)
    n, mu = 40, 1.0
    members = np.repeat([0, 1], n)
    covered = 0
    for _ in range(REPETITIONS):
        if distribution == "gaussian":
            scores = rng.normal(size=2 * n) + mu * members
            curve = empirical_tradeoff(scores, members, confidence=0.95)
            t = curve.thresholds
            alpha_true, beta_true = special.ndtr(-t), special.ndtr(t - mu)
        else:
            p0, p1 = np.array([0.5, 0.3, 0.2]), np.array([0.2, 0.3, 0.5])
            scores = np.where(members == 1, rng.choice(3, 2 * n, p=p1), rng.choice(3, 2 * n, p=p0)).astype(float)
            curve = empirical_tradeoff(scores, members, confidence=0.95)
            t = curve.thresholds
            values = np.arange(3.0)
            alpha_true = np.array([p0[values > x].sum() for x in t])
            beta_true = np.array([p1[values <= x].sum() for x in t])
        covered += _covers(curve, alpha_true, beta_true)
    assert covered >= MIN_COVERED, covered


def test_true_claim_kept_false_claim_refuted():
    """Truth mu = 3 (n = 5000 per class): mu = 3 and the (eps(1e-5), 1e-5) it implies stand;
    mu = 0.5 and eps = 1 are refuted, at an FPR the result reports."""
    curve = empirical_tradeoff(*_gaussian_sample(np.random.default_rng(1), 5000, 3.0), confidence=0.95)
    true_eps = gdp_epsilon(3.0, 1e-5)
    for spec in ("gaussian:mu=3", f"eps-delta:epsilon={true_eps},delta=1e-5"):
        result = check_claim(curve, spec)
        assert not result.refuted and result.margin <= 0, spec
    for spec in ("gaussian:mu=0.5", "eps-delta:epsilon=1,delta=1e-5", "gaussian:mu=2.5"):
        result = check_claim(curve, spec)
        assert result.refuted and result.margin > 0, spec
        assert result.beta_upper < result.claimed_beta
        assert result.claimed_beta == pytest.approx(float(parse_claim(spec).tradeoff()(np.array(result.alpha))))
        assert 0.0 <= result.alpha <= 1.0 and result.confidence == 0.95


def test_true_claim_is_rarely_refuted():
    """A true claim is refuted with probability <= beta (in fact <= beta / 2: only the upper
    limits are used); over 200 repetitions at most 21 refutations = the 0.999 quantile of
    Bin(200, 0.05)."""
    rng = np.random.default_rng(7)
    refuted = sum(
        check_claim(empirical_tradeoff(*_gaussian_sample(rng, 60, 1.0)), "gaussian:mu=1").refuted
        for _ in range(REPETITIONS)
    )
    assert refuted <= int(stats.binom.ppf(0.999, REPETITIONS, 0.05)), refuted


def test_million_scores_per_side_are_fast():
    rng = np.random.default_rng(2)
    scores, members = _gaussian_sample(rng, 1_000_000, 1.0)
    start = time.perf_counter()
    curve = empirical_tradeoff(scores, members)
    result = check_claim(curve, "gaussian:mu=0.9")
    elapsed = time.perf_counter() - start
    assert result.refuted and curve.thresholds_examined == count_levels(1_000_000).shape[0]
    assert elapsed < 5.0, elapsed  # about 0.25 s cold, 0.05 s with cached limits; a per-score quantile takes ~20 s


def test_record_is_frozen_and_json_ready():
    curve = empirical_tradeoff(*_gaussian_sample(np.random.default_rng(3), 200, 1.0), confidence=0.9)
    assert isinstance(curve, EmpiricalTradeoff) and curve.confidence == pytest.approx(0.9)
    with pytest.raises(dataclasses.FrozenInstanceError):
        curve.confidence = 0.5
    with pytest.raises(ValueError):
        curve.alpha[0] = 0.5
    payload = json.loads(json.dumps(to_jsonable(curve.to_dict())))
    assert payload["thresholds"][-1] == "-inf" and len(payload["alpha_upper"]) == curve.thresholds_examined
    assert payload["levels_nonmembers"] == count_levels(200).shape[0] - 1
    assert payload["error_nonmembers"] == pytest.approx(0.1 / (4 * payload["levels_nonmembers"]))
    json.dumps(check_claim(curve, "gaussian:mu=1").to_dict())


def test_count_levels_are_fixed_and_complete():
    for n in (1, 2, 64, 65, 1000, 123_457):
        levels = count_levels(n)
        assert levels[0] == 0 and levels[-1] == n and np.all(np.diff(levels) > 0)
    assert count_levels(64).tolist() == list(range(65))


@pytest.mark.parametrize(
    "spec, family, values",
    [
        ("gaussian:mu=1.5", "gaussian", {"mu": 1.5}),
        ("eps-delta:epsilon=2,delta=1e-6", "eps-delta", {"epsilon": 2.0, "delta": 1e-6}),
        ("eps-delta:epsilon=0.5", "eps-delta", {"epsilon": 0.5, "delta": 0.0}),
        (" gaussian:mu = 0 ", "gaussian", {"mu": 0.0}),
    ],
)
def test_parse_claim(spec, family, values):
    claim = parse_claim(spec)
    assert isinstance(claim, Claim) and claim.family == family
    for key, value in values.items():
        assert getattr(claim, key) == value
    assert parse_claim(claim.spec) == claim


@pytest.mark.parametrize(
    "spec",
    ["garbage", "", "gaussian", "gaussian:mu=", "gaussian:mu=-1", "gaussian:mu=inf", "gaussian:mu=1e",
     "gaussian:sigma=1", "eps-delta:delta=1e-5", "eps-delta:epsilon=1,delta=1", "eps-delta:epsilon=-2",
     "laplace:epsilon=1"],
)
def test_bad_claims_are_one_line_errors(spec):
    with pytest.raises(InputError) as info:
        parse_claim(spec, "--claim")
    message = str(info.value)
    assert "`--claim`" in message and "\n" not in message


def test_claim_against_the_bits_error_rate():
    """Refuted iff the error-rate upper limit is below the claim's per-bit error floor x* = f(x*)."""
    floor = per_bit_error_floor("eps-delta", 1.0, 1e-5)
    assert check_claim_error_rate("eps-delta:epsilon=1,delta=1e-5", floor - 1e-3, confidence=0.95).refuted
    assert not check_claim_error_rate("eps-delta:epsilon=1,delta=1e-5", floor + 1e-3, confidence=0.95).refuted
    floor = per_bit_error_floor("gdp", 2.0)
    assert check_claim_error_rate("gaussian:mu=2", floor * 0.99, confidence=0.9).refuted
    assert not check_claim_error_rate("gaussian:mu=2", floor * 1.01, confidence=0.9).refuted
    assert float(gaussian_tradeoff(2.0)(floor)) == pytest.approx(floor)


def test_bad_scores_are_rejected():
    with pytest.raises(DataFormatError):
        empirical_tradeoff(np.array([0.1, 0.2]), np.array([1, 1]))
    with pytest.raises(InputError):
        empirical_tradeoff(np.array([0.1, 0.2]), np.array([0, 1]), confidence=1.0)
    with pytest.raises(InputError):
        empirical_tradeoff(np.array([0.1, math.nan]), np.array([0, 1]))
