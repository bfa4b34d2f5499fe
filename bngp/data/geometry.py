"""The geometry of a candidate population: where the released statistics of its datasets can lie.

Notation of arXiv:2410.07414 section 2: K candidates with binary rows z_k (Z, K x |Q|), a dataset D of
N of them with membership b, f(D) = Z^T b / N, and under the "N of K" prior (theta_k = N / K) the
data-independent release t = f(theta) = Z^T theta / N, the column means of Z.

**The row space.**  With Zc = Z - 1 t^T the centred candidates, sum_k (b_k - theta_k) = 0 gives

    f(D) - t = Z^T (b - theta) / N = Zc^T (b - theta) / N,

so every f(D) lies in the affine hull t + row(Zc), of dimension r = rank(Zc) <= min(K - 1, |Q|).  From
the K x K Gram matrix Zc Zc^T = U S^2 U^T (formed block by block over the attributes), the row space has
the orthonormal basis V = Zc^T U S^-1 (|Q| x r), and under the prior (sampling N of K without replacement,
Cov(b) = c (I - 11^T / K), c = N (K - N) / (K (K - 1)))

    Cov(f(D)) = c Zc^T Zc / N^2 = V diag(c s_i^2 / N^2) V^T:

its eigenvalues are :attr:`PopulationSpace.variances`.  The orthogonal projection onto the affine hull is
P(x) = t + V V^T (x - t), and x -> V^T (x - t) are the release's :meth:`~PopulationSpace.coordinates`.

**What an attacker who knows the candidates needs.**  A release x = t + (1 - a)(f(D) - t) + n with one
shrinkage a and noise n ~ N(0, Sigma) has the mean t + M^T (b - theta), M = (1 - a) Zc / N (K x |Q|);
its likelihood depends on x only through the K-vector M Sigma^+ (x - t)
(:meth:`~PopulationSpace.sufficient_statistic`), which is sufficient for b.  For isotropic noise
(Sigma = s^2 I) and for noise in the row space (Sigma = V C V^T) it is a linear function of the
coordinates V^T (x - t), and so is the best linear (LMMSE) map from x to b: a linear attack that reads
the coordinates loses nothing (up to the clipping of the release to [0, 1]).  Noise outside the row space
changes no attacker's view of b; noise shaped to the population spends the whole budget inside it.

**A basis too large to hold.**  V is |Q| x r float64 (20 GB at 2,500 candidates x 10^6 attributes).  Where it
holds more than :data:`HELD_BASIS_VALUES` values the space keeps only U, s and the candidates (packed) and applies
V through them, block by block of attributes: V^T y = S^-1 U^T Zc y and V c = Zc^T U S^-1 c, the same products
at the same cost (K |Q| r multiply-adds for r <= K - 1 coordinates), in memory bounded by one block.

**The threat model of shaped noise.**  The basis is computed from the candidates the prior draws members
from, which the attacker knows too (arXiv:2410.07414 section 2): it is public, and shaping with it is
post-processing of public information.  Shaped to another panel, the members' variation outside that
panel's span is released without noise; shaped to the members' own rows, the noise itself names them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from bngp.errors import InputError
from bngp.memory import require_memory
from .bits import BitMatrix
from .population import Population

__all__ = ["THREAT_MODEL", "HELD_BASIS_VALUES", "RANK_TOLERANCE", "PopulationSpace", "clip_coordinates",
           "column_blocks", "geometry_block", "shaping_applies"]

#: the one sentence every report, help text and decision prints about noise shaped to the population.
THREAT_MODEL = ("noise shaped to the population uses only the candidates in the population file (public, known to "
                "the attacker), never the members' rows; if the attacker may target people outside those candidates, "
                "use isotropic noise instead.")
#: eigenvalues of the Gram matrix Zc Zc^T (squared singular values of Zc) below this fraction of the largest are
#: taken as zero: eigh resolves them only to about K x machine epsilon of the largest, so a singular value below
#: about sqrt(K eps) of the largest is rounding, not rank.
RANK_TOLERANCE = 1e-9
#: attributes per block when the Gram matrix and the basis are formed, and when a basis that is not held is applied.
_BLOCK = 4096
#: the most values (|Q| x r) of the basis V a space holds; a larger one is applied through the candidates (module
#: docstring): 2^27 float64 values, 1 GiB.
HELD_BASIS_VALUES = 2**27


def geometry_block() -> int:
    """Attributes per block of :func:`column_blocks`."""
    return _BLOCK


def column_blocks(genotypes: np.ndarray | BitMatrix):
    """(start, stop, dense block of columns [start, stop)) of dense or packed candidates, :data:`_BLOCK` at a time."""
    if isinstance(genotypes, BitMatrix):
        yield from genotypes.blocks(_BLOCK)
        return
    for start in range(0, genotypes.shape[1], _BLOCK):
        stop = min(start + _BLOCK, genotypes.shape[1])
        yield start, stop, genotypes[:, start:stop]


@dataclass(frozen=True, eq=False)
class PopulationSpace:
    """The row space of the centred candidates and the prior's covariance of f(D) in it (module docstring).

    Attributes:
        target: t = f(theta), the column means of Z (|Q|,).
        basis: V (|Q| x r), orthonormal columns spanning row(Zc), ordered by decreasing singular value; None where
            it is not held (applied through ``genotypes``, module docstring).
        singular_values: s (r,), those of Zc.
        left: U (K x r), the left singular vectors of Zc = U diag(s) V^T.
        n_members: N.
        n_individuals: K.
        genotypes: the candidates Z (K x |Q|, dense or packed), kept where the basis is not held.
    """

    target: np.ndarray
    basis: np.ndarray | None
    singular_values: np.ndarray
    left: np.ndarray
    n_members: int
    n_individuals: int
    genotypes: np.ndarray | BitMatrix | None = field(default=None, repr=False)

    @classmethod
    def of(cls, population: Population, n_members: int, hold_basis: bool | None = None) -> "PopulationSpace":
        """The geometry of ``population``'s candidates for datasets of ``n_members``.  ``hold_basis``: form and hold V
        (True), or apply it through the candidates (False); None holds it when it has at most
        :data:`HELD_BASIS_VALUES` values.  What it holds is refused first, with
        :class:`bngp.errors.InsufficientMemoryError`, where it would not fit in memory."""
        genotypes = population.genotypes
        k, width = population.n_individuals, population.n_attributes
        if not 1 <= int(n_members) <= k:
            raise InputError(f"the number of members must be in 1..{k}, got {n_members}.")
        rank_bound = min(k - 1, width)
        if hold_basis is None:
            hold_basis = width * rank_bound <= HELD_BASIS_VALUES
        held = width * rank_bound if hold_basis else 0
        require_memory(8.0 * (held + width + 3 * k * k + k * _BLOCK),
                       f"the population's row space at {k:,} candidates x {width:,} attributes")
        target = np.zeros(width)
        gram = np.zeros((k, k))
        for start, stop, block in column_blocks(genotypes):
            dense = np.asarray(block, dtype=np.float64)
            mean = dense.mean(axis=0)
            target[start:stop] = mean
            dense -= mean
            gram += dense @ dense.T
        eigenvalues, vectors = np.linalg.eigh(gram)
        order = np.argsort(eigenvalues)[::-1]
        eigenvalues, vectors = eigenvalues[order], vectors[:, order]
        singular = np.sqrt(np.clip(eigenvalues, 0.0, None))
        kept = eigenvalues > RANK_TOLERANCE * max(float(eigenvalues[0]) if eigenvalues.size else 0.0, 1e-300)
        singular, vectors = singular[kept], vectors[:, kept]
        if not hold_basis:
            return cls(target, None, singular, vectors, int(n_members), int(k), genotypes)
        basis = np.empty((width, singular.size))
        for start, stop, block in column_blocks(genotypes):
            dense = np.asarray(block, dtype=np.float64) - target[start:stop]
            basis[start:stop] = (dense.T @ vectors) / singular
        return cls(target, basis, singular, vectors, int(n_members), int(k))

    @property
    def holds_basis(self) -> bool:
        """Whether V is held (else it is applied through the candidates, module docstring)."""
        return self.basis is not None

    @property
    def rank(self) -> int:
        """r = rank(Zc) <= min(K - 1, |Q|)."""
        return int(self.singular_values.size)

    @property
    def n_attributes(self) -> int:
        return int(self.target.size)

    @property
    def sampling_factor(self) -> float:
        """c = N (K - N) / (K (K - 1)): Cov(b) = c (I - 11^T / K) under the "N of K" prior."""
        k, n = self.n_individuals, self.n_members
        return n * (k - n) / (k * (k - 1)) if k > 1 else 0.0

    @property
    def variances(self) -> np.ndarray:
        """The eigenvalues c s_i^2 / N^2 of Cov(f(D)) in the directions of :attr:`basis`."""
        return self.sampling_factor * self.singular_values**2 / self.n_members**2

    @property
    def leverages(self) -> np.ndarray:
        """||V_j||^2 per attribute: the share of unit row-space noise that lands on attribute j (sum = r),
        computed once (read-only)."""
        cached = self.__dict__.get("_leverages")
        if cached is None:
            if self.basis is not None:
                cached = np.einsum("ji,ji->j", self.basis, self.basis)
            else:
                cached = self.marginal_variances(np.ones(self.rank))
            cached.flags.writeable = False
            object.__setattr__(self, "_leverages", cached)
        return cached

    @property
    def wasted_fraction(self) -> float:
        """(|Q| - r) / |Q|: the share of isotropic noise's variance that lies outside the row space."""
        return 1.0 - self.rank / self.n_attributes

    def dense_basis(self) -> np.ndarray:
        """V (|Q| x r) float64: the held basis, or one formed from the candidates (refused first, with
        :class:`bngp.errors.InsufficientMemoryError`, where it would not fit in memory)."""
        if self.basis is not None:
            return self.basis
        width = self.n_attributes
        require_memory(8.0 * width * self.rank, f"the row space's basis at {width:,} attributes x {self.rank:,} "
                                                "directions")
        basis = np.empty((width, self.rank))
        for start, stop, block in self.centred_blocks(torch.float64):
            basis[start:stop] = (block.T @ self.coordinate_map(torch.float64)).numpy()
        return basis

    def marginal_variances(self, direction_scales: np.ndarray) -> np.ndarray:
        """sum_i V_ji^2 w_i^2 per attribute j: the variance that row-space noise V (w o g), g ~ N(0, I_r), puts on
        each attribute (|Q|,).  The last result is kept with its scales (a pass through the candidates where the
        basis is not held: the references of one weighting share it at every shrinkage)."""
        squared = np.asarray(direction_scales, dtype=np.float64) ** 2
        cached = self.__dict__.get("_marginal_of")
        if cached is not None and cached[0] == squared.tobytes():
            return cached[1].copy()
        if self.basis is not None:
            variances = (self.basis**2) @ squared
        else:
            variances = np.empty(self.n_attributes)
            weights = torch.as_tensor(squared)
            for start, stop, block in self.centred_blocks(torch.float64):
                rows = block.T @ self.coordinate_map(torch.float64)
                variances[start:stop] = (rows.square_() @ weights).numpy()
        object.__setattr__(self, "_marginal_of", (squared.tobytes(), variances))
        return variances.copy()

    def coordinates(self, releases: np.ndarray) -> np.ndarray:
        """V^T (x - t) for each row of ``releases`` (B, |Q|): (B, r)."""
        releases = np.asarray(releases, dtype=np.float64)
        return self.apply_transpose(releases - self.target)

    def centred_coordinates(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(x - t, V^T (x - t)) of each row x of ``rows`` (B, |Q|), float64.  The coordinates of the last rows asked
        for are kept (B x r, with the rows, compared by identity: they must not be modified), as a shaped mechanism's
        calibration asks for the same rows at every shrinkage it tries; x - t is formed anew (B x |Q|: not held)."""
        centred = np.asarray(rows, dtype=np.float64) - self.target
        cached = self.__dict__.get("_coordinates_of")
        if cached is not None and cached[0] is rows:
            return centred, cached[1]
        coordinates = self.apply_transpose(centred)
        object.__setattr__(self, "_coordinates_of", (rows, coordinates))
        return centred, coordinates

    def weighted_coordinates(self, releases: np.ndarray, weights: np.ndarray) -> np.ndarray:
        """V^T (w o (x - t)) for each row of ``releases`` (B, |Q|) and attribute weights w (|Q|,): (B, r); with w
        the indicator of a set E of attributes, the coordinates of x's part on E."""
        releases = np.asarray(releases, dtype=np.float64)
        return self.apply_transpose((releases - self.target) * np.asarray(weights, dtype=np.float64))

    def project(self, releases: np.ndarray) -> np.ndarray:
        """P(x) = t + V V^T (x - t): the orthogonal projection onto the affine hull of the candidates'
        possible statistics, row by row."""
        return self.target + self.embed(self.coordinates(releases))

    def embed(self, coordinates: np.ndarray) -> np.ndarray:
        """V c: a vector of the row space from its coordinates (B, r) -> (B, |Q|)."""
        return self.apply(np.asarray(coordinates, dtype=np.float64))

    def apply_transpose(self, centred: np.ndarray | torch.Tensor) -> np.ndarray | torch.Tensor:
        """V^T y for each row y of ``centred`` (B, |Q|), numpy float64 or a torch tensor (its dtype, on the CPU):
        (B, r); through the candidates where the basis is not held (S^-1 U^T Zc y)."""
        if self.basis is not None:
            if isinstance(centred, torch.Tensor):
                return centred @ torch.as_tensor(self.basis, dtype=centred.dtype)
            return centred @ self.basis
        given = torch.as_tensor(centred)
        products = torch.zeros((given.shape[0], self.n_individuals), dtype=given.dtype)
        for start, stop, block in self.centred_blocks(given.dtype):
            products.addmm_(given[:, start:stop], block.T)
        result = products @ self.coordinate_map(given.dtype)
        return result if isinstance(centred, torch.Tensor) else result.numpy()

    def apply(self, coordinates: np.ndarray | torch.Tensor) -> np.ndarray | torch.Tensor:
        """V c for each row c of ``coordinates`` (B, r), numpy float64 or a torch tensor (its dtype, on the CPU):
        (B, |Q|); through the candidates where the basis is not held (Zc^T U S^-1 c)."""
        if self.basis is not None:
            if isinstance(coordinates, torch.Tensor):
                return coordinates @ torch.as_tensor(self.basis, dtype=coordinates.dtype).T
            return coordinates @ self.basis.T
        given = torch.as_tensor(coordinates)
        weights = given @ self.coordinate_map(given.dtype).T
        result = torch.empty((given.shape[0], self.n_attributes), dtype=given.dtype)
        for start, stop, block in self.centred_blocks(given.dtype):
            torch.mm(weights, block, out=result[:, start:stop])
        return result if isinstance(coordinates, torch.Tensor) else result.numpy()

    def same_as(self, other: "PopulationSpace") -> bool:
        """Whether ``other`` is the same row space with the same basis (the same object, or equal arrays)."""
        if other is self:
            return True
        if (other.rank, other.n_attributes) != (self.rank, self.n_attributes) \
                or not np.array_equal(other.target, self.target):
            return False
        if self.basis is not None and other.basis is not None:
            return bool(np.array_equal(other.basis, self.basis))
        return bool(np.array_equal(other.left, self.left) and np.array_equal(other.singular_values,
                                                                              self.singular_values))

    def sufficient_statistic(self, releases: np.ndarray, shrink: float = 0.0, noise_variances: np.ndarray | float = 1.0,
                             *, genotypes: np.ndarray | None = None) -> np.ndarray:
        """M Sigma^+ (x - t) with M = (1 - a) Zc / N, for noise Sigma = V diag(noise_variances) V^T (row-space
        noise, one variance per direction or one for all) restricted to the row space; for isotropic noise
        s^2 I this is the same statistic divided by s^2 (the part of x outside the row space is
        independent of b).  Computed as (1 - a) / N U diag(s / w) V^T (x - t), Zc = U S V^T; ``genotypes``
        (dense Z) computes it instead as (1 - a) Zc V diag(1 / w) V^T (x - t) / N, a slow reference.
        Returns (B, K)."""
        coordinates = self.coordinates(np.atleast_2d(releases))
        variances = np.broadcast_to(np.asarray(noise_variances, dtype=np.float64), (self.rank,))
        if np.any(variances <= 0):
            raise InputError("the noise variances of the sufficient statistic must be > 0.")
        weighted = coordinates / variances
        if genotypes is not None:
            centred = np.asarray(genotypes, dtype=np.float64) - self.target
            return (1.0 - shrink) / self.n_members * self.embed(weighted) @ centred.T
        return (1.0 - shrink) / self.n_members * (weighted * self.singular_values) @ self.left.T

    def coordinate_map(self, dtype: torch.dtype) -> torch.Tensor:
        """U S^-1 (K x r) in ``dtype``, kept per dtype: V^T y = (U S^-1)^T Zc y, and V = Zc^T U S^-1."""
        cache = self.__dict__.setdefault("_inverse_left_of", {})
        if dtype not in cache:
            cache[dtype] = torch.as_tensor(self.left / self.singular_values, dtype=dtype)
        return cache[dtype]

    def centred_blocks(self, dtype: torch.dtype):
        """(start, stop, Zc[:, start:stop] as a ``dtype`` tensor) over the attributes, :data:`_BLOCK` at a time, from
        the candidates a space that does not hold its basis keeps."""
        if self.genotypes is None:
            raise InputError("this row space holds its basis, not the candidates.")
        for start, stop, block in column_blocks(self.genotypes):
            dense = torch.from_numpy(np.asarray(block)).to(dtype)
            yield start, stop, dense.sub_(torch.as_tensor(self.target[start:stop], dtype=dtype))


def shaping_applies(population: Population) -> bool:
    """Whether noise shaped to the population can save anything: the candidates' row space is smaller than
    the attributes that vary (K - 1 < |Q| up to constant attributes)."""
    return population.n_individuals - 1 < population.n_attributes


def clip_coordinates(coordinates: torch.Tensor, basis: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """The row-space coordinates V^T (clip(x, 0, 1) - t) of the clipped release of a release x = t + V c on the
    affine hull (``coordinates`` c (B, r), in place; ``basis`` V (|Q|, r) and ``target`` t (|Q|) float32):
    c + V^T (clip(x) - x).  One |Q|-wide product forms x; the second reads only the attributes some release of the
    batch clips, since clip(x) - x is 0 on every other."""
    raw = (coordinates.to(basis.dtype) @ basis.T).add_(target)
    moved = raw.clamp(0.0, 1.0).sub_(raw)
    clipped = torch.nonzero(moved.any(dim=0)).reshape(-1)
    if clipped.numel():
        coordinates += (moved[:, clipped] @ basis[clipped]).to(coordinates.dtype)
    return coordinates
