"""End-to-end CLI runs and the bad-input contract: one line on stderr, exit 2, no output left."""

import json
import subprocess
import sys

import numpy as np
import pytest

import bngp
from bngp.cli import main


def run_cli(capsys, *argv):
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def assert_one_line_error(code, err, fragment):
    assert code == 2
    lines = [line for line in err.strip().splitlines() if line]
    assert len(lines) == 1, err
    assert "Traceback" not in err
    assert fragment in lines[0], lines[0]


def _mann_whitney(scores, members):
    """AUC as P(member score > non-member score) + P(tie) / 2, over all pairs."""
    difference = scores[members][:, None] - scores[~members][None, :]
    return float(np.mean((difference > 0) + 0.5 * (difference == 0)))


def _max_tpr_minus_fpr(scores, members):
    """max over thresholds t (score >= t, and the empty rule) of TPR - FPR."""
    rules = [scores >= t for t in np.unique(scores)]
    return max([0.0] + [float(rule[members].mean() - rule[~members].mean()) for rule in rules])


def test_simulate_independent_and_deterministic(tmp_path, capsys):
    a, b = tmp_path / "a.npz", tmp_path / "b.npz"
    for path in (a, b):
        code, out, _ = run_cli(capsys, "simulate", "--individuals", 20, "--reference", 10, "--snvs", 30,
                               "--model", "independent", "--seed", 4, "--out", path)
        assert code == 0
    with np.load(a) as x, np.load(b) as y:
        assert np.array_equal(x["genotypes"], y["genotypes"])
        assert x["genotypes"].shape == (20, 30) and x["reference"].shape == (10, 30)


def test_simulate_stdpopsim_small(tmp_path, capsys):
    code, _, _ = run_cli(capsys, "simulate", "--individuals", 10, "--reference", 10, "--snvs", 50, "--seed", 1,
                         "--out", tmp_path / "g.npz")
    assert code == 0
    with np.load(tmp_path / "g.npz") as data:
        assert data["genotypes"].shape == (10, 50)


def test_train_evaluate_release_end_to_end(tiny_run, small_population_file, small_population, tmp_path, capsys):
    for name in ("defender.pt", "checkpoint.pt", "config.json", "summary.json"):
        assert (tiny_run / name).is_file()
    out = tmp_path / "eval.json"
    scores = tmp_path / "scores.npz"
    code, stdout, err = run_cli(capsys, "evaluate", "--no-decision", "--population", small_population_file, "--members", 20,
                                "--defense", f"run:{tiny_run}", "--attacks", "bayesian", "--releases", 3,
                                "--seed", 1, "--out", out, "--scores-out", scores)
    assert code == 0, err
    payload = json.loads(out.read_text())
    entry = payload["attacks"]["bayesian"]
    assert len(entry["auc_per_release"]) == 3 and entry["auc"] == pytest.approx(np.mean(entry["auc_per_release"]))
    assert set(entry["tpr_at_fpr"]) == {"0.1", "0.01", "0.001"}
    assert payload["utility_loss"] == pytest.approx(payload["utility"]["utility_loss"])
    with np.load(scores) as data:
        labels, bayesian = data["labels"].astype(bool), data["bayesian_scores"]
    assert labels.shape == bayesian.shape == (3, small_population.n_individuals)
    # the reported metrics are those of the saved scores, recomputed here from their definitions
    assert entry["auc_per_release"] == pytest.approx([_mann_whitney(s, b) for s, b in zip(bayesian, labels)])
    assert entry["advantage"] == pytest.approx(_max_tpr_minus_fpr(bayesian.ravel(), labels.ravel()))
    p = np.clip(1 / (1 + np.exp(-bayesian)), 1e-7, 1 - 1e-7)
    assert entry["bgp_risk"] == pytest.approx(-np.mean(np.where(labels, np.log(p), np.log1p(-p))))
    assert entry["prior_entropy"] == pytest.approx(np.log(2))
    assert out.with_suffix(".png").is_file() and out.with_suffix(".md").is_file()
    # its training is shown: validation AUC by step (every 100 of at most 1,500, stopped after 4 validations
    # without a lower loss), the kept step, in the Markdown and in the learning plot's second panel
    curve = entry["training_curve"]
    assert curve["steps"] == list(range(0, curve["steps"][-1] + 1, 100)) and len(curve["auc"]) == len(curve["steps"])
    assert curve["stopped_early"] == (curve["steps"][-1] < 1500) and entry["training"]["patience"] == 4
    if curve["stopped_early"]:
        assert curve["steps"][-1] - curve["best_step"] >= 400  # not before 4 validations without a gain
    assert curve["best_step"] in curve["steps"] and curve["validation_releases"] == 500
    markdown = out.with_suffix(".md").read_text()
    assert f"state of step {curve['best_step']} kept" in markdown and "Training curves" in markdown
    assert payload["learning_curve_plot"].endswith("eval.learning.png") and (tmp_path / "eval.learning.png").is_file()

    ids = tmp_path / "ids.txt"
    ids.write_text("\n".join(small_population.ids[:20]) + "\n")
    release = tmp_path / "release.npz"
    code, _, err = run_cli(capsys, "release", "--population", small_population_file, "--defense", f"run:{tiny_run}",
                           "--members-file", ids, "--seed", 2, "--out", release)
    assert code == 0, err
    with np.load(release) as data:
        x = data["release"]
    assert x.shape == (small_population.n_attributes,) and np.all((x >= 0) & (x <= 1))
    again = tmp_path / "again.npz"
    code, _, err = run_cli(capsys, "release", "--population", small_population_file, "--defense", f"run:{tiny_run}",
                           "--members-file", ids, "--seed", 2, "--out", again)
    assert code == 0, err
    with np.load(again) as data:
        np.testing.assert_array_equal(data["release"], x)  # --seed replays the release
    code, _, err = run_cli(capsys, "release", "--population", small_population_file, "--defense", "none",
                           "--members-file", ids, "--seed", 2, "--out", release)
    assert code == 2 and "already exists: use --force" in err  # an existing release is never overwritten unasked
    code, _, err = run_cli(capsys, "release", "--population", small_population_file, "--defense", "none",
                           "--members-file", ids, "--seed", 2, "--out", release, "--force")
    assert code == 0, err
    with np.load(release) as data:
        assert np.allclose(data["release"], small_population.genotypes[:20].mean(0), atol=1e-6)


