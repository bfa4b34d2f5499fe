"""The release decision (bngp.decision): its fields on a budget-trained defender, a DP release and the
data-independent release f(theta), from the CLI and the API, and the verdict rules."""

from __future__ import annotations

import json

import pytest

from bngp.cli import main
from bngp.data.npz import save_population
from bngp.decision import DECISION_TOLERANCE, VERDICTS, AttackReading, DecisionRow, decide_release, frontier_verdict, verdict
from bngp.defenses.registry import DefenseContext, parse_defense_spec

MEMBERS = 30


@pytest.fixture(scope="module")
def wide_file(wide_population, tmp_path_factory):
    path = tmp_path_factory.mktemp("decision") / "wide.npz"
    save_population(wide_population, path)
    return path


def _evaluate(path, defense, out, *extra):
    code = main(["evaluate", "--population", str(path), "--members", str(MEMBERS), "--defense", defense,
                 "--attacks", "linear,score", "--releases", "4", "--quiet", "--out", str(out), *extra])
    assert code == 0
    return json.loads(out.read_text())


def _check_rows(decision, *, references: bool):
    labels = [row["label"] for row in decision["rows"]]
    assert labels[0] == "this release" and labels[-1] == "data-independent release f(theta)"
    if references:
        assert labels[1:3] == ["Laplace noise (matched)", "Gaussian noise (matched)"]
        assert labels[3].startswith("best reference: ")
        for row in decision["rows"][1:4]:  # every comparison spends the release's own loss (closed form, 1e-9)
            assert row["loss"] == pytest.approx(decision["utility_loss"], rel=1e-6)
        assert decision["rows"][1]["epsilon"] > 0 and decision["rows"][2]["epsilon"] > 0
    else:
        assert len(labels) == 2
    for row in decision["rows"]:
        assert 0.5 - 0.1 < row["auc"] <= 1 and 0 <= row["tpr_at_1pct_fpr"] <= 1


def test_decision_of_a_dp_release_opens_the_report(wide_file, tmp_path, capsys):
    payload = _evaluate(wide_file, "budget-laplace:budget=0.5x", tmp_path / "e.json")
    decision = payload["decision"]
    _check_rows(decision, references=True)
    # the release is matched Laplace itself: the two rows read the same mechanism, within the tolerance x 2
    assert abs(decision["rows"][0]["auc"] - decision["rows"][1]["auc"]) < 2 * DECISION_TOLERANCE + 0.02
    # the same mechanism at its measured loss (a sample of the calibration draws, within 2% of the expectation)
    assert decision["rows"][0]["epsilon"] == pytest.approx(decision["rows"][1]["epsilon"], rel=0.02)
    assert decision["verdict"] in ("on-frontier", "behind-reference")
    assert decision["budget"] is None and decision["budget_met"] is None
    report = (tmp_path / "e.md").read_text().splitlines()
    assert report[2] == "### Decision" and report[4].startswith("**This release is ")
    err = capsys.readouterr().err.strip().splitlines()
    assert any(line.startswith("decision: ") for line in err[-7:])


def test_decision_of_the_data_independent_release(wide_file, tmp_path):
    decision = _evaluate(wide_file, "data-independent", tmp_path / "e.json")["decision"]
    _check_rows(decision, references=False)
    assert decision["verdict"] == "data-independent"
    assert decision["utility_loss"] == pytest.approx(decision["data_independent_loss"], rel=1e-12)
    assert decision["rows"][0]["auc"] == pytest.approx(0.5, abs=1e-9)


def test_decision_of_a_budget_trained_defender(wide_file, tmp_path):
    run = tmp_path / "run"
    assert main(["train", "--population", str(wide_file), "--members", str(MEMBERS), "--utility-budget", "0.5x",
                 "--steps", "4", "--fresh-check-steps", "0", "--quiet", "--out", str(run)]) == 0
    decision = json.loads((run / "decision.json").read_text())
    assert (run / "decision.md").read_text().startswith("## Decision for the defender trained in")
    assert decision["budget"] == pytest.approx(decision["data_independent_loss"] / 2, rel=1e-3)
    assert decision["budget_met"] is True
    _check_rows(decision, references=True)
    # the defender starts from the best reference and is delivered only if not read higher: never behind it
    assert decision["verdict"] in ("on-frontier", "fully-revealing")
    evaluated = _evaluate(wide_file, f"run:{run}", tmp_path / "e.json")
    assert evaluated["decision"]["utility_loss"] == decision["utility_loss"]  # one measurement
    assert evaluated["budget"]["met"] is True and evaluated["decision"]["budget_met"] is True


