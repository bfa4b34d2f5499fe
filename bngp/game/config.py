"""Settings of a BNGP training run (arXiv:2410.07414, section 3 and App. L.8), their stored forms, and
the names of the files a run directory holds.

:class:`GameConfig` is nested by role: :class:`ObjectiveSettings` (what the defender minimises),
:class:`DefenderSettings` (G and its optimiser), :class:`AttackerSettings` (the in-game H, its
optimiser and closed-form refits), :class:`SelectionSettings` (which defender state is delivered) and
:class:`FreshCheckSettings` (the post-training attack).  The defender and attacker groups give the
architecture records of :mod:`bngp.defenses.network` and :mod:`bngp.attacks.network` once the
population's sizes are known (:meth:`DefenderSettings.spec`, :meth:`AttackerSettings.spec`).

Stored forms.  :meth:`GameConfig.to_dict` writes the nested form, ``{"version": 2, ...}``.  The flat
form of version 1 (one key per setting, :data:`FLAT_KEYS`, without a version key) is the settings'
identity: sweep cell keys, run reuse and checkpoint resumption compare it, and the sweep's ``game``
table and :meth:`GameConfig.from_flat` use its keys.  A stored config of either version is read, through
one reader of the version, into its flat form (:func:`flat_record`) or into a config
(:meth:`GameConfig.from_dict`).  Why the defaults are what they are is in ``docs/design/game.md``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import TYPE_CHECKING, Any, Literal, get_args

import numpy as np

from bngp.errors import InputError
from bngp.rng import SeedLike, resolve_seed
from bngp.validation import check_patience

if TYPE_CHECKING:
    from bngp.attacks.network import AttackerInit, AttackerSpec
    from bngp.defenses.network import DefenderSpec

__all__ = [
    "GameConfig",
    "ObjectiveSettings",
    "DefenderSettings",
    "AttackerSettings",
    "SelectionSettings",
    "FreshCheckSettings",
    "Objective",
    "Leakage",
    "AttackerKind",
    "OBJECTIVES",
    "ATTACKER_KINDS",
    "CHECKPOINT_FILE",
    "CONFIG_FILE",
    "SUMMARY_FILE",
    "CONFIG_VERSION",
    "FLAT_KEYS",
    "flat_record",
    "REFIT_VALIDATION_DRAWS",
    "KAPPA_MAX",
    "INFEASIBLE",
    "BUDGET_TOLERANCE",
]

Objective = Literal["preference", "utility-budget", "privacy-budget"]
Leakage = Literal["clamped", "raw"]
#: the in-game attacker: "population" = H(x) with one output per known individual (App. L.8,
#: :class:`bngp.attacks.network.Attacker`); "per-individual" = H(x, d_k) with weights shared across
#: individuals (:mod:`bngp.attacks.per_individual_network`).
AttackerKind = Literal["population", "per-individual"]

OBJECTIVES: tuple[str, ...] = get_args(Objective)
ATTACKER_KINDS: tuple[str, ...] = get_args(AttackerKind)
CHECKPOINT_FILE = "checkpoint.pt"
CONFIG_FILE = "config.json"
SUMMARY_FILE = "summary.json"
#: the version of the nested form :meth:`GameConfig.to_dict` writes (the flat form is version 1).
CONFIG_VERSION = 2
#: held-out draws on which an in-game refit chooses the ridge penalty (by AUC), compares the ridge
#: head with the population inversion, and scores the defender for selection.
REFIT_VALIDATION_DRAWS = 500
#: the largest trade-off weight: larger ones overflow the float32 losses (a utility loss of 1e-6
#: weighted by it outweighs any leakage, which is at most log 2 nats per individual).
KAPPA_MAX = 1e6
#: selection score offset of defender states that miss their budget (they rank after every state that meets it).
INFEASIBLE = 1e3
#: relative tolerance of a budget: a state measured at up to (1 + this) x the budget meets it (the sampling
#: error of a loss measured on a few hundred draws; a start calibrated to the budget exactly must not fail it).
BUDGET_TOLERANCE = 0.02


def _check_at_least(values: dict[str, int], least: int) -> None:
    """Each value >= ``least``; ``values`` maps the setting's flat name to its value."""
    for name, value in values.items():
        if int(value) < least:
            raise InputError(f"`{name}` must be >= {least}, got {value}.")


