"""Contract shared by every registered attack (``available_attacks()``, parametrised over the
registry so a newly registered attack is covered without editing this file).

Each attack is fitted, through :func:`bngp.attacks.base.attack_knowledge` against
:class:`bngp.defenses.NoDefense` and a uniform n-of-K prior, with exactly the knowledge it
declares in ``requires`` (every other field left unset), then must:

* refuse to fit, with a one-line :class:`InputError` naming the field, when any declared field is missing;
* refuse to score (and to decide) before it is fitted, with a typed bngp error;
* score K targets x R releases as a finite float (R, K) array, per release (a release's scores do
  not depend on the other releases of the batch) and per target (permuting targets permutes
  scores; a target scored alone gets its score in the batch);
* be deterministic: the same fit seed gives the same scores, and scoring twice gives the same scores;
* score members higher: on undefended releases of the small population its mean per-release AUC
  clears a per-attack bar that a constant score (0.5) or a sign flip (about 1 - AUC) fails;
* not read evaluation labels: after ``fit`` it never calls the simulator again, and none of the
  labelled releases it simulated is an evaluation release;
* describe itself as strict JSON, with a consistent orientation record, and keep its torch form
  equal to its numpy scores when it declares one.
"""

from __future__ import annotations

import json
import pickle

import numpy as np
import pytest
import torch

from bngp.attacks import available_attacks, get_attack
from bngp.attacks.base import AttackKnowledge, attack_knowledge
from bngp.attacks.per_individual import PerIndividualConfig
from bngp.attacks.training import AttackerTrainingConfig
from bngp.data.independent import simulate_independent
from bngp.data.priors import UniformSubsetPrior
from bngp.defenses import NoDefense
from bngp.errors import BNGPError, InputError
from bngp.metrics import release_aucs
from bngp.release.sampling import release_mechanism, sample_releases
from bngp.rng import torch_generator

#: K individuals, n members, |Q| SNVs of the contract population.
K, N_MEMBERS, N_SNVS = 40, 10, 300
#: evaluation releases and the seed they are drawn with (never given to an attack).
N_EVAL, EVAL_SEED = 20, 424_242
FIT_SEED = 3

#: options that keep a fit fast on the contract population; an attack not listed is fitted with
#: its defaults (all registered attacks but ``bayesian`` fit in under a second with them).
FAST_OPTIONS = {
    "tree": {"n_shadow_releases": 10},
    "svm": {"n_shadow_releases": 10, "max_pairs": 300},
    "linear": {"n_shadow_releases": 60},
    "whitened": {"n_shadow_releases": 60},
    "reconstruction-l1": {"max_iterations": 100},
    "stacked": {"n_stacking_releases": 20},
    "bayesian": {"config": AttackerTrainingConfig(steps=5, batch_size=8, shadow_releases=30, validation_draws=10,
                                                  validate_every=5)},
    "per-individual": {"config": PerIndividualConfig(max_steps=40, batch_size=8, warm_start_releases=60,
                                                     validation_draws=20, validate_every=20, patience=2)},
}

#: minimum mean per-release AUC on the undefended evaluation releases.  Measured on this
#: population (seed 5, FIT_SEED, EVAL_SEED): 1.000 for every attack but optimal-lrt (0.981),
#: score and homer (0.999) and tree (0.997).  A constant score reads 0.5 and a sign flip
#: 1 - AUC <= 0.02, so any bar in (0.5, 0.98) separates them; attacks not listed get DEFAULT_MIN_AUC.
DEFAULT_MIN_AUC = 0.9
MIN_AUC = {"optimal-lrt": 0.9}

#: tolerance of "the same score" across batches: float32 networks (bayesian) round differently
#: in batches of different sizes (measured up to 4e-7 relative); a score that depends on the
#: rest of the batch differs by O(1).
TOL = {"rtol": 1e-5, "atol": 1e-5}

KNOWLEDGE_FIELDS = (
    "reference_frequencies",
    "reference_genotypes",
    "population",
    "n_members",
    "membership_prior",
    "noise_law",
    "simulate",
)


