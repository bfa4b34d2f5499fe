"""Many-run audit: eps and GDP-mu lower bounds from member / non-member scores.

Setting (Kairouz, Oh, Viswanath 2015; Jagielski, Ullman, Oprea 2020): N0 independent runs
without the target (non-members, label 0) and N1 with it (members, label 1), one score per
run, higher = member.  A threshold t predicts "member" for score >= t; FP non-members and
FN members are misclassified.  With one-sided Clopper-Pearson upper limits

    alpha_u = BetaPPF(1 - e0; FP + 1, N0 - FP),   beta_u = BetaPPF(1 - e1; FN + 1, N1 - FN)

(= 1 when FP = N0 / FN = N1), (eps, delta)-DP forces alpha + e^eps beta >= 1 - delta and
beta + e^eps alpha >= 1 - delta, hence

    eps_lb(t) = max(ln((1 - delta - alpha_u)/beta_u), ln((1 - delta - beta_u)/alpha_u), 0),

and mu-GDP forces beta >= Phi(Phi^-1(1 - alpha) - mu), hence
mu_lb(t) = max(Phi^-1(1 - alpha_u) - Phi^-1(beta_u), 0) (Dong, Roth, Su 2019, Def. 2.6).

The threshold strategies (``"auto"``, ``"grid"``, ``"bonferroni"``, ``"explicit"``,
``"split"``) and their union bounds are those of :mod:`bngp.audit.thresholds`.

What the numbers are (``epsilon_kind`` / ``mu_kind`` of the records): every ``epsilon_lb`` of
:func:`many_run_audit` and every ``mu_lb`` is a lower bound that holds with probability at
least ``confidence`` under no assumption on the scores; the ``epsilon_lb`` of
:func:`gdp_audit` is one only if the mechanism's trade-off curve is Gaussian (then it is
tight-mu-GDP with mu >= mu_lb and eps(delta) is increasing in mu); otherwise it is an
estimate, and is labelled so.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from bngp.audit.inputs import SeedLike, check_delta
from bngp.audit.order_grid import epsilon_family, gdp_family
from bngp.audit.results import AuditResult
from bngp.audit.thresholds import DEFAULT_STRATEGY, choose_threshold, epsilon_objective, gdp_objective
from bngp.audit.tradeoff import gdp_epsilon
from bngp.errors import InputError

__all__ = ["BOUND_KINDS", "GdpResult", "ManyRunResult", "gdp_audit", "many_run_audit"]

#: what a reported number is: valid with no assumption, valid only under a stated
#: assumption (an estimate otherwise), or a point estimate.
BOUND_KINDS = ("lower bound", "lower bound under assumption", "estimate")


@dataclass(frozen=True)
class ManyRunResult(AuditResult):
    """Many-run Clopper-Pearson lower bound on eps.

    Attributes:
        epsilon_lb: the lower bound on eps, clipped at 0.
        epsilon_kind: what ``epsilon_lb`` is, one of :data:`BOUND_KINDS`.
        strategy: ``"auto"``, ``"grid"``, ``"bonferroni"``, ``"explicit"`` or ``"split"``.
        threshold: the threshold of the test behind the bound (``inf`` means "predict
            nobody"); ``decision_rule`` says how it is applied.
        decision_rule: the test in words, e.g. ``"member iff score >= 0.5"``.
        false_positives: FP of that test (on the evaluation split for ``"split"``).
        false_negatives: FN of that test.
        n_nonmembers: N0 used for the bound.
        n_members: N1 used for the bound.
        alpha_upper: Clopper-Pearson upper limit on the false-positive rate (``None`` where
            the grid ran, whose joint test has no separate limits).
        beta_upper: Clopper-Pearson upper limit on the false-negative rate (``None`` for ``"grid"``).
        error_fpr: one-sided error e0 of each false-positive-rate limit (for ``"grid"``: the
            level beta / m of each joint test).
        error_fnr: one-sided error e1 of each false-negative-rate limit (``"grid"``: as above).
        seed: the seed of the random split, of the probe (``"auto"``), or for ``"grid"`` of
            the random tie-breaking (``None`` when unused or for a passed Generator).
    """

    epsilon_lb: float
    epsilon_kind: str
    strategy: str
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
    seed: int | None


@dataclass(frozen=True)
class GdpResult(ManyRunResult):
    """Many-run lower bound on the GDP parameter mu, and the eps it implies at ``delta``.

    Attributes:
        mu_lb: the lower bound on mu ("grid": the largest mu rejected by a grid test; other
            strategies: max over thresholds of Phi^-1(1 - alpha_u) - Phi^-1(beta_u)), clipped at 0.
        mu_kind: what ``mu_lb`` is (``"lower bound"``: the mechanism is not mu-GDP for any
            mu < mu_lb, with probability >= confidence, no assumption).
        epsilon_assumption: the assumption behind ``epsilon_lb`` (the mechanism is mu-GDP;
            without it only ``mu_lb`` and the many-run eps bound are assumption-free).
    """

    mu_lb: float
    mu_kind: str
    epsilon_assumption: str


def many_run_audit(
    scores: np.ndarray,
    members: np.ndarray,
    *,
    confidence: float = 0.95,
    delta: float = 0.0,
    strategy: str = DEFAULT_STRATEGY,
    thresholds: Sequence[float] | np.ndarray | None = None,
    split_fraction: float = 0.5,
    seed: SeedLike = 0,
) -> ManyRunResult:
    """Clopper-Pearson lower bound on eps at ``delta`` from member / non-member scores.

    See the module docstring for the bound and the threshold strategies.

    Args:
        scores: one score per run, higher = member.
        members: 1 if the run included the target, else 0.
        confidence: 1 - beta, the probability that the bound holds.
        delta: the delta of (eps, delta)-DP the bound is stated at.
        strategy: ``"auto"`` (a support probe picks thresholds at the values of discrete
            scores or, for continuous ones, ``"grid"``), ``"grid"`` (joint order-statistic
            tests, :mod:`bngp.audit.order_grid`),
            ``"bonferroni"`` (all distinct thresholds), ``"explicit"`` (``thresholds`` fixed
            in advance) or ``"split"`` (choose on a random split, evaluate on the rest).
        thresholds: the fixed thresholds for ``"explicit"``.
        split_fraction: share of rows used to choose the threshold for ``"split"``.
        seed: seed of the random split (``"split"``), of the probe (``"auto"``) or of the
            tie-breaking (``"grid"``).

    Example:
        >>> rng = np.random.default_rng(0)
        >>> members = np.repeat([0, 1], 1000)
        >>> res = many_run_audit(rng.normal(size=2000) + 4.0 * members, members)
        >>> 2.0 < res.epsilon_lb < 6.0
        True
    """
    delta = check_delta(delta)
    choice = choose_threshold(
        scores, members, confidence, strategy, thresholds, split_fraction, seed,
        epsilon_objective(delta), epsilon_family(delta),
    )
    return ManyRunResult(
        method="many-run order-statistic grid" if choice.alpha_upper is None else "many-run clopper-pearson",
        confidence=float(confidence),
        delta=delta,
        epsilon_lb=max(choice.value, 0.0),
        epsilon_kind="lower bound",
        strategy=strategy,
        **choice.result_fields(),
    )


def gdp_audit(
    scores: np.ndarray,
    members: np.ndarray,
    *,
    confidence: float = 0.95,
    delta: float = 1e-5,
    strategy: str = DEFAULT_STRATEGY,
    thresholds: Sequence[float] | np.ndarray | None = None,
    split_fraction: float = 0.5,
    seed: SeedLike = 0,
) -> GdpResult:
    """Lower bound on the GDP parameter mu, and eps at ``delta`` assuming mu-GDP.

    Where the grid runs (``"grid"``, and ``"auto"`` on continuous scores) mu_lb is the largest mu that a grid test of
    :mod:`bngp.audit.order_grid` rejects with f_mu(v) = Phi(Phi^-1(v) + mu); with the other
    strategies mu_lb = max_t Phi^-1(1 - alpha_u) - Phi^-1(beta_u) with the Clopper-Pearson
    limits of :func:`many_run_audit` (clipped at 0 either way).  mu_lb needs no assumption.
    ``epsilon_lb = gdp_epsilon(mu_lb, delta)`` (Dong, Roth, Su 2019, Cor. 2.13) is a lower
    bound only if the mechanism's trade-off curve is Gaussian (``epsilon_kind``); otherwise
    it is an estimate.

    Example:
        >>> rng = np.random.default_rng(0)
        >>> members = np.repeat([0, 1], 1000)
        >>> res = gdp_audit(rng.normal(size=2000) + 2.0 * members, members)
        >>> 1.0 < res.mu_lb < 2.0
        True
    """
    delta = check_delta(delta)
    if delta == 0.0:
        raise InputError(
            "`delta` must be > 0 for the GDP audit (a mu-GDP mechanism with mu > 0 has eps = inf at delta = 0)."
        )
    choice = choose_threshold(
        scores, members, confidence, strategy, thresholds, split_fraction, seed, gdp_objective, gdp_family()
    )
    mu_lb = max(choice.value, 0.0)
    return GdpResult(
        method="many-run gdp order-statistic grid" if choice.alpha_upper is None else "many-run gdp",
        confidence=float(confidence),
        delta=delta,
        epsilon_lb=gdp_epsilon(mu_lb, delta),
        epsilon_kind="lower bound under assumption",
        strategy=strategy,
        **choice.result_fields(),
        mu_lb=mu_lb,
        mu_kind="lower bound",
        epsilon_assumption=(
            "the mechanism's trade-off curve is Gaussian (exactly mu-GDP for some mu); eps converted from "
            "mu_lb at delta; without this assumption epsilon_lb is an estimate, not a bound"
        ),
    )
