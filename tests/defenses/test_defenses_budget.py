"""The reference mechanisms at a utility budget (bngp.defenses.shrinkage, .budget, .linear_optimum).

Known answers and their sources:

* the clipped loss's closed form against a Monte Carlo slow reference (400,000 draws per attribute:
  standard error below 0.1% of the loss), and against the unclipped closed forms it reduces to away
  from the bounds: E|c + s L| = |c| + s e^(-|c|/s) for Laplace(1) L, and the folded normal mean
  s sqrt(2/pi) e^(-c^2/2s^2) + c (1 - 2 Phi(-c/s)) for Gaussian e;
* every reference's expected loss equals the budget (Brent's method, relative 1e-9), and one
  release per calibration draw measures it within 2%;
* the linear-Gaussian decoder's d_k against the posterior covariance formed by an explicit inverse;
* the eps of a shrinkage mechanism against sum_j (1 - a_j) / (N s_j) and, at a = 0 with one scale,
  against the Laplace mechanism of the paper's sensitivity |Q| / N.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy.stats import norm

from bngp.data.priors import UniformSubsetPrior
from bngp.defenses import DefenseContext, LaplaceDefense, parse_defense_spec, paper_sensitivity
from bngp.defenses.budget import BudgetSetting, parse_budget, reference_at_budget
from bngp.defenses.linear_optimum import attribute_variances, decoder_aucs, optimise_precisions
from bngp.defenses.shrinkage import ShrinkNoiseDefense, clipped_deviation_loss
from bngp.errors import InputError
from bngp.release.sampling import release_mechanism, sample_releases
from bngp.rng import torch_generator

N_MEMBERS = 30


@pytest.mark.parametrize("law", ["laplace", "gaussian"])
def test_clipped_loss_matches_monte_carlo(law) -> None:
    rng = np.random.default_rng(0)
    x = rng.uniform(0, 1, 30)
    c = rng.normal(0, 0.1, 30)
    s = rng.uniform(0.01, 0.3, 30)
    draws = rng.standard_normal((400_000, 1)) if law == "gaussian" else rng.laplace(size=(400_000, 1))
    monte_carlo = np.abs(np.clip(x + c + s * draws, 0, 1) - x).mean(axis=0)
    np.testing.assert_allclose(clipped_deviation_loss(law, c, s, x), monte_carlo, rtol=5e-3, atol=2e-4)


@pytest.mark.parametrize("law", ["laplace", "gaussian"])
def test_clipped_loss_far_from_the_bounds_is_the_whole_closed_form(law) -> None:
    """Where both bounds lie more than 9 (Gaussian) or 44 (Laplace) scales away, clipped_deviation_loss drops the
    clipped terms; on 200,000 draws spanning near and far (scales 1e-4 to 0.3) it equals the whole closed form of
    the module docstring evaluated everywhere (relative 1e-13: where the noise reaches neither the bounds nor 0 the loss
    is |c|, to which the whole form rounds)."""
    from bngp.defenses.shrinkage import _cdf_and_partial_mean

    rng = np.random.default_rng(1)
    x, c, s = rng.uniform(0, 1, 200_000), rng.normal(0, 0.05, 200_000), 10 ** rng.uniform(-4, -0.5, 200_000)
    f_low, m_low, _ = _cdf_and_partial_mean(law, -x, c, s)
    _, m_zero, _ = _cdf_and_partial_mean(law, np.zeros_like(x), c, s)
    f_high, m_high, _ = _cdf_and_partial_mean(law, 1.0 - x, c, s)
    whole = np.maximum(m_high - 2.0 * m_zero + m_low + x * f_low + (1.0 - x) * (1.0 - f_high), 0.0)
    far = np.minimum(x + c, 1 - x - c) >= (9.0 if law == "gaussian" else 44.0) * s
    assert 0.2 < far.mean() < 0.8  # both branches are exercised
    np.testing.assert_allclose(clipped_deviation_loss(law, c, s, x), whole, rtol=1e-13, atol=1e-300)


@pytest.mark.parametrize("law", ["laplace", "gaussian"])
def test_clipped_loss_slopes_are_its_derivatives(law) -> None:
    """clipped_deviation_loss_and_slopes: the same loss, and derivatives in the scale and in the shift equal to the
    central finite differences of the loss (steps 1e-6 of s; relative 1e-5), near and far from the bounds; where
    s = 0, 0 in the scale and g'(c) in the shift (-1, +1, or 0 where the clipped release does not move)."""
    from bngp.defenses.shrinkage import clipped_deviation_loss_and_slopes

    rng = np.random.default_rng(2)
    x, c, s = rng.uniform(0, 1, 20_000), rng.normal(0, 0.05, 20_000), 10 ** rng.uniform(-3, -0.3, 20_000)
    loss, by_scale, by_shift = clipped_deviation_loss_and_slopes(law, c, s, x)
    np.testing.assert_array_equal(loss, clipped_deviation_loss(law, c, s, x))
    h = 1e-6 * s
    finite = (clipped_deviation_loss(law, c, s + h, x) - clipped_deviation_loss(law, c, s - h, x)) / (2 * h)
    assert np.abs(by_scale).max() > 0.1
    np.testing.assert_allclose(by_scale, finite, rtol=1e-5, atol=1e-7)
    finite = (clipped_deviation_loss(law, c + h, s, x) - clipped_deviation_loss(law, c - h, s, x)) / (2 * h)
    assert by_shift.min() < -0.5 and by_shift.max() > 0.5
    np.testing.assert_allclose(by_shift, finite, rtol=1e-5, atol=1e-7)
    x, c = np.array([0.5, 0.5, 0.1, 0.9]), np.array([-0.2, 0.2, -0.3, 0.2])
    _, by_scale, by_shift = clipped_deviation_loss_and_slopes(law, c, np.zeros(4), x)
    assert not by_scale.any() and by_shift.tolist() == [-1.0, 1.0, 0.0, 0.0]


