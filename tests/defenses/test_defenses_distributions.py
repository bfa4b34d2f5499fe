"""The torch samplers draw the calibrated laws: KS / chi-square tests against the analytic laws
(fixed seeds; a test fails when the p-value is below P_MIN), scale estimates within stated
relative tolerances, and seeded replay."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy import stats

from bngp.defenses import GaussianDefense, LaplaceDefense, LinfKNormDefense, RandomizedResponseDefense

torch.set_num_threads(1)

P_MIN = 1e-3


def noise_of(defense, rows: int, cols: int, seed: int) -> np.ndarray:
    x_hat = torch.full((rows, cols), 0.5)
    b = torch.zeros((rows, 1))
    return defense.noise(b, x_hat, torch.Generator().manual_seed(seed)).double().numpy()


def test_laplace_matches_its_law() -> None:
    scale = 0.003
    xi = noise_of(LaplaceDefense(scale), 200, 500, seed=21)
    assert stats.kstest(xi.ravel(), stats.laplace(scale=scale).cdf).pvalue > P_MIN
    # E|xi| = b; 1e5 draws give a relative standard error of 0.32%
    assert np.abs(xi).mean() == pytest.approx(scale, rel=0.015)


def test_gaussian_matches_its_law() -> None:
    sigma = 0.002
    xi = noise_of(GaussianDefense(sigma), 200, 500, seed=22)
    assert stats.kstest(xi.ravel(), stats.norm(scale=sigma).cdf).pvalue > P_MIN
    assert xi.std() == pytest.approx(sigma, rel=0.01)
    assert np.abs(xi).mean() == pytest.approx(sigma * math.sqrt(2 / math.pi), rel=0.015)


def test_linf_k_norm_matches_its_law() -> None:
    """||xi||_inf ~ Gamma(d, a) (radius law of exp(-||z||_inf / a) in R^d), and each |xi_j| has
    survival S_{d+1}(t) - t/(d a) S_d(t) (S_k: Gamma(k, a) survival), mean (d + 1) a / 2."""
    scale, dim, rows = 0.01, 10, 20_000
    xi = noise_of(LinfKNormDefense(scale), rows, dim, seed=23)
    norms = np.abs(xi).max(axis=1)
    assert stats.kstest(norms, stats.gamma(dim, scale=scale).cdf).pvalue > P_MIN

    def marginal_cdf(t: np.ndarray) -> np.ndarray:
        return 1 - (stats.gamma(dim + 1, scale=scale).sf(t) - t / (dim * scale) * stats.gamma(dim, scale=scale).sf(t))

    assert stats.kstest(np.abs(xi[:, 0]), marginal_cdf).pvalue > P_MIN
    assert np.abs(xi).mean() == pytest.approx((dim + 1) * scale / 2, rel=0.015)
    # symmetric coordinates
    assert stats.binomtest(int((xi[:, 1] > 0).sum()), rows).pvalue > P_MIN
    # in one dimension the l-inf K-norm law is Laplace(a)
    one_dim = noise_of(LinfKNormDefense(scale), rows, 1, seed=26).ravel()
    assert stats.kstest(one_dim, stats.laplace(scale=scale).cdf).pvalue > P_MIN


def test_randomized_response_counts_match_binomials() -> None:
    """Randomized ones = Bin(c1, 1 - p) + Bin(c0, p) per attribute; chi-square on one attribute
    with c1 = 3, c0 = 2 and on the debiased mean of all attributes."""
    genotypes = np.array([[1, 0], [1, 1], [1, 0], [0, 1], [0, 0], [1, 1]], dtype=np.uint8)
    eps_bit, rows = 1.0, 50_000
    defense = RandomizedResponseDefense(eps_bit, genotypes, debias=False)
    p = defense.flip_probability
    assert p == pytest.approx(1 / (1 + math.e))
    b = torch.tensor([[1, 1, 1, 1, 1, 0]], dtype=torch.float32).repeat(rows, 1)
    x_hat = (b @ torch.tensor(genotypes, dtype=torch.float32)) / 5
    release = (x_hat + defense.noise(b, x_hat, torch.Generator().manual_seed(24))).double().numpy()
    ones = np.rint(release[:, 0] * 5).astype(int)
    law = np.convolve(stats.binom(3, 1 - p).pmf(np.arange(4)), stats.binom(2, p).pmf(np.arange(3)))
    observed = np.bincount(ones, minlength=6)
    assert stats.chisquare(observed, law * rows).pvalue > P_MIN

    debiased = RandomizedResponseDefense(eps_bit, genotypes, debias=True)
    noise = debiased.noise(b, x_hat, torch.Generator().manual_seed(25)).double().numpy()
    # unbiased: mean noise within 4 standard errors of 0
    se = noise.std(axis=0) / math.sqrt(rows)
    assert (np.abs(noise.mean(axis=0)) < 4 * se).all()


def test_randomized_response_rows_without_members_release_x_hat() -> None:
    genotypes = np.eye(3, dtype=np.uint8)
    defense = RandomizedResponseDefense(2.0, genotypes)
    b = torch.tensor([[0, 0, 0], [1, 1, 0]], dtype=torch.float32)
    x_hat = (b @ torch.eye(3)) / b.sum(dim=1, keepdim=True).clamp_min(1)
    xi = defense.noise(b, x_hat, torch.Generator().manual_seed(0))
    assert torch.equal(xi[0], torch.zeros(3))


@pytest.mark.parametrize(
    "defense",
    [LaplaceDefense(0.01), GaussianDefense(0.01), LinfKNormDefense(0.001)],
    ids=["laplace", "gaussian", "linf"],
)
def test_seeded_replay_and_batch_independence(defense) -> None:
    first = noise_of(defense, 4, 50, seed=5)
    assert np.array_equal(first, noise_of(defense, 4, 50, seed=5))
    assert not np.array_equal(first, noise_of(defense, 4, 50, seed=6))
    assert not np.array_equal(first[0], first[1])
    assert np.isfinite(first).all()


def test_laplace_sampler_is_finite_at_extreme_uniforms() -> None:
    """The open-interval uniform keeps log(2u) finite even for u at the ends of the grid."""
    from bngp.release.noise import sample_laplace

    xi = sample_laplace((1000, 1000), 1.0, torch.Generator().manual_seed(7))
    assert torch.isfinite(xi).all()
    # the largest |draw| of 1e6 is about log(1e6) ~ 14 scales
    assert 10 < xi.abs().max().item() < 20


def _laplace_at_midpoints(r: torch.Tensor, scale: float) -> torch.Tensor:
    """Reference: the two-branch inverse CDF at the cell midpoints u = r + 2^-54 of uniforms
    r = k / 2^53, each branch in exact arithmetic (r + 2^-54 below 1/2 and (1 - r) - 2^-54 above
    are representable)."""
    lower = r < 0.5
    return scale * torch.where(lower, torch.log(2.0 * (r + 2.0**-54)), -torch.log(2.0 * ((1.0 - r) - 2.0**-54)))


def test_laplace_sampler_draws_the_inverse_cdf_formula_bit_for_bit() -> None:
    """Reference: the two-branch inverse CDF at the midpoints of the same uniforms; the sampler
    takes one logarithm per draw, in place, without a branch."""
    from bngp.release.noise import sample_laplace

    r = torch.rand((300, 700), generator=torch.Generator().manual_seed(11), dtype=torch.float64)
    drawn = sample_laplace((300, 700), 0.37, torch.Generator().manual_seed(11))
    assert torch.equal(drawn, _laplace_at_midpoints(r, 0.37)) and (drawn < 0).any() and (drawn > 0).any()


def test_laplace_inverse_cdf_is_exact_and_finite_at_the_ends_and_the_middle_of_the_grid() -> None:
    """Reference: the two-branch formula at the extreme and central cells k = 0, 1, 2^52 - 1,
    2^52, 2^53 - 2, 2^53 - 1, where an inexact 1 - 2u would show; the last cell's draw is
    53 b log 2, finite (u = r + 2^-54 rounded in float64 would be 1 there, and log 0)."""
    from bngp.release.noise import _laplace_of

    k = torch.tensor([0, 1, 2**52 - 1, 2**52, 2**53 - 2, 2**53 - 1], dtype=torch.float64)
    r = k / 2.0**53
    drawn = _laplace_of(r.clone(), 0.37)
    assert torch.equal(drawn, _laplace_at_midpoints(r, 0.37))
    assert drawn[0] < drawn[1] < drawn[2] < 0 < drawn[3] < drawn[4] < drawn[5]
    assert torch.equal(drawn[[0, 2]], -drawn[[5, 3]])  # symmetric support
    assert drawn[5].item() == 0.37 * 53 * math.log(2.0)
