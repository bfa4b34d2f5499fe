"""Canary audits of the release: design, soundness against DP defenses, power without noise."""

import numpy as np
import pytest
import torch

import bngp.mechanism_audit.canary as canary_module
from bngp.attacks.registry import get_attack
from bngp.attacks.tracing import ScoreAttack
from bngp.attacks.training import AttackerTrainingConfig
from bngp.mechanism_audit import CanaryPrior, audit_mechanism, many_run_mechanism_audit, one_run_mechanism_audit
from bngp.data.independent import simulate_independent
from bngp.errors import DataFormatError, InputError
from bngp.defenses.base import Defense, Guarantee, NoDefense
from bngp.defenses.registry import DefenseContext, parse_defense_spec

MEMBERS = 60


@pytest.fixture(scope="module")
def population():
    """K = 240 individuals, |Q| = 600 independent SNVs, reference panel of 200."""
    return simulate_independent(240, 200, 600, seed=7)


def _defense(spec, population, members=MEMBERS):
    return parse_defense_spec(spec, DefenseContext(population, members))


class _ClaimsPrivacyButAddsNothing(Defense):
    """A broken defense: claims 0.2-DP, releases the exact frequencies."""

    name = "broken"

    def noise(self, b, x_hat, generator):
        return torch.zeros_like(x_hat)

    @property
    def guarantee(self):
        return Guarantee("laplace", epsilon=0.2, neighbouring="replace")


# ------------------------------------------------------------------------------------------------
# the design
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("relation", ["replace", "add-remove"])
def test_canary_prior_draws_the_design(relation):
    canaries = np.array([0, 5, 9, 20, 33])
    prior = CanaryPrior(50, canaries, 12, relation)
    b, inclusion = prior.draw(4000, np.random.default_rng(0))
    assert b.shape == (4000, 50) and b.dtype == np.float32 and inclusion.shape == (4000, 5)
    assert np.array_equal(b[:, canaries].astype(bool), inclusion)
    sizes = b.sum(axis=1)
    expected = 12 if relation == "replace" else 12 + inclusion.sum(axis=1)
    assert np.array_equal(sizes, np.broadcast_to(expected, sizes.shape))
    assert np.allclose(inclusion.mean(axis=0), 0.5, atol=0.03)
    # Empirical marginals match the declared ones (pool members exchangeable).
    assert np.allclose(b.mean(axis=0), prior.marginals, atol=0.03)
    torch_b = prior.sample_torch(3000, torch.Generator().manual_seed(1))
    torch_sizes = torch_b.sum(dim=1)
    if relation == "replace":
        assert torch.all(torch_sizes == 12)
    else:
        assert torch.all(torch_sizes == 12 + torch_b[:, torch.as_tensor(canaries)].sum(dim=1))
    assert abs(float(torch_b[:, torch.as_tensor(canaries)].mean()) - 0.5) < 0.03
    assert prior.describe()["neighbouring"] == relation


def test_canary_prior_rejects_impossible_designs():
    with pytest.raises(InputError, match=r"`canaries` must be <= members \(4\) under the replace relation"):
        CanaryPrior(50, np.arange(5), 4, "replace")
    with pytest.raises(InputError, match=r"`members` must be <= K - canaries = 40"):
        CanaryPrior(50, np.arange(10), 41, "add-remove")
    with pytest.raises(InputError, match="must not repeat"):
        CanaryPrior(50, np.array([1, 1]), 10, "replace")
    with pytest.raises(InputError, match="`neighbouring` must be"):
        CanaryPrior(50, np.array([1, 2]), 10, "swap")


# ------------------------------------------------------------------------------------------------
# power and soundness
# ------------------------------------------------------------------------------------------------


def test_no_defense_gives_a_clearly_positive_one_run_bound(population):
    result = one_run_mechanism_audit(population, NoDefense(), "score", canaries=60, members=MEMBERS, seed=0)
    assert result.epsilon_lb > 1.0
    assert result.is_lower_bound and result.claimed is None and result.exceeds_claim is None
    assert result.diagnostics["canary_roc"]["auc"] > 0.9
    payload = result.to_dict()
    assert payload["attack"]["name"] == "score" and "p_bar" in payload["attack"]["knowledge"]
    assert payload["design"]["canaries"] == 60 and len(payload["design"]["canary_ids"]) == 60
    assert payload["method"]["one_run"]["n_canaries"] == 60


def test_no_defense_gives_a_clearly_positive_many_run_bound(population):
    result = many_run_mechanism_audit(population, NoDefense(), "lrt", canaries=3, members=MEMBERS, runs=150, seed=0)
    assert result.epsilon_lb > 2.0
    method = result.method
    assert result.epsilon_lb == max(method["clopper_pearson_epsilon_lb"], method["pooled_one_run_epsilon_lb"])
    assert len(method["per_canary"]) == 3
    assert method["pooled_one_run"]["n_canaries"] == 450
    assert method["pooled_one_run"]["confidence"] == pytest.approx(0.975)
    assert method["per_canary"][0]["confidence"] == pytest.approx(1 - 0.05 / 6)


