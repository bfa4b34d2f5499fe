"""Validation and conversion of attack inputs, with one message form ("`name` must be ..., got ...").

Targets are binary genotype matrices that can be large (2,500 x 100,000 in the benchmark),
so they are checked in row blocks and never copied to float as a whole: they stay in their
compact integer/bool dtype and the statistics convert SNV blocks on the fly.  Releases are
real matrices in [0, 1]; a single release (|Q|,) is accepted as a batch of one.
"""

from __future__ import annotations

import numpy as np
import torch

from bngp.data.bits import BitMatrix
from bngp.errors import DataFormatError, InputError

__all__ = [
    "check_targets",
    "check_releases",
    "check_pair",
    "check_reference_frequencies",
    "check_binary_panel",
    "check_targets_torch",
    "check_releases_torch",
    "compute_dtype",
    "PopulationIndex",
]

#: rows of a target matrix checked at once (bounds the temporary boolean arrays).
_ROW_BLOCK = 256


def _check_binary_values(name: str, values: np.ndarray) -> None:
    """Raise DataFormatError unless every entry of ``values`` is 0 or 1 (checked in row blocks)."""
    if values.dtype == np.bool_:
        return
    if np.issubdtype(values.dtype, np.integer):
        if values.max() <= 1 and (np.issubdtype(values.dtype, np.unsignedinteger) or values.min() >= 0):
            return
        bad = values[(values != 0) & (values != 1)]
        raise DataFormatError(f"`{name}` must be binary (0/1), found value {bad[0]:g}.")
    for start in range(0, values.shape[0], _ROW_BLOCK):
        block = values[start : start + _ROW_BLOCK]
        if not np.all(np.isfinite(block)):
            raise DataFormatError(f"`{name}` contains NaN or infinite values.")
        bad = (block != 0) & (block != 1)
        if bad.any():
            raise DataFormatError(f"`{name}` must be binary (0/1), found value {block[bad][0]:g}.")


def check_targets(
    targets: np.ndarray | BitMatrix, n_attributes: int | None = None, name: str = "targets"
) -> np.ndarray | BitMatrix:
    """Return ``targets`` as a 2-D binary array in a compact dtype (uint8 unless bool/uint8 already),
    or the :class:`bngp.data.bits.BitMatrix` itself (binary by construction).

    Args:
        targets: (n_targets, |Q|) 0/1 genotypes, one target (|Q|,), or a BitMatrix.
        n_attributes: the |Q| the attack was fitted on, when known.
        name: argument name used in messages.
    """
    if isinstance(targets, BitMatrix):
        if n_attributes is not None and targets.n_columns != n_attributes:
            raise InputError(f"`{name}` must have {n_attributes} columns (|Q| the attack was fitted on), "
                             f"got {targets.n_columns}.")
        return targets
    array = np.asarray(targets)
    if array.ndim == 1:
        array = array[None, :]
    if array.ndim != 2:
        raise DataFormatError(f"`{name}` must be a 2-D array (targets x SNVs), got shape {array.shape}.")
    if array.shape[0] == 0 or array.shape[1] == 0:
        raise DataFormatError(f"`{name}` must have at least one row and one column, got shape {array.shape}.")
    if not (np.issubdtype(array.dtype, np.number) or array.dtype == np.bool_):
        raise DataFormatError(f"`{name}` must be numeric, got dtype {array.dtype}.")
    if n_attributes is not None and array.shape[1] != n_attributes:
        raise InputError(
            f"`{name}` must have {n_attributes} columns (|Q| the attack was fitted on), got {array.shape[1]}."
        )
    _check_binary_values(name, array)
    if array.dtype in (np.uint8, np.bool_):
        return array
    return array.astype(np.uint8)


