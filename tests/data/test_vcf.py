"""Tests of the VCF loader (bngp.data.vcf) and the shared SNV filters (bngp.data.filters)."""

from __future__ import annotations

import gzip
from pathlib import Path

import msprime
import numpy as np
import pytest

from bngp.data.filters import GreedyLDPruner, carrier_status, ld_prune, maf_mask, select_evenly
from bngp.data.vcf import load_vcf
from bngp.errors import DataFormatError, InputError, MissingFileError

SITES_ONLY = b"##fileformat=VCFv4.2\n#CHROM\tPOS\tID\tREF\tALT\tQUAL\tFILTER\tINFO\n1\t5\t.\tA\tG\t.\t.\t.\n"
HEADER = (
    "##fileformat=VCFv4.2\n"
    '##FORMAT=<ID=GT,Number=1,Type=String,Description="Genotype">\n'
    "#CHROM\tPOS\tID\tREF\tALT\tQUAL\tFILTER\tINFO\tFORMAT\t{samples}\n"
)


def _write_vcf(path: Path, samples: list[str], records: list[tuple[str, int, str, str, list[str]]]) -> Path:
    """Hand-written VCF: records are (chrom, pos, ref, alt, genotype calls)."""
    lines = [HEADER.format(samples="\t".join(samples))]
    for chrom, pos, ref, alt, calls in records:
        lines.append("\t".join([chrom, str(pos), ".", ref, alt, ".", "PASS", ".", "GT", *calls]) + "\n")
    path.write_text("".join(lines))
    return path


@pytest.fixture(scope="module")
def tree_sequence():
    ts = msprime.sim_ancestry(
        60, sequence_length=1_000_000, recombination_rate=1e-8, population_size=10_000, random_seed=11
    )
    return msprime.sim_mutations(ts, rate=1e-8, random_seed=11)


@pytest.fixture(scope="module")
def ts_vcf(tree_sequence, tmp_path_factory):
    path = tmp_path_factory.mktemp("vcf") / "sim.vcf"
    with path.open("w") as handle:
        tree_sequence.write_vcf(handle, position_transform=lambda x: np.asarray(x) + 1)
    return path


def _carriers_by_position(ts) -> dict[int, np.ndarray]:
    """Slow reference: carrier status (individual order) of each biallelic site, keyed by VCF POS."""
    out = {}
    for variant in ts.variants():
        if len(variant.alleles) == 2:
            out[int(variant.site.position) + 1] = (variant.genotypes.reshape(-1, 2) >= 1).any(axis=1)
    return out


# ---- VCF round trip ------------------------------------------------------------------------


def test_round_trip_matches_tree_sequence(tree_sequence, ts_vcf):
    pop = load_vcf(ts_vcf, seed=3)
    samples = np.array([f"tsk_{i}" for i in range(60)])
    assert pop.n_individuals + pop.n_reference == 60 and pop.n_reference == 30
    assert not set(pop.ids) & set(pop.reference_ids)
    assert set(pop.ids) | set(pop.reference_ids) == set(samples)
    expected = _carriers_by_position(tree_sequence)
    rows_ind = [int(name.split("_")[1]) for name in pop.ids]
    rows_ref = [int(name.split("_")[1]) for name in pop.reference_ids]
    for column, name in enumerate(pop.attribute_names):
        carriers = expected[int(name.split(":")[1])]
        np.testing.assert_array_equal(pop.genotypes[:, column], carriers[rows_ind])
        np.testing.assert_array_equal(pop.reference[:, column], carriers[rows_ref])
    assert pop.metadata["n_after_ld"] == pop.n_attributes


def test_round_trip_filters_hold(ts_vcf):
    pop = load_vcf(ts_vcf, seed=3, min_maf=0.1, max_r2=0.15, ld_window=20)
    everyone = np.vstack([pop.genotypes, pop.reference]).astype(np.float64)
    assert everyone.mean(axis=0).min() >= 0.1  # allele MAF >= m implies carrier frequency >= m
    r2 = np.corrcoef(everyone.T) ** 2
    assert max(r2[i, i + 1 : i + 21].max() for i in range(r2.shape[0] - 1)) < 0.15 + 1e-12
    unpruned = load_vcf(ts_vcf, seed=3, min_maf=0.1, max_r2=1.0)
    assert unpruned.n_attributes > pop.n_attributes


