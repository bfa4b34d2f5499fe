import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from bngp.attacks.training import AttackerTrainingConfig, OptimisationTrace, train_attacker
from bngp.data.priors import UniformSubsetPrior
from bngp.errors import InputError
from bngp.game import AttackerSettings, FreshCheckSettings, Game, GameConfig
from bngp.release.composition import ComposedMechanism
from bngp.release.mechanism import SummaryStatistics
from bngp.metrics import auc, release_aucs
from bngp.attacks.network import AttackerSpec, block_inversion_head
import bngp.linear.calibration as calibration_module
from bngp.linear import affine_calibration, logistic_calibration


def _sampler(population, noise: float, seed: int):
    prior = UniformSubsetPrior(population.n_individuals, 20)
    mechanism = SummaryStatistics(population.genotypes)
    generator = torch.Generator().manual_seed(seed)

    def sample(n):
        b = prior.sample_torch(n, generator)
        xi = noise * torch.randn((n, population.n_attributes), generator=generator)
        return mechanism.release(b, xi), b

    return sample


@pytest.mark.parametrize(
    "overrides, field",
    [
        (dict(steps=-1), "steps"),  # steps=0 is valid: the warm-started attacker alone
        (dict(steps=1.5), "steps"),
        (dict(batch_size=1), "batch_size"),
        (dict(validation_draws=1), "validation_draws"),
        (dict(validate_every=0), "validate_every"),
        (dict(decay_every=0), "decay_every"),
        (dict(shadow_releases=2), "shadow_releases"),
        (dict(lr=0.0), "lr"),
        (dict(lr=float("nan")), "lr"),
        (dict(weight_decay=-1e-5), "weight_decay"),
        (dict(lr_decay=1.5), "lr_decay"),
        (dict(init="ridge"), "init"),
        (dict(patience=0), "patience"),
        (dict(patience=2.0), "patience"),
        (dict(patience=True), "patience"),
    ],
)
def test_training_config_is_validated_on_construction(overrides, field):
    with pytest.raises(InputError, match=f"^`{field}` must") as raised:
        AttackerTrainingConfig(**overrides)
    assert "\n" not in str(raised.value)


def test_shadow_ridge_warm_start_is_already_a_strong_attacker(small_population):
    sample = _sampler(small_population, 0.01, 0)
    spec = AttackerSpec(small_population.n_attributes, small_population.n_individuals, init="shadow-ridge")
    attacker = train_attacker(sample, spec, AttackerTrainingConfig(steps=0), seed=0,
                              theta=np.full(small_population.n_individuals, 0.5))
    x, b = _sampler(small_population, 0.01, 1)(64)
    with torch.no_grad():
        assert auc(attacker(x).numpy(), b.numpy()) > 0.95


def test_training_keeps_the_best_validated_state(small_population):
    """A learning rate that wrecks the network cannot make the result worse than the warm start."""
    theta = np.full(small_population.n_individuals, 0.5)
    spec = AttackerSpec(small_population.n_attributes, small_population.n_individuals, init="shadow-ridge")
    loss = nn.BCEWithLogitsLoss()
    x, b = _sampler(small_population, 0.05, 2)(256)
    start = train_attacker(_sampler(small_population, 0.05, 0), spec, AttackerTrainingConfig(steps=0), seed=0, theta=theta)
    wrecked = train_attacker(_sampler(small_population, 0.05, 0), spec,
                             AttackerTrainingConfig(steps=40, lr=5.0, validate_every=20), seed=0, theta=theta)
    with torch.no_grad():
        assert float(loss(wrecked(x), b)) <= float(loss(start(x), b)) + 0.02


def test_refit_makes_the_in_game_attacker_the_best_linear_attacker(small_population):
    config = GameConfig(steps=1, batch_size=8, eval_batch=64, seed=0, attacker=AttackerSettings(refit_releases=300),
                        fresh_check=FreshCheckSettings(steps=0))
    game = Game(small_population, UniformSubsetPrior(small_population.n_individuals, 20), config)
    before = {name: p.detach().clone() for name, p in game.attacker.head.named_parameters()}
    game.training_step()  # step 0 refits first
    assert any(not torch.equal(before[name], p) for name, p in game.attacker.head.named_parameters())
    game.refit_attacker()
    assert all(p not in game.opt_a.state for p in game.attacker.refit_parameters())
    assert game.evaluate_heldout()["heldout_auc"] > 0.9  # the untrained defender adds little noise


