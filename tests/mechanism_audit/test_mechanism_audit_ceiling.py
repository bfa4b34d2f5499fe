"""Every mechanism audit states the largest eps its design can certify (the same bound on a
perfect attack's scores, known answers from the record's counts) and reads its bound against it
and against the defense's claimed eps."""

import numpy as np
import pytest
from scipy import special

from bngp.audit import binomial_bound, default_one_run_candidates, many_run_audit, perfect_scores
from bngp.data.independent import simulate_independent
from bngp.defenses.base import NoDefense
from bngp.defenses.registry import DefenseContext, parse_defense_spec
from bngp.mechanism_audit import (
    MECHANISM_AUDIT_FORMAT,
    many_run_mechanism_audit,
    one_run_mechanism_audit,
    panoramia_mechanism_audit,
)

MEMBERS = 60


@pytest.fixture(scope="module")
def population():
    return simulate_independent(240, 200, 600, seed=7)


def _one_run_ceiling(m: int, included: int, confidence: float, delta: float) -> float:
    """The one-run search's bound with every guess the design allows right (arXiv:2305.08846, Thm. 3.1)."""
    candidates = default_one_run_candidates(m)
    level = 1 - (1 - confidence) / len(candidates)
    return max(
        binomial_bound(kp + km, min(kp, included) + min(km, m - included), confidence=level, delta=delta,
                       m=m).epsilon_lb
        for kp, km in candidates
    )


def test_one_run_ceiling_is_the_bound_of_all_guesses_right(population):
    defense = parse_defense_spec("gaussian:epsilon=2,delta=1e-5", DefenseContext(population, MEMBERS))
    result = one_run_mechanism_audit(population, defense, "score", canaries=60, members=MEMBERS, seed=2)
    included = int(result.design["included_canaries_per_run_mean"])
    assert result.epsilon_ceiling == pytest.approx(_one_run_ceiling(60, included, 0.95, 1e-5))
    assert result.epsilon_lb <= result.epsilon_ceiling
    payload = result.to_dict()
    assert payload["format"] == MECHANISM_AUDIT_FORMAT == "bngp-mechanism-audit-1"
    assert payload["epsilon_ceiling"] == result.epsilon_ceiling
    assert payload["reading"] == (f"eps_lb = {result.epsilon_lb:.2f}; this design cannot certify more than "
                                  f"{result.epsilon_ceiling:.2f} with 60 canaries in one release")
    assert payload["claim_verdict"] == (f"consistent with the claim: eps_lb = {result.epsilon_lb:.4g} <= claimed "
                                        "eps = 2")
    tradeoff = result.diagnostics["tradeoff"]
    assert tradeoff["is_test"] is False and tradeoff["n_members"] == included


def test_many_run_ceilings_and_a_perfect_attack_at_the_ceiling(population):
    """No noise, the score attack: the bound reaches the design's ceiling and says so."""
    result = many_run_mechanism_audit(population, NoDefense(), "score", canaries=3, members=MEMBERS, runs=40, seed=0)
    method = result.method
    included = int(round(result.design["included_canaries_per_run_mean"] * 40))
    pooled = _one_run_ceiling(120, included, 0.975, 0.0)
    per_canary = max(
        many_run_audit(perfect_scores(labels), labels, confidence=1 - 0.05 / 6, strategy="bonferroni").epsilon_lb
        for record in method["per_canary"] if not record.get("skipped")
        for labels in [np.repeat([1, 0], [record["n_members"], record["n_nonmembers"]])]
    )
    assert method["pooled_one_run_epsilon_ceiling"] == pytest.approx(pooled)
    assert method["clopper_pearson_epsilon_ceiling"] == pytest.approx(per_canary)
    assert result.epsilon_ceiling == max(pooled, per_canary)
    reading = result.reading()
    assert reading.ceiling_state == "at the ceiling" and result.epsilon_lb >= 0.95 * result.epsilon_ceiling
    assert "the attack was perfect (or nearly), so the true eps may be much larger" in reading.notes()[0]
    assert result.to_dict()["claim_verdict"] is None  # no claim
    assert result.diagnostics["tradeoff"]["is_test"] is True


def test_panoramia_ceilings(population):
    result = panoramia_mechanism_audit(population, NoDefense(), "score", audit_size=30, members=MEMBERS, seed=0)
    real, generated = result.panoramia["real_nonmembers"], result.panoramia["generated_nonmembers"]
    # a perfect MIA on the real audit set: two thresholds, every predicted member a member
    assert real["epsilon_ceiling"] == pytest.approx(special.logit((0.05 / 2) ** (1 / real["members"])), rel=1e-6)
    assert result.epsilon_ceiling == real["epsilon_ceiling"] >= result.epsilon_lb
    assert generated["epsilon_tilde_ceiling"] >= generated["epsilon_tilde"]
    assert result.reading().design == "30 real audit points"


def test_a_claim_at_a_larger_delta_is_named_not_comparable(population):
    defense = parse_defense_spec("gaussian:epsilon=1,delta=1e-5", DefenseContext(population, MEMBERS))
    result = one_run_mechanism_audit(population, defense, "score", canaries=20, members=MEMBERS, delta=0.0)
    payload = result.to_dict()
    assert payload["bound_exceeds_claim"] is None and payload["claimed_epsilon"] == 1.0
    assert payload["claim_verdict"] == ("not comparable with the claim: the claim is stated at delta 1e-05, the "
                                        "bound at delta 0 below it")
