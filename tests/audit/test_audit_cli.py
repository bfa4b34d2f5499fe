"""``bngp audit`` end to end: every method writes AUDIT.json (and AUDIT.md, AUDIT.png next to
it); ``--method all`` reports every score method in one table; ``--claim`` is checked; bad input
exits 2 with one line."""

import json
import math

import numpy as np
import pytest

from bngp.audit import (
    bits_audit,
    check_claim,
    empirical_tradeoff,
    fdp_one_run_audit,
    fdp_one_run_search,
    gdp_audit,
    many_run_audit,
    one_run_search,
    panoramia_audit,
    per_target_audit,
)
from bngp.cli import main

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


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
    """``bngp ARGV`` (with --force: these tests read several audits into one output)."""
    code = main([*argv, "--force"])
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
    assert payload["epsilon_kind"] in ("lower bound", "lower bound under assumption", "estimate")
    assert out.with_suffix(".png").read_bytes().startswith(PNG_MAGIC)
    markdown = out.with_suffix(".md").read_text()
    assert (f"| {method} | {payload['epsilon_lb']:.4f} | {payload['epsilon_ceiling']:.4f} | "
            f"{payload['epsilon_kind']} |") in markdown
    assert payload["format"] == "bngp-audit-1" and payload["epsilon_lb"] <= payload["epsilon_ceiling"]
    assert len(payload["tradeoff"]["alpha_upper"]) == payload["tradeoff"]["thresholds_examined"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["audit.json", "audit.md", "audit.png", "scores.csv"]


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
    out.parent.mkdir()
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
    """`bngp evaluate --scores-out` writes labels and NAME_scores (releases x targets); the audit
    of one attack's scores is the library's per-target audit of the 2-D arrays, never of the
    flattened ones (which are not independent runs)."""
    rng = np.random.default_rng(4)
    labels = (rng.random((6, 50)) < 0.5).astype(np.int8)
    scores = rng.normal(size=labels.shape) + 1.5 * labels
    path = tmp_path / "scores.npz"
    np.savez_compressed(path, labels=labels, linear_scores=scores, lrt_scores=-scores)
    out = tmp_path / "audit.json"
    code, _, err = _run(["audit", str(path), "--method", "clopper-pearson", "--attack", "linear", "--out", str(out)], capsys)
    assert code == 0, err
    expected = per_target_audit(scores, labels, confidence=0.95)
    payload = json.loads(out.read_text())
    assert payload["epsilon_lb"] == pytest.approx(expected.epsilon_lb) and payload["attack"] == "linear"
    assert payload["result"]["best_target"] == expected.best_target and payload["rows"] == 300
    assert payload["runs"].startswith("6 releases x 50 targets of `bngp evaluate`, not independent runs")
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


def test_method_all_reports_every_score_method(scores_csv, tmp_path, capsys):
    """`--method all` runs the four score methods at confidence 1 - beta/4 and one delta; the
    top-level epsilon_lb is the largest bound of kind 'lower bound'; JSON, MD and PNG exist."""
    out = tmp_path / "all" / "audit.json"
    out.parent.mkdir()
    argv = ["audit", str(scores_csv), "--method", "all", "--claim", "gaussian:mu=0.5", "--out", str(out)]
    code, stdout, err = _run(argv, capsys)
    assert code == 0, err
    payload = json.loads(out.read_text())
    names = ["clopper-pearson", "gdp", "one-run", "fdp-one-run"]
    assert payload["method"] == "all" and list(payload["methods"]) == names
    assert payload["delta"] == 1e-5 and payload["confidence"] == 0.95
    each = 1 - 0.05 / 4
    data = np.genfromtxt(scores_csv, delimiter=",", names=True)
    expected = {
        "clopper-pearson": many_run_audit(data["score"], data["member"], confidence=each, delta=1e-5),
        "gdp": gdp_audit(data["score"], data["member"], confidence=each, delta=1e-5),
        "one-run": one_run_search(data["score"], data["member"], confidence=each, delta=1e-5),
        "fdp-one-run": fdp_one_run_search(data["score"], data["member"], confidence=each, delta=1e-5),
    }
    kinds = {"clopper-pearson": "lower bound", "gdp": "lower bound under assumption", "one-run": "lower bound",
             "fdp-one-run": "lower bound under assumption"}
    for name, entry in payload["methods"].items():
        assert entry["epsilon_lb"] == pytest.approx(expected[name].epsilon_lb, rel=1e-12) and entry["epsilon_lb"] > 0
        assert entry["epsilon_kind"] == kinds[name] and entry["confidence"] == pytest.approx(each)
        assert entry["delta"] == 1e-5 and entry["result"]["epsilon_lb"] == entry["epsilon_lb"]
    best = max(("clopper-pearson", "one-run"), key=lambda name: expected[name].epsilon_lb)
    assert payload["epsilon_lb_method"] == best and payload["epsilon_kind"] == "lower bound"
    assert payload["epsilon_lb"] == payload["methods"][best]["epsilon_lb"]
    assert payload["claim"]["refuted"] is True and payload["claim"]["claim"] == "gaussian:mu=0.5"
    curve = empirical_tradeoff(data["score"], data["member"], confidence=0.95)
    assert payload["claim"]["margin"] == pytest.approx(check_claim(curve, "gaussian:mu=0.5").margin)
    assert "roc" in payload and "tradeoff" in payload and "result" not in payload
    markdown = out.with_suffix(".md").read_text()
    rows = [line for line in markdown.splitlines() if line.startswith("| ") and not line.startswith("| method")]
    assert [row.split(" | ")[0][2:] for row in rows] == names
    assert "**refuted**" in markdown and f"from `{best}`" in markdown and "![" in markdown
    assert out.with_suffix(".png").read_bytes().startswith(PNG_MAGIC)
    assert sorted(p.name for p in out.parent.iterdir()) == ["audit.json", "audit.md", "audit.png"]
    assert stdout.startswith(f"epsilon_lb = {payload['epsilon_lb']:.4f} ({best}") and "claim gaussian:mu=0.5: refuted" in stdout


def test_true_claim_is_not_refuted_and_bits_claim_uses_the_error_rate(scores_csv, bits_csv, tmp_path, capsys):
    out = tmp_path / "cp.json"
    code, stdout, err = _run(["audit", str(scores_csv), "--method", "clopper-pearson", "--claim",
                              "gaussian:mu=2", "--out", str(out)], capsys)
    assert code == 0, err
    payload = json.loads(out.read_text())
    assert payload["claim"]["refuted"] is False and "not refuted" in stdout
    assert "**not refuted**" in out.with_suffix(".md").read_text()
    out = tmp_path / "bits.json"
    # randomized response with eps = 1: eps = 0.3 is refuted, eps = 2 is not.
    for spec, refuted in (("eps-delta:epsilon=0.3,delta=1e-5", True), ("eps-delta:epsilon=2,delta=1e-5", False)):
        code, _, err = _run(["audit", str(bits_csv), "--method", "bits", "--claim", spec, "--out", str(out)], capsys)
        assert code == 0, err
        payload = json.loads(out.read_text())
        assert payload["claim"]["refuted"] is refuted and "tradeoff" not in payload
        assert payload["claim"]["alpha"] == payload["result"]["error_rate_upper"]
    assert "no trade-off curve" in out.with_suffix(".md").read_text()
    assert out.with_suffix(".png").read_bytes().startswith(PNG_MAGIC)


@pytest.mark.parametrize(
    "extra, needle",
    [
        (["--claim", "garbage"], "--claim"),
        (["--claim", "gaussian:mu=-1"], "--claim"),
        (["--claim", "eps-delta:epsilon=1,delta=2"], "--claim"),
        (["--method", "all", "--delta", "0"], "--delta"),
        (["--method", "all", "--family", "gdp"], "--family"),
        (["--method", "all", "--real-nonmembers"], "--real-nonmembers"),
    ],
)
def test_bad_claims_and_all_options_exit_2_before_work(scores_csv, tmp_path, capsys, extra, needle):
    out = tmp_path / "out" / "audit.json"
    out.parent.mkdir()
    argv = ["audit", str(scores_csv), "--method", "clopper-pearson", "--out", str(out)]
    if "--method" in extra:
        position = extra.index("--method")
        argv[3] = extra[position + 1]
        extra = extra[:position] + extra[position + 2 :]
    code, stdout, err = _run(argv + extra, capsys)
    assert code == 2 and stdout == ""
    assert err.startswith("bngp audit: error: ") and err.count("\n") == 1 and needle in err, err
    assert not any(out.parent.iterdir())


def test_out_may_not_be_the_report_itself(scores_csv, tmp_path, capsys):
    for name in ("audit.md", "audit.PNG"):
        code, _, err = _run(["audit", str(scores_csv), "--method", "gdp", "--out", str(tmp_path / name)], capsys)
        assert code == 2 and err.count("\n") == 1 and ".md or .png" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["scores.csv"]


def _evaluate_scores(tmp_path):
    rng = np.random.default_rng(4)
    labels = (rng.random((6, 50)) < 0.5).astype(np.int8)
    path = tmp_path / "scores.npz"
    np.savez_compressed(path, labels=labels, linear_scores=rng.normal(size=labels.shape) + 1.5 * labels)
    return path


@pytest.mark.parametrize("extra", [["--method", "one-run"], ["--method", "fdp-one-run"], ["--method", "all"],
                                   ["--method", "panoramia", "--real-nonmembers"], ["--method", "bits"]])
def test_evaluate_scores_are_refused_for_methods_that_need_independent_coins(tmp_path, capsys, extra):
    """evaluate's releases x targets are not independent runs: the one-run methods (and all,
    PANORAMIA, bits) are refused in one line that says why and names what is valid."""
    path = _evaluate_scores(tmp_path)
    out = tmp_path / "out.json"
    code, stdout, err = _run(["audit", str(path), *extra, "--out", str(out)], capsys)
    assert code == 2 and stdout == "" and err.count("\n") == 1 and "Traceback" not in err
    assert "not independent runs" in err and f"--method {extra[1]} does not apply" in err
    assert "--method clopper-pearson or gdp" in err and "bngp audit-mechanism" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["scores.npz"]


def test_evaluate_scores_are_audited_per_target_with_their_ceiling(tmp_path, capsys):
    path = _evaluate_scores(tmp_path)
    out = tmp_path / "audit.json"
    code, stdout, err = _run(["audit", str(path), "--method", "gdp", "--out", str(out)], capsys)
    assert code == 0, err
    payload = json.loads(out.read_text())
    labels = np.load(path)["labels"]
    ceiling = per_target_audit(labels.astype(float), labels, method="gdp", delta=1e-5).epsilon_lb
    assert payload["epsilon_ceiling"] == pytest.approx(ceiling) == 0.0  # 6 releases certify nothing
    assert payload["ceiling_state"] == "design too small"
    best = payload["result"]["best_target"]
    assert payload["tradeoff"]["n_members"] == int(labels[:, best].sum())  # the best target's 6 runs
    assert payload["tradeoff"]["confidence"] == pytest.approx(payload["result"]["target_confidence"])
    markdown = out.with_suffix(".md").read_text()
    assert "Runs: 6 releases x 50 targets of `bngp evaluate`, not independent runs" in markdown
    audited = payload["result"]["targets_audited"]  # those in some release and out of another
    assert 40 < audited <= 50 and f"with 6 releases of {audited} targets, one score per release and target" in markdown
    assert "The design is too small" in markdown and "`bngp evaluate --releases`" in markdown


@pytest.mark.parametrize("method", ["clopper-pearson", "gdp", "one-run", "fdp-one-run", "panoramia", "bits"])
def test_every_method_states_its_ceiling_the_bound_on_a_perfect_attack(scores_csv, bits_csv, tmp_path, capsys,
                                                                      method):
    source = bits_csv if method == "bits" else scores_csv
    out = tmp_path / "audit.json"
    code, stdout, err = _run(["audit", str(source), "--method", method, "--out", str(out)], capsys)
    assert code == 0, err
    payload = json.loads(out.read_text())
    if method == "bits":
        data = np.genfromtxt(bits_csv, delimiter=",", names=True)
        expected = bits_audit(data["bit"], data["bit"]).epsilon_lb
    else:
        data = np.genfromtxt(scores_csv, delimiter=",", names=True)
        perfect, members = data["member"].copy(), data["member"]
        expected = {
            "clopper-pearson": lambda: many_run_audit(perfect, members).epsilon_lb,
            "gdp": lambda: gdp_audit(perfect, members).epsilon_lb,
            "one-run": lambda: one_run_search(perfect, members).epsilon_lb,
            "fdp-one-run": lambda: fdp_one_run_search(perfect, members, delta=1e-5).epsilon_lb,
            "panoramia": lambda: panoramia_audit(perfect, members, data["baseline_score"]).epsilon_lb,
        }[method]()
    assert payload["epsilon_ceiling"] == pytest.approx(expected, rel=1e-12)
    assert payload["epsilon_lb"] <= payload["epsilon_ceiling"]
    assert payload["ceiling_state"] in ("at the ceiling", "design too small", "below the ceiling")
    sentence = f"eps_lb = {payload['epsilon_lb']:.2f}; this design cannot certify more than {expected:.2f} with "
    assert payload["reading"].startswith(sentence) and f"Design ceiling: {sentence}" in out.with_suffix(".md").read_text()
    assert f"design ceiling {expected:.4f}" in stdout


def test_a_perfect_attack_is_at_the_ceiling_and_a_small_design_is_named(tmp_path, capsys):
    members = np.random.default_rng(2).integers(0, 2, 150)
    perfect = _write(tmp_path / "perfect.csv", "score,member", zip(members, members))
    out = tmp_path / "perfect.json"
    code, _, err = _run(["audit", str(perfect), "--method", "one-run", "--out", str(out)], capsys)
    assert code == 0, err
    payload = json.loads(out.read_text())
    assert payload["epsilon_lb"] == payload["epsilon_ceiling"] and payload["ceiling_state"] == "at the ceiling"
    markdown = out.with_suffix(".md").read_text()
    assert "the attack was perfect (or nearly), so the true eps may be much larger" in markdown
    assert "a larger design is needed" in markdown and "150 canaries" in markdown
    noise = np.random.default_rng(3).normal(size=12)  # an attack that finds nothing, on a small design
    small = _write(tmp_path / "small.csv", "score,member", zip(noise, members[:12]))
    out = tmp_path / "small.json"
    assert _run(["audit", str(small), "--method", "one-run", "--out", str(out)], capsys)[0] == 0
    payload = json.loads(out.read_text())
    assert payload["epsilon_ceiling"] < 1 and payload["ceiling_state"] == "design too small"
    assert "The design is too small: even a perfect attack certifies at most" in out.with_suffix(".md").read_text()


def test_the_claimed_eps_stands_beside_the_bound_with_a_verdict(scores_csv, tmp_path, capsys):
    out = tmp_path / "audit.json"
    argv = ["audit", str(scores_csv), "--method", "clopper-pearson", "--out", str(out)]
    code, stdout, err = _run([*argv, "--claim", "eps-delta:epsilon=0.5"], capsys)
    assert code == 0, err
    payload = json.loads(out.read_text())
    keys = list(payload)
    assert keys.index("claimed_epsilon") > keys.index("epsilon_lb") and payload["claimed_epsilon"] == 0.5
    assert payload["claim_refuted"] is True and payload["claim_verdict"].startswith("the claim is refuted: eps_lb = ")
    markdown = out.with_suffix(".md").read_text()
    assert f"- Claimed eps: {payload['claim_verdict']}." in markdown and "| claimed eps |" in markdown
    assert "| refuted |" in markdown and f"claimed eps: {payload['claim_verdict']}" in stdout
    assert payload["audit_decision"]["verdict"] == "claim-refuted" and markdown.index("### Decision") < markdown.index("| method |")
    assert f"**{payload['audit_decision']['sentence']}**" in markdown and stdout.splitlines()[-1].startswith("audit: ")
    code, stdout, err = _run([*argv, "--claim", "eps-delta:epsilon=9"], capsys)
    assert code == 0, err
    payload = json.loads(out.read_text())
    assert payload["claim_refuted"] is False and payload["claim_verdict"].startswith("consistent with the claim")
    assert payload["audit_decision"]["verdict"] in ("consistent", "cannot-test-claim")
    # a mu-GDP claim says nothing at delta = 0, clopper-pearson's default
    code, _, err = _run([*argv, "--claim", "gaussian:mu=1"], capsys)
    assert code == 0, err
    payload = json.loads(out.read_text())
    assert payload["claimed_epsilon"] is None and payload["claim_refuted"] is None
    assert payload["claim_verdict"].startswith("not comparable with the claim: gaussian:mu=1 states no finite eps")
    code, _, err = _run([*argv, "--delta", "1e-5", "--claim", "gaussian:mu=1"], capsys)
    payload = json.loads(out.read_text())
    assert code == 0 and payload["claimed_epsilon"] == pytest.approx(4.3772, abs=1e-4)
    # an estimate is no test of a claim
    argv[3] = "gdp"
    assert _run([*argv, "--claim", "eps-delta:epsilon=0.5,delta=1e-5"], capsys)[0] == 0
    assert json.loads(out.read_text())["claim_verdict"].startswith("not a test of the claim")


def test_method_all_rows_carry_their_ceilings_and_verdicts(scores_csv, tmp_path, capsys):
    out = tmp_path / "audit.json"
    argv = ["audit", str(scores_csv), "--method", "all", "--claim", "eps-delta:epsilon=1,delta=1e-5", "--out", str(out)]
    assert _run(argv, capsys)[0] == 0
    payload = json.loads(out.read_text())
    lower = [entry for entry in payload["methods"].values() if entry["epsilon_kind"] == "lower bound"]
    assert payload["epsilon_ceiling"] == max(entry["epsilon_ceiling"] for entry in lower)
    for entry in payload["methods"].values():
        assert entry["epsilon_lb"] <= entry["epsilon_ceiling"] and entry["claim_verdict"]
        assert entry["claim_refuted"] is (True if entry["epsilon_kind"] == "lower bound" else None)
