"""``bngp audit-mechanism`` end to end: AUDIT.json contents, determinism, one-line errors."""

import json

import pytest

from bngp.cli import build_parser, main
from bngp.data.independent import simulate_independent
from bngp.data.npz import save_population


@pytest.fixture(scope="module")
def population_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("audit_mechanism") / "pop.npz"
    save_population(simulate_independent(200, 100, 400, seed=4), path)
    return path


def _run(argv, capsys):
    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _base(population_file, out, *extra, decision=False):
    """The command line; without ``decision`` the release decision is skipped (tested on its own below)."""
    return ["audit-mechanism", "--population", str(population_file), "--members", "50", "--out", str(out), *extra,
            *([] if decision else ["--no-decision"])]


def test_command_is_registered():
    assert "audit-mechanism" in build_parser().format_help() and "audit-mechanism" in build_parser("all").format_help()


@pytest.mark.parametrize(
    "mode, extra",
    [("one-run", []), ("many-run", ["--runs", "40"]), ("panoramia", [])],
)
def test_every_mode_writes_the_bound_next_to_the_claim(population_file, tmp_path, capsys, mode, extra):
    out = tmp_path / "AUDIT.json"
    argv = _base(population_file, out, "--defense", "laplace:epsilon=2", "--mode", mode, "--canaries", "30",
                 "--attack", "score", "--seed", "5", *extra)
    code, stdout, stderr = _run(argv, capsys)
    assert code == 0, stderr
    assert "epsilon_lb = " in stdout and "claimed eps 2" in stdout
    payload = json.loads(out.read_text())
    keys = list(payload)
    assert keys.index("claimed_epsilon") == keys.index("epsilon_lb") + 1
    assert payload["mode"] == mode
    assert payload["claimed_epsilon"] == 2.0 and payload["claimed_guarantee"]["mechanism"] == "laplace"
    assert payload["epsilon_lb"] <= 2.0
    assert payload["attack"]["name"] == "score" and payload["attack"]["knowledge"]
    assert payload["defense"]["spec"] == "laplace:epsilon=2"
    assert payload["seed"] == 5 and set(payload["seeds"]) >= {"design", "release", "attack"}
    assert payload["method"]["name"]
    if mode == "panoramia":
        # default: 30 real non-members held out from the generator; epsilon_lb is their lower bound
        assert payload["is_lower_bound"] is True and payload["bound_exceeds_claim"] is False
        assert payload["panoramia"]["reported_as_epsilon_lb"] == "real_nonmembers"
        assert payload["panoramia"]["generated_nonmembers"]["is_lower_bound"] is False
        assert "baseline_auc" in payload["diagnostics"] and "eps_tilde = " in stdout
    else:
        assert payload["is_lower_bound"] is True and payload["bound_exceeds_claim"] is False
    # the report: the bound beside the design's ceiling and the claimed eps, a table, a plot
    assert payload["format"] == "bngp-mechanism-audit-1" and payload["epsilon_lb"] <= payload["epsilon_ceiling"]
    assert payload["claim_verdict"] == f"consistent with the claim: eps_lb = {payload['epsilon_lb']:.4g} <= claimed eps = 2"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["AUDIT.json", "AUDIT.md", "AUDIT.png"]
    assert out.with_suffix(".png").read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    markdown = out.with_suffix(".md").read_text()
    assert markdown.startswith(f"## Mechanism audit: `laplace:epsilon=2` ({mode})")
    assert f"- Bound: epsilon_lb = {payload['epsilon_lb']:.4f} (lower bound)" in markdown
    assert f"- Design ceiling: {payload['reading']} ({payload['ceiling_state']})." in markdown
    assert f"- Claimed eps: {payload['claim_verdict']}." in markdown and "![" in markdown
    assert markdown.index("### Decision") < markdown.index("| bound |")
    assert f"**{payload['audit_decision']['sentence']}**" in markdown and "decision" not in payload
    rows = [line for line in markdown.splitlines() if line.startswith("| ") and not line.startswith("| bound")]
    assert len(rows) == {"one-run": 2, "many-run": 2, "panoramia": 2}[mode]  # one run: with the f-DP (Gaussian) bound
    if mode == "one-run":
        assert f"| {payload['method']['fdp_one_run']['epsilon_lb']:.4f} | - | lower bound for a Gaussian" in markdown
    assert f"| {payload['epsilon_ceiling']:.4f} | lower bound |" in markdown
    assert stdout.splitlines()[1].startswith(payload["reading"])


