"""Loading real genotype data from a VCF file into a :class:`Population`.

arXiv:2410.07414, section 2.2: users who hold the real data (e.g. iDASH 2016 / 1000 Genomes
chromosome 10) load it here instead of the coalescent stand-in of
:mod:`bngp.data.genome`.  The file is read with scikit-allel in chunks and streamed through
the same SNV pipeline (:mod:`bngp.data.filters`), so memory is bounded by one chunk plus the
kept SNVs even for a whole-chromosome file:

1. biallelic SNVs only (one ALT allele, REF and ALT single bases); other records are skipped;
2. carrier status: 1 if at least one called allele is ALT;
3. missing calls: a call with no allele called is missing; SNVs with a fraction of missing
   calls above ``max_missing`` are dropped, the remaining missing calls are imputed with the
   SNV's majority carrier status among called samples (ties -> non-carrier).  Partial calls
   (``0/.``, ``1/.``, haploid calls) count by their called alleles;
4. MAF >= ``min_maf``, on called alleles over all samples (individuals and reference panel);
5. greedy carrier-status LD pruning in file order (r^2 < ``max_r2`` with each of the last
   ``ld_window`` kept SNVs);
6. if ``n_snvs`` is given, that many evenly spaced SNVs among the survivors.

The samples are split into the population Z and a disjoint reference panel, either by
name or by a seeded random split.

:func:`write_vcf` goes the other way: a population (dense or bit-packed) as a VCF of carrier
status, block by block of SNVs, for outside tools and for round trips at beacon scale.
"""

from __future__ import annotations

import gzip
import re
import warnings
import zlib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import allel
import numpy as np

from bngp.data.filters import (
    DEFAULT_LD_WINDOW,
    DEFAULT_MAX_R2,
    DEFAULT_MIN_MAF,
    GreedyLDPruner,
    carrier_status,
    check_filter_parameters,
    maf_mask,
    select_evenly,
)
from bngp.data.bits import BitMatrix, BitRowsBuilder
from bngp.data.population import Population
from bngp.errors import DataFormatError, InputError
from bngp.io_utils import atomic_write
from bngp.rng import SeedLike, make_rng, resolve_seed
from bngp.validation import check_positive_int, check_readable_file

__all__ = ["DEFAULT_MAX_MISSING", "load_vcf", "write_vcf"]

#: Default largest fraction of missing genotype calls an SNV may have.
DEFAULT_MAX_MISSING = 0.1

#: VCF records read per chunk.
_CHUNK = 16_384
_FIELDS = ["calldata/GT", "variants/CHROM", "variants/POS", "variants/numalt", "variants/is_snp"]
_COUNTS = ("n_records", "n_biallelic_snvs", "n_after_missing", "n_after_maf", "n_imputed_calls")
_READ_ERRORS = (RuntimeError, EOFError, OSError, UnicodeDecodeError, ValueError, zlib.error)

ReferenceSpec = Sequence[str] | np.ndarray | float | int | None


