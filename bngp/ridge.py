"""Linear attackers fitted in closed form on shadow releases, regularised by validated AUC and
fitted to convergence in the number of shadow releases.

Two linear maps from a release x (|Q| outputs) to the memberships b (K individuals), both
b_hat(x) = b_mean + (x - x_mean) W (:class:`LinearFit`):

- **ridge** (:func:`fit_ridge`): W = (X_c^T X_c + lam I)^-1 X_c^T B_c, the least-squares
  approximation of the posterior mean E[b | x] on R simulated releases, computed with more
  releases than outputs by shifted solves in the tridiagonal form of X_c^T X_c
  (:func:`symmetric_form`), else through the thin SVD X_c = U S V^T (:func:`thin_svd`) as
  W = V diag(s / (s^2 + lam)) U^T B_c.
- **whitened discriminant** (:func:`fit_whitened`): the linear MMSE estimator of b under the
  Gaussian-linear model x_c = b_c M + e, e ~ (0, Sigma), fitted generatively: M is the
  regression of the releases on the memberships (the class-mean differences of linear
  discriminant analysis, one row per individual), Sigma the covariance of the residual noise,
  shrunk towards its mean eigenvalue, and by Woodbury
  W = Sigma_d^-1 M^T (M Sigma_d^-1 M^T + lam I)^-1, Sigma_d = Sigma + d * mean-eig(Sigma) I.
  Noise concentrated in a few directions (a defender whose randomness has low dimension)
  is projected out by Sigma_d^-1 from far fewer releases than ridge needs.

**Regularisation by what the attack is for.**  The penalty (and the shrinkage d) is chosen
on a path that spans the whole singular-value spectrum (lam from 1e-9 to 1e2 times the
largest squared singular value) by the mean per-release AUC (:func:`bngp.metrics.release_aucs`)
of held-out validation releases, or, without them, of the exact leave-one-out predictions,
free from the SVD: b_loo_i = b_i - (b_i - b_hat_i) / (1 - H_ii),
H = 1 1^T / R + U diag(s^2 / (s^2 + lam)) U^T (ridge with an unpenalised intercept refitted
without row i).  The criterion scores exactly what the attack scores, intercept included.  The intercept is the known prior mean
E[b] = theta when the caller passes it (``prior_mean``; the centred map is the same either way,
since the centred releases sum to zero), else the shadow releases' mean membership, whose
sampling noise (about 0.5 / sqrt(R) per individual) alone ranks individuals when the signal is
weak: pass the prior whenever it is known.  Squared error is not the target: on a release
whose membership signal the defender has shrunk it prefers strong penalties, where the map's
ranking is left to the intercept's sampling noise (at K = 200, |Q| = 1000 on a game-trained
defender, 2,000 shadow releases: AUC 0.967 with the penalty of best validation AUC against
0.564 with that of least leave-one-out squared error and the shadow-mean intercept).

**Both from one decomposition** (:func:`fit_ridge_and_whitened`): with X_c = B_c M + E, the
ridge map is the whitened fit's quantities at delta = lam / dof pushed through a K x K solve
(X_c^T X_c = E^T E + M^T G' M), so ridge and whitened fits on the same releases cost one Gram
matrix and one eigendecomposition instead of two; :func:`fit_converged_jointly` runs their
learning curves together (``bngp evaluate`` and the game's fresh-attacker check use both).

**Convergence** (:func:`fit_converged`): shadow releases are doubled, from
:func:`default_shadow_releases` up to :func:`max_shadow_releases`, until the validation AUC
rises by less than ``tolerance`` per doubling (:func:`bngp.metrics.levelled_off`); the learning
curve (releases, validation AUC) is returned with the fit and reported by every attack that uses it.
A curve always fits its first two sizes; with a helper process current (:mod:`bngp.workers`) the
first is fitted there while this process fits the second (the same fits, in the time of the larger).

**Device.**  The fits run where their tensors are (the CPU, or the GPU of a game trained with
``device="cuda"``, :mod:`bngp.device`); a fit's tensors live on its releases' device, and AUCs
are computed from CPU copies.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
import scipy.linalg
import torch

from bngp.device import CHUNK_ELEMENTS
from bngp.errors import InputError
from bngp.metrics import levelled_off, release_aucs
from bngp.timing import phase
from bngp.workers import HelperResult, current_helper

__all__ = [
    "LinearFit",
    "LearningCurve",
    "fit_ridge",
    "fit_whitened",
    "fit_ridge_and_whitened",
    "fit_converged",
    "fit_converged_jointly",
    "SharedDraws",
    "affine_calibration",
    "logistic_calibration",
    "thin_svd",
    "symmetric_form",
    "default_shadow_releases",
    "max_shadow_releases",
    "RIDGE_PATH",
    "SHRINKAGE_PATH",
]

#: ridge penalties relative to the largest squared singular value of the centred releases:
#: from (numerically) least squares to a map that predicts the mean.
RIDGE_PATH = tuple(10.0 ** np.arange(-9.0, 2.01, 0.5))
#: noise-covariance shrinkage d relative to the mean eigenvalue of the residual covariance.
SHRINKAGE_PATH = tuple(10.0 ** np.arange(-6.0, 2.01, 1.0))
#: penalties of the whitened discriminant relative to the largest eigenvalue of M Sigma_d^-1 M^T.
WHITENED_RIDGE_PATH = tuple(10.0 ** np.arange(-8.0, 1.01, 1.0))
#: the largest shadow set (releases x outputs, float32: 512 MiB) a converged fit may reach.
SHADOW_FLOAT_BUDGET = 2**27
#: Gram eigenvalues below this fraction of the largest are dropped by :func:`thin_svd`.
_GRAM_EIGENVALUE_CUTOFF = 1e-12
#: rows on which the leave-one-out AUC is measured (the fit itself uses every row).
_LOO_ROWS = 2000
#: rows per block when :func:`fit_whitened` forms the residual in place.
_ROW_BLOCK = 1024
#: validation releases drawn by :func:`fit_converged` when the caller gives none.
DEFAULT_VALIDATION_RELEASES = 500

#: sample(n) -> (releases (n, Q), memberships (n, K)) as tensors, each call fresh draws.
Sampler = Callable[[int], tuple[torch.Tensor, torch.Tensor]]


def default_shadow_releases(n_individuals: int, n_outputs: int) -> int:
    """The first size of a converged fit, and the fixed size of the game's in-game refits:
    max(500, 2K, 2|Q|), capped at 2^27 floats.

    With fewer shadow releases than released values the |Q|-input map is not identified.
    """
    wanted = max(500, 2 * int(n_individuals), 2 * int(n_outputs))
    return max(500, min(wanted, SHADOW_FLOAT_BUDGET // max(1, int(n_outputs))))


def max_shadow_releases(n_individuals: int, n_outputs: int) -> int:
    """The most shadow releases :func:`fit_converged` may draw: 2^27 floats, at most 64 max(K, |Q|).

    Measured at K = 200, |Q| = 1000 against a game-trained defender, ridge AUC by shadow
    releases: 0.90 (1,000), 0.985 (4,000), 0.998 (10,000): the curve can need 10|Q| releases.
    """
    cap = SHADOW_FLOAT_BUDGET // max(1, int(n_outputs))
    return max(default_shadow_releases(n_individuals, n_outputs), min(cap, 64 * max(int(n_individuals), int(n_outputs))))


@dataclass(frozen=True, eq=False)
class LinearFit:
    """b_hat(x) = membership_mean + (x - release_mean) @ weights (float64 tensors; membership_mean
    is the intercept: the prior mean when it was given to the fit), with how the
    regularisation was chosen.

    Attributes:
        ridge: the chosen penalty, relative to the path's scale (see the module docstring).
        shrinkage: the chosen noise-covariance shrinkage (whitened fits; None for ridge).
        criterion: "validation-auc" or "loo-auc".
        score: the criterion's value at the chosen penalty (mean per-release AUC).
        path: (penalty, AUC) along the path (for the whitened fit, at the chosen shrinkage).
        releases: shadow releases the map was fitted on.
    """

    release_mean: torch.Tensor
    membership_mean: torch.Tensor
    weights: torch.Tensor
    ridge: float
    criterion: str
    score: float
    path: tuple[tuple[float, float], ...]
    releases: int
    shrinkage: float | None = None

    def predict(self, releases: torch.Tensor) -> torch.Tensor:
        """b_hat for each release, shape (R, K), differentiable in the releases."""
        return self.membership_mean + (releases.to(torch.float64) - self.release_mean) @ self.weights

    def describe(self) -> dict:
        """The regularisation record reports show."""
        return {
            "releases": self.releases,
            "criterion": self.criterion,
            "ridge": self.ridge,
            "shrinkage": self.shrinkage,
            "validation_auc": self.score,
            "path": [list(point) for point in self.path],
        }


@dataclass(frozen=True)
class LearningCurve:
    """Validation AUC of a fit by number of shadow releases (doubling), and whether it levelled off."""

    releases: tuple[int, ...]
    auc: tuple[float, ...]
    converged: bool
    tolerance: float

    def to_dict(self) -> dict:
        return {"releases": list(self.releases), "auc": list(self.auc), "converged": self.converged, "tolerance": self.tolerance}


def thin_svd(
    matrix: torch.Tensor, cutoff: float = _GRAM_EIGENVALUE_CUTOFF, *, left_vectors: bool = True,
    right_vectors: bool = True,
) -> tuple[torch.Tensor | None, torch.Tensor, torch.Tensor | None]:
    """(U, s, V^T) of ``matrix`` (R, Q) restricted to singular values s^2 > cutoff * max s^2.

    Through the eigendecomposition of the smaller Gram matrix (X X^T if R <= Q, else X^T X):
    one matrix product and an r x r eigh, r = min(R, Q), about 10x faster than a thin SVD of a
    wide matrix (2,684 x 25,000 in float64 on one core: 24 s against 244 s).  Squaring the
    matrix costs precision below sqrt(cutoff) of the largest singular value.  Without
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


