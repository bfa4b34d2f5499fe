"""The cells of a sweep grid: one (dataset, defense, kappa or eps, seed) each, with the hash
that names its result file, and the data-dependent checks made before any cell runs."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from bngp.data.npz import load_population
from bngp.data.population import Population
from bngp.defenses.artifact import population_fingerprint
from bngp.defenses.budget import BudgetSetting
from bngp.defenses.registry import DefenseContext, parse_defense_spec, split_spec
from bngp.errors import InputError
from bngp.game import GameConfig
from bngp.mechanism_audit import resolve_neighbouring
from bngp.rng import named_seeds

from .config import BNGP_FAMILY, BUDGET_FAMILIES, BUDGET_FAMILY, AuditSpec, DatasetSpec, SweepConfig

__all__ = ["Cell", "Dataset", "SEED_STREAMS", "load_datasets", "plan_cells"]

#: the random streams of a cell, spawned from its seed: the defender's training, the evaluation
#: (the same for every defense at one seed: their cells share the evaluation draws), only for a cell
#: with an ``audit`` the mechanism audit, and only for a cell with a decision the release decision.
#: SeedSequence children do not depend on how many are spawned, so an appended stream leaves the
#: earlier ones (and the numbers of the cells without it) unchanged; streams are only ever appended.
SEED_STREAMS = ("game", "evaluation", "audit", "decision")
#: the streams of a cell without an audit or a decision (each of those is appended when the cell has it).
_PLAIN_STREAMS = SEED_STREAMS[:2]
#: version of the canonical cell parameters; a change makes every stored cell stale.
CELL_FORMAT = "bngp-sweep-cell-1"


@dataclass(frozen=True, eq=False)
class Dataset:
    """A dataset of the sweep, loaded: its spec, the population and the population's fingerprint
    (genotypes and reference panel: results are reused by content, not by file name)."""

    spec: DatasetSpec
    population: Population
    fingerprint: str


@dataclass(frozen=True)
class Cell:
    """One cell of the grid.

    Attributes:
        dataset: the dataset's spec (name, path, n).
        fingerprint: the dataset's :attr:`Dataset.fingerprint`.
        defense: the defense family as the config writes it (``"bngp"``, ``"gaussian:delta=1e-5"``).
        parameter: kappa of a BNGP cell, eps of a DP cell, the utility budget (as written) of a
            ``bngp-budget`` cell or a reference at a budget.
        seed: the cell's seed (an entry of ``seeds``); :data:`SEED_STREAMS` are spawned from it.
        attacks: the attacks evaluated.
        releases: evaluation releases.
        game: the defender's GameConfig (BNGP cells; for a ``bngp-budget`` cell the settings the budget,
            its noise law and its refits are added to once the references are ranked), None otherwise.
        audit: the settings of the cell's mechanism audit, None when the sweep has no ``audit``.
        attacker_patience: early stopping of the evaluation's Bayesian attacker (None: all steps).
        decision: whether the cell reads its release decision (:func:`bngp.decision.decide_release`).
    """

    dataset: DatasetSpec
    fingerprint: str
    defense: str
    parameter: float | str
    seed: int
    attacks: tuple[str, ...]
    releases: int
    game: GameConfig | None
    audit: AuditSpec | None = None
    attacker_patience: int | None = None
    decision: bool = False

    @property
    def family(self) -> str:
        """The defense's name: ``bngp`` or the DP mechanism."""
        return split_spec(self.defense)[0]

    @property
    def spec(self) -> str:
        """The defense SPEC of the cell: ``bngp:kappa=K``, the DP SPEC with its epsilon
        (``laplace:epsilon=1.0``, as ``bngp evaluate --defense`` takes it), or a budget family's with its
        budget (``shrinkage:budget=0.5x,shrink=0.2``; ``bngp-budget:budget=0.5x``)."""
        name, params = split_spec(self.defense)
        if name in BUDGET_FAMILIES:
            return f"{name}:" + ",".join([f"budget={self.parameter}", *(f"{k}={v}" for k, v in params.items())])
        key = "kappa" if name == BNGP_FAMILY else "epsilon"
        return f"{name}:" + ",".join([f"{key}={self.parameter!r}", *(f"{k}={v}" for k, v in params.items())])

    @property
    def seeds(self) -> dict[str, int]:
        """The concrete seed of each stream of :data:`SEED_STREAMS` (``audit`` and ``decision`` only for a
        cell with an audit or a decision)."""
        names = _PLAIN_STREAMS + ("audit",) * (self.audit is not None) + ("decision",) * self.decision
        return named_seeds(self.seed, names)

    @property
    def key(self) -> str:
        """The SHA-256 (first 20 hex digits) of the canonical parameters: what the cell computes,
        independent of file names and labels.  The audit settings enter only an audited cell's
        parameters, so the key of a cell without an audit is the one it always had (and a cell
        stored without an audit is never reused for a config with one).  Likewise the Bayesian
        attacker's early stopping enters only when it is on: cells evaluated with all its steps
        keep the keys they had before early stopping existed."""
        canonical = {
            "format": CELL_FORMAT,
            "population": self.fingerprint,
            "members": self.dataset.members,
            "defense": self.spec,
            "seed": self.seed,
            "attacks": list(self.attacks),
            "releases": self.releases,
            "game": None if self.game is None else self.game.flat(),
        }
        if self.audit is not None:
            canonical["audit"] = self.audit.to_dict()
        if self.attacker_patience is not None:
            canonical["attacker_patience"] = self.attacker_patience
        if self.decision:
            canonical["decision"] = True
        return hashlib.sha256(json.dumps(canonical, sort_keys=True).encode()).hexdigest()[:20]

    @property
    def label(self) -> str:
        """One-line description for progress lines."""
        return f"{self.dataset.name} {self.spec} seed={self.seed}"

    def describe(self) -> dict[str, Any]:
        """The cell's parameters as recorded with its result."""
        bngp = self.family == BNGP_FAMILY
        budgeted = self.family in BUDGET_FAMILIES
        return {
            "key": self.key,
            "dataset": self.dataset.name,
            "path": str(self.dataset.path),
            "members": self.dataset.members,
            "defense": self.defense,
            "family": self.family,
            "spec": self.spec,
            "kappa": self.parameter if bngp else None,
            "eps": None if bngp or budgeted else self.parameter,
            **({"budget": self.parameter} if budgeted else {}),
            "seed": self.seed,
            "seeds": self.seeds,
            "attacks": list(self.attacks),
            "releases": self.releases,
            "attacker_patience": self.attacker_patience,
            "game": None if self.game is None else self.game.flat(),
            **({"decision": True} if self.decision else {}),
        }


