"""PANORAMIA on genomic releases: generated non-members, baseline and release-aware MIA, and the
companion lower bound with real non-members held out from the generator."""

import numpy as np
import pytest

from bngp.mechanism_audit import (
    MIN_GENERATOR_PANEL,
    MIN_TRAINING_MEMBERS,
    audit_mechanism,
    genotype_features,
    panoramia_design,
    panoramia_mechanism_audit,
)
from bngp.data.genome import simulate_genome
from bngp.data.independent import simulate_independent
from bngp.errors import DataFormatError, InputError
from bngp.defenses.base import NoDefense
from bngp.defenses.registry import DefenseContext, parse_defense_spec

MEMBERS = 150


@pytest.fixture(scope="module")
def population():
    """K = 400 individuals, |Q| = 1000 independent SNVs: no-defense tracing is easy (|Q| >> n)."""
    return simulate_independent(400, 200, 1000, seed=1)


@pytest.fixture(scope="module")
def no_defense_audit(population):
    return panoramia_mechanism_audit(population, NoDefense(), "score", audit_size=100, members=MEMBERS, seed=1)


def test_no_defense_gives_a_positive_companion_bound_and_measurement(no_defense_audit):
    """Default split (R = min(m, (K - n) / 2) = 100): epsilon_lb is the real-non-member lower bound,
    eps_tilde the generated-non-member measurement (measured 0.353 and 0.260 at seed 1)."""
    result = no_defense_audit
    summary, method = result.panoramia, result.method
    assert result.mode == "panoramia"
    assert summary["reported_as_epsilon_lb"] == "real_nonmembers"
    real, generated = summary["real_nonmembers"], summary["generated_nonmembers"]
    assert result.is_lower_bound and real["is_lower_bound"] and not generated["is_lower_bound"]
    assert result.epsilon_lb == real["epsilon_lb"] == method["real_nonmembers"]["epsilon_lb"] > 0.2
    assert method["real_nonmembers"]["is_lower_bound"] and method["real_nonmembers"]["c_lb"] == 0.0
    record = method["panoramia"]
    assert record["c_plus_epsilon_lb"] > record["c_lb"]
    assert generated["epsilon_tilde"] == pytest.approx(record["c_plus_epsilon_lb"] - record["c_lb"])
    assert generated["epsilon_tilde"] > 0.2
    assert not record["is_lower_bound"] and "not a lower bound" in generated["meaning"]
    assert "lower bound on eps" in result.interpretation and "measurement" in result.interpretation
    assert result.exceeds_claim is None  # no claim
    payload = result.to_dict()
    assert list(payload).index("panoramia") == list(payload).index("interpretation") + 1


def test_without_real_nonmembers_the_measurement_is_reported(population, no_defense_audit):
    """real_nonmembers=0: the generator keeps all K - n = 250 outside individuals, epsilon_lb is
    eps_tilde flagged as a measurement; the generated audit's design is the same as with a companion."""
    result = panoramia_mechanism_audit(
        population, NoDefense(), "score", audit_size=100, members=MEMBERS, real_nonmembers=0, seed=1
    )
    assert not result.is_lower_bound and "not a lower bound" in result.interpretation
    assert result.panoramia["real_nonmembers"] is None and result.method["real_nonmembers"] is None
    assert result.panoramia["reported_as_epsilon_lb"] == "generated_nonmembers"
    assert result.epsilon_lb == result.panoramia["generated_nonmembers"]["epsilon_tilde"] > 0.3
    assert result.design["outside_split"] == {**no_defense_audit.design["outside_split"], "generator_panel": 250,
                                              "real_nonmembers": 0}
    assert result.design["audit_real_members"] == no_defense_audit.design["audit_real_members"]
    assert result.diagnostics["real_nonmembers"] is None


def test_baseline_auc_is_reported_and_the_mia_uses_the_release(no_defense_audit):
    diagnostics = no_defense_audit.diagnostics
    assert diagnostics["baseline_auc"] < 0.75  # the copying model is hard to tell from real genomes
    assert diagnostics["attack_score_auc"] > 0.8
    assert diagnostics["mia_auc"] > diagnostics["baseline_auc"] + 0.1
    generator = diagnostics["generator"]
    assert generator["switch_rate"] == 1.0  # independent SNVs: linkage equilibrium is found
    closeness = diagnostics["generator_vs_training_members"]
    assert closeness["mean_abs_frequency_difference"] < 0.08
    companion = diagnostics["real_nonmembers"]
    assert companion["attack_score_auc"] > 0.8 and companion["mia_auc"] > 0.7


