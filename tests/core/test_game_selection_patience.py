"""SelectionSettings.patience: the game stops once the kept defender state has not been bettered,
and bngp.game.replay_patience tells exactly what a run with patience would have kept."""

import json

import pytest
import torch

from bngp.data.priors import UniformSubsetPrior
from bngp.errors import InputError
from bngp.game import SUMMARY_FILE, Game, GameConfig, SelectionSettings, TrainingSummary, replay_patience


def _game(population, **overrides):
    settings = dict(steps=24, attacker_steps=1, batch_size=8, eval_every=4, eval_batch=32, checkpoint_every=8,
                    attacker_refit_every=4, fresh_check_steps=0, seed=5)
    settings.update(overrides)
    return Game(population, UniformSubsetPrior(population.n_individuals, 20), GameConfig.from_flat(settings))


def _rows(*pairs):
    return [{"step": step, "score": score} for step, score in pairs]


def test_replay_on_hand_made_scorings():
    """Known answers: scores at steps 0, 10, ..., 60 (the last the final scoring)."""
    rows = _rows((0, 1.0), (10, 2.0), (20, 0.5), (30, 0.7), (40, 0.6), (50, 0.4), (60, 0.45))
    # P = 1 stops at 10 (10 - 0 >= 10); its final scoring (10) does not better step 0
    one = replay_patience(rows, 1, 10)
    assert (one.stop_step, one.kept_step, one.full_kept_step, one.same_state) == (10, 0, 50, False)
    assert one.kept_score == 1.0 and one.steps_fraction == pytest.approx(10 / 60)
    # P = 2: not at 20 (20 - 0 = 20, stop: kept by the final scoring at 20 = 0.5)
    two = replay_patience(rows, 2, 10)
    assert (two.stop_step, two.kept_step, two.same_state) == (20, 20, False)
    # P = 3: best 20 from step 30 on; 50 - 20 = 30 stops at 50, whose final scoring is the full run's best
    three = replay_patience(rows, 3, 10)
    assert (three.stop_step, three.kept_step, three.same_state) == (50, 50, True)
    # P = 4: never stops before the last step
    four = replay_patience(rows, 4, 10)
    assert (four.stop_step, four.kept_step, four.same_state, four.steps_fraction) == (60, 50, True, 1.0)
    # ties keep the earlier state, as the trainer does (strictly better only)
    assert replay_patience(_rows((0, 1.0), (10, 1.0), (20, 1.0)), 5, 10).full_kept_step == 0


@pytest.mark.parametrize("selections, patience, every, message", [
    ([], 2, 10, "selection scores"), (_rows((0, 1.0)), 0, 10, "patience"), (_rows((0, 1.0)), 2, 0, "refit_every")])
def test_replay_rejects_bad_input(selections, patience, every, message):
    with pytest.raises(InputError, match=message):
        replay_patience(selections, patience, every)


@pytest.mark.parametrize("patience", [0, -1, 2.0, True, "4"])
def test_selection_patience_is_validated(patience):
    with pytest.raises(InputError, match="selection_patience"):
        SelectionSettings(patience=patience)


def test_selection_patience_is_recorded_only_when_set():
    assert "selection_patience" not in GameConfig(selection=SelectionSettings(patience=None)).flat()
    assert GameConfig(selection=SelectionSettings(patience=3)).flat()["selection_patience"] == 3


def test_a_run_with_patience_is_the_first_part_of_the_full_run(small_population, tmp_path):
    """The run stops where the replay of the full run's scorings says, keeps the state it says, and
    its scorings are the full run's up to the stop (same draws, same updates); where both keep the
    same step the saved defenders are equal bit for bit."""
    full = _game(small_population, kappa=1.5).train(tmp_path / "full", progress=False)
    assert full.early_stop is None and full.selections is not None
    assert [row["step"] for row in full.selections] == list(range(0, 25, 4))
    assert full.selections == tuple(TrainingSummary.load(tmp_path / "full" / SUMMARY_FILE).selections)
    stops = set()
    for patience in (1, 2, 3):
        replay = replay_patience(full.selections, patience, 4)
        short = _game(small_population, kappa=1.5, selection_patience=patience).train(tmp_path / f"p{patience}", progress=False)
        assert short.steps == replay.stop_step and short.selected["step"] == replay.kept_step
        assert short.selections == full.selections[: len(short.selections)]
        stops.add(replay.stop_step)
        if replay.stop_step < 24:
            assert short.early_stop == {"step": replay.stop_step, "patience": patience, "refit_every": 4,
                                        "kept_step": replay.kept_step, "steps": 24}
        if replay.same_state:
            saved = torch.load(tmp_path / f"p{patience}" / "defender.pt", weights_only=True)["state_dict"]
            reference = torch.load(tmp_path / "full" / "defender.pt", weights_only=True)["state_dict"]
            assert all(torch.equal(saved[name], reference[name]) for name in reference)
    assert min(stops) < 24  # the check is not vacuous: some patience stopped early


def test_a_stopped_run_resumes_stopped(small_population, tmp_path):
    game = _game(small_population, kappa=1.5, selection_patience=1)
    summary = game.train(tmp_path, progress=False)
    assert summary.early_stop is not None
    resumed = _game(small_population, kappa=1.5, selection_patience=1).train(tmp_path, resume=True, progress=False)
    assert resumed.steps == summary.steps and resumed.early_stop == summary.early_stop
    assert json.loads((tmp_path / SUMMARY_FILE).read_text())["early_stop"]["step"] == summary.steps


def test_patience_is_inert_without_selection(small_population, tmp_path):
    summary = _game(small_population, kappa=1.5, steps=8, selection_patience=1, select_defender=False).train(
        tmp_path, progress=False)
    assert summary.steps == 8 and summary.early_stop is None and summary.selections is None