def test_determinism_and_seeded_split(ts_vcf):
    a = load_vcf(ts_vcf, seed=5, n_snvs=40)
    b = load_vcf(ts_vcf, seed=5, n_snvs=40)
    np.testing.assert_array_equal(a.genotypes, b.genotypes)
    np.testing.assert_array_equal(a.reference_ids, b.reference_ids)
    c = load_vcf(ts_vcf, seed=6, n_snvs=40)
    assert not np.array_equal(a.reference_ids, c.reference_ids)
    assert a.metadata["seed"] == 5 and a.n_attributes == 40


def test_n_snvs_is_evenly_spaced_subset(ts_vcf):
    full = load_vcf(ts_vcf, seed=1)
    part = load_vcf(ts_vcf, seed=1, n_snvs=25)
    columns = select_evenly(full.n_attributes, 25)
    np.testing.assert_array_equal(part.attribute_names, full.attribute_names[columns])
    np.testing.assert_array_equal(part.genotypes, full.genotypes[:, columns])
    with pytest.raises(InputError, match="`n_snvs` must be <="):
        load_vcf(ts_vcf, seed=1, n_snvs=full.n_attributes + 1)


def test_gzip_file_loads_the_same(ts_vcf, tmp_path):
    gz = tmp_path / "sim.vcf.gz"
    gz.write_bytes(gzip.compress(ts_vcf.read_bytes()))
    plain, packed = load_vcf(ts_vcf, seed=2), load_vcf(gz, seed=2)
    np.testing.assert_array_equal(plain.genotypes, packed.genotypes)


@pytest.mark.parametrize(
    "spec, n_reference",
    [(None, 30), (0.25, 15), (10, 10), (["tsk_0", "tsk_5", "tsk_59"], 3), (np.array(["tsk_1", "tsk_2"]), 2)],
)
def test_reference_panel_specs(ts_vcf, spec, n_reference):
    pop = load_vcf(ts_vcf, reference_samples=spec, seed=4, n_snvs=10)
    assert pop.n_reference == n_reference and pop.n_individuals == 60 - n_reference
    assert not set(pop.ids) & set(pop.reference_ids)
    if isinstance(spec, (list, np.ndarray)):
        assert list(pop.reference_ids) == list(spec)
    assert pop.metadata["reference_samples"] == list(pop.reference_ids)


@pytest.mark.parametrize(
    "spec, match",
    [
        (["tsk_0", "nobody"], "unknown sample 'nobody'"),
        (1.5, "fraction must be in"),
        (0.001, "gives 0 reference samples"),
        (60, "`reference_samples` must be >= 1 and <= 59"),
        ([f"tsk_{i}" for i in range(60)], "between 1 and 59"),
        (True, "`reference_samples` must be sample names"),
    ],
)
def test_bad_reference_specs(ts_vcf, spec, match):
    with pytest.raises(InputError, match=match):
        load_vcf(ts_vcf, reference_samples=spec, seed=1)


# ---- hand-written VCFs: allele handling, missing calls, MAF --------------------------------


def test_biallelic_snvs_missing_calls_and_haploid(tmp_path):
    samples = ["a", "b", "c", "d"]
    path = _write_vcf(
        tmp_path / "hand.vcf",
        samples,
        [
            ("1", 10, "A", "G", ["0/1", "0/0", "1/1", "0/0"]),  # kept: carriers 1,0,1,0
            ("1", 20, "A", "G,T", ["0/1", "0/2", "1/1", "0/0"]),  # multiallelic: skipped
            ("1", 30, "AT", "A", ["0/1", "0/0", "1/1", "0/0"]),  # indel: skipped
            ("1", 40, "C", "T", ["./.", "0/0", "1/1", "1/0"]),  # 1 of 4 missing: dropped at 0.1
            ("2", 50, "C", "T", ["1", "0", "0", "1/."]),  # haploid and partial calls: 1,0,0,1
        ],
    )
    pop = load_vcf(path, reference_samples=["d"], min_maf=0.0, max_r2=1.0)
    assert list(pop.attribute_names) == ["1:10", "2:50"]
    assert pop.ids.tolist() == ["a", "b", "c"] and pop.reference_ids.tolist() == ["d"]
    np.testing.assert_array_equal(pop.genotypes, [[1, 1], [0, 0], [1, 0]])
    np.testing.assert_array_equal(pop.reference, [[0, 1]])
    meta = pop.metadata
    assert (meta["n_records"], meta["n_biallelic_snvs"], meta["n_after_missing"]) == (5, 3, 2)


