import dataclasses
import json

import numpy as np
import pytest
import torch

from bngp.data.priors import UniformSubsetPrior
from bngp.errors import InputError, TrainingError
from bngp.game import (
    SUMMARY_FILE, AttackerSettings, DefenderSettings, FreshCheckSettings, Game, GameConfig, ObjectiveSettings, TrainingSummary,
)
from bngp.game.summary import BudgetRecord
from bngp.game.players import SEED_STREAMS
from bngp.release.sampling import release_mechanism


def _game(population, **overrides):
    settings = dict(steps=4, attacker_steps=2, batch_size=8, eval_every=2, eval_batch=32, checkpoint_every=2,
                    fresh_check_steps=0, seed=7)
    settings.update(overrides)
    return Game(population, UniformSubsetPrior(population.n_individuals, 20), GameConfig.from_flat(settings))


def _weights(game):
    return torch.cat([p.detach().flatten() for p in game.defender.parameters()])


def test_training_writes_run_directory(small_population, tmp_path):
    game = _game(small_population, fresh_check_steps=3)
    summary = game.train(tmp_path, progress=False)
    for name in ("config.json", "checkpoint.pt", "defender.pt", "summary.json"):
        assert (tmp_path / name).is_file()
    assert list((tmp_path / "tensorboard").iterdir())
    assert isinstance(summary, TrainingSummary)
    assert summary.steps == 4 and [row["step"] for row in summary.history] == [2, 4]
    assert summary.final == summary.history[-1] and summary.collapse.evaluations == 2
    assert summary.fresh_attacker_check["steps"] == 3
    # the exploitability compares the fresh check with the delivered state's in-game evaluation
    assert summary.exploitability.in_game_auc == summary.delivered["heldout_auc"] == summary.in_game_auc
    # the concrete seed streams of the run are recorded next to its seed
    assert summary.seed == 7 and summary.seeds == game.seeds and list(summary.seeds) == list(SEED_STREAMS)
    assert _game(small_population, seed=8).seeds["training"] != summary.seeds["training"]
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["population"]["individuals"] == small_population.n_individuals


def test_the_game_is_composed_of_roles_that_share_one_players_state(small_population):
    """Game builds players, refits, stepper and checks in that order; each role holds the players and the
    earlier roles it calls, none inherits from another, and the game's attributes read and write the players'."""
    from bngp.game.checks import PostTrainingChecks
    from bngp.game.players import Players
    from bngp.game.selection import Refits
    from bngp.game.step import TrainingStep

    game = _game(small_population)
    roles = (game.players, game.refits, game.stepper, game.checks)
    assert [type(role) for role in roles] == [Players, Refits, TrainingStep, PostTrainingChecks]
    assert all(role.players is game.players for role in roles[1:])
    assert game.stepper.refits is game.refits and game.checks.refits is game.refits and game.checks.stepper is game.stepper
    assert not any(issubclass(a, b) for a in (Game, *map(type, roles)) for b in map(type, roles) if a is not b)
    assert game.defender is game.players.defender and game.config is game.players.config
    game.multiplier = 0.25
    assert game.players.multiplier == 0.25


def test_training_summary_is_a_frozen_record_that_round_trips(small_population, tmp_path):
    summary = _game(small_population, fresh_check_steps=3, dp_epsilon=1.0).train(tmp_path, progress=False)
    payload = summary.to_dict()
    # summary.json on disk is exactly to_dict(), and reads back into an equal record
    assert json.loads((tmp_path / SUMMARY_FILE).read_text()) == payload
    assert TrainingSummary.from_dict(payload) == summary
    assert TrainingSummary.from_dict(json.loads(json.dumps(payload))) == summary
    assert TrainingSummary.load(tmp_path / SUMMARY_FILE) == summary
    assert list(payload)[:6] == ["steps", "against", "final", "selected", "collapse", "history"]
    assert {"bgbp", "fresh_attacker_check", "exploitability", "seed", "seeds"} <= set(payload)
    assert "budget" not in payload  # optional records are left out, as summary.json always did
    with pytest.raises(dataclasses.FrozenInstanceError):
        summary.steps = 5
    with pytest.raises(dataclasses.FrozenInstanceError):
        summary.bgbp.epsilon = 2.0
    payload["history"][0]["heldout_auc"] = -1.0  # to_dict() is a copy: the record is unchanged
    assert summary.history[0]["heldout_auc"] != -1.0


