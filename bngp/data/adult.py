"""The UCI Adult (Census Income) table as a population of binary attribute vectors.

arXiv:2410.07414 (Zhang et al., BNGP), appendix L.5: the Adult attributes are turned into binary
values, categorical attributes one-hot encoded and continuous ones discretised into intervals;
the mechanism releases the proportion of members holding each binary attribute, exactly as the
allele-frequency release for genomes.  The paper does not list its intervals, so the bins below
are this module's choice, fixed in the code (:data:`NUMERIC_BINS`), so that a population file
means the same thing on every machine:

==================  =====================================================================
attribute           binary columns (``attribute=value``)
==================  =====================================================================
age                 5 quintile bins of the 48,842 rows: <=25, 26-32, 33-40, 41-50, >=51
workclass           8 levels of adult.names + ``?`` (missing)                         = 9
education           16 levels                                                         = 16
marital-status      7 levels                                                          = 7
occupation          14 levels + ``?`` (missing)                                        = 15
relationship        6 levels                                                          = 6
race                5 levels                                                          = 5
sex                 Female, Male                                                      = 2
capital-gain        0, 1-7297, >=7298 (7298: median of the positive values)           = 3
capital-loss        0, 1-1886, >=1887 (1887: median of the positive values)           = 3
hours-per-week      <=34, 35-39, 40, 41-49, >=50                                      = 5
native-country      41 levels + ``?`` (missing)                                        = 42
income              <=50K, >50K (the test file's trailing "." removed)                 = 2
==================  =====================================================================

120 columns in all; every row has exactly one 1 in each attribute's group.

* Quintile bins need distinct quantiles: age's quintiles (26, 33, 41, 51) are used as they are.
  Hours-per-week has 47% of its rows at exactly 40, so its quintiles (35, 40, 40, 48) collapse;
  40 is kept as a bin of its own and the upper edge rounded to 50 (``<=34`` is 17% of the rows,
  ``>=50`` 20%).  Capital gain and loss are 0 for 92% and 95% of the rows; the positive values
  are split at their median, so both non-zero bins hold about half of them.
* Missing values (``?`` in workclass, occupation and native-country, 7% of the rows) are kept
  as a level of their own (``workclass=?``...): no row is dropped, and "not stated" is an
  attribute a member holds like any other.
* Dropped: ``fnlwgt``, the Census Bureau's sampling weight (a property of the survey design,
  not of the person, adult.names), and ``education-num``, a one-to-one recoding of
  ``education`` (it would only duplicate 16 columns).

The rows are read from a copy shipped inside the package (``bngp/data/adult_files``: the UCI
files adult.data and adult.test, gzip-compressed and otherwise unchanged, with their NOTICE);
their SHA-256 is checked on every load.  Source: Barry Becker and Ronny Kohavi, "Adult", UCI
Machine Learning Repository, 1996, https://doi.org/10.24432/C5XW20, licence CC BY 4.0.
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import zlib
from importlib import resources

import numpy as np

from bngp.data.population import Population, resolve_pool_sizes
from bngp.errors import DataFormatError, InputError
from bngp.rng import SeedLike, resolve_rng

__all__ = [
    "ADULT_SPLITS",
    "ADULT_ROWS",
    "ADULT_ATTRIBUTES",
    "CATEGORIES",
    "NUMERIC_BINS",
    "adult_attribute_names",
    "adult_groups",
    "parse_adult_line",
    "binarise_adult",
    "read_adult",
    "load_adult",
]

#: ``split`` -> the shipped files it reads: ``train`` = adult.data, ``test`` = adult.test.
ADULT_SPLITS: dict[str, tuple[str, ...]] = {"all": ("train", "test"), "train": ("train",), "test": ("test",)}

#: rows of each split (checked when the files are read).
ADULT_ROWS: dict[str, int] = {"train": 32_561, "test": 16_281, "all": 48_842}

#: the 15 fields of a raw row, in the order of the UCI files.
RAW_FIELDS = (
    "age", "workclass", "fnlwgt", "education", "education-num", "marital-status", "occupation",
    "relationship", "race", "sex", "capital-gain", "capital-loss", "hours-per-week", "native-country", "income",
)

#: raw fields that are not turned into columns (see the module docstring).
DROPPED_FIELDS = ("fnlwgt", "education-num")

#: categorical attribute -> its levels, in the order of adult.names (``?``: missing, its own level).
CATEGORIES: dict[str, tuple[str, ...]] = {
    "workclass": ("Private", "Self-emp-not-inc", "Self-emp-inc", "Federal-gov", "Local-gov", "State-gov",
                  "Without-pay", "Never-worked", "?"),
    "education": ("Bachelors", "Some-college", "11th", "HS-grad", "Prof-school", "Assoc-acdm", "Assoc-voc", "9th",
                  "7th-8th", "12th", "Masters", "1st-4th", "10th", "Doctorate", "5th-6th", "Preschool"),
    "marital-status": ("Married-civ-spouse", "Divorced", "Never-married", "Separated", "Widowed",
                       "Married-spouse-absent", "Married-AF-spouse"),
    "occupation": ("Tech-support", "Craft-repair", "Other-service", "Sales", "Exec-managerial", "Prof-specialty",
                   "Handlers-cleaners", "Machine-op-inspct", "Adm-clerical", "Farming-fishing", "Transport-moving",
                   "Priv-house-serv", "Protective-serv", "Armed-Forces", "?"),
    "relationship": ("Wife", "Own-child", "Husband", "Not-in-family", "Other-relative", "Unmarried"),
    "race": ("White", "Asian-Pac-Islander", "Amer-Indian-Eskimo", "Other", "Black"),
    "sex": ("Female", "Male"),
    "native-country": ("United-States", "Cambodia", "England", "Puerto-Rico", "Canada", "Germany",
                       "Outlying-US(Guam-USVI-etc)", "India", "Japan", "Greece", "South", "China", "Cuba", "Iran",
                       "Honduras", "Philippines", "Italy", "Poland", "Jamaica", "Vietnam", "Mexico", "Portugal",
                       "Ireland", "France", "Dominican-Republic", "Laos", "Ecuador", "Taiwan", "Haiti", "Columbia",
                       "Hungary", "Guatemala", "Nicaragua", "Scotland", "Thailand", "Yugoslavia", "El-Salvador",
                       "Trinadad&Tobago", "Peru", "Hong", "Holand-Netherlands", "?"),
    "income": ("<=50K", ">50K"),
}

#: numeric attribute -> (edges, labels): value v falls in bin i with edges[i-1] <= v < edges[i]
#: (the first bin has no lower edge, the last no upper edge).
NUMERIC_BINS: dict[str, tuple[tuple[int, ...], tuple[str, ...]]] = {
    "age": ((26, 33, 41, 51), ("<=25", "26-32", "33-40", "41-50", ">=51")),
    "capital-gain": ((1, 7298), ("0", "1-7297", ">=7298")),
    "capital-loss": ((1, 1887), ("0", "1-1886", ">=1887")),
    "hours-per-week": ((35, 40, 41, 50), ("<=34", "35-39", "40", "41-49", ">=50")),
}

#: the attributes that become columns, in column order (the raw order, less the dropped ones).
ADULT_ATTRIBUTES = tuple(name for name in RAW_FIELDS if name not in DROPPED_FIELDS)

#: version of the binarisation above, recorded in the population metadata.
BINARISATION = "adult-binary-v1"

_FILES = {
    "train": ("adult.data.gz", "adult.data", "5b00264637dbfec36bdeaab5676b0b309ff9eb788d63554ca0a249491c86603d"),
    "test": ("adult.test.gz", "adult.test", "a2a9044bc167a35b2361efbabec64e89d69ce82d9790d2980119aac5fd7e9c05"),
}
_DATA_FOLDER = "adult_files"
_CITATION = ("Barry Becker and Ronny Kohavi, Adult, UCI Machine Learning Repository, 1996, "
             "https://doi.org/10.24432/C5XW20")
_LICENCE = "CC BY 4.0 (https://creativecommons.org/licenses/by/4.0/)"


def _levels(attribute: str) -> tuple[str, ...]:
    return NUMERIC_BINS[attribute][1] if attribute in NUMERIC_BINS else CATEGORIES[attribute]


def adult_groups() -> dict[str, slice]:
    """Attribute -> the slice of its one-hot columns (in column order; the slices tile 0..120)."""
    groups, start = {}, 0
    for attribute in ADULT_ATTRIBUTES:
        width = len(_levels(attribute))
        groups[attribute] = slice(start, start + width)
        start += width
    return groups


def adult_attribute_names() -> np.ndarray:
    """The 120 column names ``attribute=value`` as a fixed-width unicode array (saved in a
    population ``.npz`` and read back with ``allow_pickle=False``).

    >>> names = adult_attribute_names()
    >>> len(names), str(names[0]), str(names[5]), str(names[-1])
    (120, 'age=<=25', 'workclass=Private', 'income=>50K')
    """
    return np.array([f"{attribute}={level}" for attribute in ADULT_ATTRIBUTES for level in _levels(attribute)])


def parse_adult_line(line: str) -> list[str] | None:
    """The 15 fields of one line of adult.data / adult.test, stripped; ``None`` for a blank line
    or the ``|1x3 Cross validator`` header of adult.test.  The test file's income labels
    (``<=50K.``) lose their trailing period.  Raises :class:`DataFormatError` on a line that does
    not have 15 fields."""
    text = line.strip()
    if not text or text.startswith("|"):
        return None
    fields = [field.strip() for field in text.split(",")]
    if len(fields) != len(RAW_FIELDS):
        raise DataFormatError(f"an Adult row must have {len(RAW_FIELDS)} comma-separated fields, got {len(fields)}: "
                              f"{text[:60]!r}")
    fields[-1] = fields[-1].rstrip(".")
    return fields


def binarise_adult(rows: list[list[str]] | list[tuple[str, ...]]) -> np.ndarray:
    """Binary attribute vectors (n x 120, uint8) of parsed raw rows (15 fields each, as
    :func:`parse_adult_line` returns them), with the columns of :func:`adult_attribute_names`.

    Raises :class:`DataFormatError` on an unknown categorical level or a numeric field that is
    not a non-negative integer."""
    n = len(rows)
    groups = adult_groups()
    matrix = np.zeros((n, sum(len(_levels(a)) for a in ADULT_ATTRIBUTES)), dtype=np.uint8)
    if n == 0:
        return matrix
    if any(len(row) != len(RAW_FIELDS) for row in rows):
        raise DataFormatError(f"each Adult row must have {len(RAW_FIELDS)} fields.")
    everyone = np.arange(n)
    for attribute in ADULT_ATTRIBUTES:
        field = RAW_FIELDS.index(attribute)
        values = [row[field] for row in rows]
        if attribute in NUMERIC_BINS:
            try:
                numbers = np.array([int(value) for value in values], dtype=np.int64)
            except ValueError:
                bad = next(v for v in values if not v.lstrip("-").isdigit())
                raise DataFormatError(f"Adult `{attribute}` must be an integer, got {bad!r}.") from None
            if numbers.min() < 0:
                raise DataFormatError(f"Adult `{attribute}` must be >= 0, got {numbers.min()}.")
            codes = np.searchsorted(np.asarray(NUMERIC_BINS[attribute][0]), numbers, side="right")
        else:
            lookup = {level: i for i, level in enumerate(CATEGORIES[attribute])}
            unknown = next((v for v in values if v not in lookup), None)
            if unknown is not None:
                raise DataFormatError(f"Adult `{attribute}` has the unknown value {unknown!r}.")
            codes = np.fromiter((lookup[v] for v in values), dtype=np.int64, count=n)
        matrix[everyone, groups[attribute].start + codes] = 1
    return matrix


def _read_shipped(part: str) -> tuple[list[str], list[list[str]]]:
    """Row ids (``adult.data:1``: the file and the 1-based data row) and parsed rows of a shipped file."""
    gz_name, raw_name, sha256 = _FILES[part]
    resource = resources.files("bngp.data").joinpath(_DATA_FOLDER, gz_name)
    try:
        content = gzip.decompress(resource.read_bytes())
    except (OSError, EOFError, zlib.error) as exc:
        raise DataFormatError(f"the shipped Adult file {gz_name} cannot be read ({type(exc).__name__}); "
                              "reinstall bngp.") from None
    if hashlib.sha256(content).hexdigest() != sha256:
        raise DataFormatError(f"the shipped Adult file {gz_name} is not the UCI {raw_name} (SHA-256 differs); "
                              "reinstall bngp.")
    rows = [fields for fields in map(parse_adult_line, content.decode("ascii").splitlines()) if fields is not None]
    if len(rows) != ADULT_ROWS[part]:
        raise DataFormatError(f"the shipped Adult file {gz_name} has {len(rows)} rows, expected {ADULT_ROWS[part]}.")
    return [f"{raw_name}:{i + 1}" for i in range(len(rows))], rows


@functools.lru_cache(maxsize=4)
def _read_split(split: str) -> tuple[np.ndarray, np.ndarray]:
    ids: list[str] = []
    rows: list[list[str]] = []
    for part in ADULT_SPLITS[split]:
        part_ids, part_rows = _read_shipped(part)
        ids += part_ids
        rows += part_rows
    matrix = binarise_adult(rows)
    id_array = np.array(ids)
    matrix.flags.writeable = False
    id_array.flags.writeable = False
    return id_array, matrix


def _check_split(split: str) -> str:
    if split not in ADULT_SPLITS:
        raise InputError(f"`split` must be one of {', '.join(ADULT_SPLITS)}, got {split!r}.")
    return split


def read_adult(split: str = "all") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every row of ``split`` (``all`` = adult.data then adult.test; ``train``; ``test``),
    binarised: ``(ids, matrix, attribute_names)`` with ``matrix`` n x 120 uint8 and ids
    ``adult.data:1``... (file and 1-based data row).  Read-only arrays, cached per split."""
    ids, matrix = _read_split(_check_split(split))
    return ids, matrix, adult_attribute_names()


