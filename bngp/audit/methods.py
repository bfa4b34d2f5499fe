"""The audit methods by name: run one on scores, and say what its bound is and how it was obtained.

Names (those of ``bngp audit --method``): ``"clopper-pearson"`` (:func:`bngp.audit.many_run_audit`),
``"gdp"`` (:func:`bngp.audit.gdp_audit`), ``"one-run"`` (:func:`bngp.audit.one_run_audit` /
:func:`bngp.audit.one_run_search`, Steinke, Nasr, Jagielski 2023), ``"fdp-one-run"``
(:func:`bngp.audit.fdp_one_run_audit` / :func:`bngp.audit.fdp_one_run_search`, arXiv:2410.22235),
``"panoramia"`` (:func:`bngp.audit.panoramia_audit`) and ``"bits"`` (:func:`bngp.audit.bits_audit`).
The first four (:data:`SCORE_METHODS`) take only member / non-member scores.

Each result is read against its design's ceiling (the same method's bound on a perfect attack's
scores, :mod:`bngp.audit.ceiling`) and a claimed eps at the bound's delta by :func:`read_result`,
which needs what the bound is (:func:`epsilon_kind`) and the design in words (:func:`design_of`).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import numpy as np

from bngp.audit.ceiling import BoundReading, read_bound
from bngp.audit.fdp_one_run import fdp_one_run_audit, fdp_one_run_search
from bngp.audit.many_run import BOUND_KINDS, gdp_audit, many_run_audit
from bngp.audit.one_run import one_run_audit, one_run_search
from bngp.audit.thresholds import DEFAULT_STRATEGY
from bngp.audit.tradeoff_curve import Claim

__all__ = ["ADVICE", "SCORE_METHODS", "claimed_fields", "design_of", "detail_line", "epsilon_kind", "read_result",
           "score_method_audit"]

#: the methods that take only member / non-member scores (:func:`score_method_audit`).
SCORE_METHODS = ("clopper-pearson", "gdp", "one-run", "fdp-one-run")

#: how to enlarge each design, for the sentences on its ceiling.
ADVICE = {
    "clopper-pearson": "more runs: the ceiling grows about ln 2 = 0.69 per doubling",
    "gdp": "more runs",
    "one-run": "more canaries: the ceiling grows about ln 2 = 0.69 per doubling of the guesses",
    "fdp-one-run": "more canaries",
    "panoramia": "a larger audit set",
    "bits": "more bits",
    "per-target": ("more releases, `bngp evaluate --releases`: the ceiling grows about ln 2 = 0.69 per doubling; "
                   "or a canary audit, `bngp audit-mechanism`"),
}


def _one_run(method: str, scores: np.ndarray, members: np.ndarray, confidence: float, delta: float, seed: int,
             k_plus: Sequence[int] | None, k_minus: Sequence[int] | None) -> Any:
    """One-run audit: the search over guess counts, one fixed (k+, k-), or the search over their product."""
    fixed, search = (one_run_audit, one_run_search) if method == "one-run" else (fdp_one_run_audit, fdp_one_run_search)
    if k_plus is None or k_minus is None:
        return search(scores, members, confidence=confidence, delta=delta, seed=seed)
    if len(k_plus) == 1 and len(k_minus) == 1:
        return fixed(scores, members, k_plus=k_plus[0], k_minus=k_minus[0], confidence=confidence, delta=delta,
                     seed=seed)
    pairs = list(itertools.product(k_plus, k_minus))
    return search(scores, members, candidates=pairs, confidence=confidence, delta=delta, seed=seed)


def score_method_audit(method: str, scores: np.ndarray, members: np.ndarray, *, confidence: float, delta: float,
                       strategy: str | None = None, seed: int = 0, k_plus: Sequence[int] | None = None,
                       k_minus: Sequence[int] | None = None) -> Any:
    """Run the score method ``method`` (one of :data:`SCORE_METHODS`) on validated scores.

    ``strategy`` (default :data:`bngp.audit.DEFAULT_STRATEGY`) is the threshold rule of ``clopper-pearson`` and
    ``gdp``; ``k_plus`` and ``k_minus`` (both or neither) fix the one-run guess counts: one value each runs that
    configuration, several run the search over their product, none the default search.
    """
    if method in ("one-run", "fdp-one-run"):
        return _one_run(method, scores, members, confidence, delta, seed, k_plus, k_minus)
    audit = gdp_audit if method == "gdp" else many_run_audit
    return audit(scores, members, confidence=confidence, delta=delta, strategy=strategy or DEFAULT_STRATEGY, seed=seed)


def epsilon_kind(method: str, result: Any) -> str:
    """What ``result.epsilon_lb`` is, in the labels of :data:`bngp.audit.BOUND_KINDS`."""
    bound, assumed, estimate = BOUND_KINDS
    if hasattr(result, "epsilon_kind"):  # many-run, gdp, fdp-one-run and per-target records carry it
        return result.epsilon_kind
    if method == "panoramia":
        return bound if result.is_lower_bound else estimate
    if method == "bits":
        return bound if result.family == "eps-delta" else assumed
    return bound  # one-run (Steinke, Nasr, Jagielski): no assumption


def _many_run_counts(result: dict[str, Any] | Any) -> str:
    record = result if isinstance(result, dict) else result.to_dict()
    return (f"{record['decision_rule']}: FP {record['false_positives']}/{record['n_nonmembers']}, "
            f"FN {record['false_negatives']}/{record['n_members']}; strategy {record['strategy']}")


def detail_line(method: str, result: Any) -> str:
    """One line on how the method's bound was obtained (the report's table)."""
    if hasattr(result, "per_target_method"):
        mu = "" if result.mu_lb is None else f"mu_lb = {result.mu_lb:.4f} (lower bound); "
        return (f"{mu}per target over {result.n_releases} releases: best target {result.best_target} of "
                f"{result.targets_audited}, {_many_run_counts(result.best)}; {result.union_bound}")
    if method in ("clopper-pearson", "gdp"):
        counts = _many_run_counts(result)
        return counts if method == "clopper-pearson" else f"mu_lb = {result.mu_lb:.4f} (lower bound); {counts}"
    if method in ("one-run", "fdp-one-run"):
        guesses = (f"k+ = {result.k_plus}, k- = {result.k_minus}: {result.n_correct} of {result.n_guesses} "
                   f"guesses correct ({result.n_canaries} canaries)")
        return guesses if method == "one-run" else f"mu_lb = {result.mu_lb:.4f} (lower bound); {guesses}"
    if method == "panoramia":
        return f"c_lb = {result.c_lb:.4f}, (c+eps)_lb = {result.c_plus_epsilon_lb:.4f}"
    return (f"{result.n_errors} of {result.n_bits} bits wrong, error rate <= {result.error_rate_upper:.4f}; "
            f"family {result.family}")


def design_of(method: str, result: Any) -> tuple[str, str]:
    """(the design in words, how to enlarge it) for the sentences on the ceiling."""
    if hasattr(result, "per_target_method"):
        return (f"{result.n_releases} releases of {result.targets_audited} targets, one score per release and "
                "target"), ADVICE["per-target"]
    if method in ("clopper-pearson", "gdp"):
        return f"{result.n_nonmembers} non-member and {result.n_members} member runs", ADVICE[method]
    if method in ("one-run", "fdp-one-run"):
        return f"{result.n_canaries} canaries", ADVICE[method]
    if method == "panoramia":
        return f"an audit set of {result.n_audit}", ADVICE[method]
    return f"{result.n_bits} bits", ADVICE[method]


def claimed_fields(claim: Claim | None, delta: float) -> dict[str, Any]:
    """The keyword arguments of :func:`bngp.audit.read_bound` for ``claim`` at the bound's ``delta``:
    the claim's eps there (:meth:`Claim.epsilon_at`), or why it has none."""
    if claim is None:
        return {}
    epsilon = claim.epsilon_at(delta)
    if epsilon is not None:
        return {"claimed_epsilon": epsilon}
    if claim.family == "gaussian":
        return {"not_comparable": f"{claim.spec} states no finite eps at delta = 0 (audit at a delta > 0)"}
    return {"not_comparable": f"{claim.spec} is stated at delta {claim.delta:g}, the bound at delta {delta:g} below it"}


def read_result(method: str, result: Any, ceiling: float, claim: Claim | None = None) -> BoundReading:
    """``result.epsilon_lb`` read against the design's ``ceiling`` and ``claim`` (:func:`bngp.audit.read_bound`)."""
    design, advice = design_of(method, result)
    return read_bound(result.epsilon_lb, epsilon_kind(method, result), ceiling, design, advice,
                      **claimed_fields(claim, result.delta))