def load_vcf(
    path: str | Path,
    *,
    reference_samples: ReferenceSpec = None,
    n_snvs: int | None = None,
    min_maf: float = DEFAULT_MIN_MAF,
    max_r2: float = DEFAULT_MAX_R2,
    ld_window: int = DEFAULT_LD_WINDOW,
    max_missing: float = DEFAULT_MAX_MISSING,
    seed: SeedLike = None,
    packed: bool = False,
) -> Population:
    """Read a VCF (plain or gzip) into carrier-status vectors of individuals and a reference panel.

    Args:
        path: VCF file (``.vcf`` or ``.vcf.gz``) with a GT field.
        reference_samples: which samples form the reference panel: sample names (a sequence
            or array of str, or one name);
            a float in (0, 1), the fraction of samples drawn at random (seeded); an int, the
            number drawn at random; or None for half of the samples at random.  Both groups
            keep the file's sample order.
        n_snvs: |Q|; None keeps every SNV that passes the filters, an int keeps that many
            evenly spaced ones among them.
        min_maf: minor-allele-frequency threshold in [0, 0.5).
        max_r2: LD threshold in (0, 1].
        ld_window: number of previously kept SNVs each candidate is compared with.
        max_missing: largest fraction of missing calls an SNV may have, in [0, 1].
        seed: int seed or Generator (an int seed is then drawn from it) for the random split;
            recorded in the metadata.
        packed: return bit-packed matrices (:class:`bngp.data.bits.BitMatrix`).  Kept SNVs are
            packed chunk by chunk either way, so memory is one chunk of records plus the bits:
            a 2,500-sample VCF of 10^6 SNVs never needs the 2.5 GB dense matrix.

    Returns:
        A :class:`Population` with sample names as ids and ``"CHROM:POS"`` (1-based VCF
        positions) as attribute names; the metadata records the parameters, the seed, the
        reference panel and the number of SNVs after each filter.

    Raises:
        MissingFileError: the file does not exist or cannot be read.
        DataFormatError: not a VCF, no samples, or no biallelic SNV passing the filters.
        InputError: bad parameters, unknown reference sample names, or fewer SNVs than
            ``n_snvs`` passing the filters.
    """
    path = check_readable_file("vcf", path)
    min_maf, max_r2, ld_window = check_filter_parameters(min_maf, max_r2, ld_window)
    max_missing = float(max_missing)
    if not 0.0 <= max_missing <= 1.0:
        raise InputError(f"`max_missing` must be in [0, 1], got {max_missing}.")
    if n_snvs is not None:
        n_snvs = check_positive_int("n_snvs", n_snvs)
    base_seed = resolve_seed(seed)

    samples, chunks = _open(path)
    is_reference = _reference_mask(samples, reference_samples, base_seed)

    pruner = GreedyLDPruner(max_r2, ld_window)
    kept, kept_names, counts = _filter_chunks(chunks, samples.size, pruner, max_missing, min_maf)

    _check_passing(path, counts, pruner.n_kept, max_missing, min_maf)
    carriers, names = _choose(kept.finish(), np.concatenate(kept_names), n_snvs, pruner.n_kept, path,
                              (min_maf, max_r2))
    parameters = {"n_snvs": n_snvs, "min_maf": min_maf, "max_r2": max_r2, "ld_window": ld_window,
                  "max_missing": max_missing}
    metadata = _metadata(path, base_seed, samples[is_reference].tolist(), parameters, counts, pruner.n_kept)
    genotypes, reference = carriers.take_rows(~is_reference), carriers.take_rows(is_reference)
    return Population(
        genotypes=genotypes if packed else genotypes.to_dense(),
        reference=reference if packed else reference.to_dense(),
        ids=samples[~is_reference],
        reference_ids=samples[is_reference],
        attribute_names=names,
        metadata=metadata,
    )


def _filter_chunks(chunks: Iterator[dict[str, np.ndarray]], n_samples: int, pruner: GreedyLDPruner,
                   max_missing: float, min_maf: float) -> tuple[BitRowsBuilder, list[np.ndarray], dict[str, int]]:
    """Stream the record chunks through steps 1-5 of the pipeline (module docstring): returns the
    kept SNVs' carrier rows (still to be finished), their ``CHROM:POS`` names (one array per
    chunk) and the count after each filter (:data:`_COUNTS`)."""
    kept = BitRowsBuilder(n_samples)
    kept_names: list[np.ndarray] = []
    counts = dict.fromkeys(_COUNTS, 0)
    for chunk in chunks:
        calls = chunk["calldata/GT"]
        counts["n_records"] += calls.shape[0]
        snv = (chunk["variants/numalt"] == 1) & chunk["variants/is_snp"]
        calls = calls[snv]
        carriers, missing = carrier_status(calls)
        complete = missing.mean(axis=1) <= max_missing
        passing = complete & maf_mask((calls >= 1).sum(axis=(1, 2)), (calls >= 0).sum(axis=(1, 2)), min_maf)
        counts["n_biallelic_snvs"] += int(snv.sum())
        counts["n_after_missing"] += int(complete.sum())
        counts["n_after_maf"] += int(passing.sum())
        carriers, missing = carriers[passing], missing[passing]
        carriers = _impute(carriers, missing)
        counts["n_imputed_calls"] += int(missing.sum())
        keep = pruner.add(carriers)
        kept.add(carriers[keep])
        chromosomes = chunk["variants/CHROM"][snv][passing][keep].astype(str)
        positions = chunk["variants/POS"][snv][passing][keep].astype(str)
        kept_names.append(np.char.add(np.char.add(chromosomes, ":"), positions))
    return kept, kept_names, counts