@pytest.mark.parametrize(
    "spec",
    [
        "laplace:epsilon=0.5",
        "laplace:epsilon=2,sensitivity=replace",
        "gaussian:epsilon=0.5,delta=1e-5",
        "gaussian:epsilon=2,delta=1e-5,sensitivity=replace",
        "gaussian:epsilon=8,delta=1e-5,sensitivity=replace",
    ],
)
def test_dp_defenses_are_never_audited_above_their_claim(population, spec):
    defense = _defense(spec, population)
    claimed = defense.guarantee.epsilon
    bounds = []
    for seed in range(3):
        one = one_run_mechanism_audit(population, defense, "score", canaries=60, members=MEMBERS, seed=seed)
        many = many_run_mechanism_audit(
            population, defense, "optimal-lrt", canaries=2, members=MEMBERS, runs=200, seed=seed
        )
        for result in (one, many):
            assert result.claimed_epsilon == claimed
            assert result.delta == defense.guarantee.delta
            assert result.exceeds_claim is False
            bounds.append(result.epsilon_lb)
    assert max(bounds) <= claimed
    if spec.startswith("gaussian:epsilon=8"):
        assert max(bounds) > 0.5  # the audit has power here, and still stays below the claim


def test_an_overclaiming_defense_is_caught(population):
    result = one_run_mechanism_audit(population, _ClaimsPrivacyButAddsNothing(), "score", canaries=60, members=MEMBERS)
    assert result.claimed_epsilon == 0.2
    assert result.epsilon_lb > 1.0
    assert result.exceeds_claim is True
    assert result.to_dict()["bound_exceeds_claim"] is True


def test_a_bound_at_a_smaller_delta_than_claimed_is_not_compared(population):
    defense = _defense("gaussian:epsilon=1,delta=1e-5", population)
    result = one_run_mechanism_audit(population, defense, "score", canaries=20, members=MEMBERS, delta=0.0)
    assert result.delta == 0.0 and result.exceeds_claim is None


def test_add_remove_relation_follows_the_defense(population):
    defense = _defense("laplace:epsilon=1,sensitivity=add-remove", population)
    result = one_run_mechanism_audit(population, defense, "score", canaries=40, members=MEMBERS, seed=1)
    assert result.design["neighbouring"] == "add-remove"
    assert result.exceeds_claim is False


# ------------------------------------------------------------------------------------------------
# the attack never sees the audited releases; determinism
# ------------------------------------------------------------------------------------------------


class _SpyAttack(ScoreAttack):
    """The score attack that also records the shadow releases it simulates."""

    requires = ScoreAttack.requires | {"simulate", "population"}

    def _fit(self, knowledge, seed):
        super()._fit(knowledge, seed)
        self.shadow_releases_, self.shadow_memberships_ = knowledge.simulate(400, seed)


def test_shadow_simulations_follow_the_design_but_not_the_audited_releases(population, monkeypatch):
    audited = []
    original = canary_module.sample_releases

    def recording(mechanism, defense, b, generator):
        releases = original(mechanism, defense, b, generator)
        audited.append(releases)
        return releases

    monkeypatch.setattr(canary_module, "sample_releases", recording)
    spy = _SpyAttack()
    result = many_run_mechanism_audit(population, NoDefense(), spy, canaries=4, members=MEMBERS, runs=20, seed=3)
    (releases,) = audited
    canaries = population.index_of(result.design["canary_ids"])
    assert np.allclose(spy.shadow_memberships_[:, canaries].mean(), 0.5, atol=0.06)
    assert np.all(spy.shadow_memberships_.sum(axis=1) == MEMBERS)
    shared = (spy.shadow_releases_[:, None, :] == releases[None, :, :]).all(axis=2)
    assert not shared.any()
    assert result.attack["fit_seed"] == result.seeds["attack"]
    assert len(set(result.seeds.values())) == len(result.seeds)


def test_same_seed_same_record_and_other_seed_differs(population):
    defense = _defense("laplace:epsilon=50", population)
    first = many_run_mechanism_audit(population, defense, "score", canaries=3, members=MEMBERS, runs=30, seed=9)
    second = many_run_mechanism_audit(population, defense, "score", canaries=3, members=MEMBERS, runs=30, seed=9)
    other = many_run_mechanism_audit(population, defense, "score", canaries=3, members=MEMBERS, runs=30, seed=10)
    assert first.to_dict() == second.to_dict()
    assert first.to_dict()["design"]["canary_ids"] != other.to_dict()["design"]["canary_ids"]


# ------------------------------------------------------------------------------------------------
# every defense SPEC, including trained defenders and learned attacks
# ------------------------------------------------------------------------------------------------


def test_trained_defender_is_audited_with_the_bayesian_attacker(small_population, tiny_run):
    defense = parse_defense_spec(f"run:{tiny_run}", DefenseContext(small_population, 20))
    attack = get_attack("bayesian", config=AttackerTrainingConfig(steps=30))
    result = audit_mechanism(
        small_population, defense, attack, mode="many-run", canaries=4, members=20, runs=40, seed=0
    )
    assert result.claimed is None and result.exceeds_claim is None
    assert result.design["neighbouring"] == "replace"
    assert np.isfinite(result.epsilon_lb)
    assert result.attack["name"] == "bayesian" and "simulate" in result.attack["knowledge_given"]


