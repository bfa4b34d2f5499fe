"""The defender's gradient through the attacker's best linear response (bngp.game.response): the exposures against
the dense posterior, the objectives' closed forms, the gradients against central differences, the descent along
the budget, the never-worse choice, the clustered standard errors and the CLI."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch
from scipy.stats import norm

from bngp.cli import main
from bngp.defenses.budget import BudgetSetting, row_space_optimal_at_budget, shaped_at_budget
from bngp.errors import InputError
from bngp.game import BudgetSurface, LinearResponse, choose_response, respond
from bngp.game.response import BudgetedObjective, mean_auc, objective_function, pooled_tpr, soft_maximum_auc
from bngp.metrics import auc, clustered_auc_se, clustered_tpr_se, tpr_at_fpr

N_MEMBERS = 20


@pytest.fixture(scope="module")
def setting(small_population) -> BudgetSetting:
    return BudgetSetting.of(small_population, N_MEMBERS)


@pytest.fixture(scope="module")
def budget(setting):
    return setting.resolve("0.75x")


def test_exposures_equal_the_dense_posterior(setting) -> None:
    """d_k^2 = (p - C_kk) / (p C_kk) with C = (A^T diag(1 / w^2) A + I / p)^-1, A = diag((1 - a) s / N) U^T, formed and
    inverted densely (K x K)."""
    space = setting.space
    rng = np.random.default_rng(0)
    shrink = rng.uniform(0.0, 0.9, space.rank)
    scale = rng.uniform(1e-3, 1e-2, space.rank)
    exposures = LinearResponse.of(space).exposures(torch.as_tensor(shrink), torch.as_tensor(scale)).numpy()
    theta = N_MEMBERS / space.n_individuals
    p = theta * (1 - theta)
    a = ((1 - shrink) * space.singular_values / N_MEMBERS)[:, None] * space.left.T
    posterior = np.linalg.inv(a.T @ (a / scale[:, None] ** 2) + np.eye(space.n_individuals) / p)
    diagonal = np.diag(posterior)
    np.testing.assert_allclose(exposures, (p - diagonal) / (p * diagonal), rtol=1e-8)


def test_objectives_have_their_closed_forms() -> None:
    """Equal exposures d: every candidate's AUC is Phi(d / sqrt 2), and the pooled TPR at FPR alpha is
    Phi(d - z_(1 - alpha)) (the Gaussian shift family); the soft maximum lies between the mean and the largest AUC
    and within T log K of the largest."""
    d = 1.3
    equal = torch.full((50,), d * d, dtype=torch.float64)
    assert float(mean_auc(equal)) == pytest.approx(norm.cdf(d / math.sqrt(2)), rel=1e-12)
    assert float(soft_maximum_auc(equal)) == pytest.approx(norm.cdf(d / math.sqrt(2)), rel=1e-12)
    for alpha in (0.01, 0.001):
        assert float(pooled_tpr(equal, alpha)) == pytest.approx(norm.cdf(d - norm.ppf(1 - alpha)), abs=1e-9)
    spread = torch.linspace(0.1, 4.0, 50, dtype=torch.float64)
    largest = norm.cdf(math.sqrt(4.0) / math.sqrt(2))
    soft = float(soft_maximum_auc(spread))
    assert float(mean_auc(spread)) < soft <= largest and soft >= largest - 0.01 * math.log(50)
    with pytest.raises(InputError, match="response objective"):
        objective_function("largest")


def test_the_loss_gradient_matches_central_differences(setting, budget) -> None:
    start = row_space_optimal_at_budget(setting, budget)
    surface = BudgetSurface.on_setting(start, setting, budget.value)
    rng = np.random.default_rng(1)
    shrink = rng.uniform(0.1, 0.9, start.space.rank)
    scale = rng.uniform(0.5, 2.0, start.space.rank) * start.direction_scales.mean()
    _, by_shrink, by_scale = surface.loss_and_gradient(shrink, scale)
    step = 1e-6
    for index in rng.choice(start.space.rank, 5, replace=False):
        moved = np.zeros(start.space.rank)
        moved[index] = step
        numeric_shrink = (surface.loss(shrink + moved, scale) - surface.loss(shrink - moved, scale)) / (2 * step)
        numeric_scale = (surface.loss(shrink, scale + moved) - surface.loss(shrink, scale - moved)) / (2 * step)
        assert by_shrink[index] == pytest.approx(numeric_shrink, rel=1e-5, abs=1e-12)
        assert by_scale[index] == pytest.approx(numeric_scale, rel=1e-5, abs=1e-12)


@pytest.mark.parametrize("objective", ["mean-auc", "tpr", "soft-max-auc"])
def test_the_gradient_through_the_response_and_the_budget_matches_central_differences(objective, setting,
                                                                                       budget) -> None:
    """Each difference re-solves the budget's noise factor exactly; the analytic gradient carries it implicitly."""
    start = shaped_at_budget(setting, budget, 0.2, "eigen")
    surface = BudgetSurface.on_setting(start, setting, budget.value)
    free = np.ones(start.space.rank, dtype=bool)
    evaluate = BudgetedObjective(LinearResponse.of(start.space), surface, objective_function(objective), free)
    rng = np.random.default_rng(2)
    shrink = torch.tensor(np.clip(start.direction_shrink + rng.uniform(-0.1, 0.1, free.size), 0.0, 0.9),
                          requires_grad=True)
    log_precision = torch.tensor(np.log((1 - shrink.detach().numpy()) ** 2 / start.direction_scales**2)
                                 + rng.normal(0, 0.5, free.size), requires_grad=True)
    value = evaluate(shrink, log_precision)[0]
    value.backward()
    step = 1e-5
    for tensor in (shrink, log_precision):
        for index in rng.choice(free.size, 4, replace=False):
            values = []
            for sign in (1.0, -1.0):
                with torch.no_grad():
                    tensor[index] += sign * step
                    values.append(float(evaluate(shrink.detach(), log_precision.detach())[0]))
                    tensor[index] -= sign * step
            numeric = (values[0] - values[1]) / (2 * step)
            assert float(tensor.grad[index]) == pytest.approx(numeric, rel=2e-3, abs=1e-9)