@dataclass(frozen=True)
class ObjectiveSettings:
    """What the defender minimises (section 3.3; App. M; section 4.3).

    Attributes:
        kind: one of :data:`OBJECTIVES`: "preference" minimises leakage + sum_j kappa_j |x_j - f(D)_j| / |Q|;
            "utility-budget" minimises leakage s.t. mean |x - f(D)| <= ``budget``; "privacy-budget"
            minimises mean |x - f(D)| s.t. leakage <= ``budget`` (both by a Lagrange multiplier with dual ascent).
        kappa: scalar trade-off weight (used when ``kappa_vector`` is None), in [0, KAPPA_MAX].
        kappa_vector: per-attribute weights kappa_j (length |Q|), or None.
        budget: the budget of the utility-/privacy-budget objectives.
        dual_lr: step size of the multiplier's dual ascent.
        recalibrate: measure the leakage after the attacker's best affine recalibration.
        leakage: "clamped" (max(h - CEL, 0)) or "raw" (h - CEL, the paper's -CEL up to a constant).
        against: "bayesian" (the BNGP game) or the name of a differentiable attack ("lrt",
            "adaptive-lrt", "score") for a best-response defender (App. M, :mod:`bngp.game.best_response`).
        dp_epsilon: eps of the BGBP response constraint DPH^eps (section 4.3, Prop. 10), enforced by a
            penalty of weight ``dp_penalty``; None = no constraint.
    """

    kind: Objective = "preference"
    kappa: float = 0.0
    kappa_vector: tuple[float, ...] | None = None
    budget: float | None = None
    dual_lr: float = 0.05
    recalibrate: bool = True
    leakage: Leakage = "clamped"
    against: str = "bayesian"
    dp_epsilon: float | None = None
    dp_penalty: float = 10.0

    def __post_init__(self) -> None:
        if self.kind not in OBJECTIVES:
            raise InputError(f"`objective` must be one of {', '.join(OBJECTIVES)}, got {self.kind!r}.")
        if not (math.isfinite(self.kappa) and 0 <= self.kappa <= KAPPA_MAX):
            raise InputError(f"`kappa` must be a number in [0, {KAPPA_MAX:g}], got {self.kappa}.")
        if self.kappa_vector is not None:
            values = np.asarray(self.kappa_vector, dtype=np.float64)
            if values.ndim != 1 or not np.all(np.isfinite(values)) or np.any(values < 0) or np.any(values > KAPPA_MAX):
                raise InputError(f"`kappa_vector` must be a 1-D array of numbers in [0, {KAPPA_MAX:g}].")
        if self.kind != "preference":
            if self.budget is None or not math.isfinite(self.budget) or self.budget < 0:
                raise InputError(f"`budget` must be a finite number >= 0 for objective {self.kind!r}, got {self.budget}.")
        if self.dp_epsilon is not None and not (math.isfinite(self.dp_epsilon) and self.dp_epsilon > 0):
            raise InputError(f"`dp_epsilon` must be a finite number > 0, got {self.dp_epsilon}.")
        if self.leakage not in get_args(Leakage):
            raise InputError(f"`leakage` must be 'clamped' or 'raw', got {self.leakage!r}.")
        if self.against != "bayesian":
            from bngp.attacks.registry import available_attacks

            if self.against not in available_attacks():
                raise InputError(f"`against` must be 'bayesian' or an attack name, got {self.against!r}.")
        if not self.dp_penalty >= 0:
            raise InputError(f"`dp_penalty` must be >= 0, got {self.dp_penalty}.")

    def kappa_weights(self, n_outputs: int) -> np.ndarray:
        """kappa_j for every released attribute (length ``n_outputs``)."""
        if self.kappa_vector is None:
            return np.full(n_outputs, self.kappa)
        weights = np.asarray(self.kappa_vector, dtype=np.float64)
        if weights.size != n_outputs:
            raise InputError(f"`kappa` vector must have {n_outputs} entries (|Q|), got {weights.size}.")
        return weights