def load_datasets(config: SweepConfig) -> dict[str, Dataset]:
    """Load every dataset and check what needs the data: 1 <= n <= K - 1, no two datasets with
    the same population and n, every DP defense calibrated at every eps and, with an ``audit``,
    that its canaries fit every cell's dataset and that its attack has what it needs."""
    datasets: dict[str, Dataset] = {}
    seen: dict[tuple[str, int], str] = {}
    for spec in config.datasets:
        population = load_population(spec.path)
        if spec.members >= population.n_individuals:
            raise InputError(f"dataset `{spec.name}`: `members` must be between 1 and K - 1 = "
                             f"{population.n_individuals - 1}, got {spec.members}.")
        fingerprint = _fingerprint(population)
        other = seen.setdefault((fingerprint, spec.members), spec.name)
        if other != spec.name:
            raise InputError(f"datasets `{other}` and `{spec.name}` are the same population with the same members.")
        context = DefenseContext(population, spec.members)
        setting = BudgetSetting.of(population, spec.members) if config.budgets else None
        for cell in _cells(config, spec, fingerprint):
            try:
                if cell.family == BUDGET_FAMILY:
                    setting.resolve(cell.parameter)  # a budget at or above f(theta)'s loss fails before any cell
                defense = None if cell.game is not None else parse_defense_spec(cell.spec, context)
                if config.audit is not None:
                    _check_audit(config.audit, defense, population.n_individuals, spec.members)
            except InputError as exc:
                raise InputError(f"dataset `{spec.name}`, defense {cell.spec}: {exc}") from None
        datasets[spec.name] = Dataset(spec, population, fingerprint)
    return datasets


def _check_audit(audit: AuditSpec, defense, n_individuals: int, members: int) -> None:
    """The audit's design fits the dataset: the checks of the canary audit
    (:class:`bngp.mechanism_audit.CanaryPrior`), made before any cell runs.  ``defense`` is
    None for a BNGP cell, whose trained defender claims no guarantee: audited under replace."""
    relation = "replace" if defense is None else resolve_neighbouring("auto", defense)
    m = audit.canaries
    if relation == "replace" and m > members:
        raise InputError(f"`audit.canaries` must be <= members = {members} under the replace relation "
                         f"(every audit dataset has exactly n members), got {m}.")
    if members > n_individuals - m:
        raise InputError(f"`audit.canaries` must leave at least members = {members} non-canaries of the "
                         f"K = {n_individuals} individuals (the pool fills each dataset), got {m}.")
    if defense is not None and audit.requires_noise_law and defense.noise_law is None:
        raise InputError(f"`audit.attack`: {audit.attack!r} needs a closed-form noise law, which this defense "
                         "does not have.")


def _fingerprint(population: Population) -> str:
    parts = population_fingerprint(population.genotypes) + population_fingerprint(population.reference)
    return hashlib.sha256(parts.encode()).hexdigest()


def plan_cells(config: SweepConfig, datasets: dict[str, Dataset]) -> list[Cell]:
    """Every cell of the grid, in the order dataset, defense, kappa or eps, seed."""
    return [cell for spec in config.datasets for cell in _cells(config, spec, datasets[spec.name].fingerprint)]


def _cells(config: SweepConfig, spec: DatasetSpec, fingerprint: str) -> list[Cell]:
    cells = []
    for defense in config.defenses:
        family = split_spec(defense)[0]
        bngp, trained = family == BNGP_FAMILY, family in (BNGP_FAMILY, BUDGET_FAMILY)
        axis = config.kappa if bngp else config.budgets if family in BUDGET_FAMILIES else config.eps
        for parameter in axis:
            for seed in config.seeds:
                game_seed = named_seeds(seed, _PLAIN_STREAMS)["game"]
                game = config.game_config(parameter if bngp else 0.0, game_seed) if trained else None
                value = parameter if family in BUDGET_FAMILIES else float(parameter)
                cells.append(Cell(spec, fingerprint, defense, value, seed, config.attacks, config.releases, game,
                                  config.audit, config.attacker_patience, config.decision))
    return cells
