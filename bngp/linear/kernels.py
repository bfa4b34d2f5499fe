"""Linear-algebra kernels of the linear fits: the thin SVD through a Gram matrix, symmetric
eigendecompositions, and the forms of a symmetric positive semi-definite matrix in which the fits
solve shifted systems (S + lam I) w = v for many penalties lam.

- :func:`thin_svd`: X = U diag(s) V^T from the eigendecomposition of the smaller Gram matrix
  (X X^T or X^T X), singular values below sqrt(cutoff) of the largest dropped;
- :func:`symmetric_form`: S = P T P^T (Householder tridiagonalisation, LAPACK ``sytrd``; shifted
  solves by the tridiagonal factorisation, O(n) per column) on the CPU, S = V diag(values) V^T
  elsewhere; both answer the same operations (:class:`Eigenbasis`, :class:`Tridiagonal`);
- :func:`top_eigenvalue`: the largest eigenvalue of an operator by Lanczos (ARPACK).

Standard numerical linear algebra (Golub and Van Loan, *Matrix Computations*, 4th ed., sections
8.3 (tridiagonalisation), 4.3 (tridiagonal systems), 10.1 (Lanczos)); the cost and precision
trade-offs behind these choices are in ``docs/design/linear.md``.  Every kernel runs on the
device of its tensors; the LAPACK paths (numpy/scipy) are taken on the CPU only.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import scipy.linalg
import torch

from bngp.timing import phase

__all__ = ["Eigenbasis", "Tridiagonal", "gram", "symmetric_eigh", "symmetric_form", "thin_svd", "times_right_vectors",
           "top_eigenvalue"]

#: Gram eigenvalues below this fraction of the largest are dropped by :func:`thin_svd`.
_GRAM_EIGENVALUE_CUTOFF = 1e-12


def thin_svd(
    matrix: torch.Tensor, cutoff: float = _GRAM_EIGENVALUE_CUTOFF, *, left_vectors: bool = True,
    right_vectors: bool = True,
) -> tuple[torch.Tensor | None, torch.Tensor, torch.Tensor | None]:
    """(U, s, V^T) of ``matrix`` (R, Q) restricted to singular values s^2 > cutoff * max s^2.

    Through the eigendecomposition of the smaller Gram matrix (X X^T if R <= Q, else X^T X):
    one matrix product and an r x r eigh, r = min(R, Q).  Squaring the matrix costs precision
    below sqrt(cutoff) of the largest singular value.  A matrix of zeros (releases that do not
    vary) has no singular values: U (R, 0), s (0,), V^T (0, Q).  Without
    ``left_vectors`` a tall matrix (R > Q) returns None for U, which saves the R x Q x r product
    that forms it; without ``right_vectors`` a wide one (R <= Q) returns None for V^T, which saves
    the same product on that side (:func:`fit_ridge` then works in the dual form).
    """
    rows, columns = matrix.shape
    if not bool(matrix.any()):  # releases that do not vary (centred to exactly 0): nothing to fit, no Gram matrix
        return matrix.new_zeros((rows, 0)), matrix.new_zeros(0), matrix.new_zeros((0, columns))
    if rows <= columns:
        eigenvalues, left = symmetric_eigh(gram(matrix.T))
    else:
        eigenvalues, right = symmetric_eigh(gram(matrix))
    keep = eigenvalues > cutoff * eigenvalues.max().clamp(min=0)
    if not bool(keep.any()):  # a constant release (e.g. the data-independent one): nothing to fit
        return matrix.new_zeros((rows, 0)), matrix.new_zeros(0), matrix.new_zeros((0, columns))
    singular = eigenvalues[keep].sqrt()
    if rows <= columns:
        left = left[:, keep]
        return left, singular, ((left.T @ matrix) / singular[:, None] if right_vectors else None)
    right = right[:, keep]
    return ((matrix @ right) / singular if left_vectors else None), singular, right.T


def times_right_vectors(operand: torch.Tensor, matrix: torch.Tensor, left: torch.Tensor, singular: torch.Tensor) -> torch.Tensor:
    """operand @ V for the thin SVD matrix = U S V^T of a wide matrix, through V = matrix^T U / s,
    without forming V (the dual form of :func:`bngp.linear.fit_ridge` and :func:`bngp.linear.fit_whitened`)."""
    return ((operand @ matrix.T) @ left) / singular


def gram(matrix: torch.Tensor) -> torch.Tensor:
    """matrix^T matrix, exactly symmetric.  On the CPU (a tensor without gradient) through numpy,
    whose product of a matrix with its own transpose is BLAS syrk (half the FLOPs of the general
    product); elsewhere the general product."""
    if matrix.device.type != "cpu" or matrix.requires_grad:
        return matrix.T @ matrix
    array = matrix.numpy()
    return torch.from_numpy(array.T @ array)


def symmetric_eigh(matrix: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Eigenvalues (ascending) and eigenvectors of a symmetric matrix.

    On the CPU through scipy's LAPACK divide and conquer (``driver="evd"``, timed as the phase
    "eigendecomposition" by a running :class:`bngp.timing.PhaseTimer`), elsewhere torch's; when
    divide and conquer fails to converge (near-zero matrices with many repeated eigenvalues),
    through the SVD instead, which always converges (for a symmetric positive semi-definite
    matrix both give the same decomposition).  The zero matrix (the Gram matrix of releases that
    do not vary, e.g. the data-independent release) is answered without LAPACK: eigenvalues 0,
    eigenvectors the identity."""
    if not bool(matrix.any()):  # the zero matrix (the Gram matrix of releases that do not vary): exact, free
        size = matrix.shape[0]
        return matrix.new_zeros(size), torch.eye(size, dtype=matrix.dtype, device=matrix.device)
    try:
        if matrix.device.type == "cpu" and not matrix.requires_grad:
            with phase("eigendecomposition"):  # timed apart by a running PhaseTimer, as the tridiagonal reduction
                values, vectors = scipy.linalg.eigh(matrix.numpy(), driver="evd")
            return torch.from_numpy(values), torch.from_numpy(vectors)
        return torch.linalg.eigh(matrix)
    except (torch.linalg.LinAlgError, np.linalg.LinAlgError):
        left, singular, _ = torch.linalg.svd(matrix)
        return singular.flip(0), left.flip(1)


