"""The input files of ``bngp audit``: a SCORES.csv with a header row, or the SCORES.npz of ``bngp evaluate``.

A CSV gives named numeric columns (:func:`read_columns`); the SCORES.npz of ``bngp evaluate
--scores-out`` gives one attack's R releases x K targets scores and their labels
(:func:`read_scores_npz`).  Every malformed file raises :class:`bngp.errors.DataFormatError` (a
choice the file leaves open, :class:`bngp.errors.InputError`) naming the file and, for a CSV, the line.
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from bngp.errors import DataFormatError, InputError
from bngp.validation import check_readable_file

__all__ = ["is_npz", "read_columns", "read_scores_npz"]


def read_scores_npz(path: str | Path, attack: str | None) -> dict[str, np.ndarray]:
    """``score`` and ``member`` arrays, R releases x K targets, from the SCORES.npz of
    ``bngp evaluate --scores-out``."""
    path = check_readable_file("SCORES", path)
    try:
        with np.load(path, allow_pickle=False) as data:
            arrays = {key: data[key] for key in data.files}
    except Exception as exc:  # zipfile/numpy raise several types for corrupt files
        raise DataFormatError(f"{path} is not a readable .npz file ({type(exc).__name__}).") from exc
    names = sorted(key[: -len("_scores")] for key in arrays if key.endswith("_scores"))
    if "labels" not in arrays or not names:
        raise DataFormatError(f"{path} is not a scores file of `bngp evaluate --scores-out` (needs labels and NAME_scores).")
    if attack is None:
        if len(names) > 1:
            raise InputError(f"{path} holds the scores of several attacks ({', '.join(names)}): choose one with --attack.")
        attack = names[0]
    if attack not in names:
        raise InputError(f"{path} has no scores of attack {attack!r} (it has: {', '.join(names)}).")
    scores, labels = arrays[f"{attack}_scores"], arrays["labels"]
    if scores.shape != labels.shape:
        raise DataFormatError(f"{path}: `{attack}_scores` {scores.shape} and `labels` {labels.shape} differ in shape.")
    if scores.ndim != 2:
        raise DataFormatError(f"{path}: `{attack}_scores` must be releases x targets (2-D), got shape {scores.shape}.")
    return {"score": scores.astype(np.float64), "member": labels.astype(np.float64)}


def is_npz(path: str | Path) -> bool:
    """True for a zip archive (what numpy's savez writes), whatever the file is called."""
    path = check_readable_file("SCORES", path)
    with path.open("rb") as handle:
        return handle.read(4) == b"PK\x03\x04"


def read_columns(path: str | Path, names: tuple[str, ...]) -> dict[str, np.ndarray]:
    """Read the named numeric columns of a CSV file with a header row.

    Blank lines are skipped; a missing column, a missing cell or a non-numeric cell raises
    :class:`DataFormatError` naming the line.  ``nan`` parses (and is rejected later).
    """
    path = check_readable_file("SCORES.csv", path)
    try:
        return _read_csv(path, names)
    except UnicodeDecodeError:
        raise DataFormatError(f"{path} is not a CSV text file (see `bngp audit --help` for the formats).") from None


def _read_csv(path: Path, names: tuple[str, ...]) -> dict[str, np.ndarray]:
    with path.open(newline="") as handle:
        reader = csv.reader(handle)
        header = next(reader, None)
        if header is None:
            raise DataFormatError(f"{path}: the file is empty (expected a header row with {','.join(names)}).")
        header = [name.strip() for name in header]
        missing = [name for name in names if name not in header]
        if missing:
            raise DataFormatError(f"{path}: missing column(s) {', '.join(missing)} (found: {', '.join(header)}).")
        positions = [header.index(name) for name in names]
        values: dict[str, list[float]] = {name: [] for name in names}
        for line, row in enumerate(reader, start=2):
            if not any(cell.strip() for cell in row):
                continue
            for name, position in zip(names, positions):
                text = row[position].strip() if position < len(row) else ""
                try:
                    values[name].append(float(text))
                except ValueError:
                    raise DataFormatError(f"{path} line {line}: `{name}` must be a number, got {text!r}.") from None
    if not values[names[0]]:
        raise DataFormatError(f"{path}: no data rows.")
    return {name: np.asarray(column, dtype=np.float64) for name, column in values.items()}