def _composed_sampler(population, sigmas: tuple[float, ...], seed: int):
    """Releases of a composition of len(sigmas) Gaussian frequency mechanisms (App. L.6)."""
    prior = UniformSubsetPrior(population.n_individuals, 20)
    mechanism = ComposedMechanism([SummaryStatistics(population.genotypes)] * len(sigmas))
    generator = torch.Generator().manual_seed(seed)
    scales = torch.repeat_interleave(torch.tensor(sigmas), population.n_attributes)

    def sample(n):
        b = prior.sample_torch(n, generator)
        return mechanism.release(b, scales * torch.randn((n, mechanism.n_outputs), generator=generator)), b

    return sample


def test_logistic_calibration_matches_scikit_learn_and_never_overshoots():
    from sklearn.linear_model import LogisticRegression

    generator = torch.Generator().manual_seed(0)
    features = torch.randn((5000, 2), generator=generator, dtype=torch.float64)
    labels = (torch.rand(5000, generator=generator, dtype=torch.float64)
              < torch.sigmoid(features @ torch.tensor([0.7, -0.2], dtype=torch.float64) + 0.3)).double()
    params = logistic_calibration(features, labels, iterations=20)
    reference = LogisticRegression(C=1e12, tol=1e-10, max_iter=1000).fit(features.numpy(), labels.numpy())
    np.testing.assert_allclose(params.numpy(), [*reference.coef_[0], reference.intercept_[0]], atol=1e-4)
    # separable data (an already perfect attacker): the calibrated loss is no worse than the raw one
    logits = torch.tensor([-50.0, -40.0, 40.0, 60.0])
    labels = torch.tensor([0.0, 0.0, 1.0, 1.0])
    scale, shift = affine_calibration(logits, labels)
    loss = nn.BCEWithLogitsLoss()
    assert float(loss(scale * logits + shift, labels)) <= float(loss(logits, labels)) + 1e-6



def _whole_array_objective(features: np.ndarray, y: np.ndarray, penalty: float = 1e-6):
    """Slow reference for :func:`bngp.linear.logistic_calibration`'s objective: (evaluate, newton_system)
    with every pass over whole arrays (the code before its passes ran span by span)."""
    x = np.concatenate([features, np.ones((features.shape[0], 1))], axis=1)
    ridge = np.full(x.shape[1], penalty)
    ridge[-1] = 0.0

    def evaluate(params):
        z = x @ params
        shrunk = np.exp(-np.abs(z))
        value = float((np.maximum(z, 0.0) + np.log1p(shrunk) - y * z).mean() + 0.5 * (ridge * params**2).sum())
        return value, np.where(z >= 0.0, 1.0, shrunk) / (1.0 + shrunk)

    def newton_system(params, p):
        scaled = np.empty(x.shape).T
        hessian = np.multiply(x.T, p * (1.0 - p), out=scaled) @ x / y.size + (np.diag(ridge) + 1e-12 * np.eye(x.shape[1]))
        return x.T @ (p - y) / y.size + ridge * params, hessian

    return evaluate, newton_system


