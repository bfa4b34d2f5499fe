"""bngp.validation: 0/1 matrices checked without a float copy, and file arguments that are folders."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

from bngp.errors import DataFormatError, InputError, MissingFileError
from bngp.validation import check_binary_matrix, check_readable_file

SHAPE = (2000, 10_000)  # 20 M elements: a float64 copy would be 160 MB


def _peak_bytes_per_element(array: np.ndarray) -> tuple[np.ndarray, float]:
    tracemalloc.start()
    try:
        checked = check_binary_matrix("genotypes", array)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return checked, peak / array.size


def test_a_uint8_matrix_is_checked_in_place_without_a_copy():
    array = np.random.default_rng(0).integers(0, 2, SHAPE, dtype=np.uint8)
    checked, per_element = _peak_bytes_per_element(array)
    assert checked is array
    assert per_element < 0.25  # the row blocks' temporaries only


@pytest.mark.parametrize("dtype", [bool, np.int8, np.int64, np.float32, np.float64])
def test_other_dtypes_become_uint8_without_widening(dtype):
    array = (np.random.default_rng(0).random(SHAPE) < 0.3).astype(dtype)
    checked, per_element = _peak_bytes_per_element(array)
    assert checked.dtype == np.uint8 and np.array_equal(checked, array)
    assert per_element < 1.5  # the uint8 result (1 byte) and the row blocks' temporaries, never 8 bytes


@pytest.mark.parametrize(
    "array, message",
    [
        (np.array([[0, 1], [2, 0]], dtype=np.uint8), r"must be binary \(0/1\), found value 2\."),
        (np.array([[0, -1]], dtype=np.int64), r"must be binary \(0/1\), found value -1\."),
        (np.array([[0.0, 0.5]]), r"must be binary \(0/1\), found value 0\.5\."),
        (np.array([[0.0, np.nan]]), "contains NaN or infinite values"),
        (np.array([[np.inf, 1.0]], dtype=np.float32), "contains NaN or infinite values"),
        (np.array([["0", "1"]]), "must be a numeric 0/1 matrix, got dtype <U1"),
        (np.array([[0, 1j]]), "must be a numeric 0/1 matrix"),
        (np.zeros((2, 0), dtype=np.uint8), "must not be empty"),
        (np.zeros(3, dtype=np.uint8), "must be a 2-D array"),
    ],
)
def test_a_matrix_that_is_not_0_1_is_one_typed_line(array, message):
    with pytest.raises(DataFormatError, match=f"^`genotypes` {message}") as raised:
        check_binary_matrix("genotypes", array)
    assert "\n" not in str(raised.value)


def test_a_bad_value_in_a_later_row_block_is_found():
    array = np.zeros((5000, 1000), dtype=np.int16)
    array[-1, -1] = 3
    with pytest.raises(DataFormatError, match="found value 3"):
        check_binary_matrix("genotypes", array)


def test_a_folder_given_for_a_file_is_named_as_a_folder(tmp_path):
    with pytest.raises(InputError, match=f"^`population` is a directory, not a file: {tmp_path}$"):
        check_readable_file("population", tmp_path)
    with pytest.raises(MissingFileError, match="`population` file not found"):
        check_readable_file("population", tmp_path / "missing.npz")
