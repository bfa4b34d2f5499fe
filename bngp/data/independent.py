"""Fast independent-SNV population model (for tests and quick experiments).

Each SNV j gets a carrier frequency q_j ~ Beta(alpha, beta) restricted to
[min_frequency, 1 - min_frequency]; every individual (population and reference panel alike)
carries SNV j independently with probability q_j.  Individuals are exchangeable and SNVs are
in linkage equilibrium by construction, which is the model the LRT of Sankararaman et al.
(2009) assumes.
"""

from __future__ import annotations

import numpy as np

from bngp.data.population import Population
from bngp.rng import SeedLike, make_rng, resolve_seed
from bngp.validation import check_in_open_interval, check_positive_int

__all__ = ["simulate_independent"]


def simulate_independent(
    n_individuals: int,
    n_reference: int,
    n_snvs: int,
    *,
    seed: SeedLike = None,
    alpha: float = 0.5,
    beta: float = 1.5,
    min_frequency: float = 0.05,
) -> Population:
    """Simulate K individuals and a reference panel with independent Bernoulli SNVs.

    Args:
        n_individuals: K, individuals who may be members.
        n_reference: size of the disjoint reference panel.
        n_snvs: |Q|, number of SNVs.
        seed: int seed (recorded in the metadata) or Generator.
        alpha, beta: Beta-distribution shape of carrier frequencies.
        min_frequency: frequencies are redrawn into [min_frequency, 1 - min_frequency].

    Returns:
        A :class:`Population` whose metadata records the model and its parameters.
    """
    check_positive_int("individuals", n_individuals)
    check_positive_int("reference", n_reference)
    check_positive_int("snvs", n_snvs)
    check_in_open_interval("min_frequency", min_frequency, 0.0, 0.5)
    recorded_seed = None if isinstance(seed, np.random.Generator) else resolve_seed(seed)
    rng = make_rng(seed if recorded_seed is None else recorded_seed)
    frequencies = rng.beta(alpha, beta, size=n_snvs)
    frequencies = min_frequency + (1 - 2 * min_frequency) * frequencies
    everyone = (rng.random((n_individuals + n_reference, n_snvs)) < frequencies).astype(np.uint8)
    return Population(
        genotypes=everyone[:n_individuals],
        reference=everyone[n_individuals:],
        metadata={
            "source": "independent",
            "seed": recorded_seed,
            "alpha": alpha,
            "beta": beta,
            "min_frequency": min_frequency,
        },
    )
