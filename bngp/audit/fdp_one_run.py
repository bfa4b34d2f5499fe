"""f-DP audit in one run (Mahloujifar, Melis, Chaudhuri 2024, "Auditing f-Differential Privacy
in One Run", arXiv:2410.22235).

Setting as in :mod:`bngp.audit.one_run`: m canaries, each included independently with
probability 1/2, one run of the mechanism and one score per canary (higher = member).  The
auditor guesses "in" for the k+ highest scores, "out" for the k- lowest and abstains on the
rest: k = k+ + k- guesses, V of them correct.  The null hypothesis is a whole trade-off curve,
"the mechanism is f-DP" (Dong, Roth, Su 2019) for every pair of neighbouring canary sets, in
place of the single (eps, delta) pair of Steinke, Nasr, Jagielski.

The bound (arXiv:2410.22235: the paper's recursive numerical upper bound on the probability of
at least v correct guesses under f-DP, which jax_privacy implements after the paper's
``audit_rh_with_cap``; the derivation is restated here so that it can be checked).  Write
fbar(x) = 1 - f(x) (concave, non-decreasing), fbar^-1(r) = inf{x : fbar(x) >= r} (convex,
fbar^-1(0) = 0) and, for i = 1..k,

    R_i = E[V 1{V >= i}] / m,      H_i = E[(k - V) 1{V >= i}] / m.

1. f-DP gives  H_{i-1} >= fbar^-1(R_i).  For canary j, "V_{-j} >= i - 1" (correct guesses on
   the other canaries) is, for fixed memberships of the others, a post-processing of the output;
   with prior 1/2 on the membership of j, f-DP in both directions and concavity of fbar give
   P[j guessed right, V_{-j} >= i-1] <= fbar(P[j guessed wrong, V_{-j} >= i-1]).  A right guess
   on j with V_{-j} >= i - 1 means V >= i, a wrong one means V >= i - 1; summing over the m
   canaries and using concavity once more gives the inequality.
2. Both sums grow by the mass at V = i - 1:  R_{i-1} = R_i + (i-1)/(k-i+1) (H_{i-1} - H_i).
3. R_0 + H_0 = k / m (exactly k guesses).

If P[V >= v] >= tau, a sub-distribution with mass exactly tau at V = v and total mass <= 1 also
satisfies 1 for i <= v (moving the tail mass down to v lowers R_i and raises H_{i-1}; scaling by
tau / P[V >= v] <= 1 keeps 1 because fbar^-1 is convex with fbar^-1(0) = 0).  From
r_v = tau v / m, h_v = tau (k - v) / m the smallest admissible steps

    h_{i-1} = max(h_i, fbar^-1(r_i)),   r_{i-1} = r_i + (i-1)/(k-i+1) (h_{i-1} - h_i)

reach the smallest possible r_0 + h_0 (a larger h_{i-1} only moves the state up along the
direction (w_i, 1), which never lowers the end point); so r_0 + h_0 > k / m proves
P[V >= v] < tau, and observing v correct guesses rejects "f-DP" at level beta = tau.  A value
below fbar^-1 only weakens the test, so every rounding is taken in that direction.  The test
rejects more as v grows (a sub-distribution admissible for v + 1 becomes one for v once its top
mass is moved down to v).

Gaussian form: for f = G_mu (mu-GDP), fbar^-1(r) = Phi(Phi^-1(r) - mu), which decreases in mu,
so the rejected mu form an interval [0, mu_lb): mu_lb = sup{mu >= 0 : mu-GDP rejected} is found
on successively finer grids (the reported value is a rejected grid point, so it errs low), and
eps_lb = eps_{mu_lb}(delta) through :func:`bngp.audit.tradeoff.gdp_epsilon` (Dong, Roth, Su
2019, Cor. 2.13).  Read eps_lb as "the eps at delta of the weakest Gaussian curve the guesses
rule out": a lower bound on eps(delta) for a mechanism whose privacy curve is Gaussian (the
Gaussian mechanism, DP-SGD accounted by GDP), which is how the paper and jax_privacy report it.
It is not a lower bound on the (eps, delta)-DP of an arbitrary mechanism (an (eps, delta)-DP
mechanism need not be mu-GDP for the mu with that eps at delta); for such a claim pass its
curve, :func:`eps_delta_tradeoff`, to :func:`fdp_one_run_rejects`, or use
:mod:`bngp.audit.one_run`.

Abstention and the union bound are those of :mod:`bngp.audit.one_run`: ties are broken by a
seeded permutation independent of the labels, a fixed (k+, k-) costs nothing, and
:func:`fdp_one_run_search` tests each of its candidates (default
:func:`~bngp.audit.one_run.default_one_run_candidates`) at level beta / (number of candidates).
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import special

from bngp.audit.inputs import SeedLike, check_confidence, check_delta, check_scores_and_labels, resolve_rng
from bngp.audit.one_run import _check_pairs, _correct_counts, default_one_run_candidates
from bngp.audit.results import AuditResult
from bngp.audit.tradeoff import gdp_epsilon
from bngp.errors import InputError
from bngp.validation import check_nonnegative, check_positive_int

__all__ = [
    "FdpBound",
    "FdpOneRunResult",
    "eps_delta_tradeoff",
    "fdp_one_run_audit",
    "fdp_one_run_rejects",
    "fdp_one_run_search",
    "gaussian_tradeoff",
    "gdp_one_run_bound",
]

Tradeoff = Callable[[np.ndarray], np.ndarray]

#: largest mu examined: beyond about 38, Phi(Phi^-1(r) - mu) underflows to 0 in float64 and
#: nothing more can be rejected.
MU_CAP = 40.0
#: relative shrinkage of every computed fbar^-1 value (covers the ~1e-15 relative error of
#: ndtr/ndtri) and relative margin required of r_0 + h_0 over k / m.
_NUDGE = 1e-10
_SLACK = 1e-9
#: mu grid points per refinement stage, and the stopping width of the bracket.
_GRID = 96
_MU_TOLERANCE = 1e-6
_MAX_STAGES = 5
#: absolute error allowed for 1 - f(x) as computed from a user's trade-off function.
_TABLE_ERROR = 1e-14


# --------------------------------------------------------------------------- trade-off curves


def gaussian_tradeoff(mu: float) -> Tradeoff:
    """The mu-GDP trade-off function G_mu(x) = Phi(Phi^-1(1 - x) - mu) (Dong, Roth, Su 2019).

    Example:
        >>> round(float(gaussian_tradeoff(1.0)(0.05)), 4)
        0.7405
    """
    mu = check_nonnegative("mu", mu)

    def curve(x: np.ndarray) -> np.ndarray:
        return special.ndtr(-special.ndtri(np.asarray(x, dtype=np.float64)) - mu)

    return curve


def eps_delta_tradeoff(epsilon: float, delta: float) -> Tradeoff:
    """The (eps, delta)-DP trade-off function max(0, 1 - delta - e^eps x, e^-eps (1 - delta - x)).

    Example:
        >>> round(float(eps_delta_tradeoff(1.0, 0.0)(0.1)), 4)
        0.7282
    """
    epsilon = check_nonnegative("epsilon", epsilon)
    delta = check_delta(delta)

    def curve(x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, dtype=np.float64)
        first = 1.0 - delta - math.exp(epsilon) * x
        second = math.exp(-epsilon) * (1.0 - delta - x)
        return np.maximum(np.maximum(first, second), 0.0)

    return curve


# --------------------------------------------------------------------------- checks


def _check_counts(m: int, k: int, v: int) -> tuple[int, int, int]:
    m = check_positive_int("m", m, minimum=1)
    k = check_positive_int("k", k, minimum=1, maximum=m)
    v = check_positive_int("v", v, minimum=0, maximum=k)
    return m, k, v


def _tabulate(tradeoff: Tradeoff) -> tuple[list[float], list[float]]:
    """Grid x_j and a non-decreasing upper bound g_j on fbar(x_j) = 1 - f(x_j).

    The grid is geometric in x on [1e-300, 1/2] and in 1 - x on [1/2, 1 - 1e-16] (neighbours
    0.6% apart).  The lookup in :func:`_fdp_rejects` returns the largest x_j with g_j < r, which
    is at most fbar^-1(r): a table value never exceeds the exact inverse (it may fall short of
    it by one grid step, which makes the test slightly conservative).
    """
    if not callable(tradeoff):
        raise InputError(f"`tradeoff` must be a callable f: [0, 1] -> [0, 1], got {type(tradeoff).__name__}.")
    near_zero = np.geomspace(1e-300, 0.5, 150_000)
    near_one = 1.0 - np.geomspace(0.5, 1e-16, 20_000)
    xs = np.unique(np.concatenate(([0.0, 1.0], near_zero, near_one)))
    try:
        values = np.asarray(tradeoff(xs), dtype=np.float64)
        if values.shape != xs.shape:
            raise ValueError("not vectorised")
    except (TypeError, ValueError):
        values = np.array([float(tradeoff(float(x))) for x in xs])
    tolerance = 1e-9
    if not np.all(np.isfinite(values)) or values.min() < -tolerance or values.max() > 1.0 + tolerance:
        raise InputError("`tradeoff` must map [0, 1] into [0, 1] (finite values).")
    if np.any(np.diff(values) > tolerance):
        raise InputError("`tradeoff` must be non-increasing (a trade-off function f(alpha) = least type II error).")
    if np.any(values > 1.0 - xs + tolerance):
        raise InputError("`tradeoff` must satisfy f(x) <= 1 - x (a trade-off function is at most random guessing).")
    upper = np.maximum.accumulate(np.clip(1.0 - values, 0.0, 1.0) + _TABLE_ERROR)
    return xs.tolist(), upper.tolist()


# --------------------------------------------------------------------------- general form


def _fdp_rejects(xs: list[float], upper: list[float], m: int, k: int, v: int, beta: float) -> bool:
    """The recursion of the module docstring with fbar^-1 read (from below) off the table."""
    if v == 0:
        return False
    r, h = beta * v / m, beta * (k - v) / m
    target = (k / m) * (1.0 + _SLACK)
    for i in range(v - 1, -1, -1):
        # i steps below the top: the chain goes from level i + 1 to level i (weight i / (k - i)).
        position = bisect.bisect_left(upper, r) - 1
        inverse = xs[position] if position >= 0 else 0.0
        if inverse <= h:
            break  # nothing changes any more
        r += i / (k - i) * (inverse - h)
        h = inverse
        if r + h > target:
            return True
    return r + h > target


def fdp_one_run_rejects(tradeoff: Tradeoff, m: int, k: int, v: int, *, confidence: float = 0.95) -> bool:
    """Whether v correct guesses out of k (m canaries) reject "the mechanism is f-DP".

    The test of the module docstring (arXiv:2410.22235) at level beta = 1 - confidence:
    True means P[V >= v] < beta for every f-DP mechanism and every guessing rule that makes k
    guesses.  No union bound: ``confidence`` is the per-test level.

    Args:
        tradeoff: the claimed trade-off function f (convex, non-increasing, f(x) <= 1 - x),
            a callable on [0, 1]; it is evaluated once on a fixed grid of 170,000 points
            (vectorised when it accepts an array) and 1 - f is trusted to 1e-14.  f-DP holds
            for every pair of neighbouring canary sets, in both orders (Dong, Roth, Su 2019).
        m: number of canaries.
        k: number of guesses (1 <= k <= m).
        v: number of correct guesses (0 <= v <= k).
        confidence: 1 - beta.

    Example:
        >>> fdp_one_run_rejects(gaussian_tradeoff(0.5), 20_000, 1_000, 900)
        True
        >>> fdp_one_run_rejects(gaussian_tradeoff(1.0), 20_000, 1_000, 900)
        False
    """
    m, k, v = _check_counts(m, k, v)
    beta = 1.0 - check_confidence(confidence)
    xs, upper = _tabulate(tradeoff)
    return _fdp_rejects(xs, upper, m, k, v, beta)


# --------------------------------------------------------------------------- Gaussian form


def _gaussian_rejections(m: int, k: np.ndarray, v: np.ndarray, beta: float, mu: np.ndarray) -> np.ndarray:
    """Rejection of mu-GDP for each row (k[j], v[j]) and each mu[j, g]; shape of ``mu``.

    The recursion runs on all rows and grid points at once; rows are sorted by v (descending)
    so that the rows still running at step i are a prefix.
    """
    order = np.argsort(-v, kind="stable")
    k_s = k[order].astype(np.float64)
    v_s = v[order].astype(np.int64)
    mu_s = mu[order]
    r = np.repeat((beta * v_s / m)[:, None], mu.shape[1], axis=1)
    h = np.repeat((beta * (k_s - v_s) / m)[:, None], mu.shape[1], axis=1)
    top = int(v_s[0]) if v_s.size else 0
    # running[i] = number of rows with v > i, for i = 0..top-1.
    running = np.searchsorted(-v_s, -np.arange(top), side="left")
    for i in range(top - 1, -1, -1):
        a = int(running[i])
        rr, hh = r[:a], h[:a]
        inverse = special.ndtr(special.ndtri(np.minimum(rr, 1.0)) - mu_s[:a]) * (1.0 - _NUDGE)
        step = np.maximum(inverse - hh, 0.0)
        rr += (i / (k_s[:a] - i))[:, None] * step
        hh += step
        if a == v_s.size and not step.any():
            break  # every chain is frozen: h and r no longer change
    rejected = r + h > (k_s / m * (1.0 + _SLACK))[:, None]
    result = np.empty_like(rejected)
    result[order] = rejected
    result &= v[:, None] > 0
    return result


def _leading_run(rejected: np.ndarray) -> np.ndarray:
    """Per row, the number of leading True values (rejection is monotone in mu, so this is the
    number of rejected grid points; counting only the leading run keeps every reported value a
    rejected one even if rounding broke the monotonicity)."""
    return np.where(rejected.all(axis=1), rejected.shape[1], np.argmin(rejected, axis=1))


def _gaussian_mu_bounds(m: int, k: np.ndarray, v: np.ndarray, beta: float) -> np.ndarray:
    """mu_lb per candidate (a rejected value, 0 when mu = 0 is not rejected).

    Stage 1 tries 0 and a geometric grid up to :data:`MU_CAP`; later stages refine the bracket
    [lo, hi) on linear grids, but only for candidates whose bracket can still beat the best lower
    end (the others keep their current lower end, which is still a valid bound).
    """
    n = k.shape[0]
    grid = np.concatenate(([0.0], np.geomspace(1e-3, MU_CAP, _GRID - 1)))
    rejected = _gaussian_rejections(m, k, v, beta, np.broadcast_to(grid, (n, _GRID)).copy())
    count = _leading_run(rejected)
    lo = np.where(count > 0, grid[np.maximum(count - 1, 0)], 0.0)
    hi = np.where(count > 0, grid[np.minimum(count, _GRID - 1)], 0.0)
    hi = np.where(count == _GRID, MU_CAP, hi)
    for _ in range(_MAX_STAGES - 1):
        best = lo.max()
        open_ = (hi - lo > _MU_TOLERANCE * np.maximum(lo, 1.0)) & (hi > best)
        if not open_.any():
            break
        rows = np.flatnonzero(open_)
        fractions = np.linspace(0.0, 1.0, _GRID + 1)[1:-1]
        mus = lo[rows, None] + (hi[rows] - lo[rows])[:, None] * fractions[None, :]
        refined = _gaussian_rejections(m, k[rows], v[rows], beta, mus)
        inside = _leading_run(refined)
        new_lo = np.where(inside > 0, mus[np.arange(rows.size), np.maximum(inside - 1, 0)], lo[rows])
        above = mus[np.arange(rows.size), np.minimum(inside, fractions.size - 1)]
        new_hi = np.where(inside < fractions.size, above, hi[rows])
        lo[rows], hi[rows] = new_lo, new_hi
    return lo


#: the assumption under which a Gaussian f-DP ``epsilon_lb`` is a lower bound (module docstring).
EPSILON_ASSUMPTION = (
    "the mechanism's trade-off curve is Gaussian (mu-GDP for some mu); eps converted from mu_lb at delta; "
    "without this assumption epsilon_lb is an estimate, not a bound (mu_lb needs no assumption)"
)


@dataclass(frozen=True)
class FdpBound(AuditResult):
    """The Gaussian f-DP one-run bound for one set of guesses.

    Attributes:
        mu_lb: sup{mu >= 0 : mu-GDP rejected at level beta} (a rejected value, at most
            :data:`MU_CAP`).
        epsilon_lb: eps at ``delta`` of a mu_lb-GDP mechanism (see the module docstring for how
            to read it).
        n_guesses: k, the number of guesses.
        n_correct: v, the correct guesses.
        n_canaries: m, the number of canaries.
        mu_kind: ``"lower bound"`` (mu-GDP is rejected for every mu < mu_lb, no assumption).
        epsilon_kind: ``"lower bound under assumption"`` (see ``epsilon_assumption``).
        epsilon_assumption: what makes ``epsilon_lb`` a lower bound; without it, an estimate.
    """

    mu_lb: float
    epsilon_lb: float
    n_guesses: int
    n_correct: int
    n_canaries: int
    mu_kind: str = "lower bound"
    epsilon_kind: str = "lower bound under assumption"
    epsilon_assumption: str = EPSILON_ASSUMPTION


def gdp_one_run_bound(m: int, k: int, v: int, *, confidence: float = 0.95, delta: float = 1e-5) -> FdpBound:
    """Largest mu such that mu-GDP is rejected by v correct guesses out of k (m canaries).

    The Gaussian form of the module docstring (arXiv:2410.22235) at level
    beta = 1 - confidence, with eps_lb = eps_{mu_lb}(delta).  No union bound.

    Example:
        >>> res = gdp_one_run_bound(20_000, 1_000, 900, confidence=0.95, delta=1e-6)
        >>> round(res.mu_lb, 3), round(res.epsilon_lb, 2)
        (0.638, 2.95)
    """
    m, k, v = _check_counts(m, k, v)
    beta = 1.0 - check_confidence(confidence)
    delta = check_delta(delta, allow_zero=False)
    mu = float(_gaussian_mu_bounds(m, np.array([k]), np.array([v]), beta)[0])
    return FdpBound(
        method="f-dp one-run bound (gaussian)",
        confidence=1.0 - beta,
        delta=delta,
        thresholds_examined=1,
        union_bound="none",
        mu_lb=mu,
        epsilon_lb=gdp_epsilon(mu, delta),
        n_guesses=k,
        n_correct=v,
        n_canaries=m,
    )


# --------------------------------------------------------------------------- from scores


@dataclass(frozen=True)
class FdpOneRunResult(AuditResult):
    """Gaussian f-DP one-run lower bounds on mu and on eps at ``delta``.

    Attributes:
        mu_lb: sup{mu >= 0 : mu-GDP rejected at beta / candidates} for the best candidate.
        epsilon_lb: eps at ``delta`` of a mu_lb-GDP mechanism.
        k_plus: number of "in" guesses (top scores) of the best candidate.
        k_minus: number of "out" guesses (bottom scores) of the best candidate.
        n_guesses: k = k_plus + k_minus.
        n_correct: v, the correct guesses.
        n_canaries: m, the number of canaries.
        seed: seed of the tie-breaking permutation (``None`` for a passed Generator).
        mu_kind, epsilon_kind, epsilon_assumption: as in :class:`FdpBound`.
    """

    mu_lb: float
    epsilon_lb: float
    k_plus: int
    k_minus: int
    n_guesses: int
    n_correct: int
    n_canaries: int
    seed: int | None
    mu_kind: str = "lower bound"
    epsilon_kind: str = "lower bound under assumption"
    epsilon_assumption: str = EPSILON_ASSUMPTION


def _audit(
    scores: np.ndarray,
    members: np.ndarray,
    pairs: Sequence[tuple[int, int]] | None,
    confidence: float,
    delta: float,
    seed: SeedLike,
) -> FdpOneRunResult:
    values, labels = check_scores_and_labels(scores, members)
    m = values.shape[0]
    beta = 1.0 - check_confidence(confidence)
    delta = check_delta(delta, allow_zero=False)
    checked = _check_pairs(default_one_run_candidates(m) if pairs is None else pairs, m)
    rng, recorded = resolve_rng(seed)
    top, bottom = _correct_counts(values, labels, rng)
    plus = np.array([pair[0] for pair in checked])
    minus = np.array([pair[1] for pair in checked])
    correct = top[plus] + bottom[minus]
    count = len(checked)
    bounds = _gaussian_mu_bounds(m, plus + minus, correct, beta / count)
    best = int(np.argmax(bounds))
    mu = float(bounds[best])
    return FdpOneRunResult(
        method="f-dp one-run (mahloujifar-melis-chaudhuri 2024), gaussian",
        confidence=1.0 - beta,
        delta=delta,
        thresholds_examined=count,
        union_bound="none" if count == 1 else f"bonferroni over {count} (k+, k-) candidates",
        mu_lb=mu,
        epsilon_lb=gdp_epsilon(mu, delta),
        k_plus=int(plus[best]),
        k_minus=int(minus[best]),
        n_guesses=int(plus[best] + minus[best]),
        n_correct=int(correct[best]),
        n_canaries=m,
        seed=recorded,
    )


def fdp_one_run_audit(
    scores: np.ndarray,
    members: np.ndarray,
    *,
    k_plus: int,
    k_minus: int,
    confidence: float = 0.95,
    delta: float = 1e-5,
    seed: SeedLike = 0,
) -> FdpOneRunResult:
    """Gaussian f-DP one-run bounds for a (k+, k-) fixed before looking at the labels.

    Args:
        scores: one score per canary from a single run, higher = member.
        members: 1 if the canary was included (each with probability 1/2), else 0.
        k_plus: guess "in" for the k_plus highest scores.
        k_minus: guess "out" for the k_minus lowest scores.
        confidence: 1 - beta.
        delta: the delta in (0, 1) at which mu_lb is turned into eps_lb.
        seed: seed of the tie-breaking permutation.

    Example:
        >>> rng = np.random.default_rng(0)
        >>> members = rng.integers(0, 2, 1000)
        >>> res = fdp_one_run_audit(members + 0.5 * rng.normal(size=1000), members, k_plus=100, k_minus=100)
        >>> res.n_correct, round(res.mu_lb, 2), round(res.epsilon_lb, 2)
        (199, 1.37, 6.33)
    """
    return _audit(scores, members, [(k_plus, k_minus)], confidence, delta, seed)


def fdp_one_run_search(
    scores: np.ndarray,
    members: np.ndarray,
    *,
    candidates: Sequence[tuple[int, int]] | None = None,
    confidence: float = 0.95,
    delta: float = 1e-5,
    seed: SeedLike = 0,
) -> FdpOneRunResult:
    """Gaussian f-DP one-run bounds maximised over (k+, k-) candidates (Bonferroni).

    Each candidate is tested at level beta / len(candidates), so the maximum is valid at
    ``confidence``.  ``candidates=None`` uses
    :func:`~bngp.audit.one_run.default_one_run_candidates`.
    """
    pairs = None if candidates is None else list(candidates)
    return _audit(scores, members, pairs, confidence, delta, seed)
