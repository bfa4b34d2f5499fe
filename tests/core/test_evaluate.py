import numpy as np
import pytest

from bngp.attacks.base import Attack, AttackKnowledge
from bngp.data.priors import UniformSubsetPrior
from bngp.evaluate import evaluate_defense
from bngp.defenses.base import NoDefense
from bngp.defenses.dp import LaplaceDefense


class _Oracle(Attack):
    """Scores = the release's per-SNV signal projected on each target (a known-good attack)."""

    name = "oracle"
    knowledge_statement = "test attack"

    def _fit(self, knowledge: AttackKnowledge, seed: int) -> None:
        self.seen = knowledge

    def score(self, targets, releases):
        centre = targets.mean(0)
        return (np.atleast_2d(releases) - centre) @ (targets - centre).T


class _Constant(Attack):
    name = "constant"
    knowledge_statement = "test attack"

    def score(self, targets, releases):
        return np.zeros((np.atleast_2d(releases).shape[0], targets.shape[0]))


def test_harness_reports_each_attack_and_the_strongest(small_population):
    prior = UniformSubsetPrior(small_population.n_individuals, 20)
    result = evaluate_defense(small_population, prior, NoDefense(), {"oracle": _Oracle(), "constant": _Constant()},
                              releases=4, seed=3, n_members=20)
    assert result.labels.shape == (4, small_population.n_individuals)
    assert np.all(result.labels.sum(1) == 20)
    assert result.attacks["constant"]["auc"] == 0.5
    assert result.attacks["oracle"]["auc"] > 0.9
    assert result.strongest_attack == "oracle"
    payload = result.to_dict()
    assert payload["strongest_attack"]["name"] == "oracle" and payload["utility_loss"] == 0.0


def test_attacks_never_receive_evaluation_releases(small_population):
    prior = UniformSubsetPrior(small_population.n_individuals, 20)
    oracle = _Oracle()
    result = evaluate_defense(small_population, prior, NoDefense(), {"oracle": oracle}, releases=3, seed=1, n_members=20)
    shadow_x, shadow_b = oracle.seen.simulate(3, 0)
    assert not any(np.array_equal(shadow_b[i], result.labels[j]) for i in range(3) for j in range(3))


def test_all_expands_to_applicable_attacks_only(small_population, tiny_run):
    from bngp.defenses.trained import load_run_defense

    prior = UniformSubsetPrior(small_population.n_individuals, 20)
    result = evaluate_defense(small_population, prior, load_run_defense(tiny_run), "lrt,score", releases=2, seed=0,
                              n_members=20)
    assert set(result.attacks) == {"lrt", "score"}
    from bngp.attacks.registry import parse_attack_names
    from bngp.attacks.base import attack_knowledge

    defense = load_run_defense(tiny_run)
    knowledge = attack_knowledge(small_population, prior, defense, 20)
    names = parse_attack_names("all", knowledge)
    assert "optimal-lrt" not in names  # a trained defender has no closed-form noise law
    assert "bayesian" in names and "reconstruction" in names


def test_same_seed_same_scores_and_noise_lowers_auc(small_population):
    prior = UniformSubsetPrior(small_population.n_individuals, 20)
    a = evaluate_defense(small_population, prior, NoDefense(), ["score"], releases=3, seed=2, n_members=20)
    b = evaluate_defense(small_population, prior, NoDefense(), ["score"], releases=3, seed=2, n_members=20)
    assert np.array_equal(a.scores["score"], b.scores["score"])
    noisy = evaluate_defense(small_population, prior, LaplaceDefense(scale=5.0), ["score"], releases=3, seed=2,
                             n_members=20)
    assert noisy.attacks["score"]["auc"] < a.attacks["score"]["auc"]
    assert noisy.utility_loss > 0


def test_releases_must_be_at_least_two(small_population):
    from bngp.errors import InputError

    with pytest.raises(InputError):
        evaluate_defense(small_population, UniformSubsetPrior(40, 20), NoDefense(), ["score"], releases=1)
