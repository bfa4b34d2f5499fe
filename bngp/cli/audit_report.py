"""The report of ``bngp audit``: the AUDIT.json payload, the report's table and notes, and the plot's curves.

From the audit's outcome (:class:`AuditOutcome`: per method its result and its design's ceiling)
:func:`build_report` assembles what ``bngp audit`` writes: the payload of AUDIT.json (``format``
:data:`AUDIT_FORMAT`), the table and notes of AUDIT.md and the curves and points of AUDIT.png.  The
numbers are the library's (:mod:`bngp.audit`); this module only lays them out.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from bngp.audit import (
    BOUND_KINDS,
    AllMethodsResult,
    AuditDecision,
    BoundReading,
    Claim,
    audit_decision,
    check_claim,
    check_claim_error_rate,
    empirical_tradeoff,
    eps_delta_tradeoff,
    gaussian_tradeoff,
)
from bngp.audit.methods import detail_line, epsilon_kind

__all__ = ["AUDIT_FORMAT", "AuditOutcome", "AuditReport", "build_report"]

#: the ``format`` of AUDIT.json; the number is its version.
AUDIT_FORMAT = "bngp-audit-1"

#: methods whose scores are not independent runs: their trade-off region and its claim check describe, not test.
_DESCRIPTIVE_METHODS = ("one-run", "fdp-one-run", "panoramia")

#: FPR values at which the claimed and certified trade-off functions are drawn.
_CURVE_X = np.unique(np.concatenate((np.linspace(0.0, 1.0, 501), np.geomspace(1e-6, 1.0, 301))))


@dataclass(frozen=True)
class AuditOutcome:
    """What the audit produced: per method its result, the design's ceiling (the same method's
    epsilon_lb on a perfect attack's scores, :mod:`bngp.audit.ceiling`) and the reading of the
    bound, the extra payload entries, the input's row count and what a row is, the data:
    ``("scores", scores, members)``, ``("bits", guesses, bits)`` or, for a SCORES.npz,
    ``("targets", scores, labels)`` (R x K), and for ``--method all`` the library's record."""

    results: dict[str, Any]
    ceilings: dict[str, float]
    readings: dict[str, BoundReading]
    extra: dict[str, Any]
    rows: int
    runs: str
    data: tuple
    combined: AllMethodsResult | None = None


@dataclass(frozen=True)
class AuditReport:
    """AUDIT.json's payload, AUDIT.md's table and notes, AUDIT.png's curves, points and region, the
    headline's reading, the audit's decision and the summary words of the printed line."""

    payload: dict[str, Any]
    table: list[dict[str, Any]]
    notes: list[str]
    curves: list
    points: list
    region: dict[str, Any] | None
    reading: BoundReading
    decision: AuditDecision
    summary: str


def _row(method: str, result: Any, reading: BoundReading) -> dict[str, Any]:
    return {
        "method": method,
        "epsilon_lb": result.epsilon_lb,
        "epsilon_kind": epsilon_kind(method, result),
        **reading.to_dict(),
        "confidence": result.confidence,
        "delta": result.delta,
        "detail": detail_line(method, result),
    }


def _head_all(record: AllMethodsResult, table: list[dict[str, Any]]) -> tuple[dict[str, Any], list[str]]:
    """The head of the payload for ``--method all`` and its notes."""
    best = record.epsilon_lb_method
    count = len(record.results)
    head: dict[str, Any] = {
        "epsilon_lb": record.results[best].epsilon_lb,
        "epsilon_kind": record.epsilon_kind,
        "epsilon_lb_method": best,
        **record.reading.to_dict(),
        "confidence": record.confidence,
        "delta": record.delta,
        "method_confidence": record.method_confidence,
        "union_bound": record.union_bound,
        "methods": {
            row["method"]: {key: value for key, value in row.items() if key not in ("method", "detail")}
            | {"result": record.results[row["method"]].to_dict()}
            for row in table
        },
    }
    notes = [
        f"Each method ran at confidence {record.method_confidence:g} = 1 - beta/{count} (Bonferroni over "
        f"the {count} methods), so all rows, and the largest of them, hold together at confidence "
        f"{record.confidence:g}. epsilon_lb is the largest row of kind 'lower bound'; rows of kind 'lower bound under "
        "assumption' (gdp, fdp-one-run) assume a Gaussian trade-off curve and are otherwise estimates.",
        "Not run: panoramia (needs baseline scores or real non-members) and bits (needs guesses).",
    ]
    return head, notes


def _head_one(method: str, result: Any, reading: BoundReading, kind: str,
              confidence: float) -> tuple[dict[str, Any], list[str]]:
    """The head of the payload for one method and its notes."""
    head = {
        "epsilon_lb": result.epsilon_lb,
        "epsilon_kind": kind,
        **reading.to_dict(),
        "confidence": confidence,
        "delta": result.delta,
        "result": result.to_dict(),
    }
    notes = []
    assumption = getattr(result, "epsilon_assumption", None)
    if assumption and kind != BOUND_KINDS[0]:
        notes.append(f"epsilon_lb assumes: {assumption}.")
    if method == "panoramia":
        notes.append(result.interpretation)
    return head, notes


