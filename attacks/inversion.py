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

from bngp.data.bits import BitMatrix
from bngp.errors import InputError

__all__ = ["Design", "PopulationInverse", "population_inverse"]

#: genotype entries converted to float at once by a packed :class:`Design` (16 MB in float64).
_BLOCK_ELEMENTS = 1 << 21

#: eigenvalues of A^T A below this fraction of the largest are treated as zero.
RELATIVE_EIGENVALUE_CUTOFF = 1e-12


class Design:
    """The operator A = Z^T / n (|Q| x K) in float64, from a dense or a bit-packed population.

    Dense populations keep A as one float64 tensor (``matrix``); a
    :class:`bngp.data.bits.BitMatrix` stays packed and every product runs over blocks of SNVs
    (memory: the bits plus one (K x block) float64 block), which is what lets the
    reconstruction attacks run at beacon scale.  All products are torch and differentiable in
    their argument (packed: d(A v)/dv applied to a gradient g is A^T g and vice versa, so the
    backward pass runs over the same blocks instead of keeping them).
    """

    def __init__(self, genotypes: np.ndarray | BitMatrix, n_members: float) -> None:
        self.n_members = float(n_members)
        self.packed = genotypes if isinstance(genotypes, BitMatrix) else None
        self.matrix = None if self.packed is not None else \
            torch.from_numpy(np.asarray(genotypes)).to(torch.float64).T / self.n_members
        self.shape = (genotypes.shape[1], genotypes.shape[0])

    def _blocks(self, dtype: torch.dtype):
        """Yield (start, stop, Z block as a (K, width) ``dtype`` tensor), every block written into one
        buffer (no allocation per block: the allocator's heap stays flat)."""
        width = max(8, _BLOCK_ELEMENTS // self.shape[1] // 8 * 8)
        buffer = torch.empty((self.shape[1], width), dtype=dtype)
        for start, stop, values in self.packed.blocks(width):
            view = buffer[:, : stop - start]
            view.copy_(torch.from_numpy(values))
            yield start, stop, view

    def _packed_apply(self, delta: torch.Tensor) -> torch.Tensor:
        out = torch.empty((delta.shape[0], self.shape[0]), dtype=delta.dtype)
        for start, stop, z in self._blocks(delta.dtype):
            out[:, start:stop] = delta @ z
        return out / self.n_members

    def _packed_adjoint(self, y: torch.Tensor) -> torch.Tensor:
        total = torch.zeros((y.shape[0], self.shape[1]), dtype=y.dtype)
        for start, stop, z in self._blocks(y.dtype):
            total.addmm_(y[:, start:stop], z.T)
        return total / self.n_members

    def apply(self, delta: torch.Tensor) -> torch.Tensor:
        """A delta for each row: (R, K) -> (R, |Q|)."""
        if self.matrix is not None:
            return delta @ self.matrix.T
        return _PackedProduct.apply(delta, self, False)

    def adjoint(self, y: torch.Tensor) -> torch.Tensor:
        """A^T y for each row: (R, |Q|) -> (R, K)."""
        if self.matrix is not None:
            return y @ self.matrix
        return _PackedProduct.apply(y, self, True)

    def row_sums(self) -> torch.Tensor:
        """A 1 = the carrier count of each SNV / n, shape (|Q|,)."""
        if self.matrix is not None:
            return self.matrix.sum(dim=1)
        return torch.from_numpy(self.packed.column_sums().astype(np.float64)) / self.n_members

    def gram(self) -> torch.Tensor:
        """A^T A (K x K); from packed blocks in float32, exact (integer co-carrier counts < 2^24)."""
        if self.matrix is not None:
            return self.matrix.T @ self.matrix
        if self.shape[0] >= 2**24:
            raise InputError(f"a packed population must have fewer than 2^24 SNVs, got {self.shape[0]}.")
        counts = torch.zeros((self.shape[1], self.shape[1]), dtype=torch.float32)
        for _, _, z in self._blocks(torch.float32):
            counts.addmm_(z, z.T)
        return counts.to(torch.float64) / self.n_members**2

    def dense(self) -> torch.Tensor:
        """A as one float64 tensor (|Q| x K): 8 K |Q| bytes."""
        if self.matrix is not None:
            return self.matrix
        return torch.from_numpy(self.packed.to_dense()).to(torch.float64).T / self.n_members


class _PackedProduct(torch.autograd.Function):
    """A v (``adjoint`` False) or A^T v (True) on a packed :class:`Design`; the gradient of one is the
    other applied to the incoming gradient, so the backward pass keeps no unpacked block either."""

    @staticmethod
    def forward(ctx, values: torch.Tensor, design: Design, adjoint: bool) -> torch.Tensor:
        ctx.design, ctx.adjoint = design, adjoint
        return design._packed_adjoint(values) if adjoint else design._packed_apply(values)

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> tuple[torch.Tensor, None, None]:
        design = ctx.design
        return (design._packed_apply(grad) if ctx.adjoint else design._packed_adjoint(grad)), None, None


class PopulationInverse:
    """A = Z^T / n (|Q| x K, a :class:`Design`), (A^T A + lambda I)^+ (K x K) and lambda, float64 torch.

    Attributes:
        design: A.
        gram_inverse: (A^T A + lambda I)^+.
        penalty: lambda.
    """

    def __init__(self, design: Design, gram_inverse: torch.Tensor, penalty: float) -> None:
        self.design = design
        self.gram_inverse = gram_inverse
        self.penalty = penalty
        self._map: np.ndarray | None = None

    def linear_map(self, theta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(W, c) with b_hat = W x + c = theta + W (x - A theta), W = (A^T A + lambda I)^+ A^T:
        the reconstruction of b from x shrunk towards the prior mean theta; exact (b_hat = b)
        for a noiseless release when |Q| >= K, Z has full column rank and lambda -> 0."""
        design = self.design.dense()
        if self._map is None:
            self._map = (self.gram_inverse @ design.T).numpy()
        w = self._map.copy()
        return w, np.asarray(theta, dtype=np.float64) - w @ (design.numpy() @ theta)


#: the most recent inverses, by (population digest, shape, n, ridge): the trainer's refits, the
#: fresh-attacker check and the evaluation invert the same population again and again.
_CACHE: dict[tuple, PopulationInverse] = {}
_CACHE_SIZE = 4


def population_inverse(genotypes: np.ndarray | BitMatrix, n_members: float, ridge: float) -> PopulationInverse:
    """The ridge inverse of x = Z^T b / n for the population ``genotypes`` (K, |Q|; dense or bit-packed),
    computed once per population, n and ridge (a small cache keyed by a digest of the genotypes)."""
    if isinstance(genotypes, BitMatrix):
        values, digest_of = genotypes, genotypes.packed
        kind = "bits"
    else:
        values = digest_of = np.ascontiguousarray(genotypes)
        kind = values.dtype.str
    key = (hashlib.blake2b(np.ascontiguousarray(digest_of).view(np.uint8), digest_size=16).hexdigest(),
           values.shape, kind, float(n_members), float(ridge))
    if key not in _CACHE:
        if len(_CACHE) >= _CACHE_SIZE:
            del _CACHE[next(iter(_CACHE))]
        _CACHE[key] = _compute_inverse(values, n_members, ridge)
    return _CACHE[key]


def _compute_inverse(genotypes: np.ndarray | BitMatrix, n_members: float, ridge: float) -> PopulationInverse:
    design = Design(genotypes, n_members)
    gram = design.gram()
    eigenvalues, eigenvectors = torch.linalg.eigh(gram)
    penalty = ridge * float(eigenvalues.sum()) / gram.shape[0]
    keep = eigenvalues > RELATIVE_EIGENVALUE_CUTOFF * float(eigenvalues.max())
    inverse = torch.where(keep, 1.0 / (eigenvalues + penalty).clamp(min=1e-300), torch.zeros_like(eigenvalues))
    return PopulationInverse(design, (eigenvectors * inverse) @ eigenvectors.T, penalty)
