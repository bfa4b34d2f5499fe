"""A sweep over utility budgets: defenders trained for each budget (``bngp-budget``) beside the reference
mechanisms calibrated to it, and the budget axis's validation."""

from __future__ import annotations

import json

import pytest

from bngp.defenses.budget import BudgetSetting
from bngp.errors import InputError
from bngp.sweep import run_sweep
from bngp.sweep.config import SweepConfig
from sweep_helpers import bad_config, small_config


def _budget_config(population) -> dict:
    return small_config(population, defenses=["bngp-budget", "budget-laplace", "shrinkage:shrink=0.2", "time-sharing"],
                        kappa=[], eps=[], budgets=["0.5x"], attacks=["linear"], releases=4,
                        game={"steps": 4, "fresh_check_steps": 0, "attacker_refit_every": 2})


def test_a_budget_sweep_trains_from_the_best_reference_and_meets_the_budget(sweep_population, tmp_path) -> None:
    from bngp.data.npz import load_population

    result = run_sweep(_budget_config(sweep_population), tmp_path / "out", progress=False)
    records = {record["spec"]: record for record in json.loads(result.json_path.read_text())["results"]}
    assert set(records) == {"bngp-budget:budget=0.5x", "budget-laplace:budget=0.5x",
                            "shrinkage:budget=0.5x,shrink=0.2", "time-sharing:budget=0.5x"}
    assert all(record["status"] == "ok" and record["budget"] == "0.5x" for record in records.values())
    trained = records["bngp-budget:budget=0.5x"]["training"]
    budget = 0.5 * BudgetSetting.of(load_population(sweep_population), 10).data_independent_loss
    assert trained["budget"]["budget"] == pytest.approx(budget, rel=1e-12) and trained["budget"]["met"]
    assert trained["start"]["kept"] in ("start", "trained") and trained["start"]["reference"]
    for spec in ("budget-laplace:budget=0.5x", "shrinkage:budget=0.5x,shrink=0.2"):  # 4 releases: 15% error
        assert records[spec]["utility_loss"] == pytest.approx(budget, rel=0.15)
    assert "bngp-budget:budget=0.5x" in result.markdown_path.read_text()


@pytest.mark.parametrize(("changes", "message"), [
    ({"defenses": ["bngp-budget"], "kappa": [], "eps": []}, "`budgets` must list at least one utility budget"),
    ({"budgets": ["0.5x"]}, "`budgets` is given but no defense uses it"),
    ({"defenses": ["suppression:budget=0.5x"], "kappa": [], "eps": [], "budgets": ["0.5x"]}, "set by the `budgets` axis"),
    ({"defenses": ["bngp-budget:steps=3"], "kappa": [], "eps": [], "budgets": ["0.5x"]}, "takes no parameters"),
    ({"defenses": ["bngp-budget"], "kappa": [], "eps": [], "budgets": ["0.5x", "0.5x"]}, "lists '0.5x' twice"),
    ({"defenses": ["bngp-budget"], "kappa": [], "eps": [], "budgets": ["half"]}, "`budgets[0]`: a utility budget is"),
])
def test_budget_axis_is_validated(changes, message, sweep_population, tmp_path) -> None:
    with pytest.raises(InputError) as info:
        SweepConfig.from_dict(small_config(sweep_population, **changes))
    assert message in str(info.value) and "\n" not in str(info.value)


def test_a_budget_above_the_data_independent_loss_fails_before_any_cell(sweep_population, tmp_path, capsys) -> None:
    from sweep_helpers import assert_cli_refuses

    path = bad_config(tmp_path, sweep_population, {"defenses": ["bngp-budget"], "kappa": None, "eps": None,
                                                    "budgets": ["1.5x"]})
    assert_cli_refuses(path, tmp_path / "out", capsys, "not below the data-independent release's loss")


def test_a_sweep_with_decision_records_each_cells_release_decision(sweep_population, tmp_path) -> None:
    """``decision = true``: every cell records its release decision (matched Laplace and Gaussian and the best
    reference calibrated to its own loss), sweep.md lists them, a rerun reuses them, and the key of a cell
    without a decision is unchanged."""
    config = small_config(sweep_population, defenses=["budget-laplace", "suppression"], kappa=[], eps=[], budgets=["0.5x"],
                          attacks=["linear"], releases=4, decision=True)
    result = run_sweep(config, tmp_path / "out", progress=False)
    records = {record["spec"]: record for record in json.loads(result.json_path.read_text())["results"]}
    laplace = records["budget-laplace:budget=0.5x"]["decision"]
    labels = [row["label"] for row in laplace["rows"]]
    assert labels[:3] == ["this release", "Laplace noise (matched)", "Gaussian noise (matched)"]
    assert labels[3].startswith("best reference: ") and laplace["rows"][1]["epsilon"] > 0
    # K = 20 < |Q| = 40: at half of L0 the release is reconstructed, and the verdict says so
    assert (laplace["verdict"] == "fully-revealing") == (laplace["strongest"]["auc"] >= 0.99)
    assert laplace["verdict"] in ("fully-revealing", "on-frontier", "behind-reference")
    assert records["suppression:budget=0.5x"]["decision"]["rows"][0]["epsilon"] is None  # it states no guarantee
    text = result.markdown_path.read_text()
    assert "## Release decisions" in text and "`budget-laplace:budget=0.5x`" in text.split("## Release decisions")[1]
    again = run_sweep(config, tmp_path / "out", progress=False)
    assert again.reused == 2 and again.computed == 0
    plain = SweepConfig.from_dict({key: value for key, value in config.items() if key != "decision"})
    with_decision = SweepConfig.from_dict(config)
    assert plain.to_dict().get("decision") is None and with_decision.to_dict()["decision"] is True
    with pytest.raises(InputError, match="`decision` must be true or false"):
        SweepConfig.from_dict({**config, "decision": "yes"})
