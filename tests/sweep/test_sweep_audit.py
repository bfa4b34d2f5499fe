"""The sweep's ``[audit]`` table: an end-to-end canary audit of every cell's defense, recorded as
an empirical eps lower bound per cell (sweep.json, sweep.md, a second row of frontier.png).

The audited sweep: K = 60 individuals, |Q| = 300, n = 30, one BNGP defender (10 steps) and
Laplace (paper sensitivity |Q|/n, pure eps-DP under replace) at eps 0.5, 50 and 1000, audited
many-run with 30 canaries and 50 releases.
"""

from __future__ import annotations

import json
import struct

import pytest

from bngp.data.independent import simulate_independent
from bngp.data.npz import save_population
from bngp.errors import InputError
from bngp.rng import named_seeds
from bngp.sweep import run_sweep
from sweep_helpers import assert_cli_refuses, bad_config, records_without_timing

AUDIT = {"mode": "many-run", "canaries": 30, "runs": 50}
AUDIT_FIELDS = {"epsilon_lb", "kind", "method", "confidence", "delta", "neighbouring", "mode", "canaries", "runs",
                "attack", "claimed_epsilon", "bound_exceeds_claim", "canary_auc", "seed", "seconds"}
#: the evaluation's outcome, which the audit must leave unchanged (its own seed stream).
EVALUATION_FIELDS = ("utility_loss", "data_independent_utility_loss", "auc", "strongest_attack", "strongest_auc",
                     "training", "game")


@pytest.fixture(scope="module")
def audit_population(tmp_path_factory):
    path = tmp_path_factory.mktemp("audit-data") / "pop.npz"
    save_population(simulate_independent(60, 40, 300, seed=0), path)
    return path


def audit_config(population, audit=AUDIT) -> dict:
    config = {
        "datasets": [{"path": str(population), "members": 30}],
        "defenses": ["bngp", "laplace"],
        "kappa": [1.0],
        "eps": [0.5, 50.0, 1000.0],
        "attacks": ["lrt", "score"],
        "releases": 10,
        "game": {"steps": 10, "fresh_check_steps": 20, "attacker_refit_every": 5},
    }
    if audit is not None:
        config["audit"] = dict(audit)
    return config


@pytest.fixture(scope="module")
def audited_sweep(audit_population, tmp_path_factory):
    out = tmp_path_factory.mktemp("sweep-audit") / "out"
    return run_sweep(audit_config(audit_population), out, progress=False)


def _records(result) -> dict[str, dict]:
    return {record["spec"]: record for record in json.loads(result.json_path.read_text())["results"]}


def _png_size(path) -> tuple[int, int]:
    return struct.unpack(">II", path.read_bytes()[16:24])


# -- config validation ---------------------------------------------------------------------------

BAD_AUDITS = [
    ({"audit": {"mode": "panoramia"}}, "`audit.mode` must be one of one-run, many-run"),
    ({"audit": {"canaries": -5}}, "`audit.canaries` must be an integer >= 2, got -5"),
    ({"audit": {"attack": "lrtt", "canaries": 10}}, "`audit.attack`: unknown attack 'lrtt'"),
    ({"audit": {"runs": 10, "canaries": 10}}, "`audit.runs` applies only to mode many-run"),
    ({"audit": {"mode": "many-run", "runs": 1, "canaries": 10}}, "`audit.runs` must be an integer >= 2"),
    ({"audit": {"confidence": 1.5, "canaries": 10}}, "`audit.confidence` must be a number in (0, 1)"),
    ({"audit": {"delta": -0.1, "canaries": 10}}, "`audit.delta` must be a number in [0, 1)"),
    ({"audit": {"canarie": 10}}, "unknown audit setting `audit.canarie`"),
    ({"audit": 5}, "`audit` must be a table of audit settings"),
    ({"audit": {"attack": "optimal-lrt", "canaries": 10}}, "`audit.attack`: 'optimal-lrt' needs a closed-form noise law"),
    # found when the data are read, still before any cell runs: the default 100 canaries, n = 10
    ({"audit": {}}, "`audit.canaries` must be <= members = 10 under the replace relation"),
    ({"audit": {"canaries": 12}, "defenses": ["laplace:sensitivity=add-remove"], "kappa": None, "game": None},
     "`audit.canaries` must leave at least members = 10 non-canaries"),
]



