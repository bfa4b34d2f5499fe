"""Order-statistic grid tests: the default threshold rule of the many-run audits.

Setting: non-member scores X_1..X_{n0} iid P and member scores Y_1..Y_{n1} iid Q, the two
samples independent (one score per run; member = 1, higher score = member).  A privacy
claim theta (eps at a fixed delta, or the GDP parameter mu) is written as a bound on the
power of every (possibly randomised) test of "member" against "non-member":

    TPR <= f_theta(FPR)   and   TNR <= f_theta(FNR),

with f_theta increasing in its argument and in theta:

* (eps, delta)-DP: f_eps(v) = min{1, delta + e^eps v, 1 - e^-eps (1 - delta - v)}
  (Kairouz, Oh, Viswanath 2015, Thm. 2.1; Dong, Roth, Su 2019, Prop. 2.5);
* mu-GDP: f_mu(v) = Phi(Phi^-1(v) + mu) = 1 - G_mu(v) (Dong, Roth, Su 2019, Def. 2.6).

The grid.  G(n) = {1, 2, 4, ..., 2^j} with 2^j < ceil(n/2), plus ceil(n/2): it depends on n
only, so it is fixed before the scores are seen (no data-dependent choice to pay for).

Forward test at g in G(n0): predict "member" iff score > X_(g), the g-th largest non-member
score.  With continuous scores (ties: see below) its false-positive rate alpha = P(X > X_(g))
is the g-th smallest of n0 iid uniforms (probability integral transform), so
alpha ~ V ~ Beta(g, n0 - g + 1), and FP = g - 1.  Given the non-members the threshold is
fixed, so TP = #{Y_j > X_(g)} ~ Bin(n1, p) with p <= f_theta(alpha) under the claim.  The
binomial tail is increasing in p, hence for every k

    P(TP >= k) = E[P(Bin(n1, p) >= k)] <= E[P(Bin(n1, f_theta(V)) >= k)] =: pi_g(theta; k),

and pi_g(theta; TP) is a valid p-value for the claim theta (TP is stochastically smaller
than the Beta-binomial mixture whose tail pi_g is).  This is a joint test of the two error
rates: the budget is not split between an FPR and an FNR limit, and it uses only the
exact law of V, not a confidence interval for it.

Backward test at g in G(n1): predict "member" iff score >= Y_[g], the g-th smallest member
score; FNR ~ Beta(g, n1 - g + 1), FN = g - 1, and given the members
TN = #{X_i < Y_[g]} ~ Bin(n0, 1 - alpha) with 1 - alpha <= f_theta(FNR), so
pi'_g(theta; TN) = E[P(Bin(n0, f_theta(V')) >= TN)], V' ~ Beta(g, n1 - g + 1).

The bound.  Every one of the m = |G(n0)| + |G(n1)| tests is run at level beta / m and

    theta_lb = max over tests of sup{theta >= 0 : pi(theta) <= beta / m}   (0 if none).

Validity: pi is increasing in theta (f_theta is), and a mechanism satisfying its true
theta* satisfies every weaker claim.  theta_lb > theta* therefore needs some test with
pi(theta*) <= beta / m, which has probability <= beta / m per test, <= beta in all
(Bonferroni over m tests fixed in advance).

Ties.  Ties only make the rates above conservative (alpha <= V still holds by the
randomised probability integral transform), but they waste power, e.g. with two score
values.  When a tested order statistic is tied with another score, every score gets an
independent Uniform(0, 1) key and ties are broken by it: the tests become randomised
tests of the augmented score, a post-processing of the mechanism's output with
independent randomness, so the claim bounds them as well and all the above holds with no
ties.  Ties elsewhere leave the counts unchanged.  The keys must not depend on the scores:
an int seed is mixed with a fixed tag (:func:`tie_breaking_rng`), so that ``seed=0`` does
not replay a ``default_rng(0)`` stream that may have drawn the scores themselves (which,
for two-valued scores, can order every tied member after every tied non-member).

Computation.  pi is bounded from above by a Riemann sum on a partition of V's range
into levels of h(v) = P(Bin(n, f_theta(v)) >= k): with u_j = u_0 r^j (u_J = 1) and
v_j = f_theta^-1(w_j), w_j = BetaPPF(u_j; k, n - k + 1), h(v_j) <= u_j on (v_{j-1}, v_j], so

    pi <= u_0 + sum_{j=1..J} P(V > v_{j-1}) (u_j - u_{j-1}),

which exceeds pi by at most a factor r plus u_0 (r = 1.02, u_0 = 1e-4 * beta / m); the
computed u_j and tail probabilities are inflated by a relative 1e-9 and v_j nudged down
by 1e-9 to absorb floating-point error.  The sup is found by bracketing and a safeguarded
false-position search that keeps pi(low) <= beta / m and returns ``low`` (a rejected value).  A coarse pass first bounds
every test's theta from above; the exact pass runs only on tests that can beat the
best value found so far.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy import special

from bngp.audit.inputs import SeedLike, tagged_rng
from bngp.errors import InputError
from bngp.validation import check_in_open_interval

__all__ = [
    "GridChoice",
    "TradeoffFamily",
    "epsilon_family",
    "gdp_family",
    "grid_levels",
    "grid_p_values",
    "order_grid",
    "tie_breaking_rng",
]

#: ratio of consecutive h-levels in the exact and the screening pass.
_FINE_RATIO = 1.02
_COARSE_RATIO = 1.6
#: the lowest h-level, relative to the per-test level.
_FLOOR = 1e-4
#: relative inflation of computed probabilities and nudge of partition points.
_SLACK = 1e-9
#: bisection tolerance on theta in the exact and the screening pass.
_TOLERANCE = 1e-6
_COARSE_TOLERANCE = 1e-2
#: claims above this are not searched (no sample size here can support them).
_THETA_CAP = 256.0
#: mixed into an int seed for the tie-breaking keys ("ties" in ASCII).
_TIE_TAG = 0x74696573


@dataclass(frozen=True)
class TradeoffFamily:
    """A family of claims theta: ``tpr(theta, v)`` = f_theta(v), ``fpr(theta, w)`` = its inverse.

    ``fpr(theta, w)`` is inf{v : f_theta(v) >= w}; both are vectorised over arrays.
    """

    name: str
    tpr: Callable[[float | np.ndarray, np.ndarray], np.ndarray]
    fpr: Callable[[float | np.ndarray, np.ndarray], np.ndarray]


def epsilon_family(delta: float) -> TradeoffFamily:
    """(eps, delta)-DP: f_eps(v) = min{1, delta + e^eps v, 1 - e^-eps (1 - delta - v)}."""

    def tpr(eps: float | np.ndarray, v: np.ndarray) -> np.ndarray:
        grow = np.exp(eps)
        return np.minimum(np.minimum(delta + grow * v, 1.0 - (1.0 - delta - v) / grow), 1.0)

    def fpr(eps: float | np.ndarray, w: np.ndarray) -> np.ndarray:
        grow = np.exp(eps)
        return np.clip(np.maximum((w - delta) / grow, 1.0 - delta - grow * (1.0 - w)), 0.0, 1.0)

    return TradeoffFamily(f"(eps, {delta:g})-DP", tpr, fpr)


def gdp_family() -> TradeoffFamily:
    """mu-GDP: f_mu(v) = Phi(Phi^-1(v) + mu), inverse Phi(Phi^-1(w) - mu)."""

    def tpr(mu: float | np.ndarray, v: np.ndarray) -> np.ndarray:
        return special.ndtr(special.ndtri(v) + mu)

    def fpr(mu: float | np.ndarray, w: np.ndarray) -> np.ndarray:
        return special.ndtr(special.ndtri(w) - mu)

    return TradeoffFamily("mu-GDP", tpr, fpr)


def grid_levels(n: int) -> np.ndarray:
    """G(n) = {1, 2, 4, ..., 2^j < ceil(n/2)} and ceil(n/2): the tested order-statistic ranks.

    Example:
        >>> grid_levels(20).tolist()
        [1, 2, 4, 8, 10]
    """
    top = (n + 1) // 2
    powers = 2 ** np.arange(max(top - 1, 1).bit_length(), dtype=np.int64)
    return np.append(powers[powers < top], top)


@dataclass(frozen=True)
class _Tests:
    """Tests of the form P(Bin(n, f_theta(V)) >= k), V ~ Beta(a, b), with their h-level partition.

    ``levels[:, j]`` = u_j (inflated) and ``quantiles[:, j]`` = w_j = BetaPPF(u_j; k, n - k + 1);
    the last column is u_J = w_J = 1.
    """

    a: np.ndarray
    b: np.ndarray
    levels: np.ndarray
    quantiles: np.ndarray

    @classmethod
    def build(cls, a: np.ndarray, b: np.ndarray, k: np.ndarray, n: np.ndarray, floor: float, ratio: float) -> _Tests:
        steps = int(math.ceil(-math.log(floor) / math.log(ratio)))
        u = np.minimum(floor * ratio ** np.arange(steps), 1.0)
        shape_a, shape_b = k[:, None].astype(np.float64), (n - k + 1)[:, None].astype(np.float64)
        w = special.betaincinv(shape_a, shape_b, u[None, :])
        levels = np.minimum(special.betainc(shape_a, shape_b, w) * (1.0 + _SLACK), 1.0)
        ones = np.ones((a.shape[0], 1))
        return cls(
            a.astype(np.float64),
            b.astype(np.float64),
            np.maximum.accumulate(np.hstack([levels, ones]), axis=1),
            np.hstack([w, ones]),
        )

    def subset(self, index: np.ndarray) -> _Tests:
        return _Tests(self.a[index], self.b[index], self.levels[index], self.quantiles[index])

    def upper(self, family: TradeoffFamily, theta: np.ndarray) -> np.ndarray:
        """Upper bound on each test's p-value at its own ``theta`` (module docstring)."""
        v = family.fpr(theta[:, None], self.quantiles[:, :-1]) * (1.0 - _SLACK)
        tail = special.betainc(self.b[:, None], self.a[:, None], 1.0 - v)
        tail = np.minimum(tail * (1.0 + _SLACK), 1.0)
        return self.levels[:, 0] + np.sum(tail * np.diff(self.levels, axis=1), axis=1)

    def lower(self, family: TradeoffFamily, theta: np.ndarray) -> np.ndarray:
        """Approximate lower bound on each p-value (screening only: may err either way by rounding)."""
        v = family.fpr(theta[:, None], self.quantiles[:, 1:])
        tail = special.betainc(self.b[:, None], self.a[:, None], 1.0 - v)
        return np.sum(tail * np.diff(self.levels, axis=1), axis=1)