def _times_right_vectors(operand: torch.Tensor, matrix: torch.Tensor, left: torch.Tensor, singular: torch.Tensor) -> torch.Tensor:
    """operand @ V for the thin SVD matrix = U S V^T of a wide matrix, through V = matrix^T U / s,
    without forming V (the dual form of :func:`fit_ridge` and :func:`fit_whitened`)."""
    return ((operand @ matrix.T) @ left) / singular


def gram(matrix: torch.Tensor) -> torch.Tensor:
    """matrix^T matrix, exactly symmetric.  On the CPU through numpy, whose product of a matrix
    with its own transpose is BLAS syrk: half the FLOPs of the general product torch runs
    (10,000 x 5,000 in float64 on one core: 5.6 s against 11.3 s, same values to 1e-10)."""
    if matrix.device.type != "cpu" or matrix.requires_grad:
        return matrix.T @ matrix
    array = matrix.numpy()
    return torch.from_numpy(array.T @ array)


def symmetric_eigh(matrix: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Eigenvalues (ascending) and eigenvectors of a symmetric matrix.

    On the CPU through scipy's LAPACK divide and conquer (``driver="evd"``), faster than
    torch's (5,000 x 5,000 in float64 on one core: 20 s against 27-29 s, eigenvalues equal to
    1e-15 relative); when divide and conquer fails to converge (near-zero matrices with many
    repeated eigenvalues), through the SVD instead, which always converges (for a symmetric
    positive semi-definite matrix both give the same decomposition).  The zero matrix (the Gram
    matrix of releases that do not vary, e.g. of the data-independent release every game starts
    from) is answered without LAPACK: eigenvalues 0, eigenvectors the identity (a paper-scale
    refit on such releases spent a minute in the SVD fallback)."""
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
class _Eigenbasis:
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
class _Tridiagonal:
    """S = P T P^T by Householder tridiagonalisation (LAPACK sytrd; T tridiagonal, P the product
    of the reflectors, never formed), as :func:`symmetric_form` gives it on the CPU: the same
    operations as :class:`_Eigenbasis` in the basis of P, with shifted solves by the tridiagonal
    Cholesky factorisation (ptsv, O(n) per column).  The eigenvectors of T and their
    back-transformation, two thirds of a divide-and-conquer eigendecomposition, are never
    computed (5,000 x 5,000 in float64 on one core: 13 s against 28 s; applying P or P^T to
    800 columns 1.5 s).  Half of sytrd's FLOPs are symmetric matrix-vector products that read the
    trailing matrix once per column (about n^3 / 6 float64 reads, 167 GB at n = 5,000): the
    reduction is bound by memory bandwidth, not by the matmul; a running
    :class:`bngp.timing.PhaseTimer` times it as its own phase ("tridiagonal reduction")."""

    reflectors: np.ndarray
    tau: np.ndarray
    diagonal: np.ndarray
    off_diagonal: np.ndarray

    @classmethod
    def of(cls, matrix: np.ndarray) -> "_Tridiagonal":
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


def symmetric_form(matrix: torch.Tensor) -> _Eigenbasis | _Tridiagonal:
    """The symmetric positive semi-definite ``matrix`` (a Gram or covariance matrix) in the form the
    linear fits solve with: on the CPU its Householder tridiagonalisation (:class:`_Tridiagonal`),
    elsewhere (a GPU) its eigendecomposition (:func:`symmetric_eigh`, :class:`_Eigenbasis`).  Both
    give the same shifted solves up to rounding; the tridiagonal form costs about half."""
    if (matrix.device.type == "cpu" and not matrix.requires_grad and matrix.dtype == torch.float64
            and matrix.shape[0] >= 2 and bool(matrix.any())):
        try:
            return _Tridiagonal.of(matrix.numpy())
        except np.linalg.LinAlgError:
            pass
    values, vectors = symmetric_eigh(matrix)
    return _Eigenbasis(values.clamp(min=0.0), vectors)


def _mean_auc(scores: torch.Tensor, labels: torch.Tensor) -> float:
    values = release_aucs(scores.cpu().numpy(), labels.cpu().numpy())
    return float(values.mean()) if values.size else 0.5


def _best(path: list[tuple[float, float]]) -> tuple[float, float]:
    """The (penalty, AUC) of highest AUC; among equal AUCs the strongest penalty (the stabler map)."""
    return max(path, key=lambda point: (round(point[1], 12), point[0]))


@dataclass(frozen=True, eq=False)
class _Centred:
    """Shadow releases centred for a linear fit, restricted to the outputs that vary.

    ``x``: X - m on the varying outputs only (float64, a new tensor the fit may overwrite);
    ``b``: B - mean B; ``release_mean``: m over all |Q| outputs; ``membership_mean``: mean B;
    ``varying``: indices of the varying outputs, or None when every output varies;
    ``width``: |Q|.  An output that does not vary over the shadow releases (a data-independent
    block of a composed release, a monomorphic SNV released without noise) is 0 after centring:
    it adds nothing to any Gram matrix or product of the fit, whose weights are 0 on it, so the
    fit runs on the others and :meth:`expand` puts the zero rows back (exact up to rounding;
    a composed release whose learned block is still data-independent saves a fifth of every
    release-wide product)."""

    x: torch.Tensor
    b: torch.Tensor
    release_mean: torch.Tensor
    membership_mean: torch.Tensor
    varying: torch.Tensor | None
    width: int

    def select(self, releases: torch.Tensor) -> torch.Tensor:
        """Other releases, centred by m, on the varying outputs (float64)."""
        centred = releases.to(torch.float64) - self.release_mean
        return centred if self.varying is None else centred[:, self.varying]

    def expand(self, weights: torch.Tensor) -> torch.Tensor:
        """Weights (varying outputs, K) as (|Q|, K), zero on the outputs that do not vary."""
        if self.varying is None:
            return weights
        full = weights.new_zeros((self.width, weights.shape[1]))
        full[self.varying] = weights
        return full


def _centre(releases: torch.Tensor, memberships: torch.Tensor) -> _Centred:
    """The centred shadow releases of a linear fit (:class:`_Centred`), in one float64 copy of the
    varying outputs."""
    if releases.ndim != 2 or memberships.ndim != 2 or releases.shape[0] != memberships.shape[0]:
        raise InputError("releases (R, Q) and memberships (R, K) must have the same number of rows.")
    if releases.shape[0] < 3:
        raise InputError(f"a linear fit needs at least 3 shadow releases, got {releases.shape[0]}.")
    memberships = memberships.to(torch.float64)
    membership_mean = memberships.mean(dim=0)
    # one float64 copy of the releases, centred in place; its column means are bit for bit
    # releases.mean(dim=0, dtype=float64), which makes the same float64 copy internally and
    # reduces it (at 10,000 x 5,000: 0.08 s for the mean of the copy against 0.36 s)
    centred = releases.to(torch.float64, copy=True)
    release_mean = centred.mean(dim=0)
    # an output varies unless max_i |x_i - m| (= max(max x - m, m - min x), from the column minima
    # and maxima, one pass each: torch.aminmax over dim 0 took 5 to 10 times as long) is rounding
    # residue of m
    low, high = releases.amin(dim=0), releases.amax(dim=0)
    spread = torch.maximum(high.to(torch.float64) - release_mean, release_mean - low.to(torch.float64))
    constant = spread <= 1e-12 * (release_mean.abs() + 1e-12)
    varying = None
    if bool(constant.any()) and not bool(constant.all()):
        varying = torch.nonzero(~constant).reshape(-1)
        del centred  # freed before the copy of the varying outputs only, so the two are never held together
        centred = releases[:, varying].to(torch.float64)
        centred -= release_mean[varying]
    else:
        centred -= release_mean
        if bool(constant.any()):  # nothing varies: exactly 0 (no rounding residue for a fit to read)
            centred.zero_()
    return _Centred(centred, memberships - membership_mean, release_mean, membership_mean, varying,
                    int(releases.shape[1]))


def _intercept(membership_mean: torch.Tensor, prior_mean: np.ndarray | torch.Tensor | None) -> torch.Tensor:
    if prior_mean is None:
        return membership_mean
    if isinstance(prior_mean, torch.Tensor):
        prior_mean = prior_mean.detach().cpu().numpy()
    prior = torch.as_tensor(np.asarray(prior_mean, dtype=np.float64)).reshape(-1).to(membership_mean.device)
    if prior.shape != membership_mean.shape:
        raise InputError(f"`prior_mean` must have {membership_mean.numel()} entries (K), got {prior.numel()}.")
    return prior


def fit_ridge(
    releases: torch.Tensor,
    memberships: torch.Tensor,
    validation: tuple[torch.Tensor, torch.Tensor] | None = None,
    path: tuple[float, ...] = RIDGE_PATH,
    prior_mean: np.ndarray | torch.Tensor | None = None,
) -> LinearFit:
    """Ridge map from (R, Q) releases to (R, K) memberships, the penalty (relative to the largest
    squared singular value) chosen on ``path`` by the mean per-release AUC of the ``validation``
    releases, or of the exact leave-one-out predictions when none are given."""
    centred = _centre(releases, memberships)
    centred_x, centred_b, release_mean, membership_mean = centred.x, centred.b, centred.release_mean, centred.membership_mean
    intercept = _intercept(membership_mean, prior_mean)
    # fewer shadow releases than outputs (R <= Q): the dual form, V = X^T U / s never formed
    # (5,368 x 25,000 in a composed game: that product was a third of the fit), predictions through X_v X^T U / s
    # and the map W = X^T U diag(1 / (s^2 + lam)) U^T B
    dual = centred_x.shape[0] <= centred_x.shape[1]
    if not dual and validation is not None:
        return _fit_ridge_primal(centred, intercept, validation, path)
    left, singular, right_t = thin_svd(centred_x, left_vectors=dual or validation is None, right_vectors=not dual)
    squared = singular**2
    scale = float(squared.max()) if squared.numel() else 1.0
    # U^T B, through U = X V / s when U was not formed (validation given: the leave-one-out needs U)
    projected = left.T @ centred_b if left is not None else (right_t @ (centred_x.T @ centred_b)) / singular[:, None]
    points: list[tuple[float, float]] = []
    if validation is not None:
        validation_x = centred.select(validation[0])
        rotated = _times_right_vectors(validation_x, centred_x, left, singular) if dual else validation_x @ right_t.T
        labels = validation[1]
        for relative in path:
            prediction = intercept + rotated @ ((singular / (squared + relative * scale))[:, None] * projected)
            points.append((relative, _mean_auc(prediction, labels)))
        criterion = "validation-auc"
    else:
        n_rows = centred_x.shape[0]
        rows = torch.from_numpy(np.unique(np.linspace(0, n_rows - 1, min(_LOO_ROWS, n_rows)).astype(np.int64))).to(left.device)
        sub_left = left[rows]
        # exact leave-one-out of ridge with an unpenalised intercept (H includes 1 1^T / R), whose
        # intercept without row i is the shadow mean of the other rows; a known prior mean replaces it
        other_rows_mean = membership_mean - centred_b[rows] / (n_rows - 1)
        swap = intercept - other_rows_mean if prior_mean is not None else 0.0
        for relative in path:
            shrink = squared / (squared + relative * scale)
            hat = 1.0 / n_rows + (sub_left**2) @ shrink
            fitted = sub_left @ (shrink[:, None] * projected)
            loo = centred_b[rows] - (centred_b[rows] - fitted) / (1 - hat).clamp(min=1e-12)[:, None]
            points.append((relative, _mean_auc(membership_mean + loo + swap, memberships[rows])))
        criterion = "loo-auc"
    ridge, score = _best(points)
    if dual:
        weights = centred_x.T @ (left @ (projected / (squared + ridge * scale)[:, None]))
    else:
        weights = right_t.T @ ((singular / (squared + ridge * scale))[:, None] * projected)
    return LinearFit(release_mean, intercept, centred.expand(weights), ridge, criterion, score, tuple(points), int(centred_x.shape[0]))


def _fit_ridge_primal(centred: _Centred, intercept: torch.Tensor, validation: tuple[torch.Tensor, torch.Tensor],
                      path: tuple[float, ...]) -> LinearFit:
    """:func:`fit_ridge` with more shadow releases than outputs and validation releases: W(lam) =
    (X_c^T X_c + lam I)^-1 X_c^T B_c by shifted solves in the :func:`symmetric_form` of X_c^T X_c
    (on the CPU its tridiagonal form: half an eigendecomposition), with X_c^T B_c and X_v^T rotated
    once; the path's scale is the largest eigenvalue of X_c^T X_c (1 for releases that do not vary)."""
    centred_x, centred_b = centred.x, centred.b
    form = symmetric_form(gram(centred_x))
    scale = form.largest()
    scale = scale if scale > 0 else 1.0
    # X_c^T B_c (Q, K) and X_v^T (Q, V) in the rotated basis, by one pass of the reflectors
    outputs = centred_b.shape[1]
    rotated = form.rotate(torch.cat([centred_x.T @ centred_b, centred.select(validation[0]).T], dim=1))
    projected, validation_columns = rotated[:, :outputs], rotated[:, outputs:]
    labels = validation[1]

    def predictions(shift: float) -> torch.Tensor:
        """X_v (S + shift I)^-1 X_c^T B_c, the shifted system solved for the narrower of its two
        sides (S is symmetric): the V validation columns rather than the K outputs, when fewer."""
        if validation_columns.shape[1] < outputs:
            return form.solve(validation_columns, shift).T @ projected
        return validation_columns.T @ form.solve(projected, shift)

    points = [(relative, _mean_auc(intercept + predictions(relative * scale), labels)) for relative in path]
    ridge, score = _best(points)
    weights = form.unrotate(form.solve(projected, ridge * scale))
    return LinearFit(centred.release_mean, intercept, centred.expand(weights), ridge, "validation-auc", score,
                     tuple(points), int(centred_x.shape[0]))