def test_no_decision_flag(wide_file, tmp_path):
    assert "decision" not in _evaluate(wide_file, "none", tmp_path / "e.json", "--no-decision")


def _rows(own: float, laplace: float, best: float) -> list[DecisionRow]:
    return [DecisionRow("this release", 0.01, own, 0.1, 0.01), DecisionRow("Laplace", 0.01, laplace, 0.1, 0.01),
            DecisionRow("Gaussian", 0.01, 0.99, 0.1, 0.01), DecisionRow("best", 0.01, best, 0.1, 0.01),
            DecisionRow("f(theta)", 0.02, 0.5, 0.01, 0.001)]


@pytest.mark.parametrize("loss, strongest, rows, expected", [
    (0.02, 0.5, _rows(0.5, 0.6, 0.6)[:1], "data-independent"),
    (0.02, 0.7, _rows(0.7, 0.6, 0.6)[:1], "dominated"),
    (0.03, 0.5, _rows(0.5, 0.6, 0.6)[:1], "dominated"),
    (0.01, 0.995, _rows(0.995, 0.99, 0.99), "fully-revealing"),
    (1e-6, 0.9, _rows(0.9, 0.6, 0.6)[:1], "exact"),
    (0.01, 0.80, _rows(0.80, 0.79, 0.70), "worse-than-laplace"),
    (0.01, 0.80, _rows(0.80, 0.85, 0.79), "behind-reference"),
    (0.01, 0.80, _rows(0.80, 0.85, 0.796), "on-frontier"),
    (0.01, 0.80, _rows(0.79, 0.85, 0.80), "on-frontier"),
])
def test_verdict_rules(loss, strongest, rows, expected):
    """The order of the module docstring, with L0 = 0.02 and the tolerance 0.005."""
    assert verdict(loss, 0.02, AttackReading("a", strongest, 0.1, 0.01), rows) == expected
    assert expected in VERDICTS


def test_api_reads_the_stronger_of_the_evaluation_and_the_linear_attack(wide_population):
    defense = parse_defense_spec("none", DefenseContext(wide_population, MEMBERS))
    weak = AttackReading("weak", 0.55, 0.02, 0.001)
    decision = decide_release(wide_population, MEMBERS, defense, strongest=weak, seed=4)
    assert decision.strongest.name == "linear (converged)" and decision.strongest.auc > 0.9
    assert decision.utility_loss < 1e-6 and decision.verdict in ("exact", "fully-revealing")
    assert decision.verdict == ("fully-revealing" if decision.strongest.auc >= 0.99 else "exact")
    assert decision.to_dict()["seed"] == 4


@pytest.mark.parametrize("loss, auc, others, expected", [
    (0.02, 0.5, [], ("data-independent", None)),
    (0.025, 0.6, [], ("dominated", None)),
    (0.01, 0.999, [("laplace:epsilon=1", 0.005, 0.6)], ("fully-revealing", None)),
    (0.01, 0.80, [("laplace:epsilon=9", 0.0101, 0.70), ("shrinkage", 0.01, 0.60)], ("worse-than-laplace", "laplace:epsilon=9")),
    (0.01, 0.80, [("laplace:epsilon=9", 0.02, 0.70), ("shrinkage", 0.01, 0.60), ("other", 0.005, 0.7)],
     ("behind-reference", "shrinkage")),
    (0.01, 0.80, [("laplace:epsilon=9", 0.012, 0.70), ("shrinkage", 0.01, 0.797)], ("on-frontier", None)),
])
def test_frontier_verdict_is_the_pareto_order(loss, auc, others, expected):
    """Only releases of no larger loss (2% tolerance) and lower AUC by more than the tolerance count; L0 = 0.02."""
    assert frontier_verdict(loss, auc, 0.02, others) == expected
