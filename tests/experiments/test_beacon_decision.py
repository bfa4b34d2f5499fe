"""experiments/beacon_decision.py: ``bngp evaluate`` with its release decision run as a stage, its wall time, peak
memory and decision recorded; an existing --out is refused before any work."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "experiments"))

import beacon_decision  # noqa: E402
from bngp.data.independent import simulate_independent  # noqa: E402
from bngp.data.npz import save_population  # noqa: E402


def test_the_decision_stage_is_recorded_with_its_time_and_memory(tmp_path, monkeypatch) -> None:
    """K = 50 packed candidates x 200 attributes, N = 25: the record holds the stage's command, a positive wall time
    and peak, the decision's rows (this release first, f(theta) last) and a report naming them."""
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    population = tmp_path / "pop.npz"
    save_population(simulate_independent(50, 10, 200, seed=4).to_packed(), population)
    out = tmp_path / "decision"
    assert beacon_decision.main(["--population", str(population), "--members", "25", "--releases", "4",
                                 "--out", str(out)]) == 0
    record = json.loads((out / "results.json").read_text())
    assert record["command"].startswith("bngp evaluate --threads 1 --workers 1")
    assert record["seconds"] > 0 and 0 < record["peak_rss_gib"] < 4
    rows = [row["label"] for row in record["decision"]["rows"]]
    assert rows[0] == "this release" and rows[-1] == "data-independent release f(theta)"
    assert record["decision"]["verdict"] in (out / "report.md").read_text() or \
        record["decision"]["sentence"] in (out / "report.md").read_text()
    assert {"evaluation.json", "evaluation.md", "evaluate.log"} <= {path.name for path in out.iterdir()}
    with pytest.raises(SystemExit, match="exists"):
        beacon_decision.main(["--population", str(population), "--out", str(out)])
