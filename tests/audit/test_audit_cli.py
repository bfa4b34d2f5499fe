"""``bngp audit`` end to end: every method writes AUDIT.json; bad input exits 2 with one line."""

import json
import math

import numpy as np
import pytest

from bngp.audit import bits_audit, fdp_one_run_audit, fdp_one_run_search, many_run_audit, panoramia_audit
from bngp.cli import main


def _write(path, header, rows):
    lines = [header] + [",".join(str(value) for value in row) for row in rows]
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture
def scores_csv(tmp_path):
    rng = np.random.default_rng(0)
    members = rng.integers(0, 2, 2000)
    scores = members * 2.0 + rng.normal(size=2000)
    baseline = members * 0.5 + rng.normal(size=2000)
    rows = [(f"{s:.6f}", int(m), f"{b:.6f}") for s, m, b in zip(scores, members, baseline)]
    return _write(tmp_path / "scores.csv", "score,member,baseline_score", rows)


@pytest.fixture
def bits_csv(tmp_path):
    rng = np.random.default_rng(1)
    bits = rng.integers(0, 2, 1000)
    keep = rng.random(1000) < math.e / (1 + math.e)
    guesses = np.where(keep, bits, 1 - bits)
    return _write(tmp_path / "bits.csv", "guess,bit", zip(guesses, bits))


def _run(argv, capsys):
    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize(
    "method, extra",
    [
        ("clopper-pearson", []),
        ("clopper-pearson", ["--strategy", "split", "--seed", "4"]),
        ("gdp", ["--delta", "1e-6"]),
        ("one-run", []),
        ("one-run", ["--k-plus", "100", "--k-minus", "100", "--delta", "1e-5"]),
        ("one-run", ["--k-plus", "50,100", "--k-minus", "0,100"]),
        ("panoramia", []),
        ("panoramia", ["--gamma", "1e-9"]),
        ("panoramia", ["--real-nonmembers"]),
    ],
)
def test_score_methods_write_audit_json(scores_csv, tmp_path, capsys, method, extra):
    out = tmp_path / "audit.json"
    code, stdout, err = _run(["audit", str(scores_csv), "--method", method, *extra, "--out", str(out)], capsys)
    assert code == 0, err
    payload = json.loads(out.read_text())
    assert payload["method"] == method
    assert payload["epsilon_lb"] == payload["result"]["epsilon_lb"] > 0
    for key in ("method", "confidence", "delta", "thresholds_examined", "union_bound"):
        assert key in payload["result"]
    assert "epsilon_lb =" in stdout


def test_cli_matches_the_library(scores_csv, bits_csv, tmp_path, capsys):
    data = np.genfromtxt(scores_csv, delimiter=",", names=True)
    out = tmp_path / "cp.json"
    assert main(["audit", str(scores_csv), "--method", "clopper-pearson", "--out", str(out)]) == 0
    expected = many_run_audit(data["score"], data["member"]).epsilon_lb
    assert json.loads(out.read_text())["epsilon_lb"] == pytest.approx(expected, rel=1e-12)
    assert "roc" in json.loads(out.read_text())
    out = tmp_path / "pan.json"
    assert main(["audit", str(scores_csv), "--method", "panoramia", "--out", str(out)]) == 0
    expected = panoramia_audit(data["score"], data["member"], data["baseline_score"])
    assert json.loads(out.read_text())["result"]["c_lb"] == pytest.approx(expected.c_lb, rel=1e-12)
    bits = np.genfromtxt(bits_csv, delimiter=",", names=True)
    out = tmp_path / "bits.json"
    assert main(["audit", str(bits_csv), "--method", "bits", "--family", "gdp", "--out", str(out)]) == 0
    payload = json.loads(out.read_text())
    expected = bits_audit(bits["guess"], bits["bit"], family="gdp")
    assert payload["epsilon_lb"] == pytest.approx(expected.epsilon_lb, rel=1e-12)
    assert payload["delta"] == 1e-5 and payload["result"]["family"] == "gdp"
    capsys.readouterr()


def test_fdp_one_run_method_matches_the_library(scores_csv, tmp_path, capsys):
    data = np.genfromtxt(scores_csv, delimiter=",", names=True)
    out = tmp_path / "fdp.json"
    code, stdout, err = _run(["audit", str(scores_csv), "--method", "fdp-one-run", "--out", str(out)], capsys)
    assert code == 0, err
    payload = json.loads(out.read_text())
    expected = fdp_one_run_search(data["score"], data["member"], delta=1e-5)
    assert payload["method"] == "fdp-one-run" and payload["delta"] == 1e-5
    assert payload["epsilon_lb"] == pytest.approx(expected.epsilon_lb, rel=1e-12) and expected.epsilon_lb > 0
    assert payload["result"]["mu_lb"] == pytest.approx(expected.mu_lb, rel=1e-12)
    assert "f-dp one-run" in stdout
    argv = ["audit", str(scores_csv), "--method", "fdp-one-run", "--k-plus", "100", "--k-minus", "50"]
    code, _, err = _run([*argv, "--delta", "1e-6", "--out", str(out)], capsys)
    assert code == 0, err
    fixed = fdp_one_run_audit(data["score"], data["member"], k_plus=100, k_minus=50, delta=1e-6)
    assert json.loads(out.read_text())["result"]["mu_lb"] == pytest.approx(fixed.mu_lb, rel=1e-12)
    code, _, err = _run([*argv, "--delta", "0", "--out", str(tmp_path / "bad.json")], capsys)
    assert code == 2 and err.startswith("bngp audit: error: ") and not (tmp_path / "bad.json").exists()