def fit_whitened(
    releases: torch.Tensor,
    memberships: torch.Tensor,
    validation: tuple[torch.Tensor, torch.Tensor],
    shrinkage_path: tuple[float, ...] = SHRINKAGE_PATH,
    path: tuple[float, ...] = WHITENED_RIDGE_PATH,
    prior_mean: np.ndarray | torch.Tensor | None = None,
) -> LinearFit:
    """The whitened (noise-covariance-aware) linear discriminant of the module docstring; the
    shrinkage d and the penalty lam chosen jointly by the mean per-release AUC of ``validation``.

    With more shadow releases than outputs the |Q| x |Q| noise covariance Sigma is diagonalised.
    With fewer (a composed release: 5,368 x 25,000 at paper scale, where that matrix and its
    eigendecomposition took more than 20 GB) Sigma = V diag(lam_i) V^T has rank r <= R, and its
    eigenvectors come from the thin SVD of the residual (:func:`thin_svd`, V = E^T U / s never
    formed); the other |Q| - r eigenvalues are 0, so with delta = d * mean-eig(Sigma) (the mean over
    all |Q|) Sigma_d^-1 = V diag(1 / (lam_i + delta)) V^T + P / delta, P the projection onto the
    complement of V.  M's component there, M_perp = M - (M V) V^T, is formed explicitly, so that
    M Sigma_d^-1 M^T = (M V) diag(1 / (lam + delta)) (M V)^T + M_perp M_perp^T / delta involves no
    cancellation of large terms."""
    return _whitened_fits(releases, memberships, validation, shrinkage_path, path, prior_mean)[0]