@pytest.mark.parametrize("law", ["laplace", "gaussian"])
def test_clipped_loss_keeps_the_broadcast_shape_of_its_arguments(law) -> None:
    """The loss and its slopes have the broadcast shape of (shift, scale, x_hat), 0-d included, with the values of the
    same entries computed in one flat array (the entries are gathered by flat indices)."""
    from bngp.defenses.shrinkage import clipped_deviation_loss_and_slopes

    shift, scale, x_hat = np.array([[0.0], [0.02], [-0.3]]), np.array([0.1, 0.0, 0.01, 0.3]), 0.05
    flat = [part.reshape(3, 4) for part in clipped_deviation_loss_and_slopes(
        law, np.repeat(shift, 4, axis=1).ravel(), np.tile(scale, 3), np.full(12, x_hat))]
    for got, expected in zip(clipped_deviation_loss_and_slopes(law, shift, scale, x_hat), flat):
        assert got.shape == (3, 4)
        np.testing.assert_array_equal(got, expected)
    for i, j in [(0, 0), (1, 2), (2, 3)]:  # 0-d arguments: the entry itself (the noise reaches 0 or a bound there)
        parts = clipped_deviation_loss_and_slopes(law, float(shift[i, 0]), float(scale[j]), x_hat)
        assert all(np.ndim(part) == 0 for part in parts)
        assert [float(part) for part in parts] == [float(part[i, j]) for part in flat]
    # E|clip(0.1 e, 0, 1)| = int_0^1 P(0.1 e > u) du: 0.05 (1 - e^-10) for Laplace e, 0.1 phi(0) (to 1e-23) for Gaussian e
    known = 0.05 * (1.0 - math.exp(-10.0)) if law == "laplace" else 0.1 / math.sqrt(2.0 * math.pi)
    assert float(clipped_deviation_loss(law, 0.0, 0.1, 0.0)) == pytest.approx(known, rel=1e-12)


