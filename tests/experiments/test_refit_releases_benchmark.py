"""experiments/benchmarks/refit_releases.py end to end on a tiny composed size: it times the game's
refit-release phase against a positive bound, draws releases fixed by its seed (the fingerprint two
versions of the code are compared by), and refuses a bad size in one line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "experiments" / "benchmarks" / "refit_releases.py"


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), "--repeats", "2", *args], capture_output=True, text=True)


def test_refit_releases_reports_the_phase_and_is_fixed_by_its_seed():
    first, again, other = (json.loads(_run("--size", "30x80x3", *seed).stdout) for seed in ((), (), ("--seed", "1")))
    assert first["size"] == "30x80x3" and first["validation_rows"] == 500 and first["refit_rows"] >= 1
    assert len(first["seconds"]) == 2 and first["best_seconds"] == min(first["seconds"])
    assert 0 < first["products_seconds"] <= first["bound_seconds"] and first["matmul_gflops_float32"] > 0
    assert abs(first["fraction_of_bound"] - first["bound_seconds"] / first["best_seconds"]) < 2e-3
    assert first["releases_sha1"] == again["releases_sha1"] != other["releases_sha1"]


def test_refit_releases_refuses_a_bad_size_in_one_line():
    done = _run("--size", "30x0")
    assert done.returncode == 2 and "a size is KxQ or KxQxM" in done.stderr and "Traceback" not in done.stderr
