"""Settings of a BNGP training run (arXiv:2410.07414, section 3 and App. L.8) and the names
of the files a run directory holds."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Literal, get_args

import numpy as np

from bngp.errors import InputError
from bngp.rng import SeedLike, resolve_seed
from bngp.validation import check_patience

if TYPE_CHECKING:
    from bngp.attacks.network import AttackerInit

__all__ = [
    "GameConfig",
    "Objective",
    "Leakage",
    "AttackerKind",
    "OBJECTIVES",
    "ATTACKER_KINDS",
    "CHECKPOINT_FILE",
    "CONFIG_FILE",
    "SUMMARY_FILE",
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
#: held-out draws on which an in-game refit chooses the ridge penalty (by AUC), compares the ridge
#: head with the population inversion, and scores the defender for selection.
REFIT_VALIDATION_DRAWS = 500
#: the largest trade-off weight: larger ones overflow the float32 losses (kappa = 1e6 already
#: makes a utility loss of 1e-6 outweigh any leakage, at most log 2 nats per individual).
KAPPA_MAX = 1e6
#: selection score offset of defender states that miss their budget (they rank after every state that meets it).
INFEASIBLE = 1e3
#: relative tolerance of a budget: a state measured at up to (1 + this) x the budget meets it (the sampling
#: error of a loss measured on a few hundred draws; a start calibrated to the budget exactly must not fail it).
BUDGET_TOLERANCE = 0.02


@dataclass(frozen=True)
class GameConfig:
    """Settings of one training run of the BNGP game (arXiv:2410.07414, section 3, App. L.8).

    Validated on construction (:class:`bngp.errors.InputError`). Why the defaults are what they
    are, with the measurements behind each, is written up in ``docs/design/game.md``.

    Attributes:
        steps: defender updates.
        attacker_steps: attacker updates per defender update.
        batch_size: membership draws per update (>= 2, batch normalisation); 128 since 2026-11-27
            (was 64; ``docs/design/game.md``, "Alternating updates").
        objective: one of :data:`OBJECTIVES` (section 3.3): "preference" minimises
            leakage + sum_j kappa_j |x_j - f(D)_j| / |Q|; "utility-budget" minimises leakage
            s.t. mean |x - f(D)| <= ``budget``; "privacy-budget" minimises mean |x - f(D)|
            s.t. leakage <= ``budget`` (both by a Lagrange multiplier with dual ascent).
        kappa: scalar trade-off weight (used when ``kappa_vector`` is None), in [0, KAPPA_MAX].
        kappa_vector: per-attribute weights kappa_j (length |Q|), or None.
        budget: the budget of the utility-/privacy-budget objectives.
        dual_lr: step size of the Lagrange multiplier's dual ascent.
        noise_dim: q, the dimension of the defender's randomness r.
        defender_lr, attacker_lr, weight_decay, lr_decay, decay_every: Adam + ExponentialLR
            (App. L.8; decay applied every ``decay_every`` defender steps).
        attacker_init: one of :data:`bngp.attacks.network.ATTACKER_INITS`: the initialisation of
            the "population" attacker (in game) and of the fresh-attacker check's network.
        attacker_kind: one of :data:`ATTACKER_KINDS`, the in-game attacker H.  With
            "per-individual" the refits set that attacker's linear part in closed form
            (:meth:`bngp.attacks.per_individual_network.PerIndividualAttacker.fit_linear_part`)
            instead of the K-output linear head.
        individual_batch: individuals scored per attacker and defender update (per-individual
            attacker only; None = all K): each update draws a uniform subset S of this size
            without replacement and the cross-entropies and the leakage are averaged over the
            pairs (release, k in S), unbiased for their average over all K, at a genotype
            product K / |S| times cheaper.  Refits, selection and evaluations score all K.
        defender_skip: a zero-initialised linear skip b -> G's pre-sigmoid output.
        defender_shrink: a learned per-attribute shrinkage alpha of the release towards the
            prior-mean statistic f(theta) (:class:`bngp.defenses.network.Defender`), trained at
            ``shrink_lr`` from ``shrink_init``.
        defender_zero_output: start G's output layer at zero (with ``shrink_init`` = 1 training
            starts at the data-independent release f(theta)).
        defender_full_rank_noise: learned per-attribute noise sigma * e, e ~ N(0, I) or i.i.d. Laplace(1).
        noise_law: the law of that e, "gaussian" or "laplace" (a defender started from a reference
            mechanism at a utility budget takes the reference's law, :mod:`bngp.game.start`).
        against: "bayesian" (the BNGP game) or the name of a differentiable attack ("lrt",
            "adaptive-lrt", "score") for a best-response defender (App. M,
            :mod:`bngp.game.best_response`); the network attacker is still trained alongside.  The
            opponent reads one mechanism's release: not with ``fixed_gaussian_sigmas``.
        dp_epsilon: eps of the BGBP response constraint DPH^eps (section 4.3, Prop. 10),
            enforced by a penalty of weight ``dp_penalty``; None = no constraint.
        fixed_gaussian_sigmas: standard deviations of fixed Gaussian mechanisms composed before
            the learned one (App. L.6): the release is [f(D) + N(0, s_1^2), ..., f(D) + G(b, r)].
        recalibrate: measure the leakage after the attacker's best affine recalibration.
        leakage: "clamped" (max(h - CEL, 0)) or "raw" (h - CEL, the paper's -CEL up to a constant).
        attacker_refit_every: defender steps between closed-form refits of the in-game
            attacker's linear head on ``refit_releases`` releases of the current defender
            (default :func:`bngp.ridge.default_shadow_releases`, or for the per-individual attacker
            :data:`bngp.attacks.per_individual_network.REFIT_RELEASES`); 0 = never.
        train_refitted_head: also train the refitted head by Adam between refits.
        pool_copies: in a composed game (``fixed_gaussian_sigmas``), the in-game attacker reads the
            fixed Gaussian copies pooled, z = sum_b s_b^-2 x_b / sum_b s_b^-2 (their inverse-variance
            mean), next to the whole learned block: a 2|Q|-wide input instead of the (m + 1)|Q|-wide
            release.  z is sufficient for f(D) given the fixed copies when they are not clipped to
            [0, 1] (their Gaussian likelihood depends on f(D) only through z; the differences of the
            copies are noise independent of everything else), so the network and its refitted ridge
            head (fitted on as many shadow releases as for the whole release) lose nothing a
            whole-release attacker would read, and each attacker update costs less.  The learned
            block is never pooled: a defender can make it leak attribute by attribute (shrinkage
            below 1 without noise) where a pooled copy would average that away.  The fresh-attacker
            check reads the whole release.  False was the only behaviour before 2026-11-26;
            :meth:`to_dict` records the setting only for a composed game that pools, so the records
            of runs made before it still match.
        select_defender: keep the defender state that did best against a freshly refitted
            attacker, by the defender's own objective on ``REFIT_VALIDATION_DRAWS`` held-out draws.
        selection_patience: stop training at step s + P * ``attacker_refit_every`` when the state
            kept from step s has not been bettered since (P = this patience): the P scorings after
            it, the last of them the run's final scoring, decide between them.  The run up to the
            stop is the first part of the run without it (same draws, same updates), so the kept
            state is the same whenever the full run keeps a state of step <= the stop's.  Default 8:
            in 23 full runs at K = 200, |Q| = 1000 (kappa 1.5 to 50, a utility budget) every patience
            >= 7 kept the full run's state, except at kappa 35: there the full run keeps a release of
            f(D) (full leakage) whose score is 0.25% and 1.6% below f(theta)'s, first reached at steps
            800 and 850, and patience up to 15 keeps f(theta) (no leakage, utility loss 0.020)
            instead (``experiments/results/selection_patience/``, ``docs/design/game.md``).
            None: all ``steps`` (as before 2026-11-26, and in the paper reproductions).
            Inert without selection (``select_defender`` off, no refits, or a fixed opponent).
            :meth:`to_dict` leaves None out, so the records of runs made before it still match.
        eval_every: steps between held-out evaluations (TensorBoard, collapse check).
        eval_batch: draws in the held-out evaluation batch.
        checkpoint_every: steps between checkpoints.
        fresh_check_steps: steps of the fresh attacker trained against the frozen defender after
            training (0 = skip); its AUC is the number to trust.
        fresh_check_patience: that attacker's early stopping (``AttackerTrainingConfig.patience``:
            it stops once this many validations in a row, 100 steps apart, have not lowered its
            validation loss, keeping its best state), or None for all ``fresh_check_steps``.  None
            was the only behaviour before 2026-11-24; :meth:`to_dict` leaves the setting out then,
            so the records of runs made before it (reproductions keep all steps) still match.
        seed: the run's seed, an int, None or a Generator, held as the int it resolves to
            (:func:`bngp.rng.resolve_seed`); every stream of the run is spawned from it
            (:func:`bngp.rng.spawn_seeds`).
    """

    steps: int = 1500
    attacker_steps: int = 2
    batch_size: int = 128
    objective: Objective = "preference"
    kappa: float = 0.0
    kappa_vector: tuple[float, ...] | None = None
    budget: float | None = None
    dual_lr: float = 0.05
    noise_dim: int = 30
    defender_lr: float = 1e-3
    attacker_lr: float = 1e-3
    weight_decay: float = 1e-5
    lr_decay: float = 0.988
    decay_every: int = 50
    attacker_init: AttackerInit = "reconstruction"
    attacker_kind: AttackerKind = "population"
    individual_batch: int | None = None
    defender_skip: bool = False
    defender_shrink: bool = True
    defender_full_rank_noise: bool = True
    defender_zero_output: bool = True
    noise_law: str = "gaussian"
    shrink_lr: float = 1e-2
    shrink_init: float = 1.0
    against: str = "bayesian"
    dp_epsilon: float | None = None
    dp_penalty: float = 10.0
    fixed_gaussian_sigmas: tuple[float, ...] = ()
    recalibrate: bool = True
    leakage: Leakage = "clamped"
    attacker_refit_every: int = 50
    train_refitted_head: bool = False
    pool_copies: bool = True
    refit_releases: int | None = None
    select_defender: bool = True
    selection_patience: int | None = 8
    eval_every: int = 50
    eval_batch: int = 256
    checkpoint_every: int = 250
    fresh_check_steps: int = 1000
    fresh_check_patience: int | None = 4
    seed: SeedLike = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "seed", resolve_seed(self.seed))
        if self.objective not in OBJECTIVES:
            raise InputError(f"`objective` must be one of {', '.join(OBJECTIVES)}, got {self.objective!r}.")
        for name in ("steps", "attacker_steps", "batch_size", "eval_every", "eval_batch", "checkpoint_every", "noise_dim"):
            if int(getattr(self, name)) < 1:
                raise InputError(f"`{name}` must be >= 1, got {getattr(self, name)}.")
        if self.batch_size < 2:
            raise InputError(f"`batch_size` must be >= 2 (batch normalisation), got {self.batch_size}.")
        if not (math.isfinite(self.kappa) and 0 <= self.kappa <= KAPPA_MAX):
            raise InputError(f"`kappa` must be a number in [0, {KAPPA_MAX:g}], got {self.kappa}.")
        if self.kappa_vector is not None:
            values = np.asarray(self.kappa_vector, dtype=np.float64)
            if values.ndim != 1 or not np.all(np.isfinite(values)) or np.any(values < 0) or np.any(values > KAPPA_MAX):
                raise InputError(f"`kappa_vector` must be a 1-D array of numbers in [0, {KAPPA_MAX:g}].")
        if self.objective != "preference":
            if self.budget is None or not math.isfinite(self.budget) or self.budget < 0:
                raise InputError(f"`budget` must be a finite number >= 0 for objective {self.objective!r}, got {self.budget}.")
        if self.fresh_check_steps < 0:
            raise InputError(f"`fresh_check_steps` must be >= 0, got {self.fresh_check_steps}.")
        check_patience("fresh_check_patience", self.fresh_check_patience)
        check_patience("selection_patience", self.selection_patience)
        if self.dp_epsilon is not None and not (math.isfinite(self.dp_epsilon) and self.dp_epsilon > 0):
            raise InputError(f"`dp_epsilon` must be a finite number > 0, got {self.dp_epsilon}.")
        if self.leakage not in get_args(Leakage):
            raise InputError(f"`leakage` must be 'clamped' or 'raw', got {self.leakage!r}.")
        if self.attacker_refit_every < 0:
            raise InputError(f"`attacker_refit_every` must be >= 0, got {self.attacker_refit_every}.")
        from bngp.attacks.network import ATTACKER_INITS

        if self.attacker_init not in ATTACKER_INITS:
            raise InputError(f"`attacker_init` must be one of {', '.join(ATTACKER_INITS)}, got {self.attacker_init!r}.")
        if self.attacker_kind not in ATTACKER_KINDS:
            raise InputError(f"`attacker_kind` must be one of {', '.join(ATTACKER_KINDS)}, got {self.attacker_kind!r}.")
        if self.individual_batch is not None:
            if self.attacker_kind != "per-individual":
                raise InputError("`individual_batch` needs the per-individual attacker (attacker_kind='per-individual').")
            if int(self.individual_batch) < 1:
                raise InputError(f"`individual_batch` must be >= 1, got {self.individual_batch}.")
        if self.against != "bayesian":
            from bngp.attacks.registry import available_attacks

            if self.against not in available_attacks():
                raise InputError(f"`against` must be 'bayesian' or an attack name, got {self.against!r}.")
            if self.fixed_gaussian_sigmas:
                raise InputError("`against` (a fixed opponent) reads the release of one mechanism: it cannot be "
                                 "combined with `fixed_gaussian_sigmas` (a composed release).")
        if not (math.isfinite(self.shrink_lr) and self.shrink_lr > 0):
            raise InputError(f"`shrink_lr` must be a finite number > 0, got {self.shrink_lr}.")
        if not 0.0 <= self.shrink_init <= 1.0:
            raise InputError(f"`shrink_init` must be in [0, 1], got {self.shrink_init}.")
        if self.noise_law not in ("gaussian", "laplace"):
            raise InputError(f"`noise_law` must be 'gaussian' or 'laplace', got {self.noise_law!r}.")
        if not self.dp_penalty >= 0:
            raise InputError(f"`dp_penalty` must be >= 0, got {self.dp_penalty}.")
        if any(not (math.isfinite(s) and s > 0) for s in self.fixed_gaussian_sigmas):
            raise InputError("`fixed_gaussian_sigmas` must be finite numbers > 0.")

    def kappa_weights(self, n_outputs: int) -> np.ndarray:
        """kappa_j for every released attribute (length ``n_outputs``)."""
        if self.kappa_vector is None:
            return np.full(n_outputs, self.kappa)
        weights = np.asarray(self.kappa_vector, dtype=np.float64)
        if weights.size != n_outputs:
            raise InputError(f"`kappa` vector must have {n_outputs} entries (|Q|), got {weights.size}.")
        return weights

    def to_dict(self) -> dict:
        """The settings as JSON; ``fresh_check_patience`` and ``selection_patience`` only when not
        None, ``pool_copies`` only when a composed game pools, ``noise_law`` only when it is Laplace
        (see their docstrings)."""
        data = asdict(self)
        for name in ("fresh_check_patience", "selection_patience"):
            if data[name] is None:
                del data[name]
        if not (self.pool_copies and self.fixed_gaussian_sigmas):
            del data["pool_copies"]
        if self.noise_law == "gaussian":
            del data["noise_law"]
        data["kappa_vector"] = None if self.kappa_vector is None else list(self.kappa_vector)
        data["fixed_gaussian_sigmas"] = list(self.fixed_gaussian_sigmas)
        return data
