"""Every public entry point that takes a seed accepts an int, None or a numpy Generator (bngp.rng):
a Generator gives the same result from the same state, and anything else is a typed InputError
naming `seed`."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import bngp
from bngp.attacks.network import AttackerSpec
from bngp.attacks.registry import get_attack
from bngp.attacks.training import AttackerTrainingConfig, train_attacker
from bngp.data.priors import UniformSubsetPrior
from bngp.data.vcf import write_vcf
from bngp.defenses.base import NoDefense
from bngp.defenses.dp import LaplaceDefense
from bngp.errors import InputError
from bngp.game import Game, GameConfig
from bngp.game.best_response import best_response_loss
from bngp.references import linear_attack_score, rank_references
from bngp.rng import resolve_seed
from bngp.defenses.matched_run import matched_to_run
from bngp.defenses.registry import DefenseContext

MEMBERS = 20


def _game(population) -> Game:
    return Game(population, UniformSubsetPrior(population.n_individuals, MEMBERS), GameConfig(steps=1, seed=0))


def _knowledge(population):
    return bngp.attack_knowledge(population, UniformSubsetPrior(population.n_individuals, MEMBERS), NoDefense(), MEMBERS)


def _train_attacker(population, seed):
    game = _game(population)
    spec = AttackerSpec(population.n_attributes, population.n_individuals, init="reconstruction")
    attacker = train_attacker(game.release_sampler(0), spec, AttackerTrainingConfig(steps=1, validation_draws=4),
                              seed=seed, population=population.genotypes, n_members=MEMBERS, theta=game.theta)
    return torch.cat([p.detach().flatten() for p in attacker.parameters()])


#: name -> call(population, tmp_path, tiny_run, seed) returning what the seed determines.
ENTRY_POINTS = {
    "simulate_independent": lambda p, t, r, s: bngp.simulate_independent(10, 5, 20, seed=s).genotypes,
    "simulate_genome": lambda p, t, r, s: bngp.simulate_genome(10, 10, 20, seed=s, segment_length=200_000).metadata["seed"],
    "load_vcf": lambda p, t, r, s: bngp.load_vcf(write_vcf(p, t / "p.vcf"), reference_samples=0.5, min_maf=0, max_r2=1,
                                                 seed=s).metadata["seed"],
    "load_adult": lambda p, t, r, s: bngp.load_adult(30, 30, seed=s).ids,
    "load_digits_population": lambda p, t, r, s: bngp.load_digits_population(30, 30, seed=s).ids,
    "evaluate_defense": lambda p, t, r, s: bngp.evaluate_defense(
        p, UniformSubsetPrior(p.n_individuals, MEMBERS), LaplaceDefense(scale=0.5), "score", releases=2, seed=s,
        n_members=MEMBERS).seed,
    "GameConfig": lambda p, t, r, s: GameConfig(seed=s).seed,
    "Game.release_sampler": lambda p, t, r, s: _game(p).release_sampler(s)(2)[0],
    "train_attacker": lambda p, t, r, s: _train_attacker(p, s),
    "Attack.fit": lambda p, t, r, s: get_attack("adaptive-lrt").fit(_knowledge(p), seed=s).score(p.genotypes, p.genotypes[:2].mean(0)),
    "linear_attack_score": lambda p, t, r, s: linear_attack_score(LaplaceDefense(scale=0.5), p, MEMBERS, s, test_releases=4).auc,
    "rank_references": lambda p, t, r, s: rank_references(p, MEMBERS, "0.5x", seed=s, shrink_grid=(0.2,)).seed,
    "best_response_loss": lambda p, t, r, s: best_response_loss("score", p, UniformSubsetPrior(p.n_individuals, MEMBERS),
                                                                MEMBERS, seed=s, shadow_releases=4).temperature,
    "matched_to_run": lambda p, t, r, s: matched_to_run("laplace", str(r), DefenseContext(p, MEMBERS), draws=4,
                                                        seed=s)[1]["target_utility_loss"],
    "audit_mechanism": lambda p, t, r, s: bngp.audit_mechanism(p, LaplaceDefense(scale=0.5), "lrt", mode="one-run",
                                                              canaries=10, members=MEMBERS, seed=s).to_dict()["seed"],
}


def _same(a, b) -> bool:
    if isinstance(a, torch.Tensor):
        return torch.equal(a, b)
    return np.array_equal(np.asarray(a), np.asarray(b))


@pytest.mark.parametrize("name", sorted(ENTRY_POINTS))
def test_a_generator_seed_is_accepted_and_replays(name, small_population, tiny_run, tmp_path):
    call = ENTRY_POINTS[name]
    first = call(small_population, tmp_path, tiny_run, np.random.default_rng(7))
    again = call(small_population, tmp_path, tiny_run, np.random.default_rng(7))
    assert _same(first, again)


@pytest.mark.parametrize("name", sorted(ENTRY_POINTS))
@pytest.mark.parametrize("seed", ["7", 1.5, -1, True])
def test_a_seed_that_is_not_an_int_none_or_a_generator_is_an_input_error(name, seed, small_population, tiny_run,
                                                                          tmp_path):
    with pytest.raises(InputError, match="^`seed` must be a non-negative integer, None or a numpy Generator"):
        ENTRY_POINTS[name](small_population, tmp_path, tiny_run, seed)


def test_resolve_seed_draws_the_recorded_int_from_a_generator():
    generator = np.random.default_rng(3)
    expected = int(np.random.default_rng(3).integers(2**63))
    assert resolve_seed(generator) == expected
    assert resolve_seed(generator) != expected  # the Generator advanced
    assert resolve_seed(5) == 5 and 0 <= resolve_seed(None) < 2**32