@dataclass(frozen=True)
class DefenderSettings:
    """The defender G (:class:`bngp.defenses.network.Defender`, App. L.8 Table 1a) and its optimiser.

    Attributes:
        noise_dim: q, the dimension of G's randomness r.
        skip: a zero-initialised linear skip b -> G's pre-sigmoid output.
        shrink: a learned per-attribute shrinkage alpha of the release towards the prior-mean statistic
            f(theta), trained at ``shrink_lr`` from ``shrink_init``.
        full_rank_noise: learned per-attribute noise sigma * e, e ~ N(0, I) or i.i.d. Laplace(1).
        zero_output: start G's output layer at zero (with ``shrink_init`` = 1 training starts at the
            data-independent release f(theta)).
        noise_law: the law of that e, "gaussian" or "laplace".
        lr: Adam's step size for G's network weights (App. L.8).
        shrink_lr: Adam's step size for alpha and sigma (no weight decay).
        shrink_init: alpha's starting value, in [0, 1].
        fixed_gaussian_sigmas: standard deviations of fixed Gaussian mechanisms composed before the
            learned one (App. L.6): the release is [f(D) + N(0, s_1^2), ..., f(D) + G(b, r)].
    """

    noise_dim: int = 30
    skip: bool = False
    shrink: bool = True
    full_rank_noise: bool = True
    zero_output: bool = True
    noise_law: str = "gaussian"
    lr: float = 1e-3
    shrink_lr: float = 1e-2
    shrink_init: float = 1.0
    fixed_gaussian_sigmas: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        _check_at_least({"noise_dim": self.noise_dim}, 1)
        if not (math.isfinite(self.shrink_lr) and self.shrink_lr > 0):
            raise InputError(f"`shrink_lr` must be a finite number > 0, got {self.shrink_lr}.")
        if not 0.0 <= self.shrink_init <= 1.0:
            raise InputError(f"`shrink_init` must be in [0, 1], got {self.shrink_init}.")
        if self.noise_law not in ("gaussian", "laplace"):
            raise InputError(f"`noise_law` must be 'gaussian' or 'laplace', got {self.noise_law!r}.")
        if any(not (math.isfinite(s) and s > 0) for s in self.fixed_gaussian_sigmas):
            raise InputError("`fixed_gaussian_sigmas` must be finite numbers > 0.")

    def spec(self, n_individuals: int, n_outputs: int) -> DefenderSpec:
        """G's architecture for K = ``n_individuals`` and |Q| = ``n_outputs``."""
        from bngp.defenses.network import DefenderSpec

        return DefenderSpec(n_individuals, n_outputs, self.noise_dim, skip=self.skip, shrink=self.shrink,
                            full_rank_noise=self.full_rank_noise, noise_law=self.noise_law)


