"""The LRT family: fixed threshold, adaptive threshold and the Neyman-Pearson optimal LRT."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy import special, stats

from bngp.attacks import AdaptiveLRT, FixedThresholdLRT, OptimalLRT
from bngp.attacks.base import AttackKnowledge
from bngp.attacks.shadow import synthetic_shadow
from bngp.metrics import auc
from bngp.release.noise_law import NoiseLaw


def _lrs(d: np.ndarray, x: np.ndarray, p: np.ndarray, eps: float = 1e-3) -> np.ndarray:
    x = np.clip(x, eps, 1 - eps)[:, None, :]
    p = np.clip(p, eps, 1 - eps)
    return (d * np.log(p / x) + (1 - d) * np.log((1 - p) / (1 - x))).sum(axis=2)


def test_fixed_lrt_scores_minus_lrs_and_thresholds_at_alpha(small_world) -> None:
    knowledge = small_world.knowledge()
    attack = FixedThresholdLRT(alpha=0.1, n_shadow_releases=30).fit(knowledge, seed=1)
    releases, _ = small_world.releases(3, seed=2)
    targets = small_world.population.genotypes
    expected = -_lrs(targets, releases, knowledge.reference_frequencies)
    np.testing.assert_allclose(attack.score(targets, releases), expected, rtol=1e-12)
    assert attack.orientation_ == 1 and attack.orientation_note_ is None
    # the threshold has false-positive rate ~ alpha on fresh shadow releases from the same public model
    shadow = synthetic_shadow(knowledge.reference_frequencies, knowledge.n_members, 60, seed=99)
    fpr = (attack.score(shadow.targets, shadow.releases)[shadow.labels == 0] > attack.threshold_).mean()
    assert fpr == pytest.approx(0.1, abs=0.04)
    decisions = attack.decide(targets, releases)
    assert decisions.dtype == bool and decisions.shape == (3, 40)


def test_adaptive_lrt_matches_transcription(small_world) -> None:
    knowledge = small_world.knowledge()
    attack = AdaptiveLRT(n_lowest=5).fit(knowledge, seed=0)
    releases, _ = small_world.releases(4, seed=3)
    targets = small_world.population.genotypes
    p = knowledge.reference_frequencies
    reference_lrs = _lrs(knowledge.reference_genotypes, releases, p)
    tau = np.sort(reference_lrs, axis=1)[:, :5].mean(axis=1)
    expected = tau[:, None] - _lrs(targets, releases, p)
    np.testing.assert_allclose(attack.score(targets, releases), expected, rtol=1e-10, atol=1e-8)
    assert attack.threshold_ == 0.0 and attack.orientation_ == 1


def test_adaptive_lrt_flips_when_shadow_releases_say_so(small_world) -> None:
    """A defense that releases the non-members' frequencies makes -lrs anti-correlated with membership."""
    population = small_world.population

    def complement(n_releases: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
        _, memberships = small_world.releases(n_releases, seed)
        outside = 1 - memberships
        return outside @ population.genotypes / outside.sum(axis=1, keepdims=True), memberships

    knowledge = AttackKnowledge(
        reference_frequencies=population.reference_frequencies,
        reference_genotypes=population.reference,
        population=population.genotypes,
        simulate=complement,
    )
    attack = AdaptiveLRT().fit(knowledge, seed=0)
    assert attack.orientation_ == -1
    assert attack.shadow_auc_ < 0.5
    assert "anti-correlated with membership" in attack.orientation_note_ and "flipped" in attack.orientation_note_
    releases, memberships = complement(10, seed=5)
    scores = attack.score(population.genotypes, releases)
    assert np.mean([auc(s, b) for s, b in zip(scores, memberships)]) > 0.8
    assert attack.describe()["orientation_note"] == attack.orientation_note_


def _censored(x: np.ndarray, mean: np.ndarray, var: np.ndarray, kind: str, scale: float) -> np.ndarray:
    """numpy/scipy transcription of the censored log-likelihood (Gaussian or Laplace * Gaussian)."""
    s = np.sqrt(var)
    if kind == "gaussian":
        sd = np.sqrt(var + scale**2)
        logpdf = lambda z: stats.norm.logpdf(z, scale=sd)  # noqa: E731
        logcdf = lambda z: stats.norm.logcdf(z, scale=sd)  # noqa: E731
    else:
        b = scale
        c = var / (2 * b * b)

        def logpdf(z):
            left = -z / b + special.log_ndtr(z / s - s / b)
            right = z / b + special.log_ndtr(-z / s - s / b)
            return c - np.log(2 * b) + np.logaddexp(left, right)

        def logcdf(z):
            first = 0.5 * (special.ndtr(z / s) - np.exp(c - z / b + special.log_ndtr(z / s - s / b)))
            second = 0.5 * (special.ndtr(z / s) + np.exp(c + z / b + special.log_ndtr(-z / s - s / b)))
            return np.log(first + second)

    return np.where(x <= 0, logcdf(-mean), np.where(x >= 1, logcdf(mean - 1), logpdf(x - mean)))


@pytest.mark.parametrize(("kind", "scale"), [("none", 0.0), ("gaussian", 0.03), ("laplace", 0.05)])
def test_optimal_lrt_matches_transcription(small_world, kind: str, scale: float) -> None:
    law = NoiseLaw(kind, scale)
    knowledge = AttackKnowledge(
        reference_frequencies=small_world.population.reference_frequencies, n_members=10, noise_law=law
    )
    attack = OptimalLRT(n_shadow_releases=5).fit(knowledge, seed=0)
    releases, _ = small_world.releases(3, seed=4, laplace_scale=0.05)
    targets = small_world.population.genotypes
    n = 10
    p = np.clip(knowledge.reference_frequencies, 1e-3, 1 - 1e-3)
    v0 = p * (1 - p) / n
    v1 = (n - 1) * p * (1 - p) / n**2
    model = "gaussian" if kind == "none" else kind
    expected = np.empty((3, 40))
    for r, x in enumerate(releases):
        for k, d in enumerate(targets):
            member = _censored(x, p + (d - p) / n, v1, model, scale)
            non_member = _censored(x, p, v0, model, scale)
            expected[r, k] = np.sum(member - non_member)
    np.testing.assert_allclose(attack.orientation_ * attack.score(targets, releases), expected, rtol=1e-9, atol=1e-7)


def test_optimal_lrt_linf_runs_and_detects(small_world) -> None:
    knowledge = AttackKnowledge(
        reference_frequencies=small_world.population.reference_frequencies,
        n_members=10,
        noise_law=NoiseLaw("linf", 0.02 / 301),
    )
    attack = OptimalLRT().fit(knowledge, seed=0)
    rng = np.random.default_rng(0)
    releases, memberships = small_world.releases(10, seed=6)
    noisy = np.clip(releases + rng.uniform(-0.02, 0.02, releases.shape), 0, 1)
    scores = attack.score(small_world.population.genotypes, noisy)
    assert np.all(np.isfinite(scores))
    assert np.mean([auc(s, b) for s, b in zip(scores, memberships)]) > 0.9


def test_optimal_lrt_score_torch_is_differentiable(small_world) -> None:
    knowledge = AttackKnowledge(
        reference_frequencies=small_world.population.reference_frequencies,
        n_members=10,
        noise_law=NoiseLaw("laplace", 0.05),
    )
    attack = OptimalLRT(n_shadow_releases=5).fit(knowledge, seed=0)
    releases, _ = small_world.releases(2, seed=7, laplace_scale=0.05)
    x = torch.tensor(releases, requires_grad=True)
    targets = torch.from_numpy(small_world.population.genotypes)
    scores = attack.score_torch(targets, x)
    expected = attack.score(small_world.population.genotypes, releases)
    np.testing.assert_allclose(scores.detach().numpy(), expected, rtol=1e-12)
    scores.sum().backward()
    assert torch.all(torch.isfinite(x.grad)) and float(x.grad.abs().sum()) > 0
