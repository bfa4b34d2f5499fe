"""A defender trained for a utility budget starts from the best reference mechanism and is never worse
than it (bngp.game.start, Game.check_against_start), through the API and the CLI."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from bngp.cli import main
from bngp.data.npz import save_population
from bngp.data.priors import UniformSubsetPrior
from bngp.defenses.budget import BudgetSetting, reference_at_budget
from bngp.defenses.shrinkage import ShrinkNoiseDefense
from bngp.errors import InputError
from bngp.game import Game, GameConfig
from bngp.game.start import start_defender
from bngp.references import rank_references
from bngp.rng import torch_generator

N_MEMBERS = 30


def _config(**overrides) -> GameConfig:
    settings = dict(steps=4, objective="utility-budget", budget=0.01, fresh_check_steps=0, eval_every=2,
                    checkpoint_every=2, attacker_refit_every=2, batch_size=8, eval_batch=16, refit_releases=64, seed=3)
    settings.update(overrides)
    return GameConfig.from_flat(settings)


@pytest.mark.parametrize("law", ["laplace", "gaussian"])
def test_started_defender_releases_the_reference(law, wide_population, wide_setting) -> None:
    """G with a zero output layer, alpha = a and sigma = s releases t + (1 - a)(f(D) - t) + s e, e being
    the unit draws of its randomness r (float32 arithmetic: 1e-6)."""
    budget = wide_setting.resolve("0.5x")
    reference = reference_at_budget("linear-optimal", wide_setting, budget, law=law)
    prior = UniformSubsetPrior(wide_population.n_individuals, N_MEMBERS)
    game = Game(wide_population, prior, _config(budget=budget.value, noise_law=law), start=reference)
    defender = game.defender.eval()
    generator = torch_generator(4)
    b = prior.sample_torch(32, generator)
    r = defender.sample_r(32, generator)
    x_hat = game.mechanism.statistic(b)
    with torch.no_grad():
        xi = defender(b, r, x_hat).numpy()
    unit = r[:, defender.spec.noise_dim:].double().numpy()
    expected = reference.shrink * (reference.target - x_hat.double().numpy()) + reference.scale * unit
    np.testing.assert_allclose(xi, expected, atol=1e-6)
    if law == "laplace":  # Laplace(1): E|e| = 1, Var e = 2 (40 x 2,000 draws: 1% standard error)
        draws = defender.sample_r(2000, torch_generator(5))[:, defender.spec.noise_dim:].numpy()
        assert np.abs(draws).mean() == pytest.approx(1.0, abs=0.03) and draws.var() == pytest.approx(2.0, rel=0.05)


def test_start_needs_a_matching_law(wide_population, wide_setting) -> None:
    reference = reference_at_budget("laplace", wide_setting, wide_setting.resolve("0.5x"))
    prior = UniformSubsetPrior(wide_population.n_individuals, N_MEMBERS)
    with pytest.raises(InputError, match="noise law is gaussian"):
        Game(wide_population, prior, _config(), start=reference)


def _exact(wide_setting: BudgetSetting) -> ShrinkNoiseDefense:
    width = wide_setting.target.size
    return ShrinkNoiseDefense(np.zeros(width), np.zeros(width), wide_setting.target, "laplace", N_MEMBERS, "exact")


def test_a_kept_state_worse_than_the_start_returns_to_the_start(wide_population, wide_setting) -> None:
    """The start is Laplace at half the data-independent loss; the 'trained' state releases f(D) exactly:
    the converged linear attack reads it better, so G goes back to the start."""
    reference = reference_at_budget("laplace", wide_setting, wide_setting.resolve("0.5x"))
    prior = UniformSubsetPrior(wide_population.n_individuals, N_MEMBERS)
    game = Game(wide_population, prior, _config(noise_law="laplace"), start=reference, start_record={"reference": "laplace"})
    start_state = {name: value.clone() for name, value in game.defender.state_dict().items()}
    start_defender(game.defender, _exact(wide_setting))
    selection = game.check_against_start({"step": 4, "score": 0.1})
    assert game.start_record["kept"] == "start" and selection["step"] == 0 and selection["returned_to_start"]
    check = game.start_record["start_check"]
    assert check["trained"]["auc"] > check["start"]["auc"] + 0.05  # measured 0.975 against 0.880
    for name, value in game.defender.state_dict().items():
        torch.testing.assert_close(value, start_state[name])


def test_a_kept_state_better_than_the_start_stays(wide_population, wide_setting) -> None:
    """Started from the exact release f(D) (a = 0, s = 0); the 'trained' state releases t, which leaks nothing."""
    prior = UniformSubsetPrior(wide_population.n_individuals, N_MEMBERS)
    game = Game(wide_population, prior, _config(noise_law="laplace"), start=_exact(wide_setting))
    width = wide_setting.target.size
    start_defender(game.defender, ShrinkNoiseDefense(np.ones(width), np.zeros(width), wide_setting.target, "laplace",
                                                     N_MEMBERS))
    selection = game.check_against_start({"step": 4, "score": 0.1})
    assert game.start_record["kept"] == "trained" and selection["step"] == 4
    assert game.defender.is_data_independent()


def test_a_run_that_keeps_step_zero_needs_no_check(wide_population, wide_setting) -> None:
    prior = UniformSubsetPrior(wide_population.n_individuals, N_MEMBERS)
    game = Game(wide_population, prior, _config(noise_law="laplace"), start=_exact(wide_setting))
    assert game.check_against_start({"step": 0, "score": 0.1})["step"] == 0
    assert game.start_record["kept"] == "start" and "start_check" not in game.start_record


def test_ranking_chooses_the_lowest_auc_and_never_time_sharing(wide_population, wide_setting) -> None:
    ranking = rank_references(wide_population, N_MEMBERS, "0.5x", seed=1, shrink_grid=(0.2,), setting=wide_setting)
    labels = [score.label for score in ranking.scores]
    assert labels == ["laplace", "gaussian", "shrinkage laplace a=0.2", "linear-optimal laplace", "suppression",
                      "time-sharing"]
    chosen = [score for score in ranking.scores if score.chosen]
    assert len(chosen) == 1 and chosen[0].label != "time-sharing"
    assert chosen[0].auc == min(score.auc for score in ranking.scores if score.label != "time-sharing")
    assert ranking.best is ranking.defenses[chosen[0].label]
    json.dumps(ranking.to_dict(), allow_nan=False)


@pytest.fixture(scope="module")
def population_file(wide_population, tmp_path_factory):
    path = tmp_path_factory.mktemp("budget-pop") / "pop.npz"
    save_population(wide_population, path)
    return path


def test_cli_trains_for_a_budget_and_evaluate_reads_the_same_loss(population_file, wide_setting, tmp_path, capsys) -> None:
    run = tmp_path / "run"
    code = main(["train", "--no-decision", "--population", str(population_file), "--members", str(N_MEMBERS), "--utility-budget", "0.5x",
                 "--steps", "4", "--refit-every", "2", "--eval-every", "2", "--fresh-check-steps", "0", "--seed", "3",
                 "--quiet", "--out", str(run)])
    assert code == 0
    printed = json.loads(capsys.readouterr().out)
    summary = json.loads((run / "summary.json").read_text())
    assert summary["budget"]["objective"] == "utility-budget" and summary["budget"]["met"]
    assert printed["budget"]["kept_state_value"] == summary["budget"]["kept_state_value"]
    assert summary["start"]["reference"] == printed["start"]["reference"]
    assert summary["start"]["kept"] in ("start", "trained")
    config = json.loads((run / "config.json").read_text())["config"]["objective"]
    assert config["budget"] == pytest.approx(0.5 * wide_setting.data_independent_loss, rel=1e-12)
    out = tmp_path / "eval.json"
    assert main(["evaluate", "--no-decision", "--population", str(population_file), "--members", str(N_MEMBERS), "--defense",
                 f"run:{run}", "--attacks", "linear", "--releases", "4", "--quiet", "--out", str(out)]) == 0
    evaluation = json.loads(out.read_text())
    assert evaluation["budget"]["measured_loss"] == summary["budget"]["kept_state_value"]  # one measurement
    assert "Utility budget" in out.with_suffix(".md").read_text()


@pytest.mark.parametrize(("extra", "message"), [
    (["--kappa", "1", "--budget", "0.01"], "`--budget` needs a budget objective"),
    (["--utility-budget", "0.5x", "--budget", "0.01"], "give the utility budget once"),
    (["--utility-budget", "0.5x", "--objective", "privacy-budget"], "cannot be combined with --objective privacy-budget"),
    (["--utility-budget", "2x"], "not below the data-independent release's loss"),
    (["--utility-budget", "half"], "a utility budget is a number"),
    (["--start", "best-reference", "--kappa", "1"], "`--start best-reference` needs a utility budget"),
    (["--utility-budget", "0.5x", "--dp-epsilon", "1"], "give --start data-independent"),
])
def test_cli_budget_errors(extra, message, population_file, tmp_path, capsys) -> None:
    code = main(["train", "--no-decision", "--population", str(population_file), "--members", str(N_MEMBERS), "--steps", "2",
                 "--quiet", "--out", str(tmp_path / "run"), *extra])
    error = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(error) == 1 and message in error[0]
    assert not (tmp_path / "run").exists()


def test_cli_refuses_an_existing_output_before_ranking(population_file, tmp_path, capsys) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / "file").write_text("x")
    code = main(["train", "--no-decision", "--population", str(population_file), "--members", str(N_MEMBERS), "--utility-budget", "0.5x",
                 "--out", str(run)])
    error = capsys.readouterr().err
    assert code == 2 and "already exists" in error and "ranking" not in error and "[references]" not in error


@pytest.mark.parametrize("shrink", [0.1, 0.95])
def test_budget_surface_puts_the_mechanism_back_on_the_budget(shrink, wide_population, wide_setting) -> None:
    """After an update moved (alpha, sigma) off the budget, the projection restores the closed-form loss to U:
    by scaling sigma, or (when the shrinkage alone costs more than U) by scaling alpha with sigma = 0."""
    from bngp.game.start import BudgetSurface

    budget = wide_setting.resolve("0.5x")
    reference = reference_at_budget("laplace", wide_setting, budget)
    prior = UniformSubsetPrior(wide_population.n_individuals, N_MEMBERS)
    game = Game(wide_population, prior, _config(budget=budget.value, noise_law="laplace"), start=reference)
    surface = game.players.budget_surface
    assert isinstance(surface, BudgetSurface)
    with torch.no_grad():
        game.defender.shrink_weight.fill_(shrink)
        game.defender.noise_scale.mul_(3.0)
    surface.project(game.defender)
    alpha = game.defender.shrink_weight.detach().double().numpy()
    sigma = game.defender.noise_scale.detach().double().numpy()
    assert surface.loss(alpha, sigma) == pytest.approx(budget.value, rel=2e-3)  # float32 parameters
    if shrink == 0.95:
        assert not sigma.any() and alpha.max() < 0.95
    else:
        assert np.all(alpha == np.float32(0.1)) and sigma.any()


def test_cli_evaluate_checks_any_defense_against_a_budget(population_file, wide_setting, tmp_path, capsys) -> None:
    out = tmp_path / "eval.json"
    assert main(["evaluate", "--no-decision", "--population", str(population_file), "--members", str(N_MEMBERS), "--defense",
                 "budget-laplace:budget=0.25x", "--attacks", "linear", "--releases", "4", "--utility-budget", "0.5x",
                 "--quiet", "--out", str(out)]) == 0
    budget = json.loads(out.read_text())["budget"]
    assert budget["given"] == "0.5x" and budget["met"]
    assert budget["measured_loss"] == pytest.approx(0.25 * wide_setting.data_independent_loss, rel=0.02)
    capsys.readouterr()
    code = main(["evaluate", "--no-decision", "--population", str(population_file), "--members", str(N_MEMBERS), "--defense", "none",
                 "--attacks", "linear", "--utility-budget", "2x", "--quiet", "--out", str(tmp_path / "e2.json")])
    error = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(error) == 1 and "not below the data-independent" in error[0]
    assert not (tmp_path / "e2.json").exists()


def test_the_budget_surface_root_is_brents_from_a_guessed_bracket() -> None:
    """_root_near: the root of an increasing function (0.3 tanh(c) + 0.05 c - 0.2: its root found by Brent's method
    on [0, 10] to 1e-14) to a relative 1e-9 from guesses near and far, with and without an upper end; a ray that never reaches the
    budget is refused with a typed error, not a loop."""
    from scipy.optimize import brentq

    from bngp.errors import InputError
    from bngp.game.start import _root_near

    def excess(c: float) -> float:
        return 0.3 * np.tanh(c) + 0.05 * c - 0.2

    root = brentq(excess, 0.0, 10.0, xtol=1e-14)
    for guess, upper in ((0.63, None), (0.1, None), (5.0, None), (0.9, 1.0), (1.0, 1.0)):
        assert _root_near(excess, guess, upper) == pytest.approx(root, rel=2e-9)
    with pytest.raises(InputError, match="utility budget"):
        _root_near(lambda c: 0.1 * np.tanh(c) - 0.2, 0.5, None)
    with pytest.raises(InputError, match="utility budget"):
        _root_near(lambda c: c - 2.0, 0.5, 1.0)


def test_the_budget_surface_takes_a_secant_step_before_brents_method() -> None:
    """_secant_or_root: on an increasing function the chord's point or one secant step from (1, f(1)) is kept when
    within the tolerance (counted evaluations: one or two), else Brent's method finishes to a relative 1e-9."""
    from scipy.optimize import brentq

    from bngp.game.start import _secant_or_root

    calls = []

    def excess(c: float) -> float:
        calls.append(c)
        return 0.3 * np.tanh(c) + 0.05 * c - 0.2

    root = brentq(excess, 0.0, 10.0, xtol=1e-14)
    calls.clear()
    chord = _secant_or_root(excess, excess(0.0), excess(1.0), 0.05)
    assert len(calls) == 3 and abs(excess(chord)) <= 0.05  # f(0), f(1), then the chord's point (f = 0.021) kept
    calls.clear()
    secant = _secant_or_root(excess, excess(0.0), excess(1.0), 1e-2)
    assert len(calls) == 4 and abs(excess(secant)) <= 1e-2  # the chord's point missed, the secant step (-0.004) kept
    exact = _secant_or_root(excess, excess(0.0), excess(1.0), 0.0)
    assert exact == pytest.approx(root, rel=2e-9)


