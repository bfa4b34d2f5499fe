"""DP mechanisms matched to a defender trained after fixed Gaussian mechanisms (arXiv:2410.07414,
App. L.6): the release of c = m + 1 copies of f(D), its utility loss over all c |Q| columns, and
the guarantee of one mechanism on the concatenated statistic (sensitivity c Delta_1, sqrt(c)
Delta_2, Delta_inf)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from bngp.data.priors import UniformSubsetPrior
from bngp.defenses.calibration import gaussian_epsilon
from bngp.defenses.dp import GaussianDefense, LaplaceDefense, LinfKNormDefense
from bngp.defenses.matched import (
    attribute_weights,
    expected_clipped_loss,
    match_utility,
    release_weights,
    utility_loss,
)
from bngp.defenses.matched_run import MatchedDefense, matched_to_run
from bngp.defenses.registry import DefenseContext, parse_defense_spec
from bngp.defenses.sensitivity import Sensitivity, composed_sensitivity, paper_sensitivity
from bngp.defenses.trained import load_run_defense
from bngp.errors import InputError
from bngp.game import Game, GameConfig
from bngp.release.mechanism import SummaryStatistics
from bngp.release.sampling import release_mechanism, sample_releases
from bngp.rng import torch_generator

MEMBERS = 20
SIGMA = 0.05  # the fixed Gaussian mechanism composed before the learned one (m = 1, c = 2)
DELTA = 1e-5


@pytest.fixture(scope="module")
def composed_run(small_population, tmp_path_factory):
    """A tiny defender trained after one fixed Gaussian mechanism (4 steps, about 3 s)."""
    run_dir = tmp_path_factory.mktemp("composed") / "run"
    config = GameConfig.from_flat(dict(steps=4, fixed_gaussian_sigmas=(SIGMA,), fresh_check_steps=0, eval_every=2,
                        checkpoint_every=2, attacker_refit_every=2, batch_size=8, eval_batch=16, refit_releases=64,
                        seed=0))
    Game(small_population, UniformSubsetPrior(small_population.n_individuals, MEMBERS), config).train(
        run_dir, progress=False)
    return run_dir


@pytest.fixture(scope="module")
def context(small_population):
    return DefenseContext(small_population, MEMBERS)


def _draws(small_population, seed: int = 0, draws: int = 200) -> torch.Tensor:
    """The membership draws matched_to_run measures the target on (same prior, same seed)."""
    prior = UniformSubsetPrior(small_population.n_individuals, MEMBERS)
    return torch.as_tensor(prior.sample(draws, np.random.default_rng(seed)))


def test_concatenated_statistic_is_the_statistic_of_the_tiled_attributes(small_population):
    """F(D) = [f(D), f(D), f(D)] = b [Z, Z, Z] / sum(b): the identity the composed audits rest on."""
    b = _draws(small_population, draws=5).float()
    composed = release_mechanism(small_population.genotypes, 3)
    tiled = SummaryStatistics(np.tile(small_population.genotypes, (1, 3)))
    assert composed.n_outputs == tiled.n_outputs == 3 * small_population.n_attributes
    assert torch.equal(composed.statistic(b), tiled.statistic(b))


@pytest.mark.parametrize(
    ("norm", "factor"), [("l1", 3.0), ("l2", math.sqrt(3.0)), ("linf", 1.0), ("hamming", 3.0)]
)
def test_composed_sensitivity(norm, factor):
    base = paper_sensitivity(norm, 120, MEMBERS)
    composed = composed_sensitivity(base, 3)
    assert composed.value == pytest.approx(factor * base.value, rel=1e-15)
    assert (composed.norm, composed.neighbouring, composed.source) == (base.norm, base.neighbouring, base.source)
    assert composed_sensitivity(base, 1) is base
    with pytest.raises(InputError, match="composition"):
        composed_sensitivity(base, 0)


def test_app_l6_known_answer():
    """Five copies of the |Q| = 5000, n = 400 release (App. L.3/L.6): l1 sensitivity 5 x 12.5, so
    Laplace noise of mean |xi| 1e-4 on every output is (5 x 1.25e5)-DP."""
    calibration = match_utility("laplace", 1e-4, paper_sensitivity("l1", 5000, 400), composition=5)
    assert calibration.scale == pytest.approx(1e-4, rel=1e-15)
    assert calibration.sensitivity.value == pytest.approx(62.5, rel=1e-15)
    assert calibration.epsilon == pytest.approx(6.25e5, rel=1e-12)
    assert calibration.to_dict()["composition"] == 5 and calibration.to_dict()["copy_sensitivity"] == 12.5
    defense = calibration.defense()
    assert defense.composition == 5 and defense.guarantee.epsilon == pytest.approx(6.25e5, rel=1e-12)
    # l-inf: noise dimension 5 |Q|, eps unchanged by the composition
    linf = match_utility("linf", 1e-3, paper_sensitivity("linf", 100, 50), n_attributes=100, composition=5)
    assert linf.scale == pytest.approx(2e-3 / 501, rel=1e-12)
    assert linf.epsilon == pytest.approx((1 / 50) / linf.scale, rel=1e-12)


def test_release_weights_extend_kappa_to_every_copy():
    kappa = np.array([3.0, 1.0, 0.0, 4.0])
    weights = release_weights(kappa, 4, 3)
    assert weights.shape == (12,) and weights.sum() == pytest.approx(1.0)
    np.testing.assert_allclose(weights.reshape(3, 4), np.tile(attribute_weights(kappa, 4), (3, 1)) / 3)
    np.testing.assert_array_equal(release_weights(None, 4, 2), np.full(8, 1 / 8))
    np.testing.assert_array_equal(release_weights(kappa, 4, 1), attribute_weights(kappa, 4))


@pytest.mark.parametrize("kind", ["laplace", "gaussian", "linf"])
def test_clipped_match_of_copies_with_kappa(kind):
    """On c copies of x_hat with kappa tiled, Laplace and Gaussian need the scale of one copy (their
    per-coordinate law does not depend on the dimension) at c (Laplace) or sqrt(c) (Gaussian) times
    the per-copy privacy loss; l-inf lives in dimension c |Q| and needs a smaller scale."""
    rng = np.random.default_rng(5)
    x_hat = rng.integers(0, 21, size=(6, 30)) / 20
    kappa = rng.uniform(0, 5, size=30)
    sensitivity = paper_sensitivity({"laplace": "l1", "gaussian": "l2", "linf": "linf"}[kind], 30, 20)
    delta = DELTA if kind == "gaussian" else None
    single = match_utility(kind, 0.02, sensitivity, delta=delta, x_hat=x_hat, kappa=kappa)
    composed = match_utility(kind, 0.02, sensitivity, delta=delta, x_hat=np.tile(x_hat, (1, 3)), kappa=kappa,
                             composition=3)
    weights = release_weights(kappa, 30, 3)
    assert expected_clipped_loss(kind, composed.scale, np.tile(x_hat, (1, 3)), weights) == pytest.approx(0.02, rel=1e-9)
    if kind == "linf":
        assert composed.scale < single.scale
        assert composed.epsilon == pytest.approx((1 / 20) / composed.scale, rel=1e-12)
        return
    assert composed.scale == pytest.approx(single.scale, rel=1e-9)
    if kind == "laplace":
        assert composed.epsilon == pytest.approx(3 * single.epsilon, rel=1e-9)
    else:
        released = math.sqrt(3) * math.sqrt(30) / 20
        assert composed.epsilon == pytest.approx(gaussian_epsilon(composed.scale, DELTA, released), rel=1e-12)
        assert composed.defense().guarantee.gdp_mu == pytest.approx(math.sqrt(3) * single.defense().guarantee.gdp_mu)
    with pytest.raises(InputError, match="multiple of composition"):
        match_utility(kind, 0.02, sensitivity, delta=delta, x_hat=x_hat[:, :29], kappa=None, composition=3)


@pytest.mark.parametrize("defense", [LaplaceDefense(0.01), GaussianDefense(0.01), LinfKNormDefense(0.001)],
                         ids=["laplace", "gaussian", "linf"])
def test_dp_noise_is_shaped_like_a_composed_x_hat(defense, small_population):
    q = small_population.n_attributes
    x_hat = torch.full((3, 2 * q), 0.5)
    noise = defense.noise(torch.zeros((3, small_population.n_individuals)), x_hat, torch_generator(0))
    assert noise.shape == (3, 2 * q) and noise.dtype == x_hat.dtype
    if isinstance(defense, LinfKNormDefense):  # the K-norm law in dimension d = 2|Q|: E|xi_j| = (d + 1) a / 2
        assert float(noise.abs().mean()) == pytest.approx((2 * q + 1) * 0.001 / 2, rel=0.25)


@pytest.mark.parametrize("kind", ["laplace", "gaussian", "linf"])
def test_matched_composed_run_releases_all_copies_at_the_run_utility_loss(kind, composed_run, context,
                                                                          small_population):
    q, n = small_population.n_attributes, MEMBERS
    trained = load_run_defense(composed_run, context)
    assert trained.composition == 2
    defense, record = matched_to_run(kind, str(composed_run), context, delta=DELTA if kind == "gaussian" else None)
    assert defense.composition == 2 and record["composition"] == 2
    assert len(record["block_utility_losses"]) == 2 and record["weights"] == "uniform"  # the run's kappa is scalar
    assert record["target_utility_loss"] == pytest.approx(np.mean(record["block_utility_losses"]), rel=1e-12)
    # the closed-form clipped loss over all 2|Q| columns of the same x_hat is the run's target
    b = _draws(small_population)
    mechanism = release_mechanism(small_population.genotypes, defense.composition)
    x_hat = mechanism.statistic(b).double().numpy()
    assert x_hat.shape == (200, 2 * q)
    scale = record["scale"]
    assert expected_clipped_loss(kind, scale, x_hat) == pytest.approx(record["target_utility_loss"], rel=1e-9)
    # its releases have 2|Q| columns and a measured loss within 4 Monte Carlo standard errors of the target
    releases = sample_releases(mechanism, defense, b, torch_generator(1))
    assert releases.shape == (200, 2 * q)
    per_row = np.abs(releases - x_hat).mean(axis=1)
    assert utility_loss(releases - x_hat) == pytest.approx(per_row.mean())
    assert per_row.mean() == pytest.approx(record["target_utility_loss"], abs=4 * per_row.std() / math.sqrt(200))
    # its guarantee is that of one mechanism on [f(D), f(D)] (known answer with the composed sensitivity)
    guarantee = defense.guarantee
    if kind == "laplace":
        assert guarantee.sensitivity == pytest.approx(2 * q / n, rel=1e-15)
        assert guarantee.epsilon == pytest.approx(2 * (q / n) / scale, rel=1e-12)
    elif kind == "gaussian":
        released = math.sqrt(2) * math.sqrt(q) / n
        assert guarantee.sensitivity == pytest.approx(released, rel=1e-15)
        assert guarantee.epsilon == pytest.approx(gaussian_epsilon(scale, DELTA, released), rel=1e-12)
        assert guarantee.gdp_mu == pytest.approx(released / scale, rel=1e-12)
    else:
        assert guarantee.sensitivity == pytest.approx(1 / n, rel=1e-15)
        assert guarantee.epsilon == pytest.approx((1 / n) / scale, rel=1e-12)
    assert record["epsilon"] == pytest.approx(guarantee.epsilon, rel=1e-15)
    assert record["copy_sensitivity"] == pytest.approx(
        paper_sensitivity({"laplace": "l1", "gaussian": "l2", "linf": "linf"}[kind], q, n).value)


def test_matched_spec_on_a_composed_run(composed_run, context):
    spec = f"matched-laplace:run={composed_run},sensitivity=0.5"
    defense = parse_defense_spec(spec, context)
    assert isinstance(defense, MatchedDefense) and defense.name == "matched-laplace"
    assert defense.composition == 2
    description = defense.describe()
    assert description["composition"] == 2 and description["matched"]["copy_sensitivity"] == 0.5
    assert defense.guarantee.sensitivity == 1.0  # a user's sensitivity is that of one copy f(D)
    assert defense.guarantee.epsilon == pytest.approx(1.0 / defense.record["scale"], rel=1e-12)


def test_wrong_width_mechanism_is_refused(composed_run, context, small_population):
    b = _draws(small_population, draws=3).numpy()
    trained = load_run_defense(composed_run, context)
    matched = parse_defense_spec(f"matched-gaussian:run={composed_run},delta=1e-5", context)
    for defense in (trained, matched):
        for copies in (1, 3):
            with pytest.raises(InputError, match="copies of the statistic"):
                sample_releases(release_mechanism(small_population.genotypes, copies), defense, b, torch_generator(0))


def test_uncomposed_match_is_unchanged(tiny_run, context, small_population):
    """c = 1: the record and the calibration of the plain match, computed here step by step."""
    defense, record = matched_to_run("laplace", str(tiny_run), context)
    assert defense.composition == 1 and isinstance(defense, LaplaceDefense)
    assert set(record) == {"run", "target_utility_loss", "draws", "kind", "target_loss", "loss_model", "scale",
                           "epsilon", "delta", "sensitivity", "norm", "neighbouring"}
    trained = load_run_defense(tiny_run, context)
    b = _draws(small_population)
    mechanism = release_mechanism(small_population.genotypes, 1)
    with torch.no_grad():
        x_hat = mechanism.statistic(b)
        x = mechanism.release(b, trained.noise(b, x_hat, torch_generator(0)))
    target = utility_loss((x - x_hat).double().numpy())
    expected = match_utility("laplace", target, paper_sensitivity("l1", small_population.n_attributes, MEMBERS),
                             x_hat=x_hat.double().numpy())
    assert record["target_utility_loss"] == target
    assert record["scale"] == expected.scale and record["epsilon"] == expected.epsilon
    assert record["sensitivity"] == small_population.n_attributes / MEMBERS
    assert isinstance(expected.sensitivity, Sensitivity) and expected.composition == 1
