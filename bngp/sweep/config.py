"""The settings of a sweep: :class:`SweepConfig`, read from a JSON or TOML file and validated
completely on construction (:class:`bngp.errors.InputError`, one line naming the key).

The keys (``docs/sweep.md`` has a full example):

* ``datasets``: a list of ``{path, members[, name]}``: population files written by
  ``bngp simulate`` and the dataset size n; a relative path is read against the config
  file's folder.  ``name`` (default: the file's stem) labels the dataset in the outputs.
* ``defenses``: a list of defense families: ``"bngp"`` (defenders trained in the game, one per
  ``kappa``) and DP mechanisms ``laplace``, ``gaussian``, ``linf``, ``rr`` written as a
  ``--defense`` SPEC without epsilon (``"gaussian:delta=1e-5"``): each is calibrated to every
  ``eps``.
* ``kappa`` / ``eps``: the trade-off weights of the BNGP defenders and the epsilons of the DP
  defenses (each needed exactly when a defense family uses it).
* ``budgets``: utility budgets (mean |x - f(D)|, absolute or a fraction of the data-independent
  release's loss such as ``"0.5x"``) of the families ``"bngp-budget"`` (a defender trained for each
  budget from the best reference mechanism, as ``bngp train --utility-budget``) and the reference
  mechanisms at a budget (``budget-laplace``, ``budget-gaussian``, ``shrinkage:shrink=A``,
  ``suppression``, ``linear-optimal``, ``time-sharing``, written without ``budget=``).
* ``seeds`` (default ``[0]``), ``attacks`` (default :data:`DEFAULT_ATTACKS`), ``releases``
  (evaluation releases per cell, default 50), ``retries`` (of a failed cell, default 2).
* ``attacker_patience``: early stopping of the evaluation's Bayesian attacker
  (:attr:`bngp.attacks.training.AttackerTrainingConfig.patience`, default 4; ``null`` in JSON or
  ``"none"`` (which TOML needs, having no null; also for the optional ``game`` settings): all of
  its steps).
* ``game``: :class:`bngp.game.GameConfig` settings of the BNGP defenders by their flat keys
  (:data:`bngp.game.config.FLAT_KEYS`: ``steps``, ``fresh_check_steps``, ``attacker_refit_every``, ...);
  ``kappa`` and ``seed`` are the sweep's.
* ``audit`` (optional): an end-to-end canary audit of every cell's defense
  (:func:`bngp.mechanism_audit.audit_mechanism`), which records an empirical lower bound on eps
  per cell; its settings are :class:`AuditSpec`'s (``mode``, ``canaries``, ``attack``, ``runs``,
  ``confidence``, ``delta``).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from bngp.attacks.registry import attack_requirements, available_attacks
from bngp.attacks.training import AttackerTrainingConfig
from bngp.defenses.budget import parse_budget
from bngp.defenses.registry import BUDGET_SPECS, DP_SPECS, split_spec
from bngp.errors import InputError
from bngp.game import KAPPA_MAX, GameConfig
from bngp.game.config import FLAT_KEYS
from bngp.mechanism_audit import DEFAULT_RUNS
from bngp.validation import check_patience

__all__ = ["AuditSpec", "DatasetSpec", "SweepConfig", "load_sweep_config", "AUDIT_KEYS", "AUDIT_MODES", "BNGP_FAMILY",
           "BUDGET_FAMILY", "BUDGET_FAMILIES", "DEFAULT_ATTACKS", "GAME_KEYS"]

#: the defense family of the defenders trained in the BNGP game.
BNGP_FAMILY = "bngp"
#: the family of the defenders trained for a utility budget (``bngp train --utility-budget``).
BUDGET_FAMILY = "bngp-budget"
#: the families on the ``budgets`` axis: the trained ones and the reference mechanisms at a budget.
BUDGET_FAMILIES = (BUDGET_FAMILY, *BUDGET_SPECS)
#: the attacks of a sweep that names none: closed-form attacks, fast at any size.
DEFAULT_ATTACKS: tuple[str, ...] = ("lrt", "adaptive-lrt", "score", "reconstruction")
#: the GameConfig settings a config's ``game`` table may set, by their flat keys (:data:`bngp.game.config.FLAT_KEYS`;
#: kappa and seed are the sweep's).
GAME_KEYS: tuple[str, ...] = tuple(key for key in FLAT_KEYS if key not in ("kappa", "kappa_vector", "seed"))

_KEYS = ("datasets", "defenses", "kappa", "eps", "budgets", "seeds", "attacks", "releases", "retries", "attacker_patience",
         "game", "audit", "decision")
#: the settings of the ``audit`` table.
AUDIT_KEYS = ("mode", "canaries", "attack", "runs", "confidence", "delta")
#: the audit modes a sweep can run: both canary audits, which give statistically valid lower bounds.
AUDIT_MODES = ("one-run", "many-run")
_SPEC_SET_BY_SWEEP = ("epsilon", "scale")


@dataclass(frozen=True)
class DatasetSpec:
    """One dataset of the grid: a population file and the dataset size n (members of K)."""

    name: str
    path: Path
    members: int


@dataclass(frozen=True)
class AuditSpec:
    """The ``audit`` table: an end-to-end canary audit of every cell's defense.

    Each cell's defense (a BNGP cell's trained defender, the very object it evaluates; a DP
    cell's calibrated mechanism) is audited by :func:`bngp.mechanism_audit.audit_mechanism` under
    the defense's own neighbouring relation (``replace`` for the trained defenders and the
    default ``paper`` sensitivity), with the cell's ``audit`` seed stream.  The result is a
    lower bound on the eps of the release mechanism that holds with probability ``confidence``.

    Attributes:
        mode: ``"one-run"`` (Steinke, Nasr, Jagielski 2023: one release) or ``"many-run"``
            (``runs`` independent releases: per-canary Clopper-Pearson and the pooled one-run bound).
        canaries: m >= 2 canaries, each included with probability 1/2 (``replace``: m <= n and
            n <= K - m; checked against every dataset before any work).
        attack: the registry attack that scores the canaries (default ``score``, as in the
            ``bngp audit-mechanism`` example).
        runs: the releases of the many-run audit (default :data:`bngp.mechanism_audit.DEFAULT_RUNS`);
            None in one-run mode.
        confidence: 1 - beta of the bound.
        delta: the delta the bound is stated at; None: each defense's claimed delta (0 without one).
    """

    mode: str = "one-run"
    canaries: int = 100
    attack: str = "score"
    runs: int | None = None
    confidence: float = 0.95
    delta: float | None = None

    def __post_init__(self) -> None:
        if self.mode not in AUDIT_MODES:
            raise InputError(f"`audit.mode` must be one of {', '.join(AUDIT_MODES)}, got {self.mode!r}.")
        _check_int("audit.canaries", self.canaries, 2)
        known = available_attacks()
        if not isinstance(self.attack, str) or self.attack not in known:
            raise InputError(f"`audit.attack`: unknown attack {self.attack!r}; known: {', '.join(known)}.")
        if self.mode == "many-run":
            if self.runs is None:
                object.__setattr__(self, "runs", DEFAULT_RUNS)
            _check_int("audit.runs", self.runs, 2)
        elif self.runs is not None:
            raise InputError(f"`audit.runs` applies only to mode many-run (mode {self.mode!r} audits one release), "
                             f"got {self.runs!r}.")
        value = self.confidence
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < 1:
            raise InputError(f"`audit.confidence` must be a number in (0, 1), got {value!r}.")
        object.__setattr__(self, "confidence", float(value))
        if self.delta is not None:
            value = self.delta
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 1:
                raise InputError(f"`audit.delta` must be a number in [0, 1), got {value!r}.")
            object.__setattr__(self, "delta", float(value))

    @property
    def requires_noise_law(self) -> bool:
        """Whether the attack needs a closed-form noise law (the trained defenders have none)."""
        return "noise_law" in attack_requirements(self.attack)

    @classmethod
    def from_dict(cls, data: Any) -> "AuditSpec":
        """The ``audit`` table of a parsed config."""
        if not isinstance(data, Mapping):
            raise InputError(f"`audit` must be a table of audit settings, got {data!r}.")
        unknown = [key for key in data if key not in AUDIT_KEYS]
        if unknown:
            raise InputError(f"unknown audit setting `audit.{unknown[0]}`; known: {', '.join(AUDIT_KEYS)}.")
        return cls(**{str(key): value for key, value in data.items()})

    def to_dict(self) -> dict[str, Any]:
        """The settings in their JSON form (``runs`` resolved), as hashed into each audited cell's key."""
        return {"mode": self.mode, "canaries": self.canaries, "attack": self.attack, "runs": self.runs,
                "confidence": self.confidence, "delta": self.delta}


