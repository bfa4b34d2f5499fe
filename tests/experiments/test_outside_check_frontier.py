"""experiments/outside_check.py on a frontier sweep: every cell is attacked by the outside ridge (a
BNGP cell through the trained defender the sweep keeps), each verdict is stored per cell and
reused, so a sweep spread over several invocations is checked while each defender is still on disk."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "experiments"))

import outside_check  # noqa: E402

from bngp.data.independent import simulate_independent  # noqa: E402
from bngp.data.npz import save_population  # noqa: E402
from bngp.sweep import run_sweep  # noqa: E402

ARGS = ["--shadow", "300", "--validation", "60", "--test", "30"]


@pytest.fixture(scope="module")
def sweep_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A BNGP cell (10 steps) and a Laplace cell on K = 20, |Q| = 40, in a directory named as the frontier names it."""
    root = tmp_path_factory.mktemp("frontier")
    population = root / "genome.npz"
    save_population(simulate_independent(20, 20, 40, seed=0), population)
    config = {"datasets": [{"path": str(population), "members": 10}], "defenses": ["bngp", "laplace"],
              "kappa": [1.5], "eps": [30.0], "seeds": [0], "attacks": ["linear", "score"], "releases": 10,
              "game": {"steps": 10, "fresh_check_steps": 5, "attacker_refit_every": 5}}
    run_sweep(config, root / "quick_seed0", progress=False)
    return root / "quick_seed0"


def _verdicts(sweep_dir: Path) -> dict[str, dict]:
    result = json.loads(sweep_dir.with_name(sweep_dir.name + ".outside.json").read_text())
    return {entry["setting"].split(" ", 1)[1].split(":")[0]: entry for entry in result["settings"]}


def test_every_cell_is_checked_and_each_verdict_is_stored(sweep_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert outside_check.main([str(sweep_dir), *ARGS]) in (0, 1)
    verdicts = _verdicts(sweep_dir)
    assert set(verdicts) == {"bngp", "laplace"}
    bngp = verdicts["bngp"]
    assert bngp["defense_spec"].startswith("run:") and "holds" in bngp and 0 <= bngp["outside"]["auc"] <= 1
    assert "holds" in verdicts["laplace"] and verdicts["laplace"]["defense_spec"].startswith("laplace:epsilon=30")
    cached = sorted(path.stem for path in (sweep_dir / "outside").glob("*.json"))
    assert cached == sorted(path.stem for path in (sweep_dir / "cells").glob("*.json"))

    # a rerun reuses every stored verdict, also once the defender is gone (a later invocation)
    def refuse(*args, **kwargs):
        raise AssertionError("a stored verdict was recomputed")

    monkeypatch.setattr(outside_check, "attack_defense", refuse)
    shutil.rmtree(next((sweep_dir / "runs").iterdir()))
    assert outside_check.main([str(sweep_dir), *ARGS]) in (0, 1)
    assert _verdicts(sweep_dir) == verdicts


def test_other_parameters_or_a_changed_cell_are_not_reused(sweep_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []

    def record(population, prior, defense, **kwargs):
        calls.append(defense.describe()["name"])
        return {"auc": 0.5, "test_auc_std": 0.0, "penalty": 1.0}

    monkeypatch.setattr(outside_check, "attack_defense", record)
    # the BNGP cell's defender was removed above: with other parameters it cannot be checked again
    outside_check.main([str(sweep_dir), "--shadow", "200", "--validation", "60", "--test", "30"])
    verdicts = _verdicts(sweep_dir)
    assert calls == ["laplace"] and "not on disk" in verdicts["bngp"]["skipped"]
    # a cell whose stored AUC changed (recomputed) is checked again
    laplace = next(path for path in (sweep_dir / "cells").glob("*.json") if json.loads(path.read_text())["family"] == "laplace")
    record_ = json.loads(laplace.read_text())
    laplace.write_text(json.dumps({**record_, "strongest_auc": record_["strongest_auc"] + 0.01}))
    calls.clear()
    outside_check.main([str(sweep_dir), "--shadow", "200", "--validation", "60", "--test", "30"])
    assert calls == ["laplace"]