@pytest.mark.parametrize("span", [64, 1000, calibration_module._CALIBRATION_SPAN])
def test_logistic_calibration_by_spans_has_the_bits_of_whole_array_passes(monkeypatch, span):
    """The elementwise passes run span by span (for the cache), and the probabilities are formed
    without a branch; the objective, its probabilities and its Newton system have the whole-array
    reference's bits, and the fitted weights those of a single span covering every logit: spans that do not divide n, several features,
    saturated logits (the rescaled start), separable data, logits so far in the tails that
    exp(-|z|) underflows to 0, and z = +-0, +-inf and NaN in the objective."""
    monkeypatch.setattr(calibration_module, "_CALIBRATION_SPAN", span)
    rng = np.random.default_rng(5)
    for n, m, kind in [(7, 1, "plain"), (10_007, 1, "plain"), (10_007, 3, "plain"), (9_001, 1, "saturated"),
                       (9_001, 2, "separable"), (5_003, 1, "extreme"), (70_001, 1, "plain")]:
        y = (rng.random(n) < 0.4).astype(np.float64)
        features = rng.normal(size=(n, m)) + 0.4 * (y[:, None] - 0.5)
        if kind == "saturated":
            features *= 1500.0
        elif kind == "separable":
            features = (y[:, None] - 0.5) * np.array([[3.0, 40.0]]) + 0.01 * rng.normal(size=(n, m))
        elif kind == "extreme":
            features[rng.random((n, m)) < 0.1] = 900.0
            features[rng.random((n, m)) < 0.1] = -900.0
            features[:6, 0] = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-300]
        evaluate, newton_system = _whole_array_objective(features, y)
        objective = calibration_module._LogisticObjective(features, y, 1e-6)
        for params in (np.r_[np.ones(m), 0.0], rng.normal(size=m + 1)):
            with np.errstate(invalid="ignore"):  # inf - inf in the losses of z = +-inf
                value, probabilities = evaluate(params)
                mine = np.full(n, -1.0)
                assert objective.evaluate(params, mine) == value or np.isnan(value)
            np.testing.assert_array_equal(mine.view(np.int64), probabilities.view(np.int64))
            if kind != "extreme":  # (the Newton system of NaN probabilities is NaN)
                for got, expected in zip(objective.newton_system(params, mine), newton_system(params, probabilities)):
                    np.testing.assert_array_equal(got.view(np.int64), expected.view(np.int64))
        if kind == "extreme":
            features[:6, 0] = 0.0
        params = logistic_calibration(torch.from_numpy(features), torch.from_numpy(y)).numpy()
        monkeypatch.setattr(calibration_module, "_CALIBRATION_SPAN", n)  # one span: passes over whole arrays
        whole = logistic_calibration(torch.from_numpy(features), torch.from_numpy(y)).numpy()
        monkeypatch.setattr(calibration_module, "_CALIBRATION_SPAN", span)
        np.testing.assert_array_equal(params, whole, err_msg=f"{n} x {m}, {kind}")


def test_logistic_calibration_of_many_logits_starts_from_a_subsample_and_reaches_the_same_optimum(monkeypatch):
    """Above 4 x _PRESOLVE_LOGITS logits the Newton steps on all of them start from the fit of a strided subsample:
    the same optimum as the steps from the default starts (relative 1e-6: both stop where the Newton decrement is below
    1e-13 of the objective, which leaves the weights within about 1e-7), in fewer
    passes over all the logits (counted), for plain and for saturated logits (the rescaled start)."""
    n = 4 * calibration_module._PRESOLVE_LOGITS + 1_001
    rng = np.random.default_rng(11)
    passes = {"evaluate": 0, "newton_system": 0}
    for name in passes:
        original = getattr(calibration_module._LogisticObjective, name)

        def counted(self, *args, _original=original, _name=name):
            if self.n == n:
                passes[_name] += 1
            return _original(self, *args)

        monkeypatch.setattr(calibration_module._LogisticObjective, name, counted)
    for scale in (1.0, 400.0):
        y = (rng.random(n) < 0.3).astype(np.float64)
        features = scale * (rng.normal(size=(n, 1)) + 0.8 * y[:, None])
        for key in passes:
            passes[key] = 0
        fast = logistic_calibration(torch.from_numpy(features), torch.from_numpy(y)).numpy()
        presolved = sum(passes.values())
        monkeypatch.setattr(calibration_module, "_PRESOLVE_LOGITS", n)  # no subsample: the default starts only
        for key in passes:
            passes[key] = 0
        plain = logistic_calibration(torch.from_numpy(features), torch.from_numpy(y)).numpy()
        monkeypatch.setattr(calibration_module, "_PRESOLVE_LOGITS", 2**18)
        np.testing.assert_allclose(fast, plain, rtol=1e-6, atol=1e-9)
        assert presolved < sum(passes.values()), (presolved, passes)


