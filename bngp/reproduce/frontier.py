"""The privacy-utility frontier on genomes and Adult (beyond arXiv:2410.07414): ``bngp reproduce frontier``.

One plot, one command: BNGP defenders across kappa (the preference objective of section 3.3) and
the Laplace, Gaussian and l-inf mechanisms across eps, each cell attacked by every registered
attack whose knowledge the evaluation can provide (``attacks = all``: no result rests on the
attacker a defender was trained against) and audited end to end by a canary audit (one-run,
Steinke, Nasr & Jagielski 2023, at the quick scale; many-run with 200 releases otherwise;
:mod:`bngp.mechanism_audit`), whose eps lower bound holds with 95% confidence.  The grid runs as a :mod:`bngp.sweep` (cells stored and reused on a rerun) on two
populations made for the scale: the simulated genome and UCI Adult, at the sizes of the catalog's
genome and Adult experiments.

Writes ``OUT/frontier/SCALE_seedS/`` (``report.md``, ``results.json`` with wall time and peak
memory, ``frontier.png``: utility loss against the strongest attack's AUC, and against the audited
eps lower bound, one column per data set) in one step; the sweep's cells live in
``OUT/frontier/sweep/SCALE_seedS/`` and the two populations in ``OUT/frontier/data/SCALE_seedS/``.
"""

from __future__ import annotations

import json
import shutil
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from bngp.data.npz import save_population
from bngp.io_utils import write_json, write_text
from bngp.reproduce.catalog import ADULT, GENOME
from bngp.reproduce.datasets import make_population
from bngp.reproduce.report import (REFERENCE_MATMUL, ReproductionResult, environment, fresh_staging, frontier_plot_lines,
                                   reused_text)
from bngp.timing import matmul_flops, peak_rss_bytes
from bngp.reproduce.scales import Budget, Sizes
from bngp.run_dir import commit_run

__all__ = ["FRONTIER", "FrontierGrid", "run_frontier", "DEFENSES"]

#: the defense families of the frontier (eps is added to the DP ones; delta of the Gaussian fixed).
DEFENSES = ("bngp", "laplace", "gaussian:delta=1e-5", "linf")
TITLE = ("Privacy-utility frontier (beyond arXiv:2410.07414): BNGP across kappa, Laplace, Gaussian and l-inf "
         "across eps, on genomes and Adult")


@dataclass(frozen=True)
class FrontierGrid:
    """The grid of one scale.

    Attributes:
        kappa: BNGP trade-off weights.
        eps: DP epsilons (one list for both data sets; under the paper's |Q|/N sensitivity the
            useful range is eps ~ 10..10^4 for the genome and 0.1..100 for Adult, so it spans both).
        audit_mode: ``one-run`` (one release, fast) or ``many-run`` (``audit_runs`` releases: a
            tighter bound for the same canaries).
        canaries: canaries of each cell's audit (at most N and at most K - N under replace).
        audit_runs: releases of a many-run audit.
    """

    kappa: tuple[float, ...]
    eps: tuple[float, ...]
    audit_mode: str
    canaries: int
    audit_runs: int | None = None


#: ``quick`` is a pipeline check (one point per family); ``small`` and ``paper`` span
#: the trade-off with many-run audits.
FRONTIER: dict[str, FrontierGrid] = {
    "quick": FrontierGrid(kappa=(1.5,), eps=(100.0,), audit_mode="one-run", canaries=20),
    "small": FrontierGrid(kappa=(0.5, 1.5, 5.0, 50.0), eps=(0.1, 1.0, 10.0, 100.0, 1_000.0, 10_000.0),
                          audit_mode="many-run", canaries=100, audit_runs=200),
    "paper": FrontierGrid(kappa=(0.5, 1.5, 5.0, 50.0), eps=(0.1, 1.0, 10.0, 100.0, 1_000.0, 10_000.0),
                          audit_mode="many-run", canaries=200, audit_runs=200),
}
#: data set -> the sizes of each scale.
DATASET_SIZES: dict[str, dict[str, Sizes]] = {"genome": GENOME, "adult": ADULT}


