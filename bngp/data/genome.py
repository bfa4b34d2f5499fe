"""Coalescent stand-in for the paper's chromosome-10 genome data (stdpopsim on msprime).

arXiv:2410.07414, section 2.2: the genome experiments use iDASH 2016 / 1000 Genomes chromosome
10 data, which cannot be redistributed.  :func:`simulate_genome` replaces it with a coalescent
simulation under a published demographic model (by default HomSap ``OutOfAfrica_3G09``,
Gutenkunst et al. 2009), sampling all individuals - those who may be members and the reference
panel - from one population (default CEU) in the same runs, so both are draws from the same gene
pool.  Each diploid individual becomes a binary vector of carrier status (1 if it carries at
least one derived allele) over |Q| near-independent SNVs chosen by the shared pipeline of
:mod:`bngp.data.filters` (biallelic sites, MAF filter on the whole sample, greedy carrier-status
LD pruning).

The window grows on demand.  Starting at ``left``, consecutive segments of ``segment_length`` bp
are simulated one at a time, each as an independent msprime run with its own derived seed, and
streamed through the filters in genomic order; simulation stops as soon as ``n_snvs`` SNVs have
survived, and the first ``n_snvs`` survivors are returned.  With a fixed seed a smaller |Q| gives
exactly the first columns of a larger one.  Segment i holds the same K + R individuals (by sample
index) as every other segment; simulating segments independently treats them as unlinked loci,
which removes only linkage between SNVs more than a segment apart (where LD has decayed, and what
the filters remove anyway), and keeps the cost linear in the window length.  docs/design/data.md
gives the SNV yield per Mb and the costs.

Model: the coalescent with recombination (msprime's Hudson model) under the stdpopsim
demographic model ``species/model``, with the chromosome's mean recombination rate (per bp per
generation, uniform) and the model's mutation rate (per bp per generation; the species default if
the model has none), finite-sites mutations.  In every segment, K + R diploid individuals are
sampled at time 0 from ``population``; the first K form the population Z and the rest the
reference panel (individuals are exchangeable, so this split is as good as a random one).

Window: segments [left + i L, left + (i + 1) L) with L = ``segment_length`` (the last one clipped
at ``right``), i = 0, 1, ..., simulated independently until ``n_snvs`` SNVs pass the filters.
``right`` (default: the chromosome's end) only caps the growth.

SNV pipeline (:mod:`bngp.data.filters`): sites with exactly one mutation (biallelic),
derived-allele MAF >= ``min_maf`` over all 2(K + R) sampled genomes of the segment, greedy LD
pruning of carrier status in genomic order (r^2 < ``max_r2`` with each of the last ``ld_window``
kept SNVs), then the first ``n_snvs`` survivors.

Nothing is downloaded at run time: each segment uses the chromosome's mean recombination
rate (uniform; no genetic map) and the demographic model's mutation rate, both part of the
stdpopsim catalogue shipped with the package.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import msprime
import numpy as np
import stdpopsim
import tskit

from bngp.data.bits import BitRowsBuilder
from bngp.data.filters import (
    DEFAULT_LD_WINDOW,
    DEFAULT_MAX_R2,
    DEFAULT_MIN_MAF,
    GreedyLDPruner,
    carrier_status,
    check_filter_parameters,
    maf_mask,
)
from bngp.data.population import Population
from bngp.errors import InputError, UnknownNameError
from bngp.rng import SeedLike, resolve_seed
from bngp.validation import check_positive_int

__all__ = ["DEFAULT_LEFT", "DEFAULT_SEGMENT_LENGTH", "simulate_genome"]

#: Default window start on the chromosome (bp, tskit 0-based coordinates).
DEFAULT_LEFT = 10_000_000
#: Default length of one independently simulated segment (bp).
DEFAULT_SEGMENT_LENGTH = 2_000_000

#: Number of candidate SNVs decoded and pruned per chunk (bounds memory).
_CHUNK = 2048
#: msprime seeds must lie in [1, 2^32 - 1].
_MSPRIME_SEED_MAX = 2**32 - 1


def simulate_genome(
    n_individuals: int,
    n_reference: int,
    n_snvs: int,
    *,
    seed: SeedLike = None,
    species: str = "HomSap",
    model: str = "OutOfAfrica_3G09",
    population: str = "CEU",
    chromosome: str = "chr10",
    left: int = DEFAULT_LEFT,
    right: int | None = None,
    segment_length: int = DEFAULT_SEGMENT_LENGTH,
    min_maf: float = DEFAULT_MIN_MAF,
    max_r2: float = DEFAULT_MAX_R2,
    ld_window: int = DEFAULT_LD_WINDOW,
    packed: bool = False,
) -> Population:
    """Simulate K individuals and a reference panel as carrier-status vectors over |Q| SNVs
    (the model, the window and the SNV pipeline: module docstring).

    Args:
        n_individuals, n_reference, n_snvs: K, the size R of the disjoint reference panel, |Q|.
        seed: int seed or Generator (an int seed is then drawn from it), recorded; segment i
            is simulated with an msprime seed derived from it and i (``segment_seeds``).  Same
            seed and parameters -> identical population (for the recorded tool versions).
        species, model, population, chromosome: stdpopsim catalogue identifiers.
        left: window start in bp (0-based).
        right: largest allowed window end in bp (exclusive), or None for the chromosome end.
        segment_length: bp simulated per independent msprime run.
        min_maf: minor-allele-frequency threshold in [0, 0.5).
        max_r2: LD threshold in (0, 1].
        ld_window: number of previously kept SNVs each candidate is compared with.
        packed: return bit-packed matrices (:class:`bngp.data.bits.BitMatrix`); the simulation
            never holds the dense matrix either way.

    Returns:
        A :class:`Population` with attribute names ``"<chromosome>:<position>"`` (tskit
        0-based bp coordinates, as written by ``tskit.TreeSequence.write_vcf``) and metadata
        recording every parameter, the seeds, the window actually simulated
        (``window_right``), the tool versions and the SNV counts after each filter.

    Raises:
        InputError: bad parameters, or fewer than ``n_snvs`` SNVs pass the filters before
            ``right`` is reached (the message says how to fix it).
        UnknownNameError: unknown species, model, population or chromosome.

    Example:
        >>> pop = simulate_genome(20, 20, 50, seed=1, segment_length=500_000)
        >>> pop.genotypes.shape, pop.reference.shape
        ((20, 50), (20, 50))
    """
    n_individuals = check_positive_int("n_individuals", n_individuals)
    n_reference = check_positive_int("n_reference", n_reference)
    n_snvs = check_positive_int("n_snvs", n_snvs)
    min_maf, max_r2, ld_window = check_filter_parameters(min_maf, max_r2, ld_window)
    segment_length = check_positive_int("segment_length", segment_length)
    base_seed = resolve_seed(seed)
    species_obj, model_obj, length = _catalogue(species, model, population, chromosome)
    left = check_positive_int("left", left, minimum=0, maximum=length - 1)
    right = length if right is None else check_positive_int("right", right, minimum=left + 1, maximum=length)

    window = _simulate_window((species_obj, model_obj), population, chromosome, (left, right, segment_length),
                              (n_individuals + n_reference, n_snvs), GreedyLDPruner(max_r2, ld_window), base_seed,
                              min_maf)
    _check_yield(window, chromosome, left, n_snvs, (min_maf, max_r2))
    parameters = {"population": population, "chromosome": chromosome, "left": left, "right": right,
                  "segment_length": segment_length, "n_individuals": n_individuals, "n_reference": n_reference,
                  "n_snvs": n_snvs, "min_maf": min_maf, "max_r2": max_r2, "ld_window": ld_window}
    matrix, positions = window.carriers.finish(), np.concatenate(window.positions)
    genotypes, reference = matrix.take_rows(slice(0, n_individuals)), matrix.take_rows(slice(n_individuals, None))
    return Population(
        genotypes=genotypes if packed else genotypes.to_dense(),
        reference=reference if packed else reference.to_dense(),
        attribute_names=np.char.add(f"{chromosome}:", positions.astype(np.int64).astype(str)),
        metadata=_metadata((species_obj, model_obj), window, base_seed, parameters),
    )


@dataclass(frozen=True)
class _Window:
    """What :func:`_simulate_window` simulated and kept.

    Attributes:
        carriers: the (K + R) rows of carrier status of the kept SNVs, in genomic order, still to
            be finished (nothing is kept when too few SNVs passed).
        positions: their tskit 0-based positions, one array per chunk.
        n_kept: SNVs that passed every filter (the pruner's count, at least the kept columns).
        right: the end of the last simulated segment.
        segment_seeds: the msprime seed of each simulated segment.
        counts: sites, biallelic sites and sites after the MAF filter, over all segments.
        contig: the stdpopsim contig of the last segment (its mutation and recombination rates).
    """

    carriers: BitRowsBuilder
    positions: list[np.ndarray]
    n_kept: int
    right: int
    segment_seeds: list[int]
    counts: dict[str, int]
    contig: Any


def _simulate_window(catalogue: tuple[Any, Any], population: str, chromosome: str, span: tuple[int, int, int],
                     sizes: tuple[int, int], pruner: GreedyLDPruner, base_seed: int, min_maf: float) -> _Window:
    """Simulate segments [left + i L, left + (i + 1) L) (``span`` = (left, right, L), the last one
    clipped at right) of ``sizes[0]`` individuals one at a time until ``sizes[1]`` SNVs have passed
    the MAF filter and ``pruner``, keeping at most that many (simulate_genome's docstring)."""
    (species_obj, model_obj), (left, right, segment_length), (n_total, n_snvs) = catalogue, span, sizes
    kept = BitRowsBuilder(n_total)
    kept_positions: list[np.ndarray] = []
    segment_seeds: list[int] = []
    counts = {"n_sites": 0, "n_biallelic": 0, "n_after_maf": 0}
    window_right = left
    contig = None
    for index, start in enumerate(range(left, right, segment_length)):
        if pruner.n_kept >= n_snvs:
            break
        window_right = min(start + segment_length, right)
        segment_seeds.append(_segment_seed(base_seed, index))
        contig = species_obj.get_contig(
            chromosome, left=start, right=window_right, mutation_rate=model_obj.mutation_rate
        )
        ts = _simulate(model_obj, contig, population, n_total, segment_seeds[-1])
        biallelic, derived = _site_counts(ts)
        candidates = biallelic & maf_mask(derived, np.full(ts.num_sites, ts.num_samples), min_maf)
        counts["n_sites"] += int(ts.num_sites)
        counts["n_biallelic"] += int(biallelic.sum())
        counts["n_after_maf"] += int(candidates.sum())
        for rows, positions in _candidate_chunks(ts, candidates):
            keep = np.flatnonzero(pruner.add(rows))[: n_snvs - kept.n_columns]
            kept.add(rows[keep])
            kept_positions.append(positions[keep])
    return _Window(kept, kept_positions, pruner.n_kept, window_right, segment_seeds,
                   counts, contig)


def _check_yield(window: _Window, chromosome: str, left: int, n_snvs: int, filters: tuple[float, float]) -> None:
    """Raise InputError when fewer than ``n_snvs`` SNVs passed the (MAF, LD) ``filters`` in the window."""
    if window.n_kept < n_snvs:
        span = (window.right - left) / 1e6
        raise InputError(
            f"{chromosome}:{left}-{window.right} ({span:g} Mb) yields only {window.n_kept} SNVs after the "
            f"MAF (>= {filters[0]:g}) and LD (r^2 < {filters[1]:g}) filters, fewer than `n_snvs` = {n_snvs}; "
            f"raise `right`, lower `left`, choose a longer `chromosome`, or relax `max_r2`/`min_maf`."
        )


def _metadata(catalogue: tuple[Any, Any], window: _Window, base_seed: int,
              parameters: dict[str, Any]) -> dict[str, Any]:
    """The population's metadata: every parameter of :func:`simulate_genome` (``parameters``), the
    seeds, the window actually simulated, the rates, the SNV counts after each filter and the
    tool versions."""
    species_obj, model_obj = catalogue
    window_keys = ("population", "chromosome", "left", "right")
    size_keys = ("n_individuals", "n_reference", "n_snvs", "min_maf", "max_r2", "ld_window")
    return {
        "source": "stdpopsim",
        "seed": base_seed,
        "segment_seeds": window.segment_seeds,
        "species": species_obj.id,
        "model": model_obj.id,
        **{key: parameters[key] for key in window_keys},
        "window_right": window.right,
        "segment_length": parameters["segment_length"],
        "mutation_rate": float(window.contig.mutation_rate),
        "recombination_rate": float(window.contig.recombination_map.mean_rate),
        **{key: parameters[key] for key in size_keys},
        "carrier": "at least one derived allele",
        **window.counts,
        "n_after_ld": window.n_kept,
        "stdpopsim_version": stdpopsim.__version__,
        "msprime_version": msprime.__version__,
        "tskit_version": tskit.__version__,
    }


def _segment_seed(base_seed: int, index: int) -> int:
    """msprime seed in [1, 2^32 - 1] of segment ``index``: child ``index`` of SeedSequence(base_seed)."""
    state = np.random.SeedSequence(base_seed, spawn_key=(index,)).generate_state(1, dtype=np.uint64)[0]
    return int(state % _MSPRIME_SEED_MAX) + 1


def _catalogue(species: str, model: str, population: str, chromosome: str) -> tuple[Any, Any, int]:
    """Look up the stdpopsim species, model and chromosome length, as bngp errors on failure."""
    try:
        species_obj = stdpopsim.get_species(species)
    except ValueError as exc:
        raise UnknownNameError(f"unknown stdpopsim species {species!r}: {exc}") from exc
    try:
        model_obj = species_obj.get_demographic_model(model)
    except ValueError as exc:
        raise UnknownNameError(f"unknown stdpopsim model {model!r}: {exc}") from exc
    names = [pop.name for pop in model_obj.populations]
    if population not in names:
        raise UnknownNameError(
            f"`population` must be one of {names} for {species}/{model}, got {population!r}."
        )
    try:
        length = species_obj.genome.get_chromosome(chromosome).length
    except ValueError as exc:
        valid = [c.id for c in species_obj.genome.chromosomes]
        raise UnknownNameError(
            f"`chromosome` must be one of {valid} for {species}, got {chromosome!r}."
        ) from exc
    return species_obj, model_obj, int(length)


def _simulate(model: Any, contig: Any, population: str, n_total: int, seed: int) -> tskit.TreeSequence:
    """One stdpopsim/msprime run sampling ``n_total`` diploid individuals from ``population``."""
    try:
        return stdpopsim.get_engine("msprime").simulate(model, contig, {population: n_total}, seed=seed)
    except ValueError as exc:
        raise InputError(f"stdpopsim cannot sample {population!r} from {model.id}: {exc}") from exc


def _site_counts(ts: tskit.TreeSequence) -> tuple[np.ndarray, np.ndarray]:
    """Per site: whether it carries exactly one mutation, and that mutation's sample count.

    The derived-allele count of a single-mutation site is the number of sample genomes
    below the mutation's node in the local tree, read from tskit's incrementally maintained
    sample counts (no genotype decoding).
    """
    mutations = ts.tables.mutations
    biallelic = np.bincount(mutations.site, minlength=ts.num_sites) == 1
    derived = np.zeros(ts.num_sites, dtype=np.int64)
    single = np.flatnonzero(biallelic[mutations.site])
    sites = mutations.site[single]
    nodes = mutations.node[single]
    positions = ts.tables.sites.position[sites]
    tree_index = np.searchsorted(ts.breakpoints(as_array=True), positions, side="right") - 1
    bounds = np.searchsorted(tree_index, np.arange(ts.num_trees + 1))
    tree = ts.first()
    for index in np.flatnonzero(np.diff(bounds)):
        tree.seek_index(int(index))
        chunk = slice(bounds[index], bounds[index + 1])
        derived[sites[chunk]] = [tree.num_samples(int(u)) for u in nodes[chunk]]
    return biallelic, derived


def _candidate_chunks(
    ts: tskit.TreeSequence, candidates: np.ndarray
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Yield (carrier rows (m, N) uint8, positions (m,)) of the candidate sites, in chunks of
    at most ``_CHUNK`` sites in genomic order, individuals in tskit individual order."""
    positions = ts.tables.sites.position[candidates]
    reduced = ts.delete_sites(np.flatnonzero(~candidates))
    sample_nodes = reduced.individuals_nodes
    n_people, ploidy = sample_nodes.shape
    buffer = np.empty((_CHUNK, n_people * ploidy), dtype=np.int8)
    # tskit decodes much faster for its default sample list, which msprime lays out individual by individual.
    in_order = np.array_equal(sample_nodes.ravel(), reduced.samples())
    variants = reduced.variants(samples=None if in_order else sample_nodes.ravel(), copy=False)
    for start in range(0, reduced.num_sites, _CHUNK):
        filled = min(_CHUNK, reduced.num_sites - start)
        for row in range(filled):
            buffer[row] = next(variants).genotypes
        calls = buffer[:filled].reshape(filled, n_people, ploidy)
        yield carrier_status(calls)[0], positions[start : start + filled]
