"""Finished cells on disk: ``DIR/cells/<key>.json``, one file per cell, written atomically, and the
trained defender of each BNGP cell in ``DIR/runs/<key>/`` (a ``bngp train`` run directory less its
resumable checkpoint: ``run:DIR/runs/<key>`` attacks it again, as an outside check does).

A cell whose file holds a successful result is reused by the next run of the sweep; a failed
cell's file records its error and the cell is run again.  A BNGP cell trains in its
``DIR/runs/<key>/`` (``DIR/runs/<key>.incomplete/`` with its checkpoint until the training is
finished), so an interrupted cell resumes there (:mod:`bngp.sweep.execute`); on a Ray cluster
it trains on the worker and the finished run comes back as bytes, written here by :meth:`CellStore.save`.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from bngp.errors import BNGPError, DataFormatError
from bngp.io_utils import write_json
from bngp.run_dir import staging_dir, verify_run

from .cells import Cell
from .results import CellResult

__all__ = ["CellStore", "RUNS_DIR"]

#: the folder, beside ``cells/``, of the BNGP cells' trained defenders.
RUNS_DIR = "runs"


class CellStore:
    """The ``cells/`` folder of a sweep's output directory."""

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)

    def path(self, cell: Cell) -> Path:
        """Where ``cell``'s result is stored."""
        return self.directory / f"{cell.key}.json"

    def reusable(self, cell: Cell) -> CellResult | None:
        """The stored successful result of ``cell``; None when there is none (no file, a failed
        cell, or a file that is not a record of this cell)."""
        try:
            result = CellResult.from_dict(cell, json.loads(self.path(cell).read_text()))
        except (OSError, ValueError, DataFormatError):
            return None
        return result if result.ok else None

    def run_path(self, cell: Cell) -> Path:
        """Where the trained defender of a BNGP ``cell`` is kept."""
        return self.directory.parent / RUNS_DIR / cell.key

    def defender_run(self, cell: Cell) -> Path | None:
        """The kept run directory of ``cell``'s trained defender when it is there and verifies, else None."""
        path = self.run_path(cell)
        try:
            verify_run(path)
        except BNGPError:
            return None
        return path

    def save(self, result: CellResult) -> Path:
        """Write ``result`` atomically (a reader never sees a partial file), after its defender's
        run directory when it brings one (written aside and renamed into place)."""
        if result.defender_run:
            target = self.run_path(result.cell)
            staging = staging_dir(target)
            if staging.exists():
                shutil.rmtree(staging)
            for name, data in result.defender_run.items():
                path = staging / name
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(data)
            verify_run(staging)
            if target.exists():
                shutil.rmtree(target)
            os.replace(staging, target)
        return write_json(self.path(result.cell), result.to_dict())