@dataclass(frozen=True)
class AttackerSettings:
    """The in-game attacker H, its optimiser and its closed-form refits (App. L.8).

    Attributes:
        kind: one of :data:`ATTACKER_KINDS`.  With "per-individual" the refits set that attacker's
            linear part in closed form
            (:meth:`bngp.attacks.per_individual_network.PerIndividualAttacker.fit_linear_part`)
            instead of the K-output linear head.
        init: one of :data:`bngp.attacks.network.ATTACKER_INITS`: the initialisation of the "population"
            attacker (in game) and of the fresh-attacker check's network.
        steps: attacker updates per defender update.
        lr: Adam's step size.
        individual_batch: individuals scored per attacker and defender update (per-individual attacker
            only; None = all K): each update draws a uniform subset S of this size without replacement;
            the cross-entropies and the leakage averaged over the pairs (release, k in S) are unbiased
            for their average over all K.  Refits, selection and evaluations score all K.
        refit_every: defender steps between closed-form refits of H's linear part on ``refit_releases``
            releases of the current defender (default :func:`bngp.linear.default_shadow_releases`, or for
            the per-individual attacker :data:`bngp.attacks.per_individual_network.REFIT_RELEASES`); 0 = never.
        refit_releases: see ``refit_every``.
        train_refitted_head: also train the refitted part by Adam between refits.
        pool_copies: in a composed game (``DefenderSettings.fixed_gaussian_sigmas``) H reads the fixed
            copies pooled, z = sum_b s_b^-2 x_b / sum_b s_b^-2, next to the whole learned block.  Without
            clipping z is sufficient for f(D) given the fixed copies (their Gaussian likelihood depends on
            f(D) only through z), so H loses nothing a whole-release attacker reads.  The learned block
            is never pooled; the fresh-attacker check reads the whole release.
    """

    kind: AttackerKind = "population"
    init: AttackerInit = "reconstruction"
    steps: int = 2
    lr: float = 1e-3
    individual_batch: int | None = None
    refit_every: int = 50
    refit_releases: int | None = None
    train_refitted_head: bool = False
    pool_copies: bool = True

    def __post_init__(self) -> None:
        from bngp.attacks.network import ATTACKER_INITS

        _check_at_least({"attacker_steps": self.steps}, 1)
        if self.refit_every < 0:
            raise InputError(f"`attacker_refit_every` must be >= 0, got {self.refit_every}.")
        if self.init not in ATTACKER_INITS:
            raise InputError(f"`attacker_init` must be one of {', '.join(ATTACKER_INITS)}, got {self.init!r}.")
        if self.kind not in ATTACKER_KINDS:
            raise InputError(f"`attacker_kind` must be one of {', '.join(ATTACKER_KINDS)}, got {self.kind!r}.")
        if self.individual_batch is not None:
            if self.kind != "per-individual":
                raise InputError("`individual_batch` needs `attacker_kind` per-individual.")
            if int(self.individual_batch) < 1:
                raise InputError(f"`individual_batch` must be >= 1, got {self.individual_batch}.")

    def spec(self, n_outputs: int, n_individuals: int) -> AttackerSpec:
        """The K-output H's architecture for an input of width ``n_outputs`` and K = ``n_individuals``."""
        from bngp.attacks.network import AttackerSpec

        return AttackerSpec(n_outputs, n_individuals, init=self.init)


@dataclass(frozen=True)
class SelectionSettings:
    """Which defender state the run delivers (:mod:`bngp.game.selection`).

    Attributes:
        enabled: keep the state that did best against a freshly refitted attacker, by the defender's own
            objective on ``REFIT_VALIDATION_DRAWS`` held-out draws.
        patience: stop training at step s + P * ``AttackerSettings.refit_every`` when the state kept from
            step s has not been bettered since (P = this patience); the run up to the stop is the first part
            of the run without it (same draws, same updates).  None: all ``GameConfig.steps``.  Inert
            without selection (``enabled`` off, no refits, or a fixed opponent).
    """

    enabled: bool = True
    patience: int | None = 8

    def __post_init__(self) -> None:
        check_patience("selection_patience", self.patience)


@dataclass(frozen=True)
class FreshCheckSettings:
    """The attacker trained against the frozen defender after training (:mod:`bngp.game.checks`).

    Attributes:
        steps: its steps (0 = skip the check); its AUC is the number to trust.
        patience: its early stopping (:attr:`bngp.attacks.training.AttackerTrainingConfig.patience`: it stops
            once this many validations in a row, 100 steps apart, have not lowered its validation loss,
            keeping its best state), or None for all ``steps``.
    """

    steps: int = 1000
    patience: int | None = 4

    def __post_init__(self) -> None:
        if self.steps < 0:
            raise InputError(f"`fresh_check_steps` must be >= 0, got {self.steps}.")
        check_patience("fresh_check_patience", self.patience)


_GROUPS: dict[str, type] = {"objective": ObjectiveSettings, "defender": DefenderSettings, "attacker": AttackerSettings,
                            "selection": SelectionSettings, "fresh_check": FreshCheckSettings}


