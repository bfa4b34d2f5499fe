"""Run directories as transactions (bngp.run_dir): a training run killed at any point never
looks complete, readers refuse what is not complete, and --resume finishes the run."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from bngp.cli import main
from bngp.errors import DataFormatError, MissingFileError
from bngp.run_dir import MANIFEST_FILE, drop_from_run, staging_dir, verify_run

TRAIN = ["train", "--no-decision", "--members", "20", "--kappa", "1.5", "--steps", "30", "--attacker-steps", "1", "--batch-size", "8",
         "--fresh-check-steps", "5", "--quiet"]


def _train_command(population: Path, out: Path, seed: int, *extra: str) -> list[str]:
    return [sys.executable, "-m", "bngp.cli", *TRAIN, "--population", str(population), "--seed", str(seed),
            "--out", str(out), *extra]


def _run(command: list[str]) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=600)


def _reader_outcome(run: Path, population: Path, capsys) -> str:
    """'complete' when evaluate accepts run:RUN, 'refused' when it gives a one-line error, exit 2."""
    out = run.parent / "eval.json"
    code = main(["evaluate", "--no-decision", "--population", str(population), "--members", "20", "--defense", f"run:{run}",
                 "--attacks", "reconstruction", "--releases", "2", "--force", "--out", str(out)])
    err = capsys.readouterr().err
    if code == 0:
        return "complete"
    assert code == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    return "refused"


def _kill_points(count: int, duration: float, seed: int) -> list[float]:
    return sorted(np.random.default_rng(seed).uniform(0.3, duration, count).tolist())


@pytest.mark.parametrize("kills", [pytest.param(6, id="6-kills"), pytest.param(20, id="20-kills", marks=pytest.mark.slow)])
def test_sigkill_at_random_points_never_leaves_a_run_that_looks_complete(small_population_file, tmp_path, capsys, kills):
    """Kill `bngp train` (SIGKILL) at random points, alternately on a fresh directory and on
    one holding a complete earlier run (overwritten with --force): after every kill, RUN_DIR is
    either absent (readers refuse it with one line) or exactly the earlier complete run
    (its manifest verifies and evaluate accepts it); --resume then completes the run."""
    run = tmp_path / "run"
    started = time.perf_counter()
    reference = _run(_train_command(small_population_file, run, 0))
    duration = time.perf_counter() - started
    assert reference.returncode == 0, reference.stderr
    complete_manifest = verify_run(run)
    for index, point in enumerate(_kill_points(kills, duration, seed=kills)):
        fresh = index % 2 == 0
        target = tmp_path / f"fresh{index}" if fresh else run
        extra = () if fresh else ("--force",)
        process = subprocess.Popen(_train_command(small_population_file, target, index + 1, *extra),
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                   env={**os.environ, "OMP_NUM_THREADS": "1"})
        time.sleep(point)
        process.send_signal(signal.SIGKILL)
        process.wait()
        if fresh:
            if target.is_dir():  # the kill came after the commit: a complete run
                verify_run(target)
                assert _reader_outcome(target, small_population_file, capsys) == "complete"
            else:
                with pytest.raises(MissingFileError):
                    verify_run(target)
                assert _reader_outcome(target, small_population_file, capsys) == "refused"
        else:
            manifest = verify_run(run)  # the earlier run, or the new one if it completed
            assert manifest["seed"] in (0, index + 1)
            assert _reader_outcome(run, small_population_file, capsys) == "complete"
    assert complete_manifest["files"]  # the first run listed its files
    interrupted = next((tmp_path / f"fresh{i}" for i in range(0, kills, 2)
                        if staging_dir(tmp_path / f"fresh{i}").is_dir() and not (tmp_path / f"fresh{i}").exists()), None)
    if interrupted is not None and (staging_dir(interrupted) / "checkpoint.pt").is_file():
        seed = int(interrupted.name.removeprefix("fresh")) + 1
        resumed = _run(_train_command(small_population_file, interrupted, seed, "--resume"))
        assert resumed.returncode == 0, resumed.stderr
        assert verify_run(interrupted)["seed"] == seed and not staging_dir(interrupted).exists()


def test_readers_refuse_incomplete_and_altered_runs(tiny_run, small_population_file, tmp_path, capsys):
    """No manifest (an interrupted or foreign directory), a missing file, or a file changed
    after completion: evaluate refuses with one line and exit 2."""
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(tiny_run, copy)
    assert _reader_outcome(copy, small_population_file, capsys) == "complete"
    summary = copy / "summary.json"
    summary.write_text(json.dumps({**json.loads(summary.read_text()), "steps": 1}))
    with pytest.raises(DataFormatError, match="does not match its manifest"):
        verify_run(copy)
    assert _reader_outcome(copy, small_population_file, capsys) == "refused"
    (copy / "summary.json").unlink()
    with pytest.raises(DataFormatError, match="summary.json listed in its manifest is missing"):
        verify_run(copy)
    (copy / MANIFEST_FILE).unlink()
    with pytest.raises(DataFormatError, match="not a complete bngp run"):
        verify_run(copy)
    assert _reader_outcome(copy, small_population_file, capsys) == "refused"


def test_existing_run_is_not_overwritten_without_force(tiny_run, small_population_file, capsys):
    before = verify_run(tiny_run)
    code = main([*TRAIN, "--population", str(small_population_file), "--out", str(tiny_run)])
    err = capsys.readouterr().err
    assert code == 2 and "already exists" in err and "--force" in err and len(err.strip().splitlines()) == 1
    assert verify_run(tiny_run) == before


def test_resume_of_a_corrupt_checkpoint_is_one_line(small_population_file, tmp_path, capsys):
    run = tmp_path / "run"
    staging = staging_dir(run)
    staging.mkdir()
    (staging / "checkpoint.pt").write_bytes(b"not a checkpoint")
    code = main([*TRAIN, "--population", str(small_population_file), "--out", str(run), "--resume"])
    err = capsys.readouterr().err
    assert code == 2 and "checkpoint" in err and len(err.strip().splitlines()) == 1 and "weights_only" not in err
    assert not run.exists()


@pytest.mark.parametrize("command", ["evaluate", "audit-mechanism"])
def test_sigkill_of_evaluate_and_audit_mechanism_never_leaves_a_partial_report(small_population_file, tmp_path, command):
    """Killed at random points, the JSON report (written last, atomically) is absent or complete.
    (A kill inside a write can leave that write's hidden temporary file, never a partial report.)"""
    out = tmp_path / "report.json"
    if command == "evaluate":
        argv = ["evaluate", "--no-decision", "--population", str(small_population_file), "--members", "20", "--defense",
                "laplace:scale=0.05", "--attacks", "score,reconstruction", "--releases", "3", "--quiet",
                "--scores-out", str(tmp_path / "scores.npz"), "--out", str(out)]
    else:
        argv = ["audit-mechanism", "--population", str(small_population_file), "--members", "20", "--defense",
                "laplace:scale=0.05", "--mode", "one-run", "--canaries", "8", "--attack", "score", "--out", str(out)]
    command_line = [sys.executable, "-m", "bngp.cli", *argv]
    started = time.perf_counter()
    finished = _run(command_line)
    assert finished.returncode == 0, finished.stderr
    duration = time.perf_counter() - started
    complete = json.loads(out.read_text())
    for point in _kill_points(4, duration, seed=len(command)):
        out.unlink(missing_ok=True)
        process = subprocess.Popen(command_line, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                   env={**os.environ, "OMP_NUM_THREADS": "1"})
        time.sleep(point)
        process.send_signal(signal.SIGKILL)
        process.wait()
        if out.exists():
            assert json.loads(out.read_text()).keys() == complete.keys()


def test_dropping_a_file_from_a_complete_run_keeps_it_verifiable(small_population_file, tmp_path, capsys):
    """drop_from_run: the run still verifies and evaluates, records what it dropped, and can no
    longer be resumed (one-line error); a file removed without it makes the run refused."""
    run = tmp_path / "run"
    assert main([*TRAIN, "--population", str(small_population_file), "--out", str(run), "--seed", "0"]) == 0
    before = verify_run(run)
    twin = tmp_path / "twin"
    shutil.copytree(run, twin)
    manifest = drop_from_run(run, ("checkpoint.pt", "not-there"))
    assert manifest == verify_run(run) and not (run / "checkpoint.pt").exists()
    assert manifest["dropped"] == {"checkpoint.pt": before["files"]["checkpoint.pt"]}
    assert set(manifest["files"]) == set(before["files"]) - {"checkpoint.pt"}
    assert drop_from_run(run, ("checkpoint.pt",)) == manifest  # dropping it again changes nothing
    assert _reader_outcome(run, small_population_file, capsys) == "complete"
    code = main([*TRAIN, "--population", str(small_population_file), "--out", str(run), "--resume"])
    err = capsys.readouterr().err
    assert code == 2 and "no checkpoint" in err and len(err.strip().splitlines()) == 1
    (twin / "checkpoint.pt").unlink()  # removed behind the manifest's back: refused
    with pytest.raises(DataFormatError, match="incomplete"):
        verify_run(twin)