def _largest_rejected(
    p_value: Callable[[np.ndarray], np.ndarray],
    low: np.ndarray,
    level: float,
    tolerance: float,
    guesses: tuple[np.ndarray, ...] = (),
    interpolate: bool = True,
) -> np.ndarray:
    """sup{theta : p(theta) <= level} per test, by bracketing and a safeguarded false position from ``low``.

    ``low`` must be rejected (p(low) <= level); the bracket keeps p(low) <= level < p(high),
    so the returned ``low`` is rejected as well.  ``guesses`` (points expected near the
    answer) narrow the first bracket.  With ``interpolate`` each step interpolates
    log p - log level linearly between the ends (Illinois variant: an end kept twice in a row
    has its value halved; every sixth step bisects) and evaluates the two points
    ``tolerance / 4`` either side of the estimate, so that the bracket closes from both ends;
    otherwise it bisects.
    """
    log_level = math.log(level)

    def excess(theta: np.ndarray) -> np.ndarray:
        with np.errstate(divide="ignore"):
            return np.log(p_value(theta)) - log_level

    g_low = excess(low)
    high, g_high = np.full(low.shape, np.inf), np.full(low.shape, np.inf)
    for guess in guesses:
        inside = (guess > low) & (guess < high)
        g_guess = excess(np.where(inside, guess, low))
        rejected = inside & (g_guess <= 0.0)
        low, g_low = np.where(rejected, guess, low), np.where(rejected, g_guess, g_low)
        high, g_high = np.where(inside & ~rejected, guess, high), np.where(inside & ~rejected, g_guess, g_high)
    unbounded = ~np.isfinite(high)
    high = np.where(unbounded, np.maximum(2.0 * low, 1.0), high)
    g_high = np.where(unbounded, excess(high), g_high)
    open_ = g_high <= 0.0
    while np.any(open_) and np.min(high[open_]) < _THETA_CAP:
        low, g_low = np.where(open_, high, low), np.where(open_, g_high, g_low)
        high = np.where(open_, 2.0 * high, high)
        g_high = np.where(open_, excess(high), g_high)
        open_ = open_ & (g_high <= 0.0)
    high = np.where(open_, low, high)
    low_kept = np.zeros(low.shape, dtype=bool)
    high_kept = np.zeros(low.shape, dtype=bool)
    step = 0
    while np.max(high - low) > tolerance:
        step += 1
        if not interpolate or step % 6 == 0:
            fraction = np.full(low.shape, 0.5)
        else:
            with np.errstate(divide="ignore", invalid="ignore"):
                fraction = np.nan_to_num(g_low / (g_low - g_high), nan=0.5)
        estimate = low + np.clip(fraction, 0.0, 1.0) * (high - low)
        spread = 0.25 * tolerance if interpolate else 0.0
        left = np.clip(estimate - spread, low, high)
        right = np.clip(estimate + spread, low, high)
        g_left = excess(left)
        g_right = excess(right) if interpolate else g_left
        both, one = g_right <= 0.0, g_left <= 0.0
        new_low = np.where(both, right, np.where(one, left, low))
        new_g_low = np.where(both, g_right, np.where(one, g_left, g_low))
        new_high = np.where(both, high, np.where(one, right, left))
        new_g_high = np.where(both, g_high, np.where(one, g_right, g_left))
        new_g_low = np.where(~one & low_kept, 0.5 * new_g_low, new_g_low)
        new_g_high = np.where(both & high_kept, 0.5 * new_g_high, new_g_high)
        low_kept, high_kept = ~one, both
        low, high, g_low, g_high = new_low, new_high, new_g_low, new_g_high
    return low


