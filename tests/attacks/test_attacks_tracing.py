"""Score-based (Dwork et al. 2015) and Homer et al. (2008) attacks."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from bngp.attacks import HomerAttack, ScoreAttack


def test_score_attack_is_the_inner_product(small_world) -> None:
    knowledge = small_world.knowledge()
    attack = ScoreAttack(alpha=0.05).fit(knowledge, seed=0)
    releases, memberships = small_world.releases(3, seed=1)
    targets = small_world.population.genotypes
    p = knowledge.reference_frequencies
    expected = (targets - p) @ (releases - p).T
    np.testing.assert_allclose(attack.score(targets, releases), expected.T, atol=1e-12)
    assert attack.orientation_ == 1
    decisions = attack.decide(targets, releases)
    np.testing.assert_array_equal(decisions, expected.T > attack.threshold_)
    assert decisions[memberships.astype(bool)].all()  # undefended: every member is flagged


def test_homer_attack_is_the_distance_statistic(small_world) -> None:
    knowledge = small_world.knowledge()
    attack = HomerAttack().fit(knowledge, seed=0)
    releases, _ = small_world.releases(3, seed=2)
    targets = small_world.population.genotypes.astype(float)
    p = knowledge.reference_frequencies
    expected = np.abs(targets[None] - p).sum(axis=2) - np.abs(targets[None] - releases[:, None, :]).sum(axis=2)
    np.testing.assert_allclose(attack.score(targets, releases), expected, atol=1e-10)


@pytest.mark.parametrize("attack_class", [ScoreAttack, HomerAttack])
def test_tracing_torch_gradient_matches(small_world, attack_class) -> None:
    attack = attack_class().fit(small_world.knowledge(), seed=0)
    releases, _ = small_world.releases(2, seed=3)
    x = torch.tensor(releases, requires_grad=True)
    scores = attack.score_torch(torch.from_numpy(small_world.population.genotypes), x)
    expected = attack.score(small_world.population.genotypes, releases)
    np.testing.assert_allclose(scores.detach().numpy(), expected, atol=1e-12)
    scores[0, 3].backward()
    p = small_world.population.reference_frequencies
    d = small_world.population.genotypes[3]
    # score: d/dx = d - p;  Homer (x in (0, 1)): d/dx |d - x| = -1 if d = 1 else +1, so dD/dx = 2d - 1
    expected = d - p if attack_class is ScoreAttack else 2.0 * d - 1.0
    inside = (releases[0] > 0) & (releases[0] < 1)
    np.testing.assert_allclose(x.grad[0].numpy()[inside], expected[inside], atol=1e-12)
