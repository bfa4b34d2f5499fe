"""Tests of the stdpopsim/msprime genome stand-in (bngp.data.genome)."""

from __future__ import annotations

import numpy as np
import pytest
import stdpopsim

from bngp.data.genome import simulate_genome
from bngp.errors import InputError, UnknownNameError

# Small but realistic: 30 + 30 CEU individuals, 0.5 Mb segments (each run well under a second).
SMALL = dict(seed=7, segment_length=500_000)


@pytest.fixture(scope="module")
def small():
    return simulate_genome(30, 30, 120, **SMALL)


def _max_neighbour_r2(matrix: np.ndarray, window: int) -> float:
    """Largest r^2 between any SNV and one of the next ``window`` SNVs (float64 reference)."""
    r2 = np.corrcoef(matrix.T.astype(np.float64)) ** 2
    n = r2.shape[0]
    return max(r2[i, i + 1 : i + 1 + window].max() for i in range(n - 1))


def test_shapes_binary_and_names(small):
    assert small.genotypes.shape == (30, 120)
    assert small.reference.shape == (30, 120)
    assert small.genotypes.dtype == np.uint8 and small.reference.dtype == np.uint8
    assert set(np.unique(small.genotypes)) <= {0, 1}
    positions = np.array([int(name.split(":")[1]) for name in small.attribute_names])
    assert all(name.startswith("chr10:") for name in small.attribute_names)
    assert np.all(np.diff(positions) > 0)
    assert positions[0] >= small.metadata["left"] and positions[-1] < small.metadata["window_right"]


def test_reference_panel_is_disjoint(small):
    assert not set(small.ids) & set(small.reference_ids)
    assert small.n_individuals == 30 and small.n_reference == 30


def test_same_seed_same_population_and_prefix_property(small):
    again = simulate_genome(30, 30, 120, **SMALL)
    np.testing.assert_array_equal(again.genotypes, small.genotypes)
    np.testing.assert_array_equal(again.reference, small.reference)
    np.testing.assert_array_equal(again.attribute_names, small.attribute_names)
    fewer = simulate_genome(30, 30, 40, **SMALL)
    np.testing.assert_array_equal(fewer.genotypes, small.genotypes[:, :40])
    other = simulate_genome(30, 30, 120, seed=8, segment_length=500_000)
    assert not np.array_equal(other.genotypes, small.genotypes)


def test_generator_seed_is_recorded_and_replayable():
    pop = simulate_genome(10, 10, 30, seed=np.random.default_rng(3), segment_length=500_000)
    seed = pop.metadata["seed"]
    assert isinstance(seed, int)
    replay = simulate_genome(10, 10, 30, seed=seed, segment_length=500_000)
    np.testing.assert_array_equal(replay.genotypes, pop.genotypes)


def test_metadata_records_parameters(small):
    meta = small.metadata
    for key, value in dict(
        source="stdpopsim", seed=7, species="HomSap", model="OutOfAfrica_3G09", population="CEU",
        chromosome="chr10", segment_length=500_000, min_maf=0.05, max_r2=0.2, ld_window=50,
        n_individuals=30, n_reference=30, n_snvs=120,
    ).items():
        assert meta[key] == value, key
    assert meta["n_sites"] >= meta["n_biallelic"] >= meta["n_after_maf"] >= meta["n_after_ld"] >= 120
    assert len(meta["segment_seeds"]) == (meta["window_right"] - meta["left"]) // 500_000
    # the model's mutation rate (Gutenkunst et al. 2009) and stdpopsim's uniform chr10 rate
    species = stdpopsim.get_species("HomSap")
    assert meta["mutation_rate"] == species.get_demographic_model("OutOfAfrica_3G09").mutation_rate == 2.35e-8
    assert meta["recombination_rate"] == pytest.approx(species.get_contig("chr10").recombination_map.mean_rate)


def test_maf_filter_honoured():
    # Allele MAF >= m implies a carrier frequency >= m over the whole sample.
    pop = simulate_genome(30, 30, 60, seed=2, segment_length=500_000, min_maf=0.2)
    everyone = np.vstack([pop.genotypes, pop.reference])
    assert everyone.mean(axis=0).min() >= 0.2


def test_ld_pruning_bounds_and_reduces_neighbour_r2(small):
    everyone = np.vstack([small.genotypes, small.reference])
    assert _max_neighbour_r2(everyone, 50) < 0.2 + 1e-12
    loose = simulate_genome(30, 30, 120, max_r2=1.0, **SMALL)
    loose_all = np.vstack([loose.genotypes, loose.reference]).astype(np.float64)
    adjacent = [np.corrcoef(loose_all[:, j], loose_all[:, j + 1])[0, 1] ** 2 for j in range(119)]
    pruned = [np.corrcoef(everyone[:, j], everyone[:, j + 1])[0, 1] ** 2 for j in range(119)]
    assert np.mean(pruned) < np.mean(adjacent)
    assert max(adjacent) > 0.2


def test_ld_window_and_threshold_are_respected():
    pop = simulate_genome(30, 30, 80, seed=4, segment_length=500_000, max_r2=0.1, ld_window=10)
    assert _max_neighbour_r2(np.vstack([pop.genotypes, pop.reference]), 10) < 0.1 + 1e-12


def test_short_window_raises_with_advice():
    with pytest.raises(InputError, match="raise `right`"):
        simulate_genome(10, 10, 500, seed=1, right=10_100_000, segment_length=50_000)


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        (dict(n_snvs=0), InputError, "`n_snvs` must be >= 1, got 0"),
        (dict(n_individuals=0), InputError, "`n_individuals` must be >= 1"),
        (dict(max_r2=0.0), InputError, "`max_r2` must be in"),
        (dict(min_maf=0.5), InputError, "`min_maf` must be in"),
        (dict(ld_window=0), InputError, "`ld_window` must be >= 1"),
        (dict(segment_length=0), InputError, "`segment_length` must be >= 1"),
        (dict(right=5), InputError, "`right` must be >="),
        (dict(left=10**10), InputError, "`left` must be >= 0"),
        (dict(species="Nope"), UnknownNameError, "species"),
        (dict(model="Nope"), UnknownNameError, "model"),
        (dict(population="XYZ"), UnknownNameError, "`population` must be one of"),
        (dict(chromosome="chr99"), UnknownNameError, "`chromosome` must be one of"),
        (dict(seed=-1), InputError, "`seed` must be a non-negative integer"),
    ],
)
def test_bad_inputs(kwargs, error, match):
    sizes = {"n_individuals": 5, "n_reference": 5, "n_snvs": 10}
    options = {"seed": 1, "segment_length": 100_000}
    for key, value in kwargs.items():
        (sizes if key in sizes else options)[key] = value
    with pytest.raises(error, match=match):
        simulate_genome(sizes["n_individuals"], sizes["n_reference"], sizes["n_snvs"], **options)
