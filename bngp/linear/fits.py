"""The ridge map from a release to the memberships, and what every linear fit shares: its record
(:class:`LinearFit`), the centring of the shadow releases and the choice of the penalty by AUC.

A linear fit maps a release x (|Q| outputs) to the memberships b (K individuals) as
b_hat(x) = b_mean + (x - x_mean) W, fitted on R simulated (shadow) releases X (R, Q) with their
memberships B (R, K), both centred (X_c, B_c).

**Ridge regression** (:func:`fit_ridge`; Hoerl and Kennard, Technometrics 12(1), 1970; Hastie,
Tibshirani and Friedman, *The Elements of Statistical Learning*, section 3.4.1):
W = (X_c^T X_c + lam I)^-1 X_c^T B_c, the best linear (least-squares) approximation of the
posterior mean E[b | x], which the Bayesian attacker of the BNGP game learns (arXiv:2410.07414,
section 3).  With more shadow releases than outputs it is solved by shifted solves in
:func:`bngp.linear.kernels.symmetric_form` of X_c^T X_c, else through the thin SVD X_c = U S V^T (:func:`bngp.linear.kernels.thin_svd`) as
W = V diag(s / (s^2 + lam)) U^T B_c, in the dual form (V = X_c^T U / s never formed) when R <= Q.

**Regularisation by what the attack is for.**  The penalty is chosen on :data:`RIDGE_PATH`, which
spans the whole singular-value spectrum (lam from 1e-9 to 1e2 times the largest squared singular
value), by the mean per-release AUC (:func:`bngp.metrics.release_aucs`) of held-out validation
releases, or, without them, of the exact leave-one-out predictions, free from the SVD:
b_loo_i = b_i - (b_i - b_hat_i) / (1 - H_ii), H = 1 1^T / R + U diag(s^2 / (s^2 + lam)) U^T
(ridge with an unpenalised intercept refitted without row i; Hastie et al., section 7.10).  Among
equal AUCs the strongest penalty is kept.  The criterion scores exactly what the attack scores,
intercept included; squared error is not the target (it prefers strong penalties on a release
whose membership signal the defender has shrunk, where the ranking is then left to the
intercept's sampling noise; ``docs/design/linear.md``).

**Intercept.**  b_mean is the known prior mean E[b] = theta when the caller passes it
(``prior_mean``; the centred map is the same either way, since the centred releases sum to zero),
else the shadow releases' mean membership, whose sampling noise (about 0.5 / sqrt(R) per
individual) alone ranks individuals when the signal is weak: pass the prior whenever it is known.

**Device.**  A fit's tensors live on its releases' device (the CPU, or the GPU of a game trained
with ``device="cuda"``, :mod:`bngp.device`); AUCs are computed from CPU copies.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import torch

from bngp.errors import InputError
from bngp.metrics import release_aucs

from .kernels import gram, symmetric_form, thin_svd, times_right_vectors

__all__ = ["LinearFit", "RIDGE_PATH", "Centred", "best_point", "centre", "fit_ridge", "mean_auc", "prior_intercept"]

#: ridge penalties relative to the largest squared singular value of the centred releases:
#: from (numerically) least squares to a map that predicts the mean.
RIDGE_PATH = tuple(10.0 ** np.arange(-9.0, 2.01, 0.5))
#: rows on which the leave-one-out AUC is measured (the fit itself uses every row).
_LOO_ROWS = 2000


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
        error_covariance: E[(b - b_hat)(b - b_hat)^T] (K, K) where the map's law gives it in closed form (the
            known-law map), else None.
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
    error_covariance: torch.Tensor | None = None

    def predict(self, releases: torch.Tensor) -> torch.Tensor:
        """b_hat for each release, shape (R, K), differentiable in the releases."""
        return self.membership_mean + (releases.to(torch.float64) - self.release_mean) @ self.weights

    def of_coordinates(self, basis: torch.Tensor | np.ndarray, target: torch.Tensor | np.ndarray,
                       attribute_weights: torch.Tensor | np.ndarray | None = None) -> "LinearFit":
        """This fit of the coordinates c(x) = V^T (w o (x - t)) (``basis`` V (|Q|, r), ``target`` t, attribute weights
        w, 1 when None) as the same map of the release x: b_mean + (c(x) - c_mean) W_c =
        (b_mean - c_mean W_c) + (x - t) diag(w) V W_c, with this fit's penalty, path and record."""
        device = self.weights.device
        weights = torch.as_tensor(basis, dtype=torch.float64, device=device) @ self.weights
        if attribute_weights is not None:
            weights *= torch.as_tensor(attribute_weights, dtype=torch.float64, device=device).reshape(-1, 1)
        return replace(self, release_mean=torch.as_tensor(target, dtype=torch.float64, device=device).reshape(-1),
                       membership_mean=self.membership_mean - self.release_mean @ self.weights, weights=weights)

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


def mean_auc(scores: torch.Tensor, labels: torch.Tensor) -> float:
    """The mean per-release AUC of ``scores`` (R, K) against ``labels`` (R, K)
    (:func:`bngp.metrics.release_aucs`; releases whose labels are all equal are left out), 0.5 if none."""
    values = release_aucs(scores.cpu().numpy(), labels.cpu().numpy())
    return float(values.mean()) if values.size else 0.5


