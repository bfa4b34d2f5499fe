"""The order-statistic grid rule (default of the many-run audits): known answers, ties, soundness.

Soundness margin: with R = 200 repetitions and a valid 95% bound, the number of repetitions
whose bound exceeds the true value is dominated by Bin(200, 0.05); each test allows at most
its 99.9% quantile (21), so a correct audit fails one of them with probability below 0.1%.
"""

import json
import math

import numpy as np
import pytest
from scipy import integrate, optimize, special, stats

from bngp.audit import gdp_audit, gdp_epsilon, grid_levels, grid_p_values, many_run_audit
from bngp.audit.order_grid import epsilon_family, gdp_family, tie_breaking_rng
from bngp.cli import main
from bngp.errors import InputError

REPS = 200
MAX_EXCEEDANCES = int(stats.binom.ppf(0.999, REPS, 0.05))


def test_grid_levels_are_fixed_powers_of_two_and_half_the_sample():
    assert grid_levels(1).tolist() == [1]
    assert grid_levels(2).tolist() == [1]
    assert grid_levels(4).tolist() == [1, 2]
    assert grid_levels(500).tolist() == [1, 2, 4, 8, 16, 32, 64, 128, 250]
    assert grid_levels(5000).shape == (13,)


def _forward_p(eps, n):
    """pi(eps) for one non-member below n members: E[f_eps(U)^n], U ~ Uniform(0, 1), by hand.

    f = e^eps u below u* = 1 / (1 + e^eps), else 1 - e^-eps (1 - u); with q = e^eps u* the
    two pieces integrate to q^n u* / (n + 1) and e^eps (1 - q^(n + 1)) / (n + 1).
    """
    q = special.expit(eps)
    return (q**n / (1 + math.exp(eps)) + math.exp(eps) * (1 - q ** (n + 1))) / (n + 1)


def _backward_p(eps, g, n):
    """pi'(eps) with TN = 1 of 1 non-member: E[f_eps(V)], V ~ Beta(g, n - g + 1), by hand.

    With c = u* above: e^eps E[V; V <= c] + P(V > c) - e^-eps E[1 - V; V > c], and
    E[V; V <= c] = a / (a + b) I_c(a + 1, b), E[1 - V; V > c] = b / (a + b) (1 - I_c(a, b + 1)).
    """
    a, b, c = g, n - g + 1, 1 / (1 + math.exp(eps))
    below = a / (a + b) * special.betainc(a + 1, b, c)
    above = b / (a + b) * (1 - special.betainc(a, b + 1, c))
    return math.exp(eps) * below + 1 - special.betainc(a, b, c) - math.exp(-eps) * above


def test_known_answer_one_nonmember_below_all_members():
    n = 400
    scores = np.concatenate([[0.0], np.arange(1.0, n + 1)])
    members = np.r_[0, np.ones(n, dtype=int)]
    levels = grid_levels(n)
    level = 0.05 / (1 + levels.size)
    for eps in (0.0, 0.5, 1.5):
        exact = _forward_p(eps, n)
        assert exact <= grid_p_values(1, 1, n, n, epsilon_family(0.0), eps, level)[0] <= 1.02 * exact + 1e-4 * level
        exact_back = np.array([_backward_p(eps, g, n) for g in levels])
        ours = grid_p_values(levels, n - levels + 1, 1, 1, epsilon_family(0.0), eps, level)
        assert np.all(exact_back <= ours) and np.all(ours <= 1.02 * exact_back + 1e-4 * level)
    assert _forward_p(0.0, n) == pytest.approx(1 / (n + 1))  # the non-member is the lowest of n + 1
    roots = [optimize.brentq(lambda e: _forward_p(e, n) - level, 0.0, 20.0)]
    roots += [optimize.brentq(lambda e, g=g: _backward_p(e, g, n) - level, 0.0, 20.0)
              for g in levels if _backward_p(0.0, g, n) < level]
    res = many_run_audit(scores, members)
    assert res.thresholds_examined == 1 + levels.size and res.error_fpr == pytest.approx(level)
    # Our p-values are at most 2% above the exact ones, so the bound is a little below the root.
    assert max(roots) - 0.05 <= res.epsilon_lb <= max(roots)
    assert res.epsilon_kind == "lower bound" and res.alpha_upper is None