def test_training_summary_reads_older_files_and_rejects_malformed_ones(small_population, tmp_path):
    from bngp.errors import DataFormatError

    summary = _game(small_population).train(tmp_path, progress=False)
    older = {key: value for key, value in summary.to_dict().items() if key not in ("seed", "seeds")}
    record = TrainingSummary.from_dict(older)
    assert record.seed is None and record.seeds is None and record.to_dict() == older
    assert dataclasses.replace(summary, seed=None, seeds=None) == record
    with pytest.raises(DataFormatError, match="collapse"):
        TrainingSummary.from_dict({key: value for key, value in older.items() if key != "collapse"})
    with pytest.raises(DataFormatError, match="steps"):
        TrainingSummary.from_dict(older | {"steps": -1})
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(DataFormatError, match="not JSON"):
        TrainingSummary.load(tmp_path / "bad.json")


def test_same_seed_same_defender(small_population, tmp_path):
    a = _game(small_population)
    a.train(tmp_path / "a", progress=False)
    b = _game(small_population)
    b.train(tmp_path / "b", progress=False)
    assert torch.equal(_weights(a), _weights(b))
    c = _game(small_population, seed=8)
    c.train(tmp_path / "c", progress=False)
    assert not torch.equal(_weights(a), _weights(c))


def test_resume_reproduces_uninterrupted_run(small_population, tmp_path):
    full = _game(small_population, steps=6)
    full.train(tmp_path / "full", progress=False)
    first = _game(small_population, steps=4)
    first.train(tmp_path / "split", progress=False)
    resumed = _game(small_population, steps=6)
    resumed.train(tmp_path / "split", resume=True, progress=False)
    assert resumed.step == 6
    assert torch.equal(_weights(full), _weights(resumed))
    # the resumed run's phase timings count the steps before its checkpoint too
    for phase in ("attacker steps", "defender step"):
        assert resumed.timer.calls[phase] == full.timer.calls[phase]
    assert resumed.timer.calls["defender step"] == 6


def test_resume_refuses_other_settings(small_population, tmp_path):
    _game(small_population).train(tmp_path, progress=False)
    with pytest.raises(TrainingError, match="kappa"):
        _game(small_population, kappa=3.0, steps=6).train(tmp_path, resume=True, progress=False)
    with pytest.raises(TrainingError, match="no checkpoint"):
        _game(small_population).train(tmp_path / "empty", resume=True, progress=False)


@pytest.mark.parametrize(
    "overrides",
    [
        dict(objective="preference", kappa=2.0),
        dict(objective="preference", kappa_vector=tuple(np.linspace(0, 5, 120))),
        dict(objective="utility-budget", budget=0.02),
        dict(objective="privacy-budget", budget=0.01),
    ],
)
def test_each_objective_trains(small_population, tmp_path, overrides):
    game = _game(small_population, **overrides)
    summary = game.train(tmp_path, progress=False)
    row = summary.final
    assert np.isfinite(row["defender_loss"]) and np.isfinite(row["utility_loss"])
    objective = overrides["objective"]
    if objective == "preference":  # no constraint: the multiplier never moves, no budget record
        assert all(row["multiplier"] == 0.0 for row in summary.history) and summary.budget is None
        return
    assert row["multiplier"] == game.multiplier
    if objective == "utility-budget":  # the one measurement against a budget, on 2,000 fixed memberships
        from bngp.defenses.budget import BudgetSetting

        measured = BudgetSetting.of(small_population, game.prior.n_members).measured_loss(game.delivered_defense())
        assert measured == pytest.approx(summary.selected["heldout_utility_loss"], rel=0.1)
    else:
        measured = summary.selected["heldout_privacy_loss"]
    met = measured <= 1.02 * overrides["budget"] + 1e-12
    assert summary.budget == BudgetRecord(objective, overrides["budget"], measured, met, summary.budget.warning)
    assert (summary.budget.warning is None) == met and (summary.budget.warning in summary.warnings) == (not met)


def test_utility_budget_multiplier_grows_when_violated(small_population):
    """Dual ascent lambda <- max(0, lambda + dual_lr * (mean |x - f(D)| - budget) / max(budget, 1e-3))."""
    game = _game(small_population, objective="utility-budget", budget=1e-6)
    multiplier = 0.0
    for _ in range(3):
        losses = game.training_step()
        multiplier = max(0.0, multiplier + game.config.objective.dual_lr * (losses["utility_loss"] - 1e-6) / 1e-3)
        assert losses["multiplier"] == pytest.approx(multiplier, rel=1e-12)
    assert game.multiplier == multiplier > 0  # any noise violates a budget of 1e-6