def best_point(path: list[tuple[float, float]]) -> tuple[float, float]:
    """The (penalty, AUC) of highest AUC; among equal AUCs the strongest penalty (the stabler map)."""
    return max(path, key=lambda point: (round(point[1], 12), point[0]))


@dataclass(frozen=True, eq=False)
class Centred:
    """Shadow releases centred for a linear fit, restricted to the outputs that vary.

    ``x``: X - m on the varying outputs only (float64, a new tensor the fit may overwrite);
    ``b``: B - mean B; ``release_mean``: m over all |Q| outputs; ``membership_mean``: mean B;
    ``varying``: indices of the varying outputs, or None when every output varies;
    ``width``: |Q|.  An output that does not vary over the shadow releases (a data-independent
    block of a composed release, a monomorphic SNV released without noise) is 0 after centring:
    it adds nothing to any Gram matrix or product of the fit, whose weights are 0 on it, so the
    fit runs on the others and :meth:`expand` puts the zero rows back (exact up to rounding)."""

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


def centre(releases: torch.Tensor, memberships: torch.Tensor) -> Centred:
    """The centred shadow releases of a linear fit (:class:`Centred`), in one float64 copy of the
    varying outputs."""
    if releases.ndim != 2 or memberships.ndim != 2 or releases.shape[0] != memberships.shape[0]:
        raise InputError("releases (R, Q) and memberships (R, K) must have the same number of rows.")
    if releases.shape[0] < 3:
        raise InputError(f"a linear fit needs at least 3 shadow releases, got {releases.shape[0]}.")
    memberships = memberships.to(torch.float64)
    membership_mean = memberships.mean(dim=0)
    # one float64 copy of the releases, centred in place; its column means are bit for bit
    # releases.mean(dim=0, dtype=float64), which makes the same float64 copy internally and reduces it
    centred = releases.to(torch.float64, copy=True)
    release_mean = centred.mean(dim=0)
    # an output varies unless max_i |x_i - m| (= max(max x - m, m - min x), from the column minima
    # and maxima, one pass each) is rounding residue of m
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
    return Centred(centred, memberships - membership_mean, release_mean, membership_mean, varying,
                    int(releases.shape[1]))


def prior_intercept(membership_mean: torch.Tensor, prior_mean: np.ndarray | torch.Tensor | None) -> torch.Tensor:
    """The intercept of a fit: ``prior_mean`` (K entries, float64 on the device of ``membership_mean``)
    when given, else the shadow releases' ``membership_mean``."""
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
    """Ridge map from (R, Q) releases to (R, K) memberships (R >= 3; the module docstring states
    the math), the penalty (relative to the largest squared singular value) chosen on ``path`` by the
    mean per-release AUC of the ``validation`` releases (releases (V, Q), memberships (V, K)), or of
    the exact leave-one-out predictions when none are given.  The intercept is ``prior_mean`` (K)
    when given.  Outputs that do not vary over the shadow releases get weight 0.

    Raises:
        InputError: on mismatched shapes, fewer than 3 shadow releases or a ``prior_mean`` of the
            wrong size.
    """
    centred = centre(releases, memberships)
    centred_x, centred_b, release_mean, membership_mean = centred.x, centred.b, centred.release_mean, centred.membership_mean
    intercept = prior_intercept(membership_mean, prior_mean)
    # fewer shadow releases than outputs (R <= Q): the dual form, V = X^T U / s never formed,
    # predictions through X_v X^T U / s and the map W = X^T U diag(1 / (s^2 + lam)) U^T B
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
        rotated = times_right_vectors(validation_x, centred_x, left, singular) if dual else validation_x @ right_t.T
        labels = validation[1]
        for relative in path:
            prediction = intercept + rotated @ ((singular / (squared + relative * scale))[:, None] * projected)
            points.append((relative, mean_auc(prediction, labels)))
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
            points.append((relative, mean_auc(membership_mean + loo + swap, memberships[rows])))
        criterion = "loo-auc"
    ridge, score = best_point(points)
    if dual:
        weights = centred_x.T @ (left @ (projected / (squared + ridge * scale)[:, None]))
    else:
        weights = right_t.T @ ((singular / (squared + ridge * scale))[:, None] * projected)
    return LinearFit(release_mean, intercept, centred.expand(weights), ridge, criterion, score, tuple(points), int(centred_x.shape[0]))


def _fit_ridge_primal(centred: Centred, intercept: torch.Tensor, validation: tuple[torch.Tensor, torch.Tensor],
                      path: tuple[float, ...]) -> LinearFit:
    """:func:`fit_ridge` with more shadow releases than outputs and validation releases: W(lam) =
    (X_c^T X_c + lam I)^-1 X_c^T B_c by shifted solves in the :func:`symmetric_form` of X_c^T X_c
    (on the CPU its tridiagonal form), with X_c^T B_c and X_v^T rotated once; the path's scale is the largest eigenvalue of X_c^T X_c (1 for releases that do not vary)."""
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

    points = [(relative, mean_auc(intercept + predictions(relative * scale), labels)) for relative in path]
    ridge, score = best_point(points)
    weights = form.unrotate(form.solve(projected, ridge * scale))
    return LinearFit(centred.release_mean, intercept, centred.expand(weights), ridge, "validation-auc", score,
                     tuple(points), int(centred_x.shape[0]))

