import dataclasses
import os
import re

import numpy as np
import pytest

from bngp.attacks.base import Attack, AttackKnowledge
from bngp.data.priors import UniformSubsetPrior
from bngp.errors import DataFormatError, InputError
from bngp.evaluate import evaluate_defense
from bngp.evaluation_record import EVALUATION_FORMAT, AttackResult, EvaluationResult, check_evaluation_format
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
    assert result.attacks["constant"].auc == 0.5
    assert result.attacks["oracle"].auc > 0.9
    assert result.strongest_attack == "oracle"
    payload = result.to_dict()
    assert payload["strongest_attack"]["name"] == "oracle" and payload["utility_loss"] == 0.0


class _Follower(_Oracle):
    """Declares that it starts from the evaluation's ``leader``, and that it is fitted together with ``partner``."""

    warm_start_from = "leader"
    fitted_together_with = "partner"

    def __init__(self) -> None:
        self.started_from: Attack | None = None
        self.offered: Attack | None = None

    def start_from(self, fitted: Attack) -> "_Follower":
        self.started_from = fitted
        return self

    def fit_together_with(self, partner: Attack) -> "_Follower":
        self.offered = partner
        return self


def test_the_evaluation_asks_each_attack_what_it_needs(small_population):
    """The harness reads an attack's declarations, not its name: an attack starts from its
    ``warm_start_from`` attack when that one was fitted before it, and offers a joint fit to its
    ``fitted_together_with`` partner while that one is still to be fitted."""
    prior = UniformSubsetPrior(small_population.n_individuals, 20)
    leader, follower, partner = _Oracle(), _Follower(), _Constant()
    evaluate_defense(small_population, prior, NoDefense(), {"leader": leader, "other": follower, "partner": partner},
                     releases=3, seed=0, n_members=20)
    assert follower.started_from is leader and follower.offered is partner
    assert follower.builds_on_others and not leader.builds_on_others
    first = _Follower()
    evaluate_defense(small_population, prior, NoDefense(), {"partner": _Constant(), "other": first, "leader": _Oracle()},
                     releases=3, seed=0, n_members=20)
    assert first.started_from is None and first.offered is None


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
    assert noisy.attacks["score"].auc < a.attacks["score"].auc
    assert noisy.utility_loss > 0


def test_releases_must_be_at_least_two(small_population):
    with pytest.raises(InputError):
        evaluate_defense(small_population, UniformSubsetPrior(40, 20), NoDefense(), ["score"], releases=1)


def test_result_is_a_frozen_record_built_complete(small_population):
    """The attack gap (an analytic attack beating the Bayesian attacker) is in the record as
    built, and editing the payload or assigning a field leaves the record unchanged."""
    prior = UniformSubsetPrior(small_population.n_individuals, 20)
    with pytest.warns(UserWarning, match="attack gap: `score`"):
        result = evaluate_defense(small_population, prior, NoDefense(), {"bayesian": _Constant(), "score": _Oracle()},
                                  releases=3, seed=0, n_members=20, kappa=np.full(small_population.n_attributes, 2.0))
    payload = result.to_dict()
    assert list(payload) == ["format", "defense", "utility_loss", "utility", "releases", "seed", "device", "workers",
                             "attacks", "strongest_attack", "notes", "attack_gap"]
    assert payload["device"] == "cpu" and payload["workers"] == 1
    gap = result.attacks["score"].auc - 0.5
    assert payload["attack_gap"] == {"best_analytic": "score", "gap": pytest.approx(gap)}
    assert len(result.notes) == 1 and result.notes[0].startswith("attack gap: `score`")
    assert payload["notes"] == list(result.notes)
    assert result.defense["weighted_utility_loss"] == 0.0  # NoDefense releases f(D) exactly
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.notes = ()
    payload["defense"]["spec"] = "edited"
    payload["attacks"]["score"]["auc"] = -1.0
    assert "spec" not in result.defense and result.to_dict()["attacks"]["score"]["auc"] == pytest.approx(gap + 0.5)


def _record(auc: float) -> AttackResult:
    """An attack's record of AUC ``auc`` on two releases."""
    return AttackResult(auc=auc, auc_std=0.0, auc_per_release=(auc, auc), tpr_at_fpr={"0.1": 0.1, "0.01": 0.01, "0.001": 0.0},
                        advantage=0.0, bayes_weighted_advantage=0.0, gamma=0.5, knowledge="knows nothing", seconds=0.0,
                        orientation=1, raw_auc=auc)


