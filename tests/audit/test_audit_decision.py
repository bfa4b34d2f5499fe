"""The audit's verdict (:mod:`bngp.audit.decision`): each verdict from the bound, ceiling and claim that define it."""

import pytest

from bngp.audit import AUDIT_VERDICTS, audit_decision, read_bound


def _decide(lb, ceiling, claimed=None, kind="lower bound", curve_refuted=None):
    reading = read_bound(lb, kind, ceiling, "100 canaries", "more canaries", claimed_epsilon=claimed)
    return audit_decision(reading, curve_refuted=curve_refuted)


@pytest.mark.parametrize(
    "lb, ceiling, claimed, kind, curve_refuted, verdict",
    [
        (2.5, 7.4, 1.0, "lower bound", None, "claim-refuted"),  # eps_lb > claimed eps
        (0.5, 7.4, 1.0, "lower bound", True, "claim-refuted"),  # the trade-off region is below the claim's curve
        (1.5, 7.4, 50.0, "lower bound", None, "cannot-test-claim"),  # a perfect attack cannot reach 50
        (7.2, 7.4, None, "lower bound", None, "at-ceiling"),  # >= 0.95 x ceiling
        (0.1, 0.8, None, "lower bound", None, "design-too-small"),  # ceiling < 1
        (0.0, 7.4, None, "lower bound", None, "nothing-certified"),
        (0.8, 7.4, 1.0, "lower bound", False, "consistent"),
        (2.0, 7.4, None, "lower bound", None, "leaks-at-least"),
        (2.0, 7.4, None, "estimate", None, "leaks-at-least"),
        (2.0, 7.4, 1.0, "estimate", None, "leaks-at-least"),  # an estimate tests no claim
    ],
)
def test_each_verdict(lb, ceiling, claimed, kind, curve_refuted, verdict):
    decision = _decide(lb, ceiling, claimed, kind, curve_refuted)
    assert decision.verdict == verdict
    record = decision.to_dict()
    assert record["verdict"] == verdict and record["meaning"] == AUDIT_VERDICTS[verdict]
    assert record["sentence"].endswith(".") and "\n" not in record["sentence"]


def test_sentences_carry_the_numbers():
    assert _decide(2.5, 7.4, 1.0).sentence == "The claimed guarantee is refuted: eps_lb = 2.5 > claimed eps = 1."
    assert "at most 7.4 with 100 canaries, not above the claimed eps = 50" in _decide(1.5, 7.4, 50.0).sentence
    assert _decide(2.0, 7.4).sentence == "The release leaks at least eps = 2: it is not eps-DP for any smaller eps."
    assert "not a lower bound" in _decide(2.0, 7.4, kind="estimate").sentence