def test_the_budget_surface_projects_by_newton_steps_on_the_closed_form(wide_population, wide_setting) -> None:
    """BudgetSurface.loss_and_slopes: the loss, and d/dk loss(alpha, k sigma) and d/dc loss(c alpha, sigma) at 1
    equal to the central finite differences (relative 1e-6); project() after a 20% move of sigma puts the loss within
    its relative 1e-6 in at most three evaluations beyond the first (Newton's method), counted."""
    from bngp.game.start import BudgetSurface

    budget = wide_setting.resolve("0.5x")
    reference = reference_at_budget("laplace", wide_setting, budget)
    prior = UniformSubsetPrior(wide_population.n_individuals, N_MEMBERS)
    game = Game(wide_population, prior, _config(budget=budget.value, noise_law="laplace"), start=reference)
    surface = game.players.budget_surface
    assert isinstance(surface, BudgetSurface)
    alpha = np.full(game.defender.shrink_weight.shape, 0.2)
    sigma = game.defender.noise_scale.detach().double().numpy() * 1.2
    loss, slope, by_shrink = surface.loss_and_slopes(alpha, sigma)
    assert loss == surface.loss(alpha, sigma)
    h = 1e-5
    finite = (surface.loss(alpha, (1 + h) * sigma) - surface.loss(alpha, (1 - h) * sigma)) / (2 * h)
    assert slope > 0 and slope == pytest.approx(finite, rel=1e-6)
    finite = (surface.loss(alpha, sigma, 1 + h) - surface.loss(alpha, sigma, 1 - h)) / (2 * h)
    assert by_shrink > 0 and by_shrink == pytest.approx(finite, rel=1e-6)
    with torch.no_grad():
        game.defender.shrink_weight.fill_(0.2)
        game.defender.noise_scale.mul_(1.2)
    calls = []
    original = surface.loss_and_slopes

    def counted(*args):
        calls.append(1)
        return original(*args)

    object.__setattr__(surface, "loss_and_slopes", counted)
    surface.project(game.defender)
    projected = surface.loss(game.defender.shrink_weight.detach().double().numpy(),
                             game.defender.noise_scale.detach().double().numpy())
    assert 2 <= len(calls) <= 4
    assert projected == pytest.approx(budget.value, rel=1e-5)  # 1e-6 in float64, then stored as float32
