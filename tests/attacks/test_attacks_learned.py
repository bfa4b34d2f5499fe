"""Learned attackers: pair features, decision tree and SVM (the linear attackers are in test_attacks_linear.py)."""

from __future__ import annotations

import numpy as np
import pytest

from bngp.attacks import DecisionTreeAttack, SVMAttack, pair_features
from bngp.attacks.learned import FEATURE_NAMES
from bngp.attacks.statistics import dwork_score, homer, lrs, weighted_score
from bngp.metrics import auc


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
    # the threshold is set at a false-positive rate of alpha = 0.05 on shadow releases; on these
    # releases: FPR 0 (tree) and 0.013 (svm) of 300 non-member pairs, TPR 1.0
    assert attack.orientation_ == 1
    decisions = attack.decide(small_world.population.genotypes, releases)
    members = memberships.astype(bool)
    assert decisions[~members].mean() < 0.1 and decisions[members].mean() > 0.9


def test_svm_scores_are_the_fitted_classifiers_decision_function(small_world, monkeypatch) -> None:
    """The SVM's raw scores, computed over blocks of pairs with scikit-learn's BLAS kernel, are the
    fitted pipeline's own ``decision_function`` (libsvm, pair by pair) to 1e-9, across block edges
    (a block of 7 pairs here) and for both classes' signs."""
    import bngp.attacks.learned as learned

    attack = SVMAttack(n_shadow_releases=10, max_pairs=300).fit(small_world.knowledge(laplace_scale=0.05), seed=0)
    releases, _ = small_world.releases(6, seed=2, laplace_scale=0.05)
    features = pair_features(small_world.population.genotypes, releases, attack.reference_frequencies_)
    flat = features.reshape(-1, len(FEATURE_NAMES))
    expected = attack.classifier_.decision_function(flat)
    assert expected.min() < 0 < expected.max()
    monkeypatch.setattr(learned, "_KERNEL_BLOCK", 7 * attack.classifier_[-1].support_vectors_.shape[0])
    np.testing.assert_allclose(attack._classifier_scores(flat), expected, rtol=0, atol=1e-9)
    np.testing.assert_allclose(attack.score(small_world.population.genotypes, releases),
                               attack.orientation_ * expected.reshape(6, -1), rtol=0, atol=1e-9)