@dataclass(frozen=True)
class SweepConfig:
    """A validated sweep grid (see the module docstring for the meaning of each field).

    Build it with :meth:`from_dict` or :func:`load_sweep_config`, which resolve relative paths
    and accept the JSON/TOML forms; the constructor takes the canonical forms (tuples, absolute
    paths) and validates them.  ``game`` holds ``(setting, value)`` pairs.
    """

    datasets: tuple[DatasetSpec, ...]
    defenses: tuple[str, ...]
    kappa: tuple[float, ...] = ()
    eps: tuple[float, ...] = ()
    seeds: tuple[int, ...] = (0,)
    attacks: tuple[str, ...] = DEFAULT_ATTACKS
    releases: int = 50
    retries: int = 2
    attacker_patience: int | None = AttackerTrainingConfig.patience
    game: tuple[tuple[str, Any], ...] = ()
    audit: AuditSpec | None = None
    budgets: tuple[str, ...] = ()
    decision: bool = False

    def __post_init__(self) -> None:
        _check_datasets(self.datasets)
        _check_defenses(self.defenses)
        families = {split_spec(entry)[0] for entry in self.defenses}
        uses_kappa, uses_eps = BNGP_FAMILY in families, bool(families - {BNGP_FAMILY, *BUDGET_FAMILIES})
        uses_budgets = bool(families & set(BUDGET_FAMILIES))
        if uses_budgets and not self.budgets:
            raise InputError("`budgets` must list at least one utility budget for a `bngp-budget` or reference defense.")
        if self.budgets and not uses_budgets:
            raise InputError("`budgets` is given but no defense uses it (it is for `bngp-budget` and the references "
                             "at a budget).")
        _check_unique("budgets", self.budgets)
        for index, text in enumerate(self.budgets):
            try:
                parse_budget(text)
            except InputError as exc:
                raise InputError(f"`budgets[{index}]`: {exc}") from None
        _check_axis("kappa", self.kappa, uses_kappa, "the `bngp` defense", lambda v: 0 <= v <= KAPPA_MAX,
                    f"in [0, {KAPPA_MAX:g}]")
        _check_axis("eps", self.eps, uses_eps, "a DP defense", lambda v: v > 0, "> 0")
        _check_unique("seeds", self.seeds)
        for index, seed in enumerate(self.seeds):
            if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
                raise InputError(f"`seeds[{index}]` must be an integer >= 0, got {seed!r}.")
        _check_attacks(self.attacks)
        _check_int("releases", self.releases, 2)
        _check_int("retries", self.retries, 0)
        check_patience("attacker_patience", self.attacker_patience, unset="null")
        _check_game(self.game)
        for kappa in self.kappa:  # GameConfig checks the values of its settings, at every kappa
            try:
                self.game_config(kappa, 0)
            except InputError as exc:
                raise InputError(f"`game`: {exc}") from None
        if self.audit is not None:
            if not isinstance(self.audit, AuditSpec):
                raise InputError(f"`audit` must be an AuditSpec, got {type(self.audit).__name__}.")
            if uses_kappa and self.audit.requires_noise_law:
                raise InputError(f"`audit.attack`: {self.audit.attack!r} needs a closed-form noise law, which the "
                                 "trained `bngp` defenders do not have; pick another attack.")

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], base_dir: str | os.PathLike | None = None) -> "SweepConfig":
        """Validate a parsed JSON/TOML config; relative dataset paths are read against
        ``base_dir`` (default: the current directory).  A single number or name stands for a
        one-element list."""
        if not isinstance(data, Mapping):
            raise InputError(f"a sweep config must be a table of settings, got {type(data).__name__}.")
        unknown = [key for key in data if key not in _KEYS]
        if unknown:
            raise InputError(f"unknown sweep setting `{unknown[0]}`; known: {', '.join(_KEYS)}.")
        for key in ("datasets", "defenses"):
            if key not in data:
                raise InputError(f"`{key}` is required.")
        base = Path(base_dir) if base_dir is not None else Path.cwd()
        game = data.get("game", {})
        if not isinstance(game, Mapping):
            raise InputError(f"`game` must be a table of GameConfig settings, got {type(game).__name__}.")
        attacks = data.get("attacks", DEFAULT_ATTACKS)
        if isinstance(attacks, str):
            attacks = [name.strip() for name in attacks.split(",") if name.strip()]
        return cls(
            datasets=tuple(_dataset(index, entry, base) for index, entry in enumerate(_as_list(data["datasets"]))),
            defenses=tuple(_as_list(data["defenses"])),
            kappa=tuple(_number(f"kappa[{i}]", v) for i, v in enumerate(_as_list(data.get("kappa", [])))),
            eps=tuple(_number(f"eps[{i}]", v) for i, v in enumerate(_as_list(data.get("eps", [])))),
            seeds=tuple(_as_list(data.get("seeds", [0]))),
            attacks=tuple(_as_list(attacks)),
            releases=data.get("releases", 50),
            retries=data.get("retries", 2),
            attacker_patience=_none_word(data.get("attacker_patience", AttackerTrainingConfig.patience)),
            game=tuple((str(key), tuple(value) if isinstance(value, list) else _none_word(value)) for key, value in game.items()),
            audit=None if data.get("audit") is None else AuditSpec.from_dict(data["audit"]),
            budgets=tuple(str(value).strip() for value in _as_list(data.get("budgets", []))),
            decision=_flag("decision", data.get("decision", False)),
        )

    def game_config(self, kappa: float, seed: int) -> GameConfig:
        """The GameConfig of the BNGP defender at ``kappa`` trained with ``seed``."""
        return GameConfig.from_flat({**dict(self.game), "kappa": float(kappa), "seed": seed})

    def to_dict(self) -> dict[str, Any]:
        """The config in its JSON form (absolute dataset paths), as recorded in ``sweep.json``;
        ``audit`` only when the sweep audits its cells, ``budgets`` only when it has some."""
        payload = {
            "datasets": [{"name": d.name, "path": str(d.path), "members": d.members} for d in self.datasets],
            "defenses": list(self.defenses),
            "kappa": list(self.kappa),
            "eps": list(self.eps),
            "seeds": list(self.seeds),
            "attacks": list(self.attacks),
            "releases": self.releases,
            "retries": self.retries,
            "attacker_patience": self.attacker_patience,
            "game": {key: list(value) if isinstance(value, tuple) else value for key, value in self.game},
        }
        if self.audit is not None:
            payload["audit"] = self.audit.to_dict()
        if self.budgets:
            payload["budgets"] = list(self.budgets)
        if self.decision:
            payload["decision"] = True
        return payload