@pytest.mark.parametrize("changes, fragment", BAD_AUDITS, ids=[fragment for _, fragment in BAD_AUDITS])
def test_bad_audit_table_is_an_input_error_before_any_work(changes, fragment, sweep_population, tmp_path):
    path = bad_config(tmp_path, sweep_population, changes)
    with pytest.raises(InputError) as caught:
        run_sweep(path, tmp_path / "out", progress=False)
    message = str(caught.value)
    assert fragment in message and "\n" not in message and str(path) in message, message
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("changes, fragment", BAD_AUDITS[:3] + BAD_AUDITS[-2:-1],
                         ids=[fragment for _, fragment in BAD_AUDITS[:3] + BAD_AUDITS[-2:-1]])
def test_cli_bad_audit_table_is_one_line_and_exit_2(changes, fragment, sweep_population, tmp_path, capsys):
    path = bad_config(tmp_path, sweep_population, changes)
    assert_cli_refuses(path, tmp_path / "out", capsys, fragment)


def test_toml_audit_table_defaults(sweep_population, tmp_path):
    from bngp.sweep import load_sweep_config

    (tmp_path / "pop.npz").write_bytes(sweep_population.read_bytes())
    path = tmp_path / "sweep.toml"
    path.write_text('defenses = ["laplace"]\neps = 1\n[[datasets]]\npath = "pop.npz"\nmembers = 10\n[audit]\n')
    audit = load_sweep_config(path).audit
    assert audit.to_dict() == {"mode": "one-run", "canaries": 100, "attack": "score", "runs": None,
                               "confidence": 0.95, "delta": None}
    path.write_text('defenses = ["laplace"]\neps = 1\n[[datasets]]\npath = "pop.npz"\nmembers = 10\n'
                    '[audit]\nmode = "many-run"\ncanaries = 8\n')
    assert load_sweep_config(path).audit.runs == 200  # bngp.mechanism_audit.DEFAULT_RUNS


# -- the audited sweep ---------------------------------------------------------------------------

def test_audit_fields_in_every_output(audited_sweep, local_sweep):
    result = audited_sweep
    assert (result.computed, result.reused, result.failed) == (4, 0, ())
    payload = json.loads(result.json_path.read_text())
    assert payload["config"]["audit"] == {**AUDIT, "attack": "score", "confidence": 0.95, "delta": None}
    records = _records(result)
    assert list(records) == ["bngp:kappa=1.0", "laplace:epsilon=0.5", "laplace:epsilon=50.0", "laplace:epsilon=1000.0"]
    for cell, record in zip(result.cells, records.values()):
        audit = record["audit"]
        assert set(audit) == AUDIT_FIELDS and audit == cell.audit
        assert audit["kind"] == "lower bound" and audit["method"].startswith("many-run")
        assert (audit["mode"], audit["canaries"], audit["runs"], audit["attack"]) == ("many-run", 30, 50, "score")
        assert audit["confidence"] == 0.95 and audit["neighbouring"] == "replace" and audit["seconds"] > 0
        assert audit["epsilon_lb"] >= 0 and audit["seed"] == record["seeds"]["audit"]
        assert record["seeds"] == named_seeds(record["seed"], ("game", "evaluation", "audit"))
    bngp = records["bngp:kappa=1.0"]["audit"]  # the trained defender claims nothing: delta 0
    assert bngp["claimed_epsilon"] is None and bngp["bound_exceeds_claim"] is None and bngp["delta"] == 0.0
    markdown = result.markdown_path.read_text()
    assert "| audited eps lb |" in markdown and "any claimed eps below it is refuted" in markdown
    assert f"| {records['laplace:epsilon=1000.0']['audit']['epsilon_lb']:.3f} |" in markdown
    # a second row of panels (utility loss vs audited eps lb); without audit, one row as before
    assert _png_size(result.plot_path)[1] == 2 * _png_size(local_sweep[1].plot_path)[1]
    assert "audit" not in json.loads(local_sweep[1].json_path.read_text())["config"]
    assert "audited eps lb" not in local_sweep[1].markdown_path.read_text()


