"""The ridge inverse of the release against the known population (Dinur & Nissim 2003).

The un-noised release is x = A b with A = Z^T / n (Z the K x |Q| population, n the number of
members, b in {0,1}^K).  Its ridge inverse is (A^T A + lambda I)^+ A^T with
lambda = ``ridge`` * trace(A^T A) / K, computed from the eigendecomposition of the K x K Gram
matrix A^T A, eigenvalues below 1e-12 of the largest dropped (a pseudo-inverse when the
population is rank deficient and ``ridge`` = 0).  The reconstruction attacks and the Bayesian
attacker's population-informed head both start from it.
"""

from __future__ import annotations

import hashlib

import numpy as np
import torch

__all__ = ["PopulationInverse", "population_inverse"]

#: eigenvalues of A^T A below this fraction of the largest are treated as zero.
RELATIVE_EIGENVALUE_CUTOFF = 1e-12


class PopulationInverse:
    """A = Z^T / n (|Q| x K), (A^T A + lambda I)^+ (K x K) and lambda, all float64 torch.

    Attributes:
        design: A.
        gram_inverse: (A^T A + lambda I)^+.
        penalty: lambda.
    """

    def __init__(self, design: torch.Tensor, gram_inverse: torch.Tensor, penalty: float) -> None:
        self.design = design
        self.gram_inverse = gram_inverse
        self.penalty = penalty
        self._map: np.ndarray | None = None

    def linear_map(self, theta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(W, c) with b_hat = W x + c = theta + W (x - A theta), W = (A^T A + lambda I)^+ A^T:
        the reconstruction of b from x shrunk towards the prior mean theta; exact (b_hat = b)
        for a noiseless release when |Q| >= K, Z has full column rank and lambda -> 0."""
        if self._map is None:
            self._map = (self.gram_inverse @ self.design.T).numpy()
        w = self._map.copy()
        return w, np.asarray(theta, dtype=np.float64) - w @ (self.design.numpy() @ theta)


#: the most recent inverses, by (population digest, shape, n, ridge): the trainer's refits, the
#: fresh-attacker check and the evaluation invert the same population again and again.
_CACHE: dict[tuple, PopulationInverse] = {}
_CACHE_SIZE = 4


def population_inverse(genotypes: np.ndarray, n_members: float, ridge: float) -> PopulationInverse:
    """The ridge inverse of x = Z^T b / n for the population ``genotypes`` (K, |Q|), computed once
    per population, n and ridge (a small cache keyed by a digest of the genotypes)."""
    values = np.ascontiguousarray(genotypes)
    key = (hashlib.blake2b(values.view(np.uint8), digest_size=16).hexdigest(), values.shape, values.dtype.str,
           float(n_members), float(ridge))
    if key not in _CACHE:
        if len(_CACHE) >= _CACHE_SIZE:
            del _CACHE[next(iter(_CACHE))]
        _CACHE[key] = _compute_inverse(values, n_members, ridge)
    return _CACHE[key]


def _compute_inverse(genotypes: np.ndarray, n_members: float, ridge: float) -> PopulationInverse:
    design = torch.from_numpy(np.asarray(genotypes)).to(torch.float64).T / float(n_members)
    gram = design.T @ design
    eigenvalues, eigenvectors = torch.linalg.eigh(gram)
    penalty = ridge * float(eigenvalues.sum()) / gram.shape[0]
    keep = eigenvalues > RELATIVE_EIGENVALUE_CUTOFF * float(eigenvalues.max())
    inverse = torch.where(keep, 1.0 / (eigenvalues + penalty).clamp(min=1e-300), torch.zeros_like(eigenvalues))
    return PopulationInverse(design, (eigenvectors * inverse) @ eigenvectors.T, penalty)