@dataclass(frozen=True, eq=False)
class Eigenbasis:
    """A symmetric positive semi-definite matrix S = V diag(values) V^T (values clamped at 0), as
    :func:`symmetric_form` gives it off the CPU: the operations the linear fits need from it,
    in the rotated basis (columns).  ``vectors`` None: a basis the caller rotates into itself (the
    low-rank whitened fit's V = E^T U / s)."""

    values: torch.Tensor
    vectors: torch.Tensor | None

    def rotate(self, matrix: torch.Tensor) -> torch.Tensor:
        """V^T matrix, (n, m)."""
        return self.vectors.T @ matrix

    def unrotate(self, matrix: torch.Tensor) -> torch.Tensor:
        """V matrix, (n, m)."""
        return self.vectors @ matrix

    def solve(self, rotated: torch.Tensor, shift: float) -> torch.Tensor:
        """(diag(values) + shift I)^-1 rotated."""
        return rotated / (self.values + shift)[:, None]

    def times(self, rotated: torch.Tensor) -> torch.Tensor:
        """diag(values) rotated, for (n,) or (n, m)."""
        return self.values[:, None] * rotated if rotated.ndim == 2 else self.values * rotated

    def trace(self) -> float:
        return float(self.values.sum())

    def largest(self) -> float:
        return float(self.values.max()) if self.values.numel() else 0.0