def test_evaluate_reports_the_baseline_and_the_learning_curves(small_population_file, small_population, tmp_path, capsys):
    """The JSON, Markdown and plots carry the data-independent release (its utility loss recomputed
    here from the evaluation's memberships: mean |f(theta) - f(D)|, f(theta) the population mean
    under the uniform prior) and the learning curve of the converged linear attack."""
    out, scores = tmp_path / "eval.json", tmp_path / "scores.npz"
    code, stdout, err = run_cli(capsys, "evaluate", "--no-decision", "--population", small_population_file, "--members", 20,
                                "--defense", "laplace:scale=0.05", "--attacks", "linear", "--releases", 4,
                                "--seed", 2, "--out", out, "--scores-out", scores)
    assert code == 0, err
    payload = json.loads(out.read_text())
    with np.load(scores) as data:
        labels = data["labels"].astype(np.float64)
    genotypes = small_population.genotypes.astype(np.float64)
    expected = np.abs(genotypes.mean(axis=0) - labels @ genotypes / 20).mean()
    utility = payload["utility"]
    assert utility["data_independent_utility_loss"] == pytest.approx(expected, rel=1e-5)
    assert utility["relative_error"] == pytest.approx(utility["utility_loss"] / expected, rel=1e-5)
    assert 0.1 < utility["signal_retention"] < 1.0  # noisy, but keeps part of the signal
    curve = payload["attacks"]["linear"]["learning_curve"]
    assert curve["releases"][0] == 500 and len(curve["releases"]) == len(curve["auc"])
    markdown = out.with_suffix(".md").read_text()
    assert "data-independent release f(theta) (baseline)" in markdown and "Learning curves" in markdown
    assert (tmp_path / "eval.learning.png").is_file() and payload["learning_curve_plot"].endswith("eval.learning.png")
    assert json.loads(stdout)["data_independent_utility_loss"] == pytest.approx(expected, abs=1e-6)


def test_evaluate_is_deterministic(small_population_file, tmp_path, capsys):
    outputs = []
    for name in ("a.json", "b.json"):
        code, _, err = run_cli(capsys, "evaluate", "--no-decision", "--population", small_population_file, "--members", 20,
                               "--defense", "none", "--attacks", "bayesian", "--releases", 3, "--seed", 5,
                               "--out", tmp_path / name)
        assert code == 0, err
        attacks = json.loads((tmp_path / name).read_text())["attacks"]
        for entry in attacks.values():
            entry.pop("seconds")  # wall time, the only field allowed to differ
        outputs.append(attacks)
    assert outputs[0] == outputs[1]


