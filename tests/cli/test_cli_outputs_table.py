"""Outputs are never lost: every command that writes refuses an existing output (unless --force), never
creates a missing folder, and a plain rerun over an interrupted training is refused with the hint to
resume.  Each case: exit code 2, one line on stderr naming the problem, no traceback, and every file in
the work directory exactly as it was (nothing overwritten, nothing left behind)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from bngp.cli import main


def _files(root: Path) -> dict[Path, str]:
    return {path: hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else "dir"
            for path in root.rglob("*")}


def _existing(path: Path, text: str = "an earlier result") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def _scores(tmp: Path) -> Path:
    return _existing(tmp / "scores.csv", "score,member\n0.9,1\n0.1,0\n0.8,1\n0.2,0\n")


def _sweep_config(tmp: Path) -> Path:
    return _existing(tmp / "sweep.json", '{"defenses": ["none"]}')


_EVALUATE = ["--no-decision", "--members", "20", "--defense", "none", "--attacks", "score", "--releases", "2"]

CASES = {
    # name: (argv builder (work dir, population file), fragment of the one-line message)
    "simulate-over-a-population": (lambda t, p: ["simulate", "--individuals", "10", "--reference", "10", "--snvs",
                                                 "20", "--model", "independent", "--out", _existing(t / "p.npz")],
                                   "already exists: use --force"),
    "simulate-into-a-missing-folder": (lambda t, p: ["simulate", "--individuals", "10", "--reference", "10", "--snvs",
                                                     "20", "--model", "independent", "--out", t / "new" / "p.npz"],
                                       "folder does not exist"),
    "data-over-a-population": (lambda t, p: ["data", "adult", "--individuals", "20", "--reference", "20",
                                             "--out", _existing(t / "adult.npz")], "already exists: use --force"),
    "release-over-a-release": (lambda t, p: ["release", "--population", p, "--defense", "none", "--draws", "3",
                                             "--members", "20", "--out", _existing(t / "r.npz")],
                               "already exists: use --force"),
    "evaluate-over-a-report": (lambda t, p: ["evaluate", "--population", p, *_EVALUATE, "--out",
                                             _existing(t / "e.json")], "already exists: use --force"),
    "evaluate-over-a-stale-plot": (lambda t, p: ["evaluate", "--population", p, *_EVALUATE, "--out", t / "e.json",
                                                 "--plot", _existing(t / "roc.learning.png")],
                                   "roc.learning.png already exists"),
    "evaluate-into-a-missing-folder": (lambda t, p: ["evaluate", "--population", p, *_EVALUATE, "--out",
                                                     t / "new" / "e.json"], "folder does not exist"),
    "train-over-an-interrupted-run": (lambda t, p: ["train", "--population", p, "--members", "20", "--steps", "2",
                                                    "--out", _existing(t / "run.incomplete" / "checkpoint.pt").parent
                                                    .with_name("run")], "use --resume to continue it"),
    "train-into-a-missing-folder": (lambda t, p: ["train", "--population", p, "--members", "20", "--steps", "2",
                                                  "--out", t / "new" / "run"], "folder does not exist"),
    "demo-over-a-demo": (lambda t, p: ["demo", "--out", _existing(t / "demo" / "report.md").parent],
                         "already exists: use --force"),
    "sweep-over-a-sweep": (lambda t, p: ["sweep", _sweep_config(t), "--out", _existing(t / "sw" / "sweep.json").parent],
                           "or --resume to reuse"),
    "sweep-resume-and-force": (lambda t, p: ["sweep", _sweep_config(t), "--resume", "--force", "--out", t / "sw"],
                               "exclude each other"),
    "audit-over-a-report-plot": (lambda t, p: ["audit", _scores(t), "--method", "one-run", "--out", t / "a.json"]
                                 if _existing(t / "a.png") else [], "a.png already exists"),
    "audit-mechanism-over-a-report": (lambda t, p: ["audit-mechanism", "--population", p, "--members", "20",
                                                    "--defense", "none", "--mode", "one-run", "--canaries", "8",
                                                    "--attack", "score", "--out", _existing(t / "m.json")],
                                      "already exists: use --force"),
    "reproduce-over-an-earlier-run": (lambda t, p: ["reproduce", "table3", "--out",
                                                    _existing(t / "rep" / "table3" / "quick_seed0" / "report.md")
                                                    .parents[2]], "use --resume to reuse"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_existing_outputs_are_refused_and_kept(case, small_population_file, tmp_path, capsys):
    work = tmp_path / "work"
    work.mkdir()
    build, fragment = CASES[case]
    argv = [str(a) for a in build(work, small_population_file)]
    before = _files(work)
    code = main(argv)
    err = capsys.readouterr().err
    lines = [line for line in err.strip().splitlines() if line]
    assert code == 2 and len(lines) == 1 and "Traceback" not in err, err
    assert fragment in lines[0], lines[0]
    assert _files(work) == before, "the refused command changed or left files"


def test_force_replaces_an_evaluation_and_its_stale_sidecars(small_population_file, tmp_path, capsys):
    """A second evaluation with --force replaces the report, its Markdown and plot together, and removes the
    learning-curve plot the first one drew (the second attack has no learning curve)."""
    out = tmp_path / "e.json"
    first = ["evaluate", "--population", str(small_population_file), "--members", "20", "--defense", "none",
             "--releases", "3", "--no-decision", "--quiet", "--out", str(out)]
    assert main([*first, "--attacks", "linear,score"]) == 0
    assert (tmp_path / "e.learning.png").is_file()
    assert main([*first, "--attacks", "score"]) == 2
    assert main([*first, "--attacks", "score", "--force"]) == 0
    capsys.readouterr()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["e.json", "e.md", "e.png"]
    assert '"score"' in out.read_text() and '"linear"' not in out.read_text()


def test_an_interrupted_training_says_how_to_resume(small_population_file, tmp_path, capsys, monkeypatch):
    """Ctrl-C during `bngp train` with a checkpoint saved: exit 130 and one line naming RUN.incomplete and
    --resume; a plain rerun is then refused with the same hint, and --resume is accepted."""
    from bngp.game import Game

    def interrupted(self, run_dir, **kwargs):
        _existing(Path(f"{run_dir}.incomplete") / "checkpoint.pt")
        raise KeyboardInterrupt

    monkeypatch.setattr(Game, "train", interrupted)
    argv = ["train", "--no-decision", "--population", str(small_population_file), "--members", "20", "--steps", "2",
            "--quiet", "--out", str(tmp_path / "run")]
    assert main(argv) == 130
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "run.incomplete" in err[0] and "--resume" in err[0], err
    assert main(argv) == 2
    assert "holds an interrupted run: use --resume to continue it" in capsys.readouterr().err


def test_a_library_warning_is_one_line_of_the_command(monkeypatch, capsys):
    """A warning raised in the library (a missed budget, an exploitable defender) reads as the command's own line,
    without a source path."""
    import warnings

    def warn(args):
        warnings.warn("no defender state met the utility-budget 0.01 on held-out draws\nsecond line", stacklevel=2)
        return 0

    monkeypatch.setattr("bngp.cli.simulate.run", warn)
    assert main(["simulate", "--out", "x.npz"]) == 0
    assert capsys.readouterr().err == "bngp simulate: warning: no defender state met the utility-budget 0.01 on held-out draws\n"
