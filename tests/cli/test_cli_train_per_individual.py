"""`bngp train --attacker per-individual`: end to end at tiny size, resumed from its checkpoint,
and a bad --attacker is a one-line error with exit code 2."""

from __future__ import annotations

import json
from pathlib import Path

from bngp.cli import main
from bngp.run_dir import verify_run


def _train(population: Path, out: Path, steps: int, *extra: str, attacker: str = "per-individual") -> list[str]:
    return ["train", "--no-decision", "--population", str(population), "--members", "20", "--kappa", "1.5", "--steps", str(steps),
            "--attacker-steps", "1", "--batch-size", "8", "--fresh-check-steps", "5", "--attacker", attacker,
            "--quiet", "--threads", "1", "--out", str(out), *extra]


def test_train_with_the_per_individual_attacker_and_resume(small_population_file, tmp_path, capsys) -> None:
    run = tmp_path / "run"
    assert main(_train(small_population_file, run, 4)) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["attacker"] == "per-individual" and report["steps"] == 4
    verify_run(run)
    assert json.loads((run / "config.json").read_text())["attacker"]["kind"] == "per-individual"
    assert main(_train(small_population_file, run, 6, "--resume")) == 0
    assert json.loads(capsys.readouterr().out)["steps"] == 6
    verify_run(run)
    # resuming with the other attacker is refused in one line: the checkpoint's attacker differs
    code = main(_train(small_population_file, run, 8, "--resume", attacker="population"))
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and "attacker_kind" in err


def test_train_with_an_individual_batch_and_the_scale_settings(small_population_file, tmp_path, capsys) -> None:
    """--individual-batch, --refit-every, --eval-every and --eval-batch reach the run's config."""
    run = tmp_path / "run"
    extra = ("--individual-batch", "10", "--refit-every", "2", "--eval-every", "2", "--eval-batch", "16")
    assert main(_train(small_population_file, run, 4, *extra)) == 0, capsys.readouterr().err
    config = json.loads((run / "config.json").read_text())["config"]
    attacker = config["attacker"]
    assert (attacker["individual_batch"], attacker["refit_every"], config["eval_every"], config["eval_batch"]) == (10, 2, 2, 16)
    assert [row["step"] for row in json.loads((run / "summary.json").read_text())["history"]] == [2, 4]
    code = main(_train(small_population_file, tmp_path / "other", 4, "--individual-batch", "10", attacker="population"))
    err = capsys.readouterr().err
    assert code == 2 and err.strip() == "bngp train: error: `--individual-batch` needs `--attacker` per-individual."
    for flag, value, least in (("--refit-every", "-1", 0), ("--eval-every", "0", 1), ("--eval-batch", "0", 1),
                               ("--individual-batch", "0", 1)):
        code = main(_train(small_population_file, tmp_path / "bad", 4, flag, value))
        err = capsys.readouterr().err
        assert code == 2 and err.strip() == f"bngp train: error: `{flag}` must be >= {least}, got {value}."
    assert not (tmp_path / "bad").exists() and not (tmp_path / "bad.incomplete").exists()


def test_unknown_attacker_is_a_one_line_error(small_population_file, tmp_path, capsys) -> None:
    code = main(_train(small_population_file, tmp_path / "run", 4, attacker="per-snp"))
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert "`--attacker` must be one of population, per-individual" in err
    assert not list(tmp_path.iterdir())  # nothing left behind


def test_evaluate_with_the_per_individual_attack(small_population_file, tmp_path, capsys) -> None:
    """`bngp evaluate --attacks per-individual` fits it with its defaults (to convergence: early
    stopping) and reports it with its learning curve, next to the linear attack's."""
    out = tmp_path / "eval.json"
    code = main(["evaluate", "--no-decision", "--population", str(small_population_file), "--members", "20", "--defense",
                 "laplace:scale=0.05", "--attacks", "per-individual,linear", "--releases", "4", "--seed", "2",
                 "--threads", "1", "--out", str(out)])
    assert code == 0, capsys.readouterr().err
    entry = json.loads(out.read_text())["attacks"]["per-individual"]
    assert entry["auc"] > 0.8 and entry["bgp_risk"] < entry["prior_entropy"]
    assert entry["fit"]["stopped_early"] and len(entry["learning_curve"]["auc"]) == len(entry["learning_curve"]["releases"])
    assert "state of step" in out.with_suffix(".md").read_text() and (tmp_path / "eval.learning.png").is_file()
