"""Running one cell: train the BNGP defender (BNGP cells; a ``bngp-budget`` cell from the best reference
mechanism at its budget), evaluate the defense, audit it (with an ``audit`` table), retry on failure.

A BNGP cell given a run directory of its own (``runs/<key>/`` of the sweep, on the local backend
and a local Ray runtime) trains there with :func:`bngp.game.train_once`: a run finished by an
earlier, interrupted attempt of the sweep is reused and an interrupted training resumed from its
last checkpoint, with the same weights as an uninterrupted run, so a paper-scale sweep can be
split across several invocations.  Without one (a worker of a Ray cluster, whose disk is not the driver's)
it trains in a temporary directory and its finished run (less its resumable checkpoint) comes
back with the result, as bytes, kept by :class:`bngp.sweep.store.CellStore`.

:func:`run_cell` is the one task every backend runs, in the caller's process (``local``) or in
a Ray worker; it always computes on the CPU with one torch/BLAS thread, so that a cell gives
the same numbers whatever the backend and whatever else runs beside it.
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import replace
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import torch
from threadpoolctl import threadpool_limits

from bngp.data.population import Population
from bngp.data.priors import UniformSubsetPrior
from bngp.defenses.registry import DefenseContext, parse_defense_spec
from bngp.defenses.trained import load_run_defense
from bngp.attacks.training import AttackerTrainingConfig
from bngp.evaluate import evaluate_defense
from bngp.game import Game, train_once
from bngp.game.start import start_config
from bngp.references import rank_references
from bngp.decision import AttackReading, decide_release
from bngp.mechanism_audit import audit_mechanism

from .cells import Cell
from .config import BUDGET_FAMILY, AuditSpec
from .results import CellResult

__all__ = ["run_cell", "single_threaded", "error_line", "audit_cell_defense"]


@contextmanager
def single_threaded() -> Iterator[None]:
    """One torch thread and one thread in each BLAS pool for the block; the caller's settings
    are restored afterwards."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with threadpool_limits(1):
            yield
    finally:
        torch.set_num_threads(previous)


def error_line(exc: BaseException) -> str:
    """``Type: first line of the message`` of an error."""
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__


def run_cell(cell: Cell, population: Population, retries: int, run_dir: Path | None = None) -> CellResult:
    """Run ``cell`` on ``population``, trying again up to ``retries`` times when it raises;
    a cell whose every attempt raised comes back with status "failed" and the last error.
    The run's warnings are recorded in the result (from the training summary and the
    evaluation's notes), not printed.  ``run_dir``: where a BNGP cell trains its defender,
    reused or resumed from there (see the module docstring); None: a temporary directory."""
    started = time.perf_counter()
    error = ""
    for attempt in range(1, retries + 2):
        try:
            with single_threaded(), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                outcome = _compute(cell, population, run_dir)
        except Exception as exc:  # any failure of one cell is recorded, never fatal to the sweep
            error = error_line(exc)
            continue
        return CellResult(cell, "ok", attempt, time.perf_counter() - started, **outcome)
    return CellResult(cell, "failed", retries + 1, time.perf_counter() - started, error=error)


@contextmanager
def _training_dir(run_dir: Path | None) -> Iterator[Path]:
    """``run_dir`` itself, or a run directory in a temporary folder removed afterwards when None."""
    if run_dir is not None:
        yield run_dir
        return
    with tempfile.TemporaryDirectory(prefix="bngp-sweep-") as work:
        yield Path(work) / "run"


