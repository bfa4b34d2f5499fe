"""Fast independent-SNV population model (for tests and quick experiments).

Each SNV j gets a carrier frequency q_j ~ Beta(alpha, beta) restricted to
[min_frequency, 1 - min_frequency]; every individual (population and reference panel alike)
carries SNV j independently with probability q_j.  Individuals are exchangeable and SNVs are
in linkage equilibrium by construction, which is the model the LRT of Sankararaman et al.
(2009) assumes.
"""

from __future__ import annotations

import numpy as np

from bngp.data.bits import BitMatrix
from bngp.data.population import Population
from bngp.rng import SeedLike, resolve_rng
from bngp.validation import check_in_open_interval, check_positive_int

__all__ = ["simulate_independent"]

#: uniform draws made at once (128 MB of float64): bounds the memory of a large draw.
_DRAW_ELEMENTS = 1 << 24


def simulate_independent(
    n_individuals: int,
    n_reference: int,
    n_snvs: int,
    *,
    seed: SeedLike = None,
    alpha: float = 0.5,
    beta: float = 1.5,
    min_frequency: float = 0.05,
    packed: bool = False,
) -> Population:
    """Simulate K individuals and a reference panel with independent Bernoulli SNVs.

    Args:
        n_individuals: K, individuals who may be members.
        n_reference: size of the disjoint reference panel.
        n_snvs: |Q|, number of SNVs.
        seed: int seed (recorded in the metadata) or Generator.
        alpha, beta: Beta-distribution shape of carrier frequencies.
        min_frequency: frequencies are redrawn into [min_frequency, 1 - min_frequency].
        packed: return bit-packed matrices (:class:`bngp.data.bits.BitMatrix`); the draw is
            packed in row blocks either way, so the dense matrix is never held whole.

    Returns:
        A :class:`Population` whose metadata records the model and its parameters.
    """
    check_positive_int("individuals", n_individuals)
    check_positive_int("reference", n_reference)
    check_positive_int("snvs", n_snvs)
    check_in_open_interval("min_frequency", min_frequency, 0.0, 0.5)
    rng, recorded_seed = resolve_rng(seed)
    frequencies = rng.beta(alpha, beta, size=n_snvs)
    frequencies = min_frequency + (1 - 2 * min_frequency) * frequencies
    # Rows drawn in blocks (the same stream as one (K + R, |Q|) draw) and packed as they come.
    everyone = np.empty((n_individuals + n_reference, (n_snvs + 7) // 8), dtype=np.uint8)
    rows = max(1, _DRAW_ELEMENTS // n_snvs)
    for start in range(0, everyone.shape[0], rows):
        stop = min(start + rows, everyone.shape[0])
        everyone[start:stop] = np.packbits(rng.random((stop - start, n_snvs)) < frequencies, axis=1)
    everyone = BitMatrix(everyone, n_snvs)
    genotypes, reference = everyone.take_rows(slice(0, n_individuals)), everyone.take_rows(slice(n_individuals, None))
    return Population(
        genotypes=genotypes if packed else genotypes.to_dense(),
        reference=reference if packed else reference.to_dense(),
        metadata={
            "source": "independent",
            "seed": recorded_seed,
            "alpha": alpha,
            "beta": beta,
            "min_frequency": min_frequency,
        },
    )
