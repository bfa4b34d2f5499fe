"""Train a defender once, across interruptions: reuse a finished run, resume an interrupted one.

A paper-scale defender (arXiv:2410.07414, section 5: K = 800, |Q| = 5000) trains for long enough to
be interrupted.  :meth:`bngp.game.Game.train` writes its run
in ``RUN_DIR.incomplete`` with a checkpoint every ``GameConfig.checkpoint_every`` steps and
resumes from it exactly (the same weights as an uninterrupted run).  :func:`train_once` is what
the reproductions and the sweep's BNGP cells call on a run directory of their own:

- ``finished``: RUN_DIR verifies (:func:`bngp.run_dir.verify_run`) and holds a run of the same
  settings (``GameConfig``, compared in their flat form, :func:`bngp.game.config.flat_record`, so a
  run stored in either version is recognised), membership prior and population (its fingerprint) to the full
  ``config.steps``: it is reused, nothing is trained;
- ``interrupted``: ``RUN_DIR.incomplete`` holds a checkpoint: training continues from it (a
  checkpoint of other settings is refused by :meth:`bngp.game.Game.load_checkpoint` with a
  one-line :class:`bngp.errors.TrainingError`);
- ``new``: anything else, trained from the start (a stale RUN_DIR is replaced).

A finished run is not resumed again, so its checkpoint (the optimisers' states, the largest file
of a run at paper scale) is dropped from it (:func:`bngp.run_dir.drop_from_run`) unless asked to
keep it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Literal

from bngp.defenses.artifact import population_fingerprint
from bngp.errors import BNGPError, InputError
from bngp.run_dir import drop_from_run, staging_dir, verify_run

from .config import CHECKPOINT_FILE, CONFIG_FILE, SUMMARY_FILE, flat_record
from .summary import TrainingSummary
from .trainer import Game

__all__ = ["RunState", "run_state", "train_once"]

#: what :func:`run_state` finds in a run directory.
RunState = Literal["finished", "interrupted", "new"]


def _json(value: object) -> object:
    """``value`` as it reads back from a JSON file (tuples become lists, and so on)."""
    return json.loads(json.dumps(value))


def _trained_to_the_end(summary: dict, steps: int) -> bool:
    """Whether a run's summary shows it trained all ``steps``, or stopped early by its selection's patience
    with ``steps`` as its budget (``early_stop``, :class:`bngp.game.summary.TrainingSummary`)."""
    early = summary.get("early_stop")
    return summary.get("steps") == steps or (isinstance(early, dict) and early.get("steps") == steps)


def run_state(game: Game, run_dir: str | Path) -> RunState:
    """Whether RUN_DIR holds a finished run of ``game``'s settings, prior and population (trained to its
    last step or stopped early by its selection's patience), an
    interrupted run to resume (a checkpoint in ``RUN_DIR.incomplete``), or neither."""
    run_dir = Path(run_dir)
    try:
        verify_run(run_dir)
        saved = json.loads((run_dir / CONFIG_FILE).read_text())
        summary = json.loads((run_dir / SUMMARY_FILE).read_text())
    except (BNGPError, OSError, ValueError):
        saved = summary = None
    if isinstance(saved, dict) and isinstance(summary, dict) and isinstance(saved.get("config"), dict):
        prior = game.prior.describe()
        try:
            settings = flat_record(saved["config"])
        except InputError:
            settings = None
        if (
            settings == _json(game.config.flat())
            and saved.get("population", {}).get("fingerprint") == population_fingerprint(game.population.genotypes)
            and (prior["kind"] == "bernoulli" or saved.get("prior") == _json(prior))
            and _trained_to_the_end(summary, game.config.steps)
        ):
            return "finished"
    return "interrupted" if (staging_dir(run_dir) / CHECKPOINT_FILE).is_file() else "new"


def train_once(
    game: Game,
    run_dir: str | Path,
    *,
    progress: bool = False,
    keep_checkpoint: bool = False,
    announce: Callable[[RunState], None] | None = None,
) -> tuple[TrainingSummary, RunState]:
    """Reuse, resume or start the training of ``game`` in RUN_DIR (see the module docstring).

    Args:
        game: the game to train (its settings, prior and population decide what is reused).
        run_dir: the run directory, written as :meth:`bngp.game.Game.train` writes it.
        progress: the training's progress bar.
        keep_checkpoint: keep ``checkpoint.pt`` in a run trained here (default: dropped).
        announce: called with the state found, before any training.

    Returns:
        The run's :class:`bngp.game.summary.TrainingSummary` and the state found.
    """
    run_dir = Path(run_dir)
    state = run_state(game, run_dir)
    if announce is not None:
        announce(state)
    if state == "finished":
        return TrainingSummary.load(run_dir / SUMMARY_FILE), state
    summary = game.train(run_dir, resume=state == "interrupted", force=True, progress=progress)
    if not keep_checkpoint:
        drop_from_run(run_dir, (CHECKPOINT_FILE,))
    return summary, state