def test_clipped_loss_reduces_to_the_unclipped_forms_and_to_the_exact_shift() -> None:
    c = np.array([-0.01, 0.0, 0.004, 0.02])
    s = np.full(4, 0.005)
    x = np.full(4, 0.5)  # bounds 0.5 away: 100 scales
    laplace = np.abs(c) + s * np.exp(-np.abs(c) / s)
    gaussian = s * math.sqrt(2 / math.pi) * np.exp(-c**2 / (2 * s**2)) + c * (1 - 2 * norm.cdf(-c / s))
    np.testing.assert_allclose(clipped_deviation_loss("laplace", c, s, x), laplace, rtol=1e-12)
    np.testing.assert_allclose(clipped_deviation_loss("gaussian", c, s, x), gaussian, rtol=1e-12)
    xs = np.array([0.0, 0.1, 0.95])
    shifts = np.array([-0.2, 0.3, 0.2])
    np.testing.assert_array_equal(clipped_deviation_loss("laplace", shifts, 0.0, xs), np.abs(np.clip(xs + shifts, 0, 1) - xs))
    with pytest.raises(InputError, match="noise"):
        clipped_deviation_loss("cauchy", c, s, x)


@pytest.mark.parametrize(("text", "expected"), [("0.5x", (0.5, True)), ("0.0073", (0.0073, False)),
                                                 (" 0.25X ", (0.25, True)), (0.01, (0.01, False))])
def test_parse_budget(text, expected) -> None:
    assert parse_budget(text) == expected


@pytest.mark.parametrize("text", ["half", "-0.5x", "0", "nanx", "x"])
def test_bad_budgets_are_one_line_errors(text) -> None:
    with pytest.raises(InputError) as info:
        parse_budget(text)
    assert "\n" not in str(info.value)


def test_a_budget_must_lie_below_the_data_independent_loss(wide_setting) -> None:
    assert wide_setting.resolve("0.5x").value == pytest.approx(0.5 * wide_setting.data_independent_loss, rel=1e-15)
    with pytest.raises(InputError, match="not below the data-independent release's loss"):
        wide_setting.resolve("1x")
    with pytest.raises(InputError, match="not below"):
        wide_setting.resolve(str(wide_setting.data_independent_loss * 1.01))


@pytest.mark.parametrize(("kind", "options"), [("laplace", {}), ("gaussian", {}), ("shrinkage", {"shrink": 0.3}),
                                               ("shrinkage", {"shrink": 0.3, "law": "gaussian"}),
                                               ("suppression", {}), ("linear-optimal", {}),
                                               ("linear-optimal", {"law": "gaussian"})])
@pytest.mark.parametrize("fraction", ["0.5x", "0.75x"])
def test_references_spend_exactly_the_budget(kind, options, fraction, wide_setting) -> None:
    budget = wide_setting.resolve(fraction)
    defense = reference_at_budget(kind, wide_setting, budget, **options)
    assert wide_setting.loss(defense) == pytest.approx(budget.value, rel=1e-9)
    # one release per calibration draw: the product's sampler realises the closed-form loss
    assert wide_setting.measured_loss(defense) == pytest.approx(budget.value, rel=0.02)


def test_the_budget_root_is_newtons_kept_in_its_bracket() -> None:
    """_newton_from: the root of an increasing function (0.3 tanh(c) + 0.05 c - 0.2, found by Brent's method to
    1e-15) to a relative 1e-11 from starts below and above it, in fewer evaluations than Brent's method to the same
    tolerance; a derivative of 0 falls back to doubling, then bisection; a function that never reaches 0 is refused
    with a typed error."""
    from scipy.optimize import brentq

    from bngp.defenses.budget import _newton_from

    calls = []

    def excess(c: float) -> tuple[float, float]:
        calls.append(c)
        return 0.3 * np.tanh(c) + 0.05 * c - 0.2, 0.3 / np.cosh(c) ** 2 + 0.05

    root = brentq(lambda c: excess(c)[0], 0.0, 10.0, xtol=1e-15, rtol=1e-15)
    brent = brentq(lambda c: excess(c)[0], 0.0, 10.0, xtol=1e-14, rtol=1e-12, full_output=True)[1].function_calls
    for start in (0.05, 0.8, 7.0):
        calls.clear()
        assert _newton_from(excess, start, 0.2) == pytest.approx(root, rel=1e-11)
        assert len(calls) < brent
    flat = _newton_from(lambda c: (excess(c)[0], 0.0), 0.1, 0.2)
    assert flat == pytest.approx(root, rel=1e-11)
    with pytest.raises(InputError, match="no noise scale reaches the budget"):
        _newton_from(lambda c: (0.1 * np.tanh(c) - 0.2, 0.1 / np.cosh(c) ** 2), 0.5, 0.2)


