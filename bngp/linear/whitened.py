"""The whitened linear discriminant, and the ridge map from the same decomposition.

**Model.**  The centred releases are Gaussian-linear in the centred memberships,
x_c = b_c M + e, e ~ (0, Sigma).  The fit is generative: M (K, |Q|) is the regression of the
shadow releases on the memberships (the class-mean differences of linear discriminant analysis,
one row per individual; Hastie, Tibshirani and Friedman, *The Elements of Statistical Learning*,
section 4.3), Sigma the covariance of the residual E = X_c - B_c M on dof = R - K - 1 degrees of
freedom, shrunk towards its mean eigenvalue (Ledoit and Wolf, J. Multivariate Anal. 88(2), 2004):
Sigma_d = Sigma + delta I, delta = d * mean-eig(Sigma).  The map is the linear MMSE estimator of b
under that model (Kay, *Fundamentals of Statistical Signal Processing: Estimation Theory*,
chapter 12), written by the Woodbury identity as

    W = Sigma_d^-1 M^T (M Sigma_d^-1 M^T + lam I)^-1,

so that noise concentrated in a few directions (a defender whose randomness has low dimension) is
projected out by Sigma_d^-1.  The shrinkage d (:data:`SHRINKAGE_PATH`) and the penalty lam
(:data:`WHITENED_RIDGE_PATH`, relative to the largest eigenvalue of M Sigma_d^-1 M^T) are chosen
jointly by the mean per-release AUC of validation releases, as the ridge penalty is
(:mod:`bngp.linear.fits`).

**Fewer shadow releases than outputs** (R <= |Q|): Sigma = V diag(lam_i) V^T has rank r <= R, its
eigenvectors from the thin SVD of the residual (V = E^T U / s never formed); the other |Q| - r
eigenvalues are 0, so Sigma_d^-1 = V diag(1 / (lam_i + delta)) V^T + P / delta, P the projection onto
the complement of V.  M's component there, M_perp = M - (M V) V^T, is formed explicitly, so that
M Sigma_d^-1 M^T = (M V) diag(1 / (lam + delta)) (M V)^T + M_perp M_perp^T / delta involves no
cancellation of large terms.

**The ridge map from the same decomposition** (:func:`fit_ridge_and_whitened`).  With
G = B_c^T B_c and j its jitter, X_c = B_c M + E and B_c^T E = j M, so X_c^T X_c = E^T E + M^T G' M
with G' = G + 2 j I = L L^T, and X_c^T B_c = M^T (G + j I).  With A = E^T E + lam I = dof Sigma_delta
(delta = lam / dof) and N = M^T L, the push-through identity gives the ridge map
W = (A + N N^T)^-1 N T = A^-1 N (I + N^T A^-1 N)^-1 T, T = L^-1 (G + j I): every quantity is the
whitened fit's X_v Sigma_delta^-1 M^T and M Sigma_delta^-1 M^T at delta = lam / dof, and a K x K solve
whose matrix is at least I.  The penalties are those of :func:`bngp.linear.fits.fit_ridge` (relative
to the largest eigenvalue of X_c^T X_c, here by Lanczos), chosen by the same validation AUC, and the
fit equals that of :func:`bngp.linear.fits.fit_ridge` up to rounding.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from .fits import RIDGE_PATH, Centred, LinearFit, best_point, centre, fit_ridge, mean_auc, prior_intercept
from .kernels import Eigenbasis, Tridiagonal, gram, symmetric_eigh, symmetric_form, thin_svd, times_right_vectors, \
    top_eigenvalue

__all__ = ["SHRINKAGE_PATH", "WHITENED_RIDGE_PATH", "fit_ridge_and_whitened", "fit_whitened", "whitened_map_of_law"]

#: noise-covariance shrinkage d relative to the mean eigenvalue of the residual covariance.
SHRINKAGE_PATH = tuple(10.0 ** np.arange(-6.0, 2.01, 1.0))
#: penalties of the whitened discriminant relative to the largest eigenvalue of M Sigma_d^-1 M^T.
WHITENED_RIDGE_PATH = tuple(10.0 ** np.arange(-8.0, 1.01, 1.0))
#: rows per block when the residual is formed in place.
_ROW_BLOCK = 1024


def fit_whitened(
    releases: torch.Tensor,
    memberships: torch.Tensor,
    validation: tuple[torch.Tensor, torch.Tensor],
    shrinkage_path: tuple[float, ...] = SHRINKAGE_PATH,
    path: tuple[float, ...] = WHITENED_RIDGE_PATH,
    prior_mean: np.ndarray | torch.Tensor | None = None,
) -> LinearFit:
    """The whitened linear discriminant (module docstring) from (R, Q) releases to (R, K) memberships,
    the shrinkage d on ``shrinkage_path`` and the penalty lam on ``path`` chosen jointly by the mean
    per-release AUC of ``validation`` (releases (V, Q), memberships (V, K)); the intercept is
    ``prior_mean`` (K) when given.  The fit's ``shrinkage`` is the chosen d, its ``path`` the AUCs
    along ``path`` at that d.

    Raises:
        InputError: as :func:`bngp.linear.fits.fit_ridge`.
    """
    return _fit_whitened_on(_decompose(releases, memberships, validation, prior_mean), shrinkage_path, path)


def fit_ridge_and_whitened(
    releases: torch.Tensor,
    memberships: torch.Tensor,
    validation: tuple[torch.Tensor, torch.Tensor],
    prior_mean: np.ndarray | torch.Tensor | None = None,
) -> tuple[LinearFit, LinearFit]:
    """(:func:`bngp.linear.fits.fit_ridge`, :func:`fit_whitened`) on the same shadow and validation
    releases with their default paths, both from the one decomposition of the residual noise
    covariance the whitened fit makes (module docstring): the ridge fit needs no Gram matrix or
    eigendecomposition of its own.  The ridge fit equals :func:`bngp.linear.fits.fit_ridge`'s up to
    rounding.  Releases no wider than the memberships (K, such as the row-space coordinates of
    :mod:`bngp.data.geometry`, r <= K - 1 values) take :func:`bngp.linear.fits.fit_ridge` itself: its own
    eigendecomposition of the (at most K x K) Gram matrix makes each penalty a diagonal rescaling, where the
    path through the whitened decomposition costs K x K factorisations per penalty."""
    if releases.shape[1] <= memberships.shape[1]:
        return (fit_ridge(releases, memberships, validation, prior_mean=prior_mean),
                fit_whitened(releases, memberships, validation, prior_mean=prior_mean))
    model = _decompose(releases, memberships, validation, prior_mean)
    whitened = _fit_whitened_on(model, SHRINKAGE_PATH, WHITENED_RIDGE_PATH)
    return _fit_ridge_on(model, RIDGE_PATH), whitened


@dataclass(frozen=True, eq=False)
class _NoiseModel:
    """The whitened fit's decomposition of the centred shadow releases X_c = B_c M + E (module
    docstring), with the validation releases: M (``signal``, (K, Q)), E (``residual``, (R, Q), the
    centred releases overwritten), Sigma = E^T E / dof in the ``form`` whose shifted solves are cheap,
    and M^T and X_v^T rotated into that form's basis (``signal_columns``, ``validation_columns``).
    With fewer releases than outputs (``low_rank``) the basis is V = E^T U / s (``left`` U,
    ``singular`` s) and M's component outside it is ``perpendicular`` (M_perp), with M_perp M_perp^T
    and X_v M_perp^T."""

    centred: Centred
    intercept: torch.Tensor
    labels: torch.Tensor
    gram_b: torch.Tensor
    jitter: float
    identity: torch.Tensor
    signal: torch.Tensor
    residual: torch.Tensor
    degrees: int
    form: Eigenbasis | Tridiagonal
    signal_columns: torch.Tensor
    validation_columns: torch.Tensor
    mean_eigenvalue: float
    low_rank: bool
    left: torch.Tensor | None = None
    singular: torch.Tensor | None = None
    perpendicular: torch.Tensor | None = None
    perpendicular_gram: torch.Tensor | None = None
    validation_perpendicular: torch.Tensor | None = None

    def parts(self, delta: float) -> tuple[torch.Tensor, torch.Tensor]:
        """(M Sigma_delta^-1 M^T, X_v Sigma_delta^-1 M^T), Sigma_delta = Sigma + delta I."""
        whitened_signal = self.form.solve(self.signal_columns, delta)  # Sigma_d^-1 M^T in the rotated basis
        whitened_gram = self.signal_columns.T @ whitened_signal  # M Sigma_d^-1 M^T, (K, K)
        validation_signal = self.validation_columns.T @ whitened_signal  # X_v Sigma_d^-1 M^T
        if self.low_rank:
            whitened_gram = whitened_gram + self.perpendicular_gram / delta
            validation_signal = validation_signal + self.validation_perpendicular / delta
        return whitened_gram, validation_signal

    def spectrum(self, shrink: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(eigenvalues and eigenvectors of M Sigma_d^-1 M^T, X_v Sigma_d^-1 M^T) at delta = d * mean-eig."""
        whitened_gram, validation_signal = self.parts(shrink * self.mean_eigenvalue)
        values, vectors = symmetric_eigh(whitened_gram)
        return values, vectors, validation_signal

    def whitened_map(self, delta: float, right: torch.Tensor) -> torch.Tensor:
        """Sigma_delta^-1 M^T right, (Q, columns of right)."""
        coefficients = self.form.solve(self.signal_columns, delta) @ right  # Sigma_d^-1 M^T right, rotated
        if self.low_rank:  # V c = E^T U (c / s), plus the complement's M_perp^T right / delta
            return (self.residual.T @ (self.left @ (coefficients / self.singular[:, None]))
                    + self.perpendicular.T @ right / delta)
        return self.form.unrotate(coefficients)

    def fit(self, weights: torch.Tensor, ridge: float, score: float, points: list[tuple[float, float]],
            shrinkage: float | None = None) -> LinearFit:
        """The :class:`LinearFit` of ``weights`` (varying outputs, K) chosen by validation AUC."""
        return LinearFit(self.centred.release_mean, self.intercept, self.centred.expand(weights), ridge,
                         "validation-auc", score, tuple(points), int(self.residual.shape[0]), shrinkage)


