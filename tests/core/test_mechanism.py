import numpy as np
import pytest
import torch

from bngp.errors import InputError
from bngp.device import CHUNK_ELEMENTS
from bngp.release.composition import ComposedMechanism, pool_copies
from bngp.release.mechanism import SummaryStatistics, allele_frequencies, perturb
from bngp.defenses.base import NoDefense
from bngp.release.sampling import sample_releases


def test_allele_frequencies_are_member_means():
    rng = np.random.default_rng(0)
    z = rng.integers(0, 2, (12, 7))
    b = np.zeros((3, 12), dtype=np.float32)
    b[0, [0, 3, 5]] = 1
    b[1, :] = 1
    b[2, [11]] = 1
    x = allele_frequencies(torch.as_tensor(b), torch.as_tensor(z, dtype=torch.float32)).numpy()
    expected = np.stack([z[[0, 3, 5]].mean(0), z.mean(0), z[11]])
    assert np.allclose(x, expected, atol=1e-6)


def test_perturb_clips_and_is_differentiable():
    x_hat = torch.tensor([[0.1, 0.9, 0.5]])
    noise = torch.tensor([[-0.3, 0.3, 0.2]], requires_grad=True)
    x = perturb(x_hat, noise)
    assert torch.allclose(x, torch.tensor([[0.0, 1.0, 0.7]]))
    x.sum().backward()
    assert noise.grad.tolist() == [[0.0, 0.0, 1.0]]


def test_no_defense_release_equals_statistic(small_population):
    mech = SummaryStatistics(small_population.genotypes)
    b = np.zeros((2, small_population.n_individuals), dtype=np.float32)
    b[:, :10] = 1
    x = sample_releases(mech, NoDefense(), b, torch.Generator().manual_seed(0))
    assert np.allclose(x[0], small_population.genotypes[:10].mean(0), atol=1e-6)


def test_composition_concatenates_and_splits_noise(small_population):
    mech = SummaryStatistics(small_population.genotypes)
    composed = ComposedMechanism([mech, mech, mech])
    assert composed.n_outputs == 3 * mech.n_outputs
    b = torch.zeros((1, small_population.n_individuals))
    b[0, :5] = 1
    noise = torch.zeros((1, composed.n_outputs))
    noise[0, mech.n_outputs : 2 * mech.n_outputs] = 0.01
    x = composed.release(b, noise)
    x_hat = mech.statistic(b)
    assert torch.allclose(x[:, : mech.n_outputs], x_hat)
    assert torch.allclose(x[:, mech.n_outputs : 2 * mech.n_outputs], torch.clamp(x_hat + 0.01, 0, 1))
    with pytest.raises(InputError):
        composed.release(b, torch.zeros((1, mech.n_outputs)))
    with pytest.raises(InputError):
        ComposedMechanism([])


class _CountingStatistics(SummaryStatistics):
    """SummaryStatistics that counts how often f(D) is computed."""

    calls = 0

    def statistic(self, b):
        type(self).calls += 1
        return super().statistic(b)


def test_release_reuses_a_given_statistic_and_a_composition_computes_a_shared_part_once(small_population):
    mech = _CountingStatistics(small_population.genotypes)
    other = _CountingStatistics(small_population.genotypes)
    composed = ComposedMechanism([mech, mech, other])
    b = torch.zeros((2, small_population.n_individuals))
    b[0, :5] = 1
    b[1, 3:9] = 1
    noise = torch.linspace(-0.2, 0.2, 2 * composed.n_outputs).reshape(2, -1)
    _CountingStatistics.calls = 0
    x_hat = composed.statistic(b)
    assert _CountingStatistics.calls == 2  # `mech` twice in the composition, computed once; `other` once
    _CountingStatistics.calls = 0
    given = composed.release(b, noise, x_hat)
    assert _CountingStatistics.calls == 0
    # the same release as computing f(D) inside (reference: the statistic recomputed, then clip(f(D) + xi, 0, 1))
    assert torch.equal(given, composed.release(b, noise))
    assert torch.equal(given, perturb(x_hat, noise))
    single = mech.release(b, noise[:, : mech.n_outputs], x_hat[:, : mech.n_outputs])
    assert torch.equal(single, given[:, : mech.n_outputs])


def test_perturb_is_differentiable_in_the_statistic_too():
    # a noise that needs no gradient must not send a differentiable statistic down the in-place path
    x_hat = torch.tensor([[0.1, 0.9, 0.5]], requires_grad=True)
    x = perturb(x_hat, torch.tensor([[-0.3, 0.3, 0.2]]))
    x.sum().backward()
    assert x_hat.grad.tolist() == [[0.0, 0.0, 1.0]]