def test_evaluate_with_a_helper_process_reports_the_same_attacks(small_population_file, tmp_path, capsys):
    """--workers 2 (a helper process fits the attacks independent of the others) gives the report of
    --workers 1 but for the wall times and the recorded processes; auto is 1 on a small population
    (K x |Q| = 40 x 120 is below HELPER_MIN_SIZE)."""
    payloads = {}
    for workers in ("1", "2", "auto"):
        out = tmp_path / f"w{workers}.json"
        code, _, err = run_cli(capsys, "evaluate", "--no-decision", "--population", small_population_file, "--members", 20,
                               "--defense", "laplace:epsilon=50", "--attacks", "lrt,linear,reconstruction-l1,stacked",
                               "--releases", 3, "--seed", 5, "--workers", workers, "--out", out)
        assert code == 0, err
        payloads[workers] = json.loads(out.read_text())
        assert payloads[workers]["workers"] == (2 if workers == "2" else 1)
        assert ("in the helper process" in err) == (workers == "2")
    attacks = {}
    for workers, payload in payloads.items():
        for entry in payload["attacks"].values():
            entry.pop("seconds")
        # to 12 significant digits: the helper's products may round differently (measured: equal to 5e-16)
        attacks[workers] = json.loads(json.dumps(payload["attacks"]), parse_float=lambda text: float(f"{float(text):.12g}"))
    assert attacks["2"] == attacks["1"] and list(attacks["2"]) == list(attacks["1"])
    assert payloads["auto"]["attacks"] == payloads["1"]["attacks"]


@pytest.fixture()
def nan_population(tmp_path):
    path = tmp_path / "nan.npz"
    genotypes = np.zeros((4, 3))
    genotypes[0, 0] = np.nan
    np.savez(path, genotypes=genotypes, reference=np.zeros((2, 3)))
    return path


@pytest.fixture()
def nonbinary_population(tmp_path):
    path = tmp_path / "nonbinary.npz"
    np.savez(path, genotypes=np.full((4, 3), 2), reference=np.zeros((2, 3)))
    return path


@pytest.fixture()
def shape_population(tmp_path):
    path = tmp_path / "shape.npz"
    np.savez(path, genotypes=np.zeros((4, 3)), reference=np.zeros((2, 5)))
    return path


@pytest.fixture()
def empty_population(tmp_path):
    path = tmp_path / "empty.npz"
    np.savez(path, genotypes=np.zeros((0, 3)), reference=np.zeros((2, 3)))
    return path


@pytest.mark.parametrize(
    "population, extra, fragment",
    [
        ("missing", [], "not found"),
        ("nan", [], "NaN"),
        ("nonbinary", [], "binary"),
        ("shape", [], "same number of attributes"),
        ("empty", [], "empty"),
        ("good", ["--members", "0"], "--members"),
        ("good", ["--members", "41"], "--members"),
        ("good", ["--kappa", "-1"], "kappa"),
        ("good", ["--fresh-check-patience", "0"], "`--fresh-check-patience` must be an integer >= 1 or none"),
        ("good", ["--fresh-check-patience", "x"], "`--fresh-check-patience` must be an integer >= 1 or none"),
        ("good", ["--selection-patience", "0"], "`--selection-patience` must be an integer >= 1 or none"),
        ("good", ["--selection-patience", "x"], "`--selection-patience` must be an integer >= 1 or none"),
    ],
)
def test_train_bad_input(population, extra, fragment, tmp_path, capsys, small_population_file, request):
    paths = {"missing": tmp_path / "nope.npz", "good": small_population_file}
    path = paths.get(population) or request.getfixturevalue(f"{population}_population")
    base = {"--population": path, "--members": "20", "--steps": "2", "--out": tmp_path / "run"}
    base.update(dict(zip(extra[::2], extra[1::2])))
    argv = ["train", "--no-decision", "--quiet"] + [item for pair in base.items() for item in pair]
    code, _, err = run_cli(capsys, *argv)
    assert_one_line_error(code, err, fragment)
    assert not (tmp_path / "run" / "defender.pt").exists()