def fit_ridge_and_whitened(
    releases: torch.Tensor,
    memberships: torch.Tensor,
    validation: tuple[torch.Tensor, torch.Tensor],
    prior_mean: np.ndarray | torch.Tensor | None = None,
) -> tuple[LinearFit, LinearFit]:
    """(:func:`fit_ridge`, :func:`fit_whitened`) on the same shadow and validation releases, from
    the one decomposition of the residual noise covariance the whitened fit makes: the ridge fit
    then costs no Gram matrix or eigendecomposition of its own (at 20,000 x 5,000, two of the four
    largest factorisations of an evaluation).

    With M, E the whitened fit's regression of the centred releases on the centred memberships and
    its residual (:func:`fit_whitened`), G = B_c^T B_c and j its jitter, X_c = B_c M + E and
    B_c^T E = j M, so X_c^T X_c = E^T E + M^T G' M with G' = G + 2 j I = L L^T, and
    X_c^T B_c = M^T (G + j I).  With A = E^T E + lam I = dof Sigma_delta (delta = lam / dof, the
    whitened fit's shrunk covariance) and N = M^T L, the push-through identity gives the ridge map
    W = (A + N N^T)^-1 N T = A^-1 N (I + N^T A^-1 N)^-1 T, T = L^-1 (G + j I): every quantity is the
    whitened fit's X_v Sigma_delta^-1 M^T and M Sigma_delta^-1 M^T at delta = lam / dof, and a K x K
    solve whose matrix is at least I.  The penalties are those of :func:`fit_ridge` (relative to the
    largest eigenvalue of X_c^T X_c, here by Lanczos), chosen by the same validation AUC; the fit
    equals :func:`fit_ridge`'s up to rounding (tested against the direct solution)."""
    whitened, ridge = _whitened_fits(releases, memberships, validation, SHRINKAGE_PATH, WHITENED_RIDGE_PATH, prior_mean,
                                     ridge_path=RIDGE_PATH)
    return ridge, whitened