def test_kappa_pulls_noise_down(small_population):
    """With a heavy utility weight the defender's noise shrinks over training."""
    game = _game(small_population, kappa=200.0, steps=60, attacker_steps=1, eval_every=60)
    losses = [game.training_step()["utility_loss"] for _ in range(60)]
    assert np.mean(losses[-5:]) < 0.6 * np.mean(losses[:5])


@pytest.mark.parametrize(
    "overrides, message",
    [
        (dict(kappa=-1.0), "kappa"),
        (dict(objective="utility-budget"), "budget"),
        (dict(objective="nonsense"), "objective"),
        (dict(batch_size=1), "batch_size"),
        (dict(kappa_vector=(1.0, np.nan)), "kappa_vector"),
    ],
)
def test_config_validation(overrides, message):
    with pytest.raises(InputError, match=message):
        GameConfig.from_flat(overrides)


def test_kappa_vector_length_checked(small_population):
    with pytest.raises(InputError, match="120"):
        _game(small_population, kappa_vector=(1.0, 2.0))


@pytest.mark.parametrize("opponent", ["lrt", "adaptive-lrt", "score"])
def test_best_response_defender_lowers_its_opponents_detection_rate(small_population, opponent):
    game = _game(small_population, against=opponent, steps=40, attacker_steps=1, eval_every=40)
    start = game.evaluate_heldout()["heldout_opponent_tpr"]
    for _ in range(40):
        game.training_step()
    assert game.evaluate_heldout()["heldout_opponent_tpr"] < start


def test_against_unknown_or_non_differentiable_attack(small_population):
    with pytest.raises(InputError, match="against"):
        ObjectiveSettings(against="nonsense")
    with pytest.raises(InputError, match="differentiable"):
        _game(small_population, against="tree")
    # the opponent reads one mechanism's release, not a composed one
    with pytest.raises(InputError, match="cannot be combined with `fixed_gaussian_sigmas`"):
        GameConfig(objective=ObjectiveSettings(against="score", dp_epsilon=1.0), defender=DefenderSettings(fixed_gaussian_sigmas=(0.1,)))


def test_bgbp_penalty_reduces_bound_violations_and_reports_implied_epsilon(small_population, tmp_path):
    settings = dict(dp_epsilon=0.1, steps=60, attacker_steps=2, eval_every=60, fresh_check_steps=20)
    penalised = _game(small_population, dp_penalty=50.0, **settings)
    summary = penalised.train(tmp_path / "a", progress=False)
    unpenalised = _game(small_population, dp_penalty=0.0, **settings).train(tmp_path / "b", progress=False)
    assert summary.final["heldout_dp_violation"] < unpenalised.final["heldout_dp_violation"]
    theta = 20 / 40
    assert summary.bgbp.theta_max == theta and summary.bgbp.epsilon == 0.1
    assert summary.bgbp.implied_epsilon == pytest.approx(np.log1p(np.expm1(0.1) / theta))
    # the reported rate counts fresh-attacker probabilities outside [lower, upper]: all of them
    # for bounds no probability meets, none for bounds every probability meets
    lower, upper = penalised.dp_bounds
    penalised.dp_bounds = (torch.ones_like(lower), torch.zeros_like(upper))
    assert penalised.fresh_attacker_check(1, seed=0)["dp_bound_violation_rate"] == 1.0
    penalised.dp_bounds = (torch.zeros_like(lower), torch.ones_like(upper))
    assert penalised.fresh_attacker_check(1, seed=0)["dp_bound_violation_rate"] == 0.0


def test_composition_with_fixed_gaussian_mechanisms(small_population, tmp_path):
    from bngp.defenses.trained import load_run_defense

    game = _game(small_population, fixed_gaussian_sigmas=(0.05, 0.05))
    assert game.mechanism.n_outputs == 3 * small_population.n_attributes
    game.train(tmp_path, progress=False)
    defense = load_run_defense(tmp_path)
    mechanism = release_mechanism(small_population.genotypes, defense.composition)
    b = torch.zeros((2, small_population.n_individuals))
    b[:, :20] = 1
    noise = defense.noise(b, mechanism.statistic(b), torch.Generator().manual_seed(0))
    assert noise.shape == (2, 3 * small_population.n_attributes)
    # the fixed blocks are Gaussian with the configured scale
    assert float(noise[:, : 2 * small_population.n_attributes].std()) == pytest.approx(0.05, rel=0.2)


