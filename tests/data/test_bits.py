"""Tests of the bit-packed matrix (bngp.data.bits): every operation against the dense matrix
it stands for (known answer: numpy's own slicing, sums and packbits of the dense array)."""

from __future__ import annotations

import numpy as np
import pytest

from bngp.data.bits import BitMatrix, BitRowsBuilder
from bngp.errors import DataFormatError, InputError


@pytest.fixture(scope="module")
def dense() -> np.ndarray:
    # 37 rows x 1,003 columns: neither a multiple of 8 (padding bits) nor of the block size.
    return (np.random.default_rng(0).random((37, 1003)) < 0.3).astype(np.uint8)


def test_round_trip_and_shape(dense):
    bits = BitMatrix.from_dense(dense)
    assert bits.shape == dense.shape and len(bits) == 37 and bits.ndim == 2
    assert bits.nbytes == 37 * 126  # ceil(1003 / 8) bytes per row
    assert np.array_equal(bits.to_dense(), dense)
    assert np.array_equal(np.asarray(bits), dense)  # __array__: dense code works on packed data
    assert np.asarray(bits, dtype=np.float32).dtype == np.float32
    assert np.array_equal(bits.packed, np.packbits(dense, axis=1))


@pytest.mark.parametrize("start,stop", [(0, 1003), (0, 8), (3, 11), (5, 6), (1000, 1003), (17, 999), (992, 2000)])
def test_columns_equal_dense_slices(dense, start, stop):
    assert np.array_equal(BitMatrix.from_dense(dense).columns(start, stop), dense[:, start:stop])


def test_blocks_cover_every_column_once(dense):
    bits = BitMatrix.from_dense(dense)
    pieces = list(bits.blocks(100))  # rounded down to 96 (byte-aligned)
    assert [stop - start for start, stop, _ in pieces[:-1]] == [96] * (len(pieces) - 1)
    assert np.array_equal(np.concatenate([block for _, _, block in pieces], axis=1), dense)


def test_selections_and_sums(dense):
    bits = BitMatrix.from_dense(dense)
    rows = np.array([0, 5, 36])
    assert np.array_equal(bits.take_rows(rows).to_dense(), dense[rows])
    assert np.array_equal(bits.take_rows(slice(10, 20)).to_dense(), dense[10:20])
    mask = np.arange(37) % 3 == 0
    assert np.array_equal(bits.take_rows(mask).to_dense(), dense[mask])
    columns = np.array([0, 1, 7, 8, 500, 1002])
    assert np.array_equal(bits.take_columns(columns).to_dense(), dense[:, columns])
    assert np.array_equal(bits.column_sums(), dense.sum(axis=0))
    assert np.allclose(bits.column_means(), dense.mean(axis=0), rtol=0, atol=1e-15)


@pytest.mark.parametrize("sizes", [[1003], [1, 2, 3, 997], [8, 8, 987], [0, 500, 0, 503], [7] * 143 + [2]])
def test_builder_packs_snv_major_chunks(dense, sizes):
    builder = BitRowsBuilder(37)
    start = 0
    for size in sizes:
        builder.add(dense[:, start:start + size].T)  # SNV-major chunks, as the genome sources produce them
        start += size
    result = builder.finish()
    assert builder.n_columns == 1003 and np.array_equal(result.to_dense(), dense)
    assert np.array_equal(builder.finish().packed, result.packed)  # finishing twice gives the same matrix


def test_bad_input_is_typed(dense):
    with pytest.raises(DataFormatError, match="binary"):
        BitMatrix.from_dense(np.full((2, 3), 2))
    with pytest.raises(DataFormatError, match="non-empty"):
        BitMatrix.from_dense(np.zeros((0, 3)))
    with pytest.raises(DataFormatError, match="bytes per row"):
        BitMatrix(np.zeros((2, 3), dtype=np.uint8), 30)
    with pytest.raises(DataFormatError, match="uint8"):
        BitMatrix(np.zeros((2, 3), dtype=np.int64), 20)
    bits = BitMatrix.from_dense(dense)
    with pytest.raises(InputError, match="column range"):
        bits.columns(5, 5)
    with pytest.raises(InputError, match="increasing"):
        bits.take_columns(np.array([3, 2]))
    with pytest.raises(InputError, match="at least one row"):
        bits.take_rows(np.zeros(37, dtype=bool))
    with pytest.raises(DataFormatError, match="shape"):
        BitRowsBuilder(4).add(np.zeros((3, 5)))
    with pytest.raises(DataFormatError, match="no SNV"):
        BitRowsBuilder(4).finish()