def _figure(claim: Claim | None, certified: tuple[str, float, float], results: dict[str, Any],
            data: tuple) -> tuple[list, list]:
    """(curves, points) of the PNG: the claimed and certified curves; for bits, the points."""
    points = []
    if data[0] == "bits":
        guesses, bits = data[1], data[2]
        if 0 < bits.sum() < bits.shape[0]:
            fpr, fnr = float(np.mean(guesses[~bits])), float(np.mean(~guesses[bits]))
            points.append(("guesses: (FPR, FNR) = (P[1 | bit 0], P[0 | bit 1])", fpr, fnr))
        bits_result = results["bits"]
        points.append((f"error-rate upper limit ({bits_result.error_rate_upper:.3f}, same)",
                       bits_result.error_rate_upper, bits_result.error_rate_upper))
    curves = []
    if claim is not None:
        curves.append((f"claim {claim.spec}", _CURVE_X, claim.tradeoff()(_CURVE_X)))
    name, epsilon, delta = certified
    if np.isfinite(epsilon):
        curves.append((f"certified by {name}: (eps = {epsilon:.3f}, delta = {delta:g})-DP curve", _CURVE_X,
                       eps_delta_tradeoff(epsilon, delta)(_CURVE_X)))
    for method in ("gdp", "fdp-one-run"):
        mu = getattr(results.get(method), "mu_lb", None)
        if mu is not None and np.isfinite(mu):
            curves.append((f"{method}: mu_lb = {mu:.3f} Gaussian curve", _CURVE_X, gaussian_tradeoff(mu)(_CURVE_X)))
    return curves, points


def _tradeoff_scores(outcome: AuditOutcome, confidence: float) -> tuple[np.ndarray, np.ndarray, float] | None:
    """The scores, labels and confidence of the trade-off region (None for bits): the input's scores,
    or for a SCORES.npz the best target's, at that target's confidence (the Bonferroni share)."""
    kind = outcome.data[0]
    if kind == "bits":
        return None
    if kind == "targets":
        result = next(iter(outcome.results.values()))
        column = result.best_target
        return outcome.data[1][:, column], outcome.data[2][:, column], result.target_confidence
    return outcome.data[1], outcome.data[2], confidence


def _tradeoff(method: str, outcome: AuditOutcome, claim: Claim | None, confidence: float,
              payload: dict[str, Any], notes: list[str]) -> dict[str, Any] | None:
    """Add the trade-off curve (or, for bits, the error-rate claim check) to ``payload`` and its notes to
    ``notes``; returns the plot's confidence region (None for bits)."""
    tradeoff_input = _tradeoff_scores(outcome, confidence)
    if tradeoff_input is None:
        if claim is not None:
            bits_result = outcome.results["bits"]
            payload["claim"] = check_claim_error_rate(claim, bits_result.error_rate_upper,
                                                      confidence=confidence).to_dict()
        notes.append(
            "The bits audit has no scores, so no trade-off curve: the plot shows the guesses' (FPR, FNR) and the "
            "error-rate upper limit (p_hat, p_hat); a claim f is refuted iff p_hat is below its per-bit error floor "
            "x* = f(x*)."
        )
        return None
    curve = empirical_tradeoff(*tradeoff_input[:2], confidence=tradeoff_input[2])
    payload["tradeoff"] = curve.to_dict()
    region = {key: getattr(curve, key) for key in
              ("alpha", "beta", "alpha_upper", "beta_upper", "alpha_lower", "beta_lower", "confidence")}
    if claim is not None:
        payload["claim"] = check_claim(curve, claim).to_dict()
    if outcome.data[0] == "targets":
        notes.append(
            f"The trade-off region is that of the best target's {tradeoff_input[0].shape[0]} scores (one per "
            f"release, independent runs) at confidence {tradeoff_input[2]:.4g} = 1 - beta/K' (Bonferroni over "
            "the targets), so the region and the claim verdict hold at the stated confidence."
        )
    if method in _DESCRIPTIVE_METHODS:
        notes.append(
            "The trade-off region and the claim verdict treat every score as an independent run of the "
            "mechanism; for the scores of one run (canaries of one training) or generated non-members they "
            "are descriptive, not a test."
        )
    return region


def build_report(method: str, source: dict[str, Any], outcome: AuditOutcome, claim: Claim | None,
                 confidence: float, delta: float, report_paths: dict[str, str]) -> AuditReport:
    """Everything ``bngp audit --method METHOD`` writes, for the outcome of its audit.

    ``source`` holds the payload's ``input`` (and ``attack``) entries; ``report_paths`` its ``report``.
    """
    results = outcome.results
    table = [_row(name, item, outcome.readings[name]) for name, item in results.items()]
    if outcome.combined is not None:
        record = outcome.combined
        head, notes = _head_all(record, table)
        reading = record.reading
        certified = (record.epsilon_lb_method, record.results[record.epsilon_lb_method].epsilon_lb, delta)
        summary = f"{record.epsilon_lb_method}, {record.epsilon_kind}; best of {len(results)} methods"
    else:
        result, reading = results[method], outcome.readings[method]
        head, notes = _head_one(method, result, reading, table[0]["epsilon_kind"], confidence)
        certified = (method, result.epsilon_lb, result.delta)
        summary = result.method
    notes += reading.notes()
    payload: dict[str, Any] = {
        "format": AUDIT_FORMAT,
        "command": "audit",
        "method": method,
        **source,
        "rows": outcome.rows,
        "runs": outcome.runs,
        **head,
        **outcome.extra,
    }
    region = _tradeoff(method, outcome, claim, confidence, payload, notes)
    tested = "claim" in payload and method not in _DESCRIPTIVE_METHODS
    decision = audit_decision(reading, curve_refuted=payload["claim"]["refuted"] if tested else None)
    payload["audit_decision"] = decision.to_dict()
    if np.isfinite(certified[1]):
        notes.append(
            f"The plot's certified curve is the (eps, delta)-DP trade-off function at eps = epsilon_lb of "
            f"{certified[0]}: at the stated confidence the mechanism is not (eps', delta)-DP for any eps' < "
            "epsilon_lb (for a 'lower bound'; under the stated assumption otherwise)."
        )
    payload["report"] = report_paths
    curves, points = _figure(claim, certified, results, outcome.data)
    return AuditReport(payload, table, notes, curves, points, region, reading, decision, summary)
