""":func:`run_sweep`: validate a sweep, run the cells not yet finished, merge every result."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from bngp.data import Population
from bngp.errors import InputError
from bngp.io_utils import write_json, write_text

from .backends import Backend, check_backend, run_cells
from .cells import Cell, load_datasets, plan_cells
from .config import SweepConfig, load_sweep_config
from .frontier import plot_frontier
from .report import sweep_markdown, sweep_payload
from .results import CellResult, SweepResult
from .store import CellStore

__all__ = ["run_sweep", "JSON_FILE", "MARKDOWN_FILE", "PLOT_FILE", "CELLS_DIR"]

JSON_FILE = "sweep.json"
MARKDOWN_FILE = "sweep.md"
PLOT_FILE = "frontier.png"
CELLS_DIR = "cells"


def _cost_rank(job: tuple[Cell, Population]) -> tuple[int, bool]:
    """Order of execution: smaller populations (K x |Q|) first and, within one, cells without a
    defender to train before BNGP cells (stable within ties: grid order), so that an interrupted
    sweep has finished as many cells as it could (at paper scale an Adult cell takes a minute or
    two, a genome DP cell about ten, a genome BNGP cell more than an hour)."""
    cell, population = job
    return population.n_individuals * population.n_attributes, cell.game is not None


def run_sweep(
    config: SweepConfig | Mapping[str, Any] | str | os.PathLike,
    out_dir: str | os.PathLike,
    backend: Backend = "local",
    address: str | None = None,
    *,
    workers: int | None = None,
    progress: bool = True,
) -> SweepResult:
    """Run the sweep grid of ``config`` and merge its results in ``out_dir``.

    Everything is validated before any cell runs (:class:`bngp.errors.InputError`): the config,
    the backend's options, the datasets (n < K) and every DP defense at every eps.  Cells whose
    successful result is stored in ``out_dir/cells/`` are reused; the others run on ``backend``
    (``"local"``: in this process, one after another, cheapest first (:func:`_cost_rank`);
    ``"ray"``: one Ray task per cell, on a local runtime of ``workers`` CPUs, or on the cluster
    at ``address``), each retried up to
    ``config.retries`` times, and each stored as soon as it finishes (a BNGP cell's trained
    defender in ``out_dir/runs/<key>/``, where it trains, except on a Ray cluster: a rerun after
    an interruption reuses a finished training there and resumes an interrupted one from its
    last checkpoint, :func:`bngp.game.train_once`).  Then ``frontier.png``,
    ``sweep.md`` and, last, ``sweep.json`` are written, each atomically.

    Args:
        config: a :class:`SweepConfig`, a parsed config (relative paths against the current
            directory) or the path of a .json/.toml config file (relative paths against its folder).
        out_dir: the output directory (created if needed).
        backend: "local" or "ray".
        address: the Ray cluster to join (ray backend; default: start a local runtime).
        workers: CPUs of the local Ray runtime (default: all).
        progress: one line per cell on stderr.

    Returns:
        The :class:`SweepResult`; its ``failed`` cells are also reported in the outputs.
    """
    started = time.perf_counter()
    source = None
    if isinstance(config, Mapping):
        config = SweepConfig.from_dict(config)
    elif not isinstance(config, SweepConfig):
        source = Path(config)
        config = load_sweep_config(source)
    check_backend(backend, address, workers)
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise InputError(f"the sweep's output {out} exists and is not a directory.")
    try:
        datasets = load_datasets(config)
    except InputError as exc:
        raise (InputError(f"{source}: {exc}") if source else exc) from None
    cells = plan_cells(config, datasets)
    store = CellStore(out / CELLS_DIR)
    results: dict[str, CellResult] = {}

    def record(result: CellResult, outcome: str) -> None:
        results[result.cell.key] = result
        if progress:
            print(f"[sweep] {len(results)}/{len(cells)} {result.cell.label}: {outcome}", file=sys.stderr, flush=True)

    for cell in cells:
        stored = store.reusable(cell)
        if stored is not None:
            record(stored, "reused")
    reused = len(results)
    reused_seconds = sum(result.seconds for result in results.values())
    jobs = sorted(((cell, datasets[cell.dataset.name].population) for cell in cells if cell.key not in results),
                  key=_cost_rank)
    for result in run_cells(jobs, config.retries, backend, address, workers, store):
        store.save(result)
        record(replace(result, defender_run=None), result.summary())  # its files are on disk now
    ordered = tuple(results[cell.key] for cell in cells)
    plot = plot_frontier(ordered, out / PLOT_FILE)
    payload = sweep_payload(config, ordered, backend=backend, computed=len(jobs), reused=reused,
                            seconds=time.perf_counter() - started, plot=plot.name)
    markdown = write_text(out / MARKDOWN_FILE, sweep_markdown(payload))
    merged = write_json(out / JSON_FILE, payload)
    return SweepResult(ordered, len(jobs), reused, reused_seconds, backend, payload["seconds"], out, merged, markdown,
                       plot)