class GuardedSimulator:
    """knowledge.simulate that records every labelled release it hands out and can be closed."""

    def __init__(self, simulate) -> None:
        self.simulate = simulate
        self.closed = False
        self.releases: list[np.ndarray] = []

    def __call__(self, n_releases: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
        if self.closed:
            raise AssertionError("the attack called knowledge.simulate after fit (while scoring)")
        releases, memberships = self.simulate(n_releases, seed)
        self.releases.append(np.asarray(releases).copy())
        return releases, memberships


class Setting:
    """The contract population, its prior, the full knowledge and the evaluation releases."""

    def __init__(self) -> None:
        self.population = simulate_independent(K, 60, N_SNVS, seed=5)
        self.prior = UniformSubsetPrior(K, N_MEMBERS)
        self.defense = NoDefense()
        self.full = attack_knowledge(self.population, self.prior, self.defense, N_MEMBERS)
        self.eval_memberships = self.prior.sample(N_EVAL, np.random.default_rng(EVAL_SEED))
        mechanism = release_mechanism(self.population.genotypes, self.defense.composition)
        self.eval_releases = sample_releases(mechanism, self.defense, self.eval_memberships, torch_generator(EVAL_SEED))

    def declared(self, name: str, simulate=None) -> AttackKnowledge:
        """The knowledge the attack registered as ``name`` declares, and nothing else."""
        requires = get_attack(name, **FAST_OPTIONS.get(name, {})).requires
        fields = {field: getattr(self.full, field) for field in KNOWLEDGE_FIELDS if field in requires}
        if "simulate" in fields and simulate is not None:
            fields["simulate"] = simulate
        return AttackKnowledge(**fields)


@pytest.fixture(scope="module")
def setting() -> Setting:
    return Setting()


@pytest.fixture(scope="module", params=available_attacks())
def fitted(request, setting):
    """(attack fitted on its declared knowledge, the guarded simulator it was given)."""
    name = request.param
    guard = GuardedSimulator(setting.full.simulate)
    attack = get_attack(name, **FAST_OPTIONS.get(name, {}))
    assert attack.fit(setting.declared(name, guard), seed=FIT_SEED) is attack
    guard.closed = True
    return attack, guard


def test_every_registered_attack_declares_known_knowledge() -> None:
    assert len(available_attacks()) >= 13 and {"bayesian", "stacked"} <= set(available_attacks())
    for name in available_attacks():
        attack = get_attack(name)
        assert attack.name == name and attack.knowledge_statement
        assert attack.requires and set(attack.requires) <= set(KNOWLEDGE_FIELDS)


@pytest.mark.parametrize("name", available_attacks())
def test_missing_declared_knowledge_is_a_typed_one_line_error(setting, name) -> None:
    attack = get_attack(name, **FAST_OPTIONS.get(name, {}))
    declared = setting.declared(name)
    for field in sorted(attack.requires):
        lacking = AttackKnowledge(**{f: getattr(declared, f) for f in KNOWLEDGE_FIELDS if f != field})
        with pytest.raises(InputError, match=field) as info:
            attack.check_knowledge(lacking)
        assert "\n" not in str(info.value) and name in str(info.value)
        with pytest.raises(InputError, match=field):
            get_attack(name, **FAST_OPTIONS.get(name, {})).fit(lacking, seed=FIT_SEED)
    with pytest.raises(InputError):
        get_attack(name).fit(AttackKnowledge(), seed=FIT_SEED)
    attack.check_knowledge(declared)  # exactly the declared knowledge is enough


@pytest.mark.parametrize("name", available_attacks())
def test_scoring_before_fit_is_a_typed_error(setting, name) -> None:
    attack = get_attack(name, **FAST_OPTIONS.get(name, {}))
    with pytest.raises(BNGPError, match="fit"):
        attack.score(setting.population.genotypes, setting.eval_releases)
    with pytest.raises(BNGPError):
        attack.decide(setting.population.genotypes, setting.eval_releases)


def test_scores_shape_dtype_and_independence(fitted, setting) -> None:
    attack, _ = fitted
    targets = setting.population.genotypes
    releases = setting.eval_releases
    scores = attack.score(targets, releases)
    assert scores.shape == (N_EVAL, K) and scores.dtype == np.float64 and np.all(np.isfinite(scores))
    assert np.ptp(scores) > 0  # not a constant
    np.testing.assert_allclose(attack.score(targets, releases[0]), scores[:1], **TOL)
    order = np.random.default_rng(0).permutation(K)
    np.testing.assert_allclose(attack.score(targets[order], releases), scores[:, order], **TOL)
    rows = np.random.default_rng(1).permutation(N_EVAL)[:7]
    np.testing.assert_allclose(attack.score(targets, releases[rows]), scores[rows], **TOL)


def test_a_targets_score_does_not_depend_on_the_other_targets(fitted, setting, request) -> None:
    """One score per target per release: scoring a few targets (or one) gives their scores in the batch."""
    attack, _ = fitted
    targets, releases = setting.population.genotypes, setting.eval_releases
    scores = attack.score(targets, releases)
    np.testing.assert_allclose(attack.score(targets[:3], releases[0]), scores[:1, :3], **TOL)
    np.testing.assert_allclose(attack.score(targets[5:6], releases), scores[:, 5:6], **TOL)


def test_higher_scores_mean_member(fitted, setting) -> None:
    attack, _ = fitted
    scores = attack.score(setting.population.genotypes, setting.eval_releases)
    aucs = release_aucs(scores, setting.eval_memberships)
    assert aucs.size == N_EVAL
    assert aucs.mean() > MIN_AUC.get(attack.name, DEFAULT_MIN_AUC), f"{attack.name}: mean AUC {aucs.mean():.3f}"


def test_does_not_read_evaluation_labels(fitted, setting) -> None:
    attack, guard = fitted
    # scoring does not touch the knowledge (the guard raises if it is called) ...
    attack.score(setting.population.genotypes, setting.eval_releases)
    # ... and no release it drew with labels during fit is an evaluation release
    if guard.releases:
        simulated = np.concatenate(guard.releases, axis=0)
        for release in setting.eval_releases:
            assert not np.any(np.all(np.isclose(simulated, release, rtol=0, atol=1e-12), axis=1))
    else:
        assert "simulate" not in attack.requires


def test_fit_and_scores_are_deterministic_given_the_seed(fitted, setting) -> None:
    attack, _ = fitted
    again = get_attack(attack.name, **FAST_OPTIONS.get(attack.name, {}))
    again.fit(setting.declared(attack.name), seed=FIT_SEED)
    targets, releases = setting.population.genotypes, setting.eval_releases
    scores = attack.score(targets, releases)
    np.testing.assert_array_equal(attack.score(targets, releases), scores)
    np.testing.assert_allclose(again.score(targets, releases), scores, rtol=1e-12, atol=1e-12)
    assert again.threshold_ == attack.threshold_ and again.orientation_ == attack.orientation_


def test_a_fitted_attack_travels_to_another_process(fitted, setting) -> None:
    """A fitted attack pickles to one that gives the same scores: the evaluation's helper process
    (bngp.workers) sends the attacks it fits back."""
    attack, _ = fitted
    copy = pickle.loads(pickle.dumps(attack))
    targets, releases = setting.population.genotypes, setting.eval_releases
    np.testing.assert_array_equal(copy.score(targets, releases), attack.score(targets, releases))


def test_describe_and_orientation_record(fitted) -> None:
    attack, _ = fitted
    description = json.loads(json.dumps(attack.describe(), allow_nan=False))
    assert description["name"] == attack.name and description["knowledge"] == attack.knowledge_statement
    assert description["requires"] == sorted(attack.requires)
    assert set(description) >= {"orientation", "threshold", "orientation_note", "shadow_auc"}
    assert attack.orientation_ in (1, -1)
    assert (attack.orientation_note_ is None) == (attack.orientation_ == 1)
    if attack.log_odds:  # posterior log-odds: no flip and no threshold chosen
        assert attack.orientation_ == 1 and attack.threshold_ is None
    else:
        assert isinstance(attack.threshold_, float) and np.isfinite(attack.threshold_)
    if attack.shadow_auc_ is not None:  # undefended shadow releases are easy: the raw statistic is oriented
        assert attack.orientation_ == 1 and attack.shadow_auc_ > 0.9


def test_torch_form(fitted, setting) -> None:
    attack, _ = fitted
    targets = setting.population.genotypes
    releases = setting.eval_releases[:2]
    if not attack.differentiable:
        with pytest.raises(InputError, match="no differentiable"):
            attack.score_torch(torch.from_numpy(targets), torch.from_numpy(releases))
        return
    x = torch.tensor(releases, requires_grad=True)
    scores = attack.score_torch(torch.from_numpy(targets), x)
    np.testing.assert_allclose(scores.detach().numpy(), attack.score(targets, releases), rtol=1e-9, atol=1e-9)
    scores.sum().backward()
    assert torch.all(torch.isfinite(x.grad)) and float(x.grad.abs().sum()) > 0
