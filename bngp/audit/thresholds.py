"""Threshold rules of the many-run audit: which tests "score >= t" are looked at, and the union bound.

Setting of :mod:`bngp.audit.many_run` (Kairouz, Oh, Viswanath 2015; Jagielski, Ullman, Oprea
2020): N0 runs without the target (label 0) and N1 with it (label 1), one score per run.  A rule
picks thresholds t and, for the objective of the audit (eps at delta, :func:`epsilon_objective`,
or GDP mu, :func:`gdp_objective`, of the Clopper-Pearson upper limits alpha_u, beta_u of the
error rates), returns the best test with what it cost (:class:`ThresholdChoice`).

Threshold strategies (the error beta = 1 - confidence is spent once in all):

* ``"auto"`` (default): a seeded random probe of :data:`SUPPORT_PROBE` scores per side is set
  aside to see the scores' support.  If the probe shows at most :data:`MAX_SUPPORT` distinct
  values (discrete scores, e.g. randomized response or a guess in {0, 1}), the thresholds
  "score >= v" at those values but the smallest are evaluated on the other scores as
  ``"explicit"`` thresholds; otherwise the ``"grid"`` tests run on the other scores.  With
  fewer than 4 :data:`SUPPORT_PROBE` scores on a side there is no probe and ``"grid"`` runs on
  every score.  Validity: the probe is chosen by randomness independent of the scores and
  the runs are independent, so given the probe the remaining scores are still independent
  draws from the member and non-member distributions, and the rule applied to them (a fixed
  threshold set, or the grid) is a function of the probe alone: each branch is valid at
  level beta conditionally on the probe, hence unconditionally.  Two-valued scores then pay
  for the one threshold that exists, where the grid's randomly broken ties waste part of a
  tie block; continuous scores lose only the 2 :data:`SUPPORT_PROBE` probe scores.
* ``"grid"``: m = O(log N0 + log N1) order-statistic tests fixed in advance, each
  a joint Beta-binomial test of the claim at level beta / m; no Clopper-Pearson limits.  See
  :mod:`bngp.audit.order_grid` for the rule and its proof (ties are broken at random, seeded
  by ``seed``, when they fall on a tested threshold).
* ``"bonferroni"``: every distinct score is a threshold.  The thresholds depend on the data,
  so the union bound is taken over the values the counts can take: FP = k happens only for
  thresholds t above the (k+1)-th largest non-member score X, where the true rate
  P[score >= t] <= P[score > X], and P[score > X] is stochastically at most Beta(k + 1,
  N0 - k) (probability integral transform; ties only make it smaller).  Hence e0 = beta / (2 N0) and e1 = beta / (2 N1) make the limits hold
  simultaneously at every threshold, whichever is picked.  Without ties this is less
  conservative than a Bonferroni correction over the T = N0 + N1 + 1 distinct thresholds
  (e = beta / (2 T)), and unlike that correction it stays valid when ties leave T < N0.
* ``"explicit"``: L thresholds fixed before seeing the scores; e0 = e1 = beta / (2 L).
* ``"split"``: the threshold is chosen on a random selection split (by the Bonferroni rule
  above) and evaluated on the disjoint remainder with e0 = e1 = beta / 2, no union bound.

The last three use the Clopper-Pearson limits alpha_u, beta_u of :mod:`bngp.audit.many_run`.
For ``"bonferroni"`` the maximum
over thresholds is exact yet fast: only thresholds ending a run of members can
be best (moving past a member lowers FN at equal FP, and both bounds decrease in alpha_u and
beta_u); Beta quantiles are first computed on a sparse grid of count levels, giving for every
candidate an optimistic and a pessimistic value, and the exact quantiles are computed only
for candidates whose optimistic value beats the best pessimistic one.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace

import numpy as np
from scipy import special

from bngp.audit.binomial import clopper_pearson_upper
from bngp.audit.inputs import SeedLike, check_confidence, check_scores_and_labels, tagged_rng
from bngp.audit.order_grid import TradeoffFamily, order_grid
from bngp.audit.roc import threshold_counts
from bngp.errors import DataFormatError, InputError
from bngp.validation import check_finite_array, check_in_open_interval

__all__ = [
    "DEFAULT_STRATEGY",
    "MAX_SUPPORT",
    "SUPPORT_PROBE",
    "STRATEGIES",
    "Objective",
    "ThresholdChoice",
    "choose_threshold",
    "epsilon_objective",
    "gdp_objective",
]

#: threshold strategies accepted by :func:`bngp.audit.many_run_audit` and :func:`bngp.audit.gdp_audit`.
STRATEGIES = ("auto", "grid", "bonferroni", "explicit", "split")
#: mixed into an int seed for the random selection split ("split" in ASCII).
_SPLIT_TAG = 0x73706C6974
#: mixed into an int seed for the probe of ``"auto"`` ("probe" in ASCII).
_PROBE_TAG = 0x70726F6265
#: the strategy used when none is given.
DEFAULT_STRATEGY = "auto"
#: scores per side that ``"auto"`` sets aside to see the support (no probe below 4x as many).
SUPPORT_PROBE = 16
#: ``"auto"`` treats the scores as discrete when its probe shows at most this many values.
MAX_SUPPORT = 8

#: count levels below this get their own exact quantile in the bracketing grid.
_DENSE_LEVELS = 256
#: above the dense part the grid step is about sqrt(level) / _GRID_DIVISOR.
_GRID_DIVISOR = 8.0

#: an audit objective of the upper limits (alpha_u, beta_u): eps at delta or GDP mu, -inf where undefined.
Objective = Callable[[np.ndarray, np.ndarray], np.ndarray]


def epsilon_objective(delta: float) -> Objective:
    """eps(alpha_u, beta_u) = max(ln((1-delta-alpha_u)/beta_u), ln((1-delta-beta_u)/alpha_u)), -inf if undefined."""

    def objective(alpha_u: np.ndarray, beta_u: np.ndarray) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore"):
            first = np.log(1.0 - delta - alpha_u) - np.log(beta_u)
            second = np.log(1.0 - delta - beta_u) - np.log(alpha_u)
        first = np.where(np.isnan(first), -np.inf, first)
        second = np.where(np.isnan(second), -np.inf, second)
        return np.maximum(first, second)

    return objective


def gdp_objective(alpha_u: np.ndarray, beta_u: np.ndarray) -> np.ndarray:
    """mu(alpha_u, beta_u) = Phi^-1(1 - alpha_u) - Phi^-1(beta_u) = -(Phi^-1(alpha_u) + Phi^-1(beta_u))."""
    value = -(special.ndtri(alpha_u) + special.ndtri(beta_u))
    return np.where(np.isnan(value), -np.inf, value)


class _LevelQuantiles:
    """Clopper-Pearson upper limits of k / n for k in 0..n, bracketed on a sparse grid."""

    def __init__(self, n: int, error: float) -> None:
        self.n = n
        self.error = error
        levels = list(range(min(n, _DENSE_LEVELS) + 1))
        level = levels[-1]
        while level < n:
            level = min(n, level + max(1, int(math.sqrt(level) / _GRID_DIVISOR)))
            levels.append(level)
        self.grid = np.asarray(levels, dtype=np.int64)
        self.values = clopper_pearson_upper(self.grid, n, error)

    def bracket(self, k: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(lower, upper) bounds on the limit at each level in ``k`` (monotone in k)."""
        low = np.searchsorted(self.grid, k, side="right") - 1
        high = np.searchsorted(self.grid, k, side="left")
        return self.values[low], self.values[high]

    def exact(self, k: np.ndarray) -> np.ndarray:
        """Exact limits at the levels in ``k`` (computed once per distinct level)."""
        unique, inverse = np.unique(k, return_inverse=True)
        return clopper_pearson_upper(unique, self.n, self.error)[inverse]


