"""Atomic file output (write to a temporary file beside the target, then rename) and safe
loading of the toolkit's torch files.

A reader (or a crashed run) never sees a partially written output under the final name.
"""

from __future__ import annotations

import json
import os
import tempfile
import zipfile
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any, Iterator

__all__ = ["atomic_write", "write_json", "write_text", "save_npz", "NPZ_COMPRESSLEVEL", "load_torch_payload"]

#: zlib level of the toolkit's large .npz archives (level 1: much faster than numpy's default on noisy
#: floats and packed bits, slightly larger, ``docs/design/numerics.md``; any .npz reader reads it).
NPZ_COMPRESSLEVEL = 1


@contextmanager
def atomic_write(path: str | Path, mode: str = "wb") -> Iterator[IO[Any]]:
    """Yield a handle to a temporary file that replaces ``path`` on successful exit.  The file
    gets the permissions a plain ``open`` would give (0o666 less the umask), not mkstemp's 0o600."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, mode) as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp_name, 0o666 & ~_umask())
        os.replace(tmp_name, path)
    except BaseException:
        if os.path.exists(tmp_name):
            os.unlink(tmp_name)
        raise


def _umask() -> int:
    """The process's umask (read by setting and restoring it: there is no read-only call)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_json(path: str | Path, payload: Any) -> Path:
    """Write ``payload`` as indented JSON atomically."""
    with atomic_write(path, "w") as handle:
        json.dump(payload, handle, indent=2, sort_keys=False, default=_json_default)
        handle.write("\n")
    return Path(path)


def save_npz(handle: IO[bytes], **arrays: Any) -> None:
    """``np.savez_compressed`` with zlib level :data:`NPZ_COMPRESSLEVEL`; arrays are streamed
    (no copy), object arrays refused."""
    import numpy as np

    with zipfile.ZipFile(handle, mode="w", compression=zipfile.ZIP_DEFLATED, compresslevel=NPZ_COMPRESSLEVEL,
                         allowZip64=True) as archive:
        for key, value in arrays.items():
            with archive.open(f"{key}.npy", mode="w", force_zip64=True) as member:
                np.lib.format.write_array(member, np.asanyarray(value), allow_pickle=False)


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


def load_torch_payload(path: str | Path, file_format: str, error: type[Exception], what: str) -> dict[str, Any]:
    """The dict saved in a bngp torch file whose ``format`` is ``file_format``, loaded safely
    (``weights_only=True``, on the CPU); any unreadable or foreign file raises ``error`` naming
    ``what`` it should have been."""
    import torch

    try:
        payload = torch.load(path, weights_only=True, map_location="cpu")
    except Exception as exc:  # torch raises several unrelated types for corrupt files
        raise error(f"{path} is not a readable {what} ({type(exc).__name__}).") from None
    if not isinstance(payload, dict) or payload.get("format") != file_format:
        raise error(f"{path} is not a {what}.")
    return payload