def _ridge_head_after_refit(game, monkeypatch):
    """The refitted ridge head (population inversion not preferred) and its held-out AUC."""
    import bngp.game.selection as selection

    monkeypatch.setattr(selection, "prefer_population_inversion", lambda *args, **kwargs: None)
    game.refit_attacker()
    return game.attacker.head.weight.detach().clone(), game.evaluate_heldout()["heldout_auc"]


def test_composed_game_attacker_reads_the_pooled_copies_and_is_not_weaker(small_population, monkeypatch):
    # Two fixed N(0, 0.3^2) copies and the learned block, which starts at f(theta) (shrinkage 1).
    # With pool_copies the in-game attacker reads [z, x_L], z the inverse-variance mean of the fixed
    # copies (here their plain mean), and its refitted ridge head gives the learned block, constant
    # at f(theta), weight 0.  Known answer for the strength: z is sufficient for f(D) given the
    # fixed copies (unclipped Gaussian likelihood), and the 2|Q|-wide map is identified from the
    # same releases better than the 3|Q|-wide one, so on the same defender the held-out AUC is at
    # least as high (measured 0.692 against 0.665, seed 7).
    q = small_population.n_attributes
    settings = dict(fixed_gaussian_sigmas=(0.3, 0.3), eval_batch=256)
    game = _game(small_population, **settings)
    assert game.attacker_spec.n_outputs == 2 * q
    pooled, pooled_auc = _ridge_head_after_refit(game, monkeypatch)
    whole_game = _game(small_population, pool_copies=False, **settings)
    assert whole_game.attacker_spec.n_outputs == 3 * q
    whole, whole_auc = _ridge_head_after_refit(whole_game, monkeypatch)
    assert pooled.shape == (small_population.n_individuals, 2 * q) and whole.shape[1] == 3 * q
    assert float(pooled[:, :q].abs().max()) > 0.0 and float(pooled[:, q:].abs().max()) == 0.0
    assert pooled_auc >= whole_auc - 0.005


def test_pooled_attacker_input_is_the_inverse_variance_mean(small_population):
    # known answer: copies with sigmas 0.1 and 0.2 have precisions 100 and 25, weights 0.8 and 0.2
    q = small_population.n_attributes
    game = _game(small_population, fixed_gaussian_sigmas=(0.1, 0.2))
    x = torch.rand((3, 3 * q), dtype=torch.float64, requires_grad=True)
    reduced = game.attacker_input(x)
    expected = torch.cat([0.8 * x[:, :q] + 0.2 * x[:, q:2 * q], x[:, 2 * q:]], dim=1)
    torch.testing.assert_close(reduced, expected)
    reduced.sum().backward()  # differentiable: the defender's gradient reaches its block unchanged
    torch.testing.assert_close(x.grad[:, 2 * q:], torch.ones((3, q), dtype=torch.float64))
    assert _game(small_population, fixed_gaussian_sigmas=(0.1, 0.2), pool_copies=False).attacker_input(x) is x


def test_composed_game_with_pooled_copies_trains_and_resumes(small_population, tmp_path):
    # the reduced attacker through the whole loop: refits, selection, held-out evaluation, the
    # fresh-attacker check on the whole release, and a checkpoint resumed to the same weights
    settings = dict(fixed_gaussian_sigmas=(0.2, 0.2), steps=4, fresh_check_steps=3)
    summary = _game(small_population, **settings).train(tmp_path / "full", progress=False)
    assert summary.fresh_attacker_auc is not None
    first = _game(small_population, **{**settings, "steps": 2})
    first.train(tmp_path / "resumed", progress=False)
    resumed = _game(small_population, **settings)
    resumed.train(tmp_path / "resumed", resume=True, progress=False)
    full = _game(small_population, **settings)
    full.train(tmp_path / "again", progress=False)
    assert torch.equal(_weights(resumed), _weights(full))


