"""PANORAMIA on genomic releases: generated non-members, baseline and release-aware MIA."""

import numpy as np
import pytest

from bngp.mechanism_audit import MIN_TRAINING_MEMBERS, audit_mechanism, genotype_features, panoramia_mechanism_audit
from bngp.data.genome import simulate_genome
from bngp.data.independent import simulate_independent
from bngp.errors import InputError
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


def test_no_defense_gives_a_positive_measurement(no_defense_audit):
    result = no_defense_audit
    record = result.method["panoramia"]
    assert result.mode == "panoramia"
    assert result.epsilon_lb > 0.3
    assert record["c_plus_epsilon_lb"] > record["c_lb"]
    assert result.epsilon_lb == pytest.approx(record["c_plus_epsilon_lb"] - record["c_lb"])
    assert not result.is_lower_bound and result.exceeds_claim is None
    assert "not a lower bound" in result.interpretation


def test_baseline_auc_is_reported_and_the_mia_uses_the_release(no_defense_audit):
    diagnostics = no_defense_audit.diagnostics
    assert diagnostics["baseline_auc"] < 0.75  # the copying model is hard to tell from real genomes
    assert diagnostics["attack_score_auc"] > 0.8
    assert diagnostics["mia_auc"] > diagnostics["baseline_auc"] + 0.1
    generator = diagnostics["generator"]
    assert generator["switch_rate"] == 1.0  # independent SNVs: linkage equilibrium is found
    closeness = diagnostics["generator_vs_training_members"]
    assert closeness["mean_abs_frequency_difference"] < 0.08


def test_design_keeps_audit_training_and_generator_data_apart(no_defense_audit):
    design = no_defense_audit.design
    assert design["audit_size"] == 100
    assert design["audit_real_members"] + design["audit_generated"] == 100
    assert 30 < design["audit_real_members"] < 70
    assert "50 members outside the audit set" in design["classifier_training"]
    assert "250 population individuals outside the dataset" in design["generator_panel"]


def test_noise_lowers_the_measurement(population, no_defense_audit):
    defense = parse_defense_spec("laplace:epsilon=1", DefenseContext(population, MEMBERS))
    result = panoramia_mechanism_audit(population, defense, "score", audit_size=100, members=MEMBERS, seed=1)
    assert result.claimed_epsilon == 1.0
    assert result.diagnostics["attack_score_auc"] < 0.65
    assert result.epsilon_lb < no_defense_audit.epsilon_lb
    # The baseline never sees the release: same seed, same baseline.
    assert result.method["panoramia"]["c_lb"] == no_defense_audit.method["panoramia"]["c_lb"]


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


def test_an_attack_limited_to_the_known_population_is_refused_clearly(small_population):
    from bngp.attacks.registry import get_attack
    from bngp.attacks.training import AttackerTrainingConfig

    attack = get_attack("bayesian", config=AttackerTrainingConfig(steps=5))
    with pytest.raises(InputError, match="PANORAMIA scores generated individuals, which attack `bayesian` cannot"):
        panoramia_mechanism_audit(small_population, NoDefense(), attack, audit_size=6, members=20, seed=0)