def _decompose(releases: torch.Tensor, memberships: torch.Tensor, validation: tuple[torch.Tensor, torch.Tensor],
               prior_mean: np.ndarray | torch.Tensor | None) -> _NoiseModel:
    """The :class:`_NoiseModel` of the shadow releases, centred (:func:`bngp.linear.fits.centre`)."""
    centred = centre(releases, memberships)
    centred_x, centred_b = centred.x, centred.b
    intercept = prior_intercept(centred.membership_mean, prior_mean)
    n_rows, n_individuals = centred_b.shape
    n_outputs = centred.width  # all |Q| outputs: those that do not vary have noise variance 0
    gram_b = gram(centred_b)
    jitter = 1e-9 * float(torch.diagonal(gram_b).mean()) + 1e-12
    identity = torch.eye(n_individuals, dtype=torch.float64, device=centred_b.device)
    signal = torch.linalg.solve(gram_b + jitter * identity, centred_b.T @ centred_x)
    # the floor of the mean eigenvalue below, from the centred releases before they become the residual
    centred_power = float(torch.linalg.vector_norm(centred_x)) ** 2 / max(n_rows * n_outputs, 1)
    # the residual E = X - B M overwrites the centred releases (their own copy, bngp.linear.fits.centre), by
    # blocks of rows: without a second R x Q matrix nor the R x Q product B M
    residual = centred_x
    for start in range(0, n_rows, _ROW_BLOCK):
        residual[start:start + _ROW_BLOCK] -= centred_b[start:start + _ROW_BLOCK] @ signal
    degrees = max(1, n_rows - n_individuals - 1)
    validation_x = centred.select(validation[0])
    low_rank = n_rows <= centred_x.shape[1]
    # Sigma in a basis where its shifted solves are cheap (form), with M^T and X_v^T rotated there (columns)
    extra = {}
    if low_rank:
        left, singular, _ = thin_svd(residual, right_vectors=False)
        form = Eigenbasis(singular**2 / degrees, None)  # its basis V = E^T U / s is never formed
        signal_columns = times_right_vectors(signal, residual, left, singular).T  # (M V)^T, (r, K)
        validation_columns = times_right_vectors(validation_x, residual, left, singular).T  # (X_v V)^T
        # M_perp, (K, Q), with (M V / s) U^T formed first: K R r + K R Q multiply-adds instead of R r Q + K r Q
        perpendicular = signal - ((signal_columns.T / singular) @ left.T) @ residual
        extra = {"left": left, "singular": singular, "perpendicular": perpendicular,
                 "perpendicular_gram": gram(perpendicular.T),  # M_perp M_perp^T
                 "validation_perpendicular": validation_x @ perpendicular.T}  # X_v M_perp^T
    else:
        form = symmetric_form(gram(residual) / degrees)
        signal_columns = form.rotate(signal.T)  # (Q, K)
        validation_columns = form.rotate(validation_x.T)
    total = form.trace()
    # floors keep a noise-free release (no defense: the residual is zero) and a constant one finite
    mean_eigenvalue = max(total / n_outputs, 1e-12 * centred_power, 1e-30)
    return _NoiseModel(centred, intercept, validation[1], gram_b, jitter, identity, signal, residual, degrees, form,
                       signal_columns, validation_columns, mean_eigenvalue, low_rank, **extra)


