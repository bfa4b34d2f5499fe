"""Sensitivity bounds: the paper's convention, and population bounds checked by brute force
over every neighbouring pair of small populations."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from bngp.data.population import Population
from bngp.errors import InputError
from bngp.defenses import max_pairwise_hamming, paper_sensitivity, population_sensitivity, resolve_sensitivity

NORM_ORDER = {"l1": 1, "l2": 2, "linf": np.inf}


def frequencies(genotypes: np.ndarray, members: tuple[int, ...]) -> np.ndarray:
    return genotypes[list(members)].mean(axis=0)


def small_population(seed: int, n_individuals: int = 7, n_attributes: int = 6) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (rng.random((n_individuals, n_attributes)) < 0.4).astype(np.uint8)


def test_paper_convention() -> None:
    assert paper_sensitivity("l1", 5000, 400).value == 12.5
    assert paper_sensitivity("l2", 5000, 400).value == pytest.approx(math.sqrt(5000) / 400)
    assert paper_sensitivity("linf", 5000, 400).value == 1 / 400
    assert paper_sensitivity("hamming", 5000, 400).value == 5000


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_max_pairwise_hamming_brute_force(seed: int) -> None:
    genotypes = small_population(seed, 9, 11)
    expected = max(int(np.abs(a.astype(int) - b).sum()) for a, b in itertools.combinations(genotypes, 2))
    assert max_pairwise_hamming(genotypes) == expected
    assert max_pairwise_hamming(genotypes, chunk_rows=2) == expected


@pytest.mark.parametrize("norm", ["l1", "l2", "linf"])
@pytest.mark.parametrize("seed", [3, 4])
def test_replace_bound_is_exact(norm: str, seed: int) -> None:
    genotypes = small_population(seed)
    n = 3
    worst = 0.0
    for members in itertools.combinations(range(len(genotypes)), n):
        outside = [k for k in range(len(genotypes)) if k not in members]
        for position, newcomer in itertools.product(range(n), outside):
            neighbour = members[:position] + (newcomer,) + members[position + 1 :]
            change = frequencies(genotypes, members) - frequencies(genotypes, neighbour)
            worst = max(worst, float(np.linalg.norm(change, ord=NORM_ORDER[norm])))
    assert population_sensitivity(norm, genotypes, n, "replace").value == pytest.approx(worst)


@pytest.mark.parametrize("norm", ["l1", "l2", "linf"])
@pytest.mark.parametrize("seed", [5, 6])
def test_add_remove_bound_holds(norm: str, seed: int) -> None:
    """Every removal from a dataset of m >= n members moves x_hat by at most the bound."""
    genotypes = small_population(seed)
    n = 3
    bound = population_sensitivity(norm, genotypes, n, "add-remove").value
    worst = 0.0
    for m in range(n, len(genotypes) + 1):
        for members in itertools.combinations(range(len(genotypes)), m):
            for removed in range(m):
                rest = members[:removed] + members[removed + 1 :]
                change = frequencies(genotypes, members) - frequencies(genotypes, rest)
                worst = max(worst, float(np.linalg.norm(change, ord=NORM_ORDER[norm])))
    assert worst <= bound + 1e-12
    # the population bound never exceeds the paper's
    assert bound <= paper_sensitivity(norm, genotypes.shape[1], n).value + 1e-12


def test_resolve_sensitivity_values() -> None:
    genotypes = np.array([[1, 1, 0, 0], [0, 1, 1, 0], [0, 0, 0, 0]], dtype=np.uint8)
    population = Population(genotypes=genotypes, reference=genotypes)
    assert resolve_sensitivity("paper", "l1", population, 2).value == 2.0
    replace = resolve_sensitivity("replace", "l1", population, 2)
    assert (replace.value, replace.neighbouring, replace.source) == (1.0, "replace", "population")
    assert resolve_sensitivity("replace", "hamming", population, 2).value == 2
    user = resolve_sensitivity("0.3", "l2", population, 2)
    assert (user.value, user.norm, user.neighbouring, user.source) == (0.3, "l2", None, "user")


@pytest.mark.parametrize(
    ("text", "norm", "n_members", "message"),
    [
        ("bogus", "l1", 2, "`sensitivity` must be one of paper, replace, add-remove or a number"),
        ("-1", "l1", 2, "`sensitivity` must be a finite number > 0"),
        ("add-remove", "hamming", 2, "no add-remove sensitivity"),
        ("add-remove", "l1", 1, "needs `n_members` >= 2"),
    ],
)
def test_resolve_sensitivity_errors(text: str, norm: str, n_members: int, message: str) -> None:
    genotypes = np.array([[1, 0], [0, 1]], dtype=np.uint8)
    population = Population(genotypes=genotypes, reference=genotypes)
    with pytest.raises(InputError, match=message):
        resolve_sensitivity(text, norm, population, n_members)


def test_identical_population_has_no_sensitivity() -> None:
    genotypes = np.ones((3, 2), dtype=np.uint8)
    with pytest.raises(InputError, match="identical"):
        population_sensitivity("l1", genotypes, 2, "replace")