def _compute(cell: Cell, population: Population, run_dir: Path | None = None) -> dict:
    """The outcome fields of :class:`CellResult` of one attempt (``run_dir``: :func:`run_cell`)."""
    members = cell.dataset.members
    prior = UniformSubsetPrior(population.n_individuals, members)
    context = DefenseContext(population, members)
    training, notes, defender_run = None, [], None
    if cell.game is None:
        defense = parse_defense_spec(cell.spec, context)
    else:
        game = _budget_game(cell, population, prior) if cell.family == BUDGET_FAMILY else Game(population, prior, cell.game)
        with _training_dir(run_dir) as directory:
            summary, _ = train_once(game, directory)
            defense = load_run_defense(directory, context)  # loaded into memory: a temporary directory can go
            if run_dir is None:
                # the finished run (less its checkpoint) goes back with the result (a Ray worker's disk is not the
                # driver's): the sweep keeps it, so the trained defender can be attacked again (outside checks)
                defender_run = {str(path.relative_to(directory)): path.read_bytes()
                                for path in sorted(directory.rglob("*")) if path.is_file()}
        training = {
            "steps": summary.steps,
            "selected_step": summary.selected["step"] if summary.selected else None,
            "in_game_auc": summary.in_game_auc,
            "in_game_utility_loss": summary.utility_loss,
            "fresh_attacker_auc": summary.fresh_attacker_auc,
        }
        if summary.start is not None:
            training["start"] = {key: summary.start[key] for key in ("reference", "kept", "reason") if key in summary.start}
            training["budget"] = summary.budget.to_dict()
        notes.extend(summary.warnings)
    evaluation = evaluate_defense(population, prior, defense, ",".join(cell.attacks), releases=cell.releases,
                                  seed=cell.seeds["evaluation"], n_members=members,
                                  attacker=AttackerTrainingConfig(patience=cell.attacker_patience))
    strongest = evaluation.strongest_attack
    audit = None if cell.audit is None else audit_cell_defense(cell.audit, population, defense, members,
                                                                cell.seeds["audit"])
    decision = None
    if cell.decision:
        entry = evaluation.attacks[strongest]
        reading = AttackReading(strongest, entry.auc, entry.tpr_at_fpr["0.01"], entry.tpr_at_fpr["0.001"])
        decision = decide_release(population, members, defense, strongest=reading, seed=cell.seeds["decision"]).to_dict()
    return {
        "audit": audit,
        "decision": decision,
        "utility_loss": evaluation.utility_loss,
        "data_independent_utility_loss": evaluation.utility["data_independent_utility_loss"],
        "auc": {name: entry.auc for name, entry in evaluation.attacks.items()},
        "strongest_attack": strongest,
        "strongest_auc": evaluation.attacks[strongest].auc,
        "training": training,
        "warnings": [*notes, *evaluation.notes],
        "defender_run": defender_run,
    }


def _budget_game(cell: Cell, population: Population, prior: UniformSubsetPrior) -> Game:
    """The game of a ``bngp-budget`` cell, as ``bngp train --utility-budget`` sets it up: the references ranked
    at the cell's budget (with its game seed), G started from the best, the in-game refits on as many shadow
    releases as that reference's converged attack needed."""
    ranking = rank_references(population, cell.dataset.members, cell.parameter, seed=cell.game.seed)
    objective = replace(cell.game.objective, kind="utility-budget", budget=ranking.budget.value)
    config = start_config(ranking, replace(cell.game, objective=objective))
    return Game(population, prior, config, start=ranking.best,
                start_record={"reference": ranking.best_score.label, "ranking": ranking.to_dict()})


def audit_cell_defense(audit: AuditSpec, population: Population, defense, members: int, seed: int) -> dict:
    """The ``audit`` record of a cell: the canary audit of ``defense`` (the object the cell
    evaluated: a BNGP cell's trained defender, a DP cell's calibrated mechanism) by
    :func:`bngp.mechanism_audit.audit_mechanism` under the defense's own neighbouring relation,
    on the CPU, with the cell's ``audit`` seed; its lower bound on eps and how it was obtained."""
    started = time.perf_counter()
    result = audit_mechanism(population, defense, audit.attack, mode=audit.mode, canaries=audit.canaries,
                             members=members, runs=audit.runs, confidence=audit.confidence, delta=audit.delta,
                             seed=seed, progress=False, device="cpu")
    roc = result.diagnostics.get("canary_roc") or {}
    return {
        "epsilon_lb": float(result.epsilon_lb),
        "kind": "lower bound" if result.is_lower_bound else "measurement",
        "method": result.method["name"],
        "confidence": result.confidence,
        "delta": float(result.delta),
        "neighbouring": result.design["neighbouring"],
        "mode": audit.mode,
        "canaries": audit.canaries,
        "runs": result.design["runs"],
        "attack": audit.attack,
        "claimed_epsilon": result.claimed_epsilon,
        "bound_exceeds_claim": result.exceeds_claim,
        "canary_auc": None if roc.get("auc") is None else float(roc["auc"]),
        "seed": result.seed,
        "seconds": time.perf_counter() - started,
    }
