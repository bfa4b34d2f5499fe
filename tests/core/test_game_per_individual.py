"""The BNGP game with the per-individual in-game attacker (``AttackerSettings.kind`` = "per-individual")."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from bngp.attacks.per_individual_network import PopulationBoundAttacker, prior_mean_frequencies
from bngp.data.bits import BitMatrix
from bngp.data.independent import simulate_independent
from bngp.data.priors import UniformSubsetPrior
from bngp.errors import InputError, TrainingError
from bngp.game import AttackerSettings, Game, GameConfig


def _game(population, **overrides) -> Game:
    settings = dict(steps=4, attacker_steps=2, batch_size=8, eval_every=2, eval_batch=32, checkpoint_every=2,
                    attacker_refit_every=2, fresh_check_steps=0, seed=7, attacker_kind="per-individual")
    settings.update(overrides)
    return Game(population, UniformSubsetPrior(population.n_individuals, population.n_individuals // 2),
                GameConfig.from_flat(settings))


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
    assert config["config"]["attacker"]["kind"] == "per-individual" and config["attacker"]["kind"] == "per-individual"
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
        AttackerSettings(kind="per-snp")
    assert "\n" not in str(raised.value)


def test_individual_batch_scores_a_subset_and_estimates_the_leakage_without_bias(small_population) -> None:
    """``individual_batch``: each update scores a uniform subset S of the K individuals.  The logits
    of S are the columns S of all K's (the gradient path against the blocked no-gradient one, to
    float32 rounding), and the subset leakage h(theta_S) - CEL_S averaged over 2,000 draws of
    |S| = 10 of K = 40 is the full leakage (raw, no recalibration: the average over all subsets of
    a mean over S is the mean over K).  Measured: full 0.6306 nats, mean of the draws 0.6307,
    spread 0.018 per draw, so a standard error of 0.0004; the tolerance is 5 standard errors."""
    game = _game(small_population, individual_batch=10, recalibrate=False, leakage="raw", shrink_init=0.0)
    game.refit_attacker()
    x, b = game.release_sampler(3)(16)
    with torch.no_grad():
        full = game.attacker(x)
    subset = game.players.draw_individuals()
    assert subset.shape == (10,) and torch.equal(subset, subset.sort().values)
    with torch.enable_grad():
        part = game.players.attack(x, subset)
    assert part.shape == (16, 10)
    torch.testing.assert_close(part.detach(), full[:, subset], rtol=1e-4, atol=1e-4)
    whole = float(game.players.leakage(full, b))
    draws = [float(game.players.leakage(full[:, s], b, s)) for s in (game.players.draw_individuals() for _ in range(2000))]
    assert abs(sum(draws) / len(draws) - whole) < 2e-3
    assert max(draws) - min(draws) > 0.05  # the subsets do differ


def test_training_with_an_individual_batch(small_population) -> None:
    """Game steps with |S| = 10 of K = 40 record finite losses and differ from steps on all K;
    |S| >= K draws no subset, so the run is the one without ``individual_batch``, step for step."""
    histories = {}
    for size in (None, 10, 40):
        game = _game(small_population, individual_batch=size)
        rows = [game.training_step() for _ in range(3)]
        assert all(torch.isfinite(torch.tensor(list(row.values()))).all() for row in rows)
        histories[size] = rows
    assert histories[40] == histories[None]
    assert histories[10] != histories[None]


def test_individual_batch_needs_the_per_individual_attacker() -> None:
    with pytest.raises(InputError, match="per-individual"):
        AttackerSettings(individual_batch=10)
    with pytest.raises(InputError, match=">= 1"):
        AttackerSettings(individual_batch=0, kind="per-individual")


def test_the_attacker_shares_the_mechanisms_genotypes(small_population) -> None:
    """One float32 copy of the population: H(x, d_k) binds the mechanism's own tensor, also when the
    population is bit-packed (unpacked once), and p = f(theta) read over SNV blocks of the bits is
    the dense computation's."""
    for population in (small_population, small_population.to_packed()):
        game = _game(population)
        assert game.attacker.genotypes.data_ptr() == game.mechanism.genotypes.data_ptr()
    wide = (np.random.default_rng(0).random((30, 20_000)) < 0.3).astype(np.uint8)  # three SNV blocks of 8192
    theta = np.linspace(0.1, 0.9, 30)
    dense = theta @ wide.astype(np.float64) / theta.sum()
    for matrix in (wide, BitMatrix.from_dense(wide)):
        np.testing.assert_allclose(prior_mean_frequencies(matrix, theta), dense, rtol=1e-12)
