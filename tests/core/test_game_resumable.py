"""train_once: a finished run of the same game is reused, an interrupted one resumed exactly from
its checkpoint, anything else trained from the start (bngp.game.resumable)."""

from __future__ import annotations

import json

import pytest
import torch

from bngp.data.priors import UniformSubsetPrior
from bngp.errors import TrainingError
from bngp.game import CHECKPOINT_FILE, CONFIG_FILE, SUMMARY_FILE, Game, GameConfig, run_state, train_once
from bngp.run_dir import add_to_run, staging_dir, verify_run


def _game(population, members: int = 20, **overrides) -> Game:
    settings = dict(steps=6, attacker_steps=2, batch_size=8, eval_every=2, eval_batch=32, checkpoint_every=2,
                    fresh_check_steps=2, seed=7)
    settings.update(overrides)
    return Game(population, UniformSubsetPrior(population.n_individuals, members), GameConfig.from_flat(settings))


def _weights(game: Game) -> torch.Tensor:
    return torch.cat([p.detach().flatten() for p in game.defender.parameters()])


def _interrupt_at(monkeypatch, step: int) -> list[int]:
    """Make Game.training_step raise KeyboardInterrupt when it would run step ``step``; returns the
    list of steps run (appended to by every training step, also after the interruption is lifted)."""
    original = Game.training_step
    steps: list[int] = []

    def training_step(self):
        if self.step + 1 == step:
            raise KeyboardInterrupt
        steps.append(self.step + 1)
        return original(self)

    monkeypatch.setattr(Game, "training_step", training_step)
    return steps


def test_a_new_run_is_trained_and_then_reused_without_training(small_population, tmp_path, monkeypatch):
    run = tmp_path / "run"
    game = _game(small_population)
    assert run_state(game, run) == "new"
    seen = []
    summary, state = train_once(game, run, announce=seen.append)
    assert state == "new" and seen == ["new"] and summary.steps == 6
    manifest = verify_run(run)
    assert set(manifest["dropped"]) == {CHECKPOINT_FILE} and not (run / CHECKPOINT_FILE).exists()

    def refuse(*args, **kwargs):
        raise AssertionError("a finished run was trained again")

    monkeypatch.setattr(Game, "train", refuse)
    again, state = train_once(_game(small_population), run)
    assert state == "finished" and again == summary
    assert again == type(summary).load(run / SUMMARY_FILE)


def test_an_interrupted_run_resumes_to_the_uninterrupted_weights(small_population, tmp_path, monkeypatch):
    full = _game(small_population)
    train_once(full, tmp_path / "full")
    steps = _interrupt_at(monkeypatch, 5)
    with pytest.raises(KeyboardInterrupt):
        train_once(_game(small_population), tmp_path / "split")
    # interrupted before step 5: the checkpoint of step 4 is in the staging directory
    assert steps == [1, 2, 3, 4] and not (tmp_path / "split").exists()
    assert (staging_dir(tmp_path / "split") / CHECKPOINT_FILE).is_file()
    monkeypatch.undo()
    steps = _interrupt_at(monkeypatch, 0)  # never interrupts; records the steps run
    resumed = _game(small_population)
    assert run_state(resumed, tmp_path / "split") == "interrupted"
    summary, state = train_once(resumed, tmp_path / "split", keep_checkpoint=True)
    assert state == "interrupted" and steps == [5, 6] and summary.steps == 6
    assert torch.equal(_weights(resumed), _weights(full))
    assert (tmp_path / "split" / CHECKPOINT_FILE).is_file()  # kept on request


@pytest.mark.parametrize("change", [dict(kappa=3.0), dict(steps=8), dict(members=10)])
def test_a_finished_run_of_other_settings_or_prior_is_trained_again(small_population, tmp_path, change):
    run = tmp_path / "run"
    train_once(_game(small_population), run)
    other = _game(small_population, **change)
    assert run_state(other, run) == "new"
    summary, state = train_once(other, run)
    assert state == "new" and summary.steps == other.config.steps
    saved = json.loads((run / "config.json").read_text())
    assert saved["config"] == json.loads(json.dumps(other.config.to_dict())) and saved["config"]["version"] == 2
    assert saved["prior"]["members"] == other.prior.describe()["members"]


def test_a_checkpoint_of_other_settings_is_refused_in_one_line(small_population, tmp_path, monkeypatch):
    _interrupt_at(monkeypatch, 3)
    with pytest.raises(KeyboardInterrupt):
        train_once(_game(small_population), tmp_path / "run")
    monkeypatch.undo()
    with pytest.raises(TrainingError, match="different `kappa`") as caught:
        train_once(_game(small_population, kappa=3.0), tmp_path / "run")
    assert len(str(caught.value).splitlines()) == 1


def test_a_run_stored_with_the_flat_config_of_version_1_is_still_recognised(small_population, tmp_path):
    """Runs written before the nested form hold the flat settings (version 1, no version key): they are
    reused for the same settings and trained again for others."""
    run = tmp_path / "run"
    game = _game(small_population)
    train_once(game, run)
    stored = json.loads((run / CONFIG_FILE).read_text())
    assert stored["config"]["version"] == 2 and stored["config"]["attacker"]["steps"] == 2
    add_to_run(run, {CONFIG_FILE: json.dumps({**stored, "config": game.config.flat()})})
    assert "version" not in json.loads((run / CONFIG_FILE).read_text())["config"]
    assert run_state(_game(small_population), run) == "finished"
    assert run_state(_game(small_population, kappa=3.0), run) == "new"


def test_a_checkpoint_with_the_flat_config_of_version_1_resumes(small_population, tmp_path):
    game = _game(small_population)
    for _ in range(2):
        game.training_step()
    state = game.state()
    assert state["config"]["version"] == 2
    torch.save({**state, "config": game.config.flat()}, tmp_path / CHECKPOINT_FILE)
    resumed = _game(small_population)
    resumed.load_checkpoint(tmp_path / CHECKPOINT_FILE)
    assert resumed.step == 2 and torch.equal(_weights(resumed), _weights(game))
    with pytest.raises(TrainingError, match="different `kappa`"):
        _game(small_population, kappa=3.0).load_checkpoint(tmp_path / CHECKPOINT_FILE)


def test_a_run_stopped_early_by_its_selection_is_finished(small_population, tmp_path):
    """A run whose selection's patience ended it before its budget of steps (``early_stop`` in summary.json,
    with that budget) is finished and reused; a summary with fewer steps and no early stop is not."""
    run = tmp_path / "run"
    game = _game(small_population)
    train_once(game, run)
    summary = json.loads((run / SUMMARY_FILE).read_text())
    stopped = {**summary, "steps": 4, "early_stop": {"step": 4, "patience": 1, "refit_every": 2, "kept_step": 0,
                                                      "steps": game.config.steps}}
    add_to_run(run, {SUMMARY_FILE: json.dumps(stopped)})
    assert run_state(_game(small_population), run) == "finished"
    add_to_run(run, {SUMMARY_FILE: json.dumps({**stopped, "early_stop": {**stopped["early_stop"], "steps": 8}})})
    assert run_state(_game(small_population), run) == "new"
    add_to_run(run, {SUMMARY_FILE: json.dumps({key: value for key, value in stopped.items() if key != "early_stop"})})
    assert run_state(_game(small_population), run) == "new"
