"""experiments/reference_ranking.py and the report of experiments/budget_defenders.py on tiny inputs."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "experiments"))

from budget_defenders import markdown  # noqa: E402
from reference_ranking import main  # noqa: E402


def test_reference_ranking_writes_the_ranking(tmp_path, capsys) -> None:
    out = tmp_path / "ranking.json"
    assert main(["--dataset", "genome", "--scale", "quick", "--budget", "0.5x", "--shrink-grid", "0.2", "--out",
                 str(out)]) == 0
    record = json.loads(out.read_text())
    labels = [entry["label"] for entry in record["references"]]
    assert labels == ["laplace", "gaussian", "shrinkage laplace a=0.2", "linear-optimal laplace", "suppression",
                      "gaussian population flat", "shrinkage a=0.2 population flat", "gaussian population eigen",
                      "shrinkage a=0.2 population eigen", "linear-optimal population",
                      "time-sharing"]  # K - 1 < |Q|: the shaped references too
    assert record["best"] in labels and record["best"] != "time-sharing"
    assert record["budget"]["fraction_of_data_independent"] == 0.5 and len(record["matmul_flops_float32"]) == 2
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["best"] == record["best"]


def test_budget_defenders_report_states_the_margins() -> None:
    row = {"loss": 0.005, "met": True, "strongest_attack": "stacked", "auc": 0.8, "tpr_at_1pct": 0.2,
           "tpr_at_01pct": 0.05, "outside_ridge_auc": 0.79}
    record = {"fraction": 0.5, "budget": {"budget": 0.005}, "train_seconds": 100.0, "selected_step": 0,
              "start": {"reference": "suppression", "kept": "start", "reason": "r"},
              "rows": [{"mechanism": "BNGP (trained)", **row}, {"mechanism": "laplace", **row, "auc": 0.9}],
              "acceptance": {"auc_margin": -0.1, "auc_within_0.01": True, "best_reference": "laplace",
                             "tpr_at_1pct_margin": 0.0, "tpr_within_0.02": True, "outside_auc_margin": 0.0,
                             "best_reference_outside": "laplace", "outside_within_0.01": True}}
    text = markdown([record])
    assert "## Budget 0.5 x L0 = 0.005 (L0 = 0.01)" in text and "| laplace | 0.00500 | yes | stacked | 0.9000 |" in text
    assert "AUC margin -0.1000 (within 0.01: True)" in text
