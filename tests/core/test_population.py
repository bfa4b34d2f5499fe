import numpy as np
import pytest

from bngp.data.independent import simulate_independent
from bngp.data.npz import load_population, save_population
from bngp.data.population import REFERENCE_FREQUENCY_FLOOR, Population
from bngp.errors import DataFormatError, InputError, MissingFileError


def test_independent_model_shapes_binary_and_deterministic():
    a = simulate_independent(30, 20, 50, seed=5)
    b = simulate_independent(30, 20, 50, seed=5)
    c = simulate_independent(30, 20, 50, seed=6)
    assert a.genotypes.shape == (30, 50) and a.reference.shape == (20, 50)
    assert set(np.unique(a.genotypes)) <= {0, 1}
    assert np.array_equal(a.genotypes, b.genotypes) and np.array_equal(a.reference, b.reference)
    assert not np.array_equal(a.genotypes, c.genotypes)
    assert a.metadata["seed"] == 5


def test_independent_model_frequencies_follow_the_model():
    pop = simulate_independent(3000, 3000, 40, seed=1, min_frequency=0.1)
    freq_pop = pop.genotypes.mean(0)
    freq_ref = pop.reference.mean(0)
    # same underlying frequencies: difference within ~5 standard errors
    assert np.max(np.abs(freq_pop - freq_ref)) < 5 * np.sqrt(0.25 * 2 / 3000)
    assert freq_pop.min() > 0.05 and freq_pop.max() < 0.95


def test_reference_frequencies_are_floored():
    genotypes = np.zeros((3, 2), dtype=np.uint8)
    pop = Population(genotypes, np.array([[0, 1], [0, 1]]))
    assert np.allclose(pop.reference_frequencies, [REFERENCE_FREQUENCY_FLOOR, 1 - REFERENCE_FREQUENCY_FLOOR])


@pytest.mark.parametrize(
    "genotypes, reference, message",
    [
        (np.array([[0, 2]]), np.array([[0, 1]]), "binary"),
        (np.array([[0, np.nan]]), np.array([[0, 1]]), "NaN"),
        (np.zeros((2, 3)), np.zeros((2, 2)), "same number of attributes"),
        (np.zeros((0, 3)), np.zeros((2, 3)), "empty"),
        (np.zeros(3), np.zeros((2, 3)), "2-D"),
    ],
)
def test_population_rejects_bad_arrays(genotypes, reference, message):
    with pytest.raises(DataFormatError, match=message):
        Population(genotypes, reference)


def test_npz_round_trip(tmp_path, small_population):
    path = save_population(small_population, tmp_path / "p.npz")
    loaded = load_population(path)
    assert np.array_equal(loaded.genotypes, small_population.genotypes)
    assert np.array_equal(loaded.reference, small_population.reference)
    assert list(loaded.ids) == list(small_population.ids)
    assert loaded.metadata == small_population.metadata
    assert not list(tmp_path.glob(".*.tmp"))


def test_npz_errors(tmp_path):
    with pytest.raises(MissingFileError):
        load_population(tmp_path / "missing.npz")
    bad = tmp_path / "bad.npz"
    bad.write_text("not a zip")
    with pytest.raises(DataFormatError):
        load_population(bad)
    partial = tmp_path / "partial.npz"
    np.savez(partial, genotypes=np.zeros((2, 2)))
    with pytest.raises(DataFormatError, match="reference"):
        load_population(partial)


def test_index_of(small_population):
    ids = small_population.ids[[3, 1]]
    assert list(small_population.index_of(ids)) == [3, 1]
    with pytest.raises(DataFormatError, match="unknown individual"):
        small_population.index_of(["nobody"])


def test_simulation_parameter_errors():
    with pytest.raises(InputError):
        simulate_independent(0, 10, 10, seed=1)
