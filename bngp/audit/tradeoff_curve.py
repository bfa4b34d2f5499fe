"""The many-run f-DP view: the empirical trade-off curve of membership scores with a
simultaneous confidence region, and tests of claimed trade-off curves against it.

Trade-off functions (Dong, Roth, Su 2019, "Gaussian differential privacy", arXiv:1905.02383,
Def. 2.1-2.3): for a test of "the target is out" (H0) against "the target is in" (H1) on the
output of the mechanism, T(alpha) is the least type II error (FNR) of any test with type I error
(FPR) at most alpha.  A mechanism is f-DP if T >= f for every pair of neighbouring inputs, so one
test with FPR alpha and FNR beta < f(alpha) proves that it is not f-DP.  Auditing with the whole
empirical curve is the approach of Nasr et al. 2023, "Tight auditing of differentially private
machine learning" (arXiv:2302.07956).

Setting (as in :mod:`bngp.audit.many_run`): N0 independent runs without the target give the
non-member scores X_1..X_N0, N1 independent runs with it the member scores Y_1..Y_N1 (higher =
member).  The test "member iff score > t" has

    alpha(t) = P0[S > t]   (FPR),        beta(t) = P1[S <= t]   (FNR).

The region (order-statistic Clopper-Pearson band).  Fix in advance a grid G0 of count levels
0 = g_0 < ... < g_M = N0 (every level up to 64, then steps of about sqrt(min(g, N0 - g)) / 4) and
likewise G1 for N1; every limit below has one-sided error e0 = beta / (4 M0) (e1 = beta / (4 M1)).
For every threshold t, with FP(t) = #{X_i > t} and FN(t) = #{Y_j <= t},

    alpha(t) <= CPU(ceil_G0 FP(t); N0, e0),     alpha(t) >= CPL(floor_G0 FP(t); N0, e0),
    beta(t)  <= CPU(ceil_G1 FN(t); N1, e1),     beta(t)  >= CPL(floor_G1 FN(t); N1, e1),

all at once with probability >= 1 - beta (CPU/CPL: one-sided Clopper-Pearson limits,
:mod:`bngp.audit.binomial`; ceil_G/floor_G: the nearest grid level above/below).  Proof: if
FP(t) <= g < N0 then t >= X_(g+1) (the (g+1)-th largest), so alpha(t) <= P0[S > X_(g+1)], which
by the probability integral transform is stochastically at most Beta(g + 1, N0 - g), whose
1 - e0 quantile is CPU(g); if FP(t) >= g >= 1 then X_(g) > t and alpha(t) >= P0[S >= X_(g)],
stochastically at least Beta(g, N0 - g + 1) (quantile e0 = CPL(g)); ties only help both.  These
are 2 M0 events for the non-members and 2 M1 for the members, fixed by the grid and not by the
data (the limits at g = N0 above and g = 0 below are the trivial 1 and 0), so a union bound gives
the total error 2 M0 e0 + 2 M1 e1 = beta for every t at once, including thresholds chosen after
looking at the scores.  The grid makes the union bound cost ln(16 sqrt(N / 2)) instead of ln N;
rounding to the grid widens each limit by about 6% of its width.
Compared with a DKW band this one is about 1.4 times wider at FPR 1/2 but much narrower in the
tails (near FPR 0 its width is about ln(1/e0) / N0, not sqrt(ln(4/beta) / 2 N0)), where claims
of large eps are refuted.

Checking a claim (:func:`check_claim`).  If the mechanism is f-DP then every threshold test has
beta(t) >= f(alpha(t)).  On the event above, alpha(t) <= alpha_u(t) and beta(t) <= beta_u(t), and
f is non-increasing, so beta_u(t) < f(alpha_u(t)) implies beta(t) < f(alpha(t)): the claim is
refuted at the confidence (only the two upper limits are used: the refutation alone holds at
1 - beta / 2).  The curve keeps one threshold per non-member grid level g (the lowest threshold
with FP <= g, i.e. t = X_(g+1)): any other threshold has the same alpha_u as one of them and a
FN at least as large, so no test of the claim is lost.  Claims: ``gaussian:mu=M`` (mu-GDP,
G_mu(a) = Phi(Phi^-1(1 - a) - mu)) and ``eps-delta:epsilon=E,delta=D``
(f(a) = max(0, 1 - D - e^E a, e^-E (1 - D - a))), both symmetric, so the direction of the test
(H0 = out) loses nothing.  The statement needs independent runs; for the scores of one run
(canaries in one training run) the band is descriptive only.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from bngp.audit.binomial import clopper_pearson_lower, clopper_pearson_upper
from bngp.audit.bits import per_bit_error_floor
from bngp.audit.fdp_one_run import Tradeoff, eps_delta_tradeoff, gaussian_tradeoff
from bngp.audit.inputs import check_confidence, check_scores_and_labels
from bngp.audit.results import AuditResult
from bngp.audit.tradeoff import gdp_epsilon
from bngp.errors import InputError

__all__ = [
    "CLAIM_FORMATS",
    "Claim",
    "ClaimCheck",
    "EmpiricalTradeoff",
    "check_claim",
    "check_claim_error_rate",
    "count_levels",
    "empirical_tradeoff",
    "parse_claim",
]

#: the claim specifications understood by :func:`parse_claim`.
CLAIM_FORMATS = "gaussian:mu=M or eps-delta:epsilon=E,delta=D"
#: every count level up to this one is on the grid.
_DENSE_LEVELS = 64
#: above it the grid step is about sqrt(min(g, n - g)) / _GRID_DIVISOR.
_GRID_DIVISOR = 4.0
#: a claim is refuted only when f(alpha_u) - beta_u exceeds this (rounding of f).
_SLACK = 1e-12
#: the four families of one-sided limits the confidence is split over.
_LIMIT_FAMILIES = 4
_DECISION_RULE = "member iff score > threshold"
_ASSUMPTION = "each score comes from an independent run of the mechanism (many-run audit)"


# --------------------------------------------------------------------------- the region


def count_levels(n: int) -> np.ndarray:
    """The grid of count levels 0 = g_0 < ... < g_M = n fixed in advance for a sample of n.

    Every level up to 64, then steps of max(1, floor(sqrt(min(g, n - g)) / 4)), so about
    16 sqrt(n / 2) levels in all (865 for n = 5000).

    Example:
        >>> count_levels(5).tolist()
        [0, 1, 2, 3, 4, 5]
        >>> int(count_levels(5000).shape[0])
        865
    """
    levels = list(range(min(n, _DENSE_LEVELS) + 1))
    level = levels[-1]
    while level < n:
        step = max(1, int(math.sqrt(min(level, n - level)) / _GRID_DIVISOR))
        level = min(n, level + step)
        levels.append(level)
    return np.asarray(levels, dtype=np.int64)


@lru_cache(maxsize=32)
def _limits(n: int, beta: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """(grid, upper limits, lower limits, per-level error) for a sample of n at total error beta.

    Upper limits at g = n and lower limits at g = 0 are the trivial 1 and 0 and cost nothing;
    the other M levels of each side have error beta / (4 M).
    """
    grid = count_levels(n)
    error = beta / (_LIMIT_FAMILIES * (grid.shape[0] - 1))
    upper = clopper_pearson_upper(grid, n, error)
    lower = clopper_pearson_lower(grid, n, error)
    for array in (grid, upper, lower):
        array.setflags(write=False)
    return grid, upper, lower, error


def _bounds(counts: np.ndarray, n: int, beta: float) -> tuple[np.ndarray, np.ndarray, int, float]:
    """Simultaneous (upper, lower) limits of the rates counts / n, rounded out to the grid."""
    grid, upper, lower, error = _limits(n, beta)
    above = np.searchsorted(grid, counts, side="left")
    below = np.searchsorted(grid, counts, side="right") - 1
    return upper[above], lower[below], int(grid.shape[0] - 1), error


def _frozen(values: np.ndarray) -> np.ndarray:
    array = np.ascontiguousarray(values, dtype=np.float64)
    array.setflags(write=False)
    return array


@dataclass(frozen=True, eq=False)
class EmpiricalTradeoff(AuditResult):
    """The empirical trade-off curve of membership scores and its simultaneous region.

    One point per non-member grid level (see the module docstring), ordered by increasing FPR,
    from "predict nobody above the largest non-member score" to "predict everyone"
    (threshold ``-inf``).  With probability >= ``confidence``, for every threshold at once,
    alpha_lower <= FPR <= alpha_upper and beta_lower <= FNR <= beta_upper.  The conservative
    curve is (alpha_upper, beta_upper): a claimed trade-off function f is refuted when
    beta_upper < f(alpha_upper) at some point (:func:`check_claim`).

    Attributes:
        thresholds: t of each test "member iff score > t".
        alpha: FPR point estimates FP / N0.
        beta: FNR point estimates FN / N1.
        alpha_upper: simultaneous upper limits on the FPR.
        beta_upper: simultaneous upper limits on the FNR.
        alpha_lower: simultaneous lower limits on the FPR.
        beta_lower: simultaneous lower limits on the FNR.
        decision_rule: the tests, in words.
        n_nonmembers: N0.
        n_members: N1.
        levels_nonmembers: M0, the non-member count levels with a limit on each side.
        levels_members: M1.
        error_nonmembers: e0 = beta / (4 M0), the one-sided error of each non-member limit.
        error_members: e1 = beta / (4 M1).
        assumption: what the statement needs.
    """

    thresholds: np.ndarray
    alpha: np.ndarray
    beta: np.ndarray
    alpha_upper: np.ndarray
    beta_upper: np.ndarray
    alpha_lower: np.ndarray
    beta_lower: np.ndarray
    decision_rule: str
    n_nonmembers: int
    n_members: int
    levels_nonmembers: int
    levels_members: int
    error_nonmembers: float
    error_members: float
    assumption: str

    # identity, not field-wise equality: arrays have no single truth value.
    __eq__ = object.__eq__
    __hash__ = object.__hash__


def empirical_tradeoff(scores: np.ndarray, members: np.ndarray, *, confidence: float = 0.95) -> EmpiricalTradeoff:
    """The empirical trade-off curve (FPR, FNR) of thresholds on ``scores`` with its region.

    One sort per class and ``searchsorted`` on about 16 sqrt(N0 / 2) thresholds; the Clopper-Pearson
    limits depend only on (N, confidence) and are cached.  See the module docstring for the
    region and why it is simultaneous (Dong, Roth, Su, arXiv:1905.02383; Nasr et al.,
    arXiv:2302.07956).

    Args:
        scores: one score per run, higher = member.
        members: 1 if the run included the target, else 0.
        confidence: 1 - beta, the probability that the whole region holds.

    Example:
        >>> members = np.repeat([0, 1], 4)
        >>> curve = empirical_tradeoff(np.array([0, 1, 2, 3, 2, 3, 4, 5.0]), members)
        >>> curve.alpha.tolist(), curve.beta.tolist()
        ([0.0, 0.25, 0.5, 0.75, 1.0], [0.5, 0.25, 0.0, 0.0, 0.0])
    """
    values, labels = check_scores_and_labels(scores, members)
    beta_total = 1.0 - check_confidence(confidence)
    nonmember = np.sort(values[~labels])
    member = np.sort(values[labels])
    n0, n1 = nonmember.shape[0], member.shape[0]
    grid = count_levels(n0)
    # the lowest threshold with FP <= g is the (g+1)-th largest non-member score; g = N0: -inf.
    picked = np.where(grid < n0, nonmember[np.maximum(n0 - 1 - grid, 0)], -np.inf)
    thresholds = np.unique(picked)[::-1]
    fp = n0 - np.searchsorted(nonmember, thresholds, side="right")
    fn = np.searchsorted(member, thresholds, side="right")
    alpha_upper, alpha_lower, m0, e0 = _bounds(fp, n0, beta_total)
    beta_upper, beta_lower, m1, e1 = _bounds(fn, n1, beta_total)
    return EmpiricalTradeoff(
        method="empirical trade-off curve (order-statistic clopper-pearson band)",
        confidence=1.0 - beta_total,
        delta=0.0,
        thresholds_examined=int(thresholds.shape[0]),
        union_bound=(
            f"bonferroni over {2 * m0} non-member and {2 * m1} member order-statistic limits fixed in advance "
            "(covers every threshold)"
        ),
        thresholds=_frozen(thresholds),
        alpha=_frozen(fp / n0),
        beta=_frozen(fn / n1),
        alpha_upper=_frozen(alpha_upper),
        beta_upper=_frozen(beta_upper),
        alpha_lower=_frozen(alpha_lower),
        beta_lower=_frozen(beta_lower),
        decision_rule=_DECISION_RULE,
        n_nonmembers=n0,
        n_members=n1,
        levels_nonmembers=m0,
        levels_members=m1,
        error_nonmembers=e0,
        error_members=e1,
        assumption=_ASSUMPTION,
    )


# --------------------------------------------------------------------------- claims

_NUMBER = r"([0-9.eE+\-]+|inf)"
_CLAIM_PATTERNS = {
    "gaussian": re.compile(rf"^gaussian:mu={_NUMBER}$"),
    "eps-delta": re.compile(rf"^eps-delta:epsilon={_NUMBER}(?:,delta={_NUMBER})?$"),
}


@dataclass(frozen=True)
class Claim:
    """A claimed privacy guarantee as a trade-off function.

    Attributes:
        spec: the claim in canonical form, e.g. ``"gaussian:mu=1"``.
        family: ``"gaussian"`` (mu-GDP) or ``"eps-delta"``.
        mu: mu of a Gaussian claim (``None`` otherwise).
        epsilon: eps of an (eps, delta) claim (``None`` otherwise).
        delta: delta of an (eps, delta) claim (0 for a Gaussian one).
    """

    spec: str
    family: str
    mu: float | None = None
    epsilon: float | None = None
    delta: float = 0.0

    def tradeoff(self) -> Tradeoff:
        """The claimed trade-off function f (vectorised)."""
        if self.family == "gaussian":
            return gaussian_tradeoff(self.mu)
        return eps_delta_tradeoff(self.epsilon, self.delta)

    def epsilon_at(self, delta: float) -> float | None:
        """The eps this claim implies at ``delta``, or None when it implies no finite eps there.

        A mu-GDP claim implies (eps(delta), delta)-DP for every delta > 0 (Dong, Roth, Su,
        arXiv:1905.02383, Cor. 2.13; :func:`bngp.audit.gdp_epsilon`) and no finite eps at delta = 0;
        an (E, D) claim implies (E, delta)-DP for every delta >= D and nothing at a smaller delta.

        Example:
            >>> parse_claim("eps-delta:epsilon=1,delta=1e-5").epsilon_at(1e-6) is None
            True
            >>> round(parse_claim("gaussian:mu=1").epsilon_at(1e-5), 3)
            4.377
        """
        if self.family == "gaussian":
            epsilon = gdp_epsilon(self.mu, delta)
            return epsilon if math.isfinite(epsilon) else None
        return self.epsilon if delta >= self.delta else None

    def error_floor(self) -> float:
        """The fixed point x* = f(x*) (the per-bit error floor of :mod:`bngp.audit.bits`)."""
        if self.family == "gaussian":
            return per_bit_error_floor("gdp", self.mu)
        return per_bit_error_floor("eps-delta", self.epsilon, self.delta)


def parse_claim(spec: str, name: str = "claim") -> Claim:
    """Parse ``gaussian:mu=M`` or ``eps-delta:epsilon=E,delta=D`` (delta defaults to 0).

    Anything else raises :class:`InputError` with a one-line message naming ``name``.

    Example:
        >>> parse_claim("eps-delta:epsilon=1,delta=1e-5")
        Claim(spec='eps-delta:epsilon=1,delta=1e-05', family='eps-delta', mu=None, epsilon=1.0, delta=1e-05)
    """
    text = str(spec).strip().replace(" ", "")
    for family, pattern in _CLAIM_PATTERNS.items():
        match = pattern.match(text)
        if not match:
            continue
        try:
            numbers = [float(group) for group in match.groups() if group is not None]
        except ValueError:
            break
        if family == "gaussian":
            mu = numbers[0]
            if not (math.isfinite(mu) and mu >= 0):
                raise InputError(f"`{name}`: mu must be a finite number >= 0, got {spec!r}.")
            return Claim(spec=f"gaussian:mu={mu:g}", family=family, mu=mu)
        epsilon, delta = numbers[0], (numbers[1] if len(numbers) > 1 else 0.0)
        if not (math.isfinite(epsilon) and epsilon >= 0):
            raise InputError(f"`{name}`: epsilon must be a finite number >= 0, got {spec!r}.")
        if not 0.0 <= delta < 1.0:
            raise InputError(f"`{name}`: delta must be in [0, 1), got {spec!r}.")
        return Claim(spec=f"eps-delta:epsilon={epsilon:g},delta={delta:g}", family=family, epsilon=epsilon, delta=delta)
    raise InputError(f"`{name}` must be {CLAIM_FORMATS}, got {spec!r}.")


@dataclass(frozen=True)
class ClaimCheck(AuditResult):
    """Whether a claimed trade-off function is refuted by an audit.

    Attributes:
        claim: the claim in canonical form.
        refuted: True if the claim is refuted at ``confidence``.
        alpha: the FPR upper limit at the most violating point (the point where
            f(alpha) - beta_upper is largest; ``None`` without any point).
        beta_upper: the FNR upper limit there.
        claimed_beta: f(alpha), the least FNR the claim allows there.
        margin: f(alpha) - beta_upper (> 0 exactly when refuted).
        alpha_estimate: the FPR point estimate there.
        beta_estimate: the FNR point estimate there.
        threshold: the test there ("member iff score > threshold"; ``None`` for bits).
        assumption: what the verdict needs.
    """

    claim: str
    refuted: bool
    alpha: float | None
    beta_upper: float | None
    claimed_beta: float | None
    margin: float
    alpha_estimate: float | None
    beta_estimate: float | None
    threshold: float | None
    assumption: str


def _as_claim(claim: Claim | str) -> Claim:
    return claim if isinstance(claim, Claim) else parse_claim(claim)


def check_claim(curve: EmpiricalTradeoff, claim: Claim | str) -> ClaimCheck:
    """Test a claimed mechanism against the region of :func:`empirical_tradeoff`.

    Refuted (at the region's confidence) iff beta_upper < f(alpha_upper) at some point, i.e. the
    conservative corner of the region lies strictly below the claimed curve (module docstring;
    Nasr et al., arXiv:2302.07956).

    Example:
        >>> rng = np.random.default_rng(0)
        >>> members = np.repeat([0, 1], 5000)
        >>> curve = empirical_tradeoff(rng.normal(size=10_000) + 3.0 * members, members)
        >>> check_claim(curve, "gaussian:mu=0.5").refuted, check_claim(curve, "gaussian:mu=3").refuted
        (True, False)
    """
    parsed = _as_claim(claim)
    claimed = np.asarray(parsed.tradeoff()(curve.alpha_upper), dtype=np.float64)
    margins = claimed - curve.beta_upper
    best = int(np.argmax(margins))
    margin = float(margins[best])
    return ClaimCheck(
        method="claim vs empirical trade-off region",
        confidence=curve.confidence,
        delta=parsed.delta,
        thresholds_examined=curve.thresholds_examined,
        union_bound="none beyond the region's (simultaneous over every threshold)",
        claim=parsed.spec,
        refuted=margin > _SLACK,
        alpha=float(curve.alpha_upper[best]),
        beta_upper=float(curve.beta_upper[best]),
        claimed_beta=float(claimed[best]),
        margin=margin,
        alpha_estimate=float(curve.alpha[best]),
        beta_estimate=float(curve.beta[best]),
        threshold=float(curve.thresholds[best]),
        assumption=curve.assumption,
    )


def check_claim_error_rate(claim: Claim | str, error_rate_upper: float, *, confidence: float) -> ClaimCheck:
    """Test a claim with the bits audit (:mod:`bngp.audit.bits`): refuted iff p_hat < x*.

    The verdict is reported at the point (p_hat, p_hat): margin = f(p_hat) - p_hat.

    Under a symmetric f-DP claim every bit is guessed wrongly with probability at least the
    fixed point x* = f(x*) (Xiang, Wang, Wang, sec. 4), so an upper confidence bound p_hat on
    the error rate below x* refutes the claim at the bound's confidence.

    Example:
        >>> check_claim_error_rate("eps-delta:epsilon=1,delta=0", 0.2, confidence=0.95).refuted
        True
    """
    parsed = _as_claim(claim)
    confidence = check_confidence(confidence)
    p_hat = float(error_rate_upper)
    if not 0.0 <= p_hat <= 1.0:
        raise InputError(f"`error_rate_upper` must be in [0, 1], got {p_hat}.")
    # f(x) - x decreases strictly through 0 at x*, so f(p_hat) > p_hat iff p_hat < x*.
    claimed = float(parsed.tradeoff()(np.array(p_hat)))
    return ClaimCheck(
        method="claim vs bits error rate",
        confidence=confidence,
        delta=parsed.delta,
        thresholds_examined=1,
        union_bound="none",
        claim=parsed.spec,
        refuted=claimed - p_hat > _SLACK,
        alpha=p_hat,
        beta_upper=p_hat,
        claimed_beta=claimed,
        margin=claimed - p_hat,
        alpha_estimate=None,
        beta_estimate=None,
        threshold=None,
        assumption="independent bits, each carried by its own canary (bits transmission audit)",
    )
