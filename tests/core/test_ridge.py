"""bngp.ridge: the Gram-matrix thin SVD, the leave-one-out ridge fit against direct formulas, and
the logistic recalibration."""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from bngp.ridge import DEFAULT_RIDGE_GRID, affine_calibration, fit_ridge, thin_svd


@pytest.mark.parametrize("shape", [(30, 80), (80, 30)])
def test_thin_svd_matches_the_full_svd(shape):
    generator = torch.Generator().manual_seed(0)
    matrix = torch.randn(shape, generator=generator, dtype=torch.float64)
    left, singular, right_t = thin_svd(matrix)
    reference = torch.linalg.svdvals(matrix)
    np.testing.assert_allclose(singular.flip(0).numpy(), reference.numpy(), rtol=1e-9)
    np.testing.assert_allclose((left * singular) @ right_t, matrix, atol=1e-10)
    np.testing.assert_allclose(left.T @ left, np.eye(min(shape)), atol=1e-10)


def test_thin_svd_drops_the_null_directions_of_a_centred_matrix():
    matrix = torch.randn((20, 50), generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    _, singular, _ = thin_svd(matrix - matrix.mean(dim=0))
    assert singular.numel() == 19  # centring removes one dimension


def _direct_ridge(x: np.ndarray, b: np.ndarray, relative: float) -> np.ndarray:
    """W = (X_c^T X_c + lam I)^-1 X_c^T B_c with lam = relative * ||X_c||_F^2 / min(R, Q)."""
    xc, bc = x - x.mean(axis=0), b - b.mean(axis=0)
    lam = relative * np.sum(xc**2) / min(x.shape)
    return np.linalg.solve(xc.T @ xc + lam * np.eye(x.shape[1]), xc.T @ bc)


def _direct_loo_error(x: np.ndarray, b: np.ndarray, relative: float) -> float:
    """Leave-one-out squared error by refitting without each row (intercept unpenalised)."""
    total = 0.0
    xc_full = x - x.mean(axis=0)
    lam = relative * np.sum(xc_full**2) / min(x.shape)
    for i in range(x.shape[0]):
        rest = np.delete(np.arange(x.shape[0]), i)
        xm, bm = x[rest].mean(axis=0), b[rest].mean(axis=0)
        xc, bc = x[rest] - xm, b[rest] - bm
        w = np.linalg.solve(xc.T @ xc + lam * np.eye(x.shape[1]), xc.T @ bc)
        total += float(np.sum((b[i] - bm - (x[i] - xm) @ w) ** 2))
    return total


@pytest.mark.parametrize("shape", [(25, 40), (60, 12)])
def test_fit_ridge_equals_the_direct_solution_at_the_leave_one_out_optimum(shape):
    rng = np.random.default_rng(2)
    x = rng.normal(size=shape)
    b = (x @ rng.normal(size=(shape[1], 3)) + rng.normal(size=(shape[0], 3)) > 0).astype(np.float64)
    fit = fit_ridge(torch.from_numpy(x), torch.from_numpy(b))
    grid = [value for value in DEFAULT_RIDGE_GRID if value >= 1e-3]  # direct solves are well posed there
    if fit.ridge in grid:
        np.testing.assert_allclose(fit.weights.numpy(), _direct_ridge(x, b, fit.ridge), rtol=1e-6, atol=1e-9)
    errors = {relative: _direct_loo_error(x, b, relative) for relative in grid}
    best = min(errors, key=errors.get)
    refit = fit_ridge(torch.from_numpy(x), torch.from_numpy(b), grid=tuple(grid))
    assert refit.ridge == best
    np.testing.assert_allclose(refit.weights.numpy(), _direct_ridge(x, b, best), rtol=1e-6, atol=1e-9)


@settings(max_examples=60, deadline=None)
@given(
    logits=st.lists(st.floats(-60, 60, allow_nan=False), min_size=2, max_size=40),
    seed=st.integers(0, 2**16),
)
def test_affine_calibration_never_makes_the_attacker_worse(logits, seed):
    """Damped Newton from (a, c) = (1, 0): the recalibrated cross-entropy is at most the raw one
    (up to the 1e-6 / 2 * a^2 penalty), separable or not."""
    z = torch.tensor(logits, dtype=torch.float64)
    labels = torch.from_numpy(np.random.default_rng(seed).integers(0, 2, z.numel()).astype(np.float64))
    scale, shift = affine_calibration(z, labels)
    loss = torch.nn.BCEWithLogitsLoss()
    assert float(loss(scale * z + shift, labels)) <= float(loss(z, labels)) + 1e-6
