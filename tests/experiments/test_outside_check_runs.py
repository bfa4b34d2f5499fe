"""experiments/outside_check.py on a reproduction in progress (its runs directory, before the report
exists): every stored evaluation is attacked by the outside ridge, a trained defender through
``run:DIR`` and a mechanism built in code through the SPEC of the same noise; each verdict is stored
and reused, so a paper-scale Table 5 spread over several invocations is checked setting by setting."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "experiments"))

import outside_check  # noqa: E402

from bngp.reproduce import run_experiment  # noqa: E402

ARGS = ["--shadow", "300", "--validation", "60", "--test", "30"]


@pytest.fixture(scope="module")
def runs_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("reproduce")
    run_experiment("table5", scale="quick", seed=0, out=out, progress=False)
    return out / "table5" / "runs" / "quick_seed0"


def test_every_stored_evaluation_is_checked_and_reused(runs_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    stored = sorted((runs_dir / "evaluations").glob("*.json"))
    assert len(stored) == 4  # quick scale: eps 0.05 and 1, a composition and one mechanism each
    assert outside_check.main([str(runs_dir), *ARGS]) in (0, 1)
    result = json.loads(runs_dir.with_name("quick_seed0.outside.json").read_text())
    entries = {entry["evaluation"]: entry for entry in result["settings"]}
    assert set(entries) == {path.stem for path in stored} and result["experiment"] == "table5"
    for path in stored:
        evaluation, entry = json.loads(path.read_text()), entries[path.stem]
        assert "holds" in entry and entry["strongest"] == evaluation["strongest_attack"]
        if evaluation.get("defense_spec"):
            assert entry["defense_spec"] == evaluation["defense_spec"] and entry["defense_spec"].startswith("run:")
        else:  # one Gaussian mechanism built in code: the SPEC of the same noise law
            sigma = evaluation["defense"]["noise_law"]["scale"]
            assert entry["defense_spec"] == f"gaussian:scale={sigma!r},delta=1e-5"
    assert sorted(p.stem for p in (runs_dir / "outside").glob("*.json")) == sorted(entries)

    def refuse(*args, **kwargs):
        raise AssertionError("a stored verdict was recomputed")

    monkeypatch.setattr(outside_check, "attack_defense", refuse)
    assert outside_check.main([str(runs_dir), *ARGS]) in (0, 1)
    again = json.loads(runs_dir.with_name("quick_seed0.outside.json").read_text())
    assert again["settings"] == result["settings"]


def test_a_directory_that_is_not_a_runs_directory_is_refused(tmp_path: Path) -> None:
    (tmp_path / "somewhere" / "evaluations").mkdir(parents=True)
    with pytest.raises(SystemExit, match="OUT/NAME/runs/SCALE_seedS"):
        outside_check.main([str(tmp_path / "somewhere"), *ARGS])
