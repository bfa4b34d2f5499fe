"""SNV filters shared by the genome sources: carrier status, MAF filter, LD thinning, selection.

arXiv:2410.07414, section 2.2 describes an individual as a binary vector d_k in {0,1}^|Q|
with d_kj = 1 if individual k carries at least one alternate allele at SNV j, and the
attacks of Sankararaman et al. (2009) assume the |Q| SNVs are in linkage equilibrium.  Real
and coalescent-simulated chromosomes are not, so both :func:`bngp.data.genome.simulate_genome`
and :func:`bngp.data.vcf.load_vcf` pass their sites through the same pipeline:

1. keep biallelic SNVs (done by the caller, which knows its input format);
2. :func:`carrier_status`: allele calls -> carrier indicator (any called alternate allele);
3. :func:`maf_mask`: minor-allele frequency, computed on *alleles* over the whole sample
   (individuals and reference panel together), must be >= ``min_maf``;
4. :class:`GreedyLDPruner` / :func:`ld_prune`: walk the SNVs in genomic order and keep an
   SNV only if its squared Pearson correlation r^2 of *carrier status* (across individuals)
   with each of the last ``ld_window`` kept SNVs is < ``max_r2`` (the greedy rule of PLINK's
   ``--indep-pairwise``, with the window counted in kept SNVs).  SNVs whose carrier status is
   constant across the sample are dropped here: they carry no membership information and
   their r^2 is undefined;
5. :func:`select_evenly`: if more SNVs survive than requested, take an evenly spaced subset
   (in genomic order), which lowers the remaining LD further.

Arrays here are SNV-major, (M SNVs, N individuals), the order in which genome sources
produce them; :class:`bngp.data.population.Population` stores the transpose.
"""

from __future__ import annotations

import numpy as np

from bngp.errors import DataFormatError, InputError
from bngp.validation import check_in_open_interval, check_positive_int

__all__ = [
    "DEFAULT_LD_WINDOW",
    "DEFAULT_MAX_R2",
    "DEFAULT_MIN_MAF",
    "GreedyLDPruner",
    "carrier_status",
    "check_filter_parameters",
    "ld_prune",
    "maf_mask",
    "select_evenly",
]

#: Default minor-allele-frequency threshold (alleles, whole sample).
DEFAULT_MIN_MAF = 0.05
#: Default LD threshold: kept SNVs have carrier-status r^2 < 0.2 with their recent kept neighbours
#: (the common PLINK ``--indep-pairwise 50 5 0.2`` setting).
DEFAULT_MAX_R2 = 0.2
#: Default LD window: each candidate is compared with this many previously kept SNVs.
DEFAULT_LD_WINDOW = 50

#: Number of candidate SNVs whose correlations are computed in one matrix product (at most 64:
#: the greedy loop stores each candidate's linked block rows as the bits of one 64-bit word).
_BLOCK = 64


def check_filter_parameters(min_maf: float, max_r2: float, ld_window: int) -> tuple[float, float, int]:
    """Validate the shared filter parameters and return them as (float, float, int).

    ``min_maf`` must be in [0, 0.5), ``max_r2`` in (0, 1] and ``ld_window`` >= 1.
    """
    min_maf_value = float(min_maf)
    if not 0.0 <= min_maf_value < 0.5:
        raise InputError(f"`min_maf` must be in [0, 0.5), got {min_maf}.")
    max_r2_value = float(max_r2)
    if max_r2_value != 1.0:
        max_r2_value = check_in_open_interval("max_r2", max_r2_value, 0.0, 1.0)
    return min_maf_value, max_r2_value, check_positive_int("ld_window", ld_window)