def _flag(name: str, value: Any) -> bool:
    """A true/false setting of the config."""
    if not isinstance(value, bool):
        raise InputError(f"`{name}` must be true or false, got {value!r}.")
    return value


def load_sweep_config(path: str | os.PathLike) -> SweepConfig:
    """Read and validate a sweep config file (``.json``, or ``.toml`` on Python 3.11+);
    errors name the file."""
    path = Path(path)
    try:
        data = _parse(path)
        return SweepConfig.from_dict(data, path.resolve().parent)
    except InputError as exc:
        raise InputError(f"{path}: {exc}") from None


def _parse(path: Path) -> Any:
    suffix = path.suffix.lower()
    if suffix not in (".json", ".toml"):
        raise InputError(f"a sweep config must be a .json or .toml file, got {path.name!r}.")
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read the sweep config ({exc.strerror or type(exc).__name__}).") from None
    if suffix == ".json":
        try:
            return json.loads(raw)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise InputError(f"not valid JSON ({str(exc).splitlines()[0]}).") from None
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        raise InputError("TOML configs need Python 3.11 or later (tomllib); write the config as JSON.") from None
    try:
        return tomllib.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise InputError(f"not valid TOML ({str(exc).splitlines()[0]}).") from None


def _as_list(value: Any) -> list:
    return list(value) if isinstance(value, (list, tuple)) else [value]