@dataclass(frozen=True)
class GameConfig:
    """Settings of one training run of the BNGP game (arXiv:2410.07414, section 3, App. L.8).

    Validated on construction (:class:`bngp.errors.InputError`).

    Attributes:
        steps: defender updates.
        batch_size: membership draws per update (>= 2, batch normalisation).
        weight_decay, lr_decay, decay_every: Adam's weight decay and the ExponentialLR decay of both
            players' step sizes, applied every ``decay_every`` defender steps (App. L.8).
        eval_every: steps between held-out evaluations (TensorBoard, collapse check).
        eval_batch: draws in the held-out evaluation batch.
        checkpoint_every: steps between checkpoints.
        seed: the run's seed, an int, None or a Generator, held as the int it resolves to
            (:func:`bngp.rng.resolve_seed`); every stream of the run is spawned from it.
        objective, defender, attacker, selection, fresh_check: the groups of settings.
    """

    steps: int = 1500
    batch_size: int = 128
    weight_decay: float = 1e-5
    lr_decay: float = 0.988
    decay_every: int = 50
    eval_every: int = 50
    eval_batch: int = 256
    checkpoint_every: int = 250
    seed: SeedLike = 0
    objective: ObjectiveSettings = field(default_factory=ObjectiveSettings)
    defender: DefenderSettings = field(default_factory=DefenderSettings)
    attacker: AttackerSettings = field(default_factory=AttackerSettings)
    selection: SelectionSettings = field(default_factory=SelectionSettings)
    fresh_check: FreshCheckSettings = field(default_factory=FreshCheckSettings)

    def __post_init__(self) -> None:
        object.__setattr__(self, "seed", resolve_seed(self.seed))
        _check_at_least({name: getattr(self, name) for name in ("steps", "batch_size", "eval_every", "eval_batch", "checkpoint_every")}, 1)
        if self.batch_size < 2:
            raise InputError(f"`batch_size` must be >= 2 (batch normalisation), got {self.batch_size}.")
        if self.objective.against != "bayesian" and self.defender.fixed_gaussian_sigmas:
            raise InputError("`against` (a fixed opponent) reads the release of one mechanism: it cannot be "
                             "combined with `fixed_gaussian_sigmas` (a composed release).")

    @classmethod
    def from_flat(cls, settings: Mapping[str, Any]) -> GameConfig:
        """The config of flat settings (the keys of :data:`FLAT_KEYS`, as the sweep's ``game`` table writes
        them); a setting not given takes its default."""
        unknown = [key for key in settings if key not in FLAT_KEYS]
        if unknown:
            raise InputError(f"`{unknown[0]}` is not a GameConfig setting.")
        top: dict[str, Any] = {}
        groups: dict[str, dict[str, Any]] = {name: {} for name in _GROUPS}
        for key, value in settings.items():
            group, name = FLAT_KEYS[key]
            (top if group is None else groups[group])[name] = tuple(value) if isinstance(value, list) else value
        return cls(**top, **{name: _GROUPS[name](**values) for name, values in groups.items()})

    @classmethod
    def from_dict(cls, record: Mapping[str, Any]) -> GameConfig:
        """The config of a stored record of either version (:func:`flat_record`)."""
        return cls.from_flat(_settings(record))

    def to_dict(self) -> dict[str, Any]:
        """The nested form (version :data:`CONFIG_VERSION`), as ``config.json`` and checkpoints store it."""
        data: dict[str, Any] = {"version": CONFIG_VERSION}
        for item in fields(self):
            value = getattr(self, item.name)
            data[item.name] = _jsonable(asdict(value)) if item.name in _GROUPS else value
        return data

    def flat(self) -> dict[str, Any]:
        """The version-1 flat form: the settings' identity (sweep cell keys, run reuse, resumption)."""
        return flat_record(self.to_dict())


def _jsonable(values: dict[str, Any]) -> dict[str, Any]:
    return {key: list(value) if isinstance(value, tuple) else value for key, value in values.items()}


