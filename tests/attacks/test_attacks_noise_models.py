"""Closed-form total-noise laws of the optimal LRT against numerical convolution (scipy quad)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy import integrate, stats

from bngp.attacks.noise_models import TotalNoise, censored_loglik, total_noise
from bngp.release.noise import sample_noise
from bngp.release.noise_law import NoiseLaw


def _numerical(kind: str, scale: float, var: float, z: float) -> tuple[float, float]:
    """pdf and cdf of N(0, var) + noise at z by quadrature over the noise."""
    s = math.sqrt(var)
    if kind == "laplace":
        density = lambda t: stats.laplace.pdf(t, scale=scale)  # noqa: E731
        low, high = z - 12 * s - 40 * scale, z + 12 * s + 40 * scale
    else:
        density = lambda t: 0.5 / scale  # noqa: E731
        low, high = -scale, scale
    points = [z] if low < z < high else None
    options = {"points": points, "limit": 400, "epsabs": 0, "epsrel": 1e-11}
    pdf = integrate.quad(lambda t: density(t) * stats.norm.pdf(z - t, scale=s), low, high, **options)[0]
    cdf = integrate.quad(lambda t: density(t) * stats.norm.cdf(z - t, scale=s), low, high, **options)[0]
    if kind == "laplace":
        cdf += stats.laplace.cdf(low, scale=scale)
    return pdf, cdf


@pytest.mark.parametrize(
    ("kind", "scale"), [("laplace", 0.05), ("laplace", 0.004), ("uniform", 0.3), ("uniform", 0.01)]
)
@pytest.mark.parametrize("var", [1e-3, 2e-5])
def test_closed_forms_match_quadrature(kind: str, scale: float, var: float) -> None:
    noise = TotalNoise(kind, scale=scale)
    for z in (-0.3, -0.06, -0.01, 0.0, 0.02, 0.25):
        pdf, cdf = _numerical(kind, scale, var, z)
        if pdf < 1e-250 or cdf < 1e-250:
            continue
        got_pdf = float(noise.logpdf(torch.tensor(z, dtype=torch.float64), torch.tensor(var, dtype=torch.float64)))
        got_cdf = float(noise.logcdf(torch.tensor(z, dtype=torch.float64), torch.tensor(var, dtype=torch.float64)))
        assert got_pdf == pytest.approx(math.log(pdf), abs=1e-6, rel=1e-7)
        assert got_cdf == pytest.approx(math.log(cdf), abs=1e-6, rel=1e-7)


@pytest.mark.parametrize(
    "noise",
    [TotalNoise("gaussian", extra_variance=4e-4), TotalNoise("laplace", scale=0.03), TotalNoise("uniform", scale=0.1)],
)
def test_density_integrates_to_one_and_cdf_is_symmetric(noise: TotalNoise) -> None:
    var = torch.tensor(1e-4, dtype=torch.float64)
    z = torch.linspace(-1.5, 1.5, 300001, dtype=torch.float64)
    mass = torch.trapezoid(torch.exp(noise.logpdf(z, var)), z)
    assert float(mass) == pytest.approx(1.0, abs=1e-6)
    points = torch.tensor([-0.2, -0.05, 0.0, 0.01, 0.3], dtype=torch.float64)
    total = torch.exp(noise.logcdf(points, var)) + torch.exp(noise.logcdf(-points, var))
    np.testing.assert_allclose(total.numpy(), 1.0, atol=1e-12)


def test_gaussian_matches_scipy() -> None:
    noise = total_noise(NoiseLaw("gaussian", 0.02), 100, 1e-4)
    z = np.array([-0.3, -0.01, 0.0, 0.05])
    var = 1e-4
    total_sd = math.sqrt(var + 0.02**2)
    got = noise.logpdf(torch.from_numpy(z), torch.tensor(var, dtype=torch.float64)).numpy()
    np.testing.assert_allclose(got, stats.norm.logpdf(z, scale=total_sd), rtol=1e-12)
    got = noise.logcdf(torch.from_numpy(z), torch.tensor(var, dtype=torch.float64)).numpy()
    np.testing.assert_allclose(got, stats.norm.logcdf(z, scale=total_sd), rtol=1e-12)


def test_total_noise_selection() -> None:
    assert total_noise(NoiseLaw("none"), 10, 1e-4) == TotalNoise("gaussian")
    assert total_noise(NoiseLaw("laplace", 0.1), 10, 1e-4) == TotalNoise("laplace", scale=0.1)
    assert total_noise(NoiseLaw("laplace", 1e-9), 10, 1e-4) == TotalNoise("gaussian", extra_variance=2e-18)
    assert total_noise(NoiseLaw("linf", 0.01), 99, 1e-4) == TotalNoise("uniform", scale=1.0)


def test_censored_loglik_uses_cdf_at_the_bounds() -> None:
    noise = TotalNoise("laplace", scale=0.05)
    mean = torch.tensor([0.1, 0.1, 0.1], dtype=torch.float64)
    var = torch.full((3,), 1e-3, dtype=torch.float64)
    x = torch.tensor([0.0, 0.4, 1.0], dtype=torch.float64)
    got = censored_loglik(x, mean, var, noise)
    assert float(got[0]) == pytest.approx(float(noise.logcdf(-mean[0], var[0])))
    assert float(got[1]) == pytest.approx(float(noise.logpdf(x[1] - mean[1], var[1])))
    assert float(got[2]) == pytest.approx(float(noise.logcdf(mean[2] - 1, var[2])))


def test_linf_sampler_matches_k_norm_radius() -> None:
    rng = np.random.default_rng(0)
    noise = sample_noise(NoiseLaw("linf", 0.01), (400, 50), rng)
    radius = np.abs(noise).max(axis=1)
    # ||z||_inf of the K-norm mechanism is Gamma(|Q|, scale): mean |Q| * scale
    assert radius.mean() == pytest.approx(50 * 0.01, rel=0.03)
    assert np.all(sample_noise(NoiseLaw("none"), (2, 3), rng) == 0)
    assert sample_noise(NoiseLaw("laplace", 0.5), (200, 200), rng).std() == pytest.approx(0.5 * math.sqrt(2), rel=0.03)
