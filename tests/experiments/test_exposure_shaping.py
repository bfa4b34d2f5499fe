"""experiments/exposure_shaping.py: the closed forms against the product's decoder model and brute force."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from bngp.data.population import Population
from bngp.defenses.linear_optimum import _orthogonal_aucs

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "experiments"))
import exposure_shaping as shaping  # noqa: E402


@pytest.fixture(scope="module")
def model():
    rng = np.random.default_rng(3)
    genotypes = (rng.random((60, 50)) < rng.uniform(0.05, 0.5, 50)).astype(np.uint8)
    return shaping.ExposureModel.of(Population(genotypes[:30], genotypes[30:]), 15)


def test_exposures_match_the_products_decoder_model(model):
    """Uniform candidates (beta = 1, w = 0): the AUCs equal :func:`_orthogonal_aucs` of the row-space optimum
    (its closed form with information s^2 rho^2 / (N^2 lambda)) to rounding."""
    r, k = model.rank, model.n_individuals
    rho = torch.linspace(0.2, 0.9, r, dtype=torch.float64)
    lam = 1e-4 * torch.linspace(0.5, 2.0, r, dtype=torch.float64)
    d2 = model.exposures(rho, torch.ones(k, dtype=torch.float64), model.noise_covariance(lam, torch.zeros(k, dtype=torch.float64)))
    ours = shaping._phi(torch.sqrt(d2) / math.sqrt(2.0))
    # _orthogonal_aucs takes retentions and variances with weights = retention / ((1 - retention) variances)
    # = rho^2 / lambda: variances = lambda retention / ((1 - retention) rho^2) for retention = rho
    variances = lam / ((1.0 - rho) * rho)
    theirs = _orthogonal_aucs(rho, model.left**2, model.singular**2 / model.n_members**2, variances,
                              model.prior_variance)
    assert torch.allclose(ours, theirs, rtol=1e-10, atol=1e-12)


def test_exposures_against_the_dense_posterior(model):
    """Per-candidate retention and noise: d_k^2 from the K x K posterior (M^T S^-1 M + P^-1)^-1 formed directly."""
    r, k, p = model.rank, model.n_individuals, model.prior_variance
    gen = torch.Generator().manual_seed(0)
    rho, lam = torch.rand(r, generator=gen, dtype=torch.float64), 1e-4 * (1 + torch.rand(r, generator=gen, dtype=torch.float64))
    beta, w = torch.rand(k, generator=gen, dtype=torch.float64), 1e-3 * torch.rand(k, generator=gen, dtype=torch.float64)
    covariance = model.noise_covariance(lam, w)
    a = (rho * model.singular / model.n_members)[:, None] * model.left.T * beta[None, :]
    posterior = torch.linalg.inv(a.T @ torch.linalg.solve(covariance, a) + torch.eye(k, dtype=torch.float64) / p)
    expected = (p - torch.diagonal(posterior)) / (p * torch.diagonal(posterior))
    assert torch.allclose(model.exposures(rho, beta, covariance), expected, rtol=1e-7)


def test_pooled_tpr_closed_form_for_equal_exposures():
    """Equal d_k = d: the pooled likelihood-ratio test is one Gaussian shift test, TPR = Phi(d - z_(1-alpha))."""
    d = 1.3
    tpr = shaping.pooled_tpr(torch.full((40,), d**2, dtype=torch.float64), 0.01)
    expected = 0.5 * math.erfc(-(d - 2.3263478740408408) / math.sqrt(2.0))
    assert float(tpr) == pytest.approx(expected, abs=1e-9)


def test_pooled_tpr_mixture_against_brute_force_threshold():
    """Two exposure groups: the implicit threshold's TPR equals a dense scan of the threshold to 1e-6."""
    d = torch.tensor([0.5] * 30 + [2.0] * 10, dtype=torch.float64)
    tpr = float(shaping.pooled_tpr(d**2, 0.01))
    phi = lambda z: 0.5 * torch.special.erfc(-z / math.sqrt(2.0))
    grid = torch.linspace(-5.0, 20.0, 2_000_001, dtype=torch.float64)[:, None]
    fpr = phi(-(grid / d + d / 2.0)).mean(dim=1)
    index = int(torch.argmin((fpr - 0.01).abs()))
    assert tpr == pytest.approx(float(phi(-(grid[index] / d - d / 2.0)).mean()), abs=1e-6)