def _markdown(scale: str, seed: int, grid: FrontierGrid, budget: Budget, wall: float, reused_seconds: float,
              peak: int, matmul: float, sweep_md: str) -> str:
    sizes = "; ".join(f"{name} {table[scale].describe()}" for name, table in DATASET_SIZES.items())
    lines = [
        f"# {TITLE}",
        "",
        __doc__.split("\n\n")[1].replace("\n", " "),
        "",
        f"`bngp reproduce frontier --scale {scale} --seed {seed}`: {sizes}; kappa {list(grid.kappa)}, eps {list(grid.eps)}; "
        f"{budget.steps} defender steps, {budget.releases} evaluation releases, {grid.audit_mode} audits with {grid.canaries} "
        f"canaries{f', {grid.audit_runs} runs' if grid.audit_runs else ''} (attack `score`, confidence 0.95). "
        f"Wall time {wall:.1f} s{reused_text(wall, reused_seconds, 'cells')} at a float32 matmul throughput of "
        f"{matmul / 1e9:.1f} GFLOP/s measured in the same run, peak memory {peak / 2**30:.2f} GiB (this run's process).",
        "",
    ]
    lines += frontier_plot_lines(scale, "Top row: utility loss against the strongest attack's AUC; bottom row: against the "
                                 "audited eps lower bound (a statistically valid lower bound: any claimed eps below it is "
                                 "refuted at 95% confidence). The grey star is the data-independent release f(theta) (AUC 0.5).")
    body = sweep_md.split("\n", 1)[1] if sweep_md.startswith("# ") else sweep_md
    return "\n".join(lines) + body


def run_frontier(*, scale: str, seed: int, out: Path, budget: Budget, progress: bool = True) -> ReproductionResult:
    """Run the frontier grid of ``scale`` and write its report directory (module docstring)."""
    from bngp.sweep import run_sweep
    from bngp.sweep.report import sweep_markdown
    from bngp.sweep.config import AuditSpec, DatasetSpec, SweepConfig

    started = time.perf_counter()
    grid = FRONTIER[scale]
    stem = f"{scale}_seed{seed}"
    root = Path(out) / "frontier"
    data_dir = root / "data" / stem
    data_dir.mkdir(parents=True, exist_ok=True)
    datasets = []
    for name, table in DATASET_SIZES.items():
        path = data_dir / f"{name}.npz"
        save_population(make_population(name, table[scale], seed), path)
        datasets.append(DatasetSpec(name, path.resolve(), table[scale].members))
    # batches of 64 and every step, as in the cells the reproduction has stored (their keys)
    game = (("steps", budget.steps), ("batch_size", 64), ("fresh_check_steps", budget.fresh_check_steps),
            ("fresh_check_patience", None), ("selection_patience", None),
            ("eval_every", budget.eval_every), ("checkpoint_every", budget.checkpoint_every))
    config = SweepConfig(datasets=tuple(datasets), defenses=DEFENSES, kappa=grid.kappa, eps=grid.eps, seeds=(seed,),
                         attacks=("all",), releases=budget.releases, game=game,
                         attacker_patience=None,  # all of the Bayesian attacker's steps, as every reproduction
                         audit=AuditSpec(mode=grid.audit_mode, canaries=grid.canaries, runs=grid.audit_runs))
    result = run_sweep(config, root / "sweep" / stem, progress=progress)
    wall = time.perf_counter() - started
    peak = peak_rss_bytes()
    matmul = matmul_flops(*REFERENCE_MATMUL)
    target = root / stem
    staging = fresh_staging(target)
    sweep = json.loads(result.json_path.read_text())
    shutil.copyfile(result.plot_path, staging / "frontier.png")
    write_json(staging / "results.json", {
        "experiment": "frontier", "title": TITLE, "scale": scale, "seed": seed,
        "sizes": {name: asdict(table[scale]) for name, table in DATASET_SIZES.items()},
        "budget": asdict(budget), "grid": asdict(grid), "wall_seconds": wall,
        "wall_seconds_with_reused_trainings": wall + result.reused_seconds, "matmul_flops_float32": matmul,
        "peak_rss_bytes": peak,
        "peak_rss_note": "process high-water mark (getrusage) at the end of this experiment",
        "rows": [], "differing_cells": [], "failed_cells": len(result.failed), "sweep": sweep,
        "environment": environment(),
    })
    write_text(staging / "report.md", _markdown(scale, seed, grid, budget, wall, result.reused_seconds, peak, matmul,
                                                sweep_markdown(sweep, plot=False)))
    commit_run(staging, target, {"experiment": "frontier", "scale": scale, "seed": seed})
    if progress:
        print(f"[frontier] wrote {target} ({wall:.1f} s, peak memory {peak / 2**30:.2f} GiB)", flush=True)
    return ReproductionResult("frontier", scale, seed, target, wall, peak, ())