def test_time_sharing_releases_the_data_independent_statistic_with_probability_u_over_l0(wide_setting) -> None:
    budget = wide_setting.resolve("0.25x")
    defense = reference_at_budget("time-sharing", wide_setting, budget)
    b = torch.as_tensor(wide_setting.memberships)
    releases = sample_releases(release_mechanism(wide_setting.population.genotypes), defense, b, torch_generator(1))
    shared = np.all(np.abs(releases - wide_setting.target) < 1e-6, axis=1).mean()
    assert shared == pytest.approx(0.25, abs=0.03)  # 2,000 draws: standard error 0.01
    assert wide_setting.measured_loss(defense) == pytest.approx(budget.value, rel=0.1)


def test_suppression_replaces_whole_attributes_in_order(wide_setting) -> None:
    defense = reference_at_budget("suppression", wide_setting, wide_setting.resolve("0.5x"))
    partial = (defense.shrink > 0) & (defense.shrink < 1)
    assert partial.sum() <= 1 and np.all(defense.scale == 0)
    assert 0 < defense.details["suppressed"] == int((defense.shrink == 1).sum())
    assert defense.guarantee is None and defense.privacy_parameters()[0] == math.inf


def test_shrinkage_alone_above_the_budget_is_refused(wide_setting) -> None:
    with pytest.raises(InputError, match="the shrinkage alone costs"):
        reference_at_budget("shrinkage", wide_setting, wide_setting.resolve("0.3x"), shrink=0.9)


def test_guarantee_is_the_closed_form(wide_setting, wide_population) -> None:
    budget = wide_setting.resolve("0.5x")
    plain = reference_at_budget("laplace", wide_setting, budget)
    scale = float(plain.scale[0])
    laplace = LaplaceDefense(scale, paper_sensitivity("l1", wide_population.n_attributes, N_MEMBERS))
    assert plain.guarantee.epsilon == pytest.approx(laplace.guarantee.epsilon, rel=1e-12)
    shrunk = reference_at_budget("shrinkage", wide_setting, budget, shrink=0.3)
    expected = float(np.sum((1 - shrunk.shrink) / (N_MEMBERS * shrunk.scale)))
    assert shrunk.guarantee.epsilon == pytest.approx(expected, rel=1e-12)
    gaussian = reference_at_budget("shrinkage", wide_setting, budget, shrink=0.3, law="gaussian")
    mu = math.sqrt(np.sum(((1 - gaussian.shrink) / (N_MEMBERS * gaussian.scale)) ** 2))
    assert gaussian.guarantee.gdp_mu == pytest.approx(mu, rel=1e-12)


def test_decoder_snr_matches_the_explicit_posterior(wide_population) -> None:
    """d_k^2 = (p - C_kk) / (p C_kk) (module docstring of linear_optimum) against C formed by np.linalg.inv
    and the decoder's signal (G M)_kk and noise variance (G S G^T)_kk + p sum_{l != k} (G M)_kl^2."""
    genotypes = wide_population.genotypes.astype(np.float64)
    k = genotypes.shape[0]
    theta = N_MEMBERS / k
    p = theta * (1 - theta)
    rng = np.random.default_rng(3)
    shrink, sigma = rng.uniform(0, 0.8, genotypes.shape[1]), rng.uniform(0.005, 0.05, genotypes.shape[1])
    m = ((1 - shrink)[:, None] * (genotypes - genotypes.mean(axis=0)).T) / N_MEMBERS
    s_inv = np.diag(1 / sigma**2)
    c = np.linalg.inv(m.T @ s_inv @ m + np.eye(k) / p)
    gain = c @ m.T @ s_inv
    gm = gain @ m
    noise = np.diag(gain @ np.diag(sigma**2) @ gain.T) + p * ((gm**2).sum(axis=1) - np.diag(gm) ** 2)
    explicit = norm.cdf(np.diag(gm) / np.sqrt(noise) / math.sqrt(2))
    precisions = (1 - shrink) ** 2 / sigma**2
    np.testing.assert_allclose(decoder_aucs(precisions, genotypes, N_MEMBERS), explicit, rtol=1e-9)


