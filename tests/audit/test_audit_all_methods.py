"""``audit_all``: every score method on the same scores, Bonferroni over the methods."""

import dataclasses

import numpy as np
import pytest

from bngp.audit import (
    ALL_METHODS,
    BOUND_KINDS,
    AllMethodsResult,
    audit_all,
    parse_claim,
    perfect_scores,
    score_method_audit,
)
from bngp.errors import InputError


@pytest.fixture(scope="module")
def scores_and_members():
    rng = np.random.default_rng(0)
    members = rng.integers(0, 2, 400)
    return members * 2.5 + rng.normal(size=400), members


@pytest.fixture(scope="module")
def record(scores_and_members):
    scores, members = scores_and_members
    return audit_all(scores, members, confidence=0.9, delta=1e-5, seed=3, claim=parse_claim("gaussian:mu=1", "claim"))


def test_every_method_runs_at_its_bonferroni_share(scores_and_members, record):
    scores, members = scores_and_members
    assert isinstance(record, AllMethodsResult) and tuple(record.results) == ALL_METHODS
    assert record.method_confidence == pytest.approx(1.0 - 0.1 / len(ALL_METHODS))
    assert record.confidence == 0.9 and record.delta == 1e-5 and record.n_rows == 400
    for name, result in record.results.items():
        alone = score_method_audit(name, scores, members.astype(bool), confidence=record.method_confidence,
                                   delta=1e-5, seed=3)
        assert result.confidence == pytest.approx(record.method_confidence)
        assert result.epsilon_lb == alone.epsilon_lb
        perfect = score_method_audit(name, perfect_scores(members.astype(bool)), members.astype(bool),
                                     confidence=record.method_confidence, delta=1e-5, seed=3)
        assert record.ceilings[name] == perfect.epsilon_lb == record.readings[name].epsilon_ceiling


def test_the_headline_is_the_largest_assumption_free_row(record):
    free = {name: r.epsilon_lb for name, r in record.results.items() if record.readings[name].epsilon_kind
            == BOUND_KINDS[0]}
    assert set(free) == {"clopper-pearson", "one-run"}  # gdp and fdp-one-run assume a Gaussian curve
    assert record.epsilon_lb == max(free.values()) and record.epsilon_kind == BOUND_KINDS[0]
    assert record.epsilon_lb_method in free and free[record.epsilon_lb_method] == record.epsilon_lb
    assert record.reading.epsilon_ceiling == max(record.ceilings[name] for name in free)
    assert record.reading.claimed_epsilon == pytest.approx(parse_claim("gaussian:mu=1", "c").epsilon_at(1e-5))
    assert "bonferroni over the 4 methods" in record.union_bound


def test_the_record_is_frozen(record):
    with pytest.raises(dataclasses.FrozenInstanceError):
        record.confidence = 0.5


@pytest.mark.parametrize("kwargs, needle", [
    (dict(delta=0.0), "delta"),
    (dict(k_plus=[10]), "k_minus"),
    (dict(confidence=1.0), "confidence"),
])
def test_bad_arguments_raise(scores_and_members, kwargs, needle):
    scores, members = scores_and_members
    with pytest.raises(InputError, match=needle):
        audit_all(scores, members, **kwargs)
