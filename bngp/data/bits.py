"""Bit-packed binary matrices: genotypes at beacon scale in one eighth of a uint8 array.

A population of K individuals over |Q| SNVs is a K x |Q| 0/1 matrix (arXiv:2410.07414,
section 2.2).  A real beacon holds |Q| ~ 10^6 SNVs and K ~ 2,500 individuals: 2.5 GB as uint8,
10 GB as float32, but 312 MB as bits.  :class:`BitMatrix` keeps the matrix packed (eight
columns per byte, ``np.packbits`` order along each row) and hands out dense uint8 *column
blocks* on demand, so everything that only needs the matrix a block of SNVs at a time - the
summary statistic f(D) = b Z / |b| (:class:`bngp.release.mechanism.SummaryStatistics`), the
affine membership statistics of the analytic attacks (LRT, score, Homer, reconstruction:
:func:`bngp.attacks.statistics.affine_statistic`) and the reference frequencies - runs in
memory bounded by one block beyond the packed matrix.

:class:`BitRowsBuilder` assembles a BitMatrix from SNV-major chunks (the order in which the
genome sources, msprime and VCF readers, produce sites), packing as it goes, so a simulation
or a VCF read never holds the dense matrix.

``np.asarray(bit_matrix)`` unpacks the whole matrix (uint8), so code written for dense
genotypes works unchanged on small packed populations.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from bngp.errors import DataFormatError, InputError
from bngp.validation import check_binary_matrix

__all__ = ["BitMatrix", "BitRowsBuilder", "COLUMN_BLOCK"]

#: columns unpacked at once by the block helpers (a multiple of 8: byte-aligned slices).
COLUMN_BLOCK = 8192
#: rows packed at once by :meth:`BitMatrix.from_dense` (bounds its temporary arrays).
_ROW_BLOCK = 1024


@dataclass(frozen=True, eq=False)
class BitMatrix:
    """A rows x ``n_columns`` 0/1 matrix stored as bits.

    Attributes:
        packed: (rows, ceil(n_columns / 8)) uint8, row r's bits as ``np.packbits(row)``
            (big-endian within a byte, padding bits zero).  May be a read-only memory map.
        n_columns: the number of logical columns.
    """

    packed: np.ndarray
    n_columns: int

    def __post_init__(self) -> None:
        packed = self.packed
        if not isinstance(packed, np.ndarray) or packed.dtype != np.uint8 or packed.ndim != 2:
            raise DataFormatError("`packed` must be a 2-D uint8 array of np.packbits rows.")
        n_columns = int(self.n_columns)
        if n_columns < 1 or packed.shape[1] != (n_columns + 7) // 8 or packed.shape[0] < 1:
            raise DataFormatError(
                f"`packed` of shape {packed.shape} does not hold at least one row of {n_columns} columns "
                f"({(n_columns + 7) // 8} bytes per row)."
            )
        object.__setattr__(self, "n_columns", n_columns)

    # -- construction ----------------------------------------------------------------------
    @classmethod
    def from_dense(cls, matrix: np.ndarray, name: str = "matrix") -> "BitMatrix":
        """Pack a dense 0/1 matrix (validated: binary, 2-D, non-empty), in blocks of rows."""
        array = np.asarray(matrix)
        if array.ndim != 2 or array.shape[0] == 0 or array.shape[1] == 0:
            raise DataFormatError(f"`{name}` must be a non-empty 2-D 0/1 matrix, got shape {array.shape}.")
        packed = np.empty((array.shape[0], (array.shape[1] + 7) // 8), dtype=np.uint8)
        for start in range(0, array.shape[0], _ROW_BLOCK):
            block = check_binary_matrix(name, array[start : start + _ROW_BLOCK])
            packed[start : start + _ROW_BLOCK] = np.packbits(block, axis=1)
        return cls(packed, array.shape[1])

    # -- shape -----------------------------------------------------------------------------
    @property
    def shape(self) -> tuple[int, int]:
        """(rows, columns), as for the dense matrix."""
        return int(self.packed.shape[0]), self.n_columns

    @property
    def ndim(self) -> int:
        """Always 2."""
        return 2

    @property
    def dtype(self) -> np.dtype:
        """The dtype of the dense blocks handed out (uint8)."""
        return np.dtype(np.uint8)

    @property
    def nbytes(self) -> int:
        """Bytes of the packed storage."""
        return int(self.packed.nbytes)

    def __len__(self) -> int:
        return int(self.packed.shape[0])

    # -- dense views -----------------------------------------------------------------------
    def columns(self, start: int, stop: int) -> np.ndarray:
        """Dense uint8 block of columns [start, stop) of every row, shape (rows, stop - start)."""
        start, stop = int(start), int(min(stop, self.n_columns))
        if not 0 <= start < stop:
            raise InputError(f"column range [{start}, {stop}) is empty or outside 0..{self.n_columns}.")
        first, last = start // 8, (stop + 7) // 8
        bits = np.unpackbits(self.packed[:, first:last], axis=1)
        offset = start - 8 * first
        return bits[:, offset : offset + stop - start]

    def blocks(self, size: int = COLUMN_BLOCK):
        """Yield (start, stop, dense uint8 block) over the columns, ``size`` (a multiple of 8) at a time."""
        size = max(8, int(size) // 8 * 8)
        for start in range(0, self.n_columns, size):
            stop = min(start + size, self.n_columns)
            yield start, stop, self.columns(start, stop)

    def to_dense(self) -> np.ndarray:
        """The whole matrix as uint8 (rows x columns): 8x the packed size."""
        return np.unpackbits(self.packed, axis=1, count=self.n_columns)

    def __array__(self, dtype: np.dtype | None = None, copy: bool | None = None) -> np.ndarray:
        dense = self.to_dense()
        return dense if dtype is None else dense.astype(dtype, copy=False)

    # -- selections and reductions ---------------------------------------------------------
    def take_rows(self, index: np.ndarray | slice) -> "BitMatrix":
        """The rows ``index`` (integer array, boolean mask or slice), still packed."""
        rows = self.packed[index]
        if rows.ndim != 2 or rows.shape[0] == 0:
            raise InputError("row selection of a BitMatrix must keep at least one row.")
        return BitMatrix(np.ascontiguousarray(rows), self.n_columns)

    def take_columns(self, index: np.ndarray) -> "BitMatrix":
        """The columns ``index`` (increasing integer array), repacked block by block of the source."""
        index = np.asarray(index, dtype=np.int64)
        if index.ndim != 1 or index.size == 0 or index.min() < 0 or index.max() >= self.n_columns:
            raise InputError(f"column selection must be a non-empty 1-D array of indices below {self.n_columns}.")
        if np.any(np.diff(index) <= 0):
            raise InputError("column selection must be strictly increasing.")
        builder = BitRowsBuilder(len(self))
        for start, stop, block in self.blocks():
            lo, hi = np.searchsorted(index, [start, stop])
            if hi > lo:
                builder.add(block[:, index[lo:hi] - start].T)
        return builder.finish()

    def column_sums(self) -> np.ndarray:
        """Number of ones in each column, (columns,) int64, one block at a time."""
        sums = np.empty(self.n_columns, dtype=np.int64)
        for start, stop, block in self.blocks():
            sums[start:stop] = block.sum(axis=0, dtype=np.int64)
        return sums

    def column_means(self) -> np.ndarray:
        """Fraction of ones in each column, (columns,) float64."""
        return self.column_sums() / len(self)


class BitRowsBuilder:
    """Assemble an (individuals x SNVs) :class:`BitMatrix` from SNV-major 0/1 chunks.

    Chunks of shape (m SNVs, N individuals) are appended in genomic order; whole groups of 8
    SNVs are packed as soon as they are complete (``np.packbits`` along the SNV axis gives, for
    every individual, the byte of those 8 columns), so the dense chunks are never kept.
    Peak memory: the packed result plus one chunk.
    """

    def __init__(self, n_rows: int) -> None:
        self.n_rows = int(n_rows)
        self._pieces: list[np.ndarray] = []  # (bytes, N) packed groups of 8 SNVs
        self._pending = np.zeros((0, self.n_rows), dtype=np.uint8)
        self.n_columns = 0

    def add(self, chunk: np.ndarray) -> None:
        """Append (m, N) 0/1 SNV rows (m may be 0)."""
        chunk = np.asarray(chunk, dtype=np.uint8)
        if chunk.ndim != 2 or chunk.shape[1] != self.n_rows:
            raise DataFormatError(f"SNV chunk must have shape (m, {self.n_rows}), got {chunk.shape}.")
        if chunk.shape[0] == 0:
            return
        self.n_columns += chunk.shape[0]
        if self._pending.shape[0]:
            chunk = np.concatenate([self._pending, chunk])
        whole = chunk.shape[0] // 8 * 8
        if whole:
            self._pieces.append(np.packbits(chunk[:whole], axis=0))
        self._pending = chunk[whole:].copy()

    def finish(self) -> BitMatrix:
        """The (N, total SNVs) BitMatrix of everything added (at least one column)."""
        if self.n_columns == 0:
            raise DataFormatError("no SNV was added to the matrix.")
        if self._pending.shape[0]:
            self._pieces.append(np.packbits(self._pending, axis=0))
            self._pending = self._pending[:0]
        snv_major = np.concatenate(self._pieces)
        self._pieces = [snv_major]  # the chunks are freed; a second finish() gives the same matrix
        return BitMatrix(np.ascontiguousarray(snv_major.T), self.n_columns)
