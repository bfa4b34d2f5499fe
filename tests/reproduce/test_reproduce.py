"""``bngp reproduce``: every experiment of arXiv:2410.07414 at the quick scale, end to end from the CLI.

One ``bngp reproduce all --scale quick`` run (a module fixture) is checked report by report: the
files, the numbers against their own evaluation payloads, the paper's numbers (App. L.9) against
the catalog, and the settings that define each experiment
(Table 5's constant C, the score best response on 20 individuals, the digits and Adult
populations, eps = 600).  The quick scale's AUCs carry no meaning, so no AUC value is asserted.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from bngp.cli import main
from bngp.errors import InputError, UnknownNameError
from bngp.attacks.registry import available_attacks
from bngp.reproduce import BUDGETS, EXPERIMENTS, FRONTIER, NAMES, Row, Sizes, budget_for, parse_experiment_names
from bngp.reproduce.catalog import FIXED_MECHANISMS, MU_PER_EPSILON
from bngp.reproduce.report import DIFFERENCE_FLOOR, differing_rows
from bngp.run_dir import verify_run

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
SEED = 1


@pytest.fixture(scope="module")
def reproduced(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("reproduce") / "out"
    assert main(["reproduce", "all", "--scale", "quick", "--seed", str(SEED), "--out", str(out), "--quiet"]) == 0
    return out


def _payload(out: Path, name: str) -> dict:
    return json.loads((out / name / f"quick_seed{SEED}" / "results.json").read_text())


@pytest.mark.parametrize("name", list(EXPERIMENTS))
def test_every_experiment_writes_a_complete_report(reproduced: Path, name: str) -> None:
    directory = reproduced / name / f"quick_seed{SEED}"
    manifest = verify_run(directory)  # complete, and every file matches its manifest
    assert manifest["experiment"] == name and manifest["seed"] == SEED
    payload = _payload(reproduced, name)
    markdown = (directory / "report.md").read_text()
    budget = BUDGETS["quick"]
    assert payload["scale"] == "quick" and payload["seed"] == SEED and payload["budget"]["releases"] == budget.releases
    assert payload["sizes"]["individuals"] == EXPERIMENTS[name].sizes["quick"].individuals
    assert payload["population"]["prior"]
    assert payload["peak_rss_bytes"] > 50 * 2**20  # a process that imported torch holds more than 50 MiB
    assert payload["matmul_flops_float32"] > 1e8  # the timing's reference, measured in the same run
    parts = [payload["population"]["seconds"]]
    parts += [training["seconds"] for training in payload["trainings"].values()]
    parts += [evaluation["seconds"] for evaluation in payload["evaluations"].values()]
    assert payload["wall_seconds"] >= sum(parts)  # the wall time covers its parts
    for training in payload["trainings"].values():
        assert not training["reused"] and 0 < training["training_seconds"] <= training["seconds"]
    assert payload["wall_seconds_with_reused_trainings"] == payload["wall_seconds"]
    assert (directory / "auc.png").read_bytes().startswith(PNG_SIGNATURE)
    for index in range(1, len(payload["evaluations"]) + 1):
        assert (directory / f"roc-{index}.png").read_bytes().startswith(PNG_SIGNATURE)
    assert not (directory / f"roc-{len(payload['evaluations']) + 1}.png").exists()
    assert {row["setting"] for row in payload["rows"]} == set(payload["evaluations"])
    for row in payload["rows"]:
        # each row is its evaluation's numbers: AUC mean and std over the releases, and the raw direction
        entry = payload["evaluations"][row["setting"]]["attacks"][row["attack"]]
        per_release = entry["auc_per_release"]
        assert len(per_release) == budget.releases
        assert row["auc"] == pytest.approx(np.mean(per_release))
        assert row["auc_std"] == pytest.approx(np.std(per_release, ddof=1))
        assert row["raw_auc"] == pytest.approx(row["auc"] if entry["orientation"] == 1 else 1 - row["auc"])
        below = row["paper"] is not None and row["paper"][0] < 0.5
        assert row["paper_direction_auc"] == (row["raw_auc"] if below else row["auc"])
        assert row["seconds"] == entry["seconds"]
        assert f"| {row['setting']} | {row['attack']} | {row['auc']:.4f} ± {row['auc_std']:.4f} |" in markdown
        if row["paper"] is not None:
            assert f"{row['paper'][0]:.4f} ± {row['paper'][1]:.4f}" in markdown
    for setting, evaluation in payload["evaluations"].items():
        strongest = evaluation["strongest_attack"]
        assert f"- {setting} [" in markdown and f"strongest **{strongest['name']}**" in markdown
        assert strongest["auc"] == max(entry["auc"] for entry in evaluation["attacks"].values())
    assert "Quick scale: a pipeline check" in markdown
    assert f"{payload['matmul_flops_float32'] / 1e9:.1f} GFLOP/s measured in the same run" in markdown
    for setting, evaluation in payload["evaluations"].items():
        # the utility of every setting next to f(theta), and a defender that releases f(theta) while the
        # paper reports leakage is named as the reason its AUCs are at chance
        verdict = evaluation["utility"]["verdict"]
        assert f"| {setting} | {evaluation['utility']['utility_loss']:.5f} |" in markdown
        papers = [row["paper"][0] for row in payload["rows"] if row["setting"] == setting and row["paper"] is not None]
        collapsed = verdict.startswith("the data-independent release itself") and any(abs(p - 0.5) > 0.02 for p in papers)
        assert (f"- {setting}: our defender releases the data-independent f(theta)" in markdown) == collapsed
    for setting, evaluation in payload["evaluations"].items():
        # every learned attack shows its convergence: shadow releases, and the Bayesian attacker's steps
        for attack, entry in evaluation["attacks"].items():
            if "training_curve" in entry:
                assert f"### {setting}" in markdown and f"state of step {entry['training_curve']['best_step']} kept" in markdown
            if "learning_curve" in entry:
                points = ", ".join(f"{n}: {a:.4f}" for n, a in zip(entry["learning_curve"]["releases"],
                                                                     entry["learning_curve"]["auc"]))
                assert f"- `{attack}`: {points} (" in markdown
    entries = [entry for evaluation in payload["evaluations"].values() for entry in evaluation["attacks"].values()]
    assert ("## Attackers fitted to convergence" in markdown) == any(
        "training_curve" in entry or "learning_curve" in entry for entry in entries)
    if any(row["attack"] == "bayesian" for row in payload["rows"]):
        assert any("training_curve" in entry for entry in entries)
    for text in EXPERIMENTS[name].differences:
        assert text in markdown
    for attack in {row["attack"] for row in payload["rows"]}:
        assert f"- `{attack}`: " in markdown  # its knowledge and direction
    rows = [Row(**{key: (tuple(value) if key == "paper" and value is not None else value)
                   for key, value in row.items() if key != "paper_direction_auc"}) for row in payload["rows"]]
    assert [(cell["setting"], cell["attack"]) for cell in payload["differing_cells"]] == \
        [(row.setting, row.attack) for row, _ in differing_rows(rows)]


def test_index_lists_every_report(reproduced: Path) -> None:
    index = (reproduced / "index.md").read_text()
    for name, spec in EXPERIMENTS.items():
        assert f"| {spec.label} (`{name}`) | quick | {SEED} |" in index
    for name in NAMES:
        assert f"[{name}/quick_seed{SEED}/report.md]" in index
    assert index.count("report.md](") == len(NAMES)


def test_the_frontier_attacks_every_defense_with_the_whole_registry_and_audits_it(reproduced: Path) -> None:
    directory = reproduced / "frontier" / f"quick_seed{SEED}"
    verify_run(directory)
    assert (directory / "frontier.png").read_bytes().startswith(PNG_SIGNATURE)
    payload = json.loads((directory / "results.json").read_text())
    grid = FRONTIER["quick"]
    cells = payload["sweep"]["results"]
    assert payload["failed_cells"] == 0 and payload["peak_rss_bytes"] > 50 * 2**20
    assert {cell["dataset"] for cell in cells} == {"genome", "adult"}
    assert len(cells) == 2 * (len(grid.kappa) + 3 * len(grid.eps))  # BNGP + laplace, gaussian, linf per dataset
    registry = set(available_attacks())
    for cell in cells:
        assert cell["status"] == "ok" and cell["seed"] == SEED
        if cell["family"] == "bngp":
            # a trained defender meets every attack but the one needing a closed-form noise law
            assert set(cell["auc"]) == registry - {"optimal-lrt"}
        else:
            assert set(cell["auc"]) == registry
        audit = cell["audit"]
        assert audit["mode"] == grid.audit_mode and audit["canaries"] == grid.canaries and audit["epsilon_lb"] >= 0
        if cell["family"] == "laplace":
            assert audit["epsilon_lb"] <= cell["eps"]  # sound: never above the pure-DP eps it audits
    markdown = (directory / "report.md").read_text()
    assert markdown.count("![frontier](frontier.png)") == 1 and "audited eps lb" in markdown


def test_the_paper_numbers_are_those_of_app_l9(reproduced: Path) -> None:
    """Spot checks of the catalog against arXiv:2410.07414, App. L.9 (Tables 3-5)."""
    paper = {(name, row["setting"], row["attack"]): row["paper"] for name in EXPERIMENTS
             for row in _payload(reproduced, name)["rows"]}
    assert paper[("table3", "BNGP defender, kappa=1.5", "bayesian")] == [0.7253, 0.0069]
    assert paper[("table3", "BNGP defender, kappa=0", "adaptive-lrt")] == [0.1552, 0.0100]
    assert paper[("table4", "fixed-LRT best-response defender", "bayesian")] == [0.9124, 0.0026]
    assert paper[("fig2b-pure-dp", "pure-DP l-inf defender matched to BNGP kappa=1.5", "score")] == [0.1267, 0.0207]
    assert paper[("fig2c-score-defender", "score best-response defender, kappa=1.5", "bayesian")] == [1.0, 0.0]
    assert paper[("fig2d-images", "BNGP defender, kappa=1.5", "svm")] == [0.5226, 0.0108]
    assert paper[("fig2e-adult", "BNGP defender, kappa=1.5", "lrt")] == [0.5865, 0.0060]
    assert paper[("fig2f-vector-kappa", "Laplace matched to BNGP vector kappa", "bayesian")] == [0.9153, 0.0025]
    assert paper[("table5", "one mechanism, eps=1", "bayesian")] == [0.9373, 0.0030]
    assert all(value is None for (name, _, _), value in paper.items() if name == "fig3d-dp600")


def test_each_experiment_runs_what_the_paper_ran(reproduced: Path) -> None:
    table3 = _payload(reproduced, "table3")
    assert [training["config"]["kappa"] for training in table3["trainings"].values()] == [0.0, 1.5, 50.0]

    table4 = _payload(reproduced, "table4")
    assert [training["against"] for training in table4["trainings"].values()] == ["bayesian", "lrt", "adaptive-lrt"]
    matched = table4["evaluations"]["Laplace matched to BNGP kappa=1.5"]["defense"]["matched"]
    assert matched["run"].endswith("bngp-kappa-1.5")

    pure = _payload(reproduced, "fig2b-pure-dp")
    assert pure["population"]["attributes"] == 100
    defense = pure["evaluations"]["pure-DP l-inf defender matched to BNGP kappa=1.5"]["defense"]
    assert defense["guarantee"]["norm"] == "linf" and defense["guarantee"]["delta"] in (0, 0.0, None)

    score = _payload(reproduced, "fig2c-score-defender")
    assert score["sizes"]["individuals"] == 20 and score["sizes"]["members"] == 5
    assert [training["against"] for training in score["trainings"].values()] == ["score"]

    images = _payload(reproduced, "fig2d-images")
    assert images["dataset"] == "digits" and images["population"]["metadata"]["source"] == "sklearn-digits"
    assert "histogram" in images["settings"]["release"]
    assert {row["attack"] for row in images["rows"]} == {"bayesian", "tree", "svm", "linear"}

    adult = _payload(reproduced, "fig2e-adult")
    assert adult["population"]["attributes"] == 120 and adult["population"]["metadata"]["source"] == "uci-adult"

    vector = _payload(reproduced, "fig2f-vector-kappa")
    weighted = vector["settings"]["vector_kappa_snvs"]
    assert len(weighted) == round(0.1 * EXPERIMENTS["fig2f-vector-kappa"].sizes["quick"].attributes)
    assert all("weighted_utility_loss" in evaluation["defense"] for evaluation in vector["evaluations"].values())

    dp600 = _payload(reproduced, "fig3d-dp600")
    guarantee = dp600["evaluations"]["Laplace, eps=600"]["defense"]["guarantee"]
    sizes = EXPERIMENTS["fig3d-dp600"].sizes["quick"]
    assert guarantee["epsilon"] == pytest.approx(600)
    assert guarantee["sensitivity"] == pytest.approx(sizes.attributes / sizes.members)  # the paper's |Q|/N


def test_table5_composes_four_fixed_gaussians_with_a_learned_fifth(reproduced: Path) -> None:
    payload = _payload(reproduced, "table5")
    settings = payload["settings"]
    # C = (Delta / mu per eps)^2 and each fixed mechanism is N(0, C / eps^2) (catalog docstring of table5)
    assert settings["C"] == pytest.approx((settings["typical_replacement_l2"] / MU_PER_EPSILON) ** 2)
    assert settings["epsilons"] == [0.05, 1.0]  # the quick scale runs the smallest and the largest eps of Table 5
    for epsilon in settings["epsilons"]:
        config = payload["trainings"][f"composition-eps-{epsilon:g}"]["config"]
        assert config["dp_epsilon"] == pytest.approx(5 * epsilon)
        assert config["fixed_gaussian_sigmas"] == pytest.approx([math.sqrt(settings["C"]) / epsilon] * FIXED_MECHANISMS)
        assert payload["trainings"][f"composition-eps-{epsilon:g}"]["bgbp"]["epsilon"] == pytest.approx(5 * epsilon)
        single = payload["evaluations"][f"one mechanism, eps={epsilon:g}"]["defense"]
        assert single["parameters"]["sigma"] == pytest.approx(math.sqrt(settings["C"]) / (5 * epsilon))


def test_a_second_run_reuses_the_trained_defenders_and_gives_the_same_numbers(reproduced: Path, tmp_path: Path,
                                                                              capsys: pytest.CaptureFixture) -> None:
    before = _payload(reproduced, "table3")
    # a finished training keeps what its evaluation needs and not its 1.3 GB-at-paper-scale checkpoint
    for training in before["trainings"].values():
        manifest = verify_run(training["run"])
        assert set(manifest["dropped"]) == {"checkpoint.pt"} and not (Path(training["run"]) / "checkpoint.pt").exists()
        assert {"defender.pt", "config.json", "summary.json"} <= set(manifest["files"])
    assert main(["reproduce", "table3", "--seed", str(SEED), "--out", str(reproduced), "--quiet"]) == 2
    assert "use --resume to reuse its finished work" in capsys.readouterr().err  # nothing replaced unasked
    assert main(["reproduce", "table3", "--seed", str(SEED), "--out", str(reproduced), "--quiet", "--resume"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["experiments"][0]["name"] == "table3"
    after = _payload(reproduced, "table3")
    assert all(training["reused"] for training in after["trainings"].values())
    # finished evaluations are stored and reused, with their scores (the ROC plots are drawn again)
    assert all(evaluation["reused"] for evaluation in after["evaluations"].values())
    assert not any(evaluation["reused"] for evaluation in before["evaluations"].values())
    assert after["evaluations"] == {setting: {**evaluation, "reused": True} for setting, evaluation in before["evaluations"].items()}
    assert (reproduced / "table3" / f"quick_seed{SEED}" / "roc-3.png").read_bytes().startswith(PNG_SIGNATURE)
    # the reused trainings' own time is kept, and counted in the experiment's cost
    own = [training["training_seconds"] for training in after["trainings"].values()]
    assert own == [training["training_seconds"] for training in before["trainings"].values()]
    assert after["wall_seconds_with_reused_trainings"] == pytest.approx(after["wall_seconds"] + sum(own))
    assert [(row["setting"], row["attack"], row["auc"]) for row in after["rows"]] == \
        [(row["setting"], row["attack"], row["auc"]) for row in before["rows"]]


def test_budget_overrides_reach_the_report(tmp_path: Path) -> None:
    assert main(["reproduce", "fig3d-dp600", "--out", str(tmp_path), "--releases", "3", "--attacker-steps", "2",
                 "--workers", "2", "--quiet"]) == 0
    payload = json.loads((tmp_path / "fig3d-dp600" / "quick_seed0" / "results.json").read_text())
    assert payload["budget"]["releases"] == 3 and payload["budget"]["attacker_eval_steps"] == 2
    assert {evaluation["workers"] for evaluation in payload["evaluations"].values()} == {2}  # with a helper process
    assert len(payload["evaluations"]["Laplace, eps=600"]["attacks"]["lrt"]["auc_per_release"]) == 3


@pytest.mark.parametrize("argv, message", [
    (["reproduce", "table9"], "unknown experiment 'table9'"),
    (["reproduce", "table3,nope"], "unknown experiment 'nope'"),
    (["reproduce", "table3", "--releases", "1"], "`--releases` must be >= 2"),
    (["reproduce", "table3", "--steps", "0"], "`--steps` must be >= 1"),
    (["reproduce", "table3", "--seed", "-1"], "`seed` must be >= 0"),
    (["reproduce", "table3", "--workers", "3"], "`--workers` must be auto, 1 or 2"),
])
def test_bad_input_is_one_line_and_exit_code_2(tmp_path: Path, capsys: pytest.CaptureFixture, argv: list[str],
                                               message: str) -> None:
    assert main(argv + ["--out", str(tmp_path / "out")]) == 2
    error = capsys.readouterr().err.strip()
    assert len(error.splitlines()) == 1 and message in error
    assert not (tmp_path / "out").exists()  # checked before any work


def test_an_output_path_that_is_a_file_is_refused_before_any_work(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    target = tmp_path / "file"
    target.write_text("x")
    assert main(["reproduce", "table3", "--out", str(target)]) == 2
    assert "is not a directory" in capsys.readouterr().err
    assert target.read_text() == "x"


def test_a_report_interrupted_while_written_leaves_no_report(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import bngp.reproduce.report as report

    def fail(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(report, "plot_roc", fail)
    with pytest.raises(KeyboardInterrupt):
        from bngp.reproduce import run_experiment

        run_experiment("fig3d-dp600", out=tmp_path, progress=False)
    assert not (tmp_path / "fig3d-dp600" / "quick_seed0").exists()
    assert (tmp_path / "fig3d-dp600" / "quick_seed0.incomplete").is_dir()


def test_differing_rows_known_answers() -> None:
    def row(auc: float, std: float, paper: tuple[float, float] | None, orientation: int = 1) -> Row:
        raw = auc if orientation == 1 else 1 - auc
        return Row("s", "a", auc, std, paper, raw, orientation, 0.0, 0.0)

    # |0.705 - 0.72| = 0.015 is not above the 0.02 floor; 0.69 is.
    assert differing_rows([row(0.705, 0.0, (0.72, 0.0))]) == []
    assert [d for _, d in differing_rows([row(0.69, 0.0, (0.72, 0.0))])] == [pytest.approx(-0.03)]
    # two combined stds: 2 * hypot(0.03, 0.04) = 0.1 > 0.09
    assert differing_rows([row(0.80, 0.03, (0.71, 0.04))]) == []
    assert len(differing_rows([row(0.82, 0.03, (0.71, 0.04))])) == 1
    # a paper number below 0.5 is compared in the raw direction: oriented 0.8 flipped = raw 0.2
    flipped = row(0.80, 0.0, (0.17, 0.0), orientation=-1)
    assert flipped.paper_comparable == pytest.approx(0.2)
    assert [d for _, d in differing_rows([flipped])] == [pytest.approx(0.03)]
    assert differing_rows([row(0.9, 0.0, None)]) == []
    assert DIFFERENCE_FLOOR == 0.02


def test_names_sizes_and_budgets_are_validated() -> None:
    assert parse_experiment_names("all") == [*EXPERIMENTS, "frontier", "budget-frontier"]
    assert parse_experiment_names("table5, table3,table5") == ["table5", "table3"]
    with pytest.raises(UnknownNameError):
        parse_experiment_names(" , ")
    with pytest.raises(InputError):
        Sizes(20, 20, 10)
    with pytest.raises(InputError):
        budget_for("huge")
    assert budget_for("paper", steps=7).steps == 7 and budget_for("paper", steps=7).releases == 100
    override = budget_for("small", attacker_steps=9)
    assert override.attacker_eval_steps == override.fresh_check_steps == 9


def test_a_defense_built_in_code_never_takes_the_spec_of_an_earlier_one(tmp_path: Path) -> None:
    """The SPEC of a defense made by ``Experiment.defense`` enters its evaluation's key.  A defense
    built in code has none, even when an earlier defense is gone and its memory (hence its id) is
    reused: Table 5's Gaussian mechanism once took the SPEC of the freed composed defender, which
    changed its stored evaluation's key and its recorded ``defense_spec``."""
    from bngp.defenses import GaussianDefense
    from bngp.reproduce import EXPERIMENTS, Experiment
    from bngp.reproduce.scales import BUDGETS

    experiment = Experiment(EXPERIMENTS["table5"], "quick", 0, tmp_path, BUDGETS["quick"], progress=False)
    for _ in range(100):
        experiment.defense("laplace:epsilon=1")  # not kept by the caller
        assert experiment.spec_of(GaussianDefense(0.1)) is None
    kept = experiment.defense("gaussian:epsilon=1,delta=1e-5")
    assert experiment.spec_of(kept) == "gaussian:epsilon=1,delta=1e-5"


