"""Shared fixtures of the attack tests: a small independent-SNV world and its release simulator.

The release simulator stands in for the evaluation harness's ``knowledge.simulate``: it
draws n-of-K memberships, releases the members' carrier frequencies and adds numpy Laplace
noise of a given scale (clipped to [0, 1]).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pytest
import torch

from bngp.attacks.base import AttackKnowledge
from bngp.data.independent import simulate_independent
from bngp.data.population import Population
from bngp.data.priors import UniformSubsetPrior
from bngp.release.noise_law import NoiseLaw

torch.set_num_threads(1)


@dataclass(frozen=True, eq=False)
class World:
    """A population, its dataset size and a release generator."""

    population: Population
    n_members: int

    def releases(self, n_releases: int, seed: int, laplace_scale: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
        """(releases (R, Q), memberships (R, K)) with optional Laplace noise, clipped to [0, 1]."""
        rng = np.random.default_rng(seed)
        memberships = UniformSubsetPrior(self.population.n_individuals, self.n_members).sample(n_releases, rng)
        releases = memberships.astype(np.float64) @ self.population.genotypes / self.n_members
        if laplace_scale > 0:
            releases = np.clip(releases + rng.laplace(0.0, laplace_scale, releases.shape), 0.0, 1.0)
        return releases, memberships

    def simulator(self, laplace_scale: float = 0.0) -> Callable[[int, int], tuple[np.ndarray, np.ndarray]]:
        """knowledge.simulate against Laplace noise of ``laplace_scale`` (seeds offset from evaluation)."""
        return lambda n_releases, seed: self.releases(n_releases, 10_000_000 + seed, laplace_scale)

    def knowledge(self, laplace_scale: float = 0.0) -> AttackKnowledge:
        """Everything an attacker may know, with the defense's Laplace noise law."""
        law = NoiseLaw("laplace", laplace_scale) if laplace_scale > 0 else NoiseLaw("none")
        return AttackKnowledge(
            reference_frequencies=self.population.reference_frequencies,
            reference_genotypes=self.population.reference,
            population=self.population.genotypes,
            n_members=self.n_members,
            membership_prior=np.full(self.population.n_individuals, self.n_members / self.population.n_individuals),
            noise_law=law,
            simulate=self.simulator(laplace_scale),
        )


@pytest.fixture(scope="session")
def acceptance_world() -> World:
    """The attacks' acceptance setting: K = 200 individuals (N = 50 members), |Q| = 2000 SNVs."""
    return World(simulate_independent(200, 200, 2000, seed=3), 50)


@pytest.fixture(scope="session")
def small_world() -> World:
    """A quick setting for contract tests: K = 40 (N = 10), |Q| = 300."""
    return World(simulate_independent(40, 60, 300, seed=5), 10)


@pytest.fixture(scope="session")
def wide_world() -> World:
    """More released SNVs than the old shadow-set default: K = 40 (N = 20), |Q| = 800."""
    return World(simulate_independent(40, 40, 800, seed=2), 20)
