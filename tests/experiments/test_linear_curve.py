"""experiments/linear_curve.py: the product's `linear` attack on a reproduction's defense, its curve
continued to a given cap.  Known answer: with the cap at the default, the first points of its curve
and its evaluation AUC are those of the reproduction's own `linear` evaluation (same seed, same
evaluation releases); a larger cap only appends points."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "experiments"))

import linear_curve  # noqa: E402

from bngp.reproduce import run_experiment  # noqa: E402


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("reproduce")
    run_experiment("table5", scale="quick", seed=0, out=out, progress=False)
    return out


def test_the_curve_extends_the_reproductions_own_linear_evaluation(root: Path, tmp_path: Path) -> None:
    run = root / "table5" / "runs" / "quick_seed0" / "composition-eps-1"
    stored = [json.loads(path.read_text()) for path in (run.parent / "evaluations").glob("*.json")]
    (own,) = [payload for payload in stored if payload.get("defense_spec") == f"run:{run}"]
    default_curve = own["attacks"]["linear"]["learning_curve"]
    assert len(own["attacks"]["linear"]["pooling"]["weights"]) == 5  # the composition's copies are pooled
    cap = 4 * default_curve["releases"][-1]
    assert linear_curve.main(["table5", f"run:{run}", "--scale", "quick", "--root", str(root), "--max-shadow", str(cap),
                              "--out", str(tmp_path / "curve")]) == 0
    record = json.loads((tmp_path / "curve.json").read_text())
    curve = record["learning_curve"]
    n = len(default_curve["releases"])
    assert curve["releases"][:n] == default_curve["releases"] and curve["auc"][:n] == pytest.approx(default_curve["auc"])
    assert curve["releases"][-1] <= cap and record["matmul_flops_float32"] > 0 and record["peak_memory_bytes"] > 0
    if not default_curve["converged"]:  # the longer curve went on past the default cap
        assert len(curve["releases"]) > n
    else:
        assert record["auc"] == pytest.approx(own["attacks"]["linear"]["auc"])
    assert "validation AUC" in (tmp_path / "curve.md").read_text()


def test_bad_arguments_are_refused_before_any_work(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    for argv, message in ((["table5", "x", "--max-shadow", "2", "--out", str(tmp_path / "o")], "--max-shadow"),
                          (["table5", "x", "--max-shadow", "20", "--out", str(tmp_path / "missing" / "o")], "folder not found"),
                          (["table5", "nosuch:x=1", "--max-shadow", "20", "--out", str(tmp_path / "o")], "unknown defense"),
                          (["nosuch", "x", "--max-shadow", "20", "--out", str(tmp_path / "o")], "unknown experiment")):
        with pytest.raises(SystemExit) as info:
            linear_curve.main(argv)
        assert info.value.code == 2 and message in capsys.readouterr().err