def _check_passing(path: Path, counts: dict[str, int], n_kept: int, max_missing: float, min_maf: float) -> None:
    """Raise DataFormatError when the file has no biallelic SNV or none passed the filters."""
    if counts["n_biallelic_snvs"] == 0:
        raise DataFormatError(f"VCF file {path} contains no biallelic SNVs.")
    if n_kept == 0:
        raise DataFormatError(
            f"no SNV of VCF file {path} passes the filters (missing calls <= {max_missing:g}, "
            f"MAF >= {min_maf:g}, non-constant carrier status); check the GT field or relax the filters."
        )


def _choose(carriers: BitMatrix, names: np.ndarray, n_snvs: int | None, n_kept: int, path: Path,
            filters: tuple[float, float]) -> tuple[BitMatrix, np.ndarray]:
    """Step 6: all ``n_kept`` SNVs (``n_snvs`` None), or ``n_snvs`` evenly spaced ones among them;
    ``filters`` = (min_maf, max_r2) for the message when there are too few."""
    if n_snvs is None:
        return carriers, names
    if n_snvs > n_kept:
        raise InputError(
            f"`n_snvs` must be <= {n_kept}, the number of SNVs of {path.name} passing the MAF "
            f"(>= {filters[0]:g}) and LD (r^2 < {filters[1]:g}) filters, got {n_snvs}; lower it or relax "
            f"`max_r2`/`min_maf`."
        )
    chosen = select_evenly(n_kept, n_snvs)
    return carriers.take_columns(chosen), names[chosen]


def _metadata(path: Path, base_seed: int, reference_samples: list[str], parameters: dict[str, Any],
              counts: dict[str, int], n_kept: int) -> dict[str, Any]:
    """The population's metadata: the file, the seed, the reference panel, the filter
    ``parameters`` (n_snvs, min_maf, max_r2, ld_window, max_missing) and the SNVs after each filter."""
    return {
        "source": "vcf",
        "path": str(path),
        "seed": base_seed,
        "reference_samples": reference_samples,
        **parameters,
        "carrier": "at least one called ALT allele",
        "missing_calls": "imputed with the SNV's majority carrier status",
        **counts,
        "n_after_ld": n_kept,
        "scikit_allel_version": allel.__version__,
    }


def _open(path: Path) -> tuple[np.ndarray, Iterator[dict[str, np.ndarray]]]:
    """Read the header; return the sample names and an iterator over record chunks.

    scikit-allel's parse errors (here or later while iterating) become DataFormatError.
    """
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            _, samples, _, records = allel.iter_vcf_chunks(str(path), fields=_FIELDS, chunk_length=_CHUNK)
    except _READ_ERRORS as exc:
        raise DataFormatError(f"`vcf` file {path} is not a readable VCF ({exc}).") from exc
    samples = np.asarray(samples).astype(str)
    if samples.size < 2:
        raise DataFormatError(
            f"VCF file {path} must have at least 2 samples (individuals and a reference panel), "
            f"got {samples.size}."
        )
    if len(set(samples.tolist())) != samples.size:
        raise DataFormatError(f"VCF file {path} has duplicate sample names.")

    def chunks() -> Iterator[dict[str, np.ndarray]]:
        iterator = iter(records)
        while True:
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", UserWarning)
                    chunk = next(iterator)
            except StopIteration:
                return
            except _READ_ERRORS as exc:
                raise DataFormatError(f"`vcf` file {path} is not a readable VCF ({exc}).") from exc
            yield chunk[0]

    return samples, chunks()


def _reference_mask(samples: np.ndarray, spec: ReferenceSpec, seed: int) -> np.ndarray:
    """(N,) bool mask of the reference panel for a names / fraction / count / None spec."""
    n = samples.size
    mask = np.zeros(n, dtype=bool)
    if spec is None:
        spec = 0.5
    if isinstance(spec, str):
        spec = [spec]
    if isinstance(spec, (float, np.floating)):
        if not 0.0 < spec < 1.0:
            raise InputError(f"`reference_samples` as a fraction must be in (0, 1), got {spec}.")
        count = int(round(spec * n))
        if not 1 <= count <= n - 1:
            raise InputError(
                f"`reference_samples` fraction {spec:g} of {n} samples gives {count} reference samples; "
                f"it must give between 1 and {n - 1}."
            )
        spec = count
    if isinstance(spec, (int, np.integer)) and not isinstance(spec, bool):
        count = check_positive_int("reference_samples", spec, maximum=n - 1)
        mask[make_rng(seed).choice(n, size=count, replace=False)] = True
        return mask
    if not isinstance(spec, (Sequence, np.ndarray)) or isinstance(spec, bool):
        raise InputError(
            "`reference_samples` must be sample names, a fraction, a count or None, "
            f"got {type(spec).__name__}."
        )
    names = [str(name) for name in spec]
    lookup = {name: i for i, name in enumerate(samples.tolist())}
    unknown = [name for name in names if name not in lookup]
    if unknown:
        raise InputError(f"`reference_samples` names unknown sample {unknown[0]!r} (not in the VCF).")
    mask[[lookup[name] for name in names]] = True
    if not 1 <= mask.sum() <= n - 1:
        raise InputError(
            f"`reference_samples` must name between 1 and {n - 1} distinct samples, got {int(mask.sum())}."
        )
    return mask


