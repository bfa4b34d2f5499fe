"""The record of a finished training run: the run directory's ``summary.json``.

:meth:`bngp.game.Game.train` returns a frozen :class:`TrainingSummary` and writes its
:meth:`~TrainingSummary.to_dict` as ``summary.json``; readers of that file rebuild the record
with :meth:`TrainingSummary.from_dict` (or :meth:`TrainingSummary.load`).  What it reports
(arXiv:2410.07414, section 3 and App. L):

* the held-out evaluations of the in-game attacker over training (``history``), the last one
  (``final``) and the evaluation of the defender state kept by ``SelectionSettings.enabled``
  (``selected``);
* the collapse report: evaluations at which the in-game attacker's outputs sat at the prior;
* for the budget objectives of section 3.3, whether the kept state meets the budget;
* for the BGBP response constraint DPH^eps (section 4.3), the implied eps_hat of Prop. 10;
* the fresh-attacker check after training and the exploitability gap between the strongest
  converged fresh attacker and the in-game one (the former is the defender's privacy);
* the run's seed and the concrete seeds of its named random streams.

Records that are free-form (metric rows, the fresh-attacker check with its learning curves,
the best-response opponent's description) stay JSON dictionaries; the fixed-shape parts are
small frozen records.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, get_args

import numpy as np

from bngp.errors import DataFormatError, InputError
from bngp.validation import check_readable_file

__all__ = [
    "BudgetObjective",
    "BudgetRecord",
    "BgbpRecord",
    "CollapseReport",
    "Exploitability",
    "TrainingSummary",
]

#: the objectives of section 3.3 that carry a budget (``ObjectiveSettings.kind`` minus "preference").
BudgetObjective = Literal["utility-budget", "privacy-budget"]


def _plain(value: Any) -> Any:
    """``value`` with JSON types only: tuples become lists, numpy scalars and arrays Python
    numbers and lists, keys strings.  Non-finite floats stay floats (``json`` writes them as
    ``Infinity``/``NaN``, as ``summary.json`` always did)."""
    if isinstance(value, Mapping):
        return {str(key): _plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    if isinstance(value, np.ndarray):
        return _plain(value.tolist())
    if isinstance(value, np.generic):
        return value.item()
    return value


def _require(data: Mapping[str, Any], key: str, record: str) -> Any:
    if key not in data:
        raise DataFormatError(f"the {record} record has no `{key}`.")
    return data[key]


def _mapping(value: Any, name: str) -> dict:
    if not isinstance(value, Mapping):
        raise DataFormatError(f"`{name}` of a training summary must be a JSON object, got {type(value).__name__}.")
    return dict(value)


@dataclass(frozen=True)
class CollapseReport:
    """How often the in-game attacker's outputs sat at the prior (attacker collapse or a
    perfect defense; the fresh-attacker check tells which).

    Attributes:
        events: held-out evaluations at which the attacker was at the prior.
        evaluations: held-out evaluations made.
        warning: the message when ``events`` > 0, else None.
    """

    events: int
    evaluations: int
    warning: str | None = None

    def __post_init__(self) -> None:
        if not 0 <= int(self.events) <= int(self.evaluations):
            raise InputError(f"`collapse.events` must be in [0, evaluations = {self.evaluations}], got {self.events}.")

    def to_dict(self) -> dict[str, Any]:
        return {"events": int(self.events), "evaluations": int(self.evaluations), "warning": self.warning}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CollapseReport:
        data = _mapping(data, "collapse")
        return cls(int(_require(data, "events", "collapse")), int(_require(data, "evaluations", "collapse")),
                   data.get("warning"))


@dataclass(frozen=True)
class BudgetRecord:
    """Whether the kept defender state meets the budget of a budget objective (section 3.3),
    measured on held-out draws with a 2% tolerance.

    Attributes:
        objective: "utility-budget" (mean |x - f(D)| <= budget) or "privacy-budget"
            (leakage <= budget).
        budget: the budget.
        kept_state_value: the constrained quantity of the kept state on held-out draws.
        met: ``kept_state_value <= 1.02 * budget``.
        warning: the message when no state met the budget, else None (then absent from the dict).
    """

    objective: BudgetObjective
    budget: float
    kept_state_value: float
    met: bool
    warning: str | None = None

    def __post_init__(self) -> None:
        if self.objective not in get_args(BudgetObjective):
            raise InputError(f"`budget.objective` must be one of {', '.join(get_args(BudgetObjective))}, got {self.objective!r}.")

    def to_dict(self) -> dict[str, Any]:
        data = {"objective": self.objective, "budget": self.budget, "kept_state_value": self.kept_state_value,
                "met": bool(self.met)}
        if self.warning is not None:
            data["warning"] = self.warning
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> BudgetRecord:
        data = _mapping(data, "budget")
        fields = [_require(data, name, "budget") for name in ("objective", "budget", "kept_state_value", "met")]
        return cls(*fields, warning=data.get("warning"))


@dataclass(frozen=True)
class BgbpRecord:
    """The BGBP response constraint DPH^eps of a run (arXiv:2410.07414, section 4.3, Prop. 10):
    if the attacker's best response satisfies DPH^eps, the mechanism is eps_hat-DP with
    eps_hat = log(1 + (e^eps - 1) / theta*), theta* = max_k theta_k.

    Attributes:
        epsilon: eps of DPH^eps (``ObjectiveSettings.dp_epsilon``).
        theta_max: theta*, the largest prior membership probability.
        implied_epsilon: eps_hat.
        statement: what the numbers mean and what they do not.
    """

    epsilon: float
    theta_max: float
    implied_epsilon: float
    statement: str

    def to_dict(self) -> dict[str, Any]:
        return {field.name: getattr(self, field.name) for field in dataclasses.fields(self)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> BgbpRecord:
        data = _mapping(data, "bgbp")
        return cls(*(_require(data, field.name, "bgbp") for field in dataclasses.fields(cls)))


@dataclass(frozen=True)
class Exploitability:
    """The strongest attacker fitted to convergence against the final defender next to the
    in-game attacker; ``gap`` = strongest_fresh_auc - in_game_auc.

    Attributes:
        in_game_auc: held-out AUC of the in-game attacker against the delivered defender.
        strongest_fresh_auc: the largest AUC of the fresh-attacker check (fresh Bayesian
            network, converged ridge, converged whitened discriminant).
        gap: their difference; above 0.05 the trainer warns.
        statement: what the numbers mean.
    """

    in_game_auc: float
    strongest_fresh_auc: float
    gap: float
    statement: str

    def to_dict(self) -> dict[str, Any]:
        return {field.name: getattr(self, field.name) for field in dataclasses.fields(self)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Exploitability:
        data = _mapping(data, "exploitability")
        return cls(*(_require(data, field.name, "exploitability") for field in dataclasses.fields(cls)))


@dataclass(frozen=True)
class TrainingSummary:
    """The summary of one training run (``summary.json``).

    Attributes:
        steps: defender steps trained.
        against: "bayesian" (the BNGP game), or the description of the fixed attack a
            best-response defender was trained against (App. M).
        final: the last held-out evaluation row (losses and ``heldout_*`` metrics at ``step``);
            empty when no evaluation was made.
        selected: the defender state kept by ``SelectionSettings.enabled`` (``step``,
            ``score`` and its held-out evaluation), None when no selection was made.
        collapse: the collapse report.
        history: every held-out evaluation row, in order.
        budget: the budget record of a budget objective, None under "preference".
        bgbp: the DPH^eps record, None without ``dp_epsilon``.
        fresh_attacker_check: the check of :meth:`bngp.game.Game.fresh_attacker_check`
            (AUCs, cross-entropy, learning curves, and a ``warning`` when the gap is large),
            None when ``fresh_check_steps`` is 0.
        exploitability: the fresh-versus-in-game comparison, None without the check.
        seed: the run's seed (``GameConfig.seed``); None in summaries written before it was recorded.
        seeds: the concrete seed of each named random stream spawned from ``seed``
            (:data:`bngp.game.players.SEED_STREAMS`); None in older summaries.
        timings: wall seconds and calls per phase of the training (:class:`bngp.timing.PhaseTimer`:
            refits, selection, attacker steps, defender steps, held-out evaluation, checkpoints,
            the fresh-attacker check) in this process (a resumed run times its resumed part);
            None in older summaries.
        selections: every scoring of the defender by a freshly refitted attacker (``step``,
            selection ``score``, ``privacy_loss``, ``utility_loss`` on the refit's held-out draws),
            in order, the final scoring last; None without selection and in older summaries.
        early_stop: where ``SelectionSettings.patience`` stopped training (``step``,
            ``patience``, ``refit_every``, ``kept_step``, the budget ``steps``); None when the run
            trained all its steps.
        start: the reference mechanism the defender started from and the never-worse check of the
            delivered state against it (:meth:`bngp.game.Game.check_against_start`); None when G
            started from the data-independent release.

    ``to_dict`` gives the ``summary.json`` payload (optional records are left out when None);
    ``from_dict`` reads it back, so ``TrainingSummary.from_dict(s.to_dict()) == s``.
    """

    steps: int
    against: str | dict[str, Any]
    final: dict[str, Any]
    selected: dict[str, Any] | None
    collapse: CollapseReport
    history: tuple[dict[str, Any], ...]
    budget: BudgetRecord | None = None
    bgbp: BgbpRecord | None = None
    fresh_attacker_check: dict[str, Any] | None = None
    exploitability: Exploitability | None = None
    seed: int | None = None
    seeds: dict[str, int] | None = None
    timings: dict[str, dict[str, float]] | None = None
    selections: tuple[dict[str, Any], ...] | None = None
    early_stop: dict[str, Any] | None = None
    start: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        if isinstance(self.steps, bool) or not isinstance(self.steps, (int, np.integer)) or self.steps < 0:
            raise InputError(f"`steps` must be an integer >= 0, got {self.steps!r}.")
        if not isinstance(self.collapse, CollapseReport):
            raise InputError(f"`collapse` must be a CollapseReport, got {type(self.collapse).__name__}.")
        for name, kind in (("budget", BudgetRecord), ("bgbp", BgbpRecord), ("exploitability", Exploitability)):
            value = getattr(self, name)
            if value is not None and not isinstance(value, kind):
                raise InputError(f"`{name}` must be a {kind.__name__} or None, got {type(value).__name__}.")
        if not isinstance(self.against, (str, Mapping)):
            raise InputError(f"`against` must be an attack name or a description, got {type(self.against).__name__}.")
        # canonical JSON types, copied: the record shares no mutable state with the trainer
        set_field = object.__setattr__
        set_field(self, "steps", int(self.steps))
        set_field(self, "against", self.against if isinstance(self.against, str) else _plain(self.against))
        set_field(self, "final", _plain(self.final))
        set_field(self, "selected", None if self.selected is None else _plain(self.selected))
        set_field(self, "history", tuple(_plain(row) for row in self.history))
        if self.fresh_attacker_check is not None:
            set_field(self, "fresh_attacker_check", _plain(self.fresh_attacker_check))
        if self.seed is not None:
            set_field(self, "seed", int(self.seed))
        if self.seeds is not None:
            set_field(self, "seeds", {str(name): int(value) for name, value in self.seeds.items()})
        if self.timings is not None:
            set_field(self, "timings", _plain(self.timings))
        if self.selections is not None:
            set_field(self, "selections", tuple(_plain(row) for row in self.selections))
        if self.early_stop is not None:
            set_field(self, "early_stop", _plain(self.early_stop))
        if self.start is not None:
            set_field(self, "start", _plain(self.start))

    # -- derived numbers ---------------------------------------------------------------------
    @property
    def delivered(self) -> dict[str, Any]:
        """The evaluation of the defender saved as ``defender.pt``: ``selected`` if a state was
        kept, else ``final``."""
        return self.selected if self.selected is not None else self.final

    @property
    def in_game_auc(self) -> float | None:
        """Held-out AUC of the in-game attacker against the delivered defender."""
        return self.delivered.get("heldout_auc")

    @property
    def utility_loss(self) -> float | None:
        """Held-out mean |x - f(D)| of the delivered defender."""
        return self.delivered.get("heldout_utility_loss")

    @property
    def fresh_attacker_auc(self) -> float | None:
        """AUC of the fresh Bayesian attacker of the check, None without the check."""
        return None if self.fresh_attacker_check is None else self.fresh_attacker_check.get("auc")

    @property
    def strongest_fresh_auc(self) -> float | None:
        """The defender's privacy: the strongest converged fresh attacker's AUC, None without the check."""
        return None if self.exploitability is None else self.exploitability.strongest_fresh_auc

    @property
    def warnings(self) -> tuple[str, ...]:
        """Every warning of the run: collapse, missed budget, exploitable defender."""
        found = [self.collapse.warning, None if self.budget is None else self.budget.warning,
                 None if self.fresh_attacker_check is None else self.fresh_attacker_check.get("warning")]
        return tuple(message for message in found if message)

    # -- JSON ----------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """The ``summary.json`` payload (a fresh copy; optional records left out when None)."""
        data: dict[str, Any] = {
            "steps": self.steps,
            "against": _plain(self.against),
            "final": _plain(self.final),
            "selected": _plain(self.selected),
            "collapse": self.collapse.to_dict(),
            "history": _plain(self.history),
        }
        optional = {
            "budget": None if self.budget is None else self.budget.to_dict(),
            "bgbp": None if self.bgbp is None else self.bgbp.to_dict(),
            "fresh_attacker_check": _plain(self.fresh_attacker_check),
            "exploitability": None if self.exploitability is None else self.exploitability.to_dict(),
            "seed": self.seed,
            "seeds": _plain(self.seeds),
            "timings": _plain(self.timings),
            "selections": _plain(self.selections),
            "early_stop": _plain(self.early_stop),
            "start": _plain(self.start),
        }
        data.update({key: value for key, value in optional.items() if value is not None})
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TrainingSummary:
        """Rebuild the record from a ``summary.json`` payload (:class:`bngp.errors.DataFormatError`
        when a required entry is missing or malformed)."""
        data = _mapping(data, "summary")
        history = _require(data, "history", "summary")
        if not isinstance(history, list):
            raise DataFormatError("`history` of a training summary must be a JSON list.")
        selected = data.get("selected")
        fresh = data.get("fresh_attacker_check")
        selections = data.get("selections")
        if selections is not None and not isinstance(selections, list):
            raise DataFormatError("`selections` of a training summary must be a JSON list.")
        try:
            return cls(
                steps=_require(data, "steps", "summary"),
                against=_require(data, "against", "summary"),
                final=_mapping(_require(data, "final", "summary"), "final"),
                selected=None if selected is None else _mapping(selected, "selected"),
                collapse=CollapseReport.from_dict(_require(data, "collapse", "summary")),
                history=tuple(_mapping(row, "history") for row in history),
                budget=None if data.get("budget") is None else BudgetRecord.from_dict(data["budget"]),
                bgbp=None if data.get("bgbp") is None else BgbpRecord.from_dict(data["bgbp"]),
                fresh_attacker_check=None if fresh is None else _mapping(fresh, "fresh_attacker_check"),
                exploitability=None if data.get("exploitability") is None else Exploitability.from_dict(data["exploitability"]),
                seed=data.get("seed"),
                seeds=None if data.get("seeds") is None else _mapping(data["seeds"], "seeds"),
                timings=None if data.get("timings") is None else _mapping(data["timings"], "timings"),
                selections=None if selections is None else tuple(_mapping(row, "selections") for row in selections),
                early_stop=None if data.get("early_stop") is None else _mapping(data["early_stop"], "early_stop"),
                start=None if data.get("start") is None else _mapping(data["start"], "start"),
            )
        except DataFormatError:
            raise
        except (InputError, TypeError, ValueError) as exc:
            raise DataFormatError(f"not a valid training summary: {exc}") from None

    @classmethod
    def load(cls, path: str | Path) -> TrainingSummary:
        """Read a ``summary.json`` file (a run directory's, :data:`bngp.game.SUMMARY_FILE`)."""
        path = check_readable_file("summary", path)
        try:
            data = json.loads(path.read_text())
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise DataFormatError(f"{path} is not JSON ({exc}).") from None
        try:
            return cls.from_dict(data)
        except DataFormatError as exc:
            raise DataFormatError(f"{path}: {exc}") from None
