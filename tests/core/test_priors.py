import numpy as np
import pytest
import torch

from bngp.data.priors import BernoulliPrior, UniformSubsetPrior, prior_from_description
from bngp.errors import InputError


def test_uniform_subset_has_exactly_n_members_and_uniform_marginals():
    prior = UniformSubsetPrior(50, 20)
    b = prior.sample(4000, np.random.default_rng(0))
    assert b.shape == (4000, 50)
    assert np.all(b.sum(1) == 20)
    # each marginal is 0.4; 5 standard errors
    assert np.max(np.abs(b.mean(0) - 0.4)) < 5 * np.sqrt(0.24 / 4000)
    t = prior.sample_torch(4000, torch.Generator().manual_seed(0))
    assert torch.all(t.sum(1) == 20)
    assert float((t.mean(0) - 0.4).abs().max()) < 5 * np.sqrt(0.24 / 4000)


@pytest.mark.parametrize("k, n", [(800, 400), (200, 100), (1000, 10), (50, 49)])
def test_uniform_subset_draws_the_sorted_top_k_set_of_its_keys(k, n):
    """Reference: the n largest of the same uniform keys by a sorted top-k (the draws before the
    unsorted one; torch picks the set by selection, by nth_element when n * 64 > k, else by a
    partial sort, and only orders it when asked), so the memberships are the same draws."""
    draws = UniformSubsetPrior(k, n).sample_torch(3000, torch.Generator().manual_seed(7))
    keys = torch.rand((3000, k), generator=torch.Generator().manual_seed(7))
    reference = torch.zeros((3000, k)).scatter_(1, torch.topk(keys, n, dim=1).indices, 1.0)
    assert torch.equal(draws, reference)


def test_bernoulli_prior_marginals():
    theta = np.linspace(0.1, 0.9, 9)
    prior = BernoulliPrior(theta)
    b = prior.sample(20000, np.random.default_rng(1))
    assert np.max(np.abs(b.mean(0) - theta)) < 5 * np.sqrt(0.25 / 20000)
    assert np.allclose(prior.marginals, theta)


@pytest.mark.parametrize("theta", [[0.0, 0.5], [0.5, 1.0], [np.nan], [1.2]])
def test_bernoulli_rejects_probabilities_outside_open_interval(theta):
    with pytest.raises(InputError):
        BernoulliPrior(theta)


@pytest.mark.parametrize("k, n", [(10, 0), (10, 11)])
def test_uniform_subset_rejects_bad_n(k, n):
    with pytest.raises(InputError):
        UniformSubsetPrior(k, n)


def test_description_round_trip():
    for prior in (UniformSubsetPrior(10, 3), BernoulliPrior([0.2, 0.3])):
        assert prior_from_description(prior.describe()) == prior