def test_an_evaluation_reads_back_from_its_payload(small_population):
    """``from_dict`` of a payload (with the stored labels and scores) gives the same payload again, the
    per-attack records typed, in the same order, with the optional fields only where they were set."""
    prior = UniformSubsetPrior(small_population.n_individuals, 20)
    result = evaluate_defense(small_population, prior, LaplaceDefense(1.0), "score,linear,stacked", releases=3, seed=0,
                              n_members=20)
    payload = result.to_dict()
    again = EvaluationResult.from_dict(payload, result.labels, result.scores)
    assert again.to_dict() == payload and list(again.to_dict()["attacks"]) == ["score", "linear", "stacked"]
    assert all(isinstance(record, AttackResult) for record in again.attacks.values())
    assert again.attacks["linear"].learning_curve is not None and again.attacks["score"].learning_curve is None
    assert list(payload["attacks"]["stacked"])[-1] == "weights" and "fit" not in payload["attacks"]["stacked"]
    older = {key: value for key, value in payload.items() if key != "workers"}  # written before workers were
    assert EvaluationResult.from_dict(older, result.labels, result.scores).workers == 1
    with pytest.raises(DataFormatError, match="lacks knowledge"):
        AttackResult.from_dict({key: value for key, value in payload["attacks"]["score"].items() if key != "knowledge"})


def test_the_record_names_its_format_and_readers_refuse_a_newer_one():
    payload = EvaluationResult({}, 0.0, np.zeros((2, 3), dtype=np.int8), {"a": np.zeros((2, 3))}, {"a": _record(0.5)},
                               seed=0, releases=2).to_dict()
    assert payload["format"] == EVALUATION_FORMAT == "bngp-evaluation-1"
    assert check_evaluation_format(payload, "EVAL.json") is payload
    older = {key: value for key, value in payload.items() if key != "format"}  # written before formats were named
    assert check_evaluation_format(older, "EVAL.json") is older
    for written, fragment in (("bngp-evaluation-2", "newer than this bngp reads (bngp-evaluation-1)"),
                              ("bngp-sweep-1", "not a bngp evaluation record")):
        with pytest.raises(DataFormatError, match=re.escape(fragment)) as raised:
            check_evaluation_format({**payload, "format": written}, "EVAL.json")
        assert str(raised.value).startswith("EVAL.json ") and "\n" not in str(raised.value)
    with pytest.raises(DataFormatError, match="JSON object"):
        check_evaluation_format([payload], "EVAL.json")


def test_result_checks_its_shapes(small_population):
    labels = np.zeros((3, 4), dtype=np.int8)
    with pytest.raises(InputError, match="scores"):
        EvaluationResult({}, 0.0, labels, {"a": np.zeros((3, 5))}, {"a": _record(0.5)}, seed=0, releases=3)
    with pytest.raises(InputError, match="labels"):
        EvaluationResult({}, 0.0, labels, {"a": np.zeros((3, 4))}, {"a": _record(0.5)}, seed=0, releases=2)
    with pytest.raises(InputError, match="same attacks"):
        EvaluationResult({}, 0.0, labels, {}, {"a": _record(0.5)}, seed=0, releases=3)


def test_the_bayesian_attacker_starts_from_the_linear_attacks_converged_fit(small_population, monkeypatch):
    """With ``linear`` fitted first, ``bayesian`` reuses its ridge map: one converged fit, not two,
    and the Bayesian attacker's report shows that fit and learning curve."""
    import bngp.attacks.linear as linear_module
    import bngp.attacks.training as training_module
    from bngp.attacks.bayesian import BayesianAttack
    from bngp.attacks.linear import LinearAttack
    from bngp.attacks.training import AttackerTrainingConfig

    calls = {"linear": 0, "bayesian": 0}

    def counted(module, name):
        original = module.fit_converged

        def wrapper(*args, **kwargs):
            calls[name] += 1
            return original(*args, **kwargs)

        monkeypatch.setattr(module, "fit_converged", wrapper)

    counted(linear_module, "linear")
    counted(training_module, "bayesian")
    prior = UniformSubsetPrior(small_population.n_individuals, 20)
    linear = LinearAttack(max_shadow_releases=1000)
    bayesian = BayesianAttack(AttackerTrainingConfig(steps=5, validate_every=5))
    result = evaluate_defense(small_population, prior, LaplaceDefense(scale=0.02), {"linear": linear, "bayesian": bayesian},
                              releases=3, seed=0, n_members=20)
    assert calls == {"linear": 1, "bayesian": 0}
    assert result.attacks["bayesian"].fit == linear.fit_.describe()
    assert result.attacks["bayesian"].learning_curve == linear.learning_curve_.to_dict()
    assert result.attacks["bayesian"].training_curve == bayesian.attacker_.training_curve
    assert result.attacks["bayesian"].training_curve["steps"] == [0, 5]
    # on its own, the Bayesian attacker fits its own map
    alone = evaluate_defense(small_population, prior, LaplaceDefense(scale=0.02),
                             {"bayesian": BayesianAttack(AttackerTrainingConfig(steps=5, validate_every=5))},
                             releases=3, seed=0, n_members=20)
    assert calls["bayesian"] == 1 and alone.attacks["bayesian"].fit != linear.fit_.describe()


