"""The OpenDP sampler path: its laws (KS), OpenDP's own privacy maps against our guarantees,
and the publishable release.  OpenDP draws from the OS, so these tests cannot be seeded;
their tolerances (KS p-value > 1e-6, means within 5.5 standard errors) make a false failure
less likely than 1e-6 per assertion, while a scale off by 5% still fails the mean check."""

from __future__ import annotations

import math

import numpy as np
import opendp.prelude as dp
import pytest
import torch
from scipy import stats

from bngp.errors import InputError
from bngp.defenses import (
    GaussianDefense,
    LaplaceDefense,
    LinfKNormDefense,
    RandomizedResponseDefense,
    paper_sensitivity,
)

torch.set_num_threads(1)
P_MIN = 1e-6
Z_TOL = 5.5


def test_opendp_laplace_law_and_privacy_map() -> None:
    sensitivity = paper_sensitivity("l1", 2000, 400)
    defense = LaplaceDefense.from_epsilon(100.0, sensitivity, sampler="opendp")
    x_hat = torch.full((5, 2000), 0.5)
    xi = defense.noise(torch.zeros(5, 1), x_hat, torch.Generator()).double().numpy().ravel()
    assert stats.kstest(xi, stats.laplace(scale=defense.scale).cdf).pvalue > P_MIN
    # E|xi| = b, sd(|xi|) = b
    assert abs(np.abs(xi).mean() - defense.scale) < Z_TOL * defense.scale / math.sqrt(xi.size)
    dp.enable_features("contrib")
    measurement = dp.m.make_laplace(
        dp.vector_domain(dp.atom_domain(T=float, nan=False), size=2000), dp.l1_distance(T=float), scale=defense.scale
    )
    assert measurement.map(sensitivity.value) == pytest.approx(defense.guarantee.epsilon, rel=1e-9)


def test_opendp_gaussian_law_and_zcdp_rho() -> None:
    sensitivity = paper_sensitivity("l2", 1000, 100)
    defense = GaussianDefense.from_epsilon(5.0, 1e-6, sensitivity, sampler="opendp")
    x_hat = torch.full((4, 1000), 0.5)
    xi = defense.noise(torch.zeros(4, 1), x_hat, torch.Generator()).double().numpy().ravel()
    assert stats.kstest(xi, stats.norm(scale=defense.sigma).cdf).pvalue > P_MIN
    # E[xi^2] = sigma^2, sd(xi^2) = sqrt(2) sigma^2
    assert abs((xi**2).mean() - defense.sigma**2) < Z_TOL * math.sqrt(2) * defense.sigma**2 / math.sqrt(xi.size)
    dp.enable_features("contrib")
    measurement = dp.m.make_gaussian(
        dp.vector_domain(dp.atom_domain(T=float, nan=False), size=1000), dp.l2_distance(T=float), scale=defense.sigma
    )
    assert measurement.map(sensitivity.value) == pytest.approx(defense.describe()["parameters"]["zcdp_rho"], rel=1e-6)


def test_opendp_randomized_response_flip_rate() -> None:
    rng = np.random.default_rng(0)
    genotypes = (rng.random((40, 500)) < 0.5).astype(np.uint8)
    defense = RandomizedResponseDefense(1.0, genotypes, debias=False, sampler="opendp")
    b = np.zeros((2, 40), dtype=np.float32)
    b[:, :30] = 1
    x_hat = b @ genotypes / 30
    release = defense.secure_release(b, x_hat)
    # E[release] = x_hat (1 - 2p) + p; 30 * 500 bits per row
    p = defense.flip_probability
    expected = x_hat * (1 - 2 * p) + p
    se = math.sqrt(p * (1 - p) / (30 * 500))
    assert np.abs(release.mean(axis=1) - expected.mean(axis=1)).max() < Z_TOL * se
    assert np.allclose(release * 30, np.rint(release * 30))


def test_secure_release_is_clipped_and_float64() -> None:
    defense = LaplaceDefense(0.5)
    x_hat = np.array([[0.0, 0.5, 1.0]] * 3)
    release = defense.secure_release(np.zeros((3, 1)), x_hat)
    assert release.dtype == np.float64 and release.shape == (3, 3)
    assert ((release >= 0) & (release <= 1)).all()


def test_linf_has_no_opendp_sampler() -> None:
    with pytest.raises(InputError, match="not available for `linf`"):
        LinfKNormDefense(0.1, sampler="opendp")
    with pytest.raises(InputError, match="not available for `linf`"):
        LinfKNormDefense(0.1).secure_release(np.zeros((1, 1)), np.zeros((1, 2)))
