"""Pooling the copies of a composed release (attacks.pooling) and the linear attackers that read a
composed release through it.

Known answers:
- for copies x_b = f(D) + e_b with independent noise of standard deviation s_b, the
  least-squares combination is proportional to 1 / s_b^2 (the inverse-variance average; the
  Wiener weights only rescale it), and a copy that does not depend on D gets weight 0;
- the pooled copies are one Gaussian mechanism of 1 / s^2 = sum_b 1 / s_b^2 (sufficiency of the
  inverse-variance average for Gaussian noise), so the attack on the composition reads it as
  the same attack reads that single mechanism (measured below: 0.863 against 0.865 on seed 0).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from bngp.attacks import LinearAttack, WhitenedAttack, for_composition
from bngp.attacks.base import attack_knowledge
from bngp.attacks.pooling import CopyPooling
from bngp.data.independent import simulate_independent
from bngp.data.priors import UniformSubsetPrior
from bngp.defenses import GaussianDefense
from bngp.defenses.base import Defense
from bngp.errors import InputError
from bngp.evaluate import evaluate_defense
from bngp.linear import fit_ridge

K, N, Q = 100, 50, 300
#: noise of the four noisy copies; the fifth copy is the data-independent population mean.
SIGMAS = (0.1, 0.1, 0.2, 0.2)
SINGLE = 1.0 / np.sqrt(sum(1.0 / s**2 for s in SIGMAS))


class FourNoisyCopiesAndTheMean(Defense):
    """Five copies of f(D): four with Gaussian noise of SIGMAS, the fifth replaced by the
    population's mean frequencies (a learned block that releases f(theta))."""

    name = "four-noisy-copies-and-the-mean"
    composition = 5

    def __init__(self, mean: np.ndarray) -> None:
        self.mean = torch.as_tensor(mean, dtype=torch.float64)

    def noise(self, b: torch.Tensor, x_hat: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        width = x_hat.shape[1] // 5
        scale = torch.tensor((*SIGMAS, 0.0), dtype=x_hat.dtype).repeat_interleave(width)
        noise = scale * torch.randn(x_hat.shape, generator=generator, dtype=x_hat.dtype)
        noise[:, 4 * width:] = self.mean.to(x_hat.dtype) - x_hat[:, 4 * width:]
        return noise


@pytest.fixture(scope="module")
def world():
    population = simulate_independent(K, 100, Q, seed=1)
    return population, UniformSubsetPrior(K, N), FourNoisyCopiesAndTheMean(population.genotypes.mean(axis=0))


def test_pooling_weights_are_inverse_variance_and_zero_for_a_constant_copy() -> None:
    rng = np.random.default_rng(0)
    rows, width = 400, 200
    signal = rng.uniform(0.2, 0.8, (rows, width))
    sigmas = np.array([0.05, 0.1, 0.2])
    copies = [signal + s * rng.standard_normal((rows, width)) for s in sigmas] + [np.full((rows, width), 0.5)]
    pooling = CopyPooling.estimate(torch.from_numpy(np.hstack(copies)), torch.from_numpy(signal), 4)
    weights = np.array(pooling.weights)
    np.testing.assert_allclose(weights[:3] / weights[0], (sigmas[0] / sigmas) ** 2, rtol=0.05)
    assert abs(weights[3]) < 1e-8 and pooling.width == width and pooling.releases == rows
    # Wiener shrinkage: sum_b w_b = V sum(1/s^2) / (1 + V sum(1/s^2)) with V the signal variance
    precision = np.var(signal) * np.sum(1.0 / sigmas**2)
    assert weights.sum() == pytest.approx(precision / (1.0 + precision), rel=0.01)


def test_pooling_rejects_mismatched_shapes_and_releases_that_do_not_vary() -> None:
    with pytest.raises(InputError, match="copies"):
        CopyPooling.estimate(torch.zeros((10, 9)), torch.zeros((10, 2)), 4)
    with pytest.raises(InputError, match="nothing to pool"):
        CopyPooling.estimate(torch.full((10, 8), 0.3), torch.rand((10, 4)), 2)
    with pytest.raises(InputError, match="outputs"):
        CopyPooling((0.5, 0.5), 4, 10).pool(torch.zeros((3, 6)))


def test_the_expanded_fit_reads_the_whole_release_as_the_pooled_fit_reads_the_pooled_one() -> None:
    rng = np.random.default_rng(1)
    pooling = CopyPooling((0.0, 0.7, 0.3), 20, 100)
    releases = torch.from_numpy(rng.uniform(0, 1, (60, 60)))
    memberships = torch.from_numpy(rng.integers(0, 2, (60, 8)).astype(np.float64))
    validation = (torch.from_numpy(rng.uniform(0, 1, (30, 60))), torch.from_numpy(rng.integers(0, 2, (30, 8)).astype(np.float64)))
    fit = fit_ridge(pooling.pool(releases), memberships, (pooling.pool(validation[0]), validation[1]))
    expanded = pooling.expand(fit)
    fresh = torch.from_numpy(rng.uniform(0, 1, (7, 60)))
    assert expanded.weights.shape == (60, 8)
    torch.testing.assert_close(expanded.predict(fresh), fit.predict(pooling.pool(fresh)), rtol=1e-10, atol=1e-12)


def test_linear_attack_on_a_composition_reads_it_as_the_pooled_single_mechanism(world) -> None:
    """At 1,200 shadow releases: the pooled attack reads the composition as it reads the one
    Gaussian mechanism its copies pool to (measured 0.863 / 0.865 on seed 0), while the map on the
    whole 1,500-wide release is far from converged (0.761)."""
    population, prior, defense = world

    def auc(attack, noise) -> float:
        result = evaluate_defense(population, prior, noise, {"linear": attack}, releases=100, seed=0, n_members=N)
        return result.attacks["linear"].auc

    pooled = LinearAttack(n_shadow_releases=1200)
    composed = auc(pooled, defense)
    single = auc(LinearAttack(n_shadow_releases=1200), GaussianDefense(SINGLE))
    whole = auc(LinearAttack(n_shadow_releases=1200, pool_copies=False), defense)
    assert abs(composed - single) < 0.02, (composed, single)
    assert composed > whole + 0.05, (composed, whole)
    weights = np.array(pooled.pooling_.weights)
    np.testing.assert_allclose(weights[:4] / weights[0], (SIGMAS[0] / np.array(SIGMAS)) ** 2, rtol=0.1)
    assert abs(weights[4]) < 1e-6


def test_linear_attackers_read_a_composed_release_natively_and_check_its_width(world) -> None:
    population, prior, defense = world
    for cls in (LinearAttack, WhitenedAttack):
        attack = cls(n_shadow_releases=400)
        assert for_composition(attack, 5) is attack
    result = evaluate_defense(population, prior, defense, {"linear": LinearAttack(n_shadow_releases=1200),
                                                           "whitened": WhitenedAttack(n_shadow_releases=1200)},
                              releases=100, seed=0, n_members=N)
    for name in ("linear", "whitened"):
        entry = result.attacks[name]
        assert entry.pooling["width"] == Q and len(entry.pooling["weights"]) == 5
    # the whitened discriminant on the pooled release reads it about as ridge does (white noise: no
    # low-dimensional structure for it to project out)
    assert abs(result.attacks["whitened"].auc - result.attacks["linear"].auc) < 0.03, result.attacks
    attack = LinearAttack(n_shadow_releases=400)
    attack.fit(attack_knowledge(population, prior, defense, N), seed=0)
    with pytest.raises(InputError, match="1500 columns"):
        attack.score(population.genotypes, np.full((2, Q), 0.5))
    assert attack.score(population.genotypes, np.full((2, 5 * Q), 0.5)).shape == (2, K)


class NoisyCopiesAndALeakyBlock(Defense):
    """Three copies of f(D): two with N(0, 0.5^2) noise, then a block that releases f(theta) + N(0, 0.3^2)
    except on its first LEAKY attributes, where it releases f(theta) + (f(D) - f(theta)) / 2 without
    noise (a learned block with per-attribute shrinkage and noise scales: shrinkage 1/2 and no noise
    on a few attributes, shrinkage 1 and noise elsewhere)."""

    name = "noisy-copies-and-a-leaky-block"
    composition = 3
    leaky = 30

    def __init__(self, mean: np.ndarray) -> None:
        self.mean = torch.as_tensor(mean, dtype=torch.float64)

    def noise(self, b: torch.Tensor, x_hat: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        width = x_hat.shape[1] // 3
        noise = 0.5 * torch.randn(x_hat.shape, generator=generator, dtype=x_hat.dtype)
        block = slice(2 * width, 3 * width)
        noise[:, block] = self.mean.to(x_hat.dtype) - x_hat[:, block] + 0.3 * noise[:, block] / 0.5
        leaky = slice(2 * width, 2 * width + self.leaky)
        noise[:, leaky] = (self.mean[: self.leaky].to(x_hat.dtype) - x_hat[:, leaky]) / 2
        return noise


def test_a_copy_that_leaks_some_attributes_is_read_through_the_whole_release(world):
    # One weight per copy must keep the third copy's weight small (its noisy attributes would
    # otherwise swamp the pooled release), which averages its 30 noiseless attributes away; the map
    # on the whole release weights them by attribute.  The attack keeps the map of higher validation
    # AUC (measured, seed 0: whole 0.826, pooled 0.583; on 10 evaluation releases 0.811, as the
    # Bayesian attacker warm-started from it).
    population, prior, _ = world
    defense = NoisyCopiesAndALeakyBlock(population.genotypes.mean(axis=0))
    result = evaluate_defense(population, prior, defense, "linear", releases=10, seed=0, n_members=N)
    whole = result.attacks["linear"].whole_release
    assert whole["kept"] and whole["validation_auc"] > whole["pooled_validation_auc"] + 0.2
    assert result.attacks["linear"].auc > whole["pooled_validation_auc"] + 0.15