def load_adult(
    individuals: int | None = None,
    reference: int | None = None,
    *,
    seed: SeedLike = None,
    split: str = "all",
) -> Population:
    """The Adult rows of ``split`` drawn at random into K individuals who may be members and a
    disjoint reference panel of R rows (each row, a person, is in at most one of them).

    Args:
        individuals: K.  ``None``: every row of the split not drawn for the reference panel.
        reference: R.  ``None``: every row not drawn as an individual.  Both ``None``: R is half
            of the rows (rounded down) and K the rest.
        seed: int seed (recorded in the metadata), ``None`` (a fresh seed, recorded) or a
            Generator.  The K + R rows are a uniform draw without replacement, the first K of
            the draw are the individuals; each group is then put in file order.
        split: ``all`` (48,842 rows: adult.data then adult.test), ``train`` (adult.data, 32,561)
            or ``test`` (adult.test, 16,281).

    Returns:
        A :class:`Population` (the type the genome path produces) with the 120 binary columns of
        the module docstring as ``attribute_names``, ids ``adult.data:ROW`` / ``adult.test:ROW``,
        and metadata recording the source, licence, split, seed and binarisation.

    Raises:
        InputError: a non-positive size, K + R above the split's rows, or an unknown split.

    Identical binary vectors occur (different people can share every binned attribute); the
    individuals and the reference panel are disjoint as people (rows), not necessarily as vectors.
    """
    split = _check_split(split)
    available = ADULT_ROWS[split]
    individuals, reference = resolve_pool_sizes(individuals, reference, available,
                                                (available - available // 2, available // 2),
                                                f"rows of Adult split {split!r}")
    rng, recorded_seed = resolve_rng(seed)
    ids, matrix, names = read_adult(split)
    drawn = rng.choice(available, size=individuals + reference, replace=False)
    members_rows, reference_rows = np.sort(drawn[:individuals]), np.sort(drawn[individuals:])
    return Population(
        genotypes=matrix[members_rows],
        reference=matrix[reference_rows],
        ids=ids[members_rows],
        reference_ids=ids[reference_rows],
        attribute_names=names,
        metadata={
            "source": "uci-adult",
            "split": split,
            "rows_available": available,
            "seed": recorded_seed,
            "binarisation": BINARISATION,
            "numeric_bins": {name: list(labels) for name, (_, labels) in NUMERIC_BINS.items()},
            "missing_values": "'?' kept as its own one-hot level",
            "dropped_fields": list(DROPPED_FIELDS),
            "citation": _CITATION,
            "licence": _LICENCE,
        },
    )
