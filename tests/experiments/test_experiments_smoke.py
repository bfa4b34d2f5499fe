"""Smoke tests of the paper-table runners (experiments/, paper 003 App. L.9) at the tiny scale.

The tiny scale (K 40, N 20, |Q| 120, a few training steps) checks that each runner trains,
evaluates and writes its JSON, Markdown and PNG reports; its AUCs carry no meaning.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

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
    assert payload["environment"]["packages"]["torch"] and payload["wall_seconds"] > 0
    assert "Attack knowledge:" in markdown
    for row in payload["rows"]:
        assert 0.0 <= row["auc"] <= 1.0 and row["auc_std"] >= 0.0 and row["seconds"] >= 0.0
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
    assert payload["settings"]["C"] > 0


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
