"""Empirical DP checks: on neighbouring datasets, no output event's probability exceeds
e^eps times its probability on the neighbour, plus delta, beyond sampling error.

Each test draws N releases from D and from its neighbour D' (fixed seeds), evaluates a family
of events and asserts  P_D(E) - e^eps P_D'(E) - delta <= Z_TOL * se  in both directions, with
se = sqrt(P_D(1 - P_D)/N + e^(2 eps) P_D'(1 - P_D')/N).  The neighbours are chosen to attain
the sensitivity, so each test also checks tightness: the best event reaches the bound (its
log-ratio is close to eps, or, for the Gaussian, its excess is close to delta), which a
mis-calibration by a constant factor would fail.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from bngp.data.population import Population
from bngp.release.mechanism import SummaryStatistics
from bngp.defenses import DefenseContext, parse_defense_spec
from bngp.release.sampling import sample_releases

torch.set_num_threads(1)

#: allowed excess, in standard errors, for each of the ~100 events checked per test.
Z_TOL = 4.0
N_DRAWS = 200_000


def neighbours_replace(n_members: int, n_attributes: int, seed: int) -> tuple[Population, np.ndarray, np.ndarray]:
    """D and D' of n members differing in one member whose records differ in every attribute,
    so x_hat_D - x_hat_D' = (1/n, ..., 1/n) attains the paper sensitivity."""
    rng = np.random.default_rng(seed)
    genotypes = (rng.random((n_members + 1, n_attributes)) < 0.5).astype(np.uint8)
    genotypes[0], genotypes[1] = 1, 0
    population = Population(genotypes=genotypes, reference=genotypes[:2])
    b_d = np.ones(n_members + 1, dtype=np.float32)
    b_d[1] = 0
    b_neighbour = np.ones(n_members + 1, dtype=np.float32)
    b_neighbour[0] = 0
    return population, b_d, b_neighbour


def draw(population: Population, spec: str, n_members: int, b: np.ndarray, seed: int, n_draws: int = N_DRAWS):
    defense = parse_defense_spec(spec, DefenseContext(population, n_members))
    generator = torch.Generator().manual_seed(seed)
    batch = np.repeat(b[None, :], n_draws, axis=0)
    return defense, sample_releases(SummaryStatistics(population.genotypes), defense, batch, generator)


def continuous_events(x: np.ndarray, centre: np.ndarray, spread: float) -> np.ndarray:
    """(N, E) indicators: per-coordinate half-lines, orthants and half-spaces of the sum,
    at thresholds centre + c * spread for c on a grid."""
    offsets = np.linspace(-3.0, 4.0, 15) * spread
    columns = []
    total = x.sum(axis=1)
    for c in offsets:
        t = centre + c
        columns += [x[:, 0] >= t[0], x[:, 0] <= t[0], (x >= t).all(axis=1), (x <= t).all(axis=1)]
        columns += [total >= t.sum(), total <= t.sum()]
    return np.stack(columns, axis=1)


def check_events(events_d: np.ndarray, events_neighbour: np.ndarray, epsilon: float, delta: float) -> dict:
    """Assert the DP inequality on every event both ways; return the largest log-ratio among
    events of probability >= 0.01 and the largest excess P - e^eps P' (without delta)."""
    n = events_d.shape[0]
    p, q = events_d.mean(axis=0), events_neighbour.mean(axis=0)
    factor = math.exp(epsilon)
    worst_ratio, worst_excess = -np.inf, -np.inf
    for a, c in ((p, q), (q, p)):
        se = np.sqrt(a * (1 - a) / n + factor**2 * c * (1 - c) / n)
        excess = a - factor * c
        bad = excess - delta > Z_TOL * se
        assert not bad.any(), f"event {np.flatnonzero(bad)[0]}: {a[bad][0]:.5f} vs e^eps * {c[bad][0]:.5f} + {delta}"
        mass = (a >= 0.01) & (c >= 0.01)
        worst_ratio = max(worst_ratio, float(np.log(a[mass] / c[mass]).max()))
        worst_excess = max(worst_excess, float(excess.max()))
    return {"max_log_ratio": worst_ratio, "max_excess": worst_excess}


@pytest.mark.parametrize(
    ("spec", "spread"),
    [("laplace:epsilon=1", 3 / 50), ("linf:epsilon=1", 4 / 50)],
)
def test_pure_dp_mechanisms_replace(spec: str, spread: float) -> None:
    n_members, epsilon = 50, 1.0
    population, b_d, b_neighbour = neighbours_replace(n_members, 3, seed=11)
    _, x_d = draw(population, spec, n_members, b_d, seed=1)
    _, x_neighbour = draw(population, spec, n_members, b_neighbour, seed=2)
    centre = population.genotypes[b_neighbour > 0].mean(axis=0)
    stats = check_events(
        continuous_events(x_d, centre, spread), continuous_events(x_neighbour, centre, spread), epsilon, 0.0
    )
    # the orthant {x >= mean of D} has ratio exactly e^eps for both mechanisms
    assert stats["max_log_ratio"] == pytest.approx(epsilon, abs=0.06)


