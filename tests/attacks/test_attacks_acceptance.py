"""The attacks' acceptance on the independent-SNV population: K = 200 (N = 50 members), |Q| = 2000.

- no defense: lrt, optimal-lrt, score and homer reach AUC >= 0.9;
- Laplace noise so large that the release carries no signal: every attack's AUC is 0.5 +- 0.06;
- moderate Laplace noise: optimal-lrt (knowing the law) has AUC >= that of lrt;
- the AUCs agree with scikit-learn.

AUC = mean over releases of the per-release AUC (as bngp.metrics.membership_metrics reports).
"""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

from bngp.attacks import available_attacks, get_attack
from bngp.attacks.per_individual import PerIndividualConfig
from bngp.metrics import auc

#: options keeping the learned attackers' fits short on one shared core.
OPTIONS = {"linear": {"n_shadow_releases": 400}, "whitened": {"n_shadow_releases": 400}, "svm": {"max_pairs": 1500},
           "per-individual": {"config": PerIndividualConfig(max_steps=100, warm_start_releases=200, validation_draws=64)}}


def _auc(scores: np.ndarray, memberships: np.ndarray) -> float:
    per_release = [auc(s, b) for s, b in zip(scores, memberships)]
    np.testing.assert_allclose(per_release, [roc_auc_score(b, s) for s, b in zip(scores, memberships)], atol=1e-12)
    return float(np.mean(per_release))


def _evaluate(world, names: list[str], laplace_scale: float, n_releases: int = 20) -> dict[str, float]:
    knowledge = world.knowledge(laplace_scale)
    releases, memberships = world.releases(n_releases, seed=2024, laplace_scale=laplace_scale)
    results, fitted = {}, {}
    for name in sorted(names, key=lambda name: name == "stacked"):  # "stacked" last, pooling the fitted bases
        attack = get_attack(name, **OPTIONS.get(name, {}))
        if name == "stacked":
            attack.use_fitted(fitted)  # as bngp.evaluate does: the bases are not fitted twice
        fitted[name] = attack.fit(knowledge, seed=7)
        results[name] = _auc(attack.score(world.population.genotypes, releases), memberships)
    return results


def test_no_defense_auc(acceptance_world) -> None:
    results = _evaluate(acceptance_world, ["lrt", "optimal-lrt", "score", "homer"], laplace_scale=0.0)
    assert all(value >= 0.9 for value in results.values()), results


def test_no_signal_auc_is_chance_for_every_attack(acceptance_world) -> None:
    names = [name for name in available_attacks() if name != "bayesian"]
    results = _evaluate(acceptance_world, names, laplace_scale=1000.0)
    assert all(abs(value - 0.5) <= 0.06 for value in results.values()), results


@pytest.mark.parametrize("laplace_scale", [0.05, 0.1])
def test_optimal_lrt_beats_fixed_lrt_under_moderate_laplace(acceptance_world, laplace_scale: float) -> None:
    results = _evaluate(acceptance_world, ["lrt", "optimal-lrt"], laplace_scale=laplace_scale, n_releases=30)
    assert results["optimal-lrt"] >= results["lrt"], results
    assert results["optimal-lrt"] < 1.0


def test_pooled_auc_agrees_with_scikit_learn(acceptance_world) -> None:
    knowledge = acceptance_world.knowledge(0.1)
    releases, memberships = acceptance_world.releases(5, seed=1, laplace_scale=0.1)
    scores = get_attack("score").fit(knowledge, seed=0).score(acceptance_world.population.genotypes, releases)
    assert auc(scores, memberships) == pytest.approx(roc_auc_score(memberships.ravel(), scores.ravel()), abs=1e-12)
