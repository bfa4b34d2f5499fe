"""The UCI Adult population (bngp.data.adult): binarisation checked by hand on raw rows, one-hot
groups, seeded disjoint draws, the shipped copy, and the .npz round trip."""

from __future__ import annotations

import builtins
import gzip
import io
import pathlib
from pathlib import Path

import numpy as np
import pytest

from bngp.data import adult
from bngp.data.adult import (
    ADULT_ROWS,
    NUMERIC_BINS,
    adult_attribute_names,
    adult_groups,
    binarise_adult,
    load_adult,
    parse_adult_line,
    read_adult,
)
from bngp.data.npz import load_population, save_population
from bngp.data.population import Population
from bngp.errors import DataFormatError, InputError

SHARED = Path("/work/shared/data/adult")

#: (row id, raw line copied from the UCI file, the columns that must be 1), checked by hand.
HAND_CHECKED = [
    ("adult.data:1",
     "39, State-gov, 77516, Bachelors, 13, Never-married, Adm-clerical, Not-in-family, White, Male, 2174, 0, 40, "
     "United-States, <=50K",
     ["age=33-40", "workclass=State-gov", "education=Bachelors", "marital-status=Never-married",
      "occupation=Adm-clerical", "relationship=Not-in-family", "race=White", "sex=Male", "capital-gain=1-7297",
      "capital-loss=0", "hours-per-week=40", "native-country=United-States", "income=<=50K"]),
    ("adult.data:28",  # missing workclass and occupation
     "54, ?, 180211, Some-college, 10, Married-civ-spouse, ?, Husband, Asian-Pac-Islander, Male, 0, 0, 60, South, >50K",
     ["age=>=51", "workclass=?", "education=Some-college", "marital-status=Married-civ-spouse", "occupation=?",
      "relationship=Husband", "race=Asian-Pac-Islander", "sex=Male", "capital-gain=0", "capital-loss=0",
      "hours-per-week=>=50", "native-country=South", "income=>50K"]),
    ("adult.data:2335",  # capital-loss exactly at its edge 1887, age at 51
     "51, Private, 191659, Some-college, 10, Married-civ-spouse, Exec-managerial, Husband, White, Male, 0, 1887, 65, "
     "United-States, >50K",
     ["age=>=51", "workclass=Private", "education=Some-college", "marital-status=Married-civ-spouse",
      "occupation=Exec-managerial", "relationship=Husband", "race=White", "sex=Male", "capital-gain=0",
      "capital-loss=>=1887", "hours-per-week=>=50", "native-country=United-States", "income=>50K"]),
    ("adult.test:2452",  # test file: trailing "." on the label; age 25 and 34 hours just below their edges
     "25, Private, 31657, Assoc-voc, 11, Separated, Other-service, Not-in-family, White, Female, 0, 0, 34, "
     "United-States, <=50K.",
     ["age=<=25", "workclass=Private", "education=Assoc-voc", "marital-status=Separated",
      "occupation=Other-service", "relationship=Not-in-family", "race=White", "sex=Female", "capital-gain=0",
      "capital-loss=0", "hours-per-week=<=34", "native-country=United-States", "income=<=50K"]),
]


def test_columns_and_groups():
    names = adult_attribute_names()
    assert names.shape == (120,) and names.dtype.kind == "U" and len(set(names.tolist())) == 120
    groups = adult_groups()
    assert list(groups) == ["age", "workclass", "education", "marital-status", "occupation", "relationship", "race",
                            "sex", "capital-gain", "capital-loss", "hours-per-week", "native-country", "income"]
    starts = [s.start for s in groups.values()]
    stops = [s.stop for s in groups.values()]
    assert starts[0] == 0 and stops[-1] == 120 and starts[1:] == stops[:-1]
    for attribute, columns in groups.items():
        assert all(name.startswith(attribute + "=") for name in names[columns])
    assert {a: s.stop - s.start for a, s in groups.items()}["native-country"] == 42


@pytest.mark.parametrize("row_id, line, expected", HAND_CHECKED, ids=[case[0] for case in HAND_CHECKED])
def test_hand_checked_rows(row_id, line, expected):
    names = adult_attribute_names()
    vector = binarise_adult([parse_adult_line(line)])[0]
    assert sorted(names[vector == 1].tolist()) == sorted(expected)
    ids, matrix, _ = read_adult("all")
    (row,) = np.flatnonzero(ids == row_id)
    assert np.array_equal(matrix[row], vector), "the shipped row differs from the line copied from the UCI file"


def test_numeric_bin_edges():
    """Each edge e puts e - 1 in one bin and e in the next, with the labels of NUMERIC_BINS."""
    names = adult_attribute_names()
    base = parse_adult_line(HAND_CHECKED[0][1])
    fields = {"age": 0, "capital-gain": 10, "capital-loss": 11, "hours-per-week": 12}
    for attribute, (edges, labels) in NUMERIC_BINS.items():
        assert len(labels) == len(edges) + 1
        values = [0] + [v for e in edges for v in (e - 1, e)] + [99999]
        rows = []
        for value in values:
            row = list(base)
            row[fields[attribute]] = str(value)
            rows.append(row)
        got = [next(n for n in names[v == 1] if n.startswith(attribute + "=")) for v in binarise_adult(rows)]
        expected = [labels[int(np.searchsorted(edges, v, side="right"))] for v in values]
        assert got == [f"{attribute}={label}" for label in expected]
    assert binarise_adult([base])[0][names.tolist().index("age=33-40")] == 1


