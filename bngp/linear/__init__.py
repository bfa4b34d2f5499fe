"""Linear attackers fitted in closed form on shadow releases: maps b_hat(x) = b_mean + (x - x_mean) W
from a release x (|Q| outputs) to the memberships b (K individuals), regularised by validated AUC
and fitted to convergence in the number of shadow releases.

- :mod:`bngp.linear.kernels`: the thin SVD through a Gram matrix, symmetric eigendecompositions and
  the tridiagonal form in which the fits solve shifted systems;
- :mod:`bngp.linear.fits`: the fit's record (:class:`LinearFit`) and the ridge map
  (:func:`fit_ridge`, ridge regression, the least-squares approximation of E[b | x]);
- :mod:`bngp.linear.whitened`: the whitened linear discriminant (:func:`fit_whitened`, the linear
  MMSE estimator under x_c = b_c M + e, e ~ (0, Sigma)) and both maps from one decomposition
  (:func:`fit_ridge_and_whitened`);
- :mod:`bngp.linear.convergence`: shadow releases doubled until the validation AUC levels off
  (:func:`fit_converged`, :func:`fit_converged_jointly`, :class:`LearningCurve`), the first size
  optionally fitted ahead by a caller-given :class:`Prefetcher`;
- :mod:`bngp.linear.calibration`: the logistic and affine calibration of attack scores;
- :mod:`bngp.linear.box`: a map's posterior read at its mode over the memberships' hull
  (:class:`BoxDecoder`, the box-constrained reconstruction of Dinur and Nissim).

Each module states its math and sources; ``docs/design/linear.md`` holds the measurements behind
the defaults.
"""

from .box import BoxDecoder, box_bytes, error_covariance
from .calibration import affine_calibration, logistic_calibration
from .convergence import (
    DEFAULT_VALIDATION_RELEASES,
    SHADOW_FLOAT_BUDGET,
    LearningCurve,
    Pending,
    Prefetcher,
    Sampler,
    SharedDraws,
    converged_fit_bytes,
    coordinate_curve_start,
    default_shadow_releases,
    fit_converged,
    fit_converged_jointly,
    max_shadow_releases,
)
from .fits import RIDGE_PATH, LinearFit, fit_ridge
from .kernels import gram, symmetric_eigh, symmetric_form, thin_svd
from .whitened import SHRINKAGE_PATH, WHITENED_RIDGE_PATH, fit_ridge_and_whitened, fit_whitened, whitened_map_of_law

__all__ = [
    "LinearFit",
    "BoxDecoder",
    "box_bytes",
    "error_covariance",
    "LearningCurve",
    "fit_ridge",
    "fit_whitened",
    "whitened_map_of_law",
    "fit_ridge_and_whitened",
    "fit_converged",
    "fit_converged_jointly",
    "coordinate_curve_start",
    "SharedDraws",
    "Sampler",
    "Prefetcher",
    "Pending",
    "affine_calibration",
    "logistic_calibration",
    "thin_svd",
    "gram",
    "symmetric_eigh",
    "symmetric_form",
    "converged_fit_bytes",
    "default_shadow_releases",
    "max_shadow_releases",
    "DEFAULT_VALIDATION_RELEASES",
    "SHADOW_FLOAT_BUDGET",
    "RIDGE_PATH",
    "SHRINKAGE_PATH",
    "WHITENED_RIDGE_PATH",
]