def _bad_files(tmp_path):
    nan_row = _write(tmp_path / "nan.csv", "score,member", [(0.1, 0), ("nan", 1), (0.3, 1)])
    return {
        "empty": _write(tmp_path / "empty.csv", "score,member", []),
        "blank": _write(tmp_path / "blank.csv", "", []),
        "one_class": _write(tmp_path / "one.csv", "score,member", [(0.1, 1), (0.2, 1)]),
        "nan": nan_row,
        "text": _write(tmp_path / "text.csv", "score,member", [(0.1, 0), ("high", 1)]),
        "label": _write(tmp_path / "label.csv", "score,member", [(0.1, 0), (0.2, 2)]),
        "missing_cell": _write(tmp_path / "cell.csv", "score,member", [(0.1, 0), (0.2,)]),
        "good": _write(tmp_path / "good.csv", "score,member", [(0.1, 0), (0.9, 1), (0.2, 0), (0.8, 1)]),
    }


@pytest.mark.parametrize(
    "file_key, extra",
    [
        ("empty", []),
        ("blank", []),
        ("one_class", []),
        ("nan", []),
        ("text", []),
        ("label", []),
        ("missing_cell", []),
        ("good", ["--confidence", "1.3"]),
        ("good", ["--confidence", "0"]),
        ("good", ["--confidence", "1"]),
        ("good", ["--delta", "-0.1"]),
        ("good", ["--method", "bits"]),
        ("good", ["--method", "panoramia"]),
        ("good", ["--method", "panoramia", "--real-nonmembers", "--delta", "1e-5"]),
        ("good", ["--method", "gdp", "--delta", "0"]),
        ("good", ["--family", "gdp"]),
        ("good", ["--method", "one-run", "--k-plus", "1"]),
        ("good", ["--method", "one-run", "--k-plus", "a", "--k-minus", "1"]),
        ("good", ["--method", "one-run", "--k-plus", "4", "--k-minus", "1"]),
        ("good", ["--seed", "-1", "--strategy", "split"]),
        ("missing", []),
    ],
)
def test_bad_input_exits_2_with_one_line_and_no_output(tmp_path, capsys, file_key, extra):
    files = _bad_files(tmp_path)
    path = files.get(file_key, tmp_path / "does-not-exist.csv")
    out = tmp_path / "out" / "audit.json"
    argv = ["audit", str(path), "--method", "clopper-pearson", "--out", str(out)]
    if "--method" in extra:
        position = extra.index("--method")
        argv[3] = extra[position + 1]
        extra = extra[:position] + extra[position + 2 :]
    code, stdout, err = _run(argv + extra, capsys)
    assert code == 2
    assert err.startswith("bngp audit: error: ") and err.count("\n") == 1, err
    assert not out.exists()
    assert stdout == ""


def test_audit_reads_the_scores_file_of_evaluate(tmp_path, capsys):
    """`bngp evaluate --scores-out` writes labels and NAME_scores (releases x individuals); the
    audit of one attack's scores equals the library's audit of the flattened arrays."""
    rng = np.random.default_rng(4)
    labels = (rng.random((6, 50)) < 0.5).astype(np.int8)
    scores = rng.normal(size=labels.shape) + 1.5 * labels
    path = tmp_path / "scores.npz"
    np.savez_compressed(path, labels=labels, linear_scores=scores, lrt_scores=-scores)
    out = tmp_path / "audit.json"
    code, _, err = _run(["audit", str(path), "--method", "clopper-pearson", "--attack", "linear", "--out", str(out)], capsys)
    assert code == 0, err
    expected = many_run_audit(scores.ravel(), labels.ravel().astype(np.float64), confidence=0.95)
    payload = json.loads(out.read_text())
    assert payload["epsilon_lb"] == pytest.approx(expected.epsilon_lb) and payload["attack"] == "linear"
    code, _, err = _run(["audit", str(path), "--method", "clopper-pearson", "--out", str(out)], capsys)
    assert code == 2 and "--attack" in err and len(err.strip().splitlines()) == 1
    renamed = tmp_path / "scores.csv"  # an .npz under a CSV name is still recognised
    renamed.write_bytes(path.read_bytes())
    code, _, err = _run(["audit", str(renamed), "--method", "gdp", "--attack", "lrt", "--out", str(out)], capsys)
    assert code == 0, err
    code, _, err = _run(["audit", str(path), "--method", "bits", "--out", str(out)], capsys)
    assert code == 2 and "bits" in err


def test_binary_file_that_is_not_csv_is_named(tmp_path, capsys):
    path = tmp_path / "scores.csv"
    path.write_bytes(bytes(range(256)) * 4)
    code, _, err = _run(["audit", str(path), "--method", "gdp", "--out", str(tmp_path / "a.json")], capsys)
    assert code == 2 and str(path) in err and "not a CSV text file" in err and len(err.strip().splitlines()) == 1


def test_help_of_audit_does_not_import_torch():
    """`bngp --help` and `bngp audit --help` import only what the audit needs (numpy, scipy)."""
    import subprocess
    import sys

    for argv in (["--help"], ["audit", "--help"]):
        code = ("import sys; from bngp.cli import main\n"
                f"try:\n    main({argv!r})\nexcept SystemExit:\n    pass\n"
                "print('torch' in sys.modules)")
        output = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
        assert output.strip().splitlines()[-1] == "False"