@dataclass(frozen=True, eq=False)
class Tridiagonal:
    """S = P T P^T by Householder tridiagonalisation (LAPACK sytrd; T tridiagonal, P the product
    of the reflectors, never formed), as :func:`symmetric_form` gives it on the CPU: the same
    operations as :class:`Eigenbasis` in the basis of P, with shifted solves by the tridiagonal
    Cholesky factorisation (ptsv, O(n) per column).  The eigenvectors of T and their
    back-transformation are never computed.  A running :class:`bngp.timing.PhaseTimer` times the
    reduction as its own phase ("tridiagonal reduction")."""

    reflectors: np.ndarray
    tau: np.ndarray
    diagonal: np.ndarray
    off_diagonal: np.ndarray

    @classmethod
    def of(cls, matrix: np.ndarray) -> "Tridiagonal":
        """The tridiagonal form of the symmetric ``matrix`` (float64, lower triangle read)."""
        work = int(scipy.linalg.lapack.dsytrd_lwork(matrix.shape[0], lower=1)[0])
        with phase("tridiagonal reduction"):  # timed apart by a running PhaseTimer (the game's refits)
            reflectors, diagonal, off, tau, info = scipy.linalg.lapack.dsytrd(matrix, lower=1, lwork=max(1, work))
        if info != 0:
            raise np.linalg.LinAlgError(f"LAPACK dsytrd failed (info {info}).")
        return cls(reflectors, tau, diagonal, off)

    def _apply(self, matrix: torch.Tensor, transpose: str) -> torch.Tensor:
        """P matrix ("N") or P^T matrix ("T"): P = diag(1, Q') with Q' the QR-form reflectors of rows 2..n."""
        out = np.array(matrix.numpy(), dtype=np.float64, order="F", copy=True)
        if out.ndim == 1:
            out = out.reshape(-1, 1, order="F")
        if out.shape[0] > 1 and out.shape[1] > 0:
            lower = self.reflectors[1:, :-1]
            work = scipy.linalg.lapack.dormqr("L", transpose, lower, self.tau, out[1:], lwork=-1)[1]
            result, _, info = scipy.linalg.lapack.dormqr("L", transpose, lower, self.tau, out[1:],
                                                         lwork=max(1, int(work[0])))
            if info != 0:
                raise np.linalg.LinAlgError(f"LAPACK dormqr failed (info {info}).")
            out[1:] = result
        return torch.from_numpy(out.reshape(matrix.shape) if matrix.ndim == 1 else out)

    def rotate(self, matrix: torch.Tensor) -> torch.Tensor:
        """P^T matrix, (n, m)."""
        return self._apply(matrix, "T")

    def unrotate(self, matrix: torch.Tensor) -> torch.Tensor:
        """P matrix, (n, m)."""
        return self._apply(matrix, "N")

    def solve(self, rotated: torch.Tensor, shift: float) -> torch.Tensor:
        """(T + shift I)^-1 rotated: tridiagonal Cholesky (ptsv), LU (gtsv) if T + shift I is not
        numerically positive definite.  In LAPACK's column-major layout (as :meth:`rotate` gives
        it; a row-major ``rotated`` is transposed first): the solution is returned as a torch view
        of it, not transposed back."""
        right = np.array(rotated.numpy(), dtype=np.float64, order="F", copy=True)
        if right.shape[0] == 0:
            return torch.from_numpy(right)
        _, _, solution, info = scipy.linalg.lapack.dptsv(self.diagonal + shift, self.off_diagonal, right)
        if info != 0:
            _, _, _, solution, info = scipy.linalg.lapack.dgtsv(self.off_diagonal, self.diagonal + shift,
                                                                self.off_diagonal, right)
            if info != 0:
                raise np.linalg.LinAlgError(f"the shifted tridiagonal system is singular (LAPACK dgtsv info {info}).")
        return torch.from_numpy(solution)

    def times(self, rotated: torch.Tensor) -> torch.Tensor:
        """T rotated, for (n,) or (n, m)."""
        values = rotated.numpy()
        column = values.reshape(values.shape[0], -1)
        out = self.diagonal[:, None] * column
        out[:-1] += self.off_diagonal[:, None] * column[1:]
        out[1:] += self.off_diagonal[:, None] * column[:-1]
        return torch.from_numpy(out.reshape(values.shape))

    def trace(self) -> float:
        return float(self.diagonal.sum())

    def largest(self) -> float:
        size = self.diagonal.shape[0]
        if size == 0:
            return 0.0
        top = scipy.linalg.eigvalsh_tridiagonal(self.diagonal, self.off_diagonal, select="i",
                                                select_range=(size - 1, size - 1))
        return float(top[0])


def symmetric_form(matrix: torch.Tensor) -> Eigenbasis | Tridiagonal:
    """The symmetric positive semi-definite ``matrix`` (a Gram or covariance matrix) in the form the
    linear fits solve with: on the CPU its Householder tridiagonalisation (:class:`Tridiagonal`),
    elsewhere (a GPU), or when the reduction fails, its eigendecomposition (:func:`symmetric_eigh`,
    :class:`Eigenbasis`, eigenvalues clamped at 0).  Both give the same shifted solves up to rounding."""
    if (matrix.device.type == "cpu" and not matrix.requires_grad and matrix.dtype == torch.float64
            and matrix.shape[0] >= 2 and bool(matrix.any())):
        try:
            return Tridiagonal.of(matrix.numpy())
        except np.linalg.LinAlgError:
            pass
    values, vectors = symmetric_eigh(matrix)
    return Eigenbasis(values.clamp(min=0.0), vectors)


def top_eigenvalue(apply: Callable[[torch.Tensor], torch.Tensor], size: int, like: torch.Tensor) -> float:
    """The largest eigenvalue of the symmetric positive semi-definite operator ``apply`` on vectors of
    ``size`` (tensors like ``like``) by Lanczos (ARPACK, to 1e-14), or densely when ``size`` is tiny."""
    import scipy.sparse.linalg

    if size <= 8:
        dense = torch.stack([apply(column) for column in torch.eye(size, dtype=like.dtype, device=like.device)], dim=1)
        return float(np.linalg.eigvalsh(((dense + dense.T) / 2).cpu().numpy()).max())

    def matvec(vector: np.ndarray) -> np.ndarray:
        return apply(torch.as_tensor(np.asarray(vector, dtype=np.float64).reshape(-1), device=like.device)).cpu().numpy()

    operator = scipy.sparse.linalg.LinearOperator((size, size), matvec=matvec, dtype=np.float64)
    value = scipy.sparse.linalg.eigsh(operator, k=1, which="LA", tol=1e-14, ncv=min(size, 32),
                                      v0=np.ones(size) / np.sqrt(size), return_eigenvectors=False)
    return float(value[0])


