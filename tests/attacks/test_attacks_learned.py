"""Learned attackers: pair features, decision tree, SVM and the linear (ridge) attacker."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch
from sklearn.linear_model import Ridge

from attacks import DecisionTreeAttack, LinearAttack, SVMAttack, pair_features
from attacks.learned import FEATURE_NAMES
from attacks.statistics import dwork_score, homer, lrs, weighted_score
from bngp.metrics import auc
from bngp.ridge import default_shadow_releases
from bngp.rng import spawn_seeds


def _mean_auc(scores: np.ndarray, memberships: np.ndarray) -> float:
    return float(np.mean([auc(s, b) for s, b in zip(scores, memberships)]))


def test_pair_features_are_the_statistics(small_world) -> None:
    releases, _ = small_world.releases(3, seed=0, laplace_scale=0.05)
    targets = small_world.population.genotypes
    p = small_world.population.reference_frequencies
    features = pair_features(targets, releases, p)
    n_snvs = targets.shape[1]
    assert features.shape == (3, 40, len(FEATURE_NAMES))
    np.testing.assert_allclose(features[:, :, 0], -lrs(targets, releases, p) / n_snvs, atol=1e-12)
    np.testing.assert_allclose(features[:, :, 1], dwork_score(targets, releases, p) / n_snvs, atol=1e-12)
    np.testing.assert_allclose(features[:, :, 2], homer(targets, releases, p) / n_snvs, atol=1e-12)
    np.testing.assert_allclose(features[:, :, 3], weighted_score(targets, releases, p) / n_snvs, atol=1e-12)
    expected_ll = (targets * np.log(p) + (1 - targets) * np.log(1 - p)).mean(axis=1)
    np.testing.assert_allclose(features[0, :, 4], expected_ll, atol=1e-12)
    np.testing.assert_allclose(features[:, 0, 6], np.abs(releases - p).mean(axis=1), atol=1e-12)
    np.testing.assert_allclose(features[:, 5, 8], ((releases <= 0) | (releases >= 1)).mean(axis=1))


@pytest.mark.parametrize("attack_class", [DecisionTreeAttack, SVMAttack])
def test_classifiers_detect_members_and_score_any_target(small_world, attack_class) -> None:
    attack = attack_class(n_shadow_releases=30).fit(small_world.knowledge(laplace_scale=0.02), seed=0)
    releases, memberships = small_world.releases(10, seed=1, laplace_scale=0.02)
    scores = attack.score(small_world.population.genotypes, releases)
    assert scores.shape == (10, 40)
    assert _mean_auc(scores, memberships) > 0.9
    outsiders = attack.score(small_world.population.reference[:5], releases)
    assert outsiders.shape == (10, 5) and np.all(np.isfinite(outsiders))
    assert attack.orientation_ == 1 and attack.threshold_ is not None


def test_linear_attack_is_ridge_with_leave_one_out_penalty(small_world) -> None:
    knowledge = small_world.knowledge(laplace_scale=0.05)
    grid = (1e-3, 1e-2, 1e-1, 1.0)
    attack = LinearAttack(n_shadow_releases=60, ridge_grid=grid).fit(knowledge, seed=4)
    train_seed = spawn_seeds(4, 2)[0]
    train_x, train_b = knowledge.simulate(60, train_seed)
    singular = np.linalg.svd(train_x - train_x.mean(axis=0), compute_uv=False)
    scale = np.mean(singular**2)

    def brute_force_loo(relative: float) -> float:
        total = 0.0
        for i in range(train_x.shape[0]):
            keep = np.arange(train_x.shape[0]) != i
            model = Ridge(alpha=relative * scale).fit(train_x[keep], train_b[keep])
            total += float(((model.predict(train_x[i : i + 1]) - train_b[i]) ** 2).sum())
        return total

    assert attack.ridge_ == grid[int(np.argmin([brute_force_loo(relative) for relative in grid]))]
    releases, memberships = small_world.releases(5, seed=5, laplace_scale=0.05)
    reference = Ridge(alpha=attack.ridge_ * scale).fit(train_x, train_b).predict(releases)
    np.testing.assert_allclose(attack.score(small_world.population.genotypes, releases), reference, atol=1e-8)
    x = torch.tensor(releases, requires_grad=True)
    attack.score_torch(torch.from_numpy(small_world.population.genotypes), x)[0, 0].backward()
    assert float(x.grad[1].abs().sum()) == 0 and float(x.grad[0].abs().sum()) > 0


def test_linear_attack_detects_members(small_world) -> None:
    attack = LinearAttack(n_shadow_releases=300).fit(small_world.knowledge(laplace_scale=0.02), seed=0)
    releases, memberships = small_world.releases(10, seed=6, laplace_scale=0.02)
    assert _mean_auc(attack.score(small_world.population.genotypes, releases), memberships) > 0.9


def test_default_shadow_set_scales_with_the_released_outputs(wide_world) -> None:
    """A release shrunk towards the population mean plus small noise, x = t + 0.05 (f(D) - t) + e,
    still leaks to a ridge attacker fitted on at least 2|Q| shadow releases (the default), much
    less to one fitted on fewer releases than outputs (the default before it scaled with |Q|)."""
    population = wide_world.population
    target = population.genotypes.mean(axis=0)

    def shrunk(n_releases: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
        releases, memberships = wide_world.releases(n_releases, seed)
        noise = np.random.default_rng(seed + 99).normal(0.0, 0.01, releases.shape)
        return np.clip(target + 0.05 * (releases - target) + noise, 0.0, 1.0), memberships

    knowledge = replace(wide_world.knowledge(), noise_law=None, simulate=lambda n, seed: shrunk(n, 10_000 + seed))
    releases, memberships = shrunk(20, seed=1)
    strong = LinearAttack().fit(knowledge, seed=0)
    weak = LinearAttack(n_shadow_releases=400).fit(knowledge, seed=0)
    assert _mean_auc(strong.score(population.genotypes, releases), memberships) > 0.93
    assert _mean_auc(weak.score(population.genotypes, releases), memberships) < 0.9
    assert default_shadow_releases(40, 800) == 1600 and default_shadow_releases(800, 5000) == 10_000
    assert default_shadow_releases(800, 25_000) * 25_000 <= 2**26