def _top_eigenvalue(apply: Callable[[torch.Tensor], torch.Tensor], size: int, like: torch.Tensor) -> float:
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


def _whitened_fits(
    releases: torch.Tensor,
    memberships: torch.Tensor,
    validation: tuple[torch.Tensor, torch.Tensor],
    shrinkage_path: tuple[float, ...],
    path: tuple[float, ...],
    prior_mean: np.ndarray | torch.Tensor | None,
    ridge_path: tuple[float, ...] | None = None,
) -> tuple[LinearFit, LinearFit | None]:
    """The whitened fit, and with ``ridge_path`` the ridge fit from the same decomposition
    (:func:`fit_ridge_and_whitened`)."""
    centred = _centre(releases, memberships)
    centred_x, centred_b, release_mean, membership_mean = centred.x, centred.b, centred.release_mean, centred.membership_mean
    intercept = _intercept(membership_mean, prior_mean)
    n_rows, n_individuals = centred_b.shape
    n_outputs = centred.width  # all |Q| outputs: those that do not vary have noise variance 0
    gram_b = gram(centred_b)
    jitter = 1e-9 * float(torch.diagonal(gram_b).mean()) + 1e-12
    identity = torch.eye(n_individuals, dtype=torch.float64, device=centred_b.device)
    signal = torch.linalg.solve(gram_b + jitter * identity, centred_b.T @ centred_x)
    # the floor of the mean eigenvalue below, from the centred releases before they become the residual
    centred_power = float(torch.linalg.vector_norm(centred_x)) ** 2 / max(n_rows * n_outputs, 1)
    # the residual E = X - B M overwrites the centred releases (its own copy, :func:`_centre`), by
    # blocks of rows: without a second R x Q matrix nor the R x Q product B M (800 MB each at 20,000 x 5,000)
    residual = centred_x
    for start in range(0, n_rows, _ROW_BLOCK):
        residual[start:start + _ROW_BLOCK] -= centred_b[start:start + _ROW_BLOCK] @ signal
    degrees = max(1, n_rows - n_individuals - 1)
    validation_x = centred.select(validation[0])
    low_rank = n_rows <= centred_x.shape[1]
    # Sigma in a basis where its shifted solves are cheap (form), with M^T and X_v^T rotated there (columns)
    if low_rank:
        left, singular, _ = thin_svd(residual, right_vectors=False)
        form = _Eigenbasis(singular**2 / degrees, None)  # its basis V = E^T U / s is never formed
        signal_columns = _times_right_vectors(signal, residual, left, singular).T  # (M V)^T, (r, K)
        validation_columns = _times_right_vectors(validation_x, residual, left, singular).T  # (X_v V)^T
        # M_perp, (K, Q), with (M V / s) U^T formed first: K R r + K R Q multiply-adds instead of R r Q + K r Q
        # (5,368 x 25,000 composed releases: 2.6e11 instead of 1.4e12)
        perpendicular = signal - ((signal_columns.T / singular) @ left.T) @ residual
        perpendicular_gram = gram(perpendicular.T)  # M_perp M_perp^T
        validation_perpendicular = validation_x @ perpendicular.T  # X_v M_perp^T
    else:
        form = symmetric_form(gram(residual) / degrees)
        signal_columns = form.rotate(signal.T)  # (Q, K)
        validation_columns = form.rotate(validation_x.T)
    total = form.trace()
    # floors keep a noise-free release (no defense: the residual is zero) and a constant one finite
    mean_eigenvalue = max(total / n_outputs, 1e-12 * centred_power, 1e-30)
    labels = validation[1]

    def whitened_parts(delta: float) -> tuple[torch.Tensor, torch.Tensor]:
        """(M Sigma_delta^-1 M^T, X_v Sigma_delta^-1 M^T), Sigma_delta = Sigma + delta I."""
        whitened_signal = form.solve(signal_columns, delta)  # Sigma_d^-1 M^T in the rotated basis
        whitened_gram = signal_columns.T @ whitened_signal  # M Sigma_d^-1 M^T, (K, K)
        validation_signal = validation_columns.T @ whitened_signal  # X_v Sigma_d^-1 M^T
        if low_rank:
            whitened_gram = whitened_gram + perpendicular_gram / delta
            validation_signal = validation_signal + validation_perpendicular / delta
        return whitened_gram, validation_signal

    def whitened(shrink: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(eigenvalues and eigenvectors of M Sigma_d^-1 M^T, X_v Sigma_d^-1 M^T) at delta = d * mean-eig."""
        whitened_gram, validation_signal = whitened_parts(shrink * mean_eigenvalue)
        values, vectors = symmetric_eigh(whitened_gram)
        return values, vectors, validation_signal

    def whitened_map(delta: float, right: torch.Tensor) -> torch.Tensor:
        """Sigma_delta^-1 M^T right, (Q, columns of right)."""
        coefficients = form.solve(signal_columns, delta) @ right  # Sigma_d^-1 M^T right in the rotated basis
        if low_rank:  # V c = E^T U (c / s), plus the complement's M_perp^T right / delta
            return residual.T @ (left @ (coefficients / singular[:, None])) + perpendicular.T @ right / delta
        return form.unrotate(coefficients)

    best: tuple[float, float, float] | None = None
    best_points: list[tuple[float, float]] = []
    for shrink in shrinkage_path:
        values, vectors, validation_signal = whitened(shrink)
        top = max(float(values.max()), 1e-30)
        projected = validation_signal @ vectors
        points = []
        for relative in path:
            prediction = intercept + (projected / (values.clamp(min=0) + relative * top)) @ vectors.T
            points.append((relative, _mean_auc(prediction, labels)))
        ridge, score = _best(points)
        if best is None or score > best[2] + 1e-12:
            best, best_points = (shrink, ridge, score), points
    shrink, ridge, score = best
    values, vectors, _ = whitened(shrink)
    top = max(float(values.max()), 1e-30)
    solve = (vectors / (values.clamp(min=0) + ridge * top)) @ vectors.T
    weights = whitened_map(shrink * mean_eigenvalue, solve)
    whitened_fit = LinearFit(release_mean, intercept, centred.expand(weights), ridge, "validation-auc", score,
                             tuple(best_points), n_rows, shrink)
    if ridge_path is None:
        return whitened_fit, None
    # the ridge map from the same decomposition (fit_ridge_and_whitened): X_c^T X_c = E^T E + N N^T, N = M^T L
    shifted_cholesky = torch.linalg.cholesky(gram_b + 2.0 * jitter * identity)  # L, G' = G + 2 j I
    right = torch.linalg.solve_triangular(shifted_cholesky, gram_b + jitter * identity, upper=False)  # T
    # the path's scale, the largest eigenvalue of X_c^T X_c (as fit_ridge; 1 for releases that do not vary), from the
    # decomposition: dof S + N~ N~^T in the rotated basis of E^T E = dof P S P^T (N~ = P^T M^T L), or with fewer releases
    # than outputs, of X_c X_c^T = E E^T + B_c M E^T + E M^T B_c^T + B_c M M^T B_c^T with E = U S V^T
    if not (bool(residual.any()) or bool(signal.any())):
        scale = 1.0
    elif low_rank:
        def kernel(y: torch.Tensor) -> torch.Tensor:
            along, members = left.T @ y, centred_b.T @ y
            return (left @ (singular**2 * along + singular * (signal_columns @ members))
                    + centred_b @ (signal_columns.T @ (singular * along + signal_columns @ members) + perpendicular_gram @ members))

        scale = _top_eigenvalue(kernel, n_rows, residual)
    else:
        lifted = signal_columns @ shifted_cholesky

        def rotated_gram(v: torch.Tensor) -> torch.Tensor:
            return degrees * form.times(v) + lifted @ (lifted.T @ v)

        scale = _top_eigenvalue(rotated_gram, lifted.shape[0], residual)

    def ridge_factor(relative: float) -> tuple[torch.Tensor, torch.Tensor]:
        """(L (I + L^T M Sigma_delta^-1 M^T L / dof)^-1 T / dof, X_v Sigma_delta^-1 M^T), delta = lam / dof."""
        whitened_gram, validation_signal = whitened_parts(relative * scale / degrees)
        capacitance = identity + shifted_cholesky.T @ whitened_gram @ shifted_cholesky / degrees
        capacitance = (capacitance + capacitance.T) / 2
        return shifted_cholesky @ torch.linalg.solve(capacitance, right) / degrees, validation_signal

    ridge_points = []
    for relative in ridge_path:
        factor, validation_signal = ridge_factor(relative)
        ridge_points.append((relative, _mean_auc(intercept + validation_signal @ factor, labels)))
    ridge, score = _best(ridge_points)
    factor, _ = ridge_factor(ridge)
    ridge_weights = whitened_map(ridge * scale / degrees, factor)
    return whitened_fit, LinearFit(release_mean, intercept, centred.expand(ridge_weights), ridge, "validation-auc", score,
                                   tuple(ridge_points), n_rows)


class SharedDraws:
    """Shadow releases simulated once and read by several fits: :meth:`first` returns the first
    draws of one sequence from ``sample``, which is called only for draws no fit has asked for yet
    (the storage grows by concatenation, amortised by the doubling of :func:`fit_converged`), with
    the sizes a single fit would ask for (so the draws are those a fit of ``sample`` alone gets)."""

    def __init__(self, sample: Sampler) -> None:
        self._sample = sample
        self._x: torch.Tensor | None = None
        self._b: torch.Tensor | None = None

    def _available(self) -> int:
        return 0 if self._x is None else int(self._x.shape[0])

    def first(self, n: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The first ``n`` draws (views of the storage: not to be modified)."""
        n = int(n)
        if n > self._available():
            x, b = self._sample(n - self._available())
            self._x = x if self._x is None else torch.cat([self._x, x.to(self._x.dtype)])
            self._b = b if self._b is None else torch.cat([self._b, b.to(self._b.dtype)])
        return self._x[:n], self._b[:n]


def fit_converged(
    fit: Callable[[torch.Tensor, torch.Tensor, tuple[torch.Tensor, torch.Tensor]], LinearFit],
    sample: Sampler | SharedDraws,
    *,
    start: int,
    maximum: int,
    validation: tuple[torch.Tensor, torch.Tensor] | None = None,
    tolerance: float = 0.005,
) -> tuple[LinearFit, LearningCurve]:
    """Fit ``fit(x, b, validation)`` on ``start``, 2 ``start``, 4 ``start``, ... shadow releases
    drawn from ``sample`` (each doubling keeps the releases already drawn) until the validation
    AUC rises by less than ``tolerance`` or ``maximum`` releases are reached.

    Returns the fit of highest validation AUC and the learning curve.  ``validation`` defaults
    to :data:`DEFAULT_VALIDATION_RELEASES` fresh draws from ``sample``, drawn first.  Given
    :class:`SharedDraws` (draws other fits read too; ``validation`` then required), the fits read
    its first releases in place, without a copy of their own.
    """
    return fit_converged_jointly(_AsTuple(fit), sample, start=start, maximum=maximum, validation=validation,
                                 tolerance=tolerance)[0]


@dataclass(frozen=True)
class _AsTuple:
    """``fit`` returning its one fit as a tuple (picklable, so that a helper process can run it)."""

    fit: Callable[[torch.Tensor, torch.Tensor, tuple[torch.Tensor, torch.Tensor]], LinearFit]

    def __call__(self, x: torch.Tensor, b: torch.Tensor, validation: tuple[torch.Tensor, torch.Tensor]) -> tuple[LinearFit]:
        return (self.fit(x, b, validation),)


def fit_converged_jointly(
    fit: Callable[[torch.Tensor, torch.Tensor, tuple[torch.Tensor, torch.Tensor]], tuple[LinearFit, ...]],
    sample: Sampler | SharedDraws,
    *,
    start: int,
    maximum: int,
    validation: tuple[torch.Tensor, torch.Tensor] | None = None,
    tolerance: float = 0.005,
) -> tuple[tuple[LinearFit, LearningCurve], ...]:
    """:func:`fit_converged` for a ``fit`` that returns several fits of the same releases
    (:func:`fit_ridge_and_whitened`): shadow releases are doubled until the validation AUC of every
    one of them has levelled off (or ``maximum`` is reached), and each keeps its fit of highest
    validation AUC and its own learning curve.  A fit whose curve levelled off earlier is fitted
    at the later sizes too, so its curve runs on and its best fit can only be better."""
    if start < 3 or maximum < start:
        raise InputError(f"shadow releases must satisfy 3 <= start <= maximum, got {start} and {maximum}.")
    if isinstance(sample, SharedDraws):
        if validation is None:
            raise InputError("a converged fit on shared draws needs `validation` releases.")
        draws = sample
    else:
        if validation is None:
            validation = sample(DEFAULT_VALIDATION_RELEASES)
        draws = SharedDraws(sample)
    sizes: list[int] = []
    scores: list[list[float]] = []
    best: list[LinearFit] = []

    def record(size: int, current: tuple[LinearFit, ...]) -> list[bool]:
        nonlocal best, scores
        sizes.append(size)
        if not best:
            best, scores = list(current), [[] for _ in current]
        for index, one in enumerate(current):
            scores[index].append(one.score)
            if one.score > best[index].score:
                best[index] = one
        return [levelled_off(sizes, curve, tolerance) for curve in scores]

    size = start
    ahead = _fit_ahead(fit, draws, start, maximum, validation)
    while True:
        if ahead is not None:  # the first size is the helper's: this process fits the second meanwhile
            second = min(2 * size, maximum)
            # kept as drawn (float32 releases: half the memory); each fit makes its own float64 copy
            x, b = draws.first(second)
            current = fit(x, b, validation)
            try:
                first = ahead.result()
            except Exception:  # the helper could not (a helper process that died): fitted here
                first = fit(*draws.first(size), validation)
            record(size, first)
            ahead, size = None, second
        else:
            x, b = draws.first(size)
            current = fit(x, b, validation)
        converged = record(size, current)
        if all(converged) or size >= maximum:
            break
        size = min(2 * size, maximum)
    return tuple((one, LearningCurve(tuple(sizes), tuple(curve), done, tolerance))
                 for one, curve, done in zip(best, scores, converged))


def _fit_ahead(fit: Callable, draws: SharedDraws, start: int, maximum: int,
               validation: tuple[torch.Tensor, torch.Tensor]) -> HelperResult | None:
    """With a current helper process (:func:`bngp.workers.current_helper`), the fit of the first
    ``start`` CPU draws submitted to it ahead of its other calls (a learning curve always fits its
    first two sizes: a curve of one point has not levelled off); None without one, when there is no
    second size, or when ``fit`` cannot travel to it (then every size is fitted here)."""
    helper = current_helper()
    if helper is None or maximum <= start:
        return None
    x, b = draws.first(start)
    if x.device.type != "cpu" or validation[0].device.type != "cpu":
        return None
    try:  # before the helper's other work (this process will wait for it); copies: a view sends the whole storage
        return helper.submit_first(fit, x.clone(), b.clone(), validation)
    except (pickle.PicklingError, TypeError, AttributeError):
        return None


#: :func:`logistic_calibration` stops when the Newton decrement is below this fraction of the objective.
_NEWTON_DECREMENT = 1e-13

#: :func:`logistic_calibration`'s elementwise passes run over spans of this many logits: a quarter
#: of the chunk of :data:`bngp.device.CHUNK_ELEMENTS`, as a span's passes read and write
#: five float64 arrays (z, exp(-|z|), a term, the losses, the probabilities), so that the next pass
#: finds them in the cache (8 M logits: 1.0 s a fit with spans of 2^15, 1.1-1.3 s with 2^17); a
#: multiple of 64 keeps every span but the last aligned as the whole array is.
_CALIBRATION_SPAN = CHUNK_ELEMENTS // 4


def logistic_calibration(
    features: torch.Tensor, targets: torch.Tensor, iterations: int = 8, penalty: float = 1e-6
) -> torch.Tensor:
    """Weights (a_1..a_m, c) minimising the mean cross-entropy of sigmoid(features @ a + c) against
    targets, plus ``penalty`` / 2 * ||a||^2.  ``features`` (n, m) float, ``targets`` (n,) in
    {0, 1}; returns a float64 tensor of m + 1 entries, the intercept last, on the features' device.

    Logistic regression by damped Newton steps, each halved until the objective decreases.
    Start: a = (1, ..., 1), c = 0, or a = (1, ..., 1) / s, c = 0 when the summed features have a
    standard deviation s > 1 and that start has the lower objective; the result never has a
    higher objective than a = (1, ..., 1), c = 0, and on separable data (an attacker that is
    already perfect) the steps cannot overshoot into a worse calibration.  The rescaled start is
    what makes the saturated logits of a refitted attacker head calibrate (standard deviation
    100 to 2,000, best scale 1e-6 to 1e-3): from a = 1 every Newton step overshot into the flat
    tails of the loss and was halved away, leaving a = 1.  Stops when the Newton step is below
    1e-10 of the weights, or when the Newton decrement g^T H^-1 g is below 1e-13 of the
    objective (a line search could not tell the objectives apart in float64).

    The fit runs in numpy on the CPU whatever the device: the system is (m + 1)-dimensional, and
    the game recalibrates its attacker at every defender step, where torch's per-operation
    overhead made this fit a quarter of the step (64 x 200 logits: 4.6 ms a call in torch, 2.5 ms
    here).  The Newton system is solved by LAPACK's SVD driver gelsd (``numpy.linalg.lstsq``),
    not gelsy, whose last bits depended on what the process had run before (312 of 340 repeats
    differed in a test), so that one sweep cell run after another gives the same result as the
    cell run alone.
    """
    device = features.device
    columns = features.detach().reshape(features.shape[0], -1).to(torch.float64).cpu().numpy()
    objective = _LogisticObjective(columns, targets.detach().reshape(-1).to(torch.float64).cpu().numpy(), penalty)
    # two buffers of probabilities: the accepted point's and a candidate's
    buffers = [np.empty(objective.n), np.empty(objective.n)]
    params = np.ones(columns.shape[1] + 1)
    params[-1] = 0.0
    value, p = objective.evaluate(params, buffers[0]), buffers[0]
    spread = float(np.std(columns[:, 0] if columns.shape[1] == 1 else columns.sum(axis=1)))  # (one feature: no sum)
    if spread > 1.0:  # saturated logits: start where they have unit spread, if that is better
        rescaled = params.copy()
        rescaled[:-1] /= spread
        rescaled_value = objective.evaluate(rescaled, buffers[1])
        if rescaled_value < value:
            params, value, p = rescaled, rescaled_value, buffers[1]
    for _ in range(iterations):
        gradient, hessian = objective.newton_system(params, p)
        step = np.linalg.lstsq(hessian, gradient, rcond=None)[0]
        if float(np.abs(step).max()) <= 1e-10 * (1.0 + float(np.abs(params).max())):
            break  # converged: a line search would only halve a null step twenty times
        if float(gradient @ step) <= _NEWTON_DECREMENT * (1.0 + abs(value)):
            break  # converged: the Newton decrement g^T H^-1 g is below what float64 resolves in the objective
        length = 1.0
        while length > 1e-6:
            candidate = params - length * step
            candidate_p = buffers[1] if p is buffers[0] else buffers[0]
            candidate_value = objective.evaluate(candidate, candidate_p)
            if candidate_value < value:
                params, value, p = candidate, candidate_value, candidate_p
                break
            length /= 2
        else:
            break
    return torch.from_numpy(params).to(device)


class _LogisticObjective:
    """The objective of :func:`logistic_calibration`, mean_i [log(1 + e^{z_i}) - y_i z_i] +
    penalty / 2 * ||a||^2 with z = x @ (a, c), x = [features, 1], its probabilities sigmoid(z) and
    its Newton system, on float64 arrays of n entries made once and reused: at 10,000 x 800 logits
    (8 M) each fresh 64 MB temporary cost as much as the arithmetic on it.

    The elementwise passes run over spans of :data:`_CALIBRATION_SPAN` entries, each pass reading
    what the previous one left in the cache.  Every element gets the operations that passes over
    whole arrays give it, and every reduction (the mean of the losses, the products with x) is
    taken over whole arrays as before, so the results have the bits of whole-array passes (a test
    checks them against such a reference)."""

    def __init__(self, features: np.ndarray, targets: np.ndarray, penalty: float) -> None:
        self.x = np.concatenate([features, np.ones((features.shape[0], 1))], axis=1)
        self.y = targets
        self.n = targets.size
        self.ridge = np.full(self.x.shape[1], penalty)
        self.ridge[-1] = 0.0
        self.regulariser = np.diag(self.ridge) + 1e-12 * np.eye(self.x.shape[1])
        self.z, self.work = np.empty(self.n), np.empty(self.n)
        self.scaled = np.empty(self.x.shape).T  # x.T scaled by the curvature, laid out as x.T * w would be
        self.span = max(1, min(self.n, _CALIBRATION_SPAN))
        self.shrunk, self.term = np.empty(self.span), np.empty(self.span)
        self.nonnegative = np.empty(self.span, dtype=bool)

    def _spans(self) -> Iterator[tuple[int, int]]:
        return ((start, min(start + self.span, self.n)) for start in range(0, self.n, self.span))

    def evaluate(self, params: np.ndarray, probabilities: np.ndarray) -> float:
        """The objective at ``params``; sigmoid(z) is written to ``probabilities`` (n,).  Both come
        from one e = exp(-|z|): the loss max(z, 0) + log1p(e) - y z and the probability
        (1 if z >= 0 else e) / (1 + e)."""
        np.matmul(self.x, params, out=self.z)
        for start, stop in self._spans():
            z, e, t = self.z[start:stop], self.shrunk[: stop - start], self.term[: stop - start]
            loss, p = self.work[start:stop], probabilities[start:stop]
            np.exp(np.negative(np.abs(z, out=e), out=e), out=e)
            np.maximum(z, 0.0, out=loss)
            loss += np.log1p(e, out=t)
            loss -= np.multiply(self.y[start:stop], z, out=t)
            # the numerator without a branch an element: max(e, [z >= 0]), as e <= 1 (a NaN z gives NaN)
            np.maximum(e, np.greater_equal(z, 0.0, out=self.nonnegative[: stop - start]), out=p)
            p /= np.add(1.0, e, out=t)
        return float(self.work.mean() + 0.5 * (self.ridge * params**2).sum())

    def newton_system(self, params: np.ndarray, probabilities: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The gradient x^T (p - y) / n + penalty (a, 0) and the Hessian x^T diag(p (1 - p)) x / n +
        diag(penalty, ..., penalty, 0) + 1e-12 I at ``params`` with p = ``probabilities`` (its :meth:`evaluate`)."""
        for start, stop in self._spans():
            p, t = probabilities[start:stop], self.term[: stop - start]
            np.subtract(p, self.y[start:stop], out=self.work[start:stop])
            np.multiply(p, np.subtract(1.0, p, out=t), out=t)
            # a strided pass a column takes half the time of one two-dimensional strided pass
            for column, row in zip(self.x[start:stop].T, self.scaled[:, start:stop]):
                np.multiply(column, t, out=row)
        gradient = self.x.T @ self.work / self.n + self.ridge * params
        return gradient, self.scaled @ self.x / self.n + self.regulariser


def affine_calibration(logits: torch.Tensor, b: torch.Tensor, iterations: int = 8) -> tuple[float, float]:
    """(a, c) minimising the mean cross-entropy of sigmoid(a * logits + c) against b (Newton)."""
    params = logistic_calibration(logits.reshape(-1, 1), b.reshape(-1), iterations)
    return float(params[0]), float(params[1])
