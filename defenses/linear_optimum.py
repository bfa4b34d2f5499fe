"""Per-attribute shrinkage and noise optimised against the linear-Gaussian decoder of membership.

Notation of arXiv:2410.07414 section 2.2: population Z (K x |Q|), membership b of N out of K with
prior mean theta, f(D) = Z^T b / N, t = f(theta), and the centred population Zc = Z - 1 t^T, so
that f(D) - t = Zc^T (b - theta) / N.  For the release of :mod:`bngp.defenses.shrinkage`,

    x - t = M (b - theta) + n,   M = diag(1 - a) Zc^T / N,   n_j independent, variance sigma_j^2,

the linear-Gaussian decoder of b (prior covariance P = diag(p), p_k = theta_k (1 - theta_k)) has
posterior covariance C = (M^T S^-1 M + P^-1)^-1, S = diag(sigma^2), which depends on (a, sigma)
only through the per-attribute precisions w_j = (1 - a_j)^2 / sigma_j^2:

    C(w) = (Zc diag(w) Zc^T / N^2 + P^-1)^-1.

Its decoded score of individual k has mean difference 1 - C_kk / p_k between member and
non-member and variance C_kk (1 - C_kk / p_k) (with G the gain, G M = I - C P^-1 and
G S G^T = C - C P^-1 C), so the decoder's signal-to-noise ratio is

    d_k^2 = (p_k - C_kk) / (p_k C_kk),    AUC_k ~ Phi(d_k / sqrt 2).

Utility: for a given w_j, the deviation -a_j m_j + sigma_j e_j (m = f(D) - t, variance v_j over the
prior: v_j = Var_k(Z_kj) (K - N) / (N (K - 1)) for N of K drawn without replacement) has least
variance v_j / (1 + w_j v_j) at a_j = 1 / (1 + w_j v_j), sigma_j = sqrt(w_j) v_j / (1 + w_j v_j)
(a Wiener filter), and under a Gaussian approximation its mean absolute value is
l_j(w_j) = sqrt(2/pi) sqrt(v_j / (1 + w_j v_j)).

In the retentions rho_j = 1 - a_j = w_j v_j / (1 + w_j v_j) in [0, 1), l_j = sqrt(2/pi) sqrt(v_j (1 - rho_j))
and sigma_j^2 = rho_j (1 - rho_j) v_j.  The optimum minimises mean_k Phi(d_k / sqrt 2) subject to
mean_j l_j(w_j) = U (:func:`optimise_precisions`).  The
Gaussian approximation of the loss only shapes (a, sigma): :mod:`bngp.defenses.budget` rescales the
noise so that the exact clipped loss meets the budget.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from bngp.errors import InputError

__all__ = ["LinearOptimum", "decoder_aucs", "optimise_direction_precisions", "optimise_precisions",
           "attribute_variances"]

#: the largest retention rho_j = 1 - a_j the solve reaches (1: the attribute released exactly).
_MAX_RETENTION = 1.0 - 1e-7
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
#: the iterations over which the descent must lower the mean AUC by its tolerance to go on.
_PATIENCE = 20
#: the descent's default tolerance: a fall of the model's mean AUC this small over :data:`_PATIENCE` iterations
#: is far below what any attack can resolve (its standard error over hundreds of releases is ~1e-3).
TOLERANCE = 1e-5


def attribute_variances(genotypes: np.ndarray, n_members: int) -> np.ndarray:
    """v_j = Var(f(D)_j) over N of K drawn uniformly without replacement:
    Var_k(Z_kj) (K - N) / (N (K - 1))."""
    genotypes = np.asarray(genotypes, dtype=np.float64)
    k = genotypes.shape[0]
    if not 1 <= n_members < k:
        raise InputError(f"`n_members` must be between 1 and K - 1 = {k - 1}, got {n_members}.")
    return genotypes.var(axis=0) * (k - n_members) / (n_members * (k - 1))


def _aucs(retention: torch.Tensor, centred: torch.Tensor, variances: torch.Tensor, prior_var: torch.Tensor) -> torch.Tensor:
    """Phi(d_k / sqrt 2) per individual for retentions rho_j = w_j v_j / (1 + w_j v_j) (module docstring)."""
    weights = retention / ((1.0 - retention) * variances)
    if centred.shape[1] < centred.shape[0]:
        # Woodbury with U = Zc diag(sqrt(w)) / N: C = P - P U (I + U^T P U)^-1 U^T P, a |Q| x |Q| solve
        root = centred * torch.sqrt(weights.clamp_min(1e-300))  # no infinite derivative at w = 0
        scaled = prior_var[:, None] * root
        inner = torch.eye(root.shape[1], dtype=root.dtype) + root.T @ scaled
        solved = torch.cholesky_solve(scaled.T, torch.linalg.cholesky(inner))
        posterior = prior_var - (scaled * solved.T).sum(dim=1)
    else:
        information = (centred * weights) @ centred.T + torch.diag(1.0 / prior_var)
        posterior = torch.diagonal(torch.cholesky_inverse(torch.linalg.cholesky(information)))
    ratio = ((prior_var - posterior) / (prior_var * posterior)).clamp_min(0.0)
    return 0.5 * torch.special.erfc(-torch.sqrt(ratio / 2.0 + 1e-18) / math.sqrt(2.0))


def decoder_aucs(precisions: np.ndarray, genotypes: np.ndarray, n_members: int) -> np.ndarray:
    """AUC_k ~ Phi(d_k / sqrt 2) of the linear-Gaussian decoder for attribute precisions
    w_j = (1 - a_j)^2 / sigma_j^2 (module docstring); w_j = inf is an exact release, which the
    solve caps at a retention of 1 - 1e-7."""
    variances = attribute_variances(genotypes, n_members)
    informative = variances > 0  # an attribute every individual shares carries no membership signal
    centred, prior_var = _centred(np.asarray(genotypes)[:, informative], n_members)
    variances = variances[informative]
    precisions = np.asarray(precisions, dtype=np.float64)[informative]
    exact = np.isinf(precisions)
    vw = np.where(exact, 0.0, precisions) * variances
    retention = np.minimum(np.where(exact, 1.0, vw / (1.0 + vw)), _MAX_RETENTION)
    with torch.no_grad():
        return _aucs(torch.as_tensor(retention), centred, torch.as_tensor(variances), prior_var).numpy()


def _centred(genotypes: np.ndarray, n_members: int) -> tuple[torch.Tensor, torch.Tensor]:
    genotypes = np.asarray(genotypes, dtype=np.float64)
    k = genotypes.shape[0]
    theta = n_members / k
    centred = torch.as_tensor((genotypes - genotypes.mean(axis=0)) / n_members)
    return centred, torch.full((k,), theta * (1.0 - theta), dtype=torch.float64)


@dataclass(frozen=True)
class LinearOptimum:
    """The optimised mechanism's parameters and what the decoder model says of them.

    Attributes:
        shrink: a_j = 1 / (1 + w_j v_j).
        sigma: sigma_j = sqrt(w_j) v_j / (1 + w_j v_j), the noise's standard deviation.
        precision: w_j.
        model_loss: mean_j l_j(w_j) (Gaussian approximation) at the optimum.
        model_auc: mean_k Phi(d_k / sqrt 2) at the optimum.
    """

    shrink: np.ndarray
    sigma: np.ndarray
    precision: np.ndarray
    model_loss: float
    model_auc: float


def _project(values: np.ndarray, weights: np.ndarray, total: float, lower: float) -> np.ndarray:
    """Euclidean projection of ``values`` onto {q in [lower, 1]^n : weights . q = total}:
    q = clip(values - tau weights, lower, 1), tau found by bisection (weights . q falls in tau)."""
    low, high = -1.0, 1.0
    while (weights @ np.clip(values - low * weights, lower, 1.0)) < total:
        low *= 2.0
    while (weights @ np.clip(values - high * weights, lower, 1.0)) > total:
        high *= 2.0
    for _ in range(100):
        middle = 0.5 * (low + high)
        if weights @ np.clip(values - middle * weights, lower, 1.0) > total:
            low = middle
        else:
            high = middle
    return np.clip(values - high * weights, lower, 1.0)


def _descend(value_and_gradient, scale: np.ndarray, total: float, lower: float, start: float, steps: int,
             first_step: float, tolerance: float) -> tuple[np.ndarray, float]:
    """The monotone projected-gradient descent of :func:`optimise_precisions` in the loss fractions q from the
    uniform point q_j = ``start``, stopped when the mean AUC fell by less than ``tolerance`` over the last
    :data:`_PATIENCE` iterations: (q, mean AUC) at the end."""
    q = np.full(scale.size, start)
    value, gradient = value_and_gradient(q)
    history = [value]
    step = first_step
    for _ in range(steps):
        largest = float(np.abs(gradient).max())
        if largest == 0.0 or step < 1e-6 or (len(history) > _PATIENCE and history[-_PATIENCE - 1] - value < tolerance):
            break
        candidate = _project(q - step * gradient / largest, scale, total, lower)
        candidate_value, candidate_gradient = value_and_gradient(candidate)
        if candidate_value < value:
            q, value, gradient = candidate, candidate_value, candidate_gradient
            step = min(step * 1.2, first_step)
        else:
            step *= 0.5
        history.append(value)
    return q, value


def _gradient_of(aucs_of_retention):
    """value_and_gradient(q) of the mean AUC at retentions 1 - q^2, by autograd."""

    def value_and_gradient(fractions: np.ndarray) -> tuple[float, np.ndarray]:
        q = torch.as_tensor(fractions).requires_grad_(True)
        value = aucs_of_retention(1.0 - q * q).mean()
        value.backward()
        return value.item(), q.grad.numpy().copy()

    return value_and_gradient


def _optimum(q: np.ndarray, value: float, informative: np.ndarray, variances_np: np.ndarray,
             scale: np.ndarray) -> LinearOptimum:
    """The :class:`LinearOptimum` of loss fractions ``q`` on the informative attributes (module docstring)."""
    retention = np.zeros(variances_np.size)
    retention[informative] = 1.0 - q * q
    v = np.where(informative, variances_np, 1.0)
    shrink = 1.0 - retention
    sigma = np.where(informative, np.sqrt(retention * (1.0 - retention) * v), 0.0)
    precision = np.where(informative, retention / ((1.0 - retention) * v), 0.0)
    return LinearOptimum(shrink, sigma, precision, float(scale @ q) / variances_np.size, value)


def _check_relative_budget(relative_budget: float) -> None:
    if not 0.0 < relative_budget < 1.0:
        raise InputError(f"the relative budget must be in (0, 1), got {relative_budget:g}.")


def optimise_precisions(genotypes: np.ndarray, n_members: int, relative_budget: float, *,
                        steps: int = 400, first_step: float = 0.1, tolerance: float = TOLERANCE) -> LinearOptimum:
    """Minimise the decoder's mean AUC subject to mean_j l_j = ``relative_budget`` x mean_j l_j(0)
    (the model loss of the data-independent release), module docstring.

    In the loss fractions q_j = sqrt(1 - rho_j) = l_j / l_j(0) the budget is one linear constraint,
    sum_j l_j(0) q_j = relative_budget sum_j l_j(0), over the box [1e-4, 1]^|Q|.  The mean AUC is not
    convex in q (it saturates at 1 and rises like a square root of the information near 0), so
    the solve is a monotone local descent from the feasible uniform point q_j = relative_budget
    (one shrinkage for every attribute, noise proportional to sqrt(v_j)): projected gradient
    steps along -grad / max|grad| (Euclidean projection onto the constraint set), a step taken only
    when it lowers the mean AUC, else halved, until the mean AUC stops falling (``tolerance``).  The result
    is never worse, by the model, than the uniform point.

    Args:
        genotypes: Z (K x |Q|), 0/1.
        n_members: N.
        relative_budget: U / L0 in (0, 1).
        steps: the most projected-gradient iterations.
        first_step: the first step's largest change of a q_j.
        tolerance: the descent stops when the mean AUC fell by less than this over the last 20 iterations
            (0: run all ``steps``).
    """
    _check_relative_budget(relative_budget)
    variances_np = attribute_variances(genotypes, n_members)
    informative = variances_np > 0
    centred, prior_var = _centred(np.asarray(genotypes)[:, informative], n_members)
    variances = torch.as_tensor(variances_np[informative])
    scale = _SQRT_2_OVER_PI * np.sqrt(variances_np[informative])
    total = relative_budget * float(scale.sum())
    lower = math.sqrt(1.0 - _MAX_RETENTION)
    q, value = _descend(_gradient_of(lambda retention: _aucs(retention, centred, variances, prior_var)), scale, total,
                        lower, relative_budget, steps, first_step, tolerance)
    return _optimum(q, value, informative, variances_np, scale)


def _orthogonal_aucs(retention: torch.Tensor, left_squared: torch.Tensor, information_scale: torch.Tensor,
                     variances: torch.Tensor, prior_var: float) -> torch.Tensor:
    """:func:`_aucs` for centred columns U diag(s) / N with orthonormal U (K x r) and the uniform prior
    variance p: with d_i = s_i^2 w_i / N^2, Woodbury gives the posterior covariance
    C = p I - p^2 U diag(d / (1 + p d)) U^T, so p - C_kk = p^2 sum_i U_ki^2 d_i / (1 + p d_i) in O(K r)."""
    weights = retention / ((1.0 - retention) * variances)
    information = information_scale * weights
    gain = prior_var**2 * (left_squared @ (information / (1.0 + prior_var * information)))
    ratio = (gain / (prior_var * (prior_var - gain))).clamp_min(0.0)
    return 0.5 * torch.special.erfc(-torch.sqrt(ratio / 2.0 + 1e-18) / math.sqrt(2.0))


def optimise_direction_precisions(left: np.ndarray, singular_values: np.ndarray, n_members: int,
                                  relative_budget: float, *, steps: int = 400, first_step: float = 0.1,
                                  tolerance: float = TOLERANCE) -> LinearOptimum:
    """:func:`optimise_precisions` for the K x r "genotypes" U diag(s) of the candidates' row space (U with
    orthonormal columns orthogonal to the ones vector, s > 0: :class:`bngp.data.geometry.PopulationSpace`'s
    ``left`` and ``singular_values``): the same descent from the same start, each direction's variance
    v_i = (s_i^2 / K) (K - N) / (N (K - 1)), the decoder's posterior in closed form (:func:`_orthogonal_aucs`)
    in O(K r) a step instead of a K x K factorisation.  Its values and gradients equal those of
    :func:`optimise_precisions` of U diag(s) up to rounding; where retentions approach 1 the factorisation's
    gradient loses precision and that descent can stall, which the closed form does not."""
    _check_relative_budget(relative_budget)
    left = np.asarray(left, dtype=np.float64)
    singular_values = np.asarray(singular_values, dtype=np.float64)
    k = left.shape[0]
    if not 1 <= n_members < k:
        raise InputError(f"`n_members` must be between 1 and K - 1 = {k - 1}, got {n_members}.")
    variances_np = singular_values**2 / k * (k - n_members) / (n_members * (k - 1))
    informative = variances_np > 0
    theta = n_members / k
    prior_var = theta * (1.0 - theta)
    left_squared = torch.as_tensor(left[:, informative] ** 2)
    information_scale = torch.as_tensor(singular_values[informative] ** 2 / n_members**2)
    variances = torch.as_tensor(variances_np[informative])
    scale = _SQRT_2_OVER_PI * np.sqrt(variances_np[informative])
    total = relative_budget * float(scale.sum())
    lower = math.sqrt(1.0 - _MAX_RETENTION)
    aucs = _gradient_of(lambda retention: _orthogonal_aucs(retention, left_squared, information_scale, variances,
                                                           prior_var))
    q, value = _descend(aucs, scale, total, lower, relative_budget, steps, first_step, tolerance)
    return _optimum(q, value, informative, variances_np, scale)