def test_weak_dp_gives_a_larger_bound_than_strong_dp(audited_sweep):
    """Laplace at eps 1000 (almost no noise) is caught by the score attack; at eps 0.5 the release
    is noise and nothing can be certified (a statistical property, fixed seed)."""
    bound = {spec: record["audit"]["epsilon_lb"] for spec, record in _records(audited_sweep).items()}
    assert bound["laplace:epsilon=0.5"] == 0.0
    assert bound["laplace:epsilon=1000.0"] > bound["laplace:epsilon=50.0"] > bound["laplace:epsilon=0.5"]
    assert bound["laplace:epsilon=1000.0"] > 1.5


def test_bound_never_exceeds_the_laplace_eps(audited_sweep):
    """Soundness with a known answer: Laplace with the paper sensitivity |Q|/n is pure eps-DP
    under the replace relation the audit follows (delta 0), so eps_lb <= eps."""
    for spec, record in _records(audited_sweep).items():
        if record["family"] == "laplace":
            audit = record["audit"]
            assert (audit["neighbouring"], audit["delta"], audit["claimed_epsilon"]) == ("replace", 0.0, record["eps"])
            assert audit["epsilon_lb"] <= record["eps"] and audit["bound_exceeds_claim"] is False, spec


def test_rerun_reuses_the_audited_cells(audited_sweep, audit_population):
    cells = sorted((audited_sweep.out_dir / "cells").glob("*.json"))
    before = {path.name: path.stat().st_mtime_ns for path in cells}
    again = run_sweep(audit_config(audit_population), audited_sweep.out_dir, progress=False)
    assert (again.reused, again.computed) == (4, 0)
    assert {path.name: path.stat().st_mtime_ns for path in cells} == before
    assert [r.to_dict() for r in again.cells] == [r.to_dict() for r in audited_sweep.cells]


def test_adding_the_audit_recomputes_and_keeps_the_old_cells(audited_sweep, audit_population, tmp_path):
    """A cell stored without an audit is not reused once the config has one; the audit's own
    seed stream leaves the evaluation (and the training) of each cell unchanged, and the cells
    stored without audit stay valid.  The audited run equals the fixture's (determinism)."""
    out = tmp_path / "out"
    plain = run_sweep(audit_config(audit_population, audit=None), out, progress=False)
    assert plain.computed == 4 and all(r.audit is None for r in plain.cells)
    plain_records = _records(plain)
    assert all("audit" not in record and set(record["seeds"]) == {"game", "evaluation"}
               for record in plain_records.values())
    audited = run_sweep(audit_config(audit_population), out, progress=False)
    assert (audited.computed, audited.reused) == (4, 0)
    audited_records = _records(audited)
    for spec, record in audited_records.items():
        plain_record = plain_records[spec]
        assert record["key"] != plain_record["key"]
        assert {k: record["seeds"][k] for k in ("game", "evaluation")} == plain_record["seeds"]
        assert [record[k] for k in EVALUATION_FIELDS] == [plain_record[k] for k in EVALUATION_FIELDS], spec
    assert records_without_timing(json.loads(audited.json_path.read_text())) == records_without_timing(
        json.loads(audited_sweep.json_path.read_text()))
    again = run_sweep(audit_config(audit_population, audit=None), out, progress=False)
    assert (again.computed, again.reused) == (0, 4)
    assert len(list((out / "cells").glob("*.json"))) == 8


def test_one_run_audit_of_a_dp_cell(audit_population, tmp_path):
    """The default mode: one release, 30 canaries; a different audit setting is a different cell."""
    config = audit_config(audit_population, audit={"canaries": 30})
    config.update(defenses=["laplace"], eps=[1000.0])
    for key in ("kappa", "game"):
        del config[key]
    result = run_sweep(config, tmp_path / "out", progress=False)
    (record,) = _records(result).values()
    audit = record["audit"]
    assert (audit["mode"], audit["runs"], audit["canaries"]) == ("one-run", 1, 30)
    assert audit["method"].startswith("one-run") and 0 < audit["epsilon_lb"] <= 1000.0
    config["audit"]["confidence"] = 0.9
    assert run_sweep(config, tmp_path / "out", progress=False).computed == 1
