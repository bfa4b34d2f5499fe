"""``bngp data adult``: a population file that train, evaluate and audit-mechanism take like a
simulated one, and bad input as one line on stderr with exit code 2 and nothing written."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from bngp.cli import main
from bngp.data.npz import load_population


def run_cli(capsys, *argv):
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture(scope="module")
def adult_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("adult") / "pop.npz"
    assert main(["data", "adult", "--individuals", "60", "--reference", "60", "--seed", "0", "--out", str(path)]) == 0
    return path


def test_data_adult_writes_a_population(adult_file, tmp_path, capsys):
    population = load_population(adult_file)
    assert population.genotypes.shape == (60, 120) and population.reference.shape == (60, 120)
    assert population.attribute_names[0] == "age=<=25" and population.metadata["source"] == "uci-adult"
    assert not set(population.ids.tolist()) & set(population.reference_ids.tolist())
    again = tmp_path / "again.npz"
    code, out, _ = run_cli(capsys, "data", "adult", "--individuals", 60, "--reference", 60, "--seed", 0, "--out", again)
    assert code == 0 and "60 individuals, 60 reference, 120 binary attributes" in out
    with np.load(adult_file, allow_pickle=False) as a, np.load(again, allow_pickle=False) as b:
        assert np.array_equal(a["genotypes"], b["genotypes"]) and np.array_equal(a["ids"], b["ids"])


def test_evaluate_on_adult(adult_file, tmp_path, capsys):
    out = tmp_path / "eval.json"
    code, _, err = run_cli(capsys, "evaluate", "--no-decision", "--population", adult_file, "--members", 30, "--defense",
                           "laplace:epsilon=5", "--attacks", "lrt,score", "--releases", 5, "--quiet", "--out", out)
    assert code == 0, err
    report = json.loads(out.read_text())
    for name in ("lrt", "score"):
        assert math.isfinite(report["attacks"][name]["auc"]) and 0 <= report["attacks"][name]["auc"] <= 1


def test_train_and_audit_mechanism_on_adult(adult_file, tmp_path, capsys):
    run_dir = tmp_path / "run"
    code, _, err = run_cli(capsys, "train", "--no-decision", "--population", adult_file, "--members", 30, "--kappa", 1.5, "--steps", 3,
                           "--fresh-check-steps", 2, "--seed", 0, "--quiet", "--out", run_dir)
    assert code == 0, err
    assert (run_dir / "defender.pt").is_file() and (run_dir / "summary.json").is_file()
    audit = tmp_path / "audit.json"
    code, _, err = run_cli(capsys, "audit-mechanism", "--population", adult_file, "--members", 30, "--defense",
                           f"run:{run_dir}", "--mode", "one-run", "--canaries", 20, "--attack", "lrt", "--quiet",
                           "--out", audit)
    assert code == 0, err
    assert audit.is_file()


def _file(tmp):
    path = tmp / "plain.txt"
    path.write_text("x")
    return path


CASES = {
    # name: (arguments after `bngp data`, fragment of the one-line message)
    "unknown-dataset": (lambda t: ["mnist", "--individuals", 10, "--reference", 10, "--out", t / "p.npz"], "mnist"),
    "too-many-rows": (lambda t: ["adult", "--individuals", 40000, "--reference", 9000, "--out", t / "p.npz"], "48842"),
    "too-many-rows-split": (lambda t: ["adult", "--individuals", 16000, "--reference", 500, "--split", "test",
                                       "--out", t / "p.npz"], "16281"),
    "no-room-for-reference": (lambda t: ["adult", "--individuals", 48842, "--out", t / "p.npz"], "--reference"),
    "zero-individuals": (lambda t: ["adult", "--individuals", 0, "--reference", 10, "--out", t / "p.npz"],
                         "--individuals"),
    "negative-reference": (lambda t: ["adult", "--individuals", 10, "--reference", -3, "--out", t / "p.npz"],
                           "--reference"),
    "unknown-split": (lambda t: ["adult", "--individuals", 10, "--reference", 10, "--split", "dev",
                                 "--out", t / "p.npz"], "--split"),
    "negative-seed": (lambda t: ["adult", "--individuals", 10, "--reference", 10, "--seed", -1,
                                 "--out", t / "p.npz"], "--seed"),
    "out-is-a-directory": (lambda t: ["adult", "--individuals", 10, "--reference", 10, "--out", t], "existing directory"),
    "out-under-a-file": (lambda t: ["adult", "--individuals", 10, "--reference", 10, "--out", _file(t) / "p.npz"],
                         "not a directory"),
    "out-deep-under-a-file": (lambda t: ["adult", "--individuals", 10, "--reference", 10,
                                         "--out", _file(t) / "a" / "b" / "p.npz"], "not a directory"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_input_is_one_line_exit_2(case, tmp_path, capsys):
    build, fragment = CASES[case]
    work = tmp_path / "work"
    work.mkdir()
    before = sorted(p.name for p in work.rglob("*"))
    code, out, err = run_cli(capsys, "data", *build(work))
    lines = [line for line in err.strip().splitlines() if line]
    assert code == 2 and len(lines) == 1 and "Traceback" not in err, err
    assert lines[0].startswith("bngp data: error:") and fragment in lines[0], lines[0]
    after = sorted(p.name for p in work.rglob("*"))
    assert set(after) - set(before) <= {"plain.txt"}, after
