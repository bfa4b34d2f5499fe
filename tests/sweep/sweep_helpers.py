"""Helpers of the sweep tests: the small sweep's config and the comparison of merged records."""

from __future__ import annotations

import json


def small_config(population, **changes) -> dict:
    """The small sweep: BNGP at kappa 0.5 and 5 and Laplace at eps 10, one seed, attacks lrt and
    score, 10 releases.  The defenders train for 10 steps with an attacker refit every 5, a
    20-step fresh-attacker check, defender selection and recalibrated leakage, so that the
    comparisons of a cell run alone with the same cell run after others cover the paths that
    call ``bngp.linear.logistic_calibration`` (whose least-squares driver once made them differ)."""
    config = {
        "datasets": [{"path": str(population), "members": 10}],
        "defenses": ["bngp", "laplace"],
        "kappa": [0.5, 5.0],
        "eps": [10.0],
        "seeds": [0],
        "attacks": ["lrt", "score"],
        "releases": 10,
        "game": {"steps": 10, "fresh_check_steps": 20, "select_defender": True, "attacker_refit_every": 5,
                 "recalibrate": True},
    }
    config.update(changes)
    return config


def write_config(directory, config: dict, name: str = "sweep.json"):
    path = directory / name
    path.write_text(json.dumps(config))
    return path


def bad_config(directory, population, changes):
    """A config file in ``directory`` over a copy of ``population`` (the path relative to the
    config's folder) with ``changes`` applied; a change to None drops the key."""
    (directory / "pop.npz").write_bytes(population.read_bytes())
    config = small_config("pop.npz", **changes)
    return write_config(directory, {key: value for key, value in config.items() if value is not None})


def assert_cli_refuses(path, out, capsys, fragment: str) -> None:
    """``bngp sweep PATH --out OUT`` exits 2 with one stderr line naming ``fragment``, and writes nothing."""
    from bngp.cli import main

    code = main(["sweep", str(path), "--out", str(out)])
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and lines[0].startswith("bngp sweep: error: ") and fragment in lines[0], err
    assert not out.exists()


def records_without_timing(payload: dict) -> list[dict]:
    """The merged records of a sweep.json payload, less the wall seconds (the cell's, and its
    audit's when it has one)."""
    records = []
    for record in payload["results"]:
        record = {key: value for key, value in record.items() if key != "seconds"}
        if isinstance(record.get("audit"), dict):
            record["audit"] = {key: value for key, value in record["audit"].items() if key != "seconds"}
        records.append(record)
    return records