def _fit_whitened_on(model: _NoiseModel, shrinkage_path: tuple[float, ...], path: tuple[float, ...]) -> LinearFit:
    """The whitened fit of ``model``: the (shrinkage, penalty) of highest validation AUC, a later
    shrinkage kept only when it scores more than 1e-12 higher."""
    best: tuple[float, float, float] | None = None
    best_points: list[tuple[float, float]] = []
    for shrink in shrinkage_path:
        values, vectors, validation_signal = model.spectrum(shrink)
        top = max(float(values.max()), 1e-30)
        projected = validation_signal @ vectors
        points = []
        for relative in path:
            prediction = model.intercept + (projected / (values.clamp(min=0) + relative * top)) @ vectors.T
            points.append((relative, mean_auc(prediction, model.labels)))
        ridge, score = best_point(points)
        if best is None or score > best[2] + 1e-12:
            best, best_points = (shrink, ridge, score), points
    shrink, ridge, score = best
    values, vectors, _ = model.spectrum(shrink)
    top = max(float(values.max()), 1e-30)
    solve = (vectors / (values.clamp(min=0) + ridge * top)) @ vectors.T
    return model.fit(model.whitened_map(shrink * model.mean_eigenvalue, solve), ridge, score, best_points, shrink)


def _fit_ridge_on(model: _NoiseModel, ridge_path: tuple[float, ...]) -> LinearFit:
    """The ridge fit of ``model`` by the push-through identity (module docstring), the penalty
    chosen on ``ridge_path`` by validation AUC."""
    # X_c^T X_c = E^T E + N N^T, N = M^T L
    shifted_cholesky = torch.linalg.cholesky(model.gram_b + 2.0 * model.jitter * model.identity)  # L, G' = G + 2 j I
    right = torch.linalg.solve_triangular(shifted_cholesky, model.gram_b + model.jitter * model.identity,
                                          upper=False)  # T
    scale = _ridge_scale(model, shifted_cholesky)
    degrees = model.degrees

    def ridge_factor(relative: float) -> tuple[torch.Tensor, torch.Tensor]:
        """(L (I + L^T M Sigma_delta^-1 M^T L / dof)^-1 T / dof, X_v Sigma_delta^-1 M^T), delta = lam / dof."""
        whitened_gram, validation_signal = model.parts(relative * scale / degrees)
        capacitance = model.identity + shifted_cholesky.T @ whitened_gram @ shifted_cholesky / degrees
        capacitance = (capacitance + capacitance.T) / 2
        return shifted_cholesky @ torch.linalg.solve(capacitance, right) / degrees, validation_signal

    points = []
    for relative in ridge_path:
        factor, validation_signal = ridge_factor(relative)
        points.append((relative, mean_auc(model.intercept + validation_signal @ factor, model.labels)))
    ridge, score = best_point(points)
    factor, _ = ridge_factor(ridge)
    return model.fit(model.whitened_map(ridge * scale / degrees, factor), ridge, score, points)