def test_kappa_file_errors(small_population_file, tmp_path, capsys):
    weights = tmp_path / "w.npy"
    np.save(weights, np.ones(5))
    code, _, err = run_cli(capsys, "train", "--no-decision", "--population", small_population_file, "--members", 20,
                           "--kappa-file", weights, "--quiet", "--out", tmp_path / "run")
    assert_one_line_error(code, err, "120")
    np.save(weights, -np.ones(120))
    code, _, err = run_cli(capsys, "train", "--no-decision", "--population", small_population_file, "--members", 20,
                           "--kappa-file", weights, "--quiet", "--out", tmp_path / "run")
    assert_one_line_error(code, err, "kappa")


@pytest.mark.parametrize(
    "defense, attacks, fragment",
    [
        ("nonsense", "bayesian", "unknown defense"),
        ("none", "nonsense", "unknown attack"),
        ("run:/no/such/dir", "bayesian", "not found"),
        ("laplace:epsilon=-1", "bayesian", "epsilon"),
        ("laplace:epsilon", "bayesian", "malformed"),
    ],
)
def test_evaluate_bad_input(defense, attacks, fragment, small_population_file, tmp_path, capsys):
    out = tmp_path / "eval.json"
    code, _, err = run_cli(capsys, "evaluate", "--no-decision", "--population", small_population_file, "--members", 20,
                           "--defense", defense, "--attacks", attacks, "--out", out)
    assert_one_line_error(code, err, fragment)
    assert not out.exists()


@pytest.mark.parametrize("flags, fragment", [
    (("--attacker-patience", "0"), "`--attacker-patience` must be an integer >= 1 or none"),
    (("--attacker-patience", "four"), "`--attacker-patience` must be an integer >= 1 or none"),
    (("--attacker-steps", "-1"), "`--attacker-steps` must be >= 0"),
])
def test_evaluate_bad_attacker_settings(flags, fragment, small_population_file, tmp_path, capsys):
    out = tmp_path / "eval.json"
    code, _, err = run_cli(capsys, "evaluate", "--no-decision", "--population", small_population_file, "--members", 20,
                           "--defense", "none", "--attacks", "bayesian", "--out", out, *flags)
    assert_one_line_error(code, err, fragment)
    assert not out.exists()


def test_evaluate_attacker_settings_reach_the_bayesian_attacker(small_population_file, tmp_path, capsys):
    """--attacker-steps and --attacker-patience are recorded with the attack and obeyed: with
    ``none`` the attacker trains all its steps; with patience 1 it stops at the first validation
    that does not lower the loss, or never if every one does."""
    curves = {}
    for patience in ("none", "1"):
        out = tmp_path / f"eval-{patience}.json"
        code, _, err = run_cli(capsys, "evaluate", "--no-decision", "--population", small_population_file, "--members", 20,
                               "--defense", "laplace:scale=0.05", "--attacks", "bayesian", "--releases", 3,
                               "--attacker-steps", 300, "--attacker-patience", patience, "--out", out)
        assert code == 0, err
        entry = json.loads(out.read_text())["attacks"]["bayesian"]
        assert entry["training"]["steps"] == 300
        assert entry["training"]["patience"] == (None if patience == "none" else 1)
        curves[patience] = entry["training_curve"]
    assert curves["none"]["steps"] == [0, 100, 200, 300] and not curves["none"]["stopped_early"]
    losses = curves["1"]["cross_entropy"]
    assert curves["1"]["stopped_early"] == (len(losses) < 4)
    assert all(later < earlier for earlier, later in zip(losses[:-2], losses[1:-1]))  # improved until the stop
    assert curves["1"]["cross_entropy"] == curves["none"]["cross_entropy"][:len(losses)]  # the same run so far


def test_release_bad_members_file(small_population_file, tmp_path, capsys):
    ids = tmp_path / "ids.txt"
    ids.write_text("ind0\nstranger\n")
    out = tmp_path / "r.npz"
    code, _, err = run_cli(capsys, "release", "--population", small_population_file, "--defense", "none",
                           "--members-file", ids, "--out", out)
    assert_one_line_error(code, err, "stranger")
    code, _, err = run_cli(capsys, "release", "--population", small_population_file, "--defense", "none",
                           "--members-file", tmp_path / "missing.txt", "--out", out)
    assert_one_line_error(code, err, "not found")
    assert not out.exists()


