import numpy as np
import torch
from torch import nn

from bngp.attacker_training import AttackerTrainingConfig, train_attacker
from bngp.data.priors import UniformSubsetPrior
from bngp.game import Game, GameConfig
from bngp.mechanism import SummaryStatistics
from bngp.metrics import auc
from bngp.players import AttackerSpec


def _sampler(population, noise: float, seed: int):
    prior = UniformSubsetPrior(population.n_individuals, 20)
    mechanism = SummaryStatistics(population.genotypes)
    generator = torch.Generator().manual_seed(seed)

    def sample(n):
        b = prior.sample_torch(n, generator)
        xi = noise * torch.randn((n, population.n_attributes), generator=generator)
        return mechanism.release(b, xi), b

    return sample


def test_shadow_ridge_warm_start_is_already_a_strong_attacker(small_population):
    sample = _sampler(small_population, 0.01, 0)
    spec = AttackerSpec(small_population.n_attributes, small_population.n_individuals, init="shadow-ridge")
    attacker = train_attacker(sample, spec, AttackerTrainingConfig(steps=0), seed=0,
                              theta=np.full(small_population.n_individuals, 0.5))
    x, b = _sampler(small_population, 0.01, 1)(64)
    with torch.no_grad():
        assert auc(attacker(x).numpy(), b.numpy()) > 0.95


def test_training_keeps_the_best_validated_state(small_population):
    """A learning rate that wrecks the network cannot make the result worse than the warm start."""
    theta = np.full(small_population.n_individuals, 0.5)
    spec = AttackerSpec(small_population.n_attributes, small_population.n_individuals, init="shadow-ridge")
    loss = nn.BCEWithLogitsLoss()
    x, b = _sampler(small_population, 0.05, 2)(256)
    start = train_attacker(_sampler(small_population, 0.05, 0), spec, AttackerTrainingConfig(steps=0), seed=0, theta=theta)
    wrecked = train_attacker(_sampler(small_population, 0.05, 0), spec,
                             AttackerTrainingConfig(steps=40, lr=5.0, validate_every=20), seed=0, theta=theta)
    with torch.no_grad():
        assert float(loss(wrecked(x), b)) <= float(loss(start(x), b)) + 0.02


def test_refit_makes_the_in_game_attacker_the_best_linear_attacker(small_population):
    config = GameConfig(steps=1, batch_size=8, eval_batch=64, fresh_check_steps=0, refit_releases=300, seed=0)
    game = Game(small_population, UniformSubsetPrior(small_population.n_individuals, 20), config)
    before = {name: p.detach().clone() for name, p in game.attacker.head.named_parameters()}
    game.training_step()  # step 0 refits first
    assert any(not torch.equal(before[name], p) for name, p in game.attacker.head.named_parameters())
    game.refit_attacker()
    assert all(p not in game.opt_a.state for p in game.attacker.refit_parameters())
    assert game.evaluate_heldout()["heldout_auc"] > 0.9  # the untrained defender adds little noise