def test_laplace_add_remove_population_sensitivity() -> None:
    """D = {all-ones member} + (n - 1) all-zero members, D' = D minus that member: the change is
    1/n per attribute, the population bound of `sensitivity=add-remove` (H = 3, l1 = 3/n)."""
    n_members, n_attributes, epsilon = 50, 3, 1.0
    genotypes = np.zeros((n_members + 1, n_attributes), dtype=np.uint8)
    genotypes[0] = 1
    population = Population(genotypes=genotypes, reference=genotypes[:2])
    b_d = np.ones(n_members + 1, dtype=np.float32)
    b_d[-1] = 0
    b_neighbour = b_d.copy()
    b_neighbour[0] = 0
    spec = "laplace:epsilon=1,sensitivity=add-remove"
    defense, x_d = draw(population, spec, n_members, b_d, seed=3)
    _, x_neighbour = draw(population, spec, n_members, b_neighbour, seed=4)
    assert defense.guarantee.neighbouring == "add-remove"
    assert defense.guarantee.sensitivity == pytest.approx(n_attributes / n_members)
    centre = np.zeros(n_attributes)
    stats = check_events(
        continuous_events(x_d, centre, 3 / 50), continuous_events(x_neighbour, centre, 3 / 50), epsilon, 0.0
    )
    assert stats["max_log_ratio"] == pytest.approx(epsilon, abs=0.06)


def test_gaussian_approximate_dp_is_tight() -> None:
    """Events {<x - mean_D', 1/sqrt(Q)> >= t}: max_t P_D - e^eps P_D' is the Balle & Wang delta."""
    n_members, n_attributes, epsilon, delta = 50, 2, 1.0, 0.01
    population, b_d, b_neighbour = neighbours_replace(n_members, n_attributes, seed=12)
    spec = f"gaussian:epsilon={epsilon},delta={delta}"
    defense, x_d = draw(population, spec, n_members, b_d, seed=5)
    _, x_neighbour = draw(population, spec, n_members, b_neighbour, seed=6)
    sigma = defense.noise_law.scale
    centre = population.genotypes[b_neighbour > 0].mean(axis=0)
    thresholds = np.linspace(-4.0, 6.0, 81) * sigma

    def events(x: np.ndarray) -> np.ndarray:
        projection = ((x - centre) @ np.ones(n_attributes) / math.sqrt(n_attributes))[:, None]
        return np.concatenate(
            [projection >= thresholds, projection <= thresholds, continuous_events(x, centre, sigma)], axis=1
        )

    stats = check_events(events(x_d), events(x_neighbour), epsilon, delta)
    assert stats["max_excess"] == pytest.approx(delta, abs=0.003)


def rr_outcome_indicators(x_d: np.ndarray, x_neighbour: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(N, n_outcomes) one-hot indicators of every distinct release vector, under D and D'."""
    _, inverse = np.unique(np.round(np.concatenate([x_d, x_neighbour]), 9), axis=0, return_inverse=True)
    one_hot = np.eye(int(inverse.max()) + 1, dtype=bool)[inverse.ravel()]
    return one_hot[: x_d.shape[0]], one_hot[x_d.shape[0] :]


@pytest.mark.parametrize(("n_members", "sensitivity"), [(1, "paper"), (3, "replace")])
def test_randomized_response_every_outcome(n_members: int, sensitivity: str) -> None:
    """Pure DP on a discrete release: every atom's ratio is checked (unions cannot do worse).
    With one member the release reveals the randomized record, whose ratio is exactly
    ((1 - p)/p)^Q = e^(Q eps_bit)."""
    n_attributes, eps_bit = 2, 0.5
    population, b_d, b_neighbour = neighbours_replace(n_members, n_attributes, seed=13)
    spec = f"rr:epsilon={eps_bit},sensitivity={sensitivity}"
    defense, x_d = draw(population, spec, n_members, b_d, seed=7)
    _, x_neighbour = draw(population, spec, n_members, b_neighbour, seed=8)
    epsilon = defense.guarantee.epsilon
    assert epsilon == pytest.approx(n_attributes * eps_bit)
    stats = check_events(*rr_outcome_indicators(x_d, x_neighbour), epsilon, 0.0)
    if n_members == 1:
        assert stats["max_log_ratio"] == pytest.approx(epsilon, abs=0.06)