def test_missing_calls_imputed_with_majority(tmp_path):
    samples = ["a", "b", "c", "d", "e"]
    path = _write_vcf(
        tmp_path / "missing.vcf",
        samples,
        [
            ("1", 10, "A", "G", ["./.", "0/1", "1/1", "0/1", "0/0"]),  # majority carrier -> 1
            ("1", 20, "A", "G", ["0/0", "./.", "0/0", "0/1", "0/0"]),  # majority non-carrier -> 0
        ],
    )
    pop = load_vcf(path, reference_samples=["e"], min_maf=0.0, max_r2=1.0, max_missing=0.25)
    np.testing.assert_array_equal(pop.genotypes, [[1, 0], [1, 0], [1, 0], [1, 1]])
    assert pop.metadata["n_imputed_calls"] == 2
    with pytest.raises(DataFormatError, match="passes the filters"):
        load_vcf(path, reference_samples=["e"], min_maf=0.0, max_missing=0.1)


def test_maf_filter_on_alleles(tmp_path):
    samples = [f"s{i}" for i in range(10)]  # 20 alleles
    one_alt = ["0/1"] + ["0/0"] * 9  # MAF 0.05
    two_alt = ["0/1", "0/1"] + ["0/0"] * 8  # MAF 0.10
    major_alt = ["1/1"] * 8 + ["0/1", "0/1"]  # ALT frequency 0.9, MAF 0.10
    path = _write_vcf(
        tmp_path / "maf.vcf",
        samples,
        [("1", 10, "A", "G", one_alt), ("1", 20, "A", "G", two_alt), ("1", 30, "A", "G", major_alt)],
    )
    pop = load_vcf(path, reference_samples=2, seed=0, min_maf=0.1, max_r2=1.0)
    assert list(pop.attribute_names) == ["1:20"]  # 1:30 passes MAF but its carrier status is constant
    assert pop.metadata["n_after_maf"] == 2


# ---- bad files --------------------------------------------------------------------------------


def test_missing_file(tmp_path):
    with pytest.raises(MissingFileError, match="not found"):
        load_vcf(tmp_path / "absent.vcf")


@pytest.mark.parametrize(
    "content, match",
    [
        (b"hello\nworld\n", "is not a readable VCF"),
        (bytes(range(256)) * 4, "is not a readable VCF"),
        (gzip.compress(b"##fileformat=VCFv4.2\n" * 200)[:60], "is not a readable VCF"),
        (HEADER.format(samples="a\tb").encode(), "contains no biallelic SNVs"),
        (SITES_ONLY, "at least 2 samples"),
    ],
    ids=["text", "binary", "truncated-gzip", "no-records", "sites-only"],
)
def test_bad_files(tmp_path, content, match):
    path = tmp_path / "bad.vcf"
    path.write_bytes(content)
    with pytest.raises(DataFormatError, match=match):
        load_vcf(path)


def test_no_genotype_field(tmp_path):
    path = tmp_path / "nogt.vcf"
    path.write_text(
        "##fileformat=VCFv4.2\n#CHROM\tPOS\tID\tREF\tALT\tQUAL\tFILTER\tINFO\tFORMAT\ta\tb\tc\n"
        "1\t10\t.\tA\tG\t.\t.\t.\tDP\t3\t4\t5\n"
    )
    with pytest.raises(DataFormatError, match="check the GT field"):
        load_vcf(path, reference_samples=1)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(n_snvs=0), "`n_snvs` must be >= 1, got 0"),
        (dict(max_missing=1.5), "`max_missing` must be in"),
        (dict(max_r2=1.5), "`max_r2` must be in"),
        (dict(min_maf=-0.1), "`min_maf` must be in"),
    ],
)
def test_bad_parameters(ts_vcf, kwargs, match):
    with pytest.raises(InputError, match=match):
        load_vcf(ts_vcf, **kwargs)


# ---- shared filters -----------------------------------------------------------------------------