def _impute(carriers: np.ndarray, missing: np.ndarray) -> np.ndarray:
    """Replace missing calls by the row's majority carrier status among called samples (ties -> 0)."""
    if not missing.any():
        return carriers
    called = (~missing).sum(axis=1)
    majority = (2 * carriers.sum(axis=1) > called).astype(np.uint8)
    return np.where(missing, majority[:, None], carriers).astype(np.uint8)


#: SNVs written per block by :func:`write_vcf` (bounds its (block x samples x 4) text buffer).
_WRITE_BLOCK = 2048
_NAME = re.compile(r"^([^\s:]+):([0-9]+)$")


def write_vcf(population: Population, path: str | Path, *, gzip_level: int = 1) -> Path:
    """Write ``population`` as a VCF 4.2 of carrier status, individuals then reference panel.

    Carrier status (section 2.2) is written as the unphased genotype ``0/1`` (carrier) or
    ``0/0`` (non-carrier), REF ``A`` and ALT ``G`` (the allele letters are not kept by a
    population); :func:`load_vcf` with ``min_maf=0`` and ``max_r2=1`` reads the same matrices
    back (sample names as ids; reference samples named by ``population.reference_ids``).
    Attribute names of the form ``CHROM:POS`` give the CHROM and POS columns; other names go to
    the ID column, on CHROM ``1`` at POS 1, 2, ....  Written a block of SNVs at a time (a
    bit-packed population is never unpacked whole), atomically; ``.gz`` paths are gzipped at
    ``gzip_level``.
    """
    path = Path(path)
    names = population.attribute_names.astype(str)
    parsed = [_NAME.match(name) for name in names.tolist()]
    if all(parsed):
        chromosomes = np.array([m.group(1) for m in parsed])
        positions = np.array([m.group(2) for m in parsed])
        ids = np.full(names.size, ".")
    else:
        chromosomes = np.full(names.size, "1")
        positions = np.arange(1, names.size + 1).astype(str)
        ids = names
    samples = np.concatenate([population.ids, population.reference_ids]).astype(str)
    header = (
        "##fileformat=VCFv4.2\n##source=bngp.data.vcf.write_vcf (carrier status as 0/1)\n"
        '##FORMAT=<ID=GT,Number=1,Type=String,Description="Genotype">\n'
        "#CHROM\tPOS\tID\tREF\tALT\tQUAL\tFILTER\tINFO\tFORMAT\t" + "\t".join(samples.tolist()) + "\n"
    )
    matrices = (population.genotypes, population.reference)
    with atomic_write(path) as raw:
        handle = gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=gzip_level) if path.suffix == ".gz" else raw
        handle.write(header.encode())
        for start in range(0, names.size, _WRITE_BLOCK):
            stop = min(start + _WRITE_BLOCK, names.size)
            carriers = np.concatenate(
                [m.columns(start, stop) if isinstance(m, BitMatrix) else np.asarray(m[:, start:stop], dtype=np.uint8)
                 for m in matrices]
            ).T  # (SNVs, samples)
            text = np.empty(carriers.shape + (4,), dtype=np.uint8)
            text[..., 0], text[..., 1], text[..., 3] = ord("0"), ord("/"), ord("\t")
            text[..., 2] = ord("0") + carriers
            text[:, -1, 3] = ord("\n")
            fixed = [f"{c}\t{p}\t{i}\tA\tG\t.\tPASS\t.\tGT\t" for c, p, i in
                     zip(chromosomes[start:stop].tolist(), positions[start:stop].tolist(), ids[start:stop].tolist())]
            rows = text.reshape(len(fixed), -1)
            handle.write(b"".join(line.encode() + row.tobytes() for line, row in zip(fixed, rows)))
        if handle is not raw:
            handle.close()
    return path
