"""experiments/benchmarks/release_draw.py end to end on a tiny size: the phases add up, the
throughput reference is there, and the releases it draws are fixed by its seed (the fingerprint
two versions of the code are compared by)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "experiments" / "benchmarks" / "release_draw.py"


def _run(*args: str) -> dict:
    done = subprocess.run([sys.executable, str(SCRIPT), "--individuals", "30", "--outputs", "80", *args],
                          capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def test_release_draw_reports_its_phases_and_is_fixed_by_its_seed():
    first, again, other = _run("--releases", "50"), _run("--releases", "50"), _run("--releases", "50", "--seed", "1")
    phases = {name: value for name, value in first["seconds"].items() if name != "total"}
    assert set(phases) == {"memberships and randomness", "statistic", "defender noise", "release"}
    assert abs(sum(phases.values()) - first["seconds"]["total"]) < 0.01
    assert first["matmul_gflops_float32"] > 0 and first["peak_memory_gib"] > 0
    assert (first["releases"], first["seed"]) == (50, 0)
    assert first["releases_sha1"] == again["releases_sha1"] != other["releases_sha1"]


def test_release_draw_refuses_an_empty_size_in_one_line():
    done = subprocess.run([sys.executable, str(SCRIPT), "--releases", "0"], capture_output=True, text=True)
    assert done.returncode == 2
    assert "--releases must be >= 1, got 0" in done.stderr and "Traceback" not in done.stderr
