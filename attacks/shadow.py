"""Shadow data: labelled releases an attacker generates itself to orient and threshold its score.

An attack never sees evaluation labels; it fixes its direction and threshold on data it
can produce from its own knowledge:

- :func:`synthetic_shadow` -- attackers who know only public information (reference
  frequencies p_bar, the dataset size n, possibly the defense's noise law).  Individuals are
  drawn with independent Bernoulli(p_bar_j) SNVs (linkage equilibrium, the model of the
  LRT of Sankararaman et al. 2009; beacons simulated from alternate-allele frequencies as in
  Venkatesaramani et al. 2023), datasets of n are drawn uniformly among them and the release
  is their frequency vector, optionally plus the known noise, clipped to [0, 1].
- :func:`population_shadow` -- attackers who know the population Z but not the defense:
  no-defense releases x = b Z / n of uniformly drawn datasets of the known individuals.
- :func:`simulated_shadow` -- attackers who know the defense: releases from
  ``knowledge.simulate`` (against the actual defense, on the known population), labelled by
  the memberships it returns.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import torch

from .base import AttackKnowledge, TorchAttack
from .inputs import check_binary_panel, check_reference_frequencies, check_releases
from bngp.data.bits import BitMatrix
from bngp.data.priors import UniformSubsetPrior
from bngp.errors import DataFormatError, InputError
from bngp.release.mechanism import allele_frequencies
from bngp.release.noise import sample_noise
from bngp.release.noise_law import NoiseLaw
from bngp.rng import make_rng, spawn_seeds
from bngp.validation import check_in_open_interval, check_positive_int

__all__ = [
    "ShadowData",
    "synthetic_shadow",
    "population_shadow",
    "simulated_shadow",
    "shadow_sampler",
    "ReferenceShadowAttack",
]


@dataclass(frozen=True, eq=False)
class ShadowData:
    """Labelled shadow releases.

    Attributes:
        targets: (M, |Q|) genotypes of the shadow individuals (uint8, or bit-packed for synthetic ones).
        releases: (R, |Q|) float64 releases.
        labels: (R, M) 0/1 float32 memberships (member = 1).
        source: short description of where the releases come from (used in notes).
    """

    targets: np.ndarray | BitMatrix
    releases: np.ndarray
    labels: np.ndarray
    source: str


def _bernoulli_individuals(frequencies: np.ndarray, n_individuals: int, rng: np.random.Generator) -> BitMatrix:
    """(n_individuals, |Q|) independent Bernoulli(frequencies_j) entries, drawn in row blocks and kept
    bit-packed (2,500 synthetic individuals over 10^6 SNVs: 312 MB instead of 2.5 GB)."""
    packed = np.empty((n_individuals, (frequencies.size + 7) // 8), dtype=np.uint8)
    rows = max(1, (1 << 22) // max(frequencies.size, 1))
    for start in range(0, n_individuals, rows):
        stop = min(start + rows, n_individuals)
        packed[start:stop] = np.packbits(rng.random((stop - start, frequencies.size)) < frequencies, axis=1)
    return BitMatrix(packed, frequencies.size)


def synthetic_shadow(
    reference_frequencies: np.ndarray,
    n_members: int,
    n_releases: int,
    seed: int | np.random.Generator,
    *,
    n_individuals: int | None = None,
    noise_law: NoiseLaw | None = None,
) -> ShadowData:
    """Shadow releases of synthetic individuals drawn from p_bar (see module docstring).

    Args:
        reference_frequencies: p_bar (|Q|,).
        n_members: dataset size n.
        n_releases: number of shadow releases.
        seed: int seed or Generator.
        n_individuals: synthetic population size (default n + max(n, 200): every release
            has n members and at least 200 non-members among the shadow individuals).
        noise_law: noise added before clipping (default: none).
    """
    rng = make_rng(seed)
    size = n_members + max(n_members, 200) if n_individuals is None else n_individuals
    if size <= n_members:
        raise InputError(f"`n_individuals` must be > n_members ({n_members}), got {size}.")
    genotypes = _bernoulli_individuals(reference_frequencies, size, rng)
    memberships = UniformSubsetPrior(size, n_members).sample(n_releases, rng)
    releases = allele_frequencies(memberships, genotypes)
    source = "no-defense shadow releases of synthetic individuals drawn from p_bar"
    if noise_law is not None and noise_law.kind != "none":
        releases = np.clip(releases + sample_noise(noise_law, releases.shape, rng), 0.0, 1.0)
        source = f"shadow releases of synthetic individuals drawn from p_bar with the known {noise_law.kind} noise"
    return ShadowData(genotypes, releases, memberships, source)


def population_shadow(population: np.ndarray, n_members: int, n_releases: int, seed: int) -> ShadowData:
    """No-defense shadow releases x = b Z / n of uniformly drawn datasets of the known population."""
    rng = make_rng(seed)
    n_individuals = population.shape[0]
    if n_members >= n_individuals:
        raise InputError(f"`n_members` must be < the population size ({n_individuals}), got {n_members}.")
    memberships = UniformSubsetPrior(n_individuals, n_members).sample(n_releases, rng)
    return ShadowData(
        population, allele_frequencies(memberships, population), memberships, "no-defense shadow releases of the population"
    )


def simulated_shadow(knowledge: AttackKnowledge, n_releases: int, seed: int) -> ShadowData:
    """Shadow releases from ``knowledge.simulate`` against the defense, labelled on the population."""
    if knowledge.simulate is None:
        raise InputError("`simulate` must be provided.")
    population = check_binary_panel("population", knowledge.population)
    releases, memberships = knowledge.simulate(n_releases, seed)
    width = population.shape[1] * knowledge.composition  # c copies of f(D) (App. L.6)
    releases = check_releases(releases, width, name="simulated releases").astype(np.float64)
    memberships = np.asarray(memberships)
    if memberships.shape != (releases.shape[0], population.shape[0]):
        raise DataFormatError(
            f"`simulate` must return memberships of shape ({releases.shape[0]}, {population.shape[0]}), "
            f"got {memberships.shape}."
        )
    if not np.all((memberships == 0) | (memberships == 1)):
        raise DataFormatError("`simulate` must return 0/1 memberships.")
    return ShadowData(
        population,
        releases,
        memberships.astype(np.float32),
        "shadow releases simulated against the defense",
    )


def shadow_sampler(knowledge: AttackKnowledge, seed: int) -> Callable[[int], tuple[torch.Tensor, torch.Tensor]]:
    """sample(n) -> (releases (n, width), memberships (n, K)) float64 tensors: each call simulates
    n new releases against the defense (the i-th call with the i-th seed spawned from ``seed``),
    validated as :func:`simulated_shadow` does, except that composed releases may be wider than |Q|."""
    if knowledge.simulate is None:
        raise InputError("`simulate` must be provided.")
    population = check_binary_panel("population", knowledge.population)
    calls = [0]

    def sample(n: int) -> tuple[torch.Tensor, torch.Tensor]:
        calls[0] += 1
        releases, memberships = knowledge.simulate(int(n), spawn_seeds(seed, calls[0])[-1])
        releases = check_releases(releases, name="simulated releases").astype(np.float64)
        memberships = np.asarray(memberships)
        if memberships.shape != (releases.shape[0], population.shape[0]):
            raise DataFormatError(
                f"`simulate` must return memberships of shape ({releases.shape[0]}, {population.shape[0]}), "
                f"got {memberships.shape}."
            )
        return torch.from_numpy(releases), torch.from_numpy(memberships.astype(np.float64))

    return sample


class ReferenceShadowAttack(TorchAttack):
    """Base of attacks that know p_bar and n but not the defense (fixed LRT, score, Homer).

    ``fit`` stores p_bar and n, then orients the raw statistic and sets the threshold at
    false-positive rate ``alpha`` on :func:`synthetic_shadow` releases (no defense).
    """

    requires: ClassVar[frozenset[str]] = frozenset({"reference_frequencies", "n_members"})

    def __init__(self, alpha: float = 0.05, n_shadow_releases: int = 20) -> None:
        self.alpha = check_in_open_interval("alpha", alpha, 0.0, 1.0)
        self.n_shadow_releases = check_positive_int("n_shadow_releases", n_shadow_releases)

    def _fit(self, knowledge: AttackKnowledge, seed: int) -> None:
        self.reference_frequencies_ = check_reference_frequencies(knowledge.reference_frequencies)
        self.n_members_ = check_positive_int("n_members", knowledge.n_members)
        self.n_attributes_ = self.reference_frequencies_.size
        shadow = synthetic_shadow(self.reference_frequencies_, self.n_members_, self.n_shadow_releases, seed)
        self._calibrate(
            self._raw_numpy(shadow.targets, shadow.releases), shadow.labels, alpha=self.alpha, source=shadow.source
        )
