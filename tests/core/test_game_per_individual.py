"""The BNGP game with the per-individual in-game attacker (GameConfig.attacker_kind = "per-individual")."""

from __future__ import annotations

import json

import pytest
import torch

from bngp.attacks.per_individual_network import PopulationBoundAttacker
from bngp.data.independent import simulate_independent
from bngp.data.priors import UniformSubsetPrior
from bngp.errors import InputError, TrainingError
from bngp.game import Game, GameConfig


def _game(population, **overrides) -> Game:
    settings = dict(steps=4, attacker_steps=2, batch_size=8, eval_every=2, eval_batch=32, checkpoint_every=2,
                    attacker_refit_every=2, fresh_check_steps=0, seed=7, attacker_kind="per-individual")
    settings.update(overrides)
    return Game(population, UniformSubsetPrior(population.n_individuals, population.n_individuals // 2),
                GameConfig(**settings))


def _weights(module: torch.nn.Module) -> torch.Tensor:
    return torch.cat([p.detach().flatten() for p in module.parameters()])


def test_the_in_game_attacker_is_shared_across_individuals(small_population) -> None:
    """H(x, d_k) bound to the population: (R, K) logits like the K-output attacker, and its weights
    (at |Q| = 120: phi 656 + per-SNV weights 2 * 120 + output MLP 769 + beta, b_0 2 = 1667) do
    not grow with K (40 and 80)."""
    game = _game(small_population)
    assert isinstance(game.attacker, PopulationBoundAttacker)
    assert sum(p.numel() for p in game.attacker.parameters()) == 1667
    wider = simulate_independent(80, 20, small_population.n_attributes, seed=1)
    assert sum(p.numel() for p in _game(wider).attacker.parameters()) == 1667
    x, _ = game.release_sampler(0)(5)
    assert game.attacker(x).shape == (5, small_population.n_individuals)
    assert "genotypes" not in game.attacker.state_dict()  # the population is bound, not saved


def test_refits_make_it_detect_a_leaking_release(small_population) -> None:
    """Against a defender that releases f(D) plus a little noise (no shrinkage), one closed-form
    refit makes the in-game attacker read members (AUC 0.997 measured), also on a composed release."""
    for sigmas in ((), (0.05,)):
        game = _game(small_population, shrink_init=0.0, fixed_gaussian_sigmas=sigmas)
        assert game.attacker.spec.n_blocks == len(sigmas) + 1
        game.refit_attacker()
        assert game.evaluate_heldout()["heldout_auc"] > 0.95


def test_the_linear_part_is_frozen_between_refits_unless_asked(small_population) -> None:
    game = _game(small_population, attacker_refit_every=100, shrink_init=0.0)
    game.training_step()  # step 0: refit, then Adam steps on the rest
    fitted = _weights_of(game.attacker.closed_form_parameters())
    learned = game.attacker.net.phi[0].weight.detach().clone()
    game.training_step()
    assert torch.equal(_weights_of(game.attacker.closed_form_parameters()), fitted)
    assert not torch.equal(game.attacker.net.phi[0].weight, learned)
    trained = _game(small_population, attacker_refit_every=100, shrink_init=0.0, train_refitted_head=True)
    trained.training_step()
    fitted = _weights_of(trained.attacker.closed_form_parameters())
    trained.training_step()
    assert not torch.equal(_weights_of(trained.attacker.closed_form_parameters()), fitted)


def _weights_of(parameters: list[torch.nn.Parameter]) -> torch.Tensor:
    return torch.cat([p.detach().flatten() for p in parameters])


def test_training_records_the_attacker_and_resumes_exactly(small_population, tmp_path) -> None:
    full = _game(small_population, steps=6, kappa=1.5)
    summary = full.train(tmp_path / "full", progress=False)
    assert summary.selected is not None  # defender selection runs on the per-individual refits
    config = json.loads((tmp_path / "full" / "config.json").read_text())
    assert config["config"]["attacker_kind"] == "per-individual" and config["attacker"]["kind"] == "per-individual"
    _game(small_population, steps=4, kappa=1.5).train(tmp_path / "split", progress=False)
    resumed = _game(small_population, steps=6, kappa=1.5)
    resumed.train(tmp_path / "split", resume=True, progress=False)
    assert resumed.step == 6
    assert torch.equal(_weights(full.defender), _weights(resumed.defender))
    assert torch.equal(_weights(full.attacker), _weights(resumed.attacker))
    with pytest.raises(TrainingError, match="attacker_kind"):
        _game(small_population, steps=8, kappa=1.5, attacker_kind="population").train(
            tmp_path / "split", resume=True, progress=False)


def test_unknown_attacker_kind_is_a_one_line_input_error() -> None:
    with pytest.raises(InputError, match="^`attacker_kind` must be one of population, per-individual") as raised:
        GameConfig(attacker_kind="per-snp")
    assert "\n" not in str(raised.value)
