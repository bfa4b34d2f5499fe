"""Reproduce the experiments of arXiv:2410.07414 (Zhang et al., BNGP; section 5 and App. L).

``bngp reproduce NAME|all [--scale quick|small|paper] [--seed S]`` and :func:`reproduce` run the
experiments of :data:`EXPERIMENTS` (:mod:`bngp.reproduce.catalog`) and write, per experiment,
``OUT/NAME/SCALE_seedS/`` with ``report.md`` (our AUC +- std next to the paper's, each attack's
knowledge and direction, the strongest attack per defense, where and why we differ),
``results.json`` (every number, wall time, peak memory), ``auc.png`` and ``roc-N.png``; trained
defenders go to ``OUT/NAME/runs/SCALE_seedS/`` and are reused or resumed on a rerun.  ``frontier``
(:mod:`bngp.reproduce.frontier`) goes beyond the paper: the privacy-utility frontier of BNGP and
three DP mechanisms on genomes and Adult, with audited eps lower bounds; ``budget-frontier``
(:mod:`bngp.reproduce.budget_frontier`) the frontier at a utility budget: defenders trained for each budget
beside every reference mechanism calibrated to it, the lower envelope, and where no release protects.

Example:
    >>> from bngp.reproduce import EXPERIMENTS
    >>> list(EXPERIMENTS)[:3]
    ['table3', 'table4', 'fig2b-pure-dp']
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from pathlib import Path

from bngp.device import DeviceName, resolve_device
from bngp.errors import InputError, UnknownNameError
from bngp.outputs import check_output_folder
from bngp.reproduce.catalog import EXPERIMENTS
from bngp.reproduce.budget_frontier import BUDGET_FRONTIER, run_budget_frontier
from bngp.reproduce.frontier import FRONTIER, run_frontier
from bngp.workers import resolve_workers
from bngp.reproduce.experiment import Experiment, ExperimentSpec, Row
from bngp.reproduce.report import ReproductionResult, write_index, write_report
from bngp.reproduce.scales import BUDGETS, SCALES, Budget, Sizes, budget_for

__all__ = [
    "claim_output_root",
    "previous_work",
    "EXPERIMENTS",
    "NAMES",
    "FRONTIER",
    "BUDGET_FRONTIER",
    "SCALES",
    "BUDGETS",
    "Budget",
    "Sizes",
    "Experiment",
    "ExperimentSpec",
    "Row",
    "ReproductionResult",
    "parse_experiment_names",
    "check_output_root",
    "reproduce",
    "run_experiment",
    "run_frontier",
    "run_budget_frontier",
]

#: every name ``bngp reproduce`` runs, in the order of ``all``: the paper's experiments, then the frontiers.
NAMES: tuple[str, ...] = (*EXPERIMENTS, "frontier", "budget-frontier")
#: the runners of the names beyond the paper's experiments.
_FRONTIERS = {"frontier": run_frontier, "budget-frontier": run_budget_frontier}


def parse_experiment_names(text: str | Sequence[str]) -> list[str]:
    """Names from ``NAME[,NAME...]`` (or a list); ``all`` = :data:`NAMES` (the paper's experiments in its
    order, then ``frontier`` and ``budget-frontier``)."""
    parts = [part.strip() for part in (text.split(",") if isinstance(text, str) else text) if part.strip()]
    if not parts:
        raise UnknownNameError("name at least one experiment (or `all`).")
    names: list[str] = []
    for part in parts:
        for name in NAMES if part == "all" else [part]:
            if name not in NAMES:
                raise UnknownNameError(f"unknown experiment {name!r}; known: {', '.join(NAMES)}, all.")
            if name not in names:
                names.append(name)
    return names


def check_output_root(out: str | Path) -> Path:
    """``out`` as a path that is a directory or can be made one in an existing writable folder (checked before
    any work; a missing parent folder is not created)."""
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise InputError(f"`--out` {out} exists and is not a directory.")
    if not out.exists():
        check_output_folder("--out", out)
    elif not os.access(out, os.W_OK | os.X_OK):
        raise InputError(f"`--out` {out} is not a writable directory.")
    return out


#: the folders under ``OUT/NAME/`` that hold a reproduction's work for one scale and seed (its report, trained
#: runs, finished cells, populations and sweeps), each named ``SCALE_seedS``.
_WORK_FOLDERS = (".", "runs", "cells", "data", "sweep")


def previous_work(names: str | Sequence[str], scale: str, seed: int, out: str | Path) -> list[Path]:
    """The folders of an earlier run of ``names`` at ``scale`` and ``seed`` under ``out`` (reused on a rerun)."""
    stem = f"{scale}_seed{seed}"
    return [folder for name in parse_experiment_names(names) for sub in _WORK_FOLDERS
            if (folder := (Path(out) / name / sub / stem)).exists()]


def claim_output_root(names: str | Sequence[str], scale: str, seed: int, out: str | Path, *, resume: bool,
                      force: bool) -> Path:
    """Check ``out`` before any work (:func:`check_output_root`).  An earlier run of the same experiments, scale
    and seed is reused with ``resume``, removed with ``force``, and refused otherwise, so that no report is
    replaced unasked."""
    out = check_output_root(out)
    if resume and force:
        raise InputError("`--resume` and `--force` exclude each other: reuse the earlier work, or start over.")
    found = previous_work(names, scale, seed, out)
    if found and not (resume or force):
        raise InputError(f"`--out` {found[0]} holds an earlier run: use --resume to reuse its finished work, or "
                         "--force to start over.")
    if force:
        for folder in found:
            shutil.rmtree(folder)
    return out


def run_experiment(name: str, *, scale: str = "quick", seed: int = 0, out: str | Path = "reproduce",
                   budget: Budget | None = None, device: DeviceName = "cpu", progress: bool = True,
                   workers: int | str = 1) -> ReproductionResult:
    """Run the experiment ``name`` at ``scale`` and write its report directory (see the module docstring);
    its evaluations run with ``workers`` processes (1, 2 or ``"auto"``, :func:`bngp.workers.resolve_workers`)."""
    if name not in EXPERIMENTS:
        raise UnknownNameError(f"unknown experiment {name!r}; known: {', '.join(EXPERIMENTS)}.")
    if seed < 0:
        raise InputError(f"`seed` must be >= 0, got {seed}.")
    budget = budget_for(scale) if budget is None else budget
    experiment = Experiment(EXPERIMENTS[name], scale, seed, check_output_root(out), budget,
                            device=resolve_device(device), progress=progress, workers=workers)
    EXPERIMENTS[name].run(experiment)
    return write_report(experiment)


def reproduce(names: str | Sequence[str] = "all", *, scale: str = "quick", seed: int = 0, out: str | Path = "reproduce",
              budget: Budget | None = None, device: DeviceName = "cpu", progress: bool = True,
              workers: int | str = 1) -> list[ReproductionResult]:
    """Run the experiments ``names`` (``all``, a comma-separated string or a list) in order and write
    ``OUT/index.md`` summarising every report under ``OUT``; returns one :class:`ReproductionResult`
    per experiment run.  The evaluations run with ``workers`` processes (1, 2 or ``"auto"``,
    :func:`bngp.workers.resolve_workers`; the same results either way).

    Every name, the scale, the seed, the device, ``workers`` and the output root are checked before any work.
    """
    resolve_workers(workers, 0)
    selected = parse_experiment_names(names)
    budget = budget_for(scale) if budget is None else budget
    if seed < 0:
        raise InputError(f"`seed` must be >= 0, got {seed}.")
    device = resolve_device(device)
    out = check_output_root(out)
    results = [_FRONTIERS[name](scale=scale, seed=seed, out=out, budget=budget, progress=progress) if name in _FRONTIERS
               else run_experiment(name, scale=scale, seed=seed, out=out, budget=budget, device=device, progress=progress,
                                   workers=workers)
               for name in selected]
    write_index(out)
    return results
