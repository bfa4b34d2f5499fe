"""Many releases of one defense, for drawn or given memberships (shadow releases for outside attacks).

Rows are generated in chunks of :data:`RELEASE_CHUNK` exactly as the evaluation simulator does
(:func:`bngp.evaluate.make_simulator`): chunk c uses the c-th seed of ``spawn_seeds(seed,
n_chunks)`` for both the membership draw (uniform subsets of n of the K individuals, the prior of
arXiv:2410.07414 section 2.1) and the noise.  Each row's defense is the one for that row's number of
members.  Every release is drawn by :func:`bngp.release.sample_releases` (x = clip(f(D) + xi, 0, 1),
section 2.2), or published by the defense's OpenDP sampler.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import torch
from tqdm.auto import tqdm

from bngp.data.population import Population
from bngp.data.priors import UniformSubsetPrior
from bngp.errors import InputError
from bngp.rng import spawn_seeds, torch_generator
from .mechanism import Mechanism
from .sampling import NoiseSource, release_mechanism, sample_releases

__all__ = ["RELEASE_CHUNK", "publish_batch", "simulate_releases"]

#: releases generated per chunk (bounds the working memory; part of what a seed reproduces).
RELEASE_CHUNK = 1000


def publish_batch(mechanism: Mechanism, defense: NoiseSource, b: np.ndarray, generator: torch.Generator) -> np.ndarray:
    """Releases for the rows of ``b`` (float32 0/1): seeded noise (:func:`sample_releases`), or OpenDP's
    publishable release when the defense samples with ``sampler=opendp`` (its ``secure_release``,
    :meth:`bngp.defenses.DPDefense.secure_release`; then ``generator`` is unused)."""
    secure = getattr(defense, "secure_release", None)
    if secure is not None and getattr(defense, "sampler", "torch") == "opendp":
        x_hat = mechanism.statistic(torch.as_tensor(b)).double().numpy()
        return np.asarray(secure(b, x_hat), dtype=np.float64)
    return sample_releases(mechanism, defense, b, generator)


def simulate_releases(
    population: Population,
    defense_for: Callable[[int], NoiseSource],
    seed: int,
    *,
    label: str,
    draws: int | None = None,
    n_members: int | None = None,
    memberships: np.ndarray | None = None,
    chunk: int = RELEASE_CHUNK,
    progress: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """M releases of the defense ``spec`` for drawn or given memberships.

    Args:
        population: the K individuals.
        defense_for: the defense for n members, called once per distinct member count n (its
            calibration may depend on n).
        label: the defense in words, for the error when two member counts give releases of different widths.
        seed: non-negative int; chunk c uses ``spawn_seeds(seed, n_chunks)[c]`` for the draw and the
            noise, as :func:`bngp.evaluate.make_simulator` does.
        draws, n_members: draw ``draws`` memberships of ``n_members`` of K uniformly (``memberships`` None).
        memberships: (M, K) 0/1 int8 matrix, one release per row; rows are processed grouped by
            member count (ascending), in file order within a group, and returned in file order.
        chunk: releases generated at once.

    Returns:
        releases (M, n_outputs) float64 and memberships (M, K) int8.
    """
    k = population.n_individuals
    draw = memberships is None
    if draw:
        memberships = np.zeros((draws, k), dtype=np.int8)
        groups = [(int(n_members), np.arange(draws))]
    else:
        sizes = memberships.sum(axis=1, dtype=np.int64)
        groups = [(int(n), np.flatnonzero(sizes == n)) for n in np.unique(sizes)]
    m = memberships.shape[0]
    n_chunks = sum(math.ceil(rows.size / chunk) for _, rows in groups)
    chunk_seeds = iter(spawn_seeds(seed, n_chunks))
    releases: np.ndarray | None = None
    with tqdm(total=m, desc="bngp release", unit="release", disable=not progress) as bar:
        for n, rows in groups:
            defense = defense_for(n)
            mechanism = release_mechanism(population.genotypes, defense.composition)
            if releases is None:
                releases = np.empty((m, mechanism.n_outputs), dtype=np.float64)
            elif mechanism.n_outputs != releases.shape[1]:
                raise InputError(f"defense `{label}` releases a different number of statistics for {n} members.")
            prior = UniformSubsetPrior(k, n) if draw else None
            for start in range(0, rows.size, chunk):
                index = rows[start:start + chunk]
                chunk_seed = next(chunk_seeds)
                if draw:
                    b = prior.sample(index.size, np.random.default_rng(chunk_seed))
                    memberships[index] = b
                else:
                    b = memberships[index].astype(np.float32)
                releases[index] = publish_batch(mechanism, defense, b, torch_generator(chunk_seed))
                bar.update(index.size)
    return releases, memberships
