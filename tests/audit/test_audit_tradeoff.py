"""GDP and Laplace conversions to (eps, delta): known answers and conservative roots."""

import math

import numpy as np
import pytest
from scipy import integrate, stats

from bngp.audit import gdp_delta, gdp_epsilon, laplace_delta, laplace_epsilon
from bngp.errors import InputError


def test_gdp_reference():
    # audits.md sec. 4: Gaussian mu = 1 has eps = 4.377 at delta = 1e-5.
    assert gdp_epsilon(1.0, 1e-5) == pytest.approx(4.377, abs=5e-4)


@pytest.mark.parametrize("mu", [0.1, 0.5, 1.0, 3.0, 10.0])
def test_gdp_epsilon_is_a_conservative_root(mu):
    eps = gdp_epsilon(mu, 1e-6)
    assert gdp_delta(mu, eps) >= 1e-6
    assert gdp_delta(mu, eps + 1e-9) <= 1e-6 * (1 + 1e-6)


def test_gdp_delta_matches_hockey_stick_integral():
    mu, eps = 1.0, 0.5
    density = lambda x: max(stats.norm.pdf(x, mu) - math.exp(eps) * stats.norm.pdf(x), 0.0)  # noqa: E731
    numeric, _ = integrate.quad(density, -10, 20, points=[mu / 2 + eps / mu])
    assert gdp_delta(mu, eps) == pytest.approx(numeric, rel=1e-7)


def test_gdp_edge_cases():
    assert gdp_epsilon(0.0, 1e-5) == 0.0
    assert gdp_epsilon(1.0, 0.0) == math.inf
    assert gdp_epsilon(0.01, 0.1) == 0.0  # delta(0) = TV < 0.1


@pytest.mark.parametrize("mu_l, eps", [(1.0, 0.0), (1.0, 0.4), (2.0, 1.5), (1.0, 1.2)])
def test_laplace_delta_matches_hockey_stick_integral(mu_l, eps):
    density = lambda x: max(  # noqa: E731
        stats.laplace.pdf(x, loc=mu_l) - math.exp(eps) * stats.laplace.pdf(x), 0.0
    )
    numeric, _ = integrate.quad(density, -30, 30, points=[0.0, mu_l, (mu_l + eps) / 2], limit=200)
    assert laplace_delta(mu_l, eps) == pytest.approx(numeric, rel=1e-7, abs=1e-12)


def test_laplace_epsilon_inverts_delta():
    for delta in [0.0, 1e-5, 0.1]:
        eps = laplace_epsilon(1.0, delta)
        assert laplace_delta(1.0, eps) == pytest.approx(delta, abs=1e-12)
    assert laplace_epsilon(0.1, 0.5) == 0.0


@pytest.mark.parametrize(
    "call",
    [
        lambda: gdp_epsilon(-1.0, 1e-5),
        lambda: gdp_epsilon(1.0, 1.0),
        lambda: gdp_delta(np.nan, 1.0),
        lambda: laplace_epsilon(1.0, -0.1),
    ],
)
def test_bad_input(call):
    with pytest.raises(InputError):
        call()
