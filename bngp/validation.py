"""Input validation with one message form: "`name` must be ..., got ...".

All checks raise :class:`bngp.errors.InputError` (or :class:`DataFormatError` for arrays).
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np

from bngp.errors import DataFormatError, InputError, MissingFileError

__all__ = [
    "check_binary_matrix",
    "check_finite_array",
    "check_in_open_interval",
    "check_nonnegative",
    "check_output_file",
    "check_patience",
    "check_positive_int",
    "check_probability_vector",
    "check_readable_file",
]


#: elements compared at once by :func:`check_binary_matrix` (its temporaries: two bool blocks of this size).
_BINARY_BLOCK_ELEMENTS = 1 << 20


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def check_positive_int(name: str, value: object, *, minimum: int = 1, maximum: int | None = None) -> int:
    """Return ``value`` as int if ``minimum <= value <= maximum``."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise InputError(f"`{name}` must be an integer, got {_short(value)}.")
    if value < minimum or (maximum is not None and value > maximum):
        upper = "" if maximum is None else f" and <= {maximum}"
        raise InputError(f"`{name}` must be >= {minimum}{upper}, got {value}.")
    return int(value)


def check_patience(name: str, value: object, *, unset: str = "None") -> int | None:
    """Return an early-stopping patience: an integer >= 1, or None for all steps (``unset``: how the
    caller's users write None, e.g. "null" in a JSON config)."""
    if value is not None and (isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1):
        raise InputError(f"`{name}` must be an integer >= 1 or {unset} (all steps), got {value!r}.")
    return value


def check_nonnegative(name: str, value: float) -> float:
    """Return ``value`` as float if finite and >= 0."""
    value = float(value)
    if not np.isfinite(value) or value < 0:
        raise InputError(f"`{name}` must be a finite number >= 0, got {value}.")
    return value


def check_epsilon(value: float, name: str = "epsilon") -> float:
    """Return ``value`` as float if it is a finite number > 0."""
    value = float(value)
    if math.isnan(value) or value <= 0:
        raise InputError(f"`{name}` must be > 0, got {value:g}.")
    if math.isinf(value):
        raise InputError(f"`{name}` must be finite, got {value:g}.")
    return value


def check_delta(value: float, name: str = "delta", *, allow_zero: bool = True) -> float:
    """Return ``value`` as float if it lies in [0, 1) (in (0, 1) when not ``allow_zero``: a
    Gaussian mechanism has no finite eps at delta = 0)."""
    value = float(value)
    if allow_zero and not 0.0 <= value < 1.0:
        raise InputError(f"`{name}` must be in [0, 1), got {value:g}.")
    if not allow_zero and not 0.0 < value < 1.0:
        raise InputError(f"`{name}` must be in (0, 1), got {value:g}.")
    return value


def check_in_open_interval(name: str, value: float, low: float, high: float) -> float:
    """Return ``value`` as float if ``low < value < high``."""
    value = float(value)
    if not (low < value < high):
        raise InputError(f"`{name}` must be in ({low:g}, {high:g}), got {value}.")
    return value


def check_finite_array(name: str, array: np.ndarray, *, ndim: int | None = None) -> np.ndarray:
    """Return ``array`` as float64 if it has ``ndim`` dims, is non-empty and free of NaN/inf."""
    array = np.asarray(array)
    if ndim is not None and array.ndim != ndim:
        raise DataFormatError(f"`{name}` must be a {ndim}-D array, got shape {array.shape}.")
    if array.size == 0:
        raise DataFormatError(f"`{name}` must not be empty, got shape {array.shape}.")
    if not np.issubdtype(array.dtype, np.number) and array.dtype != bool:
        raise DataFormatError(f"`{name}` must be numeric, got dtype {array.dtype}.")
    array = array.astype(np.float64, copy=False)
    if not np.all(np.isfinite(array)):
        raise DataFormatError(f"`{name}` contains NaN or infinite values.")
    return array


def check_binary_matrix(name: str, array: np.ndarray) -> np.ndarray:
    """Return a non-empty 2-D 0/1 matrix as uint8; reject NaN, infinities and any other value.

    Never widens the matrix: a uint8 input is returned as is (no copy), a bool one as a uint8
    view, other integer and float dtypes are compared with 0 and 1 in their own dtype, row block
    by row block (temporaries of at most :data:`_BINARY_BLOCK_ELEMENTS` elements), and converted
    to uint8 (1 byte per element) once accepted.
    """
    values = np.asarray(array)
    if values.ndim != 2:
        raise DataFormatError(f"`{name}` must be a 2-D array, got shape {values.shape}.")
    if values.shape[0] == 0 or values.shape[1] == 0:
        raise DataFormatError(f"`{name}` must not be empty: it needs at least one row and one column, "
                              f"got shape {values.shape}.")
    if values.dtype == bool:
        return values.view(np.uint8)
    if not (np.issubdtype(values.dtype, np.integer) or np.issubdtype(values.dtype, np.floating)):
        raise DataFormatError(f"`{name}` must be a numeric 0/1 matrix, got dtype {values.dtype}.")
    rows = max(1, _BINARY_BLOCK_ELEMENTS // values.shape[1])
    for start in range(0, values.shape[0], rows):
        block = values[start : start + rows]
        bad = block != 0
        bad &= block != 1
        if bad.any():
            example = block[bad][0]
            if not np.isfinite(example):
                raise DataFormatError(f"`{name}` contains NaN or infinite values.")
            raise DataFormatError(f"`{name}` must be binary (0/1), found value {example:g}.")
    return values.astype(np.uint8, copy=False)


def check_probability_vector(name: str, values: np.ndarray, *, open_interval: bool = True) -> np.ndarray:
    """Return a 1-D float array of probabilities in (0, 1) (or [0, 1] if not ``open_interval``)."""
    values = check_finite_array(name, values, ndim=1)
    if open_interval:
        ok = (values > 0) & (values < 1)
        interval = "(0, 1)"
    else:
        ok = (values >= 0) & (values <= 1)
        interval = "[0, 1]"
    if not ok.all():
        raise InputError(f"`{name}` must lie in {interval}, found {values[~ok][0]:g}.")
    return values


def check_readable_file(name: str, path: str | Path) -> Path:
    """Return ``path`` as a Path if it is an existing readable file (a directory is named as one)."""
    path = Path(path)
    if path.is_dir():
        raise InputError(f"`{name}` is a directory, not a file: {path}")
    if not path.is_file():
        raise MissingFileError(f"`{name}` file not found: {path}")
    try:
        with path.open("rb"):
            pass
    except OSError as exc:
        raise MissingFileError(f"`{name}` file cannot be read: {path} ({exc.strerror})") from exc
    return path


def check_output_file(flag: str, path: str | Path, *, parent_must_exist: bool = True) -> Path:
    """Fail before any work unless the output file ``path`` (given as ``flag``) can be written:
    not an existing directory, its directory existing (or, with ``parent_must_exist=False``,
    to be created) and writable."""
    path = Path(path)
    if path.is_dir():
        raise InputError(f"`{flag}` {path} is an existing directory; give a file name.")
    parent = path.parent
    if not parent.exists():
        if parent_must_exist:
            raise MissingFileError(f"`{flag}` directory does not exist: {parent}")
        return path
    if not parent.is_dir():
        raise InputError(f"`{flag}` {path}: {parent} is not a directory.")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise InputError(f"`{flag}` directory is not writable: {parent}")
    return path