#: flat key -> (group, field) of every setting, in the order of the version-1 form (group None: top level).
FLAT_KEYS: dict[str, tuple[str | None, str]] = {
    "steps": (None, "steps"),
    "attacker_steps": ("attacker", "steps"),
    "batch_size": (None, "batch_size"),
    "objective": ("objective", "kind"),
    "kappa": ("objective", "kappa"),
    "kappa_vector": ("objective", "kappa_vector"),
    "budget": ("objective", "budget"),
    "dual_lr": ("objective", "dual_lr"),
    "noise_dim": ("defender", "noise_dim"),
    "defender_lr": ("defender", "lr"),
    "attacker_lr": ("attacker", "lr"),
    "weight_decay": (None, "weight_decay"),
    "lr_decay": (None, "lr_decay"),
    "decay_every": (None, "decay_every"),
    "attacker_init": ("attacker", "init"),
    "attacker_kind": ("attacker", "kind"),
    "individual_batch": ("attacker", "individual_batch"),
    "defender_skip": ("defender", "skip"),
    "defender_shrink": ("defender", "shrink"),
    "defender_full_rank_noise": ("defender", "full_rank_noise"),
    "defender_zero_output": ("defender", "zero_output"),
    "noise_law": ("defender", "noise_law"),
    "shrink_lr": ("defender", "shrink_lr"),
    "shrink_init": ("defender", "shrink_init"),
    "against": ("objective", "against"),
    "dp_epsilon": ("objective", "dp_epsilon"),
    "dp_penalty": ("objective", "dp_penalty"),
    "fixed_gaussian_sigmas": ("defender", "fixed_gaussian_sigmas"),
    "recalibrate": ("objective", "recalibrate"),
    "leakage": ("objective", "leakage"),
    "attacker_refit_every": ("attacker", "refit_every"),
    "train_refitted_head": ("attacker", "train_refitted_head"),
    "pool_copies": ("attacker", "pool_copies"),
    "refit_releases": ("attacker", "refit_releases"),
    "select_defender": ("selection", "enabled"),
    "selection_patience": ("selection", "patience"),
    "eval_every": (None, "eval_every"),
    "eval_batch": (None, "eval_batch"),
    "checkpoint_every": (None, "checkpoint_every"),
    "fresh_check_steps": ("fresh_check", "steps"),
    "fresh_check_patience": ("fresh_check", "patience"),
    "seed": (None, "seed"),
}


#: the meaning of a setting a version-1 record leaves out (see :func:`flat_record`).
_LEFT_OUT = {"fresh_check_patience": None, "selection_patience": None, "pool_copies": False, "noise_law": "gaussian"}


def _settings(record: Mapping[str, Any]) -> dict[str, Any]:
    """Every flat setting of a stored config of either version: the one place that reads the version."""
    version = record.get("version", 1)
    if version == 1:
        data = dict(record)
        for name, value in _LEFT_OUT.items():
            data.setdefault(name, value)
        return data
    if version != CONFIG_VERSION:
        raise InputError(f"a game config of version {version!r}; this bngp reads versions 1 and {CONFIG_VERSION}.")
    return {key: record[name] if group is None else record[group][name] for key, (group, name) in FLAT_KEYS.items()}


def flat_record(record: Mapping[str, Any]) -> dict[str, Any]:
    """The version-1 flat form of a stored config of either version.

    The flat form has one key per setting (:data:`FLAT_KEYS`) and leaves out ``fresh_check_patience`` and
    ``selection_patience`` when None, ``pool_copies`` unless a composed game pools, and ``noise_law`` when
    Gaussian, so that a version-1 record reads back as it was stored.

    Raises:
        InputError: a version this reader does not know.
    """
    data = _settings(record)
    for name in ("fresh_check_patience", "selection_patience"):
        if data[name] is None:
            del data[name]
    if not (data["pool_copies"] and data.get("fixed_gaussian_sigmas")):
        del data["pool_copies"]
    if data["noise_law"] == "gaussian":
        del data["noise_law"]
    return data
