"""Bad input: one-line InputError / DataFormatError (the CLI turns them into exit code 2)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from bngp.attacks import get_attack
from bngp.attacks.base import AttackKnowledge
from bngp.errors import DataFormatError, InputError


@pytest.fixture(scope="module")
def fitted_lrt(small_world):
    return get_attack("lrt").fit(small_world.knowledge(), seed=0)


def _one_line(info: pytest.ExceptionInfo) -> None:
    assert "\n" not in str(info.value)


def test_targets_and_releases_with_different_snv_counts(small_world, fitted_lrt) -> None:
    targets = small_world.population.genotypes
    releases, _ = small_world.releases(2, seed=0)
    message = r"^`targets` must have 300 columns \(\|Q\| the attack was fitted on\), got 299\.$"
    with pytest.raises(InputError, match=message) as info:
        fitted_lrt.score(targets[:, :299], releases[:, :299])
    _one_line(info)
    with pytest.raises(InputError, match=r"^`releases` must have 300 columns \(\|Q\| of the targets\), got 299\.$"):
        fitted_lrt.score(targets, releases[:, :299])
    with pytest.raises(InputError, match=r"`releases` must have 300 columns"):
        fitted_lrt.score_torch(torch.from_numpy(targets), torch.from_numpy(releases[:, :299]))


def test_frequencies_outside_unit_interval(small_world, fitted_lrt) -> None:
    releases, _ = small_world.releases(2, seed=0)
    releases[1, 5] = 1.2
    with pytest.raises(DataFormatError, match=r"^`releases` must be frequencies in \[0, 1\], found 1\.2\.$"):
        fitted_lrt.score(small_world.population.genotypes, releases)
    bad_reference = small_world.population.reference_frequencies.copy()
    bad_reference[0] = -0.5
    with pytest.raises(DataFormatError, match=r"`reference_frequencies` must lie in \[0, 1\], found -0\.5"):
        get_attack("score").fit(AttackKnowledge(reference_frequencies=bad_reference, n_members=10))


def test_empty_reference_panel(small_world) -> None:
    knowledge = small_world.knowledge()
    empty = AttackKnowledge(
        reference_frequencies=knowledge.reference_frequencies,
        reference_genotypes=np.zeros((0, 300), dtype=np.uint8),
        population=knowledge.population,
        simulate=knowledge.simulate,
    )
    message = r"^`reference_genotypes` must contain at least one individual, got an empty panel\.$"
    with pytest.raises(DataFormatError, match=message):
        get_attack("adaptive-lrt").fit(empty)


def test_missing_knowledge_and_unfitted_attack(small_world) -> None:
    public = AttackKnowledge(reference_frequencies=small_world.population.reference_frequencies)
    message = r"^attack `optimal-lrt` needs n_members, noise_law, which was not provided\.$"
    with pytest.raises(InputError, match=message):
        get_attack("optimal-lrt").fit(public)
    releases, _ = small_world.releases(1, seed=0)
    with pytest.raises(InputError, match=r"must be fitted before scoring"):
        get_attack("homer").score(small_world.population.genotypes, releases)
    with pytest.raises(InputError, match=r"must be fitted before scoring"):
        get_attack("tree").score(small_world.population.genotypes, releases)


def test_non_binary_targets_and_bad_options(small_world, fitted_lrt) -> None:
    targets = small_world.population.genotypes.astype(float)
    targets[3, 3] = 0.5
    releases, _ = small_world.releases(1, seed=0)
    with pytest.raises(DataFormatError, match=r"`targets` must be binary \(0/1\), found value 0\.5\."):
        fitted_lrt.score(targets, releases)
    with pytest.raises(InputError, match=r"`alpha` must be in \(0, 1\), got 1\.5\."):
        get_attack("lrt", alpha=1.5)
    with pytest.raises(InputError, match=r"`n_lowest` must be >= 1, got 0\."):
        get_attack("adaptive-lrt", n_lowest=0)


def test_simulator_returning_wrong_shapes(small_world) -> None:
    knowledge = small_world.knowledge()
    broken = AttackKnowledge(
        reference_frequencies=knowledge.reference_frequencies,
        population=knowledge.population,
        simulate=lambda n, seed: (np.full((n, 300), 0.5), np.zeros((n, 39))),
    )
    message = r"`simulate` must return memberships of shape \(5, 40\), got \(5, 39\)\."
    with pytest.raises(DataFormatError, match=message):
        get_attack("linear", n_shadow_releases=5, validation_releases=5).fit(broken)


def test_non_differentiable_attacks_say_so(small_world) -> None:
    attack = get_attack("tree", n_shadow_releases=5).fit(small_world.knowledge(), seed=0)
    with pytest.raises(InputError, match=r"attack `tree` has no differentiable \(torch\) form\."):
        attack.score_torch(torch.zeros((1, 300)), torch.zeros((1, 300)))
