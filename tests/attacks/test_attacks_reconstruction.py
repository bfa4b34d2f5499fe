"""Reconstruction attacks: least squares / ridge and LP decoding against numpy/scipy transcriptions."""

from __future__ import annotations

import time

import numpy as np
import pytest
import torch
from scipy.optimize import linprog

from bngp.attacks import L1Reconstruction, LeastSquaresReconstruction
from bngp.attacks.base import AttackKnowledge
from bngp.data.independent import simulate_independent
from bngp.errors import InputError
from bngp.metrics import auc


def _setup(small_world):
    population = small_world.population.genotypes
    knowledge = AttackKnowledge(population=population, n_members=small_world.n_members)
    design = population.T.astype(float) / small_world.n_members
    return population, knowledge, design


@pytest.mark.parametrize("attack_class", [LeastSquaresReconstruction, L1Reconstruction])
def test_exact_recovery_on_noiseless_releases(small_world, attack_class) -> None:
    population, knowledge, _ = _setup(small_world)
    attack = attack_class().fit(knowledge, seed=0)
    releases, memberships = small_world.releases(5, seed=1)
    assert ((releases == 0) | (releases == 1)).any(), "the check should include clipped (dropped) coordinates"
    np.testing.assert_allclose(attack.score(population, releases), memberships, atol=1e-6)
    assert attack.threshold_ == 0.5 and attack.orientation_ == 1


def test_least_squares_matches_numpy_lstsq(small_world) -> None:
    population, knowledge, design = _setup(small_world)
    attack = LeastSquaresReconstruction().fit(knowledge, seed=0)
    releases, _ = small_world.releases(4, seed=2, laplace_scale=0.02)
    expected = np.stack(
        [np.linalg.lstsq(design[(x > 0) & (x < 1)], x[(x > 0) & (x < 1)], rcond=None)[0] for x in releases]
    )
    assert ((releases == 0) | (releases == 1)).any()
    np.testing.assert_allclose(attack.score(population, releases), expected, atol=1e-8)


def test_ridge_and_down_weighting_match_transcription(small_world) -> None:
    population, knowledge, design = _setup(small_world)
    attack = LeastSquaresReconstruction(ridge=0.1, clipped_weight=0.25).fit(knowledge, seed=0)
    releases, _ = small_world.releases(3, seed=3, laplace_scale=0.05)
    gram = design.T @ design
    penalty = 0.1 * np.trace(gram) / gram.shape[0]
    prior = small_world.n_members / population.shape[0]
    expected = []
    for x in releases:
        w = np.where((x <= 0) | (x >= 1), 0.25, 1.0)
        y = x - design @ np.full(gram.shape[0], prior)
        delta = np.linalg.solve(design.T @ (w[:, None] * design) + penalty * np.eye(gram.shape[0]), design.T @ (w * y))
        expected.append(prior + delta)
    np.testing.assert_allclose(attack.score(population, releases), np.array(expected), atol=1e-8)


def test_l1_matches_linear_program() -> None:
    world = simulate_independent(8, 5, 40, seed=11)
    design = world.genotypes.T.astype(float) / 4
    rng = np.random.default_rng(0)
    x = np.clip(design @ (rng.random(8) < 0.5) + rng.laplace(0, 0.05, 40), 0.001, 0.999)
    attack = L1Reconstruction(max_iterations=20000, tolerance=1e-10).fit(
        AttackKnowledge(population=world.genotypes, n_members=4), seed=0
    )
    got = attack.score(world.genotypes, x)[0]
    n_q, n_k = design.shape
    # min sum t  s.t.  A b - x <= t,  -(A b - x) <= t
    cost = np.r_[np.zeros(n_k), np.ones(n_q)]
    upper = np.block([[design, -np.eye(n_q)], [-design, -np.eye(n_q)]])
    bounds = [(None, None)] * n_k + [(0, None)] * n_q
    lp = linprog(cost, A_ub=upper, b_ub=np.r_[x, -x], bounds=bounds, method="highs")
    # the L1 minimiser need not be unique: compare the optimal objective
    assert lp.status == 0
    assert np.abs(design @ got - x).sum() == pytest.approx(lp.fun, rel=1e-6)


