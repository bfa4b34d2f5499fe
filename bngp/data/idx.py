"""IDX files (the MNIST format) and the four MNIST files of a folder.

Layout of an IDX file: a 4-byte magic number (two zero bytes, a type byte, the number of
dimensions D), D big-endian uint32 sizes, then the data in row-major order, big-endian.  The
type bytes are :data:`IDX_TYPES` (0x08, unsigned byte, is MNIST's).  A file may be
gzip-compressed (recognised by its magic bytes, whatever its name).  Reading never involves
pickle; every malformation is a one-line :class:`~bngp.errors.DataFormatError`.

Source: Y. LeCun, C. Cortes, C. J. C. Burges, *The MNIST database of handwritten digits*
(the file format); the image experiment that reads MNIST is arXiv:2410.07414, App. L.5
(:mod:`bngp.data.images`).
"""

from __future__ import annotations

import gzip
import math
import zlib
from pathlib import Path

import numpy as np

from bngp.errors import DataFormatError, InputError, MissingFileError

__all__ = ["IDX_TYPES", "MNIST_FILES", "read_idx", "read_idx_shape", "find_mnist_files"]

#: IDX type byte -> big-endian numpy dtype (0x08 unsigned byte is MNIST's).
IDX_TYPES: dict[int, str] = {0x08: ">u1", 0x09: ">i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}

#: role -> the standard MNIST file name (also accepted: ``.gz``, and ``.idx3-ubyte`` for ``-idx3-ubyte``).
MNIST_FILES: dict[str, str] = {
    "train-images": "train-images-idx3-ubyte",
    "train-labels": "train-labels-idx1-ubyte",
    "test-images": "t10k-images-idx3-ubyte",
    "test-labels": "t10k-labels-idx1-ubyte",
}

_GZIP_MAGIC = b"\x1f\x8b"


def _is_gzip(path: Path) -> bool:
    with path.open("rb") as handle:
        return handle.read(2) == _GZIP_MAGIC


def _open_idx(path: str | Path) -> tuple[Path, bool]:
    path = Path(path)
    if path.is_dir():
        raise InputError(f"IDX file is a directory, not a file: {path}")
    if not path.is_file():
        raise MissingFileError(f"IDX file not found: {path}")
    try:
        return path, _is_gzip(path)
    except OSError as exc:
        raise MissingFileError(f"IDX file cannot be read: {path} ({exc.strerror})") from None


def _parse_header(path: Path, head: bytes) -> tuple[np.dtype, tuple[int, ...], int]:
    """(dtype, shape, header length) of the IDX bytes ``head`` (at least the whole header)."""
    if len(head) < 4 or head[0] != 0 or head[1] != 0:
        raise DataFormatError(f"{path} is not an IDX file: its magic number must start with two zero bytes.")
    type_code, dims = head[2], head[3]
    if type_code not in IDX_TYPES:
        raise DataFormatError(f"{path}: unknown IDX data type byte 0x{type_code:02X} "
                              f"(known: {', '.join(f'0x{c:02X}' for c in IDX_TYPES)}).")
    if dims == 0:
        raise DataFormatError(f"{path}: an IDX file must have at least one dimension, got 0.")
    length = 4 + 4 * dims
    if len(head) < length:
        raise DataFormatError(f"{path}: truncated IDX header ({len(head)} bytes, {dims} dimensions need {length}).")
    shape = tuple(int(n) for n in np.frombuffer(head[4:length], dtype=">u4"))
    return np.dtype(IDX_TYPES[type_code]), shape, length


def _read_bytes(path: Path, gzipped: bool, limit: int | None = None) -> bytes:
    try:
        if gzipped:
            with gzip.open(path, "rb") as handle:
                return handle.read() if limit is None else handle.read(limit)
        with path.open("rb") as handle:
            return handle.read() if limit is None else handle.read(limit)
    except (EOFError, zlib.error, gzip.BadGzipFile) as exc:
        raise DataFormatError(f"{path}: damaged gzip stream ({type(exc).__name__}).") from None
    except OSError as exc:
        raise MissingFileError(f"IDX file cannot be read: {path} ({exc.strerror or type(exc).__name__})") from None


def read_idx_shape(path: str | Path) -> tuple[int, ...]:
    """The dimensions in the header of the IDX file ``path`` (plain or gzip-compressed), read
    without the data.  Raises like :func:`read_idx` on a missing file or a malformed header."""
    path, gzipped = _open_idx(path)
    head = _read_bytes(path, gzipped, limit=4 + 4 * 255)
    return _parse_header(path, head)[1]


def read_idx(path: str | Path) -> np.ndarray:
    """The array stored in the IDX file ``path`` (the MNIST format), plain or gzip-compressed
    (recognised by its magic bytes, whatever the name).

    Layout: a 4-byte magic number (two zero bytes, a type byte, the number of dimensions D),
    D big-endian uint32 sizes, then the data in row-major order, big-endian.  Type bytes:
    :data:`IDX_TYPES` (0x08: unsigned byte).  Returns a read-write array of that shape in native
    byte order.  No pickle is involved.

    Raises:
        MissingFileError: no such file, or it cannot be read.
        DataFormatError: a bad magic number or type byte, a truncated header, a damaged gzip
            stream, or data whose length is not the product of the sizes (named in the message).

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     path = Path(folder) / "labels-idx1-ubyte"  # magic 0 0 8 1 (ubyte, 1 dim), size 3, data
    ...     _ = path.write_bytes(bytes([0, 0, 8, 1, 0, 0, 0, 3, 7, 2, 1]))
    ...     read_idx(path).tolist()
    [7, 2, 1]
    """
    path, gzipped = _open_idx(path)
    content = _read_bytes(path, gzipped)
    dtype, shape, start = _parse_header(path, content)
    expected = math.prod(shape) * dtype.itemsize
    found = len(content) - start
    if found != expected:
        raise DataFormatError(f"{path}: the header's sizes {'x'.join(map(str, shape))} need {expected} data bytes, "
                              f"the file has {found} ({'truncated' if found < expected else 'trailing bytes'}).")
    return np.frombuffer(content, dtype=dtype, offset=start).reshape(shape).astype(dtype.newbyteorder("="))


def _candidates(name: str) -> list[str]:
    dotted = name.replace("-idx", ".idx")
    return [name, name + ".gz", dotted, dotted + ".gz"]


def find_mnist_files(directory: str | Path) -> dict[str, Path]:
    """The four MNIST IDX files in ``directory``: role (``train-images``, ``train-labels``,
    ``test-images``, ``test-labels``) -> path.

    Each standard name (:data:`MNIST_FILES`, e.g. ``train-images-idx3-ubyte``) is accepted plain
    or with ``.gz``, and with the common dot spelling ``train-images.idx3-ubyte``.  Only the
    headers are read: images must be 3-dimensional (count x rows x columns, unsigned bytes),
    labels 1-dimensional (unsigned bytes), each image file as long as its label file, and the
    training and test images of the same size.

    Raises:
        MissingFileError: ``directory`` is not a folder, or files are missing (all named).
        DataFormatError: a malformed header or sizes that do not agree.
    """
    folder = Path(directory)
    if not folder.is_dir():
        raise MissingFileError(f"MNIST directory not found: {folder}")
    found: dict[str, Path] = {}
    missing = []
    for role, name in MNIST_FILES.items():
        path = next((folder / c for c in _candidates(name) if (folder / c).is_file()), None)
        if path is None:
            missing.append(name)
        else:
            found[role] = path
    if missing:
        raise MissingFileError(f"MNIST directory {folder} lacks {', '.join(missing)} (plain or .gz).")
    shapes = {}
    for role, path in found.items():
        path, gzipped = _open_idx(path)
        dtype, shape, _ = _parse_header(path, _read_bytes(path, gzipped, limit=4 + 4 * 255))
        want = 3 if role.endswith("images") else 1
        if len(shape) != want or dtype != np.dtype(">u1"):
            raise DataFormatError(f"{path}: MNIST {role} must be a {want}-dimensional unsigned-byte IDX array, "
                                  f"got {len(shape)} dimensions of {dtype.name}.")
        shapes[role] = shape
    for part in ("train", "test"):
        images, labels = shapes[f"{part}-images"][0], shapes[f"{part}-labels"][0]
        if images != labels:
            raise DataFormatError(f"MNIST {part} files disagree: {found[f'{part}-images'].name} has {images} images, "
                                  f"{found[f'{part}-labels'].name} {labels} labels.")
    if shapes["train-images"][1:] != shapes["test-images"][1:]:
        raise DataFormatError(f"MNIST training images are {shapes['train-images'][1:]}, test images "
                              f"{shapes['test-images'][1:]}: they must have the same size.")
    return found