def test_refit_pooling_is_recorded_only_where_it_applies():
    # the flat form (version 1) of runs stored before the setting existed (composed ones pooled nothing) matches
    composed = DefenderSettings(fixed_gaussian_sigmas=(0.1,))
    assert "pool_copies" not in GameConfig().flat()
    assert "pool_copies" not in GameConfig(defender=composed, attacker=AttackerSettings(pool_copies=False)).flat()
    assert "pool_copies" not in GameConfig(attacker=AttackerSettings(pool_copies=True)).flat()
    assert GameConfig(defender=composed).flat()["pool_copies"] is True


def test_shrinkage_targets_the_population_mean_stays_in_unit_interval_and_is_saved(small_population, tmp_path):
    game = _game(small_population, kappa=0.0, shrink_lr=5.0, steps=6, shrink_init=0.0, select_defender=False)
    expected = small_population.genotypes.mean(axis=0)  # f(theta) for the uniform n-of-K prior
    np.testing.assert_allclose(game.defender.shrink_target.numpy(), expected, atol=1e-6)
    summary = game.train(tmp_path, progress=False)
    alpha = game.defender.shrinkage()
    assert float(alpha.min()) >= 0.0 and float(alpha.max()) <= 1.0 and float(alpha.max()) > 0.0
    assert summary.history[-1]["shrinkage_mean"] == pytest.approx(float(alpha.mean()))
    from bngp.defenses import load_run_defense

    loaded = load_run_defense(tmp_path).artifact.defender
    assert torch.equal(loaded.shrinkage(), alpha)
    assert torch.equal(loaded.shrink_target, game.defender.shrink_target)
    with pytest.raises(InputError, match="shrink_lr"):
        DefenderSettings(shrink_lr=0.0)


def test_refitted_head_is_frozen_between_refits_unless_asked(small_population):
    game = _game(small_population, attacker_refit_every=100)
    game.training_step()  # step 0: refit, then Adam steps on the MLP only
    head = game.attacker.head.weight.detach().clone()
    game.training_step()
    assert torch.equal(game.attacker.head.weight, head)
    trained = _game(small_population, attacker_refit_every=100, train_refitted_head=True)
    trained.training_step()
    head = trained.attacker.head.weight.detach().clone()
    trained.training_step()
    assert not torch.equal(trained.attacker.head.weight, head)


def test_the_refitted_head_takes_no_gradient_and_the_defender_step_leaves_h_gradients_alone(small_population):
    """The head refitted in closed form takes no gradient at all; the defender's update holds H
    fixed (its backward computes no gradient of H's own parameters, and their requires_grad is
    restored afterwards), while the defender's gradient through H is the one of an H that does
    take gradients (the reference: the same loss with H's parameters requiring gradients)."""
    game = _game(small_population, attacker_refit_every=100)
    head = list(game.attacker.head.parameters())
    assert not any(parameter.requires_grad for parameter in head)
    mlp = [parameter for parameter in game.attacker.parameters() if all(parameter is not h for h in head)]
    assert mlp and all(parameter.requires_grad for parameter in mlp)
    game.refit_attacker(score_defender=False)
    for parameter in mlp:
        parameter.grad = None
    torch.manual_seed(0)
    defender_state = {k: v.clone() for k, v in game.defender.state_dict().items()}
    generator_state = game.generator.get_state()
    game.stepper._defender_step(torch.tensor(0.0))
    assert all(parameter.grad is None for parameter in mlp)  # no gradient of H's own computed
    assert all(parameter.requires_grad for parameter in mlp)
    moved = [p.detach().clone() for p in game.defender.parameters()]
    # reference: the same step with H taking gradients too gives the same defender update
    reference = _game(small_population, attacker_refit_every=100)
    reference.attacker.load_state_dict(game.attacker.state_dict())
    reference.defender.load_state_dict(defender_state)
    reference.generator.set_state(generator_state)
    reference.multiplier = game.multiplier
    for parameter in reference.attacker.parameters():
        parameter.requires_grad_(True)
    reference.stepper._defender_step(torch.tensor(0.0))
    for got, want in zip(moved, reference.defender.parameters()):
        assert torch.equal(got, want.detach())


