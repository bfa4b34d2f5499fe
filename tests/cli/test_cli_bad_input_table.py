"""Every bad input a reviewer found through the CLI: exit code 2, one line on stderr naming the
problem in the CLI's words, no traceback, and nothing left behind in the work directory."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from bngp.cli import main


def _population_with(tmp: Path, source: Path, **changes) -> Path:
    arrays = dict(np.load(source, allow_pickle=False))
    arrays.update(changes)
    path = tmp / "changed.npz"
    np.savez(path, **arrays)
    return path


def _huge_defender(tmp: Path, run: Path) -> Path:
    """A copy of a trained run whose defender.pt asks for layers far larger than its weights."""
    copy = tmp / "huge"
    shutil.copytree(run, copy)
    payload = torch.load(copy / "defender.pt", weights_only=True)
    payload["spec"]["widths"] = [200_000, 200_000, 200_000]
    torch.save(payload, copy / "defender.pt")
    (copy / "manifest.json").unlink()  # a foreign edit: not a complete bngp run any more
    return copy


def _huge_defender_with_manifest(tmp: Path, run: Path) -> Path:
    """The same edit, with the manifest rewritten to match (only the size check can refuse it)."""
    from bngp.run_dir import commit_run

    staging = tmp / "forged.incomplete"
    shutil.copytree(run, staging)
    (staging / "manifest.json").unlink()
    payload = torch.load(staging / "defender.pt", weights_only=True)
    payload["spec"]["widths"] = [200_000, 200_000, 200_000]
    torch.save(payload, staging / "defender.pt")
    return commit_run(staging, tmp / "forged", {"seed": 0})


CASES = {
    # name: (argv builder, fragment of the one-line message)
    "kappa-overflow": (lambda t, p, r: ["train", "--no-decision", "--population", p, "--members", "20", "--kappa", "1e39",
                                        "--out", t / "run"], "--kappa"),
    "members-equal-K": (lambda t, p, r: ["train", "--no-decision", "--population", p, "--members", "40", "--out", t / "run"],
                        "--members"),
    "resume-without-checkpoint": (lambda t, p, r: ["train", "--no-decision", "--population", p, "--members", "20", "--resume",
                                                   "--out", t / "run"], "cannot resume"),
    "metadata-a-number": (lambda t, p, r: ["evaluate", "--no-decision", "--population", _population_with(t, p, metadata=np.array(5)),
                                           "--members", "20", "--defense", "none", "--attacks", "score",
                                           "--out", t / "e.json"], "metadata"),
    "text-renamed-npz": (lambda t, p, r: ["evaluate", "--no-decision", "--population", _write(t / "pop.npz", "hello"), "--members",
                                          "20", "--defense", "none", "--attacks", "score", "--out", t / "e.json"],
                         "not a .npz archive"),
    "duplicate-spec-key": (lambda t, p, r: ["evaluate", "--no-decision", "--population", p, "--members", "20", "--defense",
                                            "laplace:epsilon=1,epsilon=2", "--attacks", "score", "--out",
                                            t / "e.json"], "given twice"),
    "evaluate-out-is-a-directory": (lambda t, p, r: ["evaluate", "--no-decision", "--population", p, "--members", "20", "--defense",
                                                     "none", "--attacks", "score", "--out", _mkdir(t / "d")],
                                    "existing directory"),
    "incomplete-run": (lambda t, p, r: ["evaluate", "--no-decision", "--population", p, "--members", "20", "--defense",
                                        f"run:{_huge_defender(t, r)}", "--attacks", "score", "--out", t / "e.json"],
                       "not a complete bngp run"),
    "defender-asks-for-huge-layers": (lambda t, p, r: ["evaluate", "--no-decision", "--population", p, "--members", "20", "--defense",
                                                       f"run:{_huge_defender_with_manifest(t, r)}", "--attacks",
                                                       "score", "--out", t / "e.json"], "does not match its weights"),
    "demo-zero-steps": (lambda t, p, r: ["demo", "--steps", "0", "--out", t / "demo"], "--steps"),
    "min-maf-out-of-range": (lambda t, p, r: ["simulate", "--individuals", "10", "--reference", "10", "--snvs", "20",
                                              "--model", "independent", "--min-maf", "0.7", "--out", t / "p.npz"],
                             "--min-maf"),
    "threads-zero": (lambda t, p, r: ["evaluate", "--no-decision", "--population", p, "--members", "20", "--defense", "none",
                                      "--attacks", "score", "--threads", "0", "--out", t / "e.json"], "--threads"),
    "workers-three": (lambda t, p, r: ["evaluate", "--no-decision", "--population", p, "--members", "20", "--defense", "none",
                                       "--attacks", "score", "--workers", "3", "--out", t / "e.json"], "--workers"),
    "audit-evaluate-scores-as-one-run": (lambda t, p, r: ["audit", _scores(t), "--method", "one-run", "--out",
                                                          t / "a.json"], "not independent runs"),
    "audit-npz-for-bits": (lambda t, p, r: ["audit", _scores(t), "--method", "bits", "--out", t / "a.json"],
                           "bits"),
    "population-is-a-directory": (lambda t, p, r: ["evaluate", "--no-decision", "--population", _mkdir(t / "pop"), "--members", "20",
                                                   "--defense", "none", "--attacks", "score", "--out", t / "e.json"],
                                  "`population` is a directory, not a file"),
    "train-population-is-a-directory": (lambda t, p, r: ["train", "--no-decision", "--population", _mkdir(t / "pop"), "--members",
                                                         "20", "--out", t / "run"], "is a directory, not a file"),
    "members-file-is-a-directory": (lambda t, p, r: ["release", "--population", p, "--defense", "none",
                                                     "--members-file", _mkdir(t / "ids"), "--out", t / "r.npz"],
                                    "`members` is a directory, not a file"),
    # beyond any machine's memory: refused before the draw, with the estimate (once a float64 copy of
    # the 0/1 matrix, then the draw itself, ran out of memory with a traceback)
    "simulate-dense-beyond-memory": (lambda t, p, r: ["simulate", "--model", "independent", "--individuals", "2500",
                                                      "--reference", "500", "--snvs", "100000000000",
                                                      "--out", t / "p.npz"], "--packed holds the genotypes 8x smaller"),
    "simulate-packed-beyond-memory": (lambda t, p, r: ["simulate", "--model", "independent", "--individuals", "2500",
                                                       "--reference", "500", "--snvs", "100000000000", "--packed",
                                                       "--out", t / "p.npz"], "GiB of memory, more than the"),
}


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def _mkdir(path: Path) -> Path:
    path.mkdir()
    return path


def _scores(tmp: Path) -> Path:
    path = tmp / "scores.npz"
    np.savez(path, labels=np.array([[0, 1]]), linear_scores=np.array([[0.1, 0.9]]))
    return path


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_input_is_one_line_exit_2_and_leaves_nothing(case, small_population_file, tiny_run, tmp_path, capsys):
    work = tmp_path / "work"
    work.mkdir()
    build, fragment = CASES[case]
    argv = [str(a) for a in build(work, small_population_file, tiny_run)]
    before = {path for path in work.rglob("*")}
    code = main(argv)
    err = capsys.readouterr().err
    lines = [line for line in err.strip().splitlines() if line]
    assert code == 2 and len(lines) == 1 and "Traceback" not in err, err
    assert fragment in lines[0], lines[0]
    assert {path for path in work.rglob("*")} == before, "the failed command left files behind"


#: the release decision (and a budget's reference ranking) read the release with a converged linear attack
#: whose peak memory is estimated first: refused before any work where it does not fit, with the way around.
DECISION_MEMORY_CASES = {
    "evaluate-decision": (lambda t, p: ["evaluate", "--population", p, "--members", "20", "--defense", "laplace:epsilon=5",
                                        "--attacks", "score", "--out", t / "e.json"], "--no-decision"),
    "audit-mechanism-decision": (lambda t, p: ["audit-mechanism", "--population", p, "--members", "20", "--defense",
                                               "laplace:epsilon=5", "--mode", "many-run", "--attack", "score", "--canaries", "10", "--runs", "20",
                                               "--out", t / "a.json"], "--no-decision"),
    "train-decision": (lambda t, p: ["train", "--population", p, "--members", "20", "--steps", "2", "--out", t / "run"],
                       "--no-decision"),
    "train-budget-ranking": (lambda t, p: ["train", "--no-decision", "--population", p, "--members", "20",
                                           "--utility-budget", "0.5x", "--steps", "2", "--out", t / "run"],
                             "--start data-independent"),
}


@pytest.mark.parametrize("case", sorted(DECISION_MEMORY_CASES))
def test_a_decision_beyond_memory_is_refused_before_any_work(case, small_population_file, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr("bngp.memory.available_memory", lambda: 2**20)  # 1 MiB left
    work = tmp_path / "work"
    work.mkdir()
    build, fragment = DECISION_MEMORY_CASES[case]
    code = main([str(a) for a in build(work, small_population_file)])
    err = capsys.readouterr().err
    lines = [line for line in err.strip().splitlines() if line and not line.startswith("utility budget")]
    assert code == 2 and len(lines) == 1 and "Traceback" not in err, err
    assert "the converged linear attack at 40 individuals x " in lines[0] and "GiB of memory, more than the 0.0 GiB" \
        in lines[0] and fragment in lines[0], lines[0]
    assert not list(work.iterdir()), "the refused command left files behind"