def _ridge_scale(model: _NoiseModel, shifted_cholesky: torch.Tensor) -> float:
    """The ridge path's scale, the largest eigenvalue of X_c^T X_c (as
    :func:`bngp.linear.fits.fit_ridge`; 1 for releases that do not vary), from the decomposition:
    of dof S + N~ N~^T in the rotated basis of E^T E = dof P S P^T (N~ = P^T M^T L), or with fewer
    releases than outputs, of X_c X_c^T = E E^T + B_c M E^T + E M^T B_c^T + B_c M M^T B_c^T with
    E = U S V^T."""
    residual, signal_columns = model.residual, model.signal_columns
    if not (bool(residual.any()) or bool(model.signal.any())):
        return 1.0
    if model.low_rank:
        left, singular, centred_b = model.left, model.singular, model.centred.b

        def kernel(y: torch.Tensor) -> torch.Tensor:
            along, members = left.T @ y, centred_b.T @ y
            return (left @ (singular**2 * along + singular * (signal_columns @ members))
                    + centred_b @ (signal_columns.T @ (singular * along + signal_columns @ members)
                                   + model.perpendicular_gram @ members))

        return top_eigenvalue(kernel, residual.shape[0], residual)
    lifted = signal_columns @ shifted_cholesky

    def rotated_gram(v: torch.Tensor) -> torch.Tensor:
        return model.degrees * model.form.times(v) + lifted @ (lifted.T @ v)

    return top_eigenvalue(rotated_gram, lifted.shape[0], residual)