def test_the_best_state_against_a_refitted_attacker_is_kept_and_saved(small_population, tmp_path):
    """GameConfig.select_defender: every refit scores the current defender; the best is restored,
    saved as defender.pt, checkpointed, and reported under ``selected``."""
    from bngp.defenses import load_run_defense

    game = _game(small_population, kappa=1.5, steps=8, attacker_refit_every=2)
    scores = []
    consider = game.refits._consider_defender

    def recording(*args):
        before = game.best
        consider(*args)
        scores.append((game.step, game.best[0] if game.best is not before else None))

    game.refits._consider_defender = recording
    summary = game.train(tmp_path, progress=False)
    steps = [step for step, _ in scores]
    assert steps[:4] == [0, 2, 4, 6] and 8 in steps  # every refit, and the final state
    score, step, state = game.best
    assert summary.selected["step"] == step and summary.selected["score"] == pytest.approx(score)
    assert summary.delivered is summary.selected
    # the reported evaluation is the restored state's (evaluate_heldout is deterministic)
    assert summary.selected["heldout_auc"] == game.evaluate_heldout()["heldout_auc"]
    loaded = load_run_defense(tmp_path).artifact.defender.state_dict()
    assert all(torch.equal(loaded[name], value) for name, value in state.items())
    checkpoint = torch.load(tmp_path / "checkpoint.pt", weights_only=True)
    assert checkpoint["best_step"] == step
    unselected = _game(small_population, kappa=1.5, steps=4, select_defender=False).train(tmp_path / "b", progress=False)
    assert unselected.selected is None and unselected.delivered == unselected.final


def test_training_starts_at_the_data_independent_release(small_population):
    """Defaults: alpha = 1, G's output layer at zero and sigma = 0, so before any step every
    release is exactly f(theta), the statistic of the prior-mean membership, whoever is in D."""
    game = _game(small_population)
    b, r = game.players.draw(16)
    game.defender.eval()
    with torch.no_grad():
        x, x_hat = game.players.release(b, r)
    expected = torch.as_tensor(small_population.genotypes.mean(axis=0), dtype=torch.float32)
    torch.testing.assert_close(x, expected.expand_as(x), atol=1e-6, rtol=0)
    assert float((x_hat - expected).abs().max()) > 0.05  # while the datasets' statistics differ


def test_full_rank_noise_is_per_attribute_gaussian(small_population):
    """sigma * e with e ~ N(0, I_|Q|): with the network silent and no shrinkage, xi_j / sigma_j is
    standard normal and independent across attributes (its covariance has full rank)."""
    from bngp.defenses.network import Defender, DefenderSpec

    n_out = small_population.n_attributes
    defender = Defender(DefenderSpec(40, n_out, noise_dim=3, full_rank_noise=True))
    defender.eval()
    with torch.no_grad():
        defender.net[-1].weight.zero_()
        defender.net[-1].bias.zero_()
        defender.noise_scale.copy_(torch.linspace(0.01, 0.1, n_out))
        generator = torch.Generator().manual_seed(0)
        r = defender.sample_r(4000, generator)
        assert r.shape == (4000, 3 + n_out)
        xi = defender(torch.zeros((4000, 40)), r)
    standardised = xi / defender.noise_scale
    assert float(standardised.std(dim=0).sub(1).abs().max()) < 0.08  # sd of a 4000-draw sd: 0.011
    assert int(torch.linalg.matrix_rank(torch.cov(xi.T))) == n_out


def test_utility_budget_keeps_a_state_within_the_budget(small_population, tmp_path):
    """Under --objective utility-budget only states that meet the budget on held-out draws are
    kept (within 2%): with a budget 5% above the data-independent release's loss (the state
    training starts from), the states the game visits above the budget are never kept, however
    little they leak.  Before the fix the selection scored leakage + multiplier * (loss - budget)
    and kept a state at 0.0337 for a budget of 0.03 (K = 100, |Q| = 300)."""
    start = _game(small_population).evaluate_heldout()["heldout_utility_loss"]
    budget = 1.05 * start
    game = _game(small_population, objective="utility-budget", budget=budget, steps=60, attacker_refit_every=5,
                 eval_every=10, checkpoint_every=60)
    summary = game.train(tmp_path, progress=False)
    assert max(row["heldout_utility_loss"] for row in summary.history) > 1.1 * budget  # infeasible states were visited
    assert summary.selected["heldout_utility_loss"] <= 1.02 * budget
    assert summary.budget.met and summary.budget.budget == budget and summary.budget.warning is None