def check_releases(releases: np.ndarray, n_attributes: int | None = None, name: str = "releases") -> np.ndarray:
    """Return ``releases`` as a 2-D float array (float32 kept, anything else float64) in [0, 1].

    Args:
        releases: (n_releases, |Q|) released frequencies, or one release (|Q|,).
        n_attributes: the required number of columns, when known.
        name: argument name used in messages.
    """
    array = np.asarray(releases)
    if array.ndim == 1:
        array = array[None, :]
    if array.ndim != 2:
        raise DataFormatError(f"`{name}` must be a 2-D array (releases x SNVs), got shape {array.shape}.")
    if array.shape[0] == 0 or array.shape[1] == 0:
        raise DataFormatError(f"`{name}` must have at least one row and one column, got shape {array.shape}.")
    if not np.issubdtype(array.dtype, np.number):
        raise DataFormatError(f"`{name}` must be numeric, got dtype {array.dtype}.")
    if array.dtype != np.float32:
        array = array.astype(np.float64, copy=False)
    if not np.all(np.isfinite(array)):
        raise DataFormatError(f"`{name}` contains NaN or infinite values.")
    outside = (array < 0) | (array > 1)
    if outside.any():
        raise DataFormatError(f"`{name}` must be frequencies in [0, 1], found {array[outside][0]:g}.")
    if n_attributes is not None and array.shape[1] != n_attributes:
        raise InputError(f"`{name}` must have {n_attributes} columns, got {array.shape[1]}.")
    return array


def check_pair(targets: np.ndarray, releases: np.ndarray) -> None:
    """Raise InputError unless targets and releases have the same number of SNVs."""
    if releases.shape[1] != targets.shape[1]:
        raise InputError(
            f"`releases` must have {targets.shape[1]} columns (|Q| of the targets), got {releases.shape[1]}."
        )


def check_reference_frequencies(values: np.ndarray | None, n_attributes: int | None = None) -> np.ndarray:
    """Return reference frequencies p_bar as a 1-D float64 array in [0, 1]."""
    if values is None:
        raise InputError("`reference_frequencies` must be provided.")
    array = np.asarray(values)
    if array.ndim != 1 or array.size == 0:
        raise DataFormatError(f"`reference_frequencies` must be a non-empty 1-D array, got shape {array.shape}.")
    if not np.issubdtype(array.dtype, np.number):
        raise DataFormatError(f"`reference_frequencies` must be numeric, got dtype {array.dtype}.")
    array = array.astype(np.float64)
    if not np.all(np.isfinite(array)):
        raise DataFormatError("`reference_frequencies` contains NaN or infinite values.")
    outside = (array < 0) | (array > 1)
    if outside.any():
        raise DataFormatError(f"`reference_frequencies` must lie in [0, 1], found {array[outside][0]:g}.")
    if n_attributes is not None and array.size != n_attributes:
        raise InputError(f"`reference_frequencies` must have {n_attributes} entries, got {array.size}.")
    return array


def check_binary_panel(
    name: str, values: np.ndarray | BitMatrix | None, n_attributes: int | None = None
) -> np.ndarray | BitMatrix:
    """Return a non-empty 2-D binary panel (reference individuals or population) as uint8/bool,
    or the :class:`bngp.data.bits.BitMatrix` itself."""
    if values is None:
        raise InputError(f"`{name}` must be provided.")
    if isinstance(values, BitMatrix):
        if n_attributes is not None and values.n_columns != n_attributes:
            raise InputError(f"`{name}` must have {n_attributes} columns, got {values.n_columns}.")
        return values
    array = np.asarray(values)
    if array.ndim != 2:
        raise DataFormatError(f"`{name}` must be a 2-D array (individuals x SNVs), got shape {array.shape}.")
    if array.shape[0] == 0:
        raise DataFormatError(f"`{name}` must contain at least one individual, got an empty panel.")
    if n_attributes is not None and array.shape[1] != n_attributes:
        raise InputError(f"`{name}` must have {n_attributes} columns, got {array.shape[1]}.")
    return check_targets(array, name=name)


