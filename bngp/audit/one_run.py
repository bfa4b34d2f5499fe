"""One-run audit (Steinke, Nasr, Jagielski 2023, "Privacy auditing with one (1) training run").

m canaries, each included independently with probability 1/2, one run of the mechanism and
one score per canary (higher = member).  The auditor guesses "in" for the k+ highest scores,
"out" for the k- lowest and abstains on the rest: r = k+ + k- guesses, v of them correct.
Under (eps, delta)-DP (their Theorem 3.1 with the delta term of Prop. 5.7), with
q = e^eps / (1 + e^eps),

    p(eps) = P[Bin(r, q) >= v] + 2 m delta max_{i=1..v} (1/i) P[v - i <= Bin(r, q) < v]

and eps_lb = sup{eps >= 0 : p(eps) < beta} (:mod:`bngp.audit.binomial`).  The delta term is
kept whenever delta > 0.  Ties between scores are broken by a seeded random permutation
(independent of the labels, so the guesses stay a function of the output).  Choosing (k+, k-)
after looking at the guesses' correctness needs a union bound: :func:`one_run_search` tests
every candidate pair at level beta / (number of candidates).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from bngp.audit.binomial import _bound
from bngp.audit.inputs import SeedLike, check_confidence, check_delta, check_scores_and_labels, resolve_rng
from bngp.audit.results import AuditResult
from bngp.errors import InputError
from bngp.validation import check_positive_int

__all__ = ["OneRunResult", "default_one_run_candidates", "one_run_audit", "one_run_search"]

#: guess fractions r / m of the default search grid.
_DEFAULT_FRACTIONS = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0)


@dataclass(frozen=True)
class OneRunResult(AuditResult):
    """One-run lower bound on eps at ``delta``.

    Attributes:
        epsilon_lb: sup{eps >= 0 : p(eps) < beta / candidates} for the best candidate.
        k_plus: number of "in" guesses (top scores) of the best candidate.
        k_minus: number of "out" guesses (bottom scores) of the best candidate.
        n_guesses: r = k_plus + k_minus.
        n_correct: v, the correct guesses.
        n_canaries: m, the number of canaries (multiplies delta in the p-value).
        seed: seed of the tie-breaking permutation (``None`` for a passed Generator).
    """

    epsilon_lb: float
    k_plus: int
    k_minus: int
    n_guesses: int
    n_correct: int
    n_canaries: int
    seed: int | None


def default_one_run_candidates(m: int) -> list[tuple[int, int]]:
    """The default (k+, k-) grid for ``m`` canaries.

    For r = round(f m), f in (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1): the balanced pair
    (r - r // 2, r // 2) and, for f <= 0.5, the "in"-only pair (r, 0); duplicates and empty
    pairs are dropped.
    """
    m = check_positive_int("m", m, minimum=1)
    pairs: list[tuple[int, int]] = []
    for fraction in _DEFAULT_FRACTIONS:
        r = max(1, int(round(fraction * m)))
        options = [(r - r // 2, r // 2)] + ([(r, 0)] if fraction <= 0.5 else [])
        for pair in options:
            if pair not in pairs:
                pairs.append(pair)
    return pairs


def _correct_counts(scores: np.ndarray, members: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Cumulative correct guesses: members among the top k, non-members among the bottom k."""
    permutation = rng.permutation(scores.shape[0])
    order = permutation[np.argsort(-scores[permutation], kind="stable")]
    ranked = members[order]
    top = np.concatenate(([0], np.cumsum(ranked, dtype=np.int64)))
    bottom = np.concatenate(([0], np.cumsum(~ranked[::-1], dtype=np.int64)))
    return top, bottom


def _check_pairs(pairs: Sequence[tuple[int, int]], m: int) -> list[tuple[int, int]]:
    checked = []
    for pair in pairs:
        if len(pair) != 2:
            raise InputError(f"each candidate must be a pair (k_plus, k_minus), got {pair!r}.")
        k_plus = check_positive_int("k_plus", pair[0], minimum=0, maximum=m)
        k_minus = check_positive_int("k_minus", pair[1], minimum=0, maximum=m)
        if k_plus + k_minus == 0 or k_plus + k_minus > m:
            raise InputError(
                f"`k_plus + k_minus` must be in [1, {m}] (the number of canaries), got {k_plus + k_minus}."
            )
        checked.append((k_plus, k_minus))
    if not checked:
        raise InputError("`candidates` must contain at least one (k_plus, k_minus) pair.")
    return checked


def _audit(
    scores: np.ndarray,
    members: np.ndarray,
    pairs: Sequence[tuple[int, int]] | None,
    confidence: float,
    delta: float,
    seed: SeedLike,
) -> OneRunResult:
    values, labels = check_scores_and_labels(scores, members)
    m = values.shape[0]
    beta = 1.0 - check_confidence(confidence)
    delta = check_delta(delta)
    checked = _check_pairs(default_one_run_candidates(m) if pairs is None else pairs, m)
    rng, recorded = resolve_rng(seed)
    top, bottom = _correct_counts(values, labels, rng)
    level = beta / len(checked)
    best: tuple[float, int, int, int] | None = None
    for k_plus, k_minus in checked:
        v = int(top[k_plus] + bottom[k_minus])
        bound = _bound(m, k_plus + k_minus, v, level, delta)
        if best is None or bound > best[0]:
            best = (bound, k_plus, k_minus, v)
    bound, k_plus, k_minus, v = best
    count = len(checked)
    return OneRunResult(
        method="one-run (steinke-nasr-jagielski 2023)",
        confidence=1.0 - beta,
        delta=delta,
        thresholds_examined=count,
        union_bound="none" if count == 1 else f"bonferroni over {count} (k+, k-) candidates",
        epsilon_lb=bound,
        k_plus=k_plus,
        k_minus=k_minus,
        n_guesses=k_plus + k_minus,
        n_correct=v,
        n_canaries=m,
        seed=recorded,
    )


def one_run_audit(
    scores: np.ndarray,
    members: np.ndarray,
    *,
    k_plus: int,
    k_minus: int,
    confidence: float = 0.95,
    delta: float = 0.0,
    seed: SeedLike = 0,
) -> OneRunResult:
    """One-run eps lower bound for a (k+, k-) fixed before looking at the labels.

    Args:
        scores: one score per canary from a single run, higher = member.
        members: 1 if the canary was included (each with probability 1/2), else 0.
        k_plus: guess "in" for the k_plus highest scores.
        k_minus: guess "out" for the k_minus lowest scores.
        confidence: 1 - beta.
        delta: the delta of (eps, delta)-DP; the 2 m delta term is included when > 0.
        seed: seed of the tie-breaking permutation.

    Example:
        >>> rng = np.random.default_rng(0)
        >>> members = rng.integers(0, 2, 1000)
        >>> res = one_run_audit(members + 0.1 * rng.normal(size=1000), members, k_plus=100, k_minus=100)
        >>> res.n_correct, round(res.epsilon_lb, 2)
        (200, 4.19)
    """
    return _audit(scores, members, [(k_plus, k_minus)], confidence, delta, seed)


def one_run_search(
    scores: np.ndarray,
    members: np.ndarray,
    *,
    candidates: Sequence[tuple[int, int]] | None = None,
    confidence: float = 0.95,
    delta: float = 0.0,
    seed: SeedLike = 0,
) -> OneRunResult:
    """One-run eps lower bound maximised over (k+, k-) candidates with a Bonferroni union bound.

    Each candidate is tested at level beta / len(candidates), so the maximum is valid at
    ``confidence``.  ``candidates=None`` uses :func:`default_one_run_candidates`.
    """
    pairs = None if candidates is None else list(candidates)
    return _audit(scores, members, pairs, confidence, delta, seed)
