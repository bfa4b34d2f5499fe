"""The stacked attacker (attacks.stacking): logistic stacking of base attacks on simulated releases.

It can only be weaker than its best base by the estimation error of its m + 1 weights, it pools
already fitted attacks without refitting them, and it gives a base that carries no information
about membership (near) zero weight.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from bngp.attacks import LinearAttack, StackedAttack
from bngp.attacks.base import Attack
from bngp.metrics import release_aucs


def _mean_auc(scores: np.ndarray, memberships: np.ndarray) -> float:
    return float(release_aucs(scores, memberships).mean())


class _RandomScores(Attack):
    """Scores drawn i.i.d. N(0, 1), independent of the release: a base with no information."""

    name: ClassVar[str] = "random-scores"
    knowledge_statement: ClassVar[str] = "test attack: knows nothing"

    def __init__(self, seed: int = 0) -> None:
        self.rng = np.random.default_rng(seed)

    def score(self, targets: np.ndarray, releases: np.ndarray) -> np.ndarray:
        return self.rng.normal(size=(np.atleast_2d(releases).shape[0], targets.shape[0]))


def test_stacked_attack_is_as_strong_as_its_best_base(small_world) -> None:
    """Laplace noise of scale 0.3 on small_world (K = 40, N = 10, |Q| = 300), default bases
    (linear, whitened, reconstruction, score, fitted by the stacked attack itself), 30 evaluation
    releases: the stacked attack reads at least the best base's AUC minus 0.02.  Measured: linear
    0.869, whitened 0.866, score 0.854, reconstruction 0.802; stacked 0.869."""
    knowledge = small_world.knowledge(laplace_scale=0.3)
    stacked = StackedAttack().fit(knowledge, seed=3)
    assert set(stacked.bases_) == {"linear", "whitened", "reconstruction", "score"}
    releases, memberships = small_world.releases(30, seed=9, laplace_scale=0.3)
    genotypes = small_world.population.genotypes
    bases = {name: _mean_auc(attack.score(genotypes, releases), memberships) for name, attack in stacked.bases_.items()}
    combined = _mean_auc(stacked.score(genotypes, releases), memberships)
    assert combined >= max(bases.values()) - 0.02
    assert set(stacked.describe()["weights"]) == set(stacked.bases_)


def test_stacked_attack_reuses_the_attacks_it_is_given(small_world) -> None:
    """use_fitted: the supplied fitted attacks are pooled as they are (same objects, same fits),
    the base attacks not supplied are fitted, and a supplied stacked attack is ignored."""
    knowledge = small_world.knowledge(laplace_scale=0.1)
    linear = LinearAttack(n_shadow_releases=300, validation_releases=100).fit(knowledge, seed=1)
    fit_before = linear.fit_
    releases, _ = small_world.releases(3, seed=2, laplace_scale=0.1)
    scores_before = linear.score(small_world.population.genotypes, releases)
    other = StackedAttack(base=())
    stacked = StackedAttack(base=("linear", "score")).use_fitted({"linear": linear, "stacked": other})
    stacked.fit(knowledge, seed=4)
    assert list(stacked.bases_) == ["linear", "score"]
    assert stacked.bases_["linear"] is linear and linear.fit_ is fit_before
    np.testing.assert_array_equal(linear.score(small_world.population.genotypes, releases), scores_before)
    # fitted by the stacked attack: it scores (unfitted it would raise), as the inner product
    p = small_world.population.reference_frequencies
    genotypes = small_world.population.genotypes
    np.testing.assert_allclose(stacked.bases_["score"].score(genotypes, releases), (releases - p) @ (genotypes - p).T,
                               atol=1e-12)


def test_stacked_attack_ignores_an_uninformative_base(small_world) -> None:
    """A base of pure noise next to an informative one: its standardised weight is below 5% of the
    informative base's (200 stacking releases x 40 individuals, 1/4 members: the noise weight's
    standard error is about 1 / sqrt(8000 * 3 / 16) = 0.026).  Measured: noise -0.040, linear
    1.875 (|noise| <= 0.056 over noise and stacking seeds 0-4); on 30 evaluation releases the
    stacked attack reads 0.856 against 0.857 for the linear base alone."""
    knowledge = small_world.knowledge(laplace_scale=0.2)
    linear = LinearAttack(n_shadow_releases=300, validation_releases=100).fit(knowledge, seed=1)
    stacked = StackedAttack(base=()).use_fitted({"noise": _RandomScores(seed=5), "linear": linear})
    stacked.fit(knowledge, seed=2)
    standardised = dict(zip(stacked.bases_, stacked.weights_[:-1]))
    assert standardised["linear"] > 1.0
    assert abs(standardised["noise"]) < 0.05 * standardised["linear"]
    releases, memberships = small_world.releases(30, seed=9, laplace_scale=0.2)
    genotypes = small_world.population.genotypes
    alone = _mean_auc(linear.score(genotypes, releases), memberships)
    assert _mean_auc(stacked.score(genotypes, releases), memberships) >= alone - 0.01


def test_stacked_attack_uses_base_scores_it_is_handed(small_world, monkeypatch) -> None:
    """score(..., base_scores=...): the bases' scores handed in (an evaluation's, on the same
    releases) are used without scoring those bases again, and the pooled score is the one it
    computes itself, bit for bit; a base not handed in is scored; a wrong shape is refused."""
    import pytest

    from bngp.errors import InputError

    knowledge = small_world.knowledge(laplace_scale=0.2)
    stacked = StackedAttack(base=("linear", "score", "reconstruction")).fit(knowledge, seed=5)
    releases, _ = small_world.releases(6, seed=8, laplace_scale=0.2)
    genotypes = small_world.population.genotypes
    expected = stacked.score(genotypes, releases)
    known = {name: attack.score(genotypes, releases) for name, attack in stacked.bases_.items() if name != "score"}
    for name in known:  # scoring these again would now fail
        monkeypatch.setattr(stacked.bases_[name], "score", lambda *args: 1 / 0)
    np.testing.assert_array_equal(stacked.score(genotypes, releases, base_scores=known), expected)
    with pytest.raises(InputError, match="base_scores"):
        stacked.score(genotypes, releases, base_scores={"linear": known["linear"][:2]})


def test_an_evaluation_hands_the_stacked_attack_its_scores(small_population) -> None:
    """evaluate_defense scores each base attack once on its evaluation releases: the stacked
    attacker reads those scores instead of scoring the bases again (it still scores them on its
    own 200 stacking releases)."""
    from bngp.attacks.registry import get_attack
    from bngp.data.priors import UniformSubsetPrior
    from bngp.defenses.dp import LaplaceDefense
    from bngp.evaluate import evaluate_defense

    attacks = {name: get_attack(name) for name in ("score", "linear", "stacked")}
    calls = []
    for name in ("score", "linear"):
        real = attacks[name].score

        def spy(targets, releases, _real=real, _name=name):
            calls.append((_name, np.atleast_2d(releases).shape[0]))
            return _real(targets, releases)

        attacks[name].score = spy
    prior = UniformSubsetPrior(small_population.n_individuals, 20)
    result = evaluate_defense(small_population, prior, LaplaceDefense(scale=0.05), attacks, n_members=20, releases=4,
                              seed=3)
    assert sorted(call for call in calls if call[1] == 4) == [("linear", 4), ("score", 4)]
    assert ("linear", 200) in calls and set(result.scores) == {"score", "linear", "stacked"}
