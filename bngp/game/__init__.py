"""The BNGP game (arXiv:2410.07414, section 3): its settings, objectives, best responses and trainer.

* :mod:`~bngp.game.config`: :class:`GameConfig`, its groups of settings, its stored forms and the run
  directory's file names.
* :mod:`~bngp.game.objectives`: leakage, utility, budgets, the BGBP constraint DPH^eps.
* :mod:`~bngp.game.best_response`: defenders' losses against a fixed differentiable attack (App. M).
* :mod:`~bngp.game.players`: ``Players``, G, H, their optimisers, the mechanism, draws, releases, losses and
  the run's training state.
* :mod:`~bngp.game.selection`: ``Refits``, the attacker's closed-form refits and the defender selection.
* :mod:`~bngp.game.step`: ``TrainingStep``, one training step and the held-out evaluation.
* :mod:`~bngp.game.checks`: ``PostTrainingChecks``, the restored selected state, the fresh-attacker check,
  the data-independent release, the check against the start.
* :mod:`~bngp.game.trainer`: :class:`Game`, which builds these roles in this order (each holds the players
  and the earlier roles it calls), and the training loop with its run directory, checkpoints and records.
* :mod:`~bngp.game.early_stop`: ``SelectionSettings.patience`` and :func:`replay_patience` of a full run.
* :mod:`~bngp.game.summary`: :class:`TrainingSummary`, the frozen record of a run (``summary.json``).
* :mod:`~bngp.game.resumable`: :func:`train_once`, a training reused when finished and resumed when interrupted.
* :mod:`~bngp.game.start`: the defender's start at the best reference of :func:`bngp.references.rank_references`,
  and :class:`BudgetSurface`, which holds it on its budget.
* :mod:`~bngp.game.response`: the defender's gradient through the attacker's best linear response, its descent
  along the budget from the best reference, and the never-worse choice of its state.
"""

from .config import (
    ATTACKER_KINDS,
    CHECKPOINT_FILE,
    CONFIG_FILE,
    KAPPA_MAX,
    OBJECTIVES,
    SUMMARY_FILE,
    AttackerSettings,
    DefenderSettings,
    FreshCheckSettings,
    GameConfig,
    ObjectiveSettings,
    SelectionSettings,
)
from .early_stop import PatienceReplay, replay_patience
from .summary import TrainingSummary
from .trainer import Game
from .resumable import RunState, run_state, train_once
from .start import BudgetSurface, start_config, start_defender
from .response import (RESPONSE_OBJECTIVES, LinearResponse, ResponseChoice, ResponseResult, best_response_start,
                       choose_response, respond)

__all__ = ["ATTACKER_KINDS", "CHECKPOINT_FILE", "CONFIG_FILE", "KAPPA_MAX", "OBJECTIVES", "SUMMARY_FILE", "Game", "GameConfig",
           "ObjectiveSettings", "DefenderSettings", "AttackerSettings", "SelectionSettings", "FreshCheckSettings",
           "PatienceReplay", "RunState", "TrainingSummary", "replay_patience", "run_state", "train_once",
           "BudgetSurface", "start_config", "start_defender", "RESPONSE_OBJECTIVES", "LinearResponse", "ResponseChoice",
           "ResponseResult", "best_response_start", "choose_response", "respond"]