def test_a_warm_start_fit_of_the_wrong_shape_is_refused(small_population):
    from bngp.attacks.base import attack_knowledge
    from bngp.attacks.bayesian import BayesianAttack
    from bngp.attacks.linear import LinearAttack
    from bngp.attacks.training import AttackerTrainingConfig

    prior = UniformSubsetPrior(small_population.n_individuals, 20)
    knowledge = attack_knowledge(small_population, prior, LaplaceDefense(scale=0.02), 20)
    linear = LinearAttack(n_shadow_releases=300).fit(knowledge, seed=0)
    fit = dataclasses.replace(linear.fit_, weights=linear.fit_.weights[:-1])
    bayesian = BayesianAttack(AttackerTrainingConfig(steps=0)).use_ridge_fit(fit)
    with pytest.raises(InputError, match="warm-start fit"):
        bayesian.fit(knowledge, seed=0)


def _small_attacks():
    """Every attack of `all` on the small population, with settings that keep the test short."""
    from bngp.attacks.per_individual import PerIndividualAttack, PerIndividualConfig
    from bngp.attacks.registry import get_attack
    from bngp.attacks.training import AttackerTrainingConfig
    from bngp.attacks.bayesian import BayesianAttack

    names = ("lrt", "score", "reconstruction", "reconstruction-l1", "linear", "whitened", "per-individual", "bayesian",
             "stacked")
    attacks = {name: get_attack(name) for name in names}
    attacks["bayesian"] = BayesianAttack(AttackerTrainingConfig(steps=20, batch_size=16, validate_every=10))
    attacks["per-individual"] = PerIndividualAttack(config=PerIndividualConfig(max_steps=20, batch_size=8,
                                                                               validate_every=10, patience=2))
    return attacks


def test_a_helper_process_gives_the_same_evaluation(small_population):
    """workers=2 (bngp.workers: the attacks independent of the others, the first size of the linear
    maps' learning curve and the stacked attacker's base scores in a helper process) gives the
    scores of workers=1 up to rounding (measured: equal to 5e-16), in the same order."""
    prior = UniformSubsetPrior(small_population.n_individuals, 20)
    defense = LaplaceDefense(scale=0.05)
    alone = evaluate_defense(small_population, prior, defense, _small_attacks(), releases=4, seed=5, n_members=20)
    helped = evaluate_defense(small_population, prior, defense, _small_attacks(), releases=4, seed=5, n_members=20,
                              workers=2)
    assert list(helped.attacks) == list(alone.attacks) and helped.workers == 2 and alone.workers == 1
    assert helped.to_dict()["workers"] == 2
    for name, scores in alone.scores.items():
        np.testing.assert_allclose(helped.scores[name], scores, rtol=1e-9, atol=1e-12, err_msg=name)
        assert helped.attacks[name].auc == pytest.approx(alone.attacks[name].auc, abs=1e-12)
    assert helped.attacks["linear"].learning_curve == alone.attacks["linear"].learning_curve
    assert len(alone.attacks["linear"].learning_curve["releases"]) >= 2  # the helper fitted the first size


class _Unpicklable(_Oracle):
    """An attack that cannot travel to a helper process (it holds a lambda)."""

    name = "unpicklable"

    def __init__(self):
        self.transform = lambda scores: scores


class _OnlyHere(_Oracle):
    """An attack that travels but fails to fit anywhere but in the process that made it."""

    name = "only-here"

    def __init__(self):
        self.pid = os.getpid()

    def _fit(self, knowledge: AttackKnowledge, seed: int) -> None:
        if os.getpid() != self.pid:
            raise RuntimeError("not in the helper")
        super()._fit(knowledge, seed)


def test_what_the_helper_cannot_fit_is_fitted_here(small_population):
    """An attack that does not pickle, or whose fit fails in the helper process (with a warning
    naming it), is fitted in the evaluation's process: the same scores as without a helper."""
    from bngp.attacks.registry import get_attack

    prior = UniformSubsetPrior(small_population.n_individuals, 20)
    with pytest.warns(UserWarning, match="could not fit `only-here` .RuntimeError: not in the helper"):
        helped = evaluate_defense(small_population, prior, NoDefense(), {"unpicklable": _Unpicklable(),
                                  "only-here": _OnlyHere(), "score": get_attack("score")}, releases=3, seed=1,
                                  n_members=20, workers=2)
    alone = evaluate_defense(small_population, prior, NoDefense(), {"unpicklable": _Oracle(), "only-here": _Oracle(),
                             "score": get_attack("score")}, releases=3, seed=1, n_members=20)
    assert list(helped.attacks) == ["unpicklable", "only-here", "score"]
    for name in helped.scores:
        np.testing.assert_array_equal(helped.scores[name], alone.scores[name])


def test_workers_must_be_one_or_two(small_population):
    prior = UniformSubsetPrior(small_population.n_individuals, 20)
    for bad in (0, 3, True, "2"):
        with pytest.raises(InputError, match="`workers` must be 1 or 2"):
            evaluate_defense(small_population, prior, NoDefense(), ["score"], releases=2, workers=bad)
