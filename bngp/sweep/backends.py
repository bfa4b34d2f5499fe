"""Where the cells run: ``local`` (in this process, one after another) or ``ray`` (one Ray task
per cell, on a local Ray runtime or a cluster).  Both run :func:`bngp.sweep.execute.run_cell`
and yield each cell's result as it finishes; Ray is imported only by the ``ray`` backend.
Given a :class:`bngp.sweep.store.CellStore`, the BNGP cells train in their kept run directories
(and resume there after an interruption) wherever the workers share this machine's disk: on the
local backend and a local Ray runtime, not on a cluster."""

from __future__ import annotations

import copy
import logging
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import ModuleType
from typing import Literal

from bngp.data.population import Population
from bngp.errors import InputError

from .cells import Cell
from .execute import error_line, run_cell
from .results import CellResult
from .store import CellStore

__all__ = ["Backend", "BACKENDS", "check_backend", "run_cells"]

Backend = Literal["local", "ray"]
BACKENDS: tuple[str, ...] = ("local", "ray")
#: what a user without Ray is told to install.
RAY_INSTALL = "pip install bngp[ray]"


def check_backend(backend: str, address: str | None, workers: int | None) -> None:
    """Check the backend's options before any work (and that Ray is installed for ``ray``)."""
    if backend not in BACKENDS:
        raise InputError(f"`backend` must be one of {', '.join(BACKENDS)}, got {backend!r}.")
    if backend == "local" and (address is not None or workers is not None):
        raise InputError("`address` and `workers` apply to the ray backend only.")
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int) or workers < 1):
        raise InputError(f"`workers` must be an integer >= 1, got {workers!r}.")
    if address is not None and workers is not None:
        raise InputError("`workers` sets the CPUs of a local Ray runtime; a cluster (`address`) has its own.")
    if backend == "ray":
        _import_ray()


def run_cells(
    jobs: Sequence[tuple[Cell, Population]],
    retries: int,
    backend: Backend = "local",
    address: str | None = None,
    workers: int | None = None,
    store: CellStore | None = None,
) -> Iterator[CellResult]:
    """Run every ``(cell, population)`` job on ``backend`` and yield the results as they finish
    (grid order for ``local``, completion order for ``ray``).  ``store``: the sweep's cells, whose
    BNGP cells then train in :meth:`bngp.sweep.store.CellStore.run_path` (see the module docstring)."""
    def run_dir(cell: Cell) -> Path | None:
        shared_disk = backend == "local" or address is None
        return store.run_path(cell) if store is not None and shared_disk and cell.game is not None else None

    if backend == "local":
        for cell, population in jobs:
            yield run_cell(cell, population, retries, run_dir(cell))
    else:
        yield from _run_on_ray([(cell, population, run_dir(cell)) for cell, population in jobs], retries, address,
                               workers)


def _import_ray() -> ModuleType:
    try:
        import ray
    except ImportError:
        raise InputError(f"the ray backend needs Ray, which is not installed: {RAY_INSTALL}") from None
    return ray


def _run_cell_on_worker(cell: Cell, population: Population, retries: int, run_dir: Path | None) -> CellResult:
    """:func:`run_cell` on a writable copy of the population (the object store's arrays are read-only)."""
    return run_cell(cell, copy.deepcopy(population), retries, run_dir)


def _run_on_ray(
    jobs: Sequence[tuple[Cell, Population, Path | None]], retries: int, address: str | None, workers: int | None
) -> Iterator[CellResult]:
    """One task of one CPU per cell.  Without ``address`` a local Ray runtime of ``workers``
    CPUs (default: all) is started, and stopped at the end; with it the cluster is joined.  A
    runtime already initialised in this process is used as it is.  Each population is put in
    the object store once; a task whose worker died is resubmitted ``retries`` times by Ray,
    then recorded as failed."""
    ray = _import_ray()
    started_here = not ray.is_initialized()
    if started_here:
        ray.init(address=address, num_cpus=workers, include_dashboard=False, logging_level=logging.ERROR,
                 log_to_driver=False)
    try:
        task = ray.remote(num_cpus=1, max_retries=retries)(_run_cell_on_worker)
        stored: dict[int, object] = {}
        pending = {}
        for cell, population, run_dir in jobs:
            if id(population) not in stored:
                stored[id(population)] = ray.put(population)
            pending[task.remote(cell, stored[id(population)], retries, run_dir)] = cell
        while pending:
            (done,), _ = ray.wait(list(pending), num_returns=1)
            cell = pending.pop(done)
            try:
                yield ray.get(done)
            except ray.exceptions.RayError as exc:
                yield CellResult(cell, "failed", retries + 1, 0.0, error=error_line(exc))
    finally:
        if started_here:
            ray.shutdown()
