"""The trainer of the BNGP game: a general-sum GAN of a defender G against an attacker H.

arXiv:2410.07414, section 3 and App. L: :class:`Game` alternates the steps of :mod:`bngp.game.step`
to ``GameConfig.steps``, with the refits and the defender selection of :mod:`bngp.game.selection`, and
delivers the selected state after the checks of :mod:`bngp.game.checks`.  It writes the run directory
as a transaction (:mod:`bngp.run_dir`): ``config.json``, checkpoints, TensorBoard scalars, the trained
defender and ``summary.json`` (:class:`bngp.game.summary.TrainingSummary`).

A checkpoint holds every state the run's continuation reads (weights, optimisers, schedulers, the
training Generator and torch's global generator, the history and the selection), as CPU tensors, so a
run resumed from it, on any device, reproduces the uninterrupted run.  ``config.json`` records the
device; it is not part of the :class:`GameConfig` a resumed run must match.
"""

from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch
from tqdm.auto import tqdm

from bngp.attacks.per_individual_network import PopulationBoundAttacker
from bngp.data.population import Population
from bngp.data.priors import MembershipPrior, UniformSubsetPrior
from bngp.defenses.artifact import DEFENDER_FILE, population_fingerprint, save_defender
from bngp.defenses.budget import BudgetSetting
from bngp.defenses.shrinkage import ShrinkNoiseDefense
from bngp.defenses.trained import TrainedDefense
from bngp.device import DeviceName, to_cpu
from bngp.errors import InputError, TrainingError
from bngp.io_utils import atomic_write, load_torch_payload, write_json
from bngp.rng import SeedLike
from bngp.run_dir import commit_run, open_run

from .checks import PostTrainingChecks
from .config import BUDGET_TOLERANCE, CHECKPOINT_FILE, CONFIG_FILE, SUMMARY_FILE, GameConfig, flat_record
from .players import History, Players
from .selection import Refits
from .step import TrainingStep
from .summary import BgbpRecord, BudgetRecord, CollapseReport, Exploitability, TrainingSummary

__all__ = ["Game"]


def _shared(name: str) -> property:
    """A property of :class:`Game` that reads and writes the attribute ``name`` of its :class:`Players`."""

    def get(game: Game) -> Any:
        return getattr(game.players, name)

    def put(game: Game, value: Any) -> None:
        setattr(game.players, name, value)

    return property(get, put, doc=f"The players' ``{name}`` (:class:`bngp.game.players.Players`).")


