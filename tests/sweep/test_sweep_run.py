"""A small sweep through the local backend: every cell merged, the frontier plotted, finished
cells reused by a rerun, failed cells retried and reported, progress on stderr."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from bngp.cli import main
from bngp.data.independent import simulate_independent
from bngp.data.npz import load_population, save_population
from bngp.defenses import DefenseContext, parse_defense_spec
from bngp.run_dir import verify_run
from bngp.sweep import execute, run_sweep
from bngp.sweep.store import CellStore
from sweep_helpers import records_without_timing, small_config, write_config


def test_merged_outputs_hold_every_cell(local_sweep):
    config, result = local_sweep
    payload = json.loads(result.json_path.read_text())
    assert payload["cells"] == len(payload["results"]) == len(result.cells) == 3 and payload["failed"] == 0
    assert (result.computed, result.reused, result.reused_seconds, result.failed) == (3, 0, 0, ())
    specs = [record["spec"] for record in payload["results"]]
    assert specs == ["bngp:kappa=0.5", "bngp:kappa=5.0", "laplace:epsilon=10.0"]
    for record in payload["results"]:
        assert record["status"] == "ok" and record["attempts"] == 1 and record["error"] is None
        assert set(record["auc"]) == {"lrt", "score"}
        assert record["strongest_auc"] == max(record["auc"].values()) == record["auc"][record["strongest_attack"]]
        assert 0 < record["utility_loss"] and record["seconds"] > 0 and record["seed"] == 0
        assert set(record["seeds"]) == {"game", "evaluation"}
        stored = json.loads((result.out_dir / "cells" / f"{record['key']}.json").read_text())
        assert stored == record
    bngp = payload["results"][0]
    assert bngp["game"]["steps"] == 10 and bngp["game"]["fresh_check_steps"] == 20 and bngp["game"]["kappa"] == 0.5
    assert bngp["game"]["seed"] == bngp["seeds"]["game"] and bngp["training"]["steps"] == 10
    laplace = payload["results"][2]
    assert laplace["eps"] == 10.0 and laplace["kappa"] is None and laplace["game"] is None
    # every defense at one seed is evaluated on the same draws: the same data-independent loss
    assert len({record["data_independent_utility_loss"] for record in payload["results"]}) == 1
    assert result.plot_path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    markdown = result.markdown_path.read_text()
    assert "3 cells: " in markdown and "0 failed" in markdown and "`laplace:epsilon=10.0`" in markdown
    assert not list(result.out_dir.glob(".*.tmp"))  # no temporary file left behind


def test_rerun_reuses_every_cell(local_sweep):
    config, first = local_sweep
    cells = sorted((first.out_dir / "cells").glob("*.json"))
    before = {path.name: path.stat().st_mtime_ns for path in cells}
    again = run_sweep(config, first.out_dir, progress=False)
    assert (again.reused, again.computed) == (3, 0)
    assert again.reused_seconds == sum(cell.seconds for cell in first.cells)  # the runs that computed them
    assert {path.name: path.stat().st_mtime_ns for path in cells} == before  # no cell recomputed or rewritten
    payload = json.loads(again.json_path.read_text())
    assert payload["reused"] == 3 and payload["computed"] == 0
    assert [r.to_dict() for r in again.cells] == [r.to_dict() for r in first.cells]


def test_failed_cells_are_retried_and_reported(sweep_population, tmp_path, monkeypatch, capsys):
    """With Ray unavailable: eps 1 always fails (reported with its error after 1 + 2 attempts,
    exit code 1), eps 10 fails once and succeeds on its retry; a rerun computes only the failed cell."""
    monkeypatch.setitem(sys.modules, "ray", None)  # the local backend does not need Ray
    calls: dict[float, int] = {}
    compute = execute._compute

    def flaky(cell, population, run_dir=None):
        calls[cell.parameter] = calls.get(cell.parameter, 0) + 1
        if cell.parameter == 1.0 or calls[cell.parameter] == 1:
            raise RuntimeError(f"boom at eps {cell.parameter:g}\nsecond line")
        return compute(cell, population, run_dir)

    monkeypatch.setattr(execute, "_compute", flaky)
    config = small_config(sweep_population, defenses=["laplace"], kappa=None, eps=[1.0, 10.0], game=None)
    config = write_config(tmp_path, {key: value for key, value in config.items() if value is not None})
    out = tmp_path / "out"
    code = main(["sweep", str(config), "--out", str(out)])
    captured = capsys.readouterr()
    assert code == 1, captured.err
    assert calls == {1.0: 3, 10.0: 2}
    summary = json.loads(captured.out)
    assert (summary["cells"], summary["computed"], summary["reused"], summary["failed"]) == (2, 2, 0, 1)
    progress = captured.err.strip().splitlines()
    assert len(progress) == 2 and all(line.startswith("[sweep] ") for line in progress)
    assert "failed after 3 attempt(s): RuntimeError: boom at eps 1" in progress[0]
    records = json.loads((out / "sweep.json").read_text())["results"]
    assert [(r["status"], r["attempts"]) for r in records] == [("failed", 3), ("ok", 2)]
    assert records[0]["error"] == "RuntimeError: boom at eps 1" and records[0]["utility_loss"] is None
    assert "## Failed cells" in (out / "sweep.md").read_text()
    assert (out / "frontier.png").is_file()

    monkeypatch.setattr(execute, "_compute", compute)
    code = main(["sweep", str(config), "--out", str(out), "--quiet", "--resume"])
    captured = capsys.readouterr()
    assert code == 0 and captured.err == ""
    summary = json.loads(captured.out)
    assert (summary["computed"], summary["reused"], summary["failed"]) == (1, 1, 0)


def test_ray_is_needed_only_by_the_ray_backend(sweep_population, tmp_path, monkeypatch, capsys):
    code = subprocess.run([sys.executable, "-c", "import sys, bngp.sweep, bngp.cli.sweep; print('ray' in sys.modules)"],
                          capture_output=True, text=True, cwd=tmp_path)
    assert code.returncode == 0 and code.stdout.strip() == "False", code.stderr
    monkeypatch.setitem(sys.modules, "ray", None)
    config = write_config(tmp_path, small_config(sweep_population))
    assert main(["sweep", str(config), "--backend", "ray", "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "pip install bngp[ray]" in err
    assert not (tmp_path / "out").exists()


def test_cells_run_cheapest_first_and_merge_in_grid_order(sweep_population, tmp_path, monkeypatch):
    """Smaller populations first and, within one, cells without a defender to train before BNGP
    cells; the merged results keep the grid order (dataset, defense, parameter)."""
    larger = tmp_path / "larger.npz"
    save_population(simulate_independent(20, 20, 80, seed=1), larger)
    order: list[tuple[str, str]] = []

    def record(cell, population, run_dir=None):
        order.append((cell.dataset.name, cell.family))
        raise RuntimeError("recorded")

    monkeypatch.setattr(execute, "_compute", record)
    config = small_config(larger, kappa=[0.5], retries=0)
    config["datasets"] = [{"path": str(larger), "members": 10}, {"path": str(sweep_population), "members": 10}]
    result = run_sweep(config, tmp_path / "out", progress=False)
    assert order == [("pop", "laplace"), ("pop", "bngp"), ("larger", "laplace"), ("larger", "bngp")]
    assert [(r.cell.dataset.name, r.cell.family) for r in result.cells] == \
        [("larger", "bngp"), ("larger", "laplace"), ("pop", "bngp"), ("pop", "laplace")]


def test_bngp_cells_keep_their_trained_defender(local_sweep, sweep_population):
    """Each BNGP cell's run directory is kept in runs/<key>/ without its checkpoint, verifies and
    loads as a defense; a DP cell has none, and no record carries the files."""
    config, result = local_sweep
    store = CellStore(result.out_dir / "cells")
    population = load_population(sweep_population)
    for cell_result in result.cells:
        run = store.defender_run(cell_result.cell)
        assert cell_result.defender_run is None  # the files are on disk, not in memory
        if cell_result.cell.game is None:
            assert run is None and not store.run_path(cell_result.cell).exists()
            continue
        manifest = verify_run(run)
        assert set(manifest["dropped"]) == {"checkpoint.pt"} and "defender.pt" in manifest["files"]
        defense = parse_defense_spec(f"run:{run}", DefenseContext(population, 10))
        assert defense.describe()["name"] and manifest["config"]["objective"]["kappa"] == cell_result.cell.parameter
    payload = json.loads(result.json_path.read_text())
    assert all("defender_run" not in record for record in payload["results"])


def test_an_interrupted_bngp_cell_resumes_its_training(sweep_population, tmp_path, monkeypatch):
    """A sweep killed during a BNGP cell's training leaves the training's checkpoint in
    runs/<key>.incomplete/; the rerun resumes it (only the steps after the checkpoint are trained)
    and gives the record of an uninterrupted sweep; a run finished before the cell's evaluation
    was interrupted is reused without training."""
    from bngp.game import Game
    from bngp.run_dir import staging_dir

    config = small_config(sweep_population, defenses=["bngp"], kappa=[0.5], attacks=["lrt"],
                          game={"steps": 6, "checkpoint_every": 2, "fresh_check_steps": 4})
    del config["eps"]
    whole = run_sweep(config, tmp_path / "whole", progress=False)
    original = Game.training_step
    steps: list[int] = []

    def training_step(self):
        if interrupt and self.step + 1 == 5:
            raise KeyboardInterrupt  # not an Exception: the sweep stops, as on a kill
        steps.append(self.step + 1)
        return original(self)

    monkeypatch.setattr(Game, "training_step", training_step)
    interrupt = True
    out = tmp_path / "split"
    with pytest.raises(KeyboardInterrupt):
        run_sweep(config, out, progress=False)
    (cell,) = [result.cell for result in whole.cells]
    run = CellStore(out / "cells").run_path(cell)
    assert steps == [1, 2, 3, 4] and (staging_dir(run) / "checkpoint.pt").is_file() and not run.exists()
    interrupt, steps[:] = False, []
    resumed = run_sweep(config, out, progress=False)
    assert steps == [5, 6] and resumed.computed == 1
    assert records_without_timing(json.loads(resumed.json_path.read_text())) == \
        records_without_timing(json.loads(whole.json_path.read_text()))
    assert set(verify_run(run)["dropped"]) == {"checkpoint.pt"}
    # a training finished before an interrupted evaluation: the cell's file is gone, the run is reused
    (out / "cells" / f"{cell.key}.json").unlink()
    again = run_sweep(config, out, progress=False)
    assert steps == [5, 6] and again.computed == 1
    assert records_without_timing(json.loads(again.json_path.read_text())) == \
        records_without_timing(json.loads(whole.json_path.read_text()))