def _best_index(
    fp: np.ndarray,
    fn: np.ndarray,
    fpr_limits: _LevelQuantiles,
    fnr_limits: _LevelQuantiles,
    objective: Objective,
) -> tuple[int, float, float, float]:
    """argmax of objective(alpha_u(fp), beta_u(fn)) over the given count pairs.

    Returns ``(index, value, alpha_u, beta_u)`` at the maximiser (exact quantiles).
    """
    alpha_low, alpha_high = fpr_limits.bracket(fp)
    beta_low, beta_high = fnr_limits.bracket(fn)
    optimistic = objective(alpha_low, beta_low)
    pessimistic = objective(alpha_high, beta_high)
    anchor = int(np.argmax(pessimistic))
    floor = max(float(pessimistic[anchor]), 0.0)
    survivors = np.flatnonzero(optimistic > floor)
    survivors = np.union1d(survivors, [anchor])
    alpha_u = fpr_limits.exact(fp[survivors])
    beta_u = fnr_limits.exact(fn[survivors])
    values = objective(alpha_u, beta_u)
    best = int(np.argmax(values))
    return int(survivors[best]), float(values[best]), float(alpha_u[best]), float(beta_u[best])


@dataclass(frozen=True)
class ThresholdChoice:
    """The maximising threshold of one audit and the quantities behind it."""

    value: float
    threshold: float
    decision_rule: str
    false_positives: int
    false_negatives: int
    n_nonmembers: int
    n_members: int
    alpha_upper: float | None
    beta_upper: float | None
    error_fpr: float
    error_fnr: float
    thresholds_examined: int
    union_bound: str
    seed: int | None

    def result_fields(self) -> dict:
        """The fields every many-run result records about the chosen threshold."""
        fields = asdict(self)
        del fields["value"]
        return fields