def grid_p_values(
    a: np.ndarray, b: np.ndarray, k: np.ndarray, n: np.ndarray, family: TradeoffFamily, theta: float, level: float
) -> np.ndarray:
    """Upper bounds on pi(theta) = E[P(Bin(n, f_theta(V)) >= k)], V ~ Beta(a, b), per test.

    Exact up to a relative factor 1.02 and an absolute ``1e-4 * level`` (module docstring);
    1 where k = 0.  ``level`` only sets that absolute accuracy.

    Example (n0 = 1 non-member below N = 9 members: at eps = 0 the p-value is 1/(N + 1)):
        >>> p = grid_p_values(1, 1, 9, 9, epsilon_family(0.0), 0.0, 0.01)[0]
        >>> bool(0.1 <= p <= 0.1 * 1.02 + 1e-6)
        True
    """
    check_in_open_interval("level", level, 0.0, 1.0)
    theta = float(theta)
    if not math.isfinite(theta) or theta < 0:
        raise InputError(f"`theta` must be a finite number >= 0, got {theta}.")
    a, b, k, n = np.broadcast_arrays(*(np.atleast_1d(np.asarray(x, dtype=np.float64)) for x in (a, b, k, n)))
    if not np.all(np.isfinite(np.stack([a, b, k, n]))) or np.any(np.minimum(a, b) < 1) or np.any((k < 0) | (k > n)):
        raise InputError("`a`, `b` must be >= 1 and `k` must satisfy 0 <= k <= n.")
    values = np.ones(a.shape[0])
    live = np.flatnonzero(k > 0)
    if live.size:
        tests = _Tests.build(a[live], b[live], k[live], n[live], _FLOOR * level, _FINE_RATIO)
        values[live] = np.minimum(tests.upper(family, np.full(live.size, float(theta))), 1.0)
    return values