@pytest.mark.parametrize("spec", ["rr:epsilon=0.05", "linf:epsilon=5"])
def test_other_dp_defenses_run_end_to_end(population, spec):
    defense = _defense(spec, population)
    result = one_run_mechanism_audit(population, defense, "score", canaries=30, members=MEMBERS, seed=2)
    assert result.claimed_epsilon == defense.guarantee.epsilon
    assert result.exceeds_claim is False


# ------------------------------------------------------------------------------------------------
# bad input
# ------------------------------------------------------------------------------------------------


def test_bad_options_raise_one_line_errors(population):
    none = NoDefense()
    with pytest.raises(InputError, match=r"^`canaries` must be >= 2, got 0\.$"):
        one_run_mechanism_audit(population, none, "score", canaries=0, members=MEMBERS)
    with pytest.raises(InputError, match=r"`runs` must be >= 2, got 1"):
        many_run_mechanism_audit(population, none, "score", canaries=2, members=MEMBERS, runs=1)
    with pytest.raises(InputError, match=r"`canaries` must be <= members \(60\)"):
        one_run_mechanism_audit(population, none, "score", canaries=61, members=MEMBERS)
    with pytest.raises(InputError, match=r"`mode` must be one of one-run, many-run, panoramia"):
        audit_mechanism(population, none, "score", mode="two-run", canaries=10, members=MEMBERS)
    with pytest.raises(InputError, match=r"`runs` applies only to the many-run mode"):
        audit_mechanism(population, none, "score", mode="one-run", canaries=10, members=MEMBERS, runs=5)
    with pytest.raises(InputError, match=r"`delta` must be in \[0, 1\)"):
        one_run_mechanism_audit(population, none, "score", canaries=10, members=MEMBERS, delta=1.5)
    with pytest.raises(InputError, match=r"`neighbouring` must be one of"):
        one_run_mechanism_audit(population, none, "score", canaries=10, members=MEMBERS, neighbouring="swap")
    with pytest.raises(InputError, match="needs noise_law"):
        one_run_mechanism_audit(population, _defense("rr:epsilon=1", population), "optimal-lrt", canaries=10,
                                members=MEMBERS)


def test_all_canaries_on_one_side_is_reported_not_bounded(population):
    seeds = [
        seed
        for seed in range(40)
        if len({bool(b) for b in _inclusion_of(population, seed)}) == 1
    ]
    assert seeds, "no seed with all canaries on one side among 40 (probability 1/2 each for m = 2)"
    with pytest.raises(DataFormatError, match="all 2 canaries were"):
        one_run_mechanism_audit(population, NoDefense(), "score", canaries=2, members=MEMBERS, seed=seeds[0])


def _inclusion_of(population, seed):
    from bngp.mechanism_audit.common import audit_seeds

    _, seeds = audit_seeds(seed)
    rng = np.random.default_rng(seeds["design"])
    canaries = np.sort(rng.choice(population.n_individuals, size=2, replace=False))
    _, inclusion = CanaryPrior(population.n_individuals, canaries, MEMBERS, "replace").draw(1, rng)
    return inclusion[0]


@pytest.mark.parametrize(
    "spec", ["gaussian:epsilon=4,delta=1e-5,sensitivity=replace", "laplace:epsilon=16,sensitivity=replace"]
)
def test_soundness_over_many_seeded_repetitions(population, spec):
    """At confidence 0.95 at most ~5% of repetitions may exceed the claim; these audits never should."""
    defense = _defense(spec, population)
    bounds = []
    for seed in range(20):
        bounds.append(one_run_mechanism_audit(population, defense, "optimal-lrt", canaries=60, members=MEMBERS,
                                              seed=seed).epsilon_lb)
        bounds.append(many_run_mechanism_audit(population, defense, "optimal-lrt", canaries=4, members=MEMBERS,
                                               runs=300, seed=seed).epsilon_lb)
    assert max(bounds) <= defense.guarantee.epsilon
    assert np.mean(bounds) > 0.0


def test_a_release_without_signal_rarely_gives_a_positive_bound():
    """Laplace at eps = 1e-6 makes the release independent of the data for all practical purposes:
    at confidence 0.95 at most ~5% of repetitions may report eps_lb > 0 (measured: ~1%)."""
    population = simulate_independent(200, 100, 300, seed=0)
    defense = _defense("laplace:epsilon=1e-6", population, members=60)
    positives = 0
    for seed in range(30):
        one = one_run_mechanism_audit(population, defense, "score", canaries=50, members=60, seed=seed)
        positives += one.epsilon_lb > 0
        positives += many_run_mechanism_audit(
            population, defense, "score", canaries=4, members=60, runs=100, seed=seed
        ).epsilon_lb > 0
    assert positives <= 4  # of 60; P[Bin(60, 0.05) > 4] = 0.18 even at the worst allowed rate