def _at_least(threshold: float) -> str:
    """The decision rule of a Clopper-Pearson threshold, in words."""
    return f"member iff score >= {threshold:.6g}"


def _grid(scores: np.ndarray, members: np.ndarray, beta: float, family: TradeoffFamily, seed: SeedLike) -> ThresholdChoice:
    """Grid strategy: the joint order-statistic tests of :mod:`bngp.audit.order_grid`."""
    chosen = order_grid(scores, members, beta, family, seed)
    n1 = int(members.sum())
    return ThresholdChoice(
        value=chosen.value,
        threshold=chosen.threshold,
        decision_rule=chosen.decision_rule,
        false_positives=chosen.false_positives,
        false_negatives=chosen.false_negatives,
        n_nonmembers=members.shape[0] - n1,
        n_members=n1,
        alpha_upper=None,
        beta_upper=None,
        error_fpr=chosen.test_level,
        error_fnr=chosen.test_level,
        thresholds_examined=chosen.n_tests,
        union_bound=(
            f"bonferroni over {chosen.n_tests} order-statistic tests fixed in advance "
            "(ranks 1, 2, 4, ... up to half of each sample), joint beta-binomial test at level "
            f"{chosen.test_level:.3g} each"
        ),
        seed=chosen.seed,
    )


def _sweep(scores: np.ndarray, members: np.ndarray, beta: float, objective: Objective) -> ThresholdChoice:
    """Bonferroni strategy: best of every distinct threshold, union over FP and FN levels."""
    thresholds, tp, fp = threshold_counts(scores, members)
    n1 = int(members.sum())
    n0 = members.shape[0] - n1
    fn = n1 - tp
    # Only the last threshold of a run of members can be best (same FP, smaller FN).
    candidates = np.flatnonzero(np.append(fp[1:] > fp[:-1], True))
    fpr_limits = _LevelQuantiles(n0, beta / (2.0 * n0))
    fnr_limits = _LevelQuantiles(n1, beta / (2.0 * n1))
    index, value, alpha_u, beta_u = _best_index(fp[candidates], fn[candidates], fpr_limits, fnr_limits, objective)
    chosen = candidates[index]
    return ThresholdChoice(
        value=value,
        threshold=float(thresholds[chosen]),
        decision_rule=_at_least(float(thresholds[chosen])),
        false_positives=int(fp[chosen]),
        false_negatives=int(fn[chosen]),
        n_nonmembers=n0,
        n_members=n1,
        alpha_upper=alpha_u,
        beta_upper=beta_u,
        error_fpr=beta / (2.0 * n0),
        error_fnr=beta / (2.0 * n1),
        thresholds_examined=int(thresholds.shape[0]),
        union_bound=f"bonferroni over {n0} FP levels and {n1} FN levels (covers every threshold)",
        seed=None,
    )