def _best_test(
    a: np.ndarray, b: np.ndarray, k: np.ndarray, n: np.ndarray, family: TradeoffFamily, level: float
) -> tuple[int, float]:
    """(index, theta) of the test with the largest rejected claim; (-1, 0.0) if none rejects theta = 0."""
    live = np.flatnonzero(k > 0)
    if live.size == 0:
        return -1, 0.0
    coarse = _Tests.build(a[live], b[live], k[live], n[live], _FLOOR * level, _COARSE_RATIO)
    zero = np.zeros(live.size)
    hopeful = coarse.lower(family, zero) <= level
    if not np.any(hopeful):
        return -1, 0.0
    live, coarse = live[hopeful], coarse.subset(np.flatnonzero(hopeful))
    optimistic = _largest_rejected(
        lambda t: coarse.lower(family, t), np.zeros(live.size), level, _COARSE_TOLERANCE, interpolate=False
    )
    optimistic = optimistic + _COARSE_TOLERANCE
    best_index, best = -1, 0.0
    for position in np.argsort(-optimistic, kind="stable"):
        if optimistic[position] <= best:
            break
        if best_index >= 0 and coarse.subset(np.array([position])).lower(family, np.array([best]))[0] > level:
            continue
        index = live[position]
        fine = _Tests.build(a[[index]], b[[index]], k[[index]], n[[index]], _FLOOR * level, _FINE_RATIO)
        start = np.array([best])
        if fine.upper(family, start)[0] > level:
            continue
        guesses = (np.array([optimistic[position] - 3.0 * _COARSE_TOLERANCE]), np.array([optimistic[position]]))
        value = float(_largest_rejected(lambda t: fine.upper(family, t), start, level, _TOLERANCE, guesses)[0])
        if value > best or best_index < 0:
            best_index, best = int(index), value
    return best_index, best


