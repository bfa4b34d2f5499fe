"""Finished cells on disk: ``DIR/cells/<key>.json``, one file per cell, written atomically.

A cell whose file holds a successful result is reused by the next run of the sweep; a failed
cell's file records its error and the cell is run again.
"""

from __future__ import annotations

import json
from pathlib import Path

from bngp.errors import DataFormatError
from bngp.io_utils import write_json

from .cells import Cell
from .results import CellResult

__all__ = ["CellStore"]


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

    def save(self, result: CellResult) -> Path:
        """Write ``result`` atomically (a reader never sees a partial file)."""
        return write_json(self.path(result.cell), result.to_dict())