def _fixed_thresholds(
    scores: np.ndarray, members: np.ndarray, thresholds: np.ndarray, error: float, objective: Objective
) -> tuple[int, float, float, float, np.ndarray, np.ndarray]:
    """Evaluate thresholds fixed in advance; returns the argmax and the counts."""
    member_scores = np.sort(scores[members])
    nonmember_scores = np.sort(scores[~members])
    n1, n0 = member_scores.shape[0], nonmember_scores.shape[0]
    fp = n0 - np.searchsorted(nonmember_scores, thresholds, side="left")
    fn = np.searchsorted(member_scores, thresholds, side="left")
    alpha_u = clopper_pearson_upper(fp, n0, error)
    beta_u = clopper_pearson_upper(fn, n1, error)
    values = objective(alpha_u, beta_u)
    best = int(np.argmax(values))
    return best, float(values[best]), float(alpha_u[best]), float(beta_u[best]), fp, fn


def _explicit(
    scores: np.ndarray, members: np.ndarray, thresholds: np.ndarray, beta: float, objective: Objective
) -> ThresholdChoice:
    count = thresholds.shape[0]
    error = beta / (2.0 * count)
    best, value, alpha_u, beta_u, fp, fn = _fixed_thresholds(scores, members, thresholds, error, objective)
    n1 = int(members.sum())
    return ThresholdChoice(
        value=value,
        threshold=float(thresholds[best]),
        decision_rule=_at_least(float(thresholds[best])),
        false_positives=int(fp[best]),
        false_negatives=int(fn[best]),
        n_nonmembers=members.shape[0] - n1,
        n_members=n1,
        alpha_upper=alpha_u,
        beta_upper=beta_u,
        error_fpr=error,
        error_fnr=error,
        thresholds_examined=count,
        union_bound=f"bonferroni over {count} thresholds fixed in advance",
        seed=None,
    )


def _split(
    scores: np.ndarray, members: np.ndarray, beta: float, objective: Objective, fraction: float, seed: SeedLike
) -> ThresholdChoice:
    rng, recorded = tagged_rng(seed, _SPLIT_TAG)
    order = rng.permutation(scores.shape[0])
    n_select = int(round(fraction * scores.shape[0]))
    select, evaluate = order[:n_select], order[n_select:]
    for name, part in (("selection", select), ("evaluation", evaluate)):
        n_part_members = int(members[part].sum())
        if n_part_members == 0 or n_part_members == part.shape[0]:
            raise DataFormatError(
                f"the {name} split ({part.shape[0]} rows) lacks members or non-members; "
                "use more scores or another `split_fraction`."
            )
    chosen = _sweep(scores[select], members[select], beta, objective)
    threshold = np.array([chosen.threshold])
    _, value, alpha_u, beta_u, fp, fn = _fixed_thresholds(
        scores[evaluate], members[evaluate], threshold, beta / 2.0, objective
    )
    n1 = int(members[evaluate].sum())
    return ThresholdChoice(
        value=value,
        threshold=chosen.threshold,
        decision_rule=_at_least(chosen.threshold),
        false_positives=int(fp[0]),
        false_negatives=int(fn[0]),
        n_nonmembers=evaluate.shape[0] - n1,
        n_members=n1,
        alpha_upper=alpha_u,
        beta_upper=beta_u,
        error_fpr=beta / 2.0,
        error_fnr=beta / 2.0,
        thresholds_examined=chosen.thresholds_examined,
        union_bound=(
            f"none: threshold chosen on a disjoint selection split of {n_select} rows, "
            f"evaluated on {evaluate.shape[0]} rows"
        ),
        seed=recorded,
    )