def test_defender_of_other_population_is_refused(tiny_run, tmp_path, capsys):
    other = tmp_path / "other.npz"
    run_cli(capsys, "simulate", "--individuals", 40, "--reference", 40, "--snvs", 120, "--model", "independent",
            "--seed", 99, "--out", other)
    code, _, err = run_cli(capsys, "evaluate", "--no-decision", "--population", other, "--members", 20, "--defense", f"run:{tiny_run}",
                           "--attacks", "bayesian", "--out", tmp_path / "e.json")
    assert_one_line_error(code, err, "different population")


def test_train_over_a_composition_then_evaluate_and_release(small_population_file, small_population, tmp_path, capsys):
    """`bngp train --compose SPEC` (App. L.6): fixed Gaussian mechanisms before the learned one,
    the eps-calibrated scale taken from the dp-accounting calibration of the spec."""
    from bngp.defenses.dp import GaussianDefense
    from bngp.defenses.registry import DefenseContext, parse_defense_spec

    run_dir = tmp_path / "composed"
    spec = "gaussian:epsilon=2,delta=1e-5"
    code, stdout, err = run_cli(capsys, "train", "--no-decision", "--population", small_population_file, "--members", 20,
                                "--compose", spec, "--compose", "gaussian:scale=0.05,delta=1e-5", "--dp-epsilon", 1,
                                "--steps", 4, "--fresh-check-steps", 3, "--quiet", "--out", run_dir)
    assert code == 0, err
    expected = parse_defense_spec(spec, DefenseContext(small_population, 20))
    assert isinstance(expected, GaussianDefense)
    assert json.loads(stdout)["composed_gaussian_sigmas"] == pytest.approx([expected.sigma, 0.05])
    # BGBP at eps = 1 with prior theta = 20 / 40: implied eps = log(1 + (e^eps - 1) / theta)
    assert json.loads(stdout)["implied_epsilon"] == pytest.approx(np.log1p(np.expm1(1.0) / 0.5))
    # the refits pool the copies by default (GameConfig.pool_copies), recorded in config.json
    assert json.loads((run_dir / "config.json").read_text())["config"]["attacker"]["pool_copies"] is True
    code, _, err = run_cli(capsys, "evaluate", "--no-decision", "--population", small_population_file, "--members", 20,
                           "--defense", f"run:{run_dir}", "--attacks", "bayesian", "--releases", 2, "--seed", 1,
                           "--out", tmp_path / "eval.json")
    assert code == 0, err
    # the attacker reads all three blocks: the sigma = 0.05 Gaussian block alone gives members away
    # (replacing a member moves it by about sqrt(2 * 120 * 0.2) / 20 = 0.35 >> 0.05; measured AUC 0.996)
    assert json.loads((tmp_path / "eval.json").read_text())["attacks"]["bayesian"]["auc"] > 0.9
    ids = tmp_path / "ids.txt"
    ids.write_text("\n".join(str(i) for i in small_population.ids[:20]) + "\n")
    code, _, err = run_cli(capsys, "release", "--population", small_population_file, "--defense", f"run:{run_dir}",
                           "--members-file", ids, "--seed", 0, "--out", tmp_path / "release.npz")
    assert code == 0, err
    with np.load(tmp_path / "release.npz") as data:
        assert data["release"].shape[-1] == 3 * small_population.n_attributes


def test_train_whole_release_attacker_keeps_the_earlier_record(small_population_file, tmp_path, capsys):
    # --whole-release-attacker: the refits of runs made before pooling, whose config.json has no such key
    run_dir = tmp_path / "whole"
    code, _, err = run_cli(capsys, "train", "--no-decision", "--population", small_population_file, "--members", 20,
                           "--compose", "gaussian:scale=0.05,delta=1e-5", "--whole-release-attacker", "--steps", 2,
                           "--refit-every", 1, "--fresh-check-steps", 0, "--quiet", "--out", run_dir)
    assert code == 0, err
    from bngp.game.config import flat_record

    config = json.loads((run_dir / "config.json").read_text())["config"]
    assert config["attacker"]["pool_copies"] is False and "pool_copies" not in flat_record(config)
    code, _, err = run_cli(capsys, "train", "--no-decision", "--population", small_population_file, "--members", 20,
                           "--whole-release-attacker", "--steps", 2, "--quiet", "--out", tmp_path / "single")
    assert_one_line_error(code, err, "--compose")
    assert not (tmp_path / "single").exists()
    code, _, err = run_cli(capsys, "train", "--no-decision", "--population", small_population_file, "--members", 20, "--against", "score",
                           "--compose", "gaussian:scale=0.05,delta=1e-5", "--steps", 2, "--quiet", "--out", tmp_path / "both")
    assert_one_line_error(code, err, "cannot be combined with `--compose`")
    assert not (tmp_path / "both").exists()