def test_out_may_not_be_the_report_itself(population_file, tmp_path, capsys):
    argv = _base(population_file, tmp_path / "AUDIT.md", "--defense", "none", "--mode", "one-run", "--canaries", "10",
                 "--attack", "score")
    code, _, stderr = _run(argv, capsys)
    assert code == 2 and stderr.count("\n") == 1 and ".md or .png" in stderr
    assert list(tmp_path.iterdir()) == []


def test_same_seed_gives_the_same_file(population_file, tmp_path, capsys):
    outputs = []
    for name in ("a.json", "b.json"):
        out = tmp_path / name
        argv = _base(population_file, out, "--defense", "gaussian:epsilon=1,delta=1e-5", "--mode", "many-run",
                     "--canaries", "2", "--runs", "30", "--attack", "lrt", "--seed", "3")
        assert _run(argv, capsys)[0] == 0
        payload = json.loads(out.read_text())
        assert payload.pop("report") == {"markdown": str(out.with_suffix(".md")), "png": str(out.with_suffix(".png"))}
        outputs.append(payload)
    assert outputs[0] == outputs[1]
    payload = outputs[0]
    assert payload["delta"] == 1e-5 and payload["claimed_delta"] == 1e-5


def test_no_defense_has_no_claim(population_file, tmp_path, capsys):
    out = tmp_path / "AUDIT.json"
    argv = _base(population_file, out, "--defense", "none", "--mode", "one-run", "--canaries", "40",
                 "--attack", "score")
    code, stdout, _ = _run(argv, capsys)
    assert code == 0 and "no claimed guarantee" in stdout
    payload = json.loads(out.read_text())
    assert payload["claimed_epsilon"] is None and payload["bound_exceeds_claim"] is None
    assert payload["claim_verdict"] is None
    assert "- Claimed eps: none (the defense states no DP guarantee)." in out.with_suffix(".md").read_text()
    assert payload["epsilon_lb"] > 0.5


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--defense", "none", "--mode", "one-run", "--canaries", "0", "--attack", "score"],
         "`canaries` must be >= 2, got 0."),
        (["--defense", "none", "--mode", "one-run", "--canaries", "10", "--attack", "nope"], "unknown attack 'nope'"),
        (["--defense", "none", "--mode", "one-run", "--canaries", "10", "--attack", "score", "--runs", "3"],
         "`runs` applies only to the many-run mode"),
        (["--defense", "laplace:eps=1", "--mode", "one-run", "--canaries", "10", "--attack", "score"],
         "does not take `eps`"),
        (["--defense", "none", "--mode", "many-run", "--canaries", "10", "--attack", "score", "--confidence", "1"],
         "`confidence` must be in (0, 1)"),
        (["--defense", "none", "--mode", "panoramia", "--canaries", "45", "--attack", "score"],
         "`canaries` must be <= members - 10 = 40"),
        (["--defense", "none", "--mode", "panoramia", "--canaries", "10", "--attack", "score", "--delta", "1e-5"],
         "`delta` does not apply to panoramia"),
        (["--defense", "none", "--mode", "one-run", "--canaries", "10", "--attack", "score", "--delta", "2"],
         "`delta` must be in [0, 1)"),
        (["--defense", "none", "--mode", "one-run", "--canaries", "10", "--attack", "score", "--real-nonmembers", "5"],
         "`real_nonmembers` applies only to the panoramia mode"),
        (["--defense", "none", "--mode", "many-run", "--canaries", "2", "--attack", "score", "--real-nonmembers", "0"],
         "`real_nonmembers` applies only to the panoramia mode"),
        (["--defense", "none", "--mode", "panoramia", "--canaries", "30", "--attack", "score", "--real-nonmembers",
          "31"], "`real_nonmembers` must be <= canaries = 30"),
        (["--defense", "none", "--mode", "panoramia", "--canaries", "30", "--attack", "score", "--real-nonmembers",
          "-1"], "`real_nonmembers` must be 0 (no companion bound) or >= 2, got -1."),
    ],
)
def test_bad_input_is_one_line_exit_2_and_writes_nothing(population_file, tmp_path, capsys, extra, message):
    out = tmp_path / "AUDIT.json"
    code, stdout, stderr = _run(_base(population_file, out, *extra), capsys)
    assert code == 2
    assert stderr.count("\n") == 1 and stderr.startswith("bngp audit-mechanism: error: ")
    assert message in stderr
    assert not out.exists()


