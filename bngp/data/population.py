"""The population record: K individuals x |Q| binary attributes plus a reference panel.

arXiv:2410.07414, section 2.2: the population Z holds K individuals, each a binary vector
d_k in {0,1}^|Q| (d_kj = 1 if individual k carries the alternate allele at SNV j).  A
reference panel, disjoint from Z, gives the reference frequencies p_bar used by the LRT and
score attackers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from bngp.data.bits import BitMatrix
from bngp.errors import DataFormatError, InputError
from bngp.validation import check_binary_matrix, check_positive_int

__all__ = ["Population", "REFERENCE_FREQUENCY_FLOOR", "resolve_pool_sizes"]

#: Reference frequencies are kept inside [floor, 1 - floor] so log-likelihood statistics stay finite.
REFERENCE_FREQUENCY_FLOOR = 1e-3


def _default_ids(prefix: str, n: int) -> np.ndarray:
    return np.array([f"{prefix}{i}" for i in range(n)])


@dataclass(frozen=True, eq=False)
class Population:
    """Binary attribute vectors of the K individuals and of a disjoint reference panel.

    Both matrices are dense uint8 or both bit-packed (:class:`bngp.data.bits.BitMatrix`, for
    beacon-scale populations: the summary statistic and the analytic attacks read it a block
    of SNVs at a time; ``np.asarray`` unpacks it for code that needs it dense).

    Attributes:
        genotypes: (K, |Q|) uint8 0/1 matrix (or BitMatrix) of the individuals who may be members.
        reference: (R, |Q|) uint8 0/1 matrix (or BitMatrix) of the reference panel (never members).
        ids: (K,) individual identifiers.
        reference_ids: (R,) reference panel identifiers.
        attribute_names: (|Q|,) attribute (SNV) identifiers.
        metadata: provenance (source, model, seed, filters) recorded for reproducibility.
    """

    genotypes: np.ndarray
    reference: np.ndarray
    ids: np.ndarray | None = None
    reference_ids: np.ndarray | None = None
    attribute_names: np.ndarray | None = None
    metadata: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if isinstance(self.genotypes, BitMatrix) != isinstance(self.reference, BitMatrix):
            raise DataFormatError("`genotypes` and `reference` must both be bit-packed or both dense.")
        genotypes = self.genotypes if self.packed else check_binary_matrix("genotypes", self.genotypes)
        reference = self.reference if self.packed else check_binary_matrix("reference", self.reference)
        if reference.shape[1] != genotypes.shape[1]:
            raise DataFormatError(
                f"`reference` must have the same number of attributes as `genotypes` "
                f"({genotypes.shape[1]}), got {reference.shape[1]}."
            )
        object.__setattr__(self, "genotypes", genotypes)
        object.__setattr__(self, "reference", reference)
        for name, n, prefix in (
            ("ids", genotypes.shape[0], "ind"),
            ("reference_ids", reference.shape[0], "ref"),
            ("attribute_names", genotypes.shape[1], "snv"),
        ):
            value = getattr(self, name)
            value = _default_ids(prefix, n) if value is None else np.asarray(value).astype(str)
            if value.shape != (n,):
                raise DataFormatError(f"`{name}` must have shape ({n},), got {value.shape}.")
            object.__setattr__(self, name, value)
        if len(set(self.ids.tolist())) != len(self.ids):
            raise DataFormatError("`ids` must be unique.")
        object.__setattr__(self, "metadata", dict(self.metadata))

    @property
    def packed(self) -> bool:
        """True when the genotypes are stored as bits (:class:`bngp.data.bits.BitMatrix`)."""
        return isinstance(self.genotypes, BitMatrix)

    def to_packed(self) -> "Population":
        """This population with bit-packed genotypes and reference panel (itself if already packed)."""
        if self.packed:
            return self
        genotypes = BitMatrix.from_dense(self.genotypes, "genotypes")
        reference = BitMatrix.from_dense(self.reference, "reference")
        return Population(genotypes, reference, self.ids, self.reference_ids, self.attribute_names, self.metadata)

    def to_dense(self) -> "Population":
        """This population with dense uint8 matrices (itself if already dense)."""
        if not self.packed:
            return self
        return Population(self.genotypes.to_dense(), self.reference.to_dense(), self.ids, self.reference_ids,
                          self.attribute_names, self.metadata)

    @property
    def n_individuals(self) -> int:
        """K, the number of individuals who may be members."""
        return int(self.genotypes.shape[0])

    @property
    def n_attributes(self) -> int:
        """|Q|, the number of binary attributes (SNVs)."""
        return int(self.genotypes.shape[1])

    @property
    def n_reference(self) -> int:
        """Size of the reference panel."""
        return int(self.reference.shape[0])

    @property
    def reference_frequencies(self) -> np.ndarray:
        """p_bar_j: alternate-allele (carrier) frequency in the reference panel, kept in
        [floor, 1 - floor] with floor = :data:`REFERENCE_FREQUENCY_FLOOR`."""
        p_bar = self.reference.column_means() if self.packed else self.reference.mean(axis=0)
        return np.clip(p_bar, REFERENCE_FREQUENCY_FLOOR, 1 - REFERENCE_FREQUENCY_FLOOR)

    def index_of(self, ids: list[str] | np.ndarray) -> np.ndarray:
        """Return the row indices of the given individual ids (raise on unknown ids)."""
        lookup = {name: i for i, name in enumerate(self.ids.tolist())}
        missing = [name for name in ids if name not in lookup]
        if missing:
            raise DataFormatError(f"unknown individual id {missing[0]!r} (not in the population).")
        return np.array([lookup[name] for name in ids], dtype=np.int64)


def resolve_pool_sizes(
    individuals: int | None, reference: int | None, pool: int, defaults: tuple[int, int], what: str
) -> tuple[int, int]:
    """(K, R) drawn from a pool of ``pool`` people (rows, images): both ``None`` -> ``defaults``; one
    ``None`` -> the rest of the pool.  Raises :class:`InputError` on a non-positive size or K + R
    above the pool; ``what`` names the pool in the message (e.g. "rows of Adult split 'all'")."""
    if individuals is not None:
        check_positive_int("individuals", individuals)
    if reference is not None:
        check_positive_int("reference", reference)
    if individuals is None and reference is None:
        individuals, reference = defaults
    elif individuals is None:
        individuals = pool - reference
    elif reference is None:
        reference = pool - individuals
    if individuals < 1 or reference < 1 or individuals + reference > pool:
        raise InputError(f"`individuals` + `reference` must be at most the {pool} {what} (each at least 1), "
                         f"got {individuals} + {reference}.")
    return individuals, reference