def test_design_keeps_audit_training_and_generator_data_apart(no_defense_audit):
    design = no_defense_audit.design
    assert design["audit_size"] == 100
    assert design["audit_real_members"] + design["audit_generated"] == 100
    assert 30 < design["audit_real_members"] < 70
    assert "50 members outside the audit set" in design["classifier_training"]
    assert "150 of the 250 population individuals outside the dataset" in design["generator_panel"]
    assert design["outside_split"]["outside"] == 250
    assert design["outside_split"]["generator_panel"] + design["outside_split"]["real_nonmembers"] == 250
    assert design["companion_audit_size"] == 100
    assert design["companion_real_members"] + design["companion_real_nonmembers"] == 100
    assert 30 < design["companion_real_members"] < 70


def test_split_is_disjoint_seeded_and_recorded(no_defense_audit):
    """The K - n outside individuals are split by the ``companion`` stream into the generator's
    panel and the real non-members: disjoint, covering, fixed by the seed, recorded in AUDIT.json."""
    design = panoramia_design(400, MEMBERS, 100, seed=1)
    outside = np.flatnonzero(~design.membership)
    assert design.membership.sum() == MEMBERS
    assert np.intersect1d(design.generator_panel, design.real_nonmembers).size == 0
    assert np.array_equal(np.sort(np.concatenate([design.generator_panel, design.real_nonmembers])), outside)
    assert design.real_nonmembers.size == 100 and np.unique(design.real_nonmembers).size == 100
    assert design.membership[design.audit_pool].all() and design.membership[design.training_members].all()
    assert np.intersect1d(design.audit_pool, design.training_members).size == 0
    # the audited point of pair i is a member exactly when its coin says so
    assert np.array_equal(design.membership[design.companion_points], design.companion_labels)
    again, other = panoramia_design(400, MEMBERS, 100, seed=1), panoramia_design(400, MEMBERS, 100, seed=2)
    assert np.array_equal(again.real_nonmembers, design.real_nonmembers)
    assert np.array_equal(again.companion_labels, design.companion_labels)
    assert not np.array_equal(np.sort(other.real_nonmembers), np.sort(design.real_nonmembers))
    # the new stream leaves the generated audit's draws alone
    without = panoramia_design(400, MEMBERS, 100, real_nonmembers=0, seed=1)
    assert np.array_equal(without.audit_pool, design.audit_pool) and np.array_equal(without.labels, design.labels)
    assert np.array_equal(without.generator_panel, outside) and without.real_nonmembers.size == 0
    # recorded: the stream's seed and the sizes, which replay the split
    result = no_defense_audit
    assert result.seeds["companion"] == design.seeds["companion"] and len(set(result.seeds.values())) == 6
    assert result.design["outside_split"]["real_nonmembers"] == design.real_nonmembers.size
    assert result.design["companion_real_members"] == int(design.companion_labels.sum())
    assert result.design["audit_real_members"] == int(design.labels.sum())


def test_noise_lowers_the_measurement_and_the_bound(population, no_defense_audit):
    defense = parse_defense_spec("laplace:epsilon=1", DefenseContext(population, MEMBERS))
    result = panoramia_mechanism_audit(population, defense, "score", audit_size=100, members=MEMBERS, seed=1)
    assert result.claimed_epsilon == 1.0
    assert result.diagnostics["attack_score_auc"] < 0.65
    assert result.epsilon_lb < no_defense_audit.epsilon_lb
    generated = result.panoramia["generated_nonmembers"]["epsilon_tilde"]
    assert generated < no_defense_audit.panoramia["generated_nonmembers"]["epsilon_tilde"]
    # The baseline never sees the release: same seed, same baseline.
    assert result.method["panoramia"]["c_lb"] == no_defense_audit.method["panoramia"]["c_lb"]
    # A lower bound at delta = 0 under replacement is comparable with the claim, and does not exceed it.
    assert result.is_lower_bound and result.exceeds_claim is False


def test_null_defense_gives_no_companion_bound(population):
    """Laplace eps = 1e-3: the release carries (almost) nothing about D.  A valid 95% lower bound
    exceeds 1e-3 with probability <= 5%; measured 0.0 at this seed (and at 20 of 20 seeds, 3..22).
    Tolerance: <= the claimed 1e-3."""
    defense = parse_defense_spec("laplace:epsilon=1e-3", DefenseContext(population, MEMBERS))
    result = panoramia_mechanism_audit(population, defense, "score", audit_size=100, members=MEMBERS, seed=1)
    assert result.is_lower_bound and result.epsilon_lb <= 1e-3
    assert result.exceeds_claim is False
    assert abs(result.diagnostics["real_nonmembers"]["attack_score_auc"] - 0.5) < 0.15


def test_linked_genomes_and_determinism():
    population = simulate_genome(220, 60, 300, seed=2, max_r2=1.0, segment_length=500_000)
    first = audit_mechanism(population, NoDefense(), "lrt", mode="panoramia", canaries=40, members=80, seed=4)
    second = audit_mechanism(population, NoDefense(), "lrt", mode="panoramia", canaries=40, members=80, seed=4)
    assert first.to_dict() == second.to_dict()
    assert first.diagnostics["generator"]["switch_rate"] < 0.2
    closeness = first.diagnostics["generator_vs_training_members"]
    assert closeness["mean_adjacent_r2_synthetic"] > 0.5 * closeness["mean_adjacent_r2_real"]