@pytest.mark.parametrize("objective", shaping.OBJECTIVES)
def test_gradient_matches_finite_differences(model, objective):
    """Through the implicit noise scale and threshold, with every parameter free."""
    budget = 0.8 * model.data_independent_loss()
    assert shaping.gradient_check(model, budget, objective, seed=1) < 1e-4


def test_noise_scale_meets_the_budget(model):
    parameters = shaping.Parameters.start(model)
    rho, lam, beta, w = parameters.constrained()
    budget = 0.8 * model.data_independent_loss()
    tau = model.noise_scale(rho, beta, lam, w, budget)
    shrinkage, noise = model.variances(rho, beta, lam, w)
    assert float(model.loss_at(shrinkage, noise, tau)) == pytest.approx(budget, rel=1e-10)
    # rho = 1/2 alone costs half of L0: a budget of 0.4 L0 cannot be met by noise
    assert model.noise_scale(rho, beta, lam, w, 0.4 * model.data_independent_loss()) is None


def test_descent_never_ends_above_its_start(model):
    budget = 0.8 * model.data_independent_loss()
    start = shaping.objective_value(model, shaping.Parameters.start(model), budget, "mean-auc")
    result = shaping.descend(model, budget, "candidate-retention", "mean-auc", steps=30)
    assert result["best_objective"] < float(start) - 1e-3


def test_fixed_copies_against_the_dense_posterior():
    """With fixed Gaussian copies: d_k^2 from (P^-1 + J_fixed + A^T Cov^-1 A)^-1 formed directly, J_fixed =
    Zc Zc^T / (N^2 sigma_f^2) the pooled copies' information."""
    rng = np.random.default_rng(4)
    genotypes = (rng.random((60, 50)) < rng.uniform(0.05, 0.5, 50)).astype(np.uint8)
    population = Population(genotypes[:30], genotypes[30:])
    model = shaping.ExposureModel.of(population, 15, fixed_copies=4, fixed_sigma=0.2)
    r, k, p, n = model.rank, model.n_individuals, model.prior_variance, model.n_members
    gen = torch.Generator().manual_seed(1)
    rho, lam = torch.rand(r, generator=gen, dtype=torch.float64), 1e-4 * (1 + torch.rand(r, generator=gen, dtype=torch.float64))
    beta, w = torch.rand(k, generator=gen, dtype=torch.float64), 1e-3 * torch.rand(k, generator=gen, dtype=torch.float64)
    covariance = model.noise_covariance(lam, w)
    a = (rho * model.singular / n)[:, None] * model.left.T * beta[None, :]
    centred = torch.as_tensor(genotypes[:30] - genotypes[:30].mean(axis=0), dtype=torch.float64)
    fixed = centred @ centred.T / (n**2 * 0.2**2 / 4)
    posterior = torch.linalg.inv(a.T @ torch.linalg.solve(covariance, a) + fixed + torch.eye(k, dtype=torch.float64) / p)
    expected = (p - torch.diagonal(posterior)) / (p * torch.diagonal(posterior))
    assert torch.allclose(model.exposures(rho, beta, covariance), expected, rtol=1e-7)


def test_soft_maximum_lies_between_the_mean_and_the_largest():
    d2 = torch.tensor([0.1, 0.4, 2.0, 0.2], dtype=torch.float64)
    aucs = shaping._phi(torch.sqrt(d2) / math.sqrt(2.0))
    value = float(shaping.soft_maximum_auc(d2, 0.01))
    assert float(aucs.mean()) < value <= float(aucs.max())
    assert value >= float(aucs.max()) - 0.01 * math.log(4)