@pytest.mark.parametrize("spec, fragment", [("laplace:epsilon=1", "gaussian mechanisms only"),
                                            ("gaussian:epsilon=-1,delta=1e-5", "epsilon"),
                                            ("gaussian:epsilon=1,delta=2", "delta")])
def test_train_rejects_bad_composition_specs(small_population_file, tmp_path, capsys, spec, fragment):
    code, _, err = run_cli(capsys, "train", "--no-decision", "--population", small_population_file, "--members", 20,
                           "--compose", spec, "--steps", 2, "--quiet", "--out", tmp_path / "run")
    assert_one_line_error(code, err, fragment)
    assert not (tmp_path / "run").exists()


def test_threads_option_sets_torch_and_blas_pools(small_population_file, tmp_path, capsys):
    import torch
    from threadpoolctl import threadpool_info

    before = torch.get_num_threads()
    try:
        code, _, err = run_cli(capsys, "evaluate", "--no-decision", "--population", small_population_file, "--members", 20,
                               "--defense", "none", "--attacks", "score", "--releases", 2, "--threads", 1,
                               "--out", tmp_path / "e.json")
        assert code == 0, err
        assert torch.get_num_threads() == 1
        assert all(pool["num_threads"] == 1 for pool in threadpool_info())
    finally:
        torch.set_num_threads(before)
    code, _, err = run_cli(capsys, "evaluate", "--no-decision", "--population", small_population_file, "--members", 20,
                           "--defense", "none", "--attacks", "score", "--threads", 0, "--out", tmp_path / "f.json")
    assert_one_line_error(code, err, "--threads")
    assert not (tmp_path / "f.json").exists()


@pytest.mark.parametrize("patience, recorded", [("none", None), ("2", 2)])
def test_train_fresh_check_patience_reaches_the_check(patience, recorded, small_population_file, tmp_path, capsys,
                                                      monkeypatch):
    """--fresh-check-patience sets the fresh attacker's early stopping: recorded in the run's config
    (left out of its flat form at none, as in runs made before the setting existed) and in the check."""
    out = tmp_path / "run"
    code, _, err = run_cli(capsys, "train", "--no-decision", "--quiet", "--population", small_population_file, "--members", 20,
                           "--steps", 2, "--fresh-check-steps", 3, "--fresh-check-patience", patience, "--out", out)
    assert code == 0, err
    from bngp.game.config import flat_record

    config = json.loads((out / "config.json").read_text())["config"]
    assert config["fresh_check"]["patience"] == recorded
    assert flat_record(config).get("fresh_check_patience", "left out") == ("left out" if recorded is None else recorded)
    check = json.loads((out / "summary.json").read_text())["fresh_attacker_check"]
    assert check["patience"] == recorded and check["steps"] == 3


@pytest.mark.parametrize("patience", ["none", "1"])
def test_train_selection_patience_stops_the_run_and_says_where(patience, small_population_file, tmp_path, capsys):
    """--selection-patience 1 stops training once the kept state has not been bettered by the next
    scoring; the printed report and summary.json say where; none trains every step."""
    out = tmp_path / "run"
    code, printed, err = run_cli(capsys, "train", "--no-decision", "--quiet", "--population", small_population_file, "--members", 20,
                                 "--kappa", "1.5", "--steps", 40, "--refit-every", 4, "--fresh-check-steps", 0,
                                 "--selection-patience", patience, "--out", out)
    assert code == 0, err
    summary = json.loads((out / "summary.json").read_text())
    report = json.loads(printed)
    if patience == "none":
        assert summary["steps"] == 40 and "early_stop" not in summary and report["stopped_early_at"] is None
    else:
        stop = summary["early_stop"]
        assert stop["patience"] == 1 and stop["step"] == summary["steps"] == report["stopped_early_at"] < 40
        assert stop["step"] - stop["kept_step"] <= 4 and [row["step"] for row in summary["selections"]][-1] == stop["step"]


def test_version_prints_the_package_version_and_exits_0():
    result = subprocess.run([sys.executable, "-m", "bngp.cli", "--version"], capture_output=True, text=True)
    assert result.returncode == 0 and result.stderr == "", result.stderr
    assert result.stdout == f"bngp {bngp.__version__}\n"