def test_genotype_features_encode_alleles_and_adjacent_agreement():
    features = genotype_features(np.array([[1, 1, 0], [0, 1, 1]], dtype=np.uint8))
    assert features.dtype == np.float32
    assert features.tolist() == [[1, 1, 0, 1, 0], [0, 1, 1, 0, 1]]


def test_bad_input(population):
    none = NoDefense()
    with pytest.raises(InputError, match=rf"`canaries` must be <= members - {MIN_TRAINING_MEMBERS} = 140"):
        panoramia_mechanism_audit(population, none, "score", audit_size=141, members=MEMBERS)
    with pytest.raises(InputError, match=r"`canaries` must be >= 2, got 1"):
        panoramia_mechanism_audit(population, none, "score", audit_size=1, members=MEMBERS)
    with pytest.raises(InputError, match="`delta` does not apply to panoramia"):
        audit_mechanism(population, none, "score", mode="panoramia", canaries=20, members=MEMBERS, delta=1e-5)
    with pytest.raises(InputError, match="`neighbouring` does not apply to panoramia"):
        audit_mechanism(
            population, none, "score", mode="panoramia", canaries=20, members=MEMBERS, neighbouring="replace"
        )


@pytest.mark.parametrize(
    "members, canaries, value, error, message",
    [
        (MEMBERS, 100, 1, InputError, r"`real_nonmembers` must be 0 \(no companion bound\) or >= 2, got 1"),
        (MEMBERS, 100, -3, InputError, r"`real_nonmembers` must be 0 \(no companion bound\) or >= 2, got -3"),
        (MEMBERS, 100, 101, InputError, r"`real_nonmembers` must be <= canaries = 100 \(each real non-member"),
        (MEMBERS, 100, 2.5, InputError, r"`real_nonmembers` must be an integer, got float"),
        (MEMBERS, 100, True, InputError, r"`real_nonmembers` must be an integer, got bool"),
        (MEMBERS, 100, "half", InputError, r"`real_nonmembers` must be a count, 0, None or 'auto', got 'half'"),
        (385, 300, 8, InputError, rf"must be <= K - n - {MIN_GENERATOR_PANEL} = 5 \(the generator keeps at least"),
        (392, 300, 2, InputError, r"too few individuals outside the dataset for a companion bound: K - n = 8"),
    ],
)
def test_bad_real_nonmembers_are_refused_before_any_work(members, canaries, value, error, message):
    with pytest.raises(error, match=message):
        panoramia_design(400, members, canaries, real_nonmembers=value, seed=0)


def test_real_nonmembers_auto_none_and_other_modes(population):
    assert panoramia_design(400, MEMBERS, 100).real_nonmembers.size == 100  # min(m, (K - n) // 2)
    assert panoramia_design(400, MEMBERS, 40).real_nonmembers.size == 40
    assert panoramia_design(400, 385, 300, seed=1).real_nonmembers.size == 5  # K - n - 10
    assert panoramia_design(400, 392, 300).real_nonmembers.size == 0  # too few: no companion, no error
    assert panoramia_design(400, MEMBERS, 100, real_nonmembers=None).real_nonmembers.size == 0
    for mode in ("one-run", "many-run"):
        with pytest.raises(InputError, match="`real_nonmembers` applies only to the panoramia mode"):
            audit_mechanism(population, NoDefense(), "score", mode=mode, canaries=20, members=MEMBERS,
                            real_nonmembers=10)


def test_companion_labels_all_on_one_side_are_refused():
    """R = 2: both coins agree with probability 1/2; such a seed is refused before any work."""
    seeds = []
    for seed in range(40):
        try:
            panoramia_design(400, MEMBERS, 100, real_nonmembers=2, seed=seed)
        except DataFormatError:
            seeds.append(seed)
    assert seeds, "no seed with both companion coins equal among 40"
    with pytest.raises(DataFormatError, match="all 2 companion audit points were"):
        panoramia_design(400, MEMBERS, 100, real_nonmembers=2, seed=seeds[0])


def test_an_attack_limited_to_the_known_population_is_refused_clearly(small_population):
    from bngp.attacks.registry import get_attack
    from bngp.attacks.training import AttackerTrainingConfig

    attack = get_attack("bayesian", config=AttackerTrainingConfig(steps=5))
    with pytest.raises(InputError, match="PANORAMIA scores generated individuals, which attack `bayesian` cannot"):
        panoramia_mechanism_audit(small_population, NoDefense(), attack, audit_size=6, members=20, seed=0)