@pytest.mark.parametrize("packed", [False, True])
def test_l1_float32_iterations_match_float64(packed) -> None:
    """Reference: the same ADMM in float64.  Tolerances: float32 products round at 1e-7 relative
    and ADMM does not amplify them (measured at K = 800, |Q| = 5000: objective equal to 1e-7)."""
    world = simulate_independent(60, 5, 400, seed=3, packed=packed)
    genotypes = world.genotypes.to_dense() if packed else world.genotypes
    knowledge = AttackKnowledge(population=world.genotypes, n_members=30)
    rng = np.random.default_rng(2)
    memberships = np.zeros((6, 60))
    for row in memberships:
        row[rng.choice(60, 30, replace=False)] = 1
    releases = np.clip(memberships @ genotypes / 30 + rng.laplace(0, 0.05, (6, 400)), 0, 1)
    single = L1Reconstruction(max_iterations=300).fit(knowledge, seed=0).score(world.genotypes, releases)
    double = L1Reconstruction(max_iterations=300, precision="float64").fit(knowledge, seed=0).score(
        world.genotypes, releases)
    assert np.abs(single - double).max() < 1e-4
    for got, expected, labels in zip(single, double, memberships):
        assert auc(got, labels) == pytest.approx(auc(expected, labels), abs=1e-3)


def test_l1_precision_is_checked() -> None:
    with pytest.raises(InputError, match="`precision` must be one of float32, float64"):
        L1Reconstruction(precision="float16")


def test_l1_is_robust_to_sparse_large_noise(small_world) -> None:
    population, knowledge, _ = _setup(small_world)
    releases, memberships = small_world.releases(3, seed=4)
    rng = np.random.default_rng(1)
    corrupted = releases.copy()
    mask = rng.random(releases.shape) < 0.08
    corrupted[mask] = np.clip(corrupted[mask] + rng.choice([-0.4, 0.4], mask.sum()), 0.0, 1.0)
    l1 = L1Reconstruction().fit(knowledge, seed=0).score(population, corrupted)
    least_squares = LeastSquaresReconstruction().fit(knowledge, seed=0).score(population, corrupted)
    assert np.abs(l1 - memberships).max() < 0.05
    assert np.abs(least_squares - memberships).max() > 0.2


def test_reconstruction_torch_gradient_is_the_pseudo_inverse(small_world) -> None:
    population, knowledge, design = _setup(small_world)
    attack = LeastSquaresReconstruction().fit(knowledge, seed=0)
    releases, _ = small_world.releases(1, seed=5)
    releases = np.clip(releases, 0.01, 0.99)
    x = torch.tensor(releases, requires_grad=True)
    scores = attack.score_torch(torch.from_numpy(population[[7, 2]]), x)
    assert scores.shape == (1, 2)
    scores[0, 0].backward()
    np.testing.assert_allclose(x.grad[0].numpy(), np.linalg.pinv(design)[7], atol=1e-8)


def test_l1_torch_form_is_differentiable(small_world) -> None:
    population, knowledge, _ = _setup(small_world)
    attack = L1Reconstruction(max_iterations=50).fit(knowledge, seed=0)
    releases, _ = small_world.releases(2, seed=6, laplace_scale=0.01)
    x = torch.tensor(releases, requires_grad=True)
    attack.score_torch(torch.from_numpy(population), x).sum().backward()
    assert torch.all(torch.isfinite(x.grad))


def test_targets_outside_the_population_are_rejected(small_world) -> None:
    population, knowledge, _ = _setup(small_world)
    attack = LeastSquaresReconstruction().fit(knowledge, seed=0)
    releases, _ = small_world.releases(1, seed=7)
    outsider = np.vstack([population[0], small_world.population.reference[0]])
    with pytest.raises(InputError, match=r"`targets` row 1 is not an individual of the known population"):
        attack.score(outsider, releases)


@pytest.mark.slow
def test_prototype_measurement_k800_q5000() -> None:
    """The reconstruction prototype's measurement: K = 800, |Q| = 5000, N = 400: AUC 1.000 (no defense), ~0.97 (Laplace mean |xi| 0.01)."""
    world = simulate_independent(800, 100, 5000, seed=8)
    knowledge = AttackKnowledge(population=world.genotypes, n_members=400)
    attack = LeastSquaresReconstruction().fit(knowledge, seed=0)
    rng = np.random.default_rng(0)
    memberships = np.zeros((10, 800))
    for row in memberships:
        row[rng.choice(800, 400, replace=False)] = 1
    clean = memberships @ world.genotypes / 400
    noisy = np.clip(clean + rng.laplace(0.0, 0.01, clean.shape), 0, 1)
    start = time.perf_counter()
    clean_scores = attack.score(world.genotypes, clean)
    noisy_scores = attack.score(world.genotypes, noisy)
    seconds = time.perf_counter() - start
    assert np.mean([auc(s, b) for s, b in zip(clean_scores, memberships)]) == 1.0
    assert np.mean([auc(s, b) for s, b in zip(noisy_scores, memberships)]) > 0.95
    assert seconds < 10