def test_fresh_check_reports_exploitability(small_population, tmp_path):
    # without selection the delivered state is the last one, which depends on the data (a kept
    # initial state would be checked exactly, without fitting: tests/core/test_game_fresh_check.py)
    summary = _game(small_population, fresh_check_steps=5, steps=4, select_defender=False).train(tmp_path, progress=False)
    check, exploit = summary.fresh_attacker_check, summary.exploitability
    assert exploit.strongest_fresh_auc == max(check["auc"], check["linear_auc"], check["whitened_auc"])
    assert exploit.gap == pytest.approx(exploit.strongest_fresh_auc - exploit.in_game_auc)
    assert summary.strongest_fresh_auc == exploit.strongest_fresh_auc and summary.fresh_attacker_auc == check["auc"]
    assert ("warning" in check) == (exploit.gap > 0.05)
    assert "dp_bound_violation_rate" not in check and summary.bgbp is None  # no DPH^eps constraint
    assert check["training_curve"]["steps"] == [0, 5] and check["training_curve"]["best_step"] in (0, 5)
    curve = check["linear_learning_curve"]
    assert curve["releases"][0] == 500 and all(b == 2 * a or b == curve["releases"][-1]
                                               for a, b in zip(curve["releases"], curve["releases"][1:]))


def test_summary_times_every_phase_of_the_run(small_population, tmp_path):
    """The phase timings cover the phases the run went through, with their call counts, and
    their sum does not exceed the wall time of the run."""
    import time

    game = _game(small_population, steps=4, attacker_refit_every=2, eval_every=2, checkpoint_every=2)
    started = time.perf_counter()
    summary = game.train(tmp_path / "run", progress=False)
    wall = time.perf_counter() - started
    timings = summary.timings
    assert timings["attacker steps"]["calls"] == 4 and timings["defender step"]["calls"] == 4
    # steps 0 and 2, the final scoring, and one more against a restored earlier state
    refits = 3 + (summary.selected["step"] != 4)
    assert timings["refit: fit"]["calls"] == timings["refit: releases"]["calls"] == refits
    assert timings["held-out evaluation"]["calls"] == 2 and timings["checkpoint"]["calls"] == 2
    assert 0 < sum(phase["seconds"] for phase in timings.values()) <= wall
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["timings"] == timings


@pytest.mark.parametrize("patience", [0, -1, 2.0, True, "4"])
def test_fresh_check_patience_is_validated(patience):
    with pytest.raises(InputError, match="fresh_check_patience"):
        FreshCheckSettings(patience=patience)


def test_fresh_check_patience_is_recorded_only_when_on():
    """None (all steps, the only behaviour of runs made before the setting) is left out of the
    record, so those runs' stored configs still equal a config that keeps all steps."""
    legacy = GameConfig(fresh_check=FreshCheckSettings(patience=None)).flat()
    assert "fresh_check_patience" not in legacy
    assert set(GameConfig().flat()) == set(legacy) | {"fresh_check_patience"}
    assert GameConfig().flat()["fresh_check_patience"] == FreshCheckSettings.patience == 4
    assert GameConfig(fresh_check=FreshCheckSettings(patience=2)).flat()["fresh_check_patience"] == 2


@pytest.mark.parametrize("patience", [None, 1])
def test_fresh_check_trains_its_attacker_with_the_configured_patience(small_population, tmp_path, monkeypatch, patience):
    from bngp.game import checks

    seen = []
    real = checks.train_attacker

    def recording(*args, **kwargs):
        seen.append(args[2])
        return real(*args, **kwargs)

    monkeypatch.setattr(checks, "train_attacker", recording)
    summary = _game(small_population, fresh_check_steps=300, fresh_check_patience=patience,
                    select_defender=False).train(tmp_path, progress=False)
    (config,) = seen
    assert config.patience == patience and config.steps == 300
    check = summary.fresh_attacker_check
    assert check["patience"] == patience
    curve_steps = check["training_curve"]["steps"]
    if patience is None:
        assert curve_steps[-1] == 300
    else:  # stopped one validation after its last improvement
        best = check["training_curve"]["best_step"]
        assert curve_steps[-1] == min(300, best + 100)


