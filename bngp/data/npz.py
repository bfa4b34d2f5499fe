"""Saving and loading a :class:`Population` as a compressed ``.npz`` file.

Layout: ``genotypes`` (K x |Q| uint8), ``reference`` (R x |Q| uint8), ``ids``,
``reference_ids``, ``attribute_names`` (unicode arrays) and ``metadata`` (a JSON string).
A bit-packed population (:class:`bngp.data.bits.BitMatrix`) stores ``genotypes_bits`` and
``reference_bits`` (rows of ``np.packbits``) and ``n_attributes`` instead of the two dense
matrices, and loads packed: a 2,500 x 1,000,000 population is about 312 MB of bits in memory
instead of 2.5 GB.  Both layouts are written with zlib level 1, each array streamed into the
archive (:func:`bngp.io_utils.save_npz`).
Writes are atomic: the file appears complete or not at all.
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import numpy as np

from bngp.data.bits import BitMatrix
from bngp.data.population import Population
from bngp.errors import DataFormatError
from bngp.io_utils import atomic_write, save_npz
from bngp.validation import check_readable_file

__all__ = ["save_population", "load_population"]

_DENSE = ("genotypes", "reference")
_PACKED = ("genotypes_bits", "reference_bits", "n_attributes")


def save_population(population: Population, path: str | Path) -> Path:
    """Write ``population`` to ``path`` (``.npz``, zlib level 1, arrays streamed without a copy)
    atomically and return the path."""
    path = Path(path)
    if population.packed:
        matrices = {"genotypes_bits": population.genotypes.packed, "reference_bits": population.reference.packed,
                    "n_attributes": np.array(population.n_attributes, dtype=np.int64)}
    else:
        matrices = {"genotypes": population.genotypes, "reference": population.reference}
    with atomic_write(path) as handle:
        save_npz(
            handle,
            **matrices,
            ids=population.ids,
            reference_ids=population.reference_ids,
            attribute_names=population.attribute_names,
            metadata=np.array(json.dumps(population.metadata, default=str)),
        )
    return path


def load_population(path: str | Path) -> Population:
    """Read a population written by :func:`save_population` (validated on load; packed stays packed)."""
    path = check_readable_file("population", path)
    try:
        with np.load(path, allow_pickle=False) as archive:
            required = _PACKED if "genotypes_bits" in archive.files else _DENSE
            missing = [key for key in required if key not in archive.files]
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
    if "genotypes_bits" in arrays:
        try:
            n_attributes = int(arrays["n_attributes"])
        except (TypeError, ValueError):
            raise DataFormatError(f"population file {path}: `n_attributes` must be one integer.") from None
        genotypes = BitMatrix(arrays["genotypes_bits"], n_attributes)
        reference = BitMatrix(arrays["reference_bits"], n_attributes)
    else:
        genotypes, reference = arrays["genotypes"], arrays["reference"]
    return Population(
        genotypes=genotypes,
        reference=reference,
        ids=arrays.get("ids"),
        reference_ids=arrays.get("reference_ids"),
        attribute_names=arrays.get("attribute_names"),
        metadata=metadata,
    )
