"""Sweeps: a grid of defenses x trade-offs x seeds x datasets, one task per cell, merged into one
JSON and Markdown report and a privacy-utility frontier plot (``bngp sweep``, ``docs/sweep.md``).

* :mod:`~bngp.sweep.config`: :class:`SweepConfig`, read from JSON or TOML and validated.
* :mod:`~bngp.sweep.cells`: :class:`Cell`, the grid's cells and their hashes; the datasets.
* :mod:`~bngp.sweep.execute`: :func:`run_cell`, one cell (train, evaluate, audit, retry).
* :mod:`~bngp.sweep.backends`: the ``local`` and ``ray`` backends.
* :mod:`~bngp.sweep.store`: finished cells on disk (``DIR/cells/<key>.json``), reused by reruns.
* :mod:`~bngp.sweep.results`: :class:`CellResult` and :class:`SweepResult`.
* :mod:`~bngp.sweep.report`, :mod:`~bngp.sweep.frontier`: the merged outputs.
* :mod:`~bngp.sweep.runner`: :func:`run_sweep`.

Ray is imported only by the ``ray`` backend.
"""

from .backends import BACKENDS
from .cells import Cell
from .config import DEFAULT_ATTACKS, AuditSpec, DatasetSpec, SweepConfig, load_sweep_config
from .results import CellResult, SweepResult
from .runner import run_sweep

__all__ = ["AuditSpec", "BACKENDS", "Cell", "CellResult", "DEFAULT_ATTACKS", "DatasetSpec", "SweepConfig", "SweepResult",
           "load_sweep_config", "run_sweep"]