def whitened_map_of_law(signal: np.ndarray | torch.Tensor, noise_variance: np.ndarray | torch.Tensor,
                        prior_mean: np.ndarray | torch.Tensor, prior_covariance: np.ndarray | torch.Tensor,
                        release_mean: np.ndarray | torch.Tensor) -> LinearFit:
    """The linear MMSE map of the model above at a known law instead of one estimated from shadow releases:
    x - ``release_mean`` = (b - mu) M + e, M = ``signal`` (K, m), e ~ (0, D), D = diag(``noise_variance``) > 0 (m,),
    b ~ (mu, Sigma_b) (``prior_mean``, ``prior_covariance`` (K, K)).  With G = M D^-1 M^T (K x K), the push-through
    identity gives

        W = (M^T Sigma_b M + D)^-1 M^T Sigma_b = D^-1 M^T Sigma_b (G Sigma_b + I)^-1,

    one K x K solve whose matrix is I plus a product of two positive semi-definite matrices (Kay, *Fundamentals of
    Statistical Signal Processing: Estimation Theory*, chapter 12).  Its error covariance, the posterior covariance
    of the linear-Gaussian model, is the same matrix: Sigma_b - Sigma_b M W = Sigma_b (I - G Sigma_b (G Sigma_b +
    I)^-1) = Sigma_b (G Sigma_b + I)^-1 (``error_covariance``, for :class:`bngp.linear.BoxDecoder`).  No penalty
    is chosen (``criterion`` "known law", ``releases`` 0): the map is the fitted maps' limit in the number of shadow
    releases when the release follows the model, and an attack like any other when it does not (clipping, a
    heavier-tailed noise)."""
    signal = torch.as_tensor(signal, dtype=torch.float64)
    variance = torch.as_tensor(noise_variance, dtype=torch.float64).reshape(-1)
    covariance = torch.as_tensor(prior_covariance, dtype=torch.float64)
    k, width = signal.shape
    if variance.numel() != width or tuple(covariance.shape) != (k, k) or not bool((variance > 0).all()):
        raise ValueError(f"a known-law map needs {width} noise variances > 0 and a {k} x {k} prior covariance.")
    scaled = signal / variance  # M D^-1
    system = covariance @ (scaled @ signal.T) + torch.eye(k, dtype=torch.float64)  # Sigma_b G + I = (G Sigma_b + I)^T
    right = torch.linalg.solve(system, covariance).T  # Sigma_b (G Sigma_b + I)^-1
    return LinearFit(torch.as_tensor(release_mean, dtype=torch.float64).reshape(-1),
                     torch.as_tensor(prior_mean, dtype=torch.float64).reshape(-1), scaled.T @ right,
                     0.0, "known law", float("nan"), (), 0, error_covariance=0.5 * (right + right.T))