def test_reproductions_train_every_step_of_their_fresh_attackers(reproduced: Path) -> None:
    """Reproductions (the frontier's defenders included) pin ``fresh_check_patience`` and
    ``selection_patience`` to None, so their runs record the config of the runs stored before early
    stopping existed, train every step, and the check trains for all its steps (unless the delivered
    defender is the data-independent release, which is checked exactly, without an attacker)."""
    from bngp.game.config import flat_record

    runs = [path.parent for path in reproduced.rglob("config.json") if (path.parent / "summary.json").is_file()
            and "budget-frontier" not in str(path)]  # those start from a reference: test_budget_frontier_quick
    assert any("frontier" in str(run) for run in runs) and len(runs) >= 3
    for run in runs:
        config = flat_record(json.loads((run / "config.json").read_text())["config"])
        assert "fresh_check_patience" not in config and "selection_patience" not in config
        summary = json.loads((run / "summary.json").read_text())
        assert "early_stop" not in summary and summary["steps"] == config["steps"]
        check = summary["fresh_attacker_check"]
        assert check["patience"] is None
        if check.get("data_independent"):
            assert check["training_curve"] is None and check["strongest_auc"] == 0.5
        else:
            assert check["training_curve"]["steps"][-1] == check["steps"]


def test_budget_frontier_quick(reproduced: Path, capsys) -> None:
    """``budget-frontier`` at the quick scale: a defender trained for each budget from the best reference,
    within its budget, every reference ranked, the report and plot written; a rerun reuses every cell."""
    directory = reproduced / "budget-frontier" / f"quick_seed{SEED}"
    verify_run(directory)
    results = _payload(reproduced, "budget-frontier")
    assert set(results["cells"]) == {"genome K >= |Q|", "adult"}
    for cells in results["cells"].values():
        (cell,) = cells
        assert cell["trained"]["met"] and cell["trained"]["loss"] == pytest.approx(cell["budget"]["budget"], rel=0.02)
        labels = [entry["label"] for entry in cell["references"]]
        assert labels[:2] == ["laplace", "gaussian"] and labels[-1] == "time-sharing"
        chosen = [entry for entry in cell["references"] if entry["chosen"]]
        assert len(chosen) == 1 and chosen[0]["label"] == cell["best_reference"] == cell["trained"]["start"]["reference"]
        assert cell["trained"]["start"]["kept"] in ("start", "trained")
    assert "envelope" in (directory / "report.md").read_text() and (directory / "frontier.png").stat().st_size > 10_000
    capsys.readouterr()
    assert main(["reproduce", "budget-frontier", "--scale", "quick", "--seed", str(SEED), "--out", str(reproduced),
                 "--quiet", "--resume"]) == 0
    assert _payload(reproduced, "budget-frontier")["cells"] == results["cells"]
