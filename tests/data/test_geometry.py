"""The candidates' row space (bngp.data.geometry.PopulationSpace) against direct linear algebra.

Known answers and their sources:

* the basis: orthonormal, of dimension numpy's ``matrix_rank`` of Zc = Z - 1 t^T (an SVD), and spanning
  exactly row(Zc): V V^T equals the projector Zc^+ Zc of ``np.linalg.pinv``;
* the projection fixes every f(D) = Z^T b / N (f(D) - t = Zc^T (b - theta) / N), enumerated over all
  C(7, 3) = 35 datasets of a tiny population;
* ``variances``: the eigenvalues of the exact covariance of f(D) over those 35 equally likely datasets;
* ``sufficient_statistic``: the slow reference Zc V diag(1 / w^2) V^T (x - t) formed from the dense
  genotypes, and the gradient in b of the Gaussian log-likelihood (torch autograd);
* the bit-packed population: the dense computation on the same data.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

import bngp.data.geometry as geometry
from bngp.data.geometry import PopulationSpace, shaping_applies
from bngp.data.independent import simulate_independent
from bngp.data.population import Population
from bngp.errors import InputError

TINY_K, TINY_Q, TINY_N = 7, 12, 3


def _population(genotypes: np.ndarray) -> Population:
    genotypes = np.asarray(genotypes, dtype=np.uint8)
    return Population(genotypes=genotypes, reference=genotypes[:2])


@pytest.fixture(scope="module")
def tiny() -> Population:
    """K = 7, |Q| = 12 (K - 1 < |Q|): every dataset of N = 3 can be enumerated (35)."""
    return _population(np.random.default_rng(0).random((TINY_K, TINY_Q)) < 0.4)


@pytest.fixture(scope="module")
def narrow() -> Population:
    """K = 40 < |Q| = 120: rank K - 1."""
    return simulate_independent(40, 10, 120, seed=11)


@pytest.fixture(scope="module")
def wide() -> Population:
    """K = 60 > |Q| = 40, one attribute constant: rank |Q| - 1 = 39, below K - 1."""
    return simulate_independent(60, 10, 40, seed=5)


def _centred(population: Population) -> np.ndarray:
    genotypes = np.asarray(population.genotypes, dtype=np.float64)
    return genotypes - genotypes.mean(axis=0)


def _all_statistics(population: Population, n_members: int) -> np.ndarray:
    """f(D) = Z^T b / N for every dataset of ``n_members`` (C(K, N) rows)."""
    genotypes = np.asarray(population.genotypes, dtype=np.float64)
    rows = []
    for members in itertools.combinations(range(population.n_individuals), n_members):
        b = np.zeros(population.n_individuals)
        b[list(members)] = 1.0
        rows.append(genotypes.T @ b / n_members)
    return np.array(rows)


@pytest.mark.parametrize("name", ["tiny", "narrow", "wide"])
def test_basis_is_orthonormal_of_the_rank_of_zc_and_spans_its_rows(name, request) -> None:
    """V^T V = I (1e-12); r = matrix_rank(Zc) (39 for the K = 40 and the K = 60 > |Q| population, whose
    Gram matrix has 21 zero eigenvalues that rounding must not turn into directions); Zc V V^T = Zc and
    V V^T = pinv(Zc) Zc (the orthogonal projector onto row(Zc)) to 1e-10; Zc V = U diag(s), U^T U = I."""
    population = request.getfixturevalue(name)
    n_members = max(1, population.n_individuals // 3)
    space = PopulationSpace.of(population, n_members)
    zc = _centred(population)
    basis = space.basis
    assert space.rank == np.linalg.matrix_rank(zc) == basis.shape[1]
    assert space.rank <= min(population.n_individuals - 1, population.n_attributes)
    np.testing.assert_allclose(basis.T @ basis, np.eye(space.rank), atol=1e-12)
    np.testing.assert_allclose(zc @ basis @ basis.T, zc, atol=1e-10)
    np.testing.assert_allclose(basis @ basis.T, np.linalg.pinv(zc) @ zc, atol=1e-10)
    np.testing.assert_allclose(zc @ basis, space.left * space.singular_values, atol=1e-10)
    np.testing.assert_allclose(space.left.T @ space.left, np.eye(space.rank), atol=1e-10)
    np.testing.assert_allclose(space.singular_values, np.linalg.svd(zc, compute_uv=False)[: space.rank], rtol=1e-10)
    assert np.all(np.diff(space.singular_values) <= 0)
    np.testing.assert_allclose(space.target, np.asarray(population.genotypes, dtype=np.float64).mean(axis=0),
                               atol=1e-15)
    np.testing.assert_allclose(space.leverages, np.sum(basis**2, axis=1), atol=1e-15)
    assert space.leverages.sum() == pytest.approx(space.rank, rel=1e-12)
    assert space.wasted_fraction == pytest.approx(1 - space.rank / population.n_attributes, abs=1e-15)


def test_projection_is_idempotent_symmetric_and_fixes_every_statistic(tiny) -> None:
    """P(x) = t + V V^T (x - t): P(P(x)) = P(x), <P(t + y1) - t, y2> = <y1, P(t + y2) - t>, P(f(D)) = f(D)
    for all 35 datasets (1e-12), a vector orthogonal to row(Zc) (scipy's null_space) goes to t, and
    embed(coordinates(x)) = P(x) - t."""
    from scipy.linalg import null_space

    space = PopulationSpace.of(tiny, TINY_N)
    rng = np.random.default_rng(1)
    x = rng.random((5, TINY_Q))
    projected = space.project(x)
    np.testing.assert_allclose(space.project(projected), projected, atol=1e-12)
    y1, y2 = rng.normal(size=(2, 4, TINY_Q))
    left = np.sum((space.project(space.target + y1) - space.target) * y2, axis=1)
    right = np.sum(y1 * (space.project(space.target + y2) - space.target), axis=1)
    np.testing.assert_allclose(left, right, atol=1e-12)
    statistics = _all_statistics(tiny, TINY_N)
    assert statistics.shape == (35, TINY_Q)
    np.testing.assert_allclose(space.project(statistics), statistics, atol=1e-12)
    outside = null_space(_centred(tiny)).T  # |Q| - r = 6 directions orthogonal to every centred candidate
    assert outside.shape == (TINY_Q - space.rank, TINY_Q)
    np.testing.assert_allclose(space.project(space.target + outside), np.tile(space.target, (outside.shape[0], 1)),
                               atol=1e-12)
    np.testing.assert_allclose(space.embed(space.coordinates(x)), projected - space.target, atol=1e-12)


def test_variances_are_the_eigenvalues_of_the_enumerated_covariance(tiny) -> None:
    """Over the 35 equally likely datasets of N = 3 of K = 7, Cov(f(D)) (np.cov, bias=True) equals
    V diag(variances) V^T to 1e-12, and its mean is t; the nonzero eigenvalues of that covariance
    (numpy eigvalsh) are ``variances``, which are c s^2 / N^2 with c = N (K - N) / (K (K - 1)) = 2/7."""
    space = PopulationSpace.of(tiny, TINY_N)
    statistics = _all_statistics(tiny, TINY_N)
    covariance = np.cov(statistics.T, bias=True)
    np.testing.assert_allclose(statistics.mean(axis=0), space.target, atol=1e-14)
    np.testing.assert_allclose(covariance, space.basis @ np.diag(space.variances) @ space.basis.T, atol=1e-12)
    eigenvalues = np.sort(np.linalg.eigvalsh(covariance))[::-1][: space.rank]
    np.testing.assert_allclose(eigenvalues, space.variances, atol=1e-12)
    assert space.sampling_factor == pytest.approx(2 / 7, rel=1e-15)
    np.testing.assert_allclose(space.variances, 2 / 7 * space.singular_values**2 / TINY_N**2, rtol=1e-14)


def _log_likelihood(space: PopulationSpace, genotypes: np.ndarray, x: torch.Tensor, b: torch.Tensor, shrink: float,
                    scales: np.ndarray) -> torch.Tensor:
    """log p(x | b) + const = -1/2 ||diag(1/w) V^T (x - t - M^T (b - theta))||^2, M = (1 - a) Zc / N, theta = N / K,
    formed densely (the Gaussian density of row-space noise V (w o g) in its coordinates)."""
    basis = torch.as_tensor(space.basis)
    target = torch.as_tensor(space.target)
    centred = torch.as_tensor(genotypes, dtype=torch.float64) - target
    theta = space.n_members / space.n_individuals
    mean = target + (1 - shrink) * (b - theta) @ centred / space.n_members
    whitened = ((x - mean) @ basis) / torch.as_tensor(scales)
    return -0.5 * (whitened**2).sum(dim=-1)


@pytest.mark.parametrize("name", ["narrow", "wide"])
def test_sufficient_statistic_is_the_slow_reference_and_the_likelihood_gradient(name, request) -> None:
    """For x = t + (1 - a) Zc^T (b - theta) / N + V (w o g) with a = 0.3 and w > 0 per direction:

    * the fast statistic (1 - a)/N U diag(s / w^2) V^T (x - t) equals the slow reference from the dense
      genotypes (``genotypes=``) to 1e-10 relative;
    * the gradient in b of log p(x | b) (torch autograd at a non-binary b) is T(x) - M Sigma^+ M^T (b - theta),
      Sigma^+ = V diag(1 / w^2) V^T (closed form), to 1e-9 relative;
    * for two memberships b1, b2 of N, log p(x | b1) - log p(x | b2) - (b1 - b2)^T T(x) is the same for 20
      releases x (the likelihood ratio is linear in the statistic), to 1e-9 of its scale.
    """
    population = request.getfixturevalue(name)
    genotypes = np.asarray(population.genotypes, dtype=np.float64)
    k, n_members, shrink = population.n_individuals, population.n_individuals // 3, 0.3
    space = PopulationSpace.of(population, n_members)
    rng = np.random.default_rng(2)
    scales = 0.01 * rng.uniform(0.5, 2.0, space.rank)
    b = np.zeros((2, k))
    for row in b:
        row[rng.choice(k, n_members, replace=False)] = 1.0
    theta = n_members / k
    centred = genotypes - space.target
    signal = space.target + (1 - shrink) * (b[0] - theta) @ centred / n_members
    x = signal + (rng.standard_normal((20, space.rank)) * scales) @ space.basis.T
    fast = space.sufficient_statistic(x, shrink, scales**2)
    slow = space.sufficient_statistic(x, shrink, scales**2, genotypes=genotypes)
    np.testing.assert_allclose(fast, slow, rtol=1e-10, atol=1e-10 * np.abs(slow).max())

    m = (1 - shrink) * centred / n_members
    precision = space.basis @ np.diag(1 / scales**2) @ space.basis.T
    point = torch.tensor(rng.uniform(0, 1, k), requires_grad=True)
    _log_likelihood(space, genotypes, torch.as_tensor(x[0]), point, shrink, scales).backward()
    expected = fast[0] - m @ precision @ m.T @ (point.detach().numpy() - theta)
    np.testing.assert_allclose(point.grad.numpy(), expected, rtol=1e-9, atol=1e-9 * np.abs(expected).max())

    xs = torch.as_tensor(x)
    ratio = (_log_likelihood(space, genotypes, xs, torch.as_tensor(b[0]), shrink, scales)
             - _log_likelihood(space, genotypes, xs, torch.as_tensor(b[1]), shrink, scales)).numpy()
    remainder = ratio - fast @ (b[0] - b[1])
    quadratic = 0.5 * ((b[1] - theta) @ m @ precision @ m.T @ (b[1] - theta)
                       - (b[0] - theta) @ m @ precision @ m.T @ (b[0] - theta))
    np.testing.assert_allclose(remainder, quadratic, rtol=1e-9, atol=1e-9 * np.abs(ratio).max())


def test_isotropic_statistic_reads_only_the_coordinates(narrow) -> None:
    """For isotropic noise s^2 I the statistic is M (x - t) / s^2 with M = (1 - a) Zc / N (closed form), for any
    x in R^|Q|, also off the affine hull: M (I - V V^T) = 0, so ``sufficient_statistic(x, a, s^2)`` equals it
    (1e-10 relative); noise variances <= 0 are refused."""
    n_members, shrink, variance = 13, 0.2, 0.02**2
    space = PopulationSpace.of(narrow, n_members)
    x = np.random.default_rng(3).random((6, narrow.n_attributes))
    m = (1 - shrink) * _centred(narrow) / n_members
    expected = (x - space.target) @ m.T / variance
    np.testing.assert_allclose(space.sufficient_statistic(x, shrink, variance), expected, rtol=1e-10,
                               atol=1e-10 * np.abs(expected).max())
    with pytest.raises(InputError, match="must be > 0"):
        space.sufficient_statistic(x, shrink, np.zeros(space.rank))


def test_centred_coordinates_are_the_coordinates_and_keep_the_last_rows(narrow) -> None:
    """centred_coordinates(x) = (x - t, V^T (x - t)), the latter equal to :meth:`coordinates` bit for bit; asked again
    for the same rows it reuses their coordinates (no product with the basis, counted), for other rows it forms
    them anew (its own space: the basis is swapped for a counting view)."""
    space = PopulationSpace.of(narrow, 13)
    rows = np.random.default_rng(4).random((5, narrow.n_attributes))
    centred, coordinates = space.centred_coordinates(rows)
    np.testing.assert_array_equal(centred, rows - space.target)
    np.testing.assert_array_equal(coordinates, space.coordinates(rows))
    products = []
    basis = space.basis

    class Counted(np.ndarray):
        def __rmatmul__(self, other):
            products.append(other.shape)
            return other @ np.asarray(self)

    object.__setattr__(space, "basis", basis.view(Counted))
    again = space.centred_coordinates(rows)
    assert again[1] is coordinates and not products
    other = rows[::-1].copy()
    np.testing.assert_allclose(space.centred_coordinates(other)[1], coordinates[::-1], rtol=1e-12, atol=1e-12)
    assert products == [other.shape]


def test_packed_and_blocked_populations_give_the_same_space(narrow, monkeypatch) -> None:
    """The bit-packed population, and the dense one formed 40 attributes at a time (three blocks), give the
    same target, singular values, projector V V^T and covariance eigenvalues as the dense one in one block
    (1e-12)."""
    dense = PopulationSpace.of(narrow, 13)
    packed = PopulationSpace.of(narrow.to_packed(), 13)
    monkeypatch.setattr(geometry, "_BLOCK", 40)
    blocked = PopulationSpace.of(narrow, 13)
    blocked_packed = PopulationSpace.of(narrow.to_packed(), 13)
    for other in (packed, blocked, blocked_packed):
        assert other.rank == dense.rank
        np.testing.assert_allclose(other.target, dense.target, atol=1e-15)
        np.testing.assert_allclose(other.singular_values, dense.singular_values, rtol=1e-12)
        np.testing.assert_allclose(other.basis @ other.basis.T, dense.basis @ dense.basis.T, atol=1e-12)
        np.testing.assert_allclose(other.variances, dense.variances, rtol=1e-12)


def test_bad_member_counts_are_refused(narrow) -> None:
    for n_members in (0, narrow.n_individuals + 1):
        with pytest.raises(InputError, match="number of members must be in 1..40"):
            PopulationSpace.of(narrow, n_members)


@pytest.mark.parametrize(("k", "width", "applies"), [(40, 120, True), (12, 12, True), (13, 12, False),
                                                     (60, 40, False)])
def test_shaping_applies_when_the_row_space_is_smaller_than_the_attributes(k, width, applies) -> None:
    """Shaping can save variance iff K - 1 < |Q| (rank(Zc) <= K - 1): true at K = |Q| (one direction saved),
    false from K = |Q| + 1 on."""
    population = _population(np.random.default_rng(k).random((k, width)) < 0.5)
    assert shaping_applies(population) is applies


@pytest.mark.parametrize("packed", [False, True])
def test_a_space_without_its_basis_applies_the_same_basis(narrow, packed) -> None:
    """Known answer: V^T y = S^-1 U^T Zc y and V c = Zc^T U S^-1 c (Zc = U S V^T), so a space that applies the basis
    through the candidates gives the held basis's products, to float64 rounding (float32 inputs: float32 rounding)."""
    population = narrow.to_packed() if packed else narrow
    held = PopulationSpace.of(population, 20, hold_basis=True)
    applied = PopulationSpace.of(population, 20, hold_basis=False)
    assert applied.basis is None and not applied.holds_basis and held.holds_basis
    assert applied.rank == held.rank and applied.same_as(held) and held.same_as(applied)
    np.testing.assert_allclose(applied.dense_basis(), held.basis, atol=1e-12)
    rng = np.random.default_rng(3)
    releases = rng.random((5, population.n_attributes))
    coordinates = rng.normal(size=(4, held.rank))
    np.testing.assert_allclose(applied.coordinates(releases), held.coordinates(releases), atol=1e-11)
    np.testing.assert_allclose(applied.embed(coordinates), held.embed(coordinates), atol=1e-12)
    np.testing.assert_allclose(applied.project(releases), held.project(releases), atol=1e-11)
    weights = (rng.random(population.n_attributes) < 0.5).astype(float)
    np.testing.assert_allclose(applied.weighted_coordinates(releases, weights),
                               held.weighted_coordinates(releases, weights), atol=1e-11)
    scales = rng.random(held.rank)
    np.testing.assert_allclose(applied.marginal_variances(scales), (held.basis**2) @ scales**2, atol=1e-12)
    np.testing.assert_allclose(applied.leverages, np.einsum("ji,ji->j", held.basis, held.basis), atol=1e-12)
    assert applied.leverages.sum() == pytest.approx(held.rank, rel=1e-10)
    np.testing.assert_allclose(applied.sufficient_statistic(releases, 0.2, 0.5),
                               held.sufficient_statistic(releases, 0.2, 0.5), atol=1e-9)
    single = torch.as_tensor(releases - held.target, dtype=torch.float32)
    read = applied.apply_transpose(single)
    assert read.dtype == torch.float32
    np.testing.assert_allclose(read.numpy(), held.coordinates(releases), atol=2e-5)
    formed = applied.apply(torch.as_tensor(coordinates, dtype=torch.float32))
    np.testing.assert_allclose(formed.numpy(), held.embed(coordinates), atol=2e-5)


def test_the_basis_is_held_up_to_its_size_limit(narrow, monkeypatch) -> None:
    """By default V is held while |Q| x min(K - 1, |Q|) <= HELD_BASIS_VALUES (here 120 x 39 = 4,680)."""
    monkeypatch.setattr(geometry, "HELD_BASIS_VALUES", 120 * 39)
    assert PopulationSpace.of(narrow, 20).holds_basis
    monkeypatch.setattr(geometry, "HELD_BASIS_VALUES", 120 * 39 - 1)
    space = PopulationSpace.of(narrow, 20)
    assert not space.holds_basis and space.genotypes is narrow.genotypes


def test_different_candidates_are_not_the_same_space(narrow, wide) -> None:
    other = simulate_independent(40, 10, 120, seed=12)
    assert not PopulationSpace.of(narrow, 20, hold_basis=False).same_as(PopulationSpace.of(other, 20, hold_basis=False))
    assert not PopulationSpace.of(narrow, 20).same_as(PopulationSpace.of(wide, 20))