def test_pool_copies_known_answer_and_fixed_arithmetic():
    # exact in float32: 0.75 * 0.5 + 0.25 * 0.25 = 0.4375, 0.75 * 1 + 0.25 * 0 = 0.75
    releases = torch.tensor([[0.5, 1.0, 0.25, 0.0]])
    assert pool_copies(releases, (0.75, 0.25)).tolist() == [[0.4375, 0.75]]
    # the arithmetic is fixed (each w_b x_b rounded in float32, then added in copy order), so the
    # same bits whole, by rows and into `out`; not an einsum's (which a BLAS may fuse or reorder)
    x = torch.rand(50, 3 * 7, generator=torch.Generator().manual_seed(0))
    weights = (0.2, 0.5, 0.3)
    whole = pool_copies(x, weights)
    expected = (x[:, :7] * weights[0]).add_(x[:, 7:14] * weights[1]).add_(x[:, 14:] * weights[2])
    assert torch.equal(whole, expected)
    assert torch.equal(torch.cat([pool_copies(x[s:s + 9], weights) for s in range(0, 50, 9)]), whole)
    out = torch.empty(50, 7)
    assert pool_copies(x, weights, out=out) is out and torch.equal(out, whole)
    assert pool_copies(x.double(), weights).dtype == torch.float64


def test_pool_copies_rejects_a_width_that_is_not_the_copies():
    with pytest.raises(InputError, match="multiple of 3"):
        pool_copies(torch.zeros(2, 10), (0.2, 0.5, 0.3))
    with pytest.raises(InputError, match="one weight per copy, got none"):
        pool_copies(torch.zeros(2, 10), ())


@pytest.mark.parametrize("rows,individuals,outputs", [(1, 1, 1), (7, 13, 11), (300, 600, 40),
                                                      (40, 9, CHUNK_ELEMENTS // 7 + 3)])  # chunks of 6 rows, a ragged last one
def test_int8_counts_give_the_float32_statistic_bit_for_bit(rows, individuals, outputs, monkeypatch):
    """Known answer: with 0/1 genotypes, f(D) from int8 counts (int32 sums) is the float32
    product's b Z / sum(b) bit for bit, for 0/1 memberships (counts past 256, bfloat16's exact
    range) and any integer ones; fractional or differentiable memberships take the float32 path."""
    rng = torch.Generator().manual_seed(individuals)
    genotypes = (torch.rand(individuals, outputs, generator=rng) < 0.7).float()
    mechanism = SummaryStatistics(genotypes)
    assert mechanism._binary is not None and mechanism._binary.dtype == torch.int8
    members = (torch.rand(rows, individuals, generator=rng) < 0.8).float()
    products = []
    int_mm = torch._int_mm
    monkeypatch.setattr(torch, "_int_mm", lambda a, b: products.append(a.shape) or int_mm(a, b))
    integers = torch.randint(-128, 128, (rows, individuals), generator=rng).float()
    for b in (members, integers):
        expected = (b @ genotypes) / b.sum(dim=1, keepdim=True).clamp_min(1.0)
        assert torch.equal(mechanism.statistic(b), expected)
    assert products == [(rows, individuals)] * 2  # both by int8 counts
    if individuals > 300:
        assert float((members @ genotypes).max()) > 256
    fractional = members * 0.5
    torch.testing.assert_close(mechanism.statistic(fractional), allele_frequencies(fractional, genotypes))
    relaxed = members.clone().requires_grad_(True)
    mechanism.statistic(relaxed).sum().backward()
    assert relaxed.grad is not None
    assert len(products) == 2
    assert SummaryStatistics(genotypes + 2)._binary is None  # not 0/1: the float32 product


def test_inverse_variance_weights_are_the_normalised_precisions():
    """w_b = s_b^-2 / sum_c s_c^-2 (App. L.6): sigmas 1 and 2 give precisions 1 and 1/4, so 0.8 and 0.2."""
    from bngp.release.composition import inverse_variance_weights

    assert inverse_variance_weights([1.0, 2.0]) == pytest.approx((0.8, 0.2), abs=1e-15)
    assert inverse_variance_weights([0.3]) == (1.0,)
    for bad in ([], [0.0], [float("inf")], [-1.0]):
        with pytest.raises(InputError):
            inverse_variance_weights(bad)


def test_copy_blocks_views_each_copy_and_copy_count_counts_parts():
    from bngp.release.composition import copy_blocks, copy_count

    x = torch.arange(12.0).reshape(2, 6)
    blocks = copy_blocks(x, 3)
    assert blocks.shape == (2, 3, 2) and torch.equal(blocks[:, 1], x[:, 2:4])
    with pytest.raises(InputError):
        copy_blocks(x, 4)
    genotypes = torch.randint(0, 2, (5, 3)).float()
    statistic = SummaryStatistics(genotypes)
    assert copy_count(statistic) == 1 and copy_count(ComposedMechanism([statistic] * 3)) == 3