def carrier_status(calls: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Turn allele calls at biallelic sites into carrier indicators.

    Args:
        calls: (M, N, ploidy) integer allele indices (0 = reference/ancestral, >= 1 =
            alternate/derived, negative = missing), as in scikit-allel's ``calldata/GT`` or a
            reshaped tskit haplotype matrix.

    Returns:
        ``(carriers, missing)``: (M, N) uint8 carrier status (1 if at least one called allele
        is alternate) and (M, N) bool, True where no allele was called at all.  A partial
        call such as ``0/.`` counts from its called allele (non-carrier), ``1/.`` is a
        carrier; haploid calls padded with a missing allele are therefore read correctly.
    """
    calls = np.asarray(calls)
    if calls.ndim != 3 or calls.shape[2] == 0:
        raise DataFormatError(
            f"`calls` must be a 3-D (sites, samples, ploidy) array, got shape {calls.shape}."
        )
    carriers = calls[:, :, 0] >= 1
    missing = calls[:, :, 0] < 0
    for allele in range(1, calls.shape[2]):  # ploidy is 1 or 2 in practice: whole-array steps
        carriers |= calls[:, :, allele] >= 1
        missing &= calls[:, :, allele] < 0
    return carriers.astype(np.uint8), missing


def maf_mask(alternate_counts: np.ndarray, called_counts: np.ndarray, min_maf: float) -> np.ndarray:
    """Return the (M,) bool mask of SNVs whose minor-allele frequency is >= ``min_maf``.

    The MAF of SNV j is min(a_j, c_j - a_j) / c_j with a_j = ``alternate_counts[j]`` and
    c_j = ``called_counts[j]``, the number of called alleles (computed from the integer minor
    count, so e.g. 18 ALT of 20 alleles has MAF exactly 0.1).  SNVs without any called allele,
    and monomorphic SNVs (MAF 0), never pass.
    """
    alternate_counts = np.asarray(alternate_counts, dtype=np.int64)
    called_counts = np.asarray(called_counts, dtype=np.int64)
    minor = np.minimum(alternate_counts, called_counts - alternate_counts)
    maf = np.divide(minor, called_counts, out=np.zeros(minor.shape), where=called_counts > 0)
    return (minor > 0) & (maf >= min_maf)


class GreedyLDPruner:
    """Streaming greedy LD pruning of carrier-status SNVs, fed in genomic order.

    A candidate SNV is kept if it is informative (carrier status not constant across the N
    individuals) and its squared Pearson correlation r^2 with each of the last ``window``
    kept SNVs is strictly below ``max_r2``.  The co-carrier counts of a block of candidates
    with the retained tail and with one another come from one matrix product (exact
    integers), r^2 from those counts in float64; only the greedy accept/reject decisions run
    in Python, on bit sets.  Feeding the SNVs in several chunks gives exactly the same result
    as feeding them at once.

    Args:
        max_r2: LD threshold in (0, 1]; 1 keeps every informative SNV that is not a
            perfect proxy of a recent kept one.
        window: number of most recently kept SNVs each candidate is compared with.

    Attributes:
        n_kept: number of SNVs kept so far.
    """

    def __init__(self, max_r2: float, window: int) -> None:
        _, self.max_r2, self.window = check_filter_parameters(0.0, max_r2, window)
        self._tail: np.ndarray | None = None
        self._tail_counts = np.zeros(0)
        self.n_kept = 0

    def add(self, carriers: np.ndarray) -> np.ndarray:
        """Offer the next (m, N) 0/1 carrier rows; return the (m,) bool mask of rows kept."""
        carriers = np.asarray(carriers)
        if carriers.ndim != 2:
            raise DataFormatError(
                f"`carriers` must be a 2-D (sites, individuals) array, got shape {carriers.shape}."
            )
        if self._tail is not None and carriers.shape[1] != self._tail.shape[1]:
            raise DataFormatError(
                f"`carriers` must have {self._tail.shape[1]} individuals like the earlier chunks, "
                f"got {carriers.shape[1]}."
            )
        if carriers.size and (carriers.min() < 0 or carriers.max() > 1):
            raise DataFormatError("`carriers` must be binary (0/1).")
        keep = np.zeros(carriers.shape[0], dtype=bool)
        for start in range(0, carriers.shape[0], _BLOCK):
            keep[start : start + _BLOCK] = self._add_block(carriers[start : start + _BLOCK])
        self.n_kept += int(keep.sum())
        return keep

    def _add_block(self, block: np.ndarray) -> np.ndarray:
        n = block.shape[1]
        # 0/1 products summed in float32 are exact integer co-carrier counts while n < 2^24.
        dtype = np.float32 if n < 2**24 else np.float64
        values = block.astype(dtype)
        counts = block.sum(axis=1, dtype=np.int64).astype(np.float64)
        informative = (counts > 0) & (counts < n)
        if self._tail is None:
            self._tail, self._tail_counts = np.zeros((0, n), dtype=dtype), np.zeros(0)
        tail, tail_counts = self._tail, self._tail_counts
        n_tail = tail.shape[0]
        linked_tail = self._linked(values @ tail.T, counts, tail_counts, n)
        linked_block = self._linked(values @ values.T, counts, counts, n)
        # Newest tail SNV linked to each candidate (-1 if none): the window reaches back far enough
        # to include it iff it lies among the last `window - (kept so far in this block)` tail rows.
        newest_linked = ((linked_tail * np.arange(1, n_tail + 1)).max(axis=1, initial=0) - 1).tolist()
        # Row i of linked_block as a bit set over the block (block <= 64 rows), for O(1) tests.
        packed = np.zeros((block.shape[0], 8), dtype=np.uint8)
        bits = np.packbits(linked_block, axis=1, bitorder="little")
        packed[:, : bits.shape[1]] = bits
        linked_bits = packed.view("<u8").ravel().tolist()
        kept: list[int] = []
        window_bits = 0  # bit set of the kept block rows inside the window
        for i in np.flatnonzero(informative).tolist():
            from_tail = max(0, min(n_tail, self.window - len(kept)))
            if newest_linked[i] >= n_tail - from_tail or linked_bits[i] & window_bits:
                continue
            kept.append(i)
            window_bits |= 1 << i
            if len(kept) > self.window:
                window_bits &= ~(1 << kept[-self.window - 1])
        self._tail = np.concatenate([tail, values[kept]])[-self.window :]
        self._tail_counts = np.concatenate([tail_counts, counts[kept]])[-self.window :]
        mask = np.zeros(block.shape[0], dtype=bool)
        mask[kept] = True
        return mask

    def _linked(self, co: np.ndarray, counts_a: np.ndarray, counts_b: np.ndarray, n: int) -> np.ndarray:
        """r^2 >= max_r2 for 0/1 rows with co-carrier counts ``co`` and carrier counts a, b:
        r = (n co - a b) / sqrt(a (n - a) b (n - b)), compared without dividing."""
        covariance = n * co.astype(np.float64) - np.outer(counts_a, counts_b)
        variance = np.outer(counts_a * (n - counts_a), counts_b * (n - counts_b))
        return covariance * covariance >= self.max_r2 * variance


def ld_prune(carriers: np.ndarray, max_r2: float, window: int) -> np.ndarray:
    """Greedy LD pruning of all (M, N) carrier rows at once; return the kept row indices.

    Same rule as :class:`GreedyLDPruner` (r^2 of carrier status < ``max_r2`` with each of the
    last ``window`` kept SNVs; constant rows dropped), rows taken in the given order.
    """
    return np.flatnonzero(GreedyLDPruner(max_r2, window).add(carriers))


def select_evenly(n_available: int, n: int) -> np.ndarray:
    """Return ``n`` distinct, evenly spaced, increasing indices into range(``n_available``).

    The first and last indices are always included (for n >= 2); ``n`` must not exceed
    ``n_available``.
    """
    n_available = check_positive_int("n_available", n_available)
    n = check_positive_int("n_snvs", n, maximum=n_available)
    if n == 1:
        return np.zeros(1, dtype=np.int64)
    # Consecutive indices differ by floor steps of (n_available - 1) / (n - 1) >= 1: distinct.
    return (np.arange(n, dtype=np.int64) * (n_available - 1)) // (n - 1)
