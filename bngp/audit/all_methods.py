"""Every score method on the same scores, with one confidence for all of them together.

:func:`audit_all` runs the score methods :data:`ALL_METHODS` (many-run Clopper-Pearson, many-run
GDP, the one-run audit of Steinke, Nasr, Jagielski 2023 and the f-DP one-run audit of
arXiv:2410.22235) on one set of member / non-member scores at one delta.

Confidence split (Bonferroni over the methods).  Each of the m = 4 methods runs at confidence
1 - beta / m.  Method j's bound fails with probability at most beta / m, so by the union bound
P[some bound fails] <= m * beta / m = beta: all m rows, and hence their largest, hold together at
confidence 1 - beta.  The union bound needs no independence between the methods (they read the
same scores).

The headline: ``epsilon_lb`` is the largest row whose ``epsilon_kind`` is ``"lower bound"``
(:data:`bngp.audit.BOUND_KINDS`: no assumption; the first in :data:`ALL_METHODS` order on a tie),
from ``epsilon_lb_method``.  Rows of kind ``"lower bound under assumption"`` (``gdp``,
``fdp-one-run``: a Gaussian trade-off curve) are reported but never chosen.  Each row is read
against its design's ceiling, the same method's bound (at the same confidence) on a perfect
attack's scores (:mod:`bngp.audit.ceiling`), and the headline against the largest ceiling of the
``"lower bound"`` rows, the design being the n rows of scores.

Which rows the scores must be for each method to hold: independent runs with or without the target
(``clopper-pearson``, ``gdp``), or canaries of one run each included by an independent fair coin
(``one-run``, ``fdp-one-run``); a row holds only for the methods whose assumption the scores meet.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from bngp.audit.ceiling import BoundReading, perfect_scores, read_bound
from bngp.audit.inputs import check_confidence, check_delta, check_scores_and_labels
from bngp.audit.many_run import BOUND_KINDS
from bngp.audit.methods import SCORE_METHODS, claimed_fields, epsilon_kind, read_result, score_method_audit
from bngp.audit.tradeoff_curve import Claim
from bngp.errors import InputError

__all__ = ["ALL_METHODS", "AllMethodsResult", "audit_all"]

#: the score methods that :func:`audit_all` runs, in the order of its rows.
ALL_METHODS = SCORE_METHODS


@dataclass(frozen=True)
class AllMethodsResult:
    """Every score method's bound on the same scores, jointly valid at ``confidence``.

    Attributes:
        results: method -> its result record, in :data:`ALL_METHODS` order.
        ceilings: method -> its design's ceiling (its ``epsilon_lb`` on a perfect attack's scores).
        readings: method -> its bound read against its ceiling and the claim.
        confidence: 1 - beta, the confidence of all rows together.
        method_confidence: 1 - beta / m, the confidence each method ran at.
        delta: the delta every bound is stated at.
        n_rows: the number of scores.
        epsilon_lb_method: the method of the headline, the largest ``"lower bound"`` row.
        reading: the headline read against the largest ceiling of the ``"lower bound"`` rows.
        union_bound: the split of the confidence, in words.
    """

    results: Mapping[str, Any]
    ceilings: Mapping[str, float]
    readings: Mapping[str, BoundReading]
    confidence: float
    method_confidence: float
    delta: float
    n_rows: int
    epsilon_lb_method: str
    reading: BoundReading
    union_bound: str

    @property
    def epsilon_lb(self) -> float:
        """The headline bound: ``epsilon_lb`` of :attr:`epsilon_lb_method`."""
        return self.reading.epsilon_lb

    @property
    def epsilon_kind(self) -> str:
        """What the headline is (always ``"lower bound"``)."""
        return self.reading.epsilon_kind


def audit_all(
    scores: np.ndarray,
    members: np.ndarray,
    *,
    confidence: float = 0.95,
    delta: float = 1e-5,
    strategy: str | None = None,
    seed: int = 0,
    k_plus: Sequence[int] | None = None,
    k_minus: Sequence[int] | None = None,
    claim: Claim | None = None,
) -> AllMethodsResult:
    """Run every method of :data:`ALL_METHODS` on ``scores`` at confidence 1 - beta / 4 each (module docstring).

    Args:
        scores: one score per row, higher = member.
        members: 1 for a member row, else 0.
        confidence: 1 - beta, the confidence of all bounds together.
        delta: the delta of every bound; must be > 0 (gdp and fdp-one-run have no finite eps at 0).
        strategy: threshold rule of ``clopper-pearson`` and ``gdp`` (default ``"auto"``).
        seed: seed of the methods' random choices (tie-breaking, probes, splits).
        k_plus, k_minus: one-run guess counts (both or neither), as in
            :func:`bngp.audit.score_method_audit`.
        claim: a claimed guarantee whose eps at ``delta`` every reading is put beside.

    Example:
        >>> rng = np.random.default_rng(0)
        >>> members = rng.integers(0, 2, 400)
        >>> record = audit_all(members * 3.0 + rng.normal(size=400), members)
        >>> record.method_confidence, record.epsilon_lb_method in ("clopper-pearson", "one-run")
        (0.9875, True)
    """
    values, labels = check_scores_and_labels(scores, members)
    confidence = check_confidence(confidence)
    delta = check_delta(delta)
    if delta == 0.0:
        raise InputError("`delta` must be > 0 with --method all (gdp and fdp-one-run have no finite eps at delta 0).")
    if (k_plus is None) != (k_minus is None):
        raise InputError("`k_plus` and `k_minus` must be given together.")
    each = 1.0 - (1.0 - confidence) / len(ALL_METHODS)
    options = dict(confidence=each, delta=delta, strategy=strategy, seed=seed, k_plus=k_plus, k_minus=k_minus)
    results = {name: score_method_audit(name, values, labels, **options) for name in ALL_METHODS}
    perfect = perfect_scores(labels)
    ceilings = {name: score_method_audit(name, perfect, labels, **options).epsilon_lb for name in ALL_METHODS}
    readings = {name: read_result(name, result, ceilings[name], claim) for name, result in results.items()}
    valid = [name for name in ALL_METHODS if epsilon_kind(name, results[name]) == BOUND_KINDS[0]]
    best = max(valid, key=lambda name: results[name].epsilon_lb)
    ceiling = max(readings[name].epsilon_ceiling for name in valid)
    reading = read_bound(results[best].epsilon_lb, epsilon_kind(best, results[best]), ceiling,
                         f"{values.shape[0]} rows", "more rows", **claimed_fields(claim, delta))
    return AllMethodsResult(
        results=results, ceilings=ceilings, readings=readings, confidence=confidence, method_confidence=each,
        delta=delta, n_rows=int(values.shape[0]), epsilon_lb_method=best, reading=reading,
        union_bound=(f"bonferroni over the {len(ALL_METHODS)} methods (each at confidence "
                     f"1 - beta/{len(ALL_METHODS)})"),
    )
