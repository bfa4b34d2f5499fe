"""What an audit's design can certify (its ceiling), and how to read a bound against it and a claim.

The ceiling.  Every bound of :mod:`bngp.audit` is a function of how often the attack is right:
the correct guesses of the one-run audit (Steinke, Nasr, Jagielski, arXiv:2305.08846, Thm. 3.1
and Prop. 5.7) and of PANORAMIA (arXiv:2402.09477, Prop. 1-2), the false positives and negatives
of a threshold in the many-run audit (Kairouz, Oh, Viswanath 2015; Jagielski, Ullman, Oprea 2020),
the wrong bits of the bits audit.  A perfect attack scores every member 1 and every non-member 0
(:func:`perfect_scores`): every one-run guess the design allows is right
(v = min(k+, members) + min(k-, non-members)), the threshold between the two values has
FP = FN = 0, PANORAMIA's MIA predicts members only, every bit is guessed.  The design's ceiling is
the bound that the same method, with the same sizes, candidates, threshold rule, union bound,
confidence, delta and seed, returns for those perfect scores: the largest eps the design can
certify.  The one-run, PANORAMIA and bits bounds increase with the correct guesses and the
Clopper-Pearson limits decrease with the errors, so no attack certifies more with a fixed set of
tests; a data-dependent threshold rule (the many-run ``auto`` probe, ``grid``, ``split``) gets the
perfect attack's two-valued scores.

Closed forms at delta = 0 (beta = 1 - confidence):

* one run, r guesses all right, C candidate pairs (k+, k-): p(eps) = q^r with
  q = e^eps / (1 + e^eps), so eps_ceiling = logit((beta / C)^(1/r)) ~ ln(r / ln(C / beta)).  The
  ceiling grows like ln r: about ln 2 = 0.69 per doubling of the canaries.
* many runs, Clopper-Pearson with no error at L thresholds fixed in advance, N0 non-members and
  N1 members: alpha_u = 1 - (beta / (2 L))^(1/N0), beta_u = 1 - (beta / (2 L))^(1/N1) and
  eps_ceiling = max(ln((1 - alpha_u) / beta_u), ln((1 - beta_u) / alpha_u))
  ~ ln(N / ln(2 L / beta)) for N0 = N1 = N: again about 0.69 per doubling of the runs.

Reading a bound (:func:`read_bound`) puts it in one of :data:`CEILING_STATES`:

* ``"at the ceiling"``: epsilon_lb >= :data:`SATURATION` x ceiling (ceiling > 0).  The attack was
  perfect, or nearly: the true eps may be much larger, and only a larger design can show more.
* ``"design too small"``: below that, and the ceiling is under :data:`SMALL_CEILING` or not above
  the claimed eps.  Even a perfect attack could not certify eps = 1 (or refute the claim) with
  this design, so a small epsilon_lb (0 in particular) says nothing about privacy.
* ``"below the ceiling"``: the attack, not the design, limits the bound.

A claimed eps is compared only with an assumption-free lower bound stated at a delta where the
claim says something ((eps, delta)-DP implies (eps, delta')-DP for delta' >= delta): the claim is
refuted when epsilon_lb > claimed eps (at the bound's confidence), else the bound is consistent
with it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from bngp.audit.many_run import BOUND_KINDS
from bngp.audit.results import to_jsonable

__all__ = ["CEILING_STATES", "SATURATION", "SMALL_CEILING", "BoundReading", "perfect_scores", "read_bound"]

#: a bound at or above this fraction of its design's ceiling is "at the ceiling".
SATURATION = 0.95
#: a design whose ceiling is below this cannot tell an eps = 1 mechanism from a fully revealing one.
SMALL_CEILING = 1.0
#: how a bound relates to its design's ceiling (module docstring).
CEILING_STATES = ("at the ceiling", "design too small", "below the ceiling")


def perfect_scores(members: np.ndarray) -> np.ndarray:
    """The scores of a perfect attack: 1.0 for every member, 0.0 for every non-member (any shape)."""
    return np.asarray(members, dtype=np.float64)


def _number(value: float) -> str:
    return f"{value:.2f}" if math.isfinite(value) else str(value)


@dataclass(frozen=True)
class BoundReading:
    """One eps bound read against its design's ceiling and a claimed eps.

    Attributes:
        epsilon_lb: the bound (or measurement) being read.
        epsilon_kind: what it is, one of :data:`bngp.audit.BOUND_KINDS`.
        epsilon_ceiling: the largest eps the design can certify (module docstring).
        design: the design in words, e.g. ``"150 canaries"``.
        advice: how to make the design larger, e.g. ``"more canaries"``.
        ceiling_state: one of :data:`CEILING_STATES`.
        claimed_epsilon: the claimed eps at the bound's delta, None without a claim or when the
            claim says nothing comparable.
        claim_refuted: True when epsilon_lb > claimed eps for an assumption-free lower bound,
            False when the bound is consistent with the claim, None when there is nothing to compare.
        claim_verdict: the verdict in words (None without a claim).
    """

    epsilon_lb: float
    epsilon_kind: str
    epsilon_ceiling: float
    design: str
    advice: str
    ceiling_state: str
    claimed_epsilon: float | None
    claim_refuted: bool | None
    claim_verdict: str | None

    @property
    def sentence(self) -> str:
        """``"eps_lb = 0.00; this design cannot certify more than 2.71 with 150 canaries"``."""
        return (f"eps_lb = {_number(self.epsilon_lb)}; this design cannot certify more than "
                f"{_number(self.epsilon_ceiling)} with {self.design}")

    def notes(self) -> list[str]:
        """What the reader must know about this bound, in sentences (empty when nothing)."""
        ceiling = _number(self.epsilon_ceiling)
        if self.ceiling_state == CEILING_STATES[0]:
            return [f"The bound is at the design's ceiling ({ceiling} with {self.design}): the attack was perfect "
                    f"(or nearly), so the true eps may be much larger; a larger design is needed to show more "
                    f"({self.advice})."]
        if self.ceiling_state == CEILING_STATES[1]:
            claim = (f", not above the claimed eps = {self.claimed_epsilon:g}, so it cannot refute the claim"
                     if self.claimed_epsilon is not None and self.epsilon_ceiling <= self.claimed_epsilon else "")
            return [f"The design is too small: even a perfect attack certifies at most {ceiling} with {self.design}"
                    f"{claim}; eps_lb = {_number(self.epsilon_lb)} says little about a release that leaks more "
                    f"({self.advice})."]
        if self.epsilon_lb == 0.0:
            return [f"eps_lb = 0: the attack certified nothing at this confidence, which is no evidence of privacy "
                    f"(a perfect attack would certify {ceiling} with {self.design})."]
        return []

    def to_dict(self) -> dict[str, Any]:
        """The JSON fields: the ceiling, its state and sentence, the claimed eps and the verdict."""
        return to_jsonable({
            "epsilon_ceiling": self.epsilon_ceiling,
            "ceiling_state": self.ceiling_state,
            "reading": self.sentence,
            "claimed_epsilon": self.claimed_epsilon,
            "claim_refuted": self.claim_refuted,
            "claim_verdict": self.claim_verdict,
        })


def _verdict(epsilon_lb: float, epsilon_kind: str, claimed: float | None,
             not_comparable: str | None) -> tuple[bool | None, str | None]:
    if not_comparable is not None:
        return None, f"not comparable with the claim: {not_comparable}"
    if claimed is None:
        return None, None
    if epsilon_kind != BOUND_KINDS[0]:
        return None, f"not a test of the claim: epsilon_lb ({epsilon_kind}) is not an assumption-free lower bound"
    if epsilon_lb > claimed:
        return True, f"the claim is refuted: eps_lb = {epsilon_lb:.4g} > claimed eps = {claimed:g}"
    return False, f"consistent with the claim: eps_lb = {epsilon_lb:.4g} <= claimed eps = {claimed:g}"


def read_bound(
    epsilon_lb: float,
    epsilon_kind: str,
    epsilon_ceiling: float,
    design: str,
    advice: str,
    *,
    claimed_epsilon: float | None = None,
    not_comparable: str | None = None,
) -> BoundReading:
    """Read ``epsilon_lb`` against its design's ``epsilon_ceiling`` and a claimed eps.

    Args:
        epsilon_lb: the bound.
        epsilon_kind: one of :data:`bngp.audit.BOUND_KINDS`; only a ``"lower bound"`` tests a claim.
        epsilon_ceiling: the same method's bound on :func:`perfect_scores` of the same design.
        design: the design in words (``"150 canaries"``), for the sentences.
        advice: how to enlarge the design (``"more canaries: about +0.69 per doubling"``).
        claimed_epsilon: the claimed eps at the bound's delta (None: no claim).
        not_comparable: why a claim that was made cannot be compared with this bound (for
            example a delta below the claim's); overrides ``claimed_epsilon``.

    Example:
        >>> reading = read_bound(0.0, "lower bound", 2.71, "150 canaries", "more canaries", claimed_epsilon=1.0)
        >>> reading.sentence, reading.ceiling_state, reading.claim_refuted
        ('eps_lb = 0.00; this design cannot certify more than 2.71 with 150 canaries', 'below the ceiling', False)
    """
    ceiling = float(epsilon_ceiling)
    claimed = None if not_comparable is not None or claimed_epsilon is None else float(claimed_epsilon)
    if ceiling > 0.0 and epsilon_lb >= SATURATION * ceiling:
        state = CEILING_STATES[0]
    elif ceiling < SMALL_CEILING or (claimed is not None and ceiling <= claimed):
        state = CEILING_STATES[1]
    else:
        state = CEILING_STATES[2]
    refuted, verdict = _verdict(float(epsilon_lb), epsilon_kind, claimed, not_comparable)
    return BoundReading(
        epsilon_lb=float(epsilon_lb),
        epsilon_kind=epsilon_kind,
        epsilon_ceiling=ceiling,
        design=design,
        advice=advice,
        ceiling_state=state,
        claimed_epsilon=claimed,
        claim_refuted=refuted,
        claim_verdict=verdict,
    )