def _number(key: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise InputError(f"`{key}` must be a finite number, got {value!r}.")
    return float(value)


def _check_int(key: str, value: Any, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise InputError(f"`{key}` must be an integer >= {minimum}, got {value!r}.")


def _check_unique(key: str, values: tuple) -> None:
    duplicate = next((v for i, v in enumerate(values) if v in values[:i]), None)
    if duplicate is not None:
        raise InputError(f"`{key}` lists {duplicate!r} twice.")


def _dataset(index: int, entry: Any, base: Path) -> DatasetSpec:
    key = f"datasets[{index}]"
    if not isinstance(entry, Mapping):
        raise InputError(f"`{key}` must be a table {{path, members[, name]}}, got {entry!r}.")
    unknown = [k for k in entry if k not in ("path", "members", "name")]
    if unknown:
        raise InputError(f"`{key}` has an unknown setting `{unknown[0]}`; known: path, members, name.")
    for required in ("path", "members"):
        if required not in entry:
            raise InputError(f"`{key}.{required}` is required.")
    if not isinstance(entry["path"], str) or not entry["path"]:
        raise InputError(f"`{key}.path` must be a file name, got {entry['path']!r}.")
    path = (base / entry["path"]).resolve()
    name = entry.get("name", path.stem)
    return DatasetSpec(name=name, path=path, members=entry["members"])


def _check_datasets(datasets: tuple[DatasetSpec, ...]) -> None:
    if not datasets:
        raise InputError("`datasets` must list at least one dataset.")
    for index, dataset in enumerate(datasets):
        key = f"datasets[{index}]"
        if not isinstance(dataset.name, str) or not dataset.name:
            raise InputError(f"`{key}.name` must be a non-empty string, got {dataset.name!r}.")
        if Path(dataset.path).is_dir():
            raise InputError(f"`{key}.path` is a directory, not a population file: {dataset.path}")
        if not Path(dataset.path).is_file():
            raise InputError(f"`{key}.path`: no population file {dataset.path}.")
        _check_int(f"{key}.members", dataset.members, 1)
    names = [d.name for d in datasets]
    twice = next((name for i, name in enumerate(names) if name in names[:i]), None)
    if twice is not None:
        raise InputError(f"`datasets` has two datasets named {twice!r}; give them distinct `name`s.")


def _check_defenses(defenses: tuple[str, ...]) -> None:
    if not defenses:
        raise InputError("`defenses` must list at least one defense.")
    _check_unique("defenses", defenses)
    known = (BNGP_FAMILY, *DP_SPECS, *BUDGET_FAMILIES)
    for index, entry in enumerate(defenses):
        key = f"defenses[{index}]"
        if not isinstance(entry, str):
            raise InputError(f"`{key}` must be a defense SPEC string, got {entry!r}.")
        name, params = split_spec(entry)
        if name not in known:
            raise InputError(f"`{key}`: unknown defense family {name!r}; known: {', '.join(known)}.")
        if name in (BNGP_FAMILY, BUDGET_FAMILY) and params:
            raise InputError(f"`{key}`: `{name}` takes no parameters (set the game's in the `game` table).")
        if name in BUDGET_FAMILIES:
            if "budget" in params:
                raise InputError(f"`{key}`: `budget` is set by the `budgets` axis; write {name!r} without it.")
            continue
        fixed = [p for p in params if p in _SPEC_SET_BY_SWEEP]
        if fixed:
            raise InputError(f"`{key}`: `{fixed[0]}` is set by the `eps` axis; write {name!r} without it.")


def _check_axis(key: str, values: tuple[float, ...], used: bool, user: str, valid, valid_text: str) -> None:
    if used and not values:
        raise InputError(f"`{key}` must list at least one value for {user}.")
    if values and not used:
        raise InputError(f"`{key}` is given but no defense uses it (it is for {user}).")
    _check_unique(key, values)
    for index, value in enumerate(values):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or not valid(value):
            raise InputError(f"`{key}[{index}]` must be a number {valid_text}, got {value!r}.")


def _check_attacks(attacks: tuple[str, ...]) -> None:
    if not attacks:
        raise InputError("`attacks` must name at least one attack.")
    _check_unique("attacks", attacks)
    known = available_attacks()
    for index, name in enumerate(attacks):
        if name != "all" and name not in known:
            raise InputError(f"`attacks[{index}]`: unknown attack {name!r}; known: {', '.join(known)}, all.")


#: the JSON types of a GameConfig setting, by its annotation (Literal aliases are strings).
_GAME_TYPES = {"int": (int,), "float": (int, float), "bool": (bool,)}


def _none_word(value: Any) -> Any:
    """The string "none" (any case) as None: TOML has no null, so a TOML config writes an unset
    optional setting (``attacker_patience``, ``game.fresh_check_patience``, ...) as "none"."""
    return None if isinstance(value, str) and value.strip().lower() == "none" else value


def _flat_annotations() -> dict[str, str]:
    """The annotation of each flat GameConfig setting (:data:`bngp.game.config.FLAT_KEYS`), as a string."""
    default = GameConfig()
    annotations = {}
    for key, (group, name) in FLAT_KEYS.items():
        owner = default if group is None else getattr(default, group)
        annotations[key] = str(next(f.type for f in fields(owner) if f.name == name))
    return annotations


def _check_game(game: tuple[tuple[str, Any], ...]) -> None:
    annotations = _flat_annotations()
    for key, value in game:
        if key not in GAME_KEYS:
            reason = "is set by the sweep" if key in annotations else "is not a GameConfig setting"
            raise InputError(f"`game.{key}` {reason}; settable: {', '.join(GAME_KEYS)}.")
        kinds = [part.strip() for part in annotations[key].split("|")]
        if value is None and "None" in kinds:
            continue
        kind = kinds[0]
        if kind.startswith("tuple"):
            ok = isinstance(value, tuple) and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value)
        elif kind in _GAME_TYPES:
            ok = isinstance(value, _GAME_TYPES[kind]) and (kind == "bool" or not isinstance(value, bool))
        else:
            ok = isinstance(value, str)
        if not ok:
            raise InputError(f"`game.{key}` must be of type {annotations[key]}, got {value!r}.")
