"""The design's ceiling (the bound on a perfect attack) against closed forms, and how a bound is
read against it and against a claimed eps (bngp.audit.ceiling)."""

import math

import numpy as np
import pytest
from scipy import special

from bngp.audit import (
    CEILING_STATES,
    binomial_bound,
    default_one_run_candidates,
    many_run_audit,
    one_run_search,
    panoramia_audit,
    parse_claim,
    perfect_scores,
    read_bound,
)
from bngp.audit.ceiling import SATURATION, SMALL_CEILING


def _labels(n_in: int, n_out: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).permutation(np.repeat([1, 0], [n_in, n_out]))


@pytest.mark.parametrize("m", [100, 150, 1000])
def test_one_run_ceiling_is_the_closed_form_of_all_guesses_right(m):
    """Balanced canaries: the candidate guessing on every canary gets r = m right, so at delta = 0
    the ceiling is logit((beta / C)^(1/m)) (p(eps) = q^m, Steinke et al. Thm. 3.1 at v = r)."""
    members = _labels(m // 2, m - m // 2)
    count = len(default_one_run_candidates(m))
    ceiling = one_run_search(perfect_scores(members), members).epsilon_lb
    assert ceiling == pytest.approx(special.logit((0.05 / count) ** (1.0 / m)), rel=1e-6)
    assert abs(ceiling - math.log(m / math.log(count / 0.05))) < 0.1  # ~ ln(r / ln(C / beta))


def test_one_run_ceiling_with_delta_is_the_best_candidate_with_every_allowed_guess_right():
    """Unbalanced canaries (60 in, 90 out): candidate (k+, k-) can get min(k+, 60) + min(k-, 90)
    right; the ceiling is the best candidate's binomial bound at beta / C with the 2 m delta term."""
    members = _labels(60, 90, seed=3)
    candidates = default_one_run_candidates(150)
    level = 1 - 0.05 / len(candidates)
    expected = max(
        binomial_bound(kp + km, min(kp, 60) + min(km, 90), confidence=level, delta=1e-5, m=150).epsilon_lb
        for kp, km in candidates
    )
    assert one_run_search(perfect_scores(members), members, delta=1e-5).epsilon_lb == pytest.approx(expected)


def test_many_run_ceiling_is_the_clopper_pearson_limit_of_no_error():
    """bonferroni with FP = FN = 0: alpha_u = 1 - (beta / (2 N0))^(1/N0), likewise beta_u."""
    members = _labels(300, 200)
    result = many_run_audit(perfect_scores(members), members, strategy="bonferroni")
    alpha_u = 1 - (0.05 / (2 * 200)) ** (1 / 200)
    beta_u = 1 - (0.05 / (2 * 300)) ** (1 / 300)
    expected = max(math.log((1 - alpha_u) / beta_u), math.log((1 - beta_u) / alpha_u))
    assert result.epsilon_lb == pytest.approx(expected, rel=1e-9)
    assert result.false_positives == result.false_negatives == 0


def test_panoramia_real_nonmember_ceiling_is_the_two_threshold_closed_form():
    members = _labels(40, 35)
    ceiling = panoramia_audit(perfect_scores(members), members).epsilon_lb
    assert ceiling == pytest.approx(special.logit((0.05 / 2) ** (1 / 40)), rel=1e-6)


@pytest.mark.parametrize("seed", range(4))
def test_no_attack_certifies_more_than_the_ceiling(seed):
    rng = np.random.default_rng(seed)
    members = rng.integers(0, 2, 400)
    scores = members * rng.uniform(0.5, 4.0) + rng.normal(size=400)
    for audit in (one_run_search, lambda s, m: many_run_audit(s, m, strategy="bonferroni")):
        assert audit(scores, members).epsilon_lb <= audit(perfect_scores(members), members).epsilon_lb


def test_read_bound_states_and_notes():
    at = read_bound(2.6, "lower bound", 2.71, "150 canaries", "more canaries")
    assert at.ceiling_state == CEILING_STATES[0] and 2.71 * SATURATION <= 2.6
    assert at.sentence == "eps_lb = 2.60; this design cannot certify more than 2.71 with 150 canaries"
    assert "the attack was perfect" in at.notes()[0] and "a larger design is needed" in at.notes()[0]
    small = read_bound(0.0, "lower bound", 0.8, "20 canaries", "more canaries")
    assert small.ceiling_state == CEILING_STATES[1] and 0.8 < SMALL_CEILING
    assert small.notes()[0].startswith("The design is too small: even a perfect attack certifies at most 0.80")
    cannot = read_bound(0.5, "lower bound", 2.5, "100 canaries", "more canaries", claimed_epsilon=3.0)
    assert cannot.ceiling_state == CEILING_STATES[1] and "cannot refute the claim" in cannot.notes()[0]
    zero = read_bound(0.0, "lower bound", 2.5, "100 canaries", "more canaries")
    assert zero.ceiling_state == CEILING_STATES[2] and "no evidence of privacy" in zero.notes()[0]
    assert read_bound(1.0, "lower bound", 2.5, "100 canaries", "more canaries").notes() == []


def test_claim_verdicts():
    def verdict(epsilon_lb, kind="lower bound", **claim):
        reading = read_bound(epsilon_lb, kind, 5.0, "a design", "more", **claim)
        return reading.claim_refuted, reading.claim_verdict

    assert verdict(1.5, claimed_epsilon=1.0) == (True, "the claim is refuted: eps_lb = 1.5 > claimed eps = 1")
    assert verdict(0.5, claimed_epsilon=1.0) == (False, "consistent with the claim: eps_lb = 0.5 <= claimed eps = 1")
    refuted, text = verdict(3.0, kind="lower bound under assumption", claimed_epsilon=1.0)
    assert refuted is None and text.startswith("not a test of the claim")
    refuted, text = verdict(3.0, claimed_epsilon=1.0, not_comparable="another delta")
    assert refuted is None and text == "not comparable with the claim: another delta"
    assert verdict(3.0) == (None, None)
    payload = read_bound(1.5, "lower bound", 5.0, "a design", "more", claimed_epsilon=1.0).to_dict()
    assert payload == {"epsilon_ceiling": 5.0, "ceiling_state": "below the ceiling",
                       "reading": "eps_lb = 1.50; this design cannot certify more than 5.00 with a design",
                       "claimed_epsilon": 1.0, "claim_refuted": True,
                       "claim_verdict": "the claim is refuted: eps_lb = 1.5 > claimed eps = 1"}


def test_claim_epsilon_at_a_delta():
    assert parse_claim("eps-delta:epsilon=2,delta=1e-5").epsilon_at(1e-5) == 2.0
    assert parse_claim("eps-delta:epsilon=2,delta=1e-5").epsilon_at(1e-6) is None
    assert parse_claim("gaussian:mu=1").epsilon_at(0.0) is None
    assert parse_claim("gaussian:mu=1").epsilon_at(1e-5) == pytest.approx(4.3772, abs=1e-4)
