"""Stopping the game once the defender state it keeps has not been bettered (``SelectionSettings.patience``).

With ``SelectionSettings.enabled`` the trainer scores the defender against a freshly refitted attacker every
``AttackerSettings.refit_every`` = E steps, by the defender's own objective, and keeps the state of lowest
score (arXiv:2410.07414 trains for a fixed budget, App. L.8; the selection is this library's,
``docs/design/game.md``).  With patience P, training stops at the first refit step t with
t - s_best >= P E, s_best the step of the kept state among those scored before t; the refit t would
make is then the run's final scoring (as at the end of a full run), so the P scorings after the
kept state decide.  Up to the stop, the run is the first part of the full run (same draws and
updates), and so is its final scoring: the run with patience keeps the state the full run keeps
whenever that state's step is at most the stop's, and otherwise the best state scored up to the
stop.  :func:`replay_patience` computes that exactly from a full run's ``selections``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from bngp.errors import InputError

__all__ = ["PatienceReplay", "patience_stalled", "replay_patience"]


def patience_stalled(step: int, kept_step: int, patience: int, refit_every: int) -> bool:
    """Whether training stops before ``step`` (a refit step) with the kept state from ``kept_step``."""
    return step % refit_every == 0 and step - kept_step >= patience * refit_every


@dataclass(frozen=True)
class PatienceReplay:
    """What a run with ``selection_patience`` P would have done, from a full run's scorings.

    Attributes:
        patience: P.
        stop_step: the step at which it stops (the full run's last step when it would not stop).
        kept_step: the step of the state it keeps.
        kept_score: that state's selection score.
        full_kept_step: the step of the state the full run keeps.
        full_kept_score: its score.
        same_state: whether both keep the same state (then the same defender, bit for bit).
        steps_fraction: stop_step over the full run's steps.
    """

    patience: int
    stop_step: int
    kept_step: int
    kept_score: float
    full_kept_step: int
    full_kept_score: float
    same_state: bool
    steps_fraction: float

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _best(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The first row of lowest score (the trainer keeps a state only when it is strictly better)."""
    best = rows[0]
    for row in rows[1:]:
        if row["score"] < best["score"]:
            best = row
    return best


def replay_patience(selections: Sequence[dict[str, Any]], patience: int, refit_every: int) -> PatienceReplay:
    """Replay patience P on the ``selections`` (step, score; in order, the final scoring last) of
    a run trained without it (:attr:`bngp.game.TrainingSummary.selections`)."""
    if not selections:
        raise InputError("a replay needs the run's selection scores (`selections`).")
    if patience < 1 or refit_every < 1:
        raise InputError(f"`patience` and `refit_every` must be >= 1, got {patience} and {refit_every}.")
    rows = list(selections)
    full = _best(rows)
    last_step = int(rows[-1]["step"])
    stop, kept = last_step, full
    best = rows[0]  # the state kept from the scorings before the current one
    for row in rows[1:]:
        if int(row["step"]) < last_step and patience_stalled(int(row["step"]), int(best["step"]), patience, refit_every):
            stop, kept = int(row["step"]), _best([best, row])  # the scoring at the stop is the final one
            break
        best = _best([best, row])
    return PatienceReplay(patience, stop, int(kept["step"]), float(kept["score"]), int(full["step"]), float(full["score"]),
                          int(kept["step"]) == int(full["step"]), stop / last_step if last_step else 1.0)