def test_affine_calibration_of_saturated_logits_reaches_the_optimum():
    # A refitted head's logits in the game: barely informative, standard deviation in the
    # thousands, best scale about 1e-6.  From a = 1 every Newton step overshot into the flat tails
    # and was halved away: the fit stayed at a = 1, cross-entropy 802 where the optimum is 0.693.
    # The rescaled start reaches the optimum of a slow reference (scipy's BFGS on the same
    # objective in well-scaled coordinates).
    from scipy import optimize

    generator = torch.Generator().manual_seed(3)
    labels = (torch.rand(12800, generator=generator) < 0.5).double()
    logits = 2000.0 * (0.005 * (2 * labels - 1) + torch.randn(12800, generator=generator, dtype=torch.float64)) + 2.0
    scale, shift = affine_calibration(logits, labels)
    z, y = logits.numpy() / 2000.0, labels.numpy()

    def objective(params):
        t = params[0] * z + params[1]
        return float((np.logaddexp(0.0, t) - y * t).mean() + 0.5e-6 * (params[0] / 2000.0) ** 2)

    reference = optimize.minimize(objective, [1.0, 0.0], method="BFGS", options={"gtol": 1e-12})
    assert objective([scale * 2000.0, shift]) <= reference.fun + 1e-12 < 0.6932
    assert scale == pytest.approx(reference.x[0] / 2000.0, rel=1e-2)


def test_block_inversion_head_trusts_the_less_noisy_block(small_population):
    """With one nearly exact and one very noisy copy of the frequencies, the fitted block weights
    follow the noise: the head is close to the inversion of the exact block alone."""
    theta = np.full(small_population.n_individuals, 0.5)
    x, b = _composed_sampler(small_population, (0.002, 0.3), 0)(400)
    weight, _ = block_inversion_head(small_population.genotypes, 20.0, theta, x, b)
    q = small_population.n_attributes
    assert weight.shape == (small_population.n_individuals, 2 * q)
    assert float(weight[:, :q].norm()) > 20 * float(weight[:, q:].norm())


def test_composed_release_attacker_is_as_strong_as_its_fixed_blocks(small_population):
    """A fresh attacker on a composition is at least as strong as on the single mechanism that
    averages the informative blocks (the sufficient statistic of equal-variance Gaussian copies):
    four N(0, s^2) blocks plus one pure-noise block vs one N(0, s^2 / 4) mechanism."""
    theta = np.full(small_population.n_individuals, 0.5)
    sigma = 0.2
    spec = AttackerSpec(5 * small_population.n_attributes, small_population.n_individuals, init="shadow-ridge")
    config = AttackerTrainingConfig(steps=0, shadow_releases=300)
    composed = train_attacker(_composed_sampler(small_population, (sigma,) * 4 + (0.45,), 0), spec, config, seed=0,
                              population=small_population.genotypes, n_members=20.0, theta=theta)
    single_spec = AttackerSpec(small_population.n_attributes, small_population.n_individuals, init="shadow-ridge")
    single = train_attacker(_sampler(small_population, sigma / 2, 0), single_spec, config, seed=0,
                            population=small_population.genotypes, n_members=20.0, theta=theta)
    x, b = _composed_sampler(small_population, (sigma,) * 4 + (0.45,), 1)(200)
    x_single, b_single = _sampler(small_population, sigma / 2, 1)(200)
    with torch.no_grad():
        composed_auc = auc(composed(x).numpy(), b.numpy())
        single_auc = auc(single(x_single).numpy(), b_single.numpy())
    assert 0.75 < single_auc < 0.97  # a regime where the comparison means something
    # (a ridge-only warm start, blind to the block structure, reads 0.73 here against 0.87)
    assert composed_auc > single_auc - 0.03


