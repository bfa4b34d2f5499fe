"""experiments/benchmarks/update_shapes.py end to end (one repeat, a small reference matmul): every
product of an attacker update is timed against the matmul of the same process, and the bounds it
reports follow from its own timings."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "experiments" / "benchmarks" / "update_shapes.py"


def test_update_shapes_reports_every_product_and_the_bounds_they_imply(tmp_path):
    subprocess.run([sys.executable, str(SCRIPT), "--repeats", "1", "--size", "512", "--out", str(tmp_path)],
                   capture_output=True, text=True, check=True)
    record = json.loads((tmp_path / "update_shapes_800x5000_b128_t1.json").read_text())
    products = record["products"]
    # forward and weight gradient of the four layers, input gradients of the two inner ones
    assert len(products) == 10 and sum(p["product"] == "input gradient" for p in products) == 2
    assert abs(sum(p["gflop"] for p in products) - 2 * 128 * (5000 * 3400 * 2 + 3400 * 2000 * 3 + 2000 * 800 * 3
                                                               + 5000 * 800 * 2) / 1e9) < 1e-9
    assert record["products_seconds"] == sum(p["seconds"] for p in products)
    assert record["adam_parameters"] == 5000 * 3400 + 3400 + 2 * 3400 + 3400 * 2000 + 2000 + 2000 * 800 + 800 + 5000 * 800 + 800
    assert 0 < record["ceiling_with_adam"] < record["products_fraction_of_matmul"]
    assert (tmp_path / "update_shapes_800x5000_b128_t1.md").read_text().startswith("# The products of one attacker update")


def test_update_shapes_refuses_a_batch_of_one_in_one_line():
    done = subprocess.run([sys.executable, str(SCRIPT), "--batch", "1"], capture_output=True, text=True)
    assert done.returncode == 2 and "--batch must be >= 2, got 1" in done.stderr and "Traceback" not in done.stderr
