"""PANORAMIA: reference values, semantics of eps_tilde, (c, gamma) relaxation, soundness.

Soundness margin: at most the 99.9% quantile of Bin(200, 0.05) (= 20) of 200 repetitions may
violate the bound (a valid audit fails this with probability below 0.1%).
"""

import math

import numpy as np
import pytest
from scipy import stats

from bngp.audit import binomial_bound, panoramia_audit
from bngp.errors import InputError

REPS = 200
MAX_EXCEEDANCES = int(stats.binom.ppf(0.999, REPS, 0.05))


def _sigmoid(x):
    return 1.0 / (1.0 + math.exp(-x))


def test_reference_ceiling_for_a_10k_audit_set():
    # audits.md: a perfect MIA on 5000 members + 5000 non-members gives bound(5000, 5000, 0.025)
    # = 7.2115 per test at beta / 2; here the MIA scores take 2 values (2 thresholds) and the
    # baseline is uninformative.
    members = np.repeat([1, 0], 5000)
    res = panoramia_audit(members.astype(float), members, np.zeros(10_000))
    assert res.c_plus_epsilon_lb == pytest.approx(binomial_bound(5000, 5000, confidence=1 - 0.025 / 2).epsilon_lb)
    assert res.c_lb == 0.0 and res.epsilon_lb == res.c_plus_epsilon_lb
    assert not res.is_lower_bound and "not a lower bound" in res.interpretation
    real = panoramia_audit(members.astype(float), members)
    assert real.c_plus_epsilon_lb == pytest.approx(7.2115, abs=5e-5)  # beta = 0.05 over 2 thresholds
    assert real.is_lower_bound and real.baseline_thresholds == 0


def test_hundred_thresholds_reference():
    # Perfect ranking with 100 distinct MIA scores: the best threshold still predicts the
    # 5000 members, now at 0.05 / 100 (real non-members) ... and 0.025 / 100 per test gives 6.40.
    members = np.repeat([1, 0], 5000)
    scores = np.concatenate([np.repeat(np.arange(50, 100), 100), np.repeat(np.arange(0, 50), 100)]).astype(float)
    res = panoramia_audit(scores, members, np.zeros(10_000))
    assert res.mia_thresholds == 100
    assert (res.mia_predicted, res.mia_true_positives) == (5000, 5000)
    assert res.c_plus_epsilon_lb == pytest.approx(6.40, abs=5e-3)


def test_eps_tilde_is_the_clipped_difference():
    rng = np.random.default_rng(0)
    members = rng.integers(0, 2, 4000)
    baseline = members * 1.0 + rng.normal(size=4000)
    mia = members * 2.0 + rng.normal(size=4000)
    res = panoramia_audit(mia, members, baseline)
    assert res.c_lb > 0 and res.c_plus_epsilon_lb > res.c_lb
    assert res.epsilon_lb == pytest.approx(res.c_plus_epsilon_lb - res.c_lb)
    swapped = panoramia_audit(baseline, members, mia)
    assert swapped.epsilon_lb == 0.0  # never negative


def test_gamma_relaxation_lowers_both_bounds():
    rng = np.random.default_rng(1)
    members = rng.integers(0, 2, 3000)
    baseline = members * 1.0 + rng.normal(size=3000)
    mia = members * 2.0 + rng.normal(size=3000)
    plain = panoramia_audit(mia, members, baseline)
    relaxed = panoramia_audit(mia, members, baseline, gamma=1e-8)
    assert relaxed.gamma == 1e-8
    assert 0 < relaxed.c_lb <= plain.c_lb
    assert 0 < relaxed.c_plus_epsilon_lb <= plain.c_plus_epsilon_lb
    loose = panoramia_audit(mia, members, baseline, gamma=1e-3)
    assert loose.c_plus_epsilon_lb == 0.0


def test_signal_free_scores_give_zero():
    rng = np.random.default_rng(3)
    members = rng.integers(0, 2, 2000)
    res = panoramia_audit(rng.normal(size=2000), members, rng.normal(size=2000))
    assert res.epsilon_lb == res.c_lb == res.c_plus_epsilon_lb == 0.0
    assert panoramia_audit(np.zeros(2000), members).epsilon_lb == 0.0


def test_soundness_with_a_c_close_generator_and_dp_target():
    # Feature z: real ~ Bern(sigmoid(c)), generated ~ Bern(sigmoid(-c)) -> exactly c-close.
    # The target leaks membership by randomized response with eps.  H: (c, eps) must hold.
    c, eps, m = 1.0, 1.0, 2000
    keep_feature, keep_rr = _sigmoid(c), _sigmoid(eps)
    rng = np.random.default_rng(77)
    c_violations = joint_violations = 0
    for _ in range(REPS):
        s = rng.integers(0, 2, m)
        z = np.where(rng.random(m) < keep_feature, s, 1 - s)
        y = np.where(rng.random(m) < keep_rr, s, 1 - s)
        res = panoramia_audit(z + 2.0 * y, s, z.astype(float))
        c_violations += res.c_lb > c
        joint_violations += (res.c_lb > c) or (res.c_plus_epsilon_lb > c + eps)
    assert joint_violations <= MAX_EXCEEDANCES
    assert c_violations <= MAX_EXCEEDANCES


def test_soundness_real_nonmembers_laplace():
    m = 2000
    rng = np.random.default_rng(78)
    bounds = []
    for _ in range(REPS):
        s = rng.integers(0, 2, m)
        bounds.append(panoramia_audit(s + rng.laplace(0.0, 1.0, m), s).epsilon_lb)
    bounds = np.array(bounds)
    assert int(np.sum(bounds > 1.0)) <= MAX_EXCEEDANCES


@pytest.mark.parametrize(
    "args, kwargs",
    [
        ((np.array([1.0, 2.0]), np.array([1, 1])), {}),
        ((np.array([1.0, 2.0]), np.array([0, 1]), np.array([1.0])), {}),
        ((np.array([1.0, 2.0]), np.array([0, 1]), np.array([1.0, np.nan])), {}),
        ((np.array([1.0, 2.0]), np.array([0, 1])), {"gamma": -0.1}),
        ((np.array([1.0, 2.0]), np.array([0, 1])), {"confidence": 2.0}),
    ],
)
def test_bad_input(args, kwargs):
    with pytest.raises(InputError):
        panoramia_audit(*args, **kwargs)
