"""The Li & Stephens haplotype-copying generator: exact likelihood, fit, frequencies, LD."""

import itertools

import numpy as np
import pytest

from bngp.mechanism_audit import HaplotypeCopyingModel, adjacent_r2, compare_genotypes
from bngp.data.genome import simulate_genome
from bngp.errors import InputError


@pytest.fixture(scope="module")
def linked_population():
    """Coalescent genomes without LD pruning: adjacent SNVs are correlated (mean r^2 ~ 0.2)."""
    return simulate_genome(240, 40, 200, seed=5, max_r2=1.0, segment_length=500_000)


def _brute_force_log_likelihood(panel, target, rho, theta):
    """log P(y_target | other rows) by summing over every copying path (slow reference)."""
    sources = [h for h in range(panel.shape[0]) if h != target]
    n_sources = len(sources)
    y = panel[target]
    p = (panel.sum(axis=0) - y + 0.5) / (n_sources + 1.0)
    own = np.where(y == 1, p, 1 - p)
    total = 0.0
    for path in itertools.product(sources, repeat=panel.shape[1]):
        probability = 1.0 / n_sources
        for j, source in enumerate(path):
            if j > 0:
                probability *= (1 - rho) * (source == path[j - 1]) + rho / n_sources
            probability *= (1 - theta) * (panel[source, j] == y[j]) + theta * own[j]
        total += probability
    return np.log(total)


def test_forward_algorithm_matches_brute_force_sum_over_paths():
    rng = np.random.default_rng(3)
    panel = (rng.random((5, 6)) < 0.4).astype(np.uint8)
    model = HaplotypeCopyingModel(switch_grid=(0.05, 0.6), mismatch_grid=(0.01, 0.3))
    grid = model.leave_one_out_log_likelihood(panel, np.array([1, 3]))
    for a, rho in enumerate((0.05, 0.6)):
        for b, theta in enumerate((0.01, 0.3)):
            expected = sum(_brute_force_log_likelihood(panel, t, rho, theta) for t in (1, 3))
            assert grid[a, b] == pytest.approx(expected, rel=1e-10)


def test_fit_finds_linkage_equilibrium_on_independent_columns():
    rng = np.random.default_rng(0)
    panel = (rng.random((150, 120)) < rng.uniform(0.1, 0.9, 120)).astype(np.uint8)
    model = HaplotypeCopyingModel(n_holdout=16).fit(panel, seed=0)
    assert model.switch_rate_ >= 0.5


def test_fit_keeps_haplotype_blocks_on_linked_genomes(linked_population):
    model = HaplotypeCopyingModel(n_holdout=16).fit(linked_population.genotypes[:160], seed=0)
    assert model.switch_rate_ <= 0.1
    assert model.describe()["log_likelihood_per_attribute"] < 0


def test_samples_are_binary_with_matching_frequencies_and_ld(linked_population):
    panel, held_out = linked_population.genotypes[:160], linked_population.genotypes[160:]
    model = HaplotypeCopyingModel(n_holdout=16).fit(panel, seed=1)
    synthetic = model.sample(3000, seed=2)
    assert synthetic.dtype == np.uint8 and set(np.unique(synthetic)) <= {0, 1}
    # Frequencies: E[y_j] = p_j exactly; 3000 draws leave sd <= 0.009 per column.
    assert np.max(np.abs(synthetic.mean(axis=0) - model.frequencies_)) < 0.035
    # LD: the copying keeps (1 - rho)(1 - theta)^2 of the panel's adjacent covariance.
    real_r2 = adjacent_r2(panel).mean()
    synthetic_r2 = adjacent_r2(synthetic).mean()
    assert real_r2 > 0.1
    assert 0.8 * real_r2 < synthetic_r2 < 1.1 * real_r2
    # Independent columns with the same frequencies lose it.
    rng = np.random.default_rng(4)
    independent = (rng.random(synthetic.shape) < model.frequencies_).astype(np.uint8)
    assert adjacent_r2(independent).mean() < 0.2 * real_r2
    report = compare_genotypes(held_out, synthetic)
    assert report.mean_abs_frequency_difference < 0.06
    assert report.n_real == 80 and report.n_synthetic == 3000


def test_adjacent_covariance_follows_the_closed_form(linked_population):
    panel = linked_population.genotypes[:160]
    model = HaplotypeCopyingModel(switch_grid=(0.3,), mismatch_grid=(0.2,)).fit(panel, seed=0)
    synthetic = model.sample(20000, seed=1).astype(float)
    p = model.frequencies_
    centred_panel = panel - panel.mean(axis=0)
    panel_cov = (centred_panel[:, :-1] * centred_panel[:, 1:]).mean(axis=0)
    # Cov_syn = (1 - rho)(1 - theta)^2 Cov_panel, plus the tiny smoothing offset of p.
    expected = 0.7 * 0.8**2 * panel_cov
    synthetic_cov = ((synthetic[:, :-1] - p[:-1]) * (synthetic[:, 1:] - p[1:])).mean(axis=0)
    assert np.mean(np.abs(synthetic_cov - expected)) < 0.002  # mean |expected| ~ 0.024


def test_sampling_is_seeded():
    rng = np.random.default_rng(0)
    panel = (rng.random((30, 20)) < 0.5).astype(np.uint8)
    model = HaplotypeCopyingModel(n_holdout=4).fit(panel, seed=0)
    assert np.array_equal(model.sample(10, seed=7), model.sample(10, seed=7))
    assert not np.array_equal(model.sample(10, seed=7), model.sample(10, seed=8))


def test_bad_input_raises_one_line_errors():
    with pytest.raises(InputError, match="at least 2 individuals"):
        HaplotypeCopyingModel().fit(np.ones((1, 5), dtype=np.uint8))
    with pytest.raises(InputError, match="binary"):
        HaplotypeCopyingModel().fit(np.full((4, 5), 2))
    with pytest.raises(InputError, match="must be fitted"):
        HaplotypeCopyingModel().sample(3)
    with pytest.raises(InputError, match=r"`switch_grid` must lie in \(0, 1\]"):
        HaplotypeCopyingModel(switch_grid=(0.0, 0.5))
    with pytest.raises(InputError, match=r"`mismatch_grid` must lie in \(0, 1\)"):
        HaplotypeCopyingModel(mismatch_grid=(1.0,))
    with pytest.raises(InputError, match="same number of attributes"):
        compare_genotypes(np.zeros((3, 4), dtype=np.uint8), np.zeros((3, 5), dtype=np.uint8))