def compute_dtype(releases: np.ndarray | torch.Tensor) -> torch.dtype:
    """float32 when the releases are float32 (fast path), float64 otherwise."""
    if isinstance(releases, torch.Tensor):
        return torch.float32 if releases.dtype == torch.float32 else torch.float64
    return torch.float32 if releases.dtype == np.float32 else torch.float64


def check_targets_torch(targets: torch.Tensor, n_attributes: int) -> torch.Tensor:
    """Check a torch target matrix (2-D, binary, ``n_attributes`` columns); 1-D becomes one row."""
    if not isinstance(targets, torch.Tensor):
        raise InputError(f"`targets` must be a torch.Tensor, got {type(targets).__name__}.")
    if targets.ndim == 1:
        targets = targets[None, :]
    if targets.ndim != 2 or targets.shape[0] == 0:
        raise DataFormatError(f"`targets` must be a non-empty 2-D tensor, got shape {tuple(targets.shape)}.")
    if targets.shape[1] != n_attributes:
        raise InputError(
            f"`targets` must have {n_attributes} columns (|Q| the attack was fitted on), got {targets.shape[1]}."
        )
    values = targets.detach()
    if values.dtype != torch.bool and bool(((values != 0) & (values != 1)).any()):
        raise DataFormatError("`targets` must be binary (0/1).")
    return targets


def check_releases_torch(releases: torch.Tensor, n_attributes: int) -> torch.Tensor:
    """Check a torch release batch (2-D floating, ``n_attributes`` columns); 1-D becomes one row.

    Values are not range-checked here: releases produced by a mechanism are clipped to
    [0, 1] already, and the statistics clamp where their formulas require it.
    """
    if not isinstance(releases, torch.Tensor):
        raise InputError(f"`releases` must be a torch.Tensor, got {type(releases).__name__}.")
    if releases.ndim == 1:
        releases = releases[None, :]
    if releases.ndim != 2 or releases.shape[0] == 0:
        raise DataFormatError(f"`releases` must be a non-empty 2-D tensor, got shape {tuple(releases.shape)}.")
    if not releases.is_floating_point():
        raise DataFormatError(f"`releases` must be a floating-point tensor, got {releases.dtype}.")
    if releases.shape[1] != n_attributes:
        raise InputError(f"`releases` must have {n_attributes} columns (|Q| of the targets), got {releases.shape[1]}.")
    return releases


def _packed_rows(matrix: np.ndarray | BitMatrix) -> np.ndarray:
    """Rows as ``np.packbits`` bytes (a BitMatrix already stores exactly these)."""
    if isinstance(matrix, BitMatrix):
        return matrix.packed
    return np.packbits(np.asarray(matrix, dtype=np.uint8), axis=1)


class PopulationIndex:
    """Maps target genotype rows to their row in the known population (exact match).

    Attacks whose output is one score per known individual (reconstruction, the linear
    learned attacker) score a target by finding it in the population.  Rows are keyed by
    their bit-packed bytes; identical individuals map to the first occurrence.
    """

    def __init__(self, population: np.ndarray | BitMatrix) -> None:
        packed = _packed_rows(population)
        self._rows: dict[bytes, int] = {}
        for row, key in enumerate(packed):
            self._rows.setdefault(key.tobytes(), row)

    def rows(self, targets: np.ndarray | BitMatrix, attack_name: str) -> np.ndarray:
        """Population row of each target; InputError for a target outside the population."""
        packed = _packed_rows(targets)
        found = np.fromiter((self._rows.get(key.tobytes(), -1) for key in packed), dtype=np.int64, count=len(packed))
        if (found < 0).any():
            first = int(np.flatnonzero(found < 0)[0])
            raise InputError(
                f"`targets` row {first} is not an individual of the known population; "
                f"attack `{attack_name}` scores only individuals of the population it was fitted on."
            )
        return found
