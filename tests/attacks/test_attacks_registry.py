"""Registry: names, requirements, `all` semantics and unknown names."""

from __future__ import annotations

import pytest

from bngp.attacks import applicable_attacks, attack_requirements, available_attacks, get_attack, parse_attack_names
from bngp.attacks.base import AttackKnowledge
from bngp.errors import InputError, UnknownNameError
from bngp.release.noise_law import NoiseLaw

EXPECTED = {
    "lrt": {"reference_frequencies", "n_members"},
    "adaptive-lrt": {"reference_frequencies", "reference_genotypes", "population", "simulate"},
    "optimal-lrt": {"reference_frequencies", "n_members", "noise_law"},
    "score": {"reference_frequencies", "n_members"},
    "homer": {"reference_frequencies", "n_members"},
    "tree": {"population", "simulate", "reference_frequencies"},
    "svm": {"population", "simulate", "reference_frequencies"},
    "linear": {"population", "simulate"},
    "reconstruction": {"population", "n_members"},
    "reconstruction-l1": {"population", "n_members"},
}


def test_registered_names_and_requirements() -> None:
    assert [name for name in available_attacks() if name in EXPECTED] == list(EXPECTED)
    for name, fields in EXPECTED.items():
        assert attack_requirements(name) == fields
        attack = get_attack(name)
        assert attack.name == name
        assert attack.knowledge_statement
        assert set(attack.requires) <= set(AttackKnowledge().__dataclass_fields__)


def test_applicable_attacks_follow_the_knowledge(small_world) -> None:
    public = AttackKnowledge(reference_frequencies=small_world.population.reference_frequencies, n_members=10)
    assert applicable_attacks(public) == ["lrt", "score", "homer"]
    with_law = AttackKnowledge(
        reference_frequencies=small_world.population.reference_frequencies, n_members=10, noise_law=NoiseLaw("none")
    )
    assert "optimal-lrt" in applicable_attacks(with_law)
    everything = small_world.knowledge()
    assert set(EXPECTED) <= set(applicable_attacks(everything))
    assert parse_attack_names("all", public) == ["lrt", "score", "homer"]
    assert parse_attack_names("svm, all", public) == ["svm", "lrt", "score", "homer"]
    assert parse_attack_names("all") == available_attacks()


def test_unknown_attack_name_is_a_one_line_input_error() -> None:
    with pytest.raises(UnknownNameError, match=r"unknown attack 'nope'; known: lrt,") as info:
        parse_attack_names("lrt,nope")
    assert isinstance(info.value, InputError) and "\n" not in str(info.value)
    with pytest.raises(UnknownNameError):
        get_attack("nope")
    with pytest.raises(UnknownNameError):
        attack_requirements("nope")