def test_missing_population_and_bad_members(population_file, tmp_path, capsys):
    out = tmp_path / "AUDIT.json"
    argv = ["audit-mechanism", "--population", str(tmp_path / "nope.npz"), "--members", "5", "--defense", "none",
            "--mode", "one-run", "--canaries", "4", "--attack", "score", "--out", str(out)]
    code, _, stderr = _run(argv, capsys)
    assert code == 2 and "not found" in stderr
    argv = _base(population_file, out, "--defense", "none", "--mode", "one-run", "--canaries", "4", "--attack",
                 "score")
    argv[argv.index("--members") + 1] = "0"
    code, _, stderr = _run(argv, capsys)
    assert code == 2 and "`--members` must be between 1 and K - 1 = 199" in stderr
    assert not out.exists()


def test_progress_line_on_stderr_and_quiet(population_file, tmp_path, capsys):
    """A progress line on stderr while the attack is fitted (stdout keeps the one-line result);
    --quiet silences it."""
    out = tmp_path / "a.json"
    argv = _base(population_file, out, "--defense", "none", "--mode", "one-run", "--canaries", "10", "--attack", "score")
    code, stdout, stderr = _run(argv, capsys)
    assert code == 0 and "fitting and scoring attack `score`" in stderr and stdout.startswith("epsilon_lb")
    code, _, stderr = _run([*argv, "--quiet"], capsys)
    assert code == 2 and "use --force to replace it" in stderr  # the first audit is not overwritten unasked
    code, _, stderr = _run([*argv, "--quiet", "--force"], capsys)
    assert code == 0 and stderr == ""


def test_too_many_real_nonmembers_for_the_generator(tmp_path, capsys):
    """K - n = 20 outside individuals: the generator keeps at least 10, so at most 10 real non-members."""
    population = tmp_path / "pop.npz"
    save_population(simulate_independent(70, 40, 200, seed=1), population)
    out = tmp_path / "AUDIT.json"
    argv = ["audit-mechanism", "--population", str(population), "--members", "50", "--defense", "none", "--mode",
            "panoramia", "--canaries", "30", "--attack", "score", "--real-nonmembers", "11", "--out", str(out)]
    code, _, stderr = _run(argv, capsys)
    assert code == 2 and stderr.count("\n") == 1
    assert "`real_nonmembers` must be <= K - n - 10 = 10 (the generator keeps at least 10 of the 20" in stderr
    assert not out.exists()