@pytest.mark.parametrize("sigmas,pool", [((), True), ((0.2, 0.1), True), ((0.2, 0.1), False)])
def test_refit_releases_are_drawn_by_blocks_into_one_tensor(small_population, monkeypatch, sigmas, pool):
    """Slow reference: the refit's releases (written block by block in place, or pooled per block)
    equal the concatenation of what the attacker reads of each block's releases drawn one after the
    other from the same generator state, bit for bit, with a ragged last block."""
    import bngp.game.selection as selection

    monkeypatch.setattr(selection, "_REFIT_BLOCK", 7)
    game = _game(small_population, fixed_gaussian_sigmas=sigmas, pool_copies=pool,
                 **({"dp_epsilon": 1.0} if sigmas else {}))
    with torch.no_grad():  # a defender that is not the data-independent start
        game.defender.shrink_weight.uniform_(0.0, 1.0, generator=torch.Generator().manual_seed(0))
        game.defender.noise_scale.uniform_(0.0, 0.2, generator=torch.Generator().manual_seed(1))
        game.defender.net[-1].weight.normal_(0.0, 0.1, generator=torch.Generator().manual_seed(2))
    b, r = game.players.draw(30)
    state = game.generator.get_state()
    with torch.no_grad():
        drawn = game.refits._attacker_releases(b, r)
        game.generator.set_state(state)
        expected = torch.cat([game.attacker_input(game.players.release(b[s:s + 7], r[s:s + 7])[0]) for s in range(0, 30, 7)])
    width = 2 * small_population.n_attributes if sigmas and pool else (len(sigmas) + 1) * small_population.n_attributes
    assert drawn.shape == (30, width)
    assert torch.equal(drawn, expected)


#: the flat settings (version 1) a composed run stored before the nested form.
_FLAT_RECORD = {
    "steps": 30, "attacker_steps": 2, "batch_size": 16, "objective": "preference", "kappa": 2.0, "kappa_vector": None,
    "budget": None, "dual_lr": 0.05, "noise_dim": 30, "defender_lr": 0.001, "attacker_lr": 0.001, "weight_decay": 1e-05,
    "lr_decay": 0.988, "decay_every": 50, "attacker_init": "reconstruction", "attacker_kind": "population",
    "individual_batch": None, "defender_skip": False, "defender_shrink": True, "defender_full_rank_noise": True,
    "defender_zero_output": True, "shrink_lr": 0.01, "shrink_init": 1.0, "against": "bayesian", "dp_epsilon": 2.0,
    "dp_penalty": 10.0, "fixed_gaussian_sigmas": [0.05], "recalibrate": True, "leakage": "clamped",
    "attacker_refit_every": 10, "train_refitted_head": False, "pool_copies": True, "refit_releases": None,
    "select_defender": True, "selection_patience": 8, "eval_every": 10, "eval_batch": 64, "checkpoint_every": 10,
    "fresh_check_steps": 20, "fresh_check_patience": 4, "seed": 0,
}


def test_the_config_reader_reads_both_versions():
    from bngp.game.config import flat_record

    config = GameConfig(steps=30, batch_size=16, eval_every=10, eval_batch=64, checkpoint_every=10,
                        objective=ObjectiveSettings(kappa=2.0, dp_epsilon=2.0),
                        defender=DefenderSettings(fixed_gaussian_sigmas=(0.05,)),
                        attacker=AttackerSettings(refit_every=10), fresh_check=FreshCheckSettings(steps=20))
    nested = json.loads(json.dumps(config.to_dict()))
    assert nested["version"] == 2 and nested["objective"]["kappa"] == 2.0
    assert config.flat() == flat_record(nested) == flat_record(_FLAT_RECORD) == _FLAT_RECORD
    assert GameConfig.from_dict(nested) == GameConfig.from_dict(_FLAT_RECORD) == config
    assert GameConfig.from_flat({"kappa": 2.0}) == GameConfig(objective=ObjectiveSettings(kappa=2.0))
    # a version-1 record left out the patiences when None and pooling unless a composed game pooled
    legacy = {key: value for key, value in _FLAT_RECORD.items()
              if key not in ("selection_patience", "fresh_check_patience", "pool_copies")}
    read = GameConfig.from_dict(legacy)
    assert (read.selection.patience, read.fresh_check.patience, read.attacker.pool_copies) == (None, None, False)
    assert read.flat() == legacy
    with pytest.raises(InputError, match="version"):
        flat_record({**nested, "version": 3})
    with pytest.raises(InputError, match="not a GameConfig setting"):
        GameConfig.from_flat({"kapa": 1.0})


def test_a_config_round_trips_through_its_nested_record():
    for config in (GameConfig(), GameConfig(attacker=AttackerSettings(pool_copies=False)),
                   GameConfig(defender=DefenderSettings(noise_law="laplace", fixed_gaussian_sigmas=(0.1,)), seed=4)):
        assert GameConfig.from_dict(json.loads(json.dumps(config.to_dict()))) == config
