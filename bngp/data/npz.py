"""Saving and loading a :class:`Population` as a compressed ``.npz`` file.

Layout: ``genotypes`` (K x |Q| uint8), ``reference`` (R x |Q| uint8), ``ids``,
``reference_ids``, ``attribute_names`` (unicode arrays) and ``metadata`` (a JSON string).
Writes are atomic: the file appears complete or not at all.
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import numpy as np

from bngp.data.population import Population
from bngp.errors import DataFormatError
from bngp.io_utils import atomic_write
from bngp.validation import check_readable_file

__all__ = ["save_population", "load_population"]

_REQUIRED = ("genotypes", "reference")


def save_population(population: Population, path: str | Path) -> Path:
    """Write ``population`` to ``path`` (``.npz``) atomically and return the path."""
    path = Path(path)
    with atomic_write(path) as handle:
        np.savez_compressed(
            handle,
            genotypes=population.genotypes,
            reference=population.reference,
            ids=population.ids,
            reference_ids=population.reference_ids,
            attribute_names=population.attribute_names,
            metadata=np.array(json.dumps(population.metadata, default=str)),
        )
    return path


def load_population(path: str | Path) -> Population:
    """Read a population written by :func:`save_population` (validated on load)."""
    path = check_readable_file("population", path)
    try:
        with np.load(path, allow_pickle=False) as archive:
            missing = [key for key in _REQUIRED if key not in archive.files]
            if missing:
                raise DataFormatError(f"population file {path} lacks the array `{missing[0]}`.")
            arrays = {key: archive[key] for key in archive.files}
    except (zipfile.BadZipFile, OSError, ValueError, EOFError) as exc:
        if isinstance(exc, DataFormatError):
            raise
        raise DataFormatError(f"population file {path} is not a .npz archive written by `bngp simulate` "
                              f"({type(exc).__name__}).") from None
    metadata = {}
    if "metadata" in arrays:
        try:
            metadata = json.loads(str(arrays["metadata"]))
        except ValueError:
            metadata = None
        if not isinstance(metadata, dict):
            raise DataFormatError(f"population file {path}: `metadata` must be a JSON object (a string array).")
    return Population(
        genotypes=arrays["genotypes"],
        reference=arrays["reference"],
        ids=arrays.get("ids"),
        reference_ids=arrays.get("reference_ids"),
        attribute_names=arrays.get("attribute_names"),
        metadata=metadata,
    )