def test_the_descent_from_flat_noise_reaches_the_row_space_optimum_on_the_budget(setting, budget) -> None:
    """From noise flat in the row space, the gradient through the response finds the closed-form optimum of the
    same model (bngp.defenses.budget.row_space_optimal_at_budget) by another road, and every state meets the
    budget: the delivered one exactly on all the calibration draws."""
    start = shaped_at_budget(setting, budget, 0.0, "flat")
    optimum = row_space_optimal_at_budget(setting, budget)
    surface = BudgetSurface.on_setting(start, setting, budget.value)
    result = respond(start, surface, "mean-auc", steps=150, rate=0.05)
    model = LinearResponse.of(start.space)
    optimal = model.readings(optimum.direction_shrink, optimum.direction_scales)["mean_auc"]
    assert result.start_model["mean_auc"] > optimal + 0.03
    assert result.delivered_model["mean_auc"] == pytest.approx(optimal, abs=0.005)
    assert result.best_step > 100 and len(result.curve) == 151
    assert setting.loss(result.defense) == pytest.approx(budget.value, rel=1e-7)
    assert [row["step"] for row in result.curve] == list(range(151))


def test_a_suppressed_direction_stays_suppressed(setting, budget) -> None:
    start = row_space_optimal_at_budget(setting, budget)
    shrink = start.direction_shrink.copy()
    shrink[:3] = 1.0
    suppressed = type(start)(start.space, shrink, np.where(shrink == 1.0, 0.0, start.direction_scales), N_MEMBERS)
    budget_value = setting.loss(suppressed)
    surface = BudgetSurface.on_setting(suppressed, setting, budget_value)
    result = respond(suppressed, surface, "mean-auc", steps=10)
    assert np.all(result.defense.direction_shrink[:3] == 1.0) and np.all(result.defense.direction_scales[:3] == 0.0)


def test_respond_refuses_what_it_cannot_move(setting, budget) -> None:
    from bngp.defenses.budget import reference_at_budget

    laplace = reference_at_budget("laplace", setting, budget)
    shaped = shaped_at_budget(setting, budget, 0.0, "flat")
    surface = BudgetSurface.on_setting(shaped, setting, budget.value)
    with pytest.raises(InputError, match="shaped to the population"):
        respond(laplace, surface)
    with pytest.raises(InputError, match="response_steps"):
        respond(shaped, surface, steps=-1)
    silent = type(shaped)(shaped.space, 0.5, np.zeros(shaped.space.rank), N_MEMBERS)
    with pytest.raises(InputError, match="no noise"):
        respond(silent, surface)


