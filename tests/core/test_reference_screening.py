"""The ranking's screening (bngp.references.rank_references, screening_score): a quick lower reading of the
converged linear attack that leaves out references which cannot be the best."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from bngp.data.independent import simulate_independent
from bngp.defenses.budget import BudgetSetting, reference_at_budget, row_space_optimal_at_budget, shaped_at_budget
from bngp.data.priors import UniformSubsetPrior
from bngp.linear import fit_ridge, whitened_map_of_law
from bngp.metrics import auc
from bngp.reading import CoordinateSimulator, known_law_fit, release_coordinates
from bngp.references import ALWAYS_CONVERGED, SCREEN_MARGIN, linear_attack_score, rank_references, screening_score

MEMBERS = 20


@pytest.fixture(scope="module")
def narrow():
    """K = 40 candidates, |Q| = 160 independent attributes (K - 1 < |Q|), N = 20."""
    population = simulate_independent(40, 40, 160, seed=21)
    return population, BudgetSetting.of(population, MEMBERS)


@pytest.mark.parametrize("kind", ["laplace", "shaped", "optimum", "linear-optimal", "suppression"])
def test_the_screening_reads_no_higher_than_the_converged_attack(kind, narrow) -> None:
    """With a known law (isotropic Laplace and noise in the row space read in coordinates, the row-space optimum with
    directions shrunk to t, per-attribute noise read whole) the screening is the known-law map, which the converged attack tests beside its fitted maps on the same
    test releases: it reads no higher, exactly.  Without one (suppression: exact attributes) it is the ridge map at
    the first size of the curve, no higher up to the fits' variation (0.01 here)."""
    population, setting = narrow
    budget = setting.resolve("0.875x")
    if kind == "optimum":
        defense = row_space_optimal_at_budget(setting, budget)
        assert np.any(defense.direction_shrink == 1.0)  # directions that carry nothing
    else:
        defense = shaped_at_budget(setting, budget, 0.4) if kind == "shaped" else reference_at_budget(kind, setting, budget)
    quick = screening_score(defense, population, MEMBERS, 3, space=setting.space)
    full = linear_attack_score(defense, population, MEMBERS, 3, space=setting.space)
    assert not quick.converged and full.converged
    assert quick.releases < full.releases
    if kind == "suppression":
        assert quick.map.startswith("ridge") and quick.auc <= full.auc + 0.01
    else:
        assert quick.map.startswith("known law") and quick.releases == 0 and quick.auc <= full.auc
    assert quick.auc > 0.6  # it reads the signal, not chance


def test_suppression_released_beyond_the_cubes_threshold_reads_fully_revealing(narrow) -> None:
    """Suppression at 3/4 of L0 releases attributes whose centred candidates span 30 of the K - 1 = 39 dimensions
    exactly (more than half): the box-constrained decoding of the screening ridge (bngp.linear.BoxDecoder; Donoho
    and Tanner's threshold of the cube) recovers every membership, where the ridge map alone reads 0.991."""
    population, setting = narrow
    defense = reference_at_budget("suppression", setting, setting.resolve("0.75x"))
    released = np.asarray(population.genotypes, dtype=np.float64)[:, defense.shrink < 1]
    assert np.linalg.matrix_rank(released - released.mean(axis=0)) > 40 / 2
    quick = screening_score(defense, population, MEMBERS, 3, space=setting.space)
    assert quick.map == "ridge + box" and quick.auc == 1.0 and quick.tpr_at_01pct == 1.0
    simulator = CoordinateSimulator(population, UniformSubsetPrior(40, MEMBERS), defense, MEMBERS)
    x, b = simulator.sample(400, 1)
    validation_x, validation_b = simulator.sample(200, 2)
    test_x, test_b = simulator.sample(200, 3)
    ridge = fit_ridge(x, b, (validation_x, validation_b), prior_mean=np.full(40, 0.5))
    assert auc(ridge.predict(test_x).numpy().ravel(), test_b.numpy().ravel()) < 0.999


def test_the_known_law_map_is_the_linear_mmse_estimator() -> None:
    """Known answer (Kay, Estimation Theory, ch. 12): W = (M^T Sigma_b M + D)^-1 M^T Sigma_b, formed directly in
    float64, equals the push-through form of whitened_map_of_law to 1e-10; a variance <= 0 is refused."""
    generator = np.random.default_rng(4)
    k, width = 7, 12
    signal = generator.normal(size=(k, width))
    variance = generator.uniform(0.5, 2.0, width)
    root = generator.normal(size=(k, k))
    covariance = root @ root.T / k
    direct = np.linalg.solve(signal.T @ covariance @ signal + np.diag(variance), signal.T @ covariance)
    fit = whitened_map_of_law(signal, variance, np.full(k, 0.3), covariance, np.zeros(width))
    np.testing.assert_allclose(fit.weights.numpy(), direct, atol=1e-10)
    x = generator.normal(size=(3, width))
    np.testing.assert_allclose(fit.predict(torch.as_tensor(x)).numpy(), 0.3 + x @ direct, atol=1e-10)
    with pytest.raises(ValueError, match="variances > 0"):
        whitened_map_of_law(signal, np.zeros(width), np.full(k, 0.3), covariance, np.zeros(width))