def test_p_values_match_the_integral():
    rng = np.random.default_rng(3)
    for family, theta in ((epsilon_family(1e-3), 1.2), (gdp_family(), 0.8)):
        for _ in range(4):
            n = int(rng.integers(50, 400))
            a = int(rng.integers(1, n // 2))
            k = int(rng.integers(1, n))
            density = stats.beta(a, n - a + 1).pdf
            exact = integrate.quad(
                lambda v: special.betainc(k, n - k + 1, family.tpr(theta, np.array(v))) * density(v),
                0, 1, points=[a / (n + 1)], limit=400, epsabs=1e-13,
            )[0]
            ours = grid_p_values(a, n - a + 1, k, n, family, theta, 1e-3)[0]
            assert exact * (1 - 1e-6) <= ours <= 1.02 * exact + 1e-7


def test_all_tied_scores_give_zero_and_record_the_seed():
    members = np.repeat([0, 1], 300)
    res = many_run_audit(np.zeros(600), members, seed=5)
    assert res.epsilon_lb == 0.0 and gdp_audit(np.zeros(600), members).mu_lb == 0.0
    assert res.seed == 5


def test_binary_scores_break_ties_like_random_keys():
    # Randomized response with two score values: ties are broken by seeded uniform keys, so
    # the audit equals the audit of the ranks those keys give (which have no ties).
    rng = np.random.default_rng(0)
    keep = special.expit(2.0)
    members = np.repeat([0, 1], 1000)
    scores = np.concatenate([rng.random(1000) >= keep, rng.random(1000) < keep]).astype(float)
    res = many_run_audit(scores, members, seed=9, strategy="grid")
    assert res.seed == 9 and "ties broken at random" in res.decision_rule
    order = np.lexsort((tie_breaking_rng(9)[0].random(scores.size), scores))
    ranks = np.empty(scores.size)
    ranks[order] = np.arange(scores.size)
    plain = many_run_audit(ranks, members, seed=1, strategy="grid")
    assert plain.seed is None and res.epsilon_lb == plain.epsilon_lb
    assert res.threshold in (0.0, 1.0) and 1.3 < res.epsilon_lb <= 2.0
    assert many_run_audit(scores, members, seed=9, strategy="grid").epsilon_lb == res.epsilon_lb


def test_tie_keys_do_not_replay_the_stream_that_drew_the_scores():
    # Scores drawn from default_rng(0) and keys from default_rng(0) would put every tied
    # non-member before every tied member (eps_lb near 5 for eps = 1); the tagged stream does not.
    rng = np.random.default_rng(0)
    keep = special.expit(1.0)
    members = np.repeat([0, 1], 1000)
    scores = np.concatenate([rng.random(1000) >= keep, rng.random(1000) < keep]).astype(float)
    assert many_run_audit(scores, members, seed=0).epsilon_lb <= 1.0
    assert gdp_audit(scores, members, seed=0).mu_lb <= 2 * special.ndtri(keep)


def test_few_distinct_values_beat_the_old_union_bound():
    rng = np.random.default_rng(1)
    keep = special.expit(1.0)
    members = np.repeat([0, 1], 2000)
    scores = np.concatenate([rng.random(2000) >= keep, rng.random(2000) < keep]).astype(float)
    grid = many_run_audit(scores, members).epsilon_lb
    assert grid > many_run_audit(scores, members, strategy="bonferroni").epsilon_lb + 0.05


def _randomized_response(eps, n):
    keep = special.expit(eps)

    def draw(rng):
        return np.concatenate([rng.random(n) >= keep, rng.random(n) < keep]).astype(float)

    return draw


def _gaussian(mu, n):
    def draw(rng):
        return np.concatenate([rng.normal(size=n), rng.normal(size=n) + mu])

    return draw


N = 150
# (name, scores, true eps at delta, delta, true mu, explicit thresholds)
MECHANISMS = {
    "null": (_gaussian(0.0, N), 0.0, 0.0, 0.0, [0.0, 1.0]),
    "randomized-response": (_randomized_response(1.0, N), 1.0, 0.0, 2 * special.ndtri(special.expit(1.0)), [0.5]),
    "gaussian": (_gaussian(1.0, N), gdp_epsilon(1.0, 0.2), 0.2, 1.0, [0.5, 1.5]),
}
STRATEGY_ARGS = ("auto", "grid", "bonferroni", "split", "explicit")


@pytest.mark.parametrize("mechanism", sorted(MECHANISMS))
@pytest.mark.parametrize("strategy", STRATEGY_ARGS)
@pytest.mark.parametrize("audit", ["epsilon", "gdp"])
def test_false_claims_within_the_binomial_margin(mechanism, strategy, audit):
    draw, true_eps, delta, true_mu, fixed = MECHANISMS[mechanism]
    members = np.repeat([0, 1], N)
    kwargs = {"strategy": strategy, "thresholds": fixed if strategy == "explicit" else None}
    rng = np.random.default_rng(2024)
    if audit == "epsilon":
        values = [many_run_audit(draw(rng), members, delta=delta, seed=rng, **kwargs).epsilon_lb for _ in range(REPS)]
        truth = true_eps
    else:
        values = [gdp_audit(draw(rng), members, seed=rng, **kwargs).mu_lb for _ in range(REPS)]
        truth = true_mu
    exceed = int(np.sum(np.asarray(values) > truth))
    assert exceed <= MAX_EXCEEDANCES, (exceed, max(values), truth)


def test_gdp_record_labels_the_assumption(tmp_path, capsys):
    rng = np.random.default_rng(2)
    members = np.repeat([0, 1], 500)
    scores = rng.normal(size=1000) + members
    res = gdp_audit(scores, members)
    assert (res.mu_kind, res.epsilon_kind) == ("lower bound", "lower bound under assumption")
    assert "estimate" in res.epsilon_assumption and 0.3 < res.mu_lb <= 1.2
    path = tmp_path / "scores.csv"
    np.savetxt(path, np.c_[scores, members], delimiter=",", header="score,member", comments="")
    out = tmp_path / "audit.json"
    assert main(["audit", str(path), "--method", "gdp", "--out", str(out)]) == 0
    payload = json.loads(out.read_text())
    assert payload["epsilon_kind"] == "lower bound under assumption"
    assert payload["result"]["mu_lb"] == pytest.approx(res.mu_lb) and payload["result"]["strategy"] == "auto"
    assert main(["audit", str(path), "--method", "clopper-pearson", "--strategy", "bonferroni", "--force",
                 "--out", str(out)]) == 0
    assert json.loads(out.read_text())["epsilon_kind"] == "lower bound"
    capsys.readouterr()


@pytest.mark.parametrize(
    "args",
    [
        (1, 1, 2, 1, 0.0, 0.01),  # k > n
        (0, 1, 1, 1, 0.0, 0.01),  # a < 1
        (1, 1, 1, 1, -1.0, 0.01),  # theta < 0
        (1, 1, 1, 1, 0.0, 1.5),  # level outside (0, 1)
        (1, 1, np.nan, 1, 0.0, 0.01),
    ],
)
def test_bad_input_raises_input_error(args):
    a, b, k, n, theta, level = args
    with pytest.raises(InputError):
        grid_p_values(a, b, k, n, epsilon_family(0.0), theta, level)
    with pytest.raises(InputError):
        many_run_audit(np.array([1.0, 2.0]), np.array([0, 1]), strategy="Grid")