def test_every_row_is_one_hot_per_attribute():
    ids, matrix, names = read_adult("all")
    assert matrix.shape == (ADULT_ROWS["all"], 120) and matrix.dtype == np.uint8
    assert len(set(ids.tolist())) == len(ids)
    for attribute, columns in adult_groups().items():
        assert np.all(matrix[:, columns].sum(axis=1) == 1), attribute
    # missing values are a level of their own: 2799 rows (train + test) lack workclass
    assert int(matrix[:, names.tolist().index("workclass=?")].sum()) == 2799


def test_bad_rows_are_refused():
    base = parse_adult_line(HAND_CHECKED[0][1])
    with pytest.raises(DataFormatError, match="workclass"):
        binarise_adult([[*base[:1], "Astronaut", *base[2:]]])
    with pytest.raises(DataFormatError, match="age"):
        binarise_adult([["thirty", *base[1:]]])
    with pytest.raises(DataFormatError, match="15"):
        parse_adult_line("39, State-gov, 77516")
    assert parse_adult_line("|1x3 Cross validator") is None and parse_adult_line("  ") is None


def test_seeded_draw_is_reproducible_and_disjoint():
    a = load_adult(200, 100, seed=3)
    b = load_adult(200, 100, seed=3)
    c = load_adult(200, 100, seed=4)
    assert isinstance(a, Population)
    assert a.genotypes.shape == (200, 120) and a.reference.shape == (100, 120)
    assert np.array_equal(a.ids, b.ids) and np.array_equal(a.genotypes, b.genotypes)
    assert np.array_equal(a.reference, b.reference)
    assert not np.array_equal(a.ids, c.ids)
    assert not set(a.ids.tolist()) & set(a.reference_ids.tolist())
    ids, matrix, names = read_adult("all")
    lookup = {name: i for i, name in enumerate(ids.tolist())}
    assert np.array_equal(a.genotypes, matrix[[lookup[i] for i in a.ids]])
    assert np.array_equal(a.reference, matrix[[lookup[i] for i in a.reference_ids]])
    assert np.array_equal(a.attribute_names, names)
    assert a.metadata["source"] == "uci-adult" and a.metadata["seed"] == 3 and "CC BY 4.0" in a.metadata["licence"]


def test_sizes_and_splits():
    everyone = load_adult(seed=0, split="test")
    assert everyone.n_individuals + everyone.n_reference == ADULT_ROWS["test"]
    assert everyone.n_reference == ADULT_ROWS["test"] // 2
    assert all(i.startswith("adult.test:") for i in everyone.ids)
    rest = load_adult(None, 10, seed=0, split="train")
    assert rest.n_individuals == ADULT_ROWS["train"] - 10
    with pytest.raises(InputError, match="48842"):
        load_adult(40_000, 9_000, seed=0)
    with pytest.raises(InputError, match="individuals"):
        load_adult(0, 10, seed=0)
    with pytest.raises(InputError, match="reference"):
        load_adult(10, -1, seed=0)
    with pytest.raises(InputError, match="split"):
        load_adult(10, 10, seed=0, split="validation")
    with pytest.raises(InputError):
        load_adult(ADULT_ROWS["all"], None, seed=0)  # no row left for the reference panel


def test_npz_round_trip_without_pickle(tmp_path):
    population = load_adult(30, 20, seed=1)
    path = save_population(population, tmp_path / "adult.npz")
    with np.load(path, allow_pickle=False) as archive:
        assert archive["attribute_names"].dtype.kind == "U"
        assert archive["ids"].dtype.kind == "U"
    back = load_population(path)
    assert np.array_equal(back.genotypes, population.genotypes)
    assert np.array_equal(back.attribute_names, population.attribute_names)
    assert back.metadata["source"] == "uci-adult" and back.metadata["split"] == "all"


def test_the_shipped_copy_is_used(monkeypatch):
    """Every way of opening a file fails for /work/shared; the loader still reads all rows."""

    def guard(opener):
        def guarded(file, *args, **kwargs):
            if "/work/shared" in str(file):
                raise AssertionError(f"bngp.data.adult opened {file}")
            return opener(file, *args, **kwargs)
        return guarded

    monkeypatch.setattr(builtins, "open", guard(builtins.open))
    monkeypatch.setattr(io, "open", guard(io.open))
    monkeypatch.setattr(gzip, "open", guard(gzip.open))
    for method in ("open", "read_bytes", "read_text"):
        original = getattr(pathlib.Path, method)
        monkeypatch.setattr(pathlib.Path, method, lambda self, *a, _o=original, **k: guard(_o)(self, *a, **k))
    with pytest.raises(AssertionError):  # the guard is in place
        Path("/work/shared/data/adult/adult.data").read_bytes()
    adult._read_split.cache_clear()
    try:
        ids, matrix, _ = read_adult("all")
    finally:
        adult._read_split.cache_clear()
    assert matrix.shape == (ADULT_ROWS["all"], 120)
    assert "/work/shared" not in Path(adult.__file__).read_text()
    folder = Path(adult.__file__).parent / "adult_files"
    assert {p.name for p in folder.iterdir()} >= {"adult.data.gz", "adult.test.gz", "adult.names", "NOTICE"}
    notice = (folder / "NOTICE").read_text()
    assert "Becker" in notice and "Kohavi" in notice and "CC BY 4.0" in notice


@pytest.mark.skipif(not SHARED.is_dir(), reason="the UCI originals are not on this machine")
def test_shipped_files_are_the_uci_files():
    folder = Path(adult.__file__).parent / "adult_files"
    for name in ("adult.data", "adult.test"):
        assert gzip.decompress((folder / f"{name}.gz").read_bytes()) == (SHARED / name).read_bytes()
    assert (folder / "adult.names").read_bytes() == (SHARED / "adult.names").read_bytes()