class Game:
    """Defender vs attacker training on one population and membership prior.

    The game is composed of roles built in order, each holding what it acts on and calling only roles
    built before it: ``players`` (:class:`bngp.game.players.Players`: G, H, their optimisers, the mechanism,
    draws, releases, losses and the run's state), ``refits`` (:class:`bngp.game.selection.Refits`: the
    attacker's closed-form refits and the defender selection), ``stepper``
    (:class:`bngp.game.step.TrainingStep`: one step and the held-out evaluation) and ``checks``
    (:class:`bngp.game.checks.PostTrainingChecks`: the delivery of the selected state and its checks).  This
    class adds the training loop, its checkpoints and its records, and exposes the roles' public methods and
    the players' state under their own names.  With a ``start`` under the utility-budget objective the run
    delivers a trained state only where :meth:`check_against_start` finds it more private than the start.
    The arguments are those of :class:`bngp.game.players.Players`.

    Example:
        >>> game = Game(population, prior, GameConfig(objective=ObjectiveSettings(kappa=1.5), steps=500))  # doctest: +SKIP
        >>> summary = game.train(run_dir)                                                                 # doctest: +SKIP
    """

    def __init__(
        self, population: Population, prior: MembershipPrior, config: GameConfig, device: DeviceName | torch.device = "cpu",
        start: ShrinkNoiseDefense | None = None, start_record: dict | None = None,
    ) -> None:
        #: G, H, their optimisers, the mechanism, the run's streams and its training state.
        self.players = Players(population, prior, config, device, start, start_record)
        #: the attacker's closed-form refits and the defender selection.
        self.refits = Refits(self.players)
        #: one training step and the held-out evaluation.
        self.stepper = TrainingStep(self.players, self.refits)
        #: the delivery of the selected state and the checks of the trained defender.
        self.checks = PostTrainingChecks(self.players, self.refits, self.stepper)

    # -- the players' state, read and written in ``players`` ----------------------------------
    config = _shared("config")
    population = _shared("population")
    prior = _shared("prior")
    device = _shared("device")
    mechanism = _shared("mechanism")
    kappa = _shared("kappa")
    theta = _shared("theta")
    prior_entropy = _shared("prior_entropy")
    n_members = _shared("n_members")
    seeds = _shared("seeds")
    generator = _shared("generator")
    defender = _shared("defender")
    attacker = _shared("attacker")
    attacker_spec = _shared("attacker_spec")
    opt_d = _shared("opt_d")
    opt_a = _shared("opt_a")
    sched_d = _shared("sched_d")
    sched_a = _shared("sched_a")
    timer = _shared("timer")
    opponent = _shared("opponent")
    dp_bounds = _shared("dp_bounds")
    start = _shared("start")
    start_record = _shared("start_record")
    step = _shared("step")
    multiplier = _shared("multiplier")
    best = _shared("best")
    selections = _shared("selections")
    stopped_at = _shared("stopped_at")
    history = _shared("history")

    # -- the roles' public methods ------------------------------------------------------------
    def training_step(self) -> dict[str, float]:
        """One training step (:meth:`bngp.game.step.TrainingStep.training_step`); returns the losses."""
        return self.stepper.training_step()

    def evaluate_heldout(self) -> dict[str, float]:
        """The current attacker on the fixed held-out batch (:meth:`bngp.game.step.TrainingStep.evaluate_heldout`)."""
        return self.stepper.evaluate_heldout()

    def refit_attacker(self, score_defender: bool = True) -> None:
        """Refit the in-game attacker in closed form (:meth:`bngp.game.selection.Refits.refit_attacker`)."""
        self.refits.refit_attacker(score_defender)

    def fresh_attacker_check(self, steps: int, seed: SeedLike, progress: bool = False) -> dict:
        """The fresh attackers against the frozen defender (:meth:`bngp.game.checks.PostTrainingChecks.fresh_attacker_check`)."""
        return self.checks.fresh_attacker_check(steps, seed, progress)

    def check_against_start(self, selection: dict[str, Any] | None) -> dict[str, Any] | None:
        """The kept state against the start (:meth:`bngp.game.checks.PostTrainingChecks.check_against_start`)."""
        return self.checks.check_against_start(selection)

    def release_sampler(self, seed: SeedLike) -> Callable[[int], tuple[torch.Tensor, torch.Tensor]]:
        """A sampler of (releases, memberships) from the frozen defender (:meth:`bngp.game.players.Players.release_sampler`)."""
        return self.players.release_sampler(seed)

    def delivered_defense(self) -> TrainedDefense:
        """The defender in its current state (:meth:`bngp.game.players.Players.delivered_defense`)."""
        return self.players.delivered_defense()

    def attacker_input(self, x: torch.Tensor) -> torch.Tensor:
        """What the in-game attacker reads of releases x (:meth:`bngp.game.players.Players.attacker_input`)."""
        return self.players.attacker_input(x)

    def mechanism_genotypes(self) -> np.ndarray:
        """The matrix whose frequencies the mechanism releases (:meth:`bngp.game.players.Players.mechanism_genotypes`)."""
        return self.players.mechanism_genotypes()

    def implied_dp_epsilon(self) -> float | None:
        """eps_hat of Prop. 10 for the run's ``dp_epsilon`` (:meth:`bngp.game.players.Players.implied_dp_epsilon`)."""
        return self.players.implied_dp_epsilon()

    # -- checkpoints ---------------------------------------------------------------------------
    def state(self) -> dict[str, Any]:
        """Everything needed to resume, loadable with ``weights_only=True``, as CPU tensors."""
        players = self.players
        return to_cpu({
            "format": "bngp-checkpoint-1",
            "step": players.step,
            "config": players.config.to_dict(),
            "fingerprint": population_fingerprint(players.population.genotypes),
            "defender": players.defender.state_dict(),
            "attacker": players.attacker.state_dict(),
            "opt_d": players.opt_d.state_dict(),
            "opt_a": players.opt_a.state_dict(),
            "sched_d": players.sched_d.state_dict(),
            "sched_a": players.sched_a.state_dict(),
            "generator": players.generator.get_state(),
            "torch_rng": torch.get_rng_state(),
            "multiplier": players.multiplier,
            "history": json.dumps(players.history.rows),
            "selections": json.dumps(players.selections),
            "stopped_at": -1 if players.stopped_at is None else players.stopped_at,
            "collapse_events": players.history.collapse_events,
            "timings": json.dumps(players.timer.to_dict()),
            **(
                {"best_score": players.best[0], "best_step": players.best[1], "best_defender": players.best[2]}
                if players.best is not None
                else {}
            ),
        })

    def save_checkpoint(self, path: str | Path) -> None:
        """Write :meth:`state` to ``path`` atomically."""
        with atomic_write(path) as handle:
            torch.save(self.state(), handle)

    def load_checkpoint(self, path: str | Path) -> None:
        """Restore a checkpoint written by :meth:`save_checkpoint` (safe loading); its settings (either stored
        version, :func:`bngp.game.config.flat_record`) must be the run's but for ``steps``."""
        players = self.players
        payload = load_torch_payload(path, "bngp-checkpoint-1", TrainingError, "bngp training checkpoint")
        if payload["fingerprint"] != population_fingerprint(players.population.genotypes):
            raise TrainingError("the checkpoint was trained on a different population.")
        try:
            saved = flat_record(payload["config"])
        except InputError as exc:
            raise TrainingError(f"cannot resume: {exc}") from None
        current = players.config.flat()
        changed = [k for k in saved if k != "steps" and saved[k] != current.get(k)]
        if changed:
            raise TrainingError(f"cannot resume: the checkpoint was trained with a different `{changed[0]}`.")
        players.defender.load_state_dict(payload["defender"])
        players.attacker.load_state_dict(payload["attacker"])
        players.opt_d.load_state_dict(payload["opt_d"])
        players.opt_a.load_state_dict(payload["opt_a"])
        players.sched_d.load_state_dict(payload["sched_d"])
        players.sched_a.load_state_dict(payload["sched_a"])
        players.generator.set_state(payload["generator"])
        torch.set_rng_state(payload["torch_rng"])
        players.multiplier = float(payload["multiplier"])
        players.step = int(payload["step"])
        players.history = History(json.loads(payload["history"]), int(payload["collapse_events"]))
        if "selections" in payload:  # older checkpoints did not keep them
            players.selections = json.loads(payload["selections"])
            players.stopped_at = None if int(payload["stopped_at"]) < 0 else int(payload["stopped_at"])
        if "timings" in payload:  # older checkpoints did not keep them
            players.timer.restore(json.loads(payload["timings"]))
        if "best_defender" in payload:
            players.best = (float(payload["best_score"]), int(payload["best_step"]), payload["best_defender"])

    # -- the loop ---------------------------------------------------------------------------
    def train(self, run_dir: str | Path, *, resume: bool = False, force: bool = False, progress: bool = True) -> TrainingSummary:
        """Train to ``config.steps`` defender steps, writing the run directory as a transaction.

        The run is written in ``RUN_DIR.incomplete`` and moved to RUN_DIR only when complete,
        with a ``manifest.json`` (:mod:`bngp.run_dir`): ``config.json``, ``checkpoint.pt``
        (resumable), ``defender.pt`` (the trained G), ``tensorboard/`` (scalars) and
        ``summary.json`` (history, collapse report, fresh-attacker check; ``final`` is the last
        training evaluation, ``selected`` the restored best state of ``SelectionSettings.enabled``
        with its held-out evaluation).  An existing RUN_DIR is replaced only with ``force``;
        ``resume`` continues an interrupted (or complete) run from its last checkpoint.
        Returns the summary (:class:`bngp.game.summary.TrainingSummary`, whose ``to_dict()``
        is ``summary.json``).
        """
        from torch.utils.tensorboard import SummaryWriter

        players = self.players
        work = open_run(run_dir, resume=resume, force=force, checkpoint=CHECKPOINT_FILE)
        checkpoint = work / CHECKPOINT_FILE
        try:
            if resume:
                self.load_checkpoint(checkpoint)
            write_json(work / CONFIG_FILE, self._run_config())
            writer = SummaryWriter(log_dir=str(work / "tensorboard"))
            if not resume:  # the best-response descent that chose the start (bngp.game.response), step by step
                for row in (players.start_record or {}).get("response", {}).get("curve", ()):
                    for name, value in row.items():
                        if name != "step":
                            writer.add_scalar(f"response/{name}", value, row["step"])
            bar = tqdm(total=players.config.steps, initial=players.step, desc="bngp train", disable=not progress)
            try:
                while players.step < players.config.steps:
                    if self.refits.selection_stalled():
                        players.stopped_at = players.step
                        with players.timer("checkpoint"):
                            self.save_checkpoint(checkpoint)
                        break
                    losses = self.training_step()
                    for name, value in losses.items():
                        writer.add_scalar(f"train/{name}", value, players.step)
                    if players.step % players.config.eval_every == 0 or players.step == players.config.steps:
                        with players.timer("held-out evaluation"):
                            self._record_evaluation(writer, losses, bar)
                    if players.step % players.config.checkpoint_every == 0 or players.step == players.config.steps:
                        with players.timer("checkpoint"):
                            self.save_checkpoint(checkpoint)
                    bar.update(1)
            finally:
                bar.close()
            if players.start is not None:  # where the training left G, before the selection restores a state
                players.start_record = {**(players.start_record or {}), "final_state_moved": self.checks.moved_from_start(),
                                        "final_step": players.step}
            selection = self.checks.restore_best()
            if players.start is not None:
                with players.timer("start check"):
                    selection = self.check_against_start(selection)
            try:
                summary = self._finish(work, writer, progress, selection)
            finally:
                writer.close()
        except BaseException:
            if not checkpoint.is_file():  # nothing to resume from: leave nothing behind
                shutil.rmtree(work, ignore_errors=True)
            raise
        commit_run(work, run_dir, {"config": players.config.to_dict(), "seed": players.config.seed,
                                   "population_fingerprint": population_fingerprint(players.population.genotypes)})
        return summary

    def _record_evaluation(self, writer: Any, losses: dict[str, float], bar: Any) -> None:
        """Evaluate on the held-out batch, log it to TensorBoard and the history, and count a collapse."""
        metrics = self.evaluate_heldout()
        for name, value in metrics.items():
            writer.add_scalar(f"heldout/{name}", value, self.step)
        if metrics["attacker_at_prior"]:
            self.history.collapse_events += 1
        self.history.rows.append({"step": self.step, **losses, **metrics})
        # H as trained so far, not the summary's in-game AUC (H refitted against the delivered state)
        bar.set_postfix({"H auc before final refit": f"{metrics['heldout_auc']:.3f}",
                         "util": f"{metrics['heldout_utility_loss']:.4f}"})

    def _run_config(self) -> dict:
        """``config.json``: the settings (nested form), prior, population, mechanism, architectures, device."""
        players = self.players
        return {
            "config": players.config.to_dict(),
            "prior": players.prior.describe() if players.prior.describe()["kind"] != "bernoulli" else {"kind": "bernoulli"},
            "population": {
                "individuals": players.population.n_individuals,
                "attributes": players.population.n_attributes,
                "fingerprint": population_fingerprint(players.population.genotypes),
                "metadata": players.population.metadata,
            },
            "mechanism": players.mechanism.describe(),
            "defender": players.defender.spec.to_dict(),
            "attacker": (players.attacker.spec if isinstance(players.attacker, PopulationBoundAttacker) else players.attacker_spec).to_dict(),
            "device": str(players.device),
        }

    # -- the records ------------------------------------------------------------------------
    def _finish(self, run_dir: Path, writer: Any, progress: bool, selection: dict[str, Any] | None) -> TrainingSummary:
        """Save the delivered defender, run the fresh-attacker check and write ``summary.json``."""
        players = self.players
        players.defender.eval()
        save_defender(
            run_dir / DEFENDER_FILE,
            players.defender,
            population_fingerprint(players.population.genotypes),
            players.prior.describe(),
            players.kappa.cpu().numpy(),
            players.config.flat(),
        )
        last = players.history.rows[-1] if players.history.rows else {}
        delivered = selection if selection is not None else last
        check = exploitability = None
        if players.config.fresh_check.steps > 0:
            check, exploitability = self._fresh_check_records(writer, progress, delivered)
        summary = TrainingSummary(
            steps=players.step,
            against=players.config.objective.against if players.opponent is None else players.opponent.describe(),
            final=last,
            selected=selection,
            collapse=self._collapse_report(),
            history=tuple(players.history.rows),
            budget=self._budget_record(selection),
            bgbp=self._bgbp_record(),
            fresh_attacker_check=check,
            exploitability=exploitability,
            seed=players.config.seed,
            seeds=players.seeds,
            timings=players.timer.to_dict(),
            selections=tuple(players.selections) if self.refits.selects_defender else None,
            early_stop=None if players.stopped_at is None else {
                "step": players.stopped_at, "patience": players.config.selection.patience,
                "refit_every": players.config.attacker.refit_every, "kept_step": players.best[1], "steps": players.config.steps},
            start=players.start_record if players.start is not None else None,
        )
        write_json(run_dir / SUMMARY_FILE, summary.to_dict())
        return summary

    def _budget_record(self, selection: dict[str, Any] | None) -> BudgetRecord | None:
        """The delivered state's loss against the objective's budget (None without a budget or a selection)."""
        players = self.players
        objective = players.config.objective
        if objective.kind == "preference" or selection is None:
            return None
        measured = selection["heldout_utility_loss" if objective.kind == "utility-budget" else "heldout_privacy_loss"]
        if objective.kind == "utility-budget" and isinstance(players.prior, UniformSubsetPrior):
            # the one measurement of a loss against a budget (``bngp evaluate`` reads the same)
            measured = BudgetSetting.of(players.population, players.prior.n_members).measured_loss(players.delivered_defense())
        met = measured <= objective.budget * (1 + BUDGET_TOLERANCE) + 1e-12
        message = None
        if not met:
            message = (f"no defender state met the {objective.kind} {objective.budget:g} on held-out draws; "
                       f"the one kept misses it least ({measured:.4g})")
            warnings.warn(message, stacklevel=3)
        return BudgetRecord(objective.kind, objective.budget, measured, bool(met), message)

    def _bgbp_record(self) -> BgbpRecord | None:
        """The DPH^eps constraint and the eps_hat it implies (Prop. 10); None without the constraint."""
        players = self.players
        if players.config.objective.dp_epsilon is None:
            return None
        return BgbpRecord(
            epsilon=players.config.objective.dp_epsilon,
            theta_max=float(np.max(players.theta)),
            implied_epsilon=players.implied_dp_epsilon(),
            statement="if the attacker's best response satisfies DPH^eps, the mechanism is "
            "eps_hat-DP with eps_hat = log(1 + (e^eps - 1) / theta*) (Prop. 10); the penalty "
            "enforces DPH^eps on the trained attacker only, so check dp_bound_violation_rate",
        )

    def _fresh_check_records(self, writer: Any, progress: bool, delivered: dict[str, Any]) -> tuple[dict, Exploitability]:
        """The fresh-attacker check of the delivered state and its gap to the in-game attacker's AUC."""
        players = self.players
        with players.timer("fresh-attacker check"):
            check = self.fresh_attacker_check(players.config.fresh_check.steps, players.seeds["fresh-check"], progress)
        writer.add_scalar("final/fresh_attacker_auc", check["auc"], players.step)
        writer.add_scalar("final/strongest_fresh_auc", check["strongest_auc"], players.step)
        in_game = delivered.get("heldout_auc", check["strongest_auc"])
        gap = check["strongest_auc"] - in_game
        exploitability = Exploitability(
            in_game_auc=in_game,
            strongest_fresh_auc=check["strongest_auc"],
            gap=gap,
            statement="AUC of the strongest attacker fitted to convergence against the final defender "
            "(fresh Bayesian network, converged ridge, converged whitened discriminant) next to the "
            "in-game attacker's; the former is the defender's privacy",
        )
        if gap > 0.05:
            message = (
                f"a fresh attacker reaches AUC {check['strongest_auc']:.3f} against the trained defender, "
                f"{gap:.3f} above the in-game attacker: the defender fools its own attacker only; "
                "train with more attacker steps per defender step or more frequent attacker refits"
            )
            check["warning"] = message
            warnings.warn(message, stacklevel=3)
        return check, exploitability

    def _collapse_report(self) -> CollapseReport:
        """How many held-out evaluations found the in-game attacker's outputs at the prior."""
        players = self.players
        warning = None
        if players.history.collapse_events:
            warning = (
                f"the in-game attacker's outputs sat at the prior in {players.history.collapse_events} of "
                f"{len(players.history.rows)} evaluations (attacker collapse or a perfect defense; the "
                "fresh-attacker check tells which)"
            )
        return CollapseReport(players.history.collapse_events, len(players.history.rows), warning)