def _auto(
    scores: np.ndarray, members: np.ndarray, beta: float, objective: Objective, family: TradeoffFamily, seed: SeedLike
) -> ThresholdChoice:
    """``"auto"``: the support seen on a random probe picks explicit thresholds or the grid (module docstring)."""
    member_rows, nonmember_rows = np.flatnonzero(members), np.flatnonzero(~members)
    if min(member_rows.size, nonmember_rows.size) < 4 * SUPPORT_PROBE:
        chosen = _grid(scores, members, beta, family, seed)
        return replace(chosen, union_bound=(
            chosen.union_bound + f"; no support probe (fewer than {4 * SUPPORT_PROBE} scores on a side)"
        ))
    rng, recorded = tagged_rng(seed, _PROBE_TAG)
    probe = np.concatenate([
        rng.choice(nonmember_rows, SUPPORT_PROBE, replace=False), rng.choice(member_rows, SUPPORT_PROBE, replace=False)
    ])
    rest = np.ones(scores.shape[0], dtype=bool)
    rest[probe] = False
    support = np.unique(scores[probe])
    seen = f"support probe of {SUPPORT_PROBE} scores per side (seed {recorded}) saw {support.size} distinct value(s)"
    if 2 <= support.size <= MAX_SUPPORT:
        chosen = _explicit(scores[rest], members[rest], support[1:], beta, objective)
        return replace(chosen, seed=recorded, union_bound=(
            f"{seen}: bonferroni over the {support.size - 1} threshold(s) between them, fixed before the other "
            f"{int(rest.sum())} scores were seen"
        ))
    chosen = _grid(scores[rest], members[rest], beta, family, seed)
    return replace(chosen, seed=recorded, union_bound=(
        f"{seen}: order-statistic grid on the other {int(rest.sum())} scores; " + chosen.union_bound
    ))


def choose_threshold(
    scores: np.ndarray,
    members: np.ndarray,
    confidence: float,
    strategy: str,
    thresholds: Sequence[float] | np.ndarray | None,
    split_fraction: float,
    seed: SeedLike,
    objective: Objective,
    family: TradeoffFamily,
) -> ThresholdChoice:
    """The best test of ``strategy`` (module docstring) for ``objective`` on validated scores, at total error
    beta = 1 - ``confidence``; ``family`` is the claim family the grid tests (:mod:`bngp.audit.order_grid`),
    ``thresholds`` the fixed ones of ``"explicit"``, ``split_fraction`` the selection share of ``"split"``."""
    values, labels = check_scores_and_labels(scores, members)
    beta = 1.0 - check_confidence(confidence)
    if strategy not in STRATEGIES:
        raise InputError(f"`strategy` must be one of {', '.join(STRATEGIES)}, got {strategy!r}.")
    if (thresholds is not None) != (strategy == "explicit"):
        raise InputError("`thresholds` must be given exactly when `strategy` is 'explicit'.")
    if strategy == "explicit":
        fixed = check_finite_array("thresholds", np.asarray(thresholds, dtype=np.float64), ndim=1)
        return _explicit(values, labels, fixed, beta, objective)
    if strategy == "split":
        fraction = check_in_open_interval("split_fraction", split_fraction, 0.0, 1.0)
        return _split(values, labels, beta, objective, fraction, seed)
    if strategy == "bonferroni":
        return _sweep(values, labels, beta, objective)
    if strategy == "auto":
        return _auto(values, labels, beta, objective, family, seed)
    return _grid(values, labels, beta, family, seed)
