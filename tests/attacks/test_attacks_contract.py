"""Contract shared by every attack of this package: shapes, orientation record, torch form, determinism."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from bngp.attacks import get_attack

#: every attack of this package with options that keep its fit fast on the small world.
FAST_OPTIONS = {
    "lrt": {},
    "adaptive-lrt": {},
    "optimal-lrt": {},
    "score": {},
    "homer": {},
    "tree": {"n_shadow_releases": 10},
    "svm": {"n_shadow_releases": 10, "max_pairs": 300},
    "linear": {"n_shadow_releases": 60},
    "reconstruction": {},
    "reconstruction-l1": {"max_iterations": 100},
}


@pytest.fixture(scope="module", params=list(FAST_OPTIONS))
def fitted(request, small_world):
    name = request.param
    attack = get_attack(name, **FAST_OPTIONS[name])
    assert attack.fit(small_world.knowledge(laplace_scale=0.02), seed=3) is attack
    return attack


def test_scores_shape_and_dtype(fitted, small_world) -> None:
    releases, _ = small_world.releases(4, seed=1, laplace_scale=0.02)
    targets = small_world.population.genotypes
    scores = fitted.score(targets, releases)
    assert scores.shape == (4, 40) and scores.dtype == np.float64 and np.all(np.isfinite(scores))
    single = fitted.score(targets[:3], releases[0])
    np.testing.assert_allclose(single, scores[:1, :3], rtol=1e-10, atol=1e-10)
    order = np.random.default_rng(0).permutation(40)
    np.testing.assert_allclose(fitted.score(targets[order], releases), scores[:, order], rtol=1e-10, atol=1e-10)


def test_orientation_record(fitted) -> None:
    assert fitted.orientation_ in (1, -1)
    assert isinstance(fitted.threshold_, float)
    assert 0.0 <= fitted.shadow_auc_ <= 1.0
    assert (fitted.orientation_note_ is None) == (fitted.orientation_ == 1)
    description = fitted.describe()
    assert description["name"] == fitted.name and description["knowledge"] == fitted.knowledge_statement
    assert set(description) >= {"requires", "orientation", "threshold", "orientation_note", "shadow_auc"}


def test_torch_form(fitted, small_world) -> None:
    releases, _ = small_world.releases(2, seed=2, laplace_scale=0.02)
    targets = small_world.population.genotypes
    if not fitted.differentiable:
        with pytest.raises(Exception, match="no differentiable"):
            fitted.score_torch(torch.from_numpy(targets), torch.from_numpy(releases))
        return
    x = torch.tensor(releases, requires_grad=True)
    scores = fitted.score_torch(torch.from_numpy(targets), x)
    np.testing.assert_allclose(scores.detach().numpy(), fitted.score(targets, releases), rtol=1e-9, atol=1e-9)
    scores.sum().backward()
    assert torch.all(torch.isfinite(x.grad)) and float(x.grad.abs().sum()) > 0


def test_fit_is_deterministic_given_the_seed(fitted, small_world) -> None:
    again = get_attack(fitted.name, **FAST_OPTIONS[fitted.name]).fit(small_world.knowledge(laplace_scale=0.02), seed=3)
    releases, _ = small_world.releases(2, seed=4, laplace_scale=0.02)
    targets = small_world.population.genotypes
    np.testing.assert_allclose(again.score(targets, releases), fitted.score(targets, releases), rtol=1e-12)
    assert again.threshold_ == fitted.threshold_
