"""Atomic file output: write to a temporary file beside the target, then rename.

A reader (or a crashed run) never sees a partially written output under the final name.
"""

from __future__ import annotations

import json
import os
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any, Iterator

__all__ = ["atomic_write", "write_json", "write_text"]


@contextmanager
def atomic_write(path: str | Path, mode: str = "wb") -> Iterator[IO[Any]]:
    """Yield a handle to a temporary file that replaces ``path`` on successful exit."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, mode) as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp_name, path)
    except BaseException:
        if os.path.exists(tmp_name):
            os.unlink(tmp_name)
        raise


def write_json(path: str | Path, payload: Any) -> Path:
    """Write ``payload`` as indented JSON atomically."""
    with atomic_write(path, "w") as handle:
        json.dump(payload, handle, indent=2, sort_keys=False, default=_json_default)
        handle.write("\n")
    return Path(path)


def write_text(path: str | Path, text: str) -> Path:
    """Write ``text`` atomically."""
    with atomic_write(path, "w") as handle:
        handle.write(text)
    return Path(path)


def _json_default(value: Any) -> Any:
    import numpy as np

    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"cannot serialise {type(value).__name__} to JSON")
