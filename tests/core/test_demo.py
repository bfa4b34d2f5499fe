"""The demonstration end to end at small sizes: a budget defender, its decision first in the report and
last on the terminal, a directory that appears only when complete and is never replaced unasked."""

from __future__ import annotations

import json

import numpy as np
import pytest

from bngp.demo import DemoConfig, run_demo
from bngp.errors import InputError

SMALL = dict(individuals=60, reference=40, snvs=40, members=30, steps=3, releases=3)


def test_demo_trains_a_budget_defender_and_ends_with_its_decision(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr("bngp.demo.DEMO_ATTACKS", ("linear", "score"))  # the network attacker is tested elsewhere
    out = tmp_path / "demo"
    summary = run_demo(out, DemoConfig(**SMALL, seed=np.random.default_rng(3)), progress=True)
    printed = capsys.readouterr().out.strip().splitlines()
    assert printed[-7].startswith("decision: ")  # the decision block is the last thing printed
    assert sorted(p.name for p in out.iterdir()) == ["population.npz", "report.md", "roc.png", "run-budget",
                                                     "summary.json"]
    assert not (tmp_path / "demo.incomplete").exists()
    stored = json.loads((out / "summary.json").read_text())
    assert stored["config"]["seed"] == summary["config"]["seed"] and isinstance(stored["config"]["seed"], int)
    decision = stored["decision"]
    assert decision["budget"] == pytest.approx(decision["data_independent_loss"] / 2, rel=1e-3)
    assert decision["budget_met"] is True
    assert [row["label"] for row in decision["rows"]][1:3] == ["Laplace noise (matched)", "Gaussian noise (matched)"]
    assert set(stored["defenses"]) == {"none", f"budget-laplace:budget={decision['budget']:.6g}", "run:run-budget"}
    report = (out / "report.md").read_text()
    assert report.index("### Decision") < report.index("## Defense `none`")
    with pytest.raises(InputError, match="already exists: use --force"):
        run_demo(out, DemoConfig(**SMALL), progress=False)


def test_demo_config_refuses_a_bad_budget():
    with pytest.raises(InputError, match="utility budget"):
        DemoConfig(budget="half")
