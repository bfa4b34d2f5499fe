"""bngp.linear.box: the box-constrained decoder of a linear map's posterior, against closed forms, a slow reference
solver and the cube's exact-recovery threshold."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy.optimize import minimize

from bngp.errors import InputError
from bngp.linear import BoxDecoder, LinearFit, error_covariance, whitened_map_of_law
from bngp.metrics import auc


def _prior(k: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    theta = n / k
    return np.full(k, theta), theta * (1 - theta) * k / (k - 1) * (np.eye(k) - 1.0 / k)


def _memberships(generator: np.random.Generator, releases: int, k: int, n: int) -> np.ndarray:
    b = np.zeros((releases, k))
    for row in b:
        row[generator.choice(k, n, replace=False)] = 1.0
    return b


def _constant_fit(k: int, mean: np.ndarray) -> LinearFit:
    return LinearFit(torch.zeros(1, dtype=torch.float64), torch.as_tensor(mean, dtype=torch.float64),
                     torch.zeros((1, k), dtype=torch.float64), 0.0, "given", 0.0, (), 0)


def test_projection_onto_the_hull_against_bisection() -> None:
    """Pi_H(v) = clip(v - nu, 0, 1) summing to N, nu found by 200 bisection steps in float64 (a slow reference)."""
    generator = np.random.default_rng(0)
    k, n = 30, 12
    values = torch.as_tensor(generator.uniform(-0.8, 1.6, (50, k)))
    values[0] = 0.3  # a constant row
    decoder = BoxDecoder.of(_constant_fit(k, np.full(k, 0.4)), torch.eye(k, dtype=torch.float64), n)
    projected, _ = decoder.project(values)
    for row, result in zip(values.numpy(), projected.numpy()):
        low, high = row.min() - 1, row.max()
        for _ in range(200):
            middle = 0.5 * (low + high)
            low, high = (middle, high) if np.clip(row - middle, 0, 1).sum() > n else (low, middle)
        np.testing.assert_allclose(result, np.clip(row - 0.5 * (low + high), 0, 1), atol=1e-9)
    assert torch.allclose(projected.sum(dim=1), torch.full((50,), float(n), dtype=torch.float64), atol=1e-8)


def test_an_interior_mean_on_the_hyperplane_is_returned_unchanged() -> None:
    """mu = theta 1 lies in H (inside the box, summing to N): the mode over H is mu itself."""
    k, n = 20, 8
    decoder = BoxDecoder.of(_constant_fit(k, np.full(k, n / k)), torch.eye(k, dtype=torch.float64), n)
    decoded = decoder.decode(torch.zeros((3, 1), dtype=torch.float64))
    assert torch.allclose(decoded, torch.full((3, k), n / k, dtype=torch.float64), atol=1e-6)


def test_the_mode_against_a_slow_reference_solver() -> None:
    """A full-rank C: argmin (b - mu)^T C^-1 (b - mu) over [0, 1]^K with 1^T b = N, solved by SLSQP (scipy) to
    1e-10, equals the ADMM decode to 1e-3 (its stopping tolerance is 1e-4 per coordinate over 10 iterations)."""
    generator = np.random.default_rng(1)
    k, n = 8, 3
    root = generator.normal(size=(k, k))
    covariance = root @ root.T / k + 0.05 * np.eye(k)
    means = generator.uniform(-0.5, 1.2, (4, k))
    precision = np.linalg.inv(covariance)
    for mean in means:
        decoder = BoxDecoder.of(_constant_fit(k, mean), torch.as_tensor(covariance), n)
        decoded = decoder.decode(torch.zeros((1, 1), dtype=torch.float64), max_iterations=5000, tolerance=1e-7)[0]
        reference = minimize(lambda b: (b - mean) @ precision @ (b - mean), np.full(k, n / k),
                             jac=lambda b: 2 * precision @ (b - mean), bounds=[(0, 1)] * k, method="SLSQP",
                             constraints=[{"type": "eq", "fun": lambda b: b.sum() - n}],
                             options={"ftol": 1e-14, "maxiter": 1000})
        np.testing.assert_allclose(decoded.numpy(), reference.x, atol=1e-3)


def test_exact_releases_beyond_the_cubes_threshold_are_decoded_exactly() -> None:
    """Donoho and Tanner (2010): a cube sliced by a random subspace of codimension m > K / 2 keeps its vertex as the
    only point.  m = 45 exact (almost noiseless) projections of K = 60 memberships: the known-law map reads them with
    errors, the box decoding rounds to b on every release."""
    generator = np.random.default_rng(2)
    k, n, m, releases = 60, 30, 45, 40
    signal = generator.normal(size=(k, m))
    prior_mean, prior_covariance = _prior(k, n)
    fit = whitened_map_of_law(signal, np.full(m, 1e-10), prior_mean, prior_covariance, np.zeros(m))
    b = _memberships(generator, releases, k, n)
    x = torch.as_tensor((b - prior_mean) @ signal)
    linear = fit.predict(x).numpy()
    decoded = BoxDecoder.of(fit, fit.error_covariance, n).decode(x, max_iterations=2000, tolerance=1e-7).numpy()
    assert np.all(np.round(decoded) == b)
    assert np.mean(np.round(np.clip(linear, 0, 1)) != b) > 0.02  # the linear map alone misreads 3.5% of them
    assert auc(decoded.ravel(), b.ravel()) == 1.0


def test_the_laws_error_covariance_is_the_empirical_one() -> None:
    """Known law (linear-Gaussian model): E[(b - b_hat)(b - b_hat)^T] in closed form against its estimate on 20,000
    draws of N-of-K memberships and Gaussian noise, within 0.02 of the largest entry (sampling error ~ 1/sqrt(20,000)
    of it, and the N-of-K memberships are only approximately Gaussian)."""
    generator = np.random.default_rng(3)
    k, n, m, releases = 12, 6, 9, 20_000
    signal = generator.normal(size=(k, m))
    variance = generator.uniform(0.5, 2.0, m)
    prior_mean, prior_covariance = _prior(k, n)
    fit = whitened_map_of_law(signal, variance, prior_mean, prior_covariance, np.zeros(m))
    b = _memberships(generator, releases, k, n)
    x = (b - prior_mean) @ signal + generator.normal(size=(releases, m)) * np.sqrt(variance)
    empirical = error_covariance(fit, torch.as_tensor(x), torch.as_tensor(b))
    scale = float(fit.error_covariance.abs().max())
    assert float((empirical - fit.error_covariance).abs().max()) < 0.02 * scale


def test_bad_inputs_are_refused() -> None:
    fit = _constant_fit(5, np.full(5, 0.4))
    with pytest.raises(InputError, match="5 x 5"):
        BoxDecoder.of(fit, torch.eye(4, dtype=torch.float64), 2)
    with pytest.raises(InputError, match="members"):
        BoxDecoder.of(fit, torch.eye(5, dtype=torch.float64), 5)
    with pytest.raises(InputError, match="two releases"):
        error_covariance(fit, torch.zeros((1, 1), dtype=torch.float64), torch.zeros((1, 5), dtype=torch.float64))