def test_panoramia_writes_the_lower_bound_and_the_measurement(population_file, tmp_path, capsys):
    """--real-nonmembers 20: AUDIT.json and the summary line carry the real-non-member lower bound
    (epsilon_lb) and the generated-non-member eps_tilde (a measurement); 0 turns the companion off."""
    out = tmp_path / "AUDIT.json"
    argv = _base(population_file, out, "--defense", "none", "--mode", "panoramia", "--canaries", "30", "--attack",
                 "score", "--real-nonmembers", "20", "--seed", "2", "--quiet")
    code, stdout, stderr = _run(argv, capsys)
    assert code == 0, stderr
    payload = json.loads(out.read_text())
    real, generated = payload["panoramia"]["real_nonmembers"], payload["panoramia"]["generated_nonmembers"]
    assert payload["is_lower_bound"] is True and payload["epsilon_lb"] == real["epsilon_lb"]
    assert real["is_lower_bound"] is True and "lower bound" in real["meaning"]
    assert real["audit_size"] == 20 and real["members"] + real["nonmembers"] == 20
    assert generated["is_lower_bound"] is False and "measurement" in generated["meaning"]
    assert generated["epsilon_tilde"] == payload["method"]["panoramia"]["epsilon_lb"]
    assert payload["method"]["real_nonmembers"]["real_nonmembers"] is True
    assert payload["design"]["outside_split"]["outside"] == 150
    assert payload["design"]["outside_split"]["generator_panel"] == 130
    assert payload["design"]["outside_split"]["real_nonmembers"] == 20
    assert "companion" in payload["seeds"]
    assert f"epsilon_lb = {payload['epsilon_lb']:.4f} (panoramia lower bound with {real['nonmembers']} real" in stdout
    assert f"eps_tilde = {generated['epsilon_tilde']:.4f} with generated non-members, a measurement" in stdout

    argv[argv.index("--real-nonmembers") + 1] = "0"
    code, stdout, stderr = _run([*argv, "--force"], capsys)
    assert code == 0, stderr
    payload = json.loads(out.read_text())
    assert payload["is_lower_bound"] is False and payload["panoramia"]["real_nonmembers"] is None
    assert payload["epsilon_lb"] == payload["panoramia"]["generated_nonmembers"]["epsilon_tilde"]
    assert payload["design"]["outside_split"]["generator_panel"] == 150
    assert "eps_tilde with generated non-members, a measurement; no real non-members" in stdout


@pytest.mark.parametrize(
    "defense, release_verdict",
    [("laplace:epsilon=1", "dominated"), ("data-independent", "data-independent"), ("none", "fully-revealing")],
)
def test_the_report_opens_with_the_audit_and_the_release_decision(population_file, tmp_path, capsys, defense,
                                                                    release_verdict):
    """Both decisions open AUDIT.md and end the printed lines: the audit's verdict, then the release's utility loss
    beside the mechanisms at that loss.  Laplace at eps = 1 on 400 attributes of 50 members has loss far above
    f(theta)'s (sensitivity 1/50 per attribute, scale 400/50 = 8), so it is dominated; f(theta) is itself; the
    exact release f(D) (loss 0) of 400 attributes is read almost perfectly by the linear attack (|Q| > K)."""
    out = tmp_path / "AUDIT.json"
    argv = _base(population_file, out, "--defense", defense, "--mode", "many-run", "--canaries", "4", "--runs", "40",
                 "--attack", "score", decision=True)
    code, stdout, stderr = _run(argv, capsys)
    assert code == 0, stderr
    payload = json.loads(out.read_text())
    decision, audit = payload["decision"], payload["audit_decision"]
    assert decision["verdict"] == release_verdict
    assert set(decision) >= {"utility_loss", "data_independent_loss", "strongest", "rows", "sentence"}
    assert decision["rows"][0]["label"] == "this release" and decision["rows"][-1]["label"].startswith("data-independent")
    assert audit["verdict"] in {"claim-refuted", "cannot-test-claim", "at-ceiling", "design-too-small",
                                "nothing-certified", "consistent", "leaks-at-least"}
    if defense == "laplace:epsilon=1":
        assert audit["verdict"] in {"cannot-test-claim", "design-too-small", "consistent", "nothing-certified"}
    if defense == "none":  # the exact release: the score attack certifies a leak
        assert audit["verdict"] in ("at-ceiling", "leaks-at-least") and payload["epsilon_lb"] > 0
        assert decision["utility_loss"] < 1e-6  # float32 release of f(D)
    markdown = out.with_suffix(".md").read_text()
    assert markdown.index("### Decision") < markdown.index("### The release at its utility loss") < markdown.index("| bound |")
    assert f"**{audit['sentence']}**" in markdown and f"**This release is {decision['sentence']}.**" in markdown
    lines = stdout.splitlines()
    assert lines[2] == f"audit: {audit['sentence']}" and lines[3] == f"decision: {decision['sentence']}."
