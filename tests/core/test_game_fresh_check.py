"""The fresh-attacker check of a data-independent defender: exact, without fitting."""

import numpy as np
import pytest

from bngp.data.priors import BernoulliPrior, UniformSubsetPrior
from bngp.game import Game, GameConfig


def _game(population, prior=None, **overrides):
    settings = dict(steps=4, attacker_steps=1, batch_size=8, eval_every=2, eval_batch=32, checkpoint_every=2,
                    fresh_check_steps=100, seed=3)
    settings.update(overrides)
    return Game(population, prior or UniformSubsetPrior(population.n_individuals, 20), GameConfig.from_flat(settings))


def test_the_initial_defender_is_data_independent_and_any_change_makes_it_dependent(small_population):
    """At initialisation (alpha = 1, zero output layer, sigma = 0) G releases f(theta); each of a
    shrinkage below 1, a non-zero output weight or bias, or noise breaks that."""
    game = _game(small_population)
    assert game.defender.is_data_independent()
    for change in (lambda d: d.shrink_weight.data.__setitem__(3, 0.999), lambda d: d.net[-1].weight.data.__setitem__((0, 0), 1e-6),
                   lambda d: d.net[-1].bias.data.__setitem__(0, 1e-6), lambda d: d.noise_scale.data.__setitem__(7, 1e-6)):
        changed = _game(small_population)
        change(changed.defender)
        assert not changed.defender.is_data_independent()


def test_a_data_independent_defender_is_checked_without_fitting(small_population, monkeypatch):
    """Its check reports AUC 0.5 and the prior's cross-entropy; the full check (fitted attackers)
    on the same defender reads no more than chance, within the spread of 512 releases."""
    game = _game(small_population)
    import bngp.game.checks as checks

    def no_training(*args, **kwargs):
        raise AssertionError("no attacker may be trained against a data-independent release")

    with monkeypatch.context() as patch:
        patch.setattr(checks, "train_attacker", no_training)
        patch.setattr(checks, "fit_converged_jointly", no_training)
        check = game.fresh_attacker_check(100, seed=5)
    assert check["data_independent"] and check["strongest_auc"] == check["auc"] == check["linear_auc"] == 0.5
    assert check["bgp_risk"] == pytest.approx(game.prior_entropy) and check["training_curve"] is None
    monkeypatch.setattr(game.checks, "_releases_data_independent", lambda x: False)
    fitted = game.fresh_attacker_check(100, seed=5)
    assert "data_independent" not in fitted
    assert fitted["linear_auc"] == fitted["whitened_auc"] == 0.5  # a constant release: the maps predict the prior
    assert abs(fitted["auc"] - 0.5) < 0.03  # a network on a constant input: chance, up to 512 releases' spread


def test_the_check_fits_attackers_when_anything_depends_on_the_data(small_population):
    """Individual priors (ranking by the prior alone beats 0.5) and composed fixed copies
    (they release f(D) + noise) keep the full check."""
    theta = np.linspace(0.2, 0.8, small_population.n_individuals)
    uneven = _game(small_population, BernoulliPrior(theta), fresh_check_steps=20)
    assert uneven.defender.is_data_independent()
    assert "data_independent" not in uneven.fresh_attacker_check(20, seed=5)
    composed = _game(small_population, fixed_gaussian_sigmas=(0.05,), fresh_check_steps=20)
    assert composed.defender.is_data_independent()
    assert "data_independent" not in composed.fresh_attacker_check(20, seed=5)


def test_a_run_that_keeps_the_initial_state_reports_it_and_a_moved_one_is_fitted(small_population, tmp_path):
    """kappa 1.5 keeps step 0 at this size (the state it starts from): its check is the exact one;
    without selection the delivered state is the last, moved away from f(theta), and is fitted."""
    kept = _game(small_population, kappa=1.5, steps=4).train(tmp_path / "kept", progress=False)
    assert kept.selected["step"] == 0 and kept.fresh_attacker_check["data_independent"]
    assert kept.strongest_fresh_auc == 0.5 and kept.exploitability.gap == 0.0
    moved = _game(small_population, kappa=1.5, steps=4, select_defender=False).train(tmp_path / "moved", progress=False)
    assert "data_independent" not in moved.fresh_attacker_check
    assert moved.fresh_attacker_check["training_curve"]["steps"][0] == 0