def test_fitted_maps_converge_to_the_known_law_map(narrow) -> None:
    """Noise in the row space, Gaussian and rarely clipped: the ridge map fitted on 20,000 shadow releases (in the
    39 coordinates) reads within 0.01 AUC of the known-law map on the same test releases, and the two maps' scores
    correlate above 0.95: the law written down (signal U S diag(1 - a) / N, noise w^2, the N-of-K covariance) is
    the one the releases follow."""
    population, setting = narrow
    defense = shaped_at_budget(setting, setting.resolve("0.875x"), 0.4)
    reading = release_coordinates(defense, population, MEMBERS, setting.space)
    known = known_law_fit(defense, population, MEMBERS, reading)
    simulator = CoordinateSimulator(population, UniformSubsetPrior(population.n_individuals, MEMBERS), defense,
                                    MEMBERS)
    x, b = simulator.sample(20000, 1)
    fitted = fit_ridge(x, b, simulator.sample(500, 2), prior_mean=np.full(population.n_individuals, 0.5))
    test_x, test_b = simulator.sample(500, 3)
    known_scores, fitted_scores = known.predict(test_x).numpy(), fitted.predict(test_x).numpy()
    labels = test_b.numpy()
    assert auc(known_scores, labels) == pytest.approx(auc(fitted_scores, labels), abs=0.01)
    assert np.corrcoef(known_scores.ravel(), fitted_scores.ravel())[0, 1] > 0.95


def test_screening_keeps_the_best_and_reads_the_named_rows_to_convergence(narrow) -> None:
    """Against the ranking without screening (same seed: every converged reading uses the same stream): the same
    reference chosen with the same AUC; the references left at their screening reading read above the best by more
    than the margin; the rows a release decision names, and time-sharing, are always converged."""
    population, setting = narrow
    screened = rank_references(population, MEMBERS, "0.875x", seed=2, shrink_grid=(0.2, 0.5), setting=setting)
    full = rank_references(population, MEMBERS, "0.875x", seed=2, shrink_grid=(0.2, 0.5), setting=setting,
                           screen=False)
    assert [s.label for s in screened.scores] == [s.label for s in full.scores]
    assert screened.best_score.label == full.best_score.label
    assert screened.best_score.auc == full.best_score.auc
    assert all(score.converged for score in full.scores)
    left = [score for score in screened.scores if not score.converged]
    assert left, "at 7/8 of L0 the isotropic references read far above the row-space optimum: some are left out"
    assert all(score.auc > screened.best_score.auc + SCREEN_MARGIN for score in left)
    by_label = {score.label: score for score in screened.scores}
    assert all(by_label[label].converged for label in ALWAYS_CONVERGED if label in by_label)
    for score in screened.scores:  # a converged reading is the one the ranking without screening makes
        if score.converged:
            assert score.auc == next(s.auc for s in full.scores if s.label == score.label)
    record = screened.to_dict()
    assert [entry["converged"] for entry in record["references"]] == [s.converged for s in screened.scores]
    json.dumps(record, allow_nan=False)


def test_the_known_law_map_of_a_whole_release_is_the_same_for_packed_genotypes(narrow) -> None:
    """Per-attribute noise read whole: the map formed from bit-packed genotypes is the dense one (the same
    genotypes; its covariance solve is ill-conditioned here, condition number about 1e19, so the two products'
    memory layouts move the weights by up to 1e-3 of the largest: 1e-2 of it is allowed, far below what a wrong
    column would move); a mechanism with an exact attribute (a_j < 1, no noise) and time-sharing have none."""
    population, setting = narrow
    budget = setting.resolve("0.75x")
    defense = reference_at_budget("linear-optimal", setting, budget)
    dense = known_law_fit(defense, population, MEMBERS, None)
    packed = known_law_fit(defense, population.to_packed(), MEMBERS, None)
    assert dense is not None and packed is not None
    largest = float(dense.weights.abs().max())
    np.testing.assert_allclose(packed.weights.numpy(), dense.weights.numpy(), rtol=0, atol=1e-2 * largest)
    assert torch.equal(dense.release_mean, packed.release_mean)
    assert known_law_fit(reference_at_budget("suppression", setting, budget), population, MEMBERS, None) is None
    assert known_law_fit(reference_at_budget("time-sharing", setting, budget), population, MEMBERS, None) is None
