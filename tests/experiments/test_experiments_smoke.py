"""Smoke tests of the paper-table runners (experiments/, arXiv:2410.07414 App. L.9) at the tiny scale.

The tiny scale (K 40, N 20, |Q| 120, a few training steps) checks that each runner trains,
evaluates and writes its JSON, Markdown and PNG reports; its AUCs carry no meaning.
"""

from __future__ import annotations

import json
import sys
from importlib.metadata import version
from pathlib import Path

import numpy as np
import pytest

EXPERIMENTS = Path(__file__).resolve().parents[2] / "experiments"
sys.path.insert(0, str(EXPERIMENTS))

import table3_kappa  # noqa: E402
import table5_composition  # noqa: E402

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _run_tiny(module, out: Path) -> dict:
    """Run ``module`` at the tiny scale into ``out``; check the three reports; return the JSON."""
    assert module.main(["--scale", "tiny", "--out", str(out), "--seed", "1"]) == 0
    stem = out / "tiny_seed1"
    payload = json.loads(stem.with_suffix(".json").read_text())
    markdown = stem.with_suffix(".md").read_text()
    assert stem.with_suffix(".png").read_bytes().startswith(PNG_SIGNATURE)
    assert payload["scale"]["name"] == "tiny" and payload["seed"] == 1
    assert payload["environment"]["packages"]["torch"] == version("torch")
    parts = [payload["population"]["seconds"]]
    parts += [training["seconds"] for training in payload["trainings"].values()]
    parts += [evaluation["seconds"] for evaluation in payload["evaluations"].values()]
    assert payload["wall_seconds"] >= sum(parts)  # the wall time covers its parts
    assert "Attack knowledge:" in markdown
    assert {row["setting"] for row in payload["rows"]} == set(payload["evaluations"])
    for row in payload["rows"]:
        # each row is its evaluation's numbers: AUC mean and std over the scale's releases
        evaluation = payload["evaluations"][row["setting"]]
        entry = evaluation["attacks"][row["attack"]]
        per_release = entry["auc_per_release"]
        assert len(per_release) == payload["scale"]["releases"]
        assert row["auc"] == pytest.approx(np.mean(per_release))
        assert row["auc_std"] == pytest.approx(np.std(per_release, ddof=1))
        assert row["raw_auc"] == pytest.approx(row["auc"] if entry["orientation"] == 1 else 1 - row["auc"])
        assert row["utility_loss"] == evaluation["utility_loss"]
        assert row["seconds"] == entry["seconds"] <= evaluation["seconds"]
        if row["paper"] is not None:
            assert f"{row['paper'][0]:.4f}" in markdown
    return payload


def test_table5_composition_tiny(tmp_path: Path) -> None:
    payload = _run_tiny(table5_composition, tmp_path)
    rows = {(row["setting"], row["attack"]): row for row in payload["rows"]}
    for epsilon in table5_composition.EPSILONS:
        composition, single = table5_composition.PAPER[epsilon]
        assert rows[(f"composition, eps={epsilon:g}", "bayesian")]["paper"] == pytest.approx(composition)
        assert rows[(f"one mechanism, eps={epsilon:g}", "bayesian")]["paper"] == pytest.approx(single)
        training = payload["trainings"][f"composition-eps-{epsilon:g}"]
        assert training["config"]["dp_epsilon"] == pytest.approx(5 * epsilon)
        assert len(training["config"]["fixed_gaussian_sigmas"]) == table5_composition.FIXED_MECHANISMS
        assert training["bgbp"]["epsilon"] == pytest.approx(5 * epsilon)
    assert len(rows) == 2 * len(table5_composition.EPSILONS)
    # C = (Delta / mu per eps)^2 and each fixed mechanism is N(0, C / eps^2) (the module docstring)
    settings = payload["settings"]
    assert settings["C"] == pytest.approx((settings["typical_replacement_l2"] / table5_composition.MU_PER_EPSILON) ** 2)
    for epsilon in table5_composition.EPSILONS:
        sigmas = payload["trainings"][f"composition-eps-{epsilon:g}"]["config"]["fixed_gaussian_sigmas"]
        assert sigmas == pytest.approx([np.sqrt(settings["C"]) / epsilon] * table5_composition.FIXED_MECHANISMS)


def test_table3_kappa_tiny(tmp_path: Path) -> None:
    payload = _run_tiny(table3_kappa, tmp_path)
    attacks = {(row["setting"], row["attack"]) for row in payload["rows"]}
    assert attacks == {(f"BNGP defender, kappa={kappa:g}", attack) for kappa in table3_kappa.KAPPAS
                       for attack in table3_kappa.ATTACKS}
    assert [training["config"]["kappa"] for training in payload["trainings"].values()] == list(table3_kappa.KAPPAS)
    # a second invocation reuses the finished runs instead of retraining them
    again = _run_tiny(table3_kappa, tmp_path)
    assert all(training["reused"] for training in again["trainings"].values())


def test_budget_overrides_and_epsilon_subset(tmp_path: Path) -> None:
    argv = ["--scale", "tiny", "--out", str(tmp_path), "--epsilons", "1", "--steps", "2", "--attacker-steps", "3",
            "--releases", "2"]
    assert table5_composition.main(argv) == 0
    payload = json.loads((tmp_path / "tiny_seed0.json").read_text())
    assert payload["scale"]["steps"] == 2 and payload["scale"]["releases"] == 2
    assert payload["scale"]["attacker_eval_steps"] == 3 and payload["scale"]["fresh_check_steps"] == 3
    assert payload["settings"]["epsilons"] == [1.0]
    assert {row["setting"] for row in payload["rows"]} == {"composition, eps=1", "one mechanism, eps=1"}
    with pytest.raises(SystemExit):
        table5_composition.main(["--scale", "tiny", "--epsilons", "0.2"])
    with pytest.raises(SystemExit):
        table5_composition.main(["--scale", "tiny", "--steps", "0"])
