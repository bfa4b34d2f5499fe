"""The records of a sweep: :class:`CellResult` (one cell, as stored in ``DIR/cells/<key>.json``)
and :class:`SweepResult` (the whole sweep, as returned by :func:`bngp.sweep.run_sweep`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from bngp.errors import DataFormatError

from .cells import Cell

__all__ = ["CellResult", "SweepResult", "CellStatus"]

CellStatus = Literal["ok", "failed"]
#: the fields of a cell's record that its run produced (the rest describe the cell).
_OUTCOME = ("status", "attempts", "seconds", "error", "utility_loss", "data_independent_utility_loss", "auc",
            "strongest_attack", "strongest_auc", "training", "warnings")


@dataclass(frozen=True)
class CellResult:
    """What one cell gave.

    Attributes:
        cell: the cell.
        status: "ok", or "failed" when every attempt raised.
        attempts: attempts made (1 + the retries used).
        seconds: wall seconds over all attempts.
        error: the last attempt's error (``Type: message``, one line) of a failed cell, else None.
        utility_loss: mean |x - f(D)| over the evaluation releases.
        data_independent_utility_loss: mean |f(theta) - f(D)|, the loss of the release that
            keeps none of the dataset's signal (AUC 0.5).
        auc: every attack's mean AUC over releases.
        strongest_attack, strongest_auc: the attack with the highest AUC, and it.
        training: for BNGP cells, the training's headline numbers (steps, selected step, the
            in-game attacker's AUC and utility loss, the fresh attacker's AUC).
        warnings: the warnings of the training (collapse, missed budget, exploitable defender)
            and the evaluation's notes.
        audit: for a cell of a sweep with an ``audit`` table, the mechanism audit of the cell's
            defense (:func:`bngp.sweep.execute.audit_cell_defense`): ``epsilon_lb`` (a lower bound
            on eps that holds with probability ``confidence``), ``kind``, ``method``,
            ``confidence``, ``delta``, ``neighbouring``, ``mode``, ``canaries``, ``runs``,
            ``attack``, ``claimed_epsilon``, ``bound_exceeds_claim``, ``canary_auc``, ``seed`` and
            its wall ``seconds``; None otherwise (and for a failed cell).  Recorded, as ``audit``,
            only in the records of audited cells.
        decision: for a cell of a sweep with ``decision = true``, the release decision of the cell's
            defense (:meth:`bngp.decision.ReleaseDecision.to_dict`: matched Laplace and Gaussian and the best
            reference at its loss, read by the converged linear attack, and the verdict); recorded only then.
        defender_run: for a BNGP cell just computed, the files of its trained defender's run
            directory (relative path -> bytes, without the checkpoint), which the store writes to
            ``DIR/runs/<key>/``; not part of the record (None for a stored result).
    """

    cell: Cell
    status: CellStatus
    attempts: int
    seconds: float
    error: str | None = None
    utility_loss: float | None = None
    data_independent_utility_loss: float | None = None
    auc: dict[str, float] = field(default_factory=dict)
    strongest_attack: str | None = None
    strongest_auc: float | None = None
    training: dict[str, Any] | None = None
    warnings: list[str] = field(default_factory=list)
    audit: dict[str, Any] | None = None
    decision: dict[str, Any] | None = None
    defender_run: dict[str, bytes] | None = field(default=None, compare=False, repr=False)

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def audited_epsilon_lb(self) -> float | None:
        """The audit's lower bound on eps, None without an audit result."""
        return None if self.audit is None else self.audit["epsilon_lb"]

    def to_dict(self) -> dict[str, Any]:
        """The cell's record: its parameters (:meth:`Cell.describe`) and outcome (with ``audit``
        only for an audited cell: a cell without one has the record it always had)."""
        record = {**self.cell.describe(), **{name: getattr(self, name) for name in _OUTCOME}}
        if self.cell.audit is not None:
            record["audit"] = self.audit
        if self.cell.decision:
            record["decision"] = self.decision
        return record

    @classmethod
    def from_dict(cls, cell: Cell, record: dict[str, Any]) -> "CellResult":
        """The result of ``cell`` stored as ``record`` (:meth:`to_dict`); raises
        :class:`DataFormatError` when the record is not one of this cell."""
        if not isinstance(record, dict) or record.get("key") != cell.key or any(name not in record for name in _OUTCOME):
            raise DataFormatError(f"not a stored result of cell {cell.key}.")
        audit = None
        if cell.audit is not None:
            audit = record.get("audit")
            if record["status"] == "ok" and not (isinstance(audit, dict) and "epsilon_lb" in audit):
                raise DataFormatError(f"the stored result of cell {cell.key} has no audit.")
        decision = None
        if cell.decision:
            decision = record.get("decision")
            if record["status"] == "ok" and not (isinstance(decision, dict) and "verdict" in decision):
                raise DataFormatError(f"the stored result of cell {cell.key} has no decision.")
        return cls(cell, **{name: record[name] for name in _OUTCOME}, audit=audit, decision=decision)

    def summary(self) -> str:
        """The outcome in a few words, for progress lines."""
        if not self.ok:
            return f"failed after {self.attempts} attempt(s): {self.error}"
        retried = f", after {self.attempts} attempts" if self.attempts > 1 else ""
        audited = "" if self.audit is None else f", audited eps lb {self.audit['epsilon_lb']:.3g}"
        return (f"utility loss {self.utility_loss:.4g}, strongest {self.strongest_attack} AUC "
                f"{self.strongest_auc:.3f}{audited} ({self.seconds:.1f} s{retried})")


@dataclass(frozen=True)
class SweepResult:
    """A finished sweep.

    Attributes:
        cells: every cell's result, in grid order (:func:`bngp.sweep.cells.plan_cells`).
        computed: cells run by this call.
        reused: cells whose stored result was reused.
        reused_seconds: the seconds those reused cells took in the runs that computed them.
        backend: "local" or "ray".
        seconds: wall seconds of the call.
        out_dir: the output directory.
        json_path, markdown_path, plot_path: the merged outputs.
    """

    cells: tuple[CellResult, ...]
    computed: int
    reused: int
    reused_seconds: float
    backend: str
    seconds: float
    out_dir: Path
    json_path: Path
    markdown_path: Path
    plot_path: Path

    @property
    def failed(self) -> tuple[CellResult, ...]:
        """The cells that failed after every retry."""
        return tuple(result for result in self.cells if not result.ok)