@dataclass(frozen=True)
class GridChoice:
    """The test behind the grid bound and the quantities that define it.

    Attributes:
        value: theta_lb (0 when no test rejects theta = 0).
        direction: ``"forward"`` (member iff score > threshold) or ``"backward"``
            (member iff score >= threshold); ``"none"`` when nothing is rejected.
        rank: g, the order-statistic rank of the threshold in its sample.
        threshold: the threshold score (``inf`` when nothing is rejected).
        false_positives: FP of that test (after random tie-breaking, if any).
        false_negatives: FN of that test.
        n_tests: m, the number of tests; each runs at level beta / m.
        test_level: beta / m.
        ties_broken: whether ties at a tested threshold were broken at random.
        seed: the seed of that tie-breaking (``None`` when not used or for a passed Generator).
    """

    value: float
    direction: str
    rank: int
    threshold: float
    false_positives: int
    false_negatives: int
    n_tests: int
    test_level: float
    ties_broken: bool
    seed: int | None

    @property
    def decision_rule(self) -> str:
        """The chosen test in words."""
        if self.direction == "none":
            return "none (no test rejects theta = 0)"
        sign, sample = (">", "largest non-member") if self.direction == "forward" else (">=", "smallest member")
        ties = f", ties broken at random (seed {self.seed})" if self.ties_broken else ""
        return f"member iff score {sign} {self.threshold:.6g} (rank {self.rank} {sample} score{ties})"


def tie_breaking_rng(seed: SeedLike) -> tuple[np.random.Generator, int | None]:
    """``(generator, recorded_seed)`` for the tie-breaking keys (:func:`bngp.audit.inputs.tagged_rng`)."""
    return tagged_rng(seed, _TIE_TAG)


def _tied(sorted_scores: tuple[np.ndarray, np.ndarray], values: np.ndarray) -> bool:
    """Whether any of ``values`` occurs more than once among the pooled scores."""
    count = sum(np.searchsorted(s, values, "right") - np.searchsorted(s, values, "left") for s in sorted_scores)
    return bool(np.any(count > 1))


def order_grid(
    scores: np.ndarray, members: np.ndarray, beta: float, family: TradeoffFamily, seed: SeedLike
) -> GridChoice:
    """The grid bound theta_lb of the module docstring for validated scores and bool labels."""
    nonmember = np.sort(scores[~members])
    member = np.sort(scores[members])
    n0, n1 = nonmember.shape[0], member.shape[0]
    forward, backward = grid_levels(n0), grid_levels(n1)
    ties_broken, recorded = False, None
    original = scores
    if _tied((nonmember, member), np.concatenate([nonmember[n0 - forward], member[backward - 1]])):
        rng, recorded = tie_breaking_rng(seed)
        order = np.lexsort((rng.random(scores.shape[0]), scores))
        ranks = np.empty(scores.shape[0])
        ranks[order] = np.arange(scores.shape[0], dtype=np.float64)
        nonmember, member, original = np.sort(ranks[~members]), np.sort(ranks[members]), scores[order]
        ties_broken = True
    forward_threshold = nonmember[n0 - forward]
    backward_threshold = member[backward - 1]
    true_positives = n1 - np.searchsorted(member, forward_threshold, side="right")
    true_negatives = np.searchsorted(nonmember, backward_threshold, side="left")
    n_tests = forward.shape[0] + backward.shape[0]
    level = beta / n_tests
    index, value = _best_test(
        np.concatenate([forward, backward]),
        np.concatenate([n0 - forward + 1, n1 - backward + 1]),
        np.concatenate([true_positives, true_negatives]),
        np.concatenate([np.full(forward.shape, n1), np.full(backward.shape, n0)]),
        family,
        level,
    )
    common = {"n_tests": n_tests, "test_level": level, "ties_broken": ties_broken, "seed": recorded}
    if index < 0:
        return GridChoice(0.0, "none", 0, math.inf, 0, n1, **common)
    if index < forward.shape[0]:
        rank, threshold = int(forward[index]), forward_threshold[index]
        fp, fn, direction = rank - 1, n1 - int(true_positives[index]), "forward"
    else:
        rank, threshold = int(backward[index - forward.shape[0]]), backward_threshold[index - forward.shape[0]]
        fp, fn, direction = n0 - int(true_negatives[index - forward.shape[0]]), rank - 1, "backward"
    shown = float(original[int(threshold)]) if ties_broken else float(threshold)
    return GridChoice(value, direction, rank, shown, fp, fn, **common)