def test_carrier_status_and_maf_mask():
    calls = np.array([[[0, 0], [0, 1], [1, -1], [0, -1], [-1, -1]]])
    carriers, missing = carrier_status(calls)
    np.testing.assert_array_equal(carriers, [[0, 1, 1, 0, 0]])
    np.testing.assert_array_equal(missing, [[False, False, False, False, True]])
    mask = maf_mask(np.array([0, 1, 5, 19, 20, 3]), np.array([20, 20, 20, 20, 20, 0]), 0.05)
    np.testing.assert_array_equal(mask, [False, True, True, True, False, False])


def test_pruner_is_chunking_invariant_and_drops_constant_rows():
    rng = np.random.default_rng(0)
    base = rng.random((1, 200)) < 0.5
    noisy = base ^ (rng.random((300, 200)) < rng.uniform(0.0, 0.5, size=(300, 1)))
    carriers = noisy.astype(np.uint8)
    carriers[7] = 1  # constant row: never kept
    at_once = ld_prune(carriers, 0.3, 25)
    pruner = GreedyLDPruner(0.3, 25)
    in_chunks = np.concatenate([pruner.add(carriers[i : i + 37]) for i in range(0, 300, 37)])
    np.testing.assert_array_equal(np.flatnonzero(in_chunks), at_once)
    assert 7 not in at_once and 0 < at_once.size < 300
    kept = carriers[at_once].astype(np.float64)
    r2 = np.corrcoef(kept) ** 2
    assert max(r2[i, i + 1 : i + 26].max() for i in range(len(at_once) - 1)) < 0.3


def _naive_prune(carriers: np.ndarray, max_r2: float, window: int) -> list[int]:
    """Slow reference of the greedy rule, one candidate at a time in float64."""
    kept: list[int] = []
    for i, row in enumerate(carriers.astype(np.float64)):
        if row.min() == row.max():
            continue
        if all(np.corrcoef(row, carriers[j])[0, 1] ** 2 < max_r2 for j in kept[-window:]):
            kept.append(i)
    return kept


@pytest.mark.parametrize("max_r2, window", [(0.2, 5), (0.3, 25), (0.5, 100)])
def test_pruner_matches_naive_greedy_rule(max_r2, window):
    rng = np.random.default_rng(1)
    base = rng.random((3, 150)) < 0.4
    mix = base[rng.integers(0, 3, size=400)] ^ (rng.random((400, 150)) < rng.uniform(0, 0.4, size=(400, 1)))
    carriers = mix.astype(np.uint8)
    np.testing.assert_array_equal(ld_prune(carriers, max_r2, window), _naive_prune(carriers, max_r2, window))


def test_select_evenly():
    np.testing.assert_array_equal(select_evenly(10, 4), [0, 3, 6, 9])
    np.testing.assert_array_equal(select_evenly(5, 5), np.arange(5))
    np.testing.assert_array_equal(select_evenly(7, 1), [0])
    assert len(np.unique(select_evenly(1001, 1000))) == 1000
    with pytest.raises(InputError, match="`n_snvs` must be >= 1 and <= 3"):
        select_evenly(3, 4)


def test_cli_reads_a_vcf_into_the_population_the_api_gives(ts_vcf, tmp_path, capsys):
    """`bngp simulate --vcf FILE` writes the population load_vcf returns (same seed and options);
    a missing VCF, or simulation options missing without --vcf, is a one-line error, exit 2."""
    from bngp.cli import main
    from bngp.data.npz import load_population

    out = tmp_path / "pop.npz"
    assert main(["simulate", "--vcf", str(ts_vcf), "--reference", "10", "--snvs", "30", "--seed", "4",
                 "--out", str(out)]) == 0
    loaded = load_population(out)
    expected = load_vcf(ts_vcf, reference_samples=10, n_snvs=30, seed=4)
    np.testing.assert_array_equal(loaded.genotypes, expected.genotypes)
    np.testing.assert_array_equal(loaded.reference, expected.reference)
    capsys.readouterr()
    for argv, fragment in ((["--vcf", str(tmp_path / "missing.vcf")], "missing.vcf"),
                           (["--individuals", "10", "--reference", "10"], "--snvs")):
        bad = tmp_path / "bad.npz"
        assert main(["simulate", *argv, "--out", str(bad)]) == 2
        err = capsys.readouterr().err
        assert fragment in err and len(err.strip().splitlines()) == 1 and not bad.exists()
