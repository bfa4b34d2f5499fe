"""The decision an audit supports, in one sentence a data steward can act on.

An audit's bound (:func:`bngp.audit.read_bound`: epsilon_lb against the design's ceiling and a
claimed eps) answers one of these questions, checked in this order (:data:`AUDIT_VERDICTS`):

* ``claim-refuted``: the release breaks its claimed guarantee, because an assumption-free lower
  bound exceeds the claimed eps, or because the empirical trade-off region lies below the claim's
  trade-off curve (Dong, Roth, Su, arXiv:1905.02383; :func:`bngp.audit.check_claim`).
* ``cannot-test-claim``: the claim stands untested, since even a perfect attack could not certify
  more than the claimed eps with this design.
* ``at-ceiling``: the attack was perfect, or nearly, so the release leaks at least epsilon_lb, and
  only a larger design can show how much more.
* ``design-too-small``: even a perfect attack certifies less than eps = 1 with this design, so the
  bound says little either way.
* ``nothing-certified``: epsilon_lb = 0 with a design that could show more. That is no evidence
  of privacy, only of this attack's weakness.
* ``consistent``: a bound above 0 and at most the claimed eps; the audit found no violation.
* ``leaks-at-least``: no claim; the release is not eps-DP for any eps < epsilon_lb (a lower bound)
  or, for a measurement, its eps is estimated at epsilon_lb under the method's assumption.

A lower bound can refute a claim but never prove one: ``consistent`` means that this attack and
design found no violation, not that the release is private.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from bngp.audit.ceiling import CEILING_STATES, BoundReading
from bngp.audit.many_run import BOUND_KINDS

__all__ = ["AUDIT_VERDICTS", "AuditDecision", "audit_decision"]

#: verdict -> what it means (module docstring); the sentence of :attr:`AuditDecision.sentence` adds the numbers.
AUDIT_VERDICTS = {
    "claim-refuted": "the release breaks its claimed guarantee",
    "cannot-test-claim": "this design cannot test the claim",
    "at-ceiling": "the release leaks at least as much as this design can show",
    "design-too-small": "this design is too small to say much",
    "nothing-certified": "nothing certified, which is no evidence of privacy",
    "consistent": "consistent with the claim: no violation found",
    "leaks-at-least": "the release leaks at least the bound",
}


def _eps(value: float) -> str:
    return f"{value:.3g}" if math.isfinite(value) else str(value)


@dataclass(frozen=True)
class AuditDecision:
    """The verdict of an audit (module docstring) with the numbers it rests on.

    Attributes:
        verdict: a key of :data:`AUDIT_VERDICTS`.
        reading: the bound read against its ceiling and the claim.
        curve_refuted: whether the claim's trade-off curve is refuted by the empirical region (None: not checked).
    """

    verdict: str
    reading: BoundReading
    curve_refuted: bool | None = None

    @property
    def sentence(self) -> str:
        """The verdict with its numbers, e.g. ``"The claimed guarantee is refuted: eps_lb = 2.3 > claimed eps = 1."``."""
        r = self.reading
        bound, ceiling = _eps(r.epsilon_lb), _eps(r.epsilon_ceiling)
        claimed = None if r.claimed_epsilon is None else f"{r.claimed_epsilon:g}"
        if self.verdict == "claim-refuted":
            why = (f"eps_lb = {bound} > claimed eps = {claimed}" if r.claim_refuted else
                   "the empirical trade-off region lies below the claim's trade-off curve")
            return f"The claimed guarantee is refuted: {why}."
        if self.verdict == "cannot-test-claim":
            return (f"This design cannot test the claim: even a perfect attack certifies at most {ceiling} with "
                    f"{r.design}, not above the claimed eps = {claimed} ({r.advice}).")
        if self.verdict == "at-ceiling":
            return (f"The release leaks at least eps = {bound}, as much as this design can show ({r.design}); "
                    f"the true eps may be much larger ({r.advice}).")
        if self.verdict == "design-too-small":
            return (f"This design is too small to say much: even a perfect attack certifies at most {ceiling} with "
                    f"{r.design} ({r.advice}).")
        if self.verdict == "nothing-certified":
            return (f"Nothing certified: eps_lb = 0 with a design that could show up to {ceiling}; this is no evidence "
                    "of privacy, only that this attack found no leak.")
        if self.verdict == "consistent":
            return (f"Consistent with the claim: eps_lb = {bound} <= claimed eps = {claimed}; this attack and design "
                    "found no violation (a lower bound cannot prove the claim).")
        if r.epsilon_kind == BOUND_KINDS[0]:
            return f"The release leaks at least eps = {bound}: it is not eps-DP for any smaller eps."
        return f"The release's eps is estimated at {bound} ({r.epsilon_kind}), not a lower bound."

    def to_dict(self) -> dict[str, Any]:
        return {"verdict": self.verdict, "sentence": self.sentence, "meaning": AUDIT_VERDICTS[self.verdict],
                "curve_refuted": self.curve_refuted}


def audit_decision(reading: BoundReading, *, curve_refuted: bool | None = None) -> AuditDecision:
    """The verdict of the module docstring for ``reading`` and, when the claim's trade-off curve was
    checked, its outcome ``curve_refuted``.

    Example:
        >>> from bngp.audit import read_bound
        >>> audit_decision(read_bound(2.5, "lower bound", 7.4, "100 canaries", "more canaries",
        ...                           claimed_epsilon=1.0)).verdict
        'claim-refuted'
        >>> audit_decision(read_bound(0.0, "lower bound", 2.71, "150 canaries", "more canaries")).verdict
        'nothing-certified'
    """
    claimed = reading.claimed_epsilon
    if reading.claim_refuted or curve_refuted:
        verdict = "claim-refuted"
    elif claimed is not None and reading.epsilon_ceiling <= claimed:
        verdict = "cannot-test-claim"
    elif reading.ceiling_state == CEILING_STATES[0]:
        verdict = "at-ceiling"
    elif reading.ceiling_state == CEILING_STATES[1]:
        verdict = "design-too-small"
    elif reading.epsilon_lb == 0.0:
        verdict = "nothing-certified"
    elif claimed is not None and reading.claim_refuted is False:
        verdict = "consistent"
    else:
        verdict = "leaks-at-least"
    return AuditDecision(verdict, reading, curve_refuted)