def test_the_choice_keeps_a_state_only_where_the_converged_attack_reads_it_lower(small_population, setting,
                                                                                budget) -> None:
    optimum = row_space_optimal_at_budget(setting, budget)
    surface = BudgetSurface.on_setting(optimum, setting, budget.value)
    unmoved = respond(optimum, surface, "mean-auc", steps=0)
    same = choose_response(optimum, unmoved, small_population, N_MEMBERS, 7)
    assert same.kept == "start" and abs(same.margin) < 3 * same.margin_se
    flat = shaped_at_budget(setting, budget, 0.0, "flat")
    moved = respond(flat, BudgetSurface.on_setting(flat, setting, budget.value), "mean-auc", steps=100, rate=0.05)
    better = choose_response(flat, moved, small_population, N_MEMBERS, 7)
    assert better.kept == "trained" and better.margin < -2 * better.margin_se < 0
    assert better.to_dict()["auc_margin_se"] == better.margin_se


def _clustered(rng: np.random.Generator, releases: int, width: int) -> tuple[np.ndarray, np.ndarray]:
    labels = np.zeros((releases, width), dtype=int)
    for row in labels:
        row[rng.choice(width, width // 2, replace=False)] = 1
    return labels + rng.normal(size=(releases, width)) + 0.5 * rng.normal(size=(releases, 1)), labels


def test_the_clustered_standard_errors_match_the_spread_of_repeated_readings() -> None:
    """Scores sharing a per-release offset (the release's noise): the standard errors of the pooled AUC and of the
    TPR at 1% FPR match the standard deviation over 200 repetitions within 20% (the Monte Carlo spread's own error
    is 5%)."""
    rng = np.random.default_rng(3)
    scores, labels = _clustered(rng, 200, 60)
    repeated = [_clustered(rng, 200, 60) for _ in range(200)]
    assert clustered_auc_se(scores, labels) == pytest.approx(np.std([auc(*pair) for pair in repeated]), rel=0.2)
    assert clustered_tpr_se(scores, labels, 0.01) == pytest.approx(
        np.std([tpr_at_fpr(*pair, 0.01) for pair in repeated]), rel=0.2)
    with pytest.raises(InputError, match="two releases"):
        clustered_auc_se(scores[:1], labels[:1])


def test_cli_descends_records_and_logs_the_response(small_population_file, tmp_path, capsys) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    run = tmp_path / "run"
    code = main(["train", "--no-decision", "--population", str(small_population_file), "--members", str(N_MEMBERS),
                 "--utility-budget", "0.75x", "--response", "tpr", "--response-steps", "12", "--steps", "2",
                 "--refit-every", "2", "--eval-every", "2", "--fresh-check-steps", "0", "--seed", "3", "--quiet",
                 "--out", str(run)])
    assert code == 0
    assert "best response: kept the" in capsys.readouterr().err
    response = json.loads((run / "summary.json").read_text())["start"]["response"]
    assert response["objective"] == "tpr" and len(response["curve"]) == 13
    choice = response["choice"]
    assert choice["kept"] in ("start", "trained") and choice["auc_margin_se"] > 0
    assert "candidates" in response["threat_model"]
    events = EventAccumulator(str(run / "tensorboard"))
    events.Reload()
    assert len(events.Scalars("response/objective")) == 13


@pytest.mark.parametrize(("extra", "message"), [
    (["--kappa", "1", "--response", "mean-auc"], "`--response` descends from the best reference"),
    (["--utility-budget", "0.5x", "--start", "data-independent", "--response", "mean-auc"],
     "`--response` descends from the best reference"),
    (["--utility-budget", "0.5x", "--response", "mean-auc", "--response-steps", "-1"], "`--response-steps` must be"),
])
def test_cli_response_errors(extra, message, small_population_file, tmp_path, capsys) -> None:
    code = main(["train", "--no-decision", "--population", str(small_population_file), "--members", str(N_MEMBERS),
                 "--steps", "2", "--quiet", "--out", str(tmp_path / "run"), *extra])
    error = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(error) == 1 and message in error[0]
    assert not (tmp_path / "run").exists()