def test_attribute_variances_match_sampling_without_replacement(wide_population, wide_setting) -> None:
    np.testing.assert_allclose(attribute_variances(wide_population.genotypes, N_MEMBERS), wide_setting.statistics.var(axis=0),
                               rtol=0.1)  # 2,000 draws: the variance's relative standard error is about 3%


def test_the_optimum_is_no_worse_than_its_uniform_start_and_spends_the_budget(wide_population) -> None:
    genotypes = wide_population.genotypes
    variances = attribute_variances(genotypes, N_MEMBERS)
    optimum = optimise_precisions(genotypes, N_MEMBERS, 0.5)
    scale = math.sqrt(2 / math.pi) * np.sqrt(variances)
    assert optimum.model_loss == pytest.approx(0.5 * scale.mean(), rel=1e-6)
    uniform = np.where(variances > 0, 0.75 / (0.25 * np.where(variances > 0, variances, 1.0)), 0.0)  # retention 3/4
    assert optimum.model_auc <= decoder_aucs(uniform, genotypes, N_MEMBERS).mean() + 1e-12
    np.testing.assert_allclose(optimum.sigma**2, (1 - optimum.shrink) * optimum.shrink * variances, rtol=1e-9)
    with pytest.raises(InputError, match="relative budget"):
        optimise_precisions(genotypes, N_MEMBERS, 1.0)


@pytest.mark.parametrize("spec", ["budget-laplace:budget=0.5x", "shrinkage:budget=0.5x,shrink=0.2,noise=gaussian",
                                  "linear-optimal:budget=0.004", "suppression:budget=0.5x", "time-sharing:budget=0.5x"])
def test_specs_build_the_reference(spec, wide_population, wide_setting) -> None:
    defense = parse_defense_spec(spec, DefenseContext(wide_population, N_MEMBERS))
    assert defense.describe()["name"] == spec.split(":")[0]
    if isinstance(defense, ShrinkNoiseDefense):
        expected = 0.004 if "0.004" in spec else 0.5 * wide_setting.data_independent_loss
        assert wide_setting.loss(defense) == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize(("spec", "message"), [
    ("budget-laplace", "needs `budget=U`"),
    ("budget-laplace:budget=2x", "not below the data-independent"),
    ("shrinkage:budget=0.5x", "needs `shrink=A`"),
    ("shrinkage:budget=0.5x,shrink=x", "must be a number"),
    ("shrinkage:budget=0.5x,shrink=1.5", "must be in [0, 1]"),
    ("linear-optimal:budget=0.5x,noise=cauchy", "`noise` must be one of"),
    ("suppression:budget=0.5x,shrink=0.1", "does not take `shrink`"),
])
def test_bad_budget_specs(spec, message, wide_population) -> None:
    with pytest.raises(InputError) as info:
        parse_defense_spec(spec, DefenseContext(wide_population, N_MEMBERS))
    assert message in str(info.value) and "\n" not in str(info.value)


def test_prior_draws_are_the_uniform_subset_prior(wide_population, wide_setting) -> None:
    assert wide_setting.memberships.shape == (2000, wide_population.n_individuals)
    assert np.all(wide_setting.memberships.sum(axis=1) == N_MEMBERS)
    again = BudgetSetting.of(wide_population, N_MEMBERS)
    np.testing.assert_array_equal(again.memberships, wide_setting.memberships)  # fixed seed: one measurement
    assert isinstance(UniformSubsetPrior(wide_population.n_individuals, N_MEMBERS).marginals, np.ndarray)


def test_a_shrinkage_that_spends_the_whole_budget_adds_no_noise(wide_setting) -> None:
    """One shrinkage a costs exactly a L0 (|a (t - f(D))| = a |t - f(D)|, never clipped), so at a = U / L0 the shrinkage
    alone is the budget, up to rounding on either side: the reference is built with no noise instead of refused or
    failing its root finding."""
    defense = reference_at_budget("shrinkage", wide_setting, wide_setting.resolve("0.5x"), shrink=0.5)
    assert np.max(defense.scale) < 1e-9  # none, or what a rounding below the budget leaves
    assert wide_setting.loss(defense) == pytest.approx(0.5 * wide_setting.data_independent_loss, rel=1e-9)