def test_training_records_its_curve_with_the_kept_step(small_population):
    """The training curve has one validation per `validate_every` steps plus the initial state,
    the AUC of each recomputed here from the kept network's own validation draws at the end, and
    the kept step is the one of least validation cross-entropy."""
    theta = np.full(small_population.n_individuals, 0.5)
    spec = AttackerSpec(small_population.n_attributes, small_population.n_individuals, init="shadow-ridge")
    attacker = train_attacker(_sampler(small_population, 0.05, 0), spec,
                              AttackerTrainingConfig(steps=30, validate_every=10, validation_draws=64), seed=0, theta=theta)
    curve = attacker.training_curve
    assert curve["steps"] == [0, 10, 20, 30] and len(curve["auc"]) == len(curve["cross_entropy"]) == 4
    assert curve["best_step"] == curve["steps"][int(np.argmin(curve["cross_entropy"]))]
    assert curve["validation_releases"] == 64 and not curve["stopped_early"]
    assert curve["still_improving"] == (curve["best_step"] == 30)
    # the validation draws are the sampler's first 64: the kept state scores them as recorded
    x, b = _sampler(small_population, 0.05, 0)(64)
    with torch.no_grad():
        scores = attacker(x).numpy()
    kept = curve["steps"].index(curve["best_step"])
    assert float(release_aucs(scores, b.numpy()).mean()) == pytest.approx(curve["auc"][kept], abs=1e-9)
    untrained = train_attacker(_sampler(small_population, 0.05, 0), spec, AttackerTrainingConfig(steps=0), seed=0,
                               theta=theta).training_curve
    assert untrained["steps"] == [0] and untrained["best_step"] == 0 and not untrained["still_improving"]


def test_trace_says_whether_the_loss_was_still_falling():
    falling = OptimisationTrace((0, 10, 20), (0.7, 0.6, 0.5), best_step=20, stopped_early=False)
    levelled = OptimisationTrace((0, 10, 20), (0.7, 0.5, 0.6), best_step=10, stopped_early=False)
    assert falling.still_improving and not levelled.still_improving
    assert falling.curve([0.5, 0.6, 0.7], 8)["still_improving"] and not levelled.curve([0.5, 0.6, 0.6], 8)["still_improving"]
    with pytest.raises(InputError, match="one AUC per validation"):
        falling.curve([0.5], 8)


def test_early_stopping_keeps_the_full_runs_state_and_its_replay_predicts_it(small_population):
    """With ``patience`` P the run ends after P validations without a lower loss.  Here a learning
    rate that wrecks the network leaves the warm start (step 0) best throughout the full run, so
    the early-stopped run keeps the same state: the same scores, in 30 of 200 steps.  The replay of
    the rule on the full run's recorded curve (``experiments/attacker_steps.py``, the evidence for
    the default) predicts where the real run stops and what it keeps."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "experiments"))
    from attacker_steps import early_stop

    theta = np.full(small_population.n_individuals, 0.5)
    spec = AttackerSpec(small_population.n_attributes, small_population.n_individuals, init="shadow-ridge")
    settings = dict(steps=200, lr=5.0, validate_every=10, validation_draws=64)
    full = train_attacker(_sampler(small_population, 0.05, 0), spec, AttackerTrainingConfig(**settings, patience=None),
                          seed=0, theta=theta)
    stopped = train_attacker(_sampler(small_population, 0.05, 0), spec, AttackerTrainingConfig(**settings, patience=3),
                             seed=0, theta=theta)
    curve, short = full.training_curve, stopped.training_curve
    assert curve["steps"][-1] == 200 and not curve["stopped_early"] and curve["best_step"] == 0
    assert short["steps"] == [0, 10, 20, 30] and short["stopped_early"] and short["best_step"] == 0
    assert short["cross_entropy"] == curve["cross_entropy"][:4]  # the same run up to the stop
    assert early_stop(curve["steps"], curve["cross_entropy"], 3) == (30, 0)
    x, _ = _sampler(small_population, 0.05, 2)(32)
    with torch.no_grad():
        assert torch.equal(full(x), stopped(x))


def test_early_stopping_waits_while_the_loss_falls(small_population):
    """A sound learning rate lowers the validation loss at every validation of a short run: early
    stopping never fires, and the run is the full run, step for step."""
    theta = np.full(small_population.n_individuals, 0.5)
    spec = AttackerSpec(small_population.n_attributes, small_population.n_individuals, init="reconstruction")
    population = small_population.genotypes
    settings = dict(steps=60, validate_every=20, validation_draws=64, init="reconstruction")
    runs = [train_attacker(_sampler(small_population, 0.05, 0), spec, AttackerTrainingConfig(**settings, patience=patience),
                           seed=0, theta=theta, population=population, n_members=20).training_curve
            for patience in (None, 1)]
    assert runs[0]["cross_entropy"] == sorted(runs[0]["cross_entropy"], reverse=True)  # falling throughout
    assert runs[1] == runs[0] and not runs[1]["stopped_early"]
