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
from typing import Any

import numpy as np
import torch
from tqdm.auto import tqdm

from bngp.attacks.per_individual_network import PopulationBoundAttacker
from bngp.data.priors import UniformSubsetPrior
from bngp.defenses.artifact import DEFENDER_FILE, population_fingerprint, save_defender
from bngp.defenses.budget import BudgetSetting
from bngp.device import to_cpu
from bngp.errors import InputError, TrainingError
from bngp.io_utils import atomic_write, load_torch_payload, write_json
from bngp.run_dir import commit_run, open_run

from .checks import PostTrainingChecks
from .config import BUDGET_TOLERANCE, CHECKPOINT_FILE, CONFIG_FILE, SUMMARY_FILE, flat_record
from .players import History
from .summary import BgbpRecord, BudgetRecord, CollapseReport, Exploitability, TrainingSummary

__all__ = ["Game"]


class Game(PostTrainingChecks):
    """Defender vs attacker training on one population and membership prior.

    The players, their steps, refits, selection and checks are those of :class:`bngp.game.players.Players`
    and the roles built on it; this class adds the training loop, its checkpoints and its records.  With a
    ``start`` under the utility-budget objective the run delivers a trained state only where
    :meth:`check_against_start` finds it more private than the start.

    Example:
        >>> game = Game(population, prior, GameConfig(objective=ObjectiveSettings(kappa=1.5), steps=500))  # doctest: +SKIP
        >>> summary = game.train(run_dir)                                                                 # doctest: +SKIP
    """

    # -- checkpoints ---------------------------------------------------------------------------
    def state(self) -> dict[str, Any]:
        """Everything needed to resume, loadable with ``weights_only=True``, as CPU tensors."""
        return to_cpu({
            "format": "bngp-checkpoint-1",
            "step": self.step,
            "config": self.config.to_dict(),
            "fingerprint": population_fingerprint(self.population.genotypes),
            "defender": self.defender.state_dict(),
            "attacker": self.attacker.state_dict(),
            "opt_d": self.opt_d.state_dict(),
            "opt_a": self.opt_a.state_dict(),
            "sched_d": self.sched_d.state_dict(),
            "sched_a": self.sched_a.state_dict(),
            "generator": self.generator.get_state(),
            "torch_rng": torch.get_rng_state(),
            "multiplier": self.multiplier,
            "history": json.dumps(self.history.rows),
            "selections": json.dumps(self.selections),
            "stopped_at": -1 if self.stopped_at is None else self.stopped_at,
            "collapse_events": self.history.collapse_events,
            "timings": json.dumps(self.timer.to_dict()),
            **(
                {"best_score": self.best[0], "best_step": self.best[1], "best_defender": self.best[2]}
                if self.best is not None
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
        payload = load_torch_payload(path, "bngp-checkpoint-1", TrainingError, "bngp training checkpoint")
        if payload["fingerprint"] != population_fingerprint(self.population.genotypes):
            raise TrainingError("the checkpoint was trained on a different population.")
        try:
            saved = flat_record(payload["config"])
        except InputError as exc:
            raise TrainingError(f"cannot resume: {exc}") from None
        current = self.config.flat()
        changed = [k for k in saved if k != "steps" and saved[k] != current.get(k)]
        if changed:
            raise TrainingError(f"cannot resume: the checkpoint was trained with a different `{changed[0]}`.")
        self.defender.load_state_dict(payload["defender"])
        self.attacker.load_state_dict(payload["attacker"])
        self.opt_d.load_state_dict(payload["opt_d"])
        self.opt_a.load_state_dict(payload["opt_a"])
        self.sched_d.load_state_dict(payload["sched_d"])
        self.sched_a.load_state_dict(payload["sched_a"])
        self.generator.set_state(payload["generator"])
        torch.set_rng_state(payload["torch_rng"])
        self.multiplier = float(payload["multiplier"])
        self.step = int(payload["step"])
        self.history = History(json.loads(payload["history"]), int(payload["collapse_events"]))
        if "selections" in payload:  # older checkpoints did not keep them
            self.selections = json.loads(payload["selections"])
            self.stopped_at = None if int(payload["stopped_at"]) < 0 else int(payload["stopped_at"])
        if "timings" in payload:  # older checkpoints did not keep them
            self.timer.restore(json.loads(payload["timings"]))
        if "best_defender" in payload:
            self.best = (float(payload["best_score"]), int(payload["best_step"]), payload["best_defender"])

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

        work = open_run(run_dir, resume=resume, force=force, checkpoint=CHECKPOINT_FILE)
        checkpoint = work / CHECKPOINT_FILE
        try:
            if resume:
                self.load_checkpoint(checkpoint)
            write_json(work / CONFIG_FILE, self._run_config())
            writer = SummaryWriter(log_dir=str(work / "tensorboard"))
            bar = tqdm(total=self.config.steps, initial=self.step, desc="bngp train", disable=not progress)
            try:
                while self.step < self.config.steps:
                    if self._selection_stalled():
                        self.stopped_at = self.step
                        with self.timer("checkpoint"):
                            self.save_checkpoint(checkpoint)
                        break
                    losses = self.training_step()
                    for name, value in losses.items():
                        writer.add_scalar(f"train/{name}", value, self.step)
                    if self.step % self.config.eval_every == 0 or self.step == self.config.steps:
                        with self.timer("held-out evaluation"):
                            self._record_evaluation(writer, losses, bar)
                    if self.step % self.config.checkpoint_every == 0 or self.step == self.config.steps:
                        with self.timer("checkpoint"):
                            self.save_checkpoint(checkpoint)
                    bar.update(1)
            finally:
                bar.close()
            if self.start is not None:  # where the training left G, before the selection restores a state
                self.start_record = {**(self.start_record or {}), "final_state_moved": self._moved_from_start(),
                                     "final_step": self.step}
            selection = self._restore_best()
            if self.start is not None:
                with self.timer("start check"):
                    selection = self.check_against_start(selection)
            try:
                summary = self._finish(work, writer, progress, selection)
            finally:
                writer.close()
        except BaseException:
            if not checkpoint.is_file():  # nothing to resume from: leave nothing behind
                shutil.rmtree(work, ignore_errors=True)
            raise
        commit_run(work, run_dir, {"config": self.config.to_dict(), "seed": self.config.seed,
                                   "population_fingerprint": population_fingerprint(self.population.genotypes)})
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
        return {
            "config": self.config.to_dict(),
            "prior": self.prior.describe() if self.prior.describe()["kind"] != "bernoulli" else {"kind": "bernoulli"},
            "population": {
                "individuals": self.population.n_individuals,
                "attributes": self.population.n_attributes,
                "fingerprint": population_fingerprint(self.population.genotypes),
                "metadata": self.population.metadata,
            },
            "mechanism": self.mechanism.describe(),
            "defender": self.defender.spec.to_dict(),
            "attacker": (self.attacker.spec if isinstance(self.attacker, PopulationBoundAttacker) else self.attacker_spec).to_dict(),
            "device": str(self.device),
        }

    # -- the records ------------------------------------------------------------------------
    def _finish(self, run_dir: Path, writer: Any, progress: bool, selection: dict[str, Any] | None) -> TrainingSummary:
        """Save the delivered defender, run the fresh-attacker check and write ``summary.json``."""
        self.defender.eval()
        save_defender(
            run_dir / DEFENDER_FILE,
            self.defender,
            population_fingerprint(self.population.genotypes),
            self.prior.describe(),
            self.kappa.cpu().numpy(),
            self.config.flat(),
        )
        last = self.history.rows[-1] if self.history.rows else {}
        delivered = selection if selection is not None else last
        check = exploitability = None
        if self.config.fresh_check.steps > 0:
            check, exploitability = self._fresh_check_records(writer, progress, delivered)
        summary = TrainingSummary(
            steps=self.step,
            against=self.config.objective.against if self.opponent is None else self.opponent.describe(),
            final=last,
            selected=selection,
            collapse=self._collapse_report(),
            history=tuple(self.history.rows),
            budget=self._budget_record(selection),
            bgbp=self._bgbp_record(),
            fresh_attacker_check=check,
            exploitability=exploitability,
            seed=self.config.seed,
            seeds=self.seeds,
            timings=self.timer.to_dict(),
            selections=tuple(self.selections) if self.selects_defender else None,
            early_stop=None if self.stopped_at is None else {
                "step": self.stopped_at, "patience": self.config.selection.patience,
                "refit_every": self.config.attacker.refit_every, "kept_step": self.best[1], "steps": self.config.steps},
            start=self.start_record if self.start is not None else None,
        )
        write_json(run_dir / SUMMARY_FILE, summary.to_dict())
        return summary

    def _budget_record(self, selection: dict[str, Any] | None) -> BudgetRecord | None:
        """The delivered state's loss against the objective's budget (None without a budget or a selection)."""
        objective = self.config.objective
        if objective.kind == "preference" or selection is None:
            return None
        measured = selection["heldout_utility_loss" if objective.kind == "utility-budget" else "heldout_privacy_loss"]
        if objective.kind == "utility-budget" and isinstance(self.prior, UniformSubsetPrior):
            # the one measurement of a loss against a budget (``bngp evaluate`` reads the same)
            measured = BudgetSetting.of(self.population, self.prior.n_members).measured_loss(self.delivered_defense())
        met = measured <= objective.budget * (1 + BUDGET_TOLERANCE) + 1e-12
        message = None
        if not met:
            message = (f"no defender state met the {objective.kind} {objective.budget:g} on held-out draws; "
                       f"the one kept misses it least ({measured:.4g})")
            warnings.warn(message, stacklevel=3)
        return BudgetRecord(objective.kind, objective.budget, measured, bool(met), message)

    def _bgbp_record(self) -> BgbpRecord | None:
        """The DPH^eps constraint and the eps_hat it implies (Prop. 10); None without the constraint."""
        if self.config.objective.dp_epsilon is None:
            return None
        return BgbpRecord(
            epsilon=self.config.objective.dp_epsilon,
            theta_max=float(np.max(self.theta)),
            implied_epsilon=self.implied_dp_epsilon(),
            statement="if the attacker's best response satisfies DPH^eps, the mechanism is "
            "eps_hat-DP with eps_hat = log(1 + (e^eps - 1) / theta*) (Prop. 10); the penalty "
            "enforces DPH^eps on the trained attacker only, so check dp_bound_violation_rate",
        )

    def _fresh_check_records(self, writer: Any, progress: bool, delivered: dict[str, Any]) -> tuple[dict, Exploitability]:
        """The fresh-attacker check of the delivered state and its gap to the in-game attacker's AUC."""
        with self.timer("fresh-attacker check"):
            check = self.fresh_attacker_check(self.config.fresh_check.steps, self.seeds["fresh-check"], progress)
        writer.add_scalar("final/fresh_attacker_auc", check["auc"], self.step)
        writer.add_scalar("final/strongest_fresh_auc", check["strongest_auc"], self.step)
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
        warning = None
        if self.history.collapse_events:
            warning = (
                f"the in-game attacker's outputs sat at the prior in {self.history.collapse_events} of "
                f"{len(self.history.rows)} evaluations (attacker collapse or a perfect defense; the "
                "fresh-attacker check tells which)"
            )
        return CollapseReport(self.history.collapse_events, len(self.history.rows), warning)
