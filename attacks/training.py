"""Training a cross-entropy attacker H against a frozen defense (arXiv:2410.07414, section 3.2).

The attacker minimises the expected cross-entropy E_{b ~ sigma, xi ~ g(.|b)} CEL(H(x), b),
whose minimiser is the posterior P(b | x) (Lemma 3).  Used for the fresh attacker of an
evaluation ("BNGP(A)": a new attacker trained on fresh draws against the frozen defender)
and for the trainer's end-of-training check.  The network trains on the device it is given
(:mod:`bngp.device`); it is initialised on the CPU from its seed, and the batches are drawn
by the caller's sampler and moved to the device, so the draws are the same on every device.
"""

from __future__ import annotations

import copy
import math
from concurrent.futures import Future, ThreadPoolExecutor
from functools import partial
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn
from tqdm.auto import tqdm

from bngp.device import DeviceName, resolve_device, subnormals_flushed
from bngp.errors import InputError
from bngp.metrics import release_aucs
from bngp.rng import SeedLike, resolve_seed, seeded_torch, spawn_seeds
from bngp.validation import check_patience
from bngp.workers import current_helper
from .base import ReleaseSimulator
from .network import ATTACKER_INITS, Attacker, AttackerInit, AttackerSpec, block_inversion_head
from bngp.linear import (
    DEFAULT_VALIDATION_RELEASES,
    LearningCurve,
    LinearFit,
    SharedDraws,
    default_shadow_releases,
    fit_converged,
    fit_ridge,
    max_shadow_releases,
)

__all__ = [
    "AttackerTrainingConfig",
    "train_attacker",
    "BatchSampler",
    "prefer_population_inversion",
    "PooledSampler",
    "optimise_with_validation",
    "OptimisationTrace",
]

#: sample(n) -> (releases (n, Q) float32 tensor, memberships (n, K) float32 tensor)
BatchSampler = Callable[[int], tuple[torch.Tensor, torch.Tensor]]


class PooledSampler:
    """sample(n) -> (n releases, their memberships) as float32 tensors, read in order from pools
    of ``chunk`` releases that ``simulate`` draws against the defense (the i-th pool from the i-th
    seed spawned from ``seed``); a request larger than what is left of the pool starts a new one,
    of max(``chunk``, n) releases.

    How the learned attackers (:class:`bngp.attacks.bayesian.BayesianAttack`, the per-individual
    attacker) read fresh shadow releases: one call of the simulator per ``chunk`` releases.  With
    ``prefetch`` (default) the next pool of ``chunk`` releases is drawn by a background thread
    while the caller trains on the current one (the simulator's products and noise release the
    GIL, so on a second core the draws overlap the training); it is the pool a request would draw,
    from the same seed and of the same size, so the releases do not depend on it.  Use as a context manager, or :meth:`close`
    it, so that no draw outlives the training.
    """

    def __init__(self, simulate: ReleaseSimulator, seed: int, chunk: int, prefetch: bool = True) -> None:
        self._simulate, self._seed, self._chunk = simulate, seed, int(chunk)
        self._pool: tuple[torch.Tensor, torch.Tensor] | None = None
        self._position = 0
        self._calls = 0
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="bngp-draws") if prefetch else None
        self._next: Future | None = None

    def _draw(self, call: int, n: int) -> tuple[torch.Tensor, torch.Tensor]:
        x, b = self._simulate(n, spawn_seeds(self._seed, call + 1)[-1])
        return torch.as_tensor(x, dtype=torch.float32), torch.as_tensor(b, dtype=torch.float32)

    def __call__(self, n: int) -> tuple[torch.Tensor, torch.Tensor]:
        if self._pool is None or self._position + n > self._pool[0].shape[0]:
            ahead, self._next = self._next, None
            if ahead is not None and n <= self._chunk:
                self._pool = ahead.result()
            else:
                if ahead is not None and not ahead.cancel():
                    ahead.exception()  # a pool of the wrong size: waited for (one draw at a time), not read
                self._pool = self._draw(self._calls, max(self._chunk, n))
            self._position = 0
            self._calls += 1
            if self._executor is not None:
                self._next = self._executor.submit(self._draw, self._calls, self._chunk)
        start = self._position
        self._position += n
        return self._pool[0][start : start + n], self._pool[1][start : start + n]

    def close(self) -> None:
        """Wait for the draw in flight, if any, and stop the background thread."""
        if self._next is not None:
            if not self._next.cancel():
                self._next.exception()  # wait for it
            self._next = None
        if self._executor is not None:
            self._executor.shutdown(wait=True)
            self._executor = None

    def __enter__(self) -> "PooledSampler":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _is_integer(value: object) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


@dataclass(frozen=True)
class AttackerTrainingConfig:
    """Optimiser settings of a fresh attacker (arXiv:2410.07414, section 3.2 and App. L.8).

    Defaults: Adam(lr 1e-3, weight decay 1e-5) with ExponentialLR(0.988) applied every
    ``decay_every`` steps (the paper's optimiser family, App. L.8; the learning rate is 10x the
    paper's 1e-4 because the paper's rate leaves the attacker under-trained within a CPU
    budget), batches of 64 fresh membership draws.  Validated on construction
    (:class:`bngp.errors.InputError` naming the field).

    Attributes:
        steps: Adam steps after the warm start (>= 0; 0 = the warm-started attacker alone).
        batch_size: membership draws per step (>= 2, batch normalisation).
        lr: Adam learning rate (> 0).
        weight_decay: Adam weight decay (>= 0).
        lr_decay: ExponentialLR factor, in (0, 1].
        decay_every: steps between learning-rate decays (>= 1).
        init: the attacker's initialisation, one of :data:`bngp.attacks.network.ATTACKER_INITS`
            (used by :class:`bngp.attacks.bayesian.BayesianAttack` for its ``AttackerSpec``).
        shadow_releases: shadow releases of the "shadow-ridge" warm start (>= 3), or None to
            fit it to convergence (:func:`bngp.linear.fit_converged`).
        validation_draws: held-out simulated draws on which states are compared (>= 2).
        validate_every: steps between validations (>= 1); the best state is kept.
        patience: stop once this many validations in a row have not lowered the validation
            cross-entropy (early stopping, :func:`optimise_with_validation`; >= 1), or None to run
            all ``steps``.  The default 4 stops 400 steps after the last improvement (the reasoning
            behind it: ``docs/design/evaluation.md``).
    """

    steps: int = 1500
    batch_size: int = 64
    lr: float = 1e-3
    weight_decay: float = 1e-5
    lr_decay: float = 0.988
    decay_every: int = 50
    init: AttackerInit = "shadow-ridge"
    shadow_releases: int | None = None
    validation_draws: int = DEFAULT_VALIDATION_RELEASES
    validate_every: int = 100
    patience: int | None = 4

    def __post_init__(self) -> None:
        minimum = {"steps": 0, "batch_size": 2, "decay_every": 1, "validation_draws": 2, "validate_every": 1}
        for name, least in minimum.items():
            value = getattr(self, name)
            if not _is_integer(value) or value < least:
                raise InputError(f"`{name}` must be an integer >= {least}, got {value!r}.")
        if self.shadow_releases is not None and (not _is_integer(self.shadow_releases) or self.shadow_releases < 3):
            raise InputError(f"`shadow_releases` must be an integer >= 3 or None (fitted to convergence), got {self.shadow_releases!r}.")
        check_patience("patience", self.patience)
        if not (math.isfinite(self.lr) and self.lr > 0):
            raise InputError(f"`lr` must be a finite number > 0, got {self.lr!r}.")
        if not (math.isfinite(self.weight_decay) and self.weight_decay >= 0):
            raise InputError(f"`weight_decay` must be a finite number >= 0, got {self.weight_decay!r}.")
        if not 0 < self.lr_decay <= 1:
            raise InputError(f"`lr_decay` must be in (0, 1], got {self.lr_decay!r}.")
        if self.init not in ATTACKER_INITS:
            raise InputError(f"`init` must be one of {', '.join(ATTACKER_INITS)}, got {self.init!r}.")


def train_attacker(
    sample: BatchSampler,
    spec: AttackerSpec,
    config: AttackerTrainingConfig,
    *,
    seed: SeedLike,
    population: np.ndarray | None = None,
    n_members: float | None = None,
    theta: np.ndarray | None = None,
    progress: bool = False,
    description: str = "fresh attacker",
    device: DeviceName | torch.device = "cpu",
    warm_fit: tuple[LinearFit, LearningCurve | None] | None = None,
    reading: tuple[torch.Tensor, torch.Tensor] | None = None,
) -> Attacker:
    """Train a new attacker for up to ``config.steps`` steps on batches from ``sample``; with ``reading`` = (V, t)
    (``spec.release_width`` set) it reads the releases' row-space coordinates (:meth:`Attacker.read_coordinates`).

    With ``spec.init == "shadow-ridge"`` (default) the linear head is first set to a ridge
    regression of memberships on releases drawn from ``sample`` (the linear least-squares
    approximation of the posterior mean; ``shadow_releases`` of them, or by default as many as
    :func:`bngp.linear.fit_converged` needs for its validation AUC to level off, the penalty
    chosen by that AUC) with its logit recalibrated, or to the recalibrated inversion of the known
    ``population`` (block by block for a composed release) when that validates better; with
    "reconstruction" to the ridge inversion of the known ``population``
    (see :class:`bngp.attacks.network.Attacker`).  Every ``validate_every`` steps the cross-entropy on
    ``validation_draws`` held-out simulated draws is measured and the best state (the
    initialisation included) is kept, so training can only improve on the warm start; the
    attacker's ``training_curve`` records those validations (cross-entropy and mean per-release
    AUC by step, :meth:`OptimisationTrace.curve`), the evidence that more steps would not help.
    ``warm_fit`` (a ridge map and its learning curve, fitted on releases of the same defense,
    e.g. by the evaluation's ``linear`` attack) replaces the "shadow-ridge" fit: the same
    converged map is not fitted twice.

    The attacker, the warm-start fits and the training run on ``device`` ("auto", "cpu",
    "cuda" or a ``torch.device``); its initial weights (drawn on the CPU from ``seed``: an int,
    None or a Generator, :func:`bngp.rng.resolve_seed`) and the batches of ``sample`` do not
    depend on it.  Returns the attacker in eval mode, on ``device``.
    """
    seed = resolve_seed(seed)
    device = resolve_device(device)

    def draw(n: int) -> tuple[torch.Tensor, torch.Tensor]:
        x, b = sample(n)
        return x.to(device), b.to(device)

    with seeded_torch(seed):
        attacker = Attacker(spec)
    attacker.to(device)
    if reading is not None:
        attacker.read_coordinates(*(tensor.to(device) for tensor in reading))
    if spec.init == "reconstruction":
        attacker.initialise_from_population(population, n_members, theta)
    validation_x, validation_b = draw(config.validation_draws)
    loss_fn = nn.BCEWithLogitsLoss()
    if spec.init == "shadow-ridge":
        _warm_start_from_ridge(
            attacker, spec, config, draw, (validation_x, validation_b), warm_fit, population, n_members, theta
        )

    _optimise(attacker, config, draw, (validation_x, validation_b), loss_fn, progress, description)
    return attacker


def _optimise(
    attacker: Attacker,
    config: AttackerTrainingConfig,
    draw: Callable[[int], tuple[torch.Tensor, torch.Tensor]],
    validation: tuple[torch.Tensor, torch.Tensor],
    loss_fn: nn.Module,
    progress: bool,
    description: str,
) -> None:
    """The Adam phase of :func:`train_attacker`: ``loss_fn`` on fresh batches of ``draw``, validated on
    ``validation`` (:func:`optimise_with_validation`); sets the attacker's ``training_curve``."""
    validation_x, validation_b = validation

    def batch_loss() -> torch.Tensor:
        x, b = draw(config.batch_size)
        return loss_fn(attacker(x), b)

    labels = validation_b.cpu().numpy()
    aucs: list[float] = []

    @torch.no_grad()
    def validate() -> float:
        logits = attacker(validation_x)  # in eval mode (optimise_with_validation)
        aucs.append(float(release_aucs(logits.cpu().numpy(), labels).mean()))
        return float(loss_fn(logits, validation_b))

    trace = optimise_with_validation(
        attacker, batch_loss, validate, steps=config.steps, lr=config.lr, weight_decay=config.weight_decay,
        lr_decay=config.lr_decay, decay_every=config.decay_every, validate_every=config.validate_every,
        patience=config.patience, progress=progress, description=description,
    )
    attacker.training_curve = trace.curve(aucs, config.validation_draws)


def _warm_start_from_ridge(
    attacker: Attacker,
    spec: AttackerSpec,
    config: AttackerTrainingConfig,
    draw: Callable[[int], tuple[torch.Tensor, torch.Tensor]],
    validation: tuple[torch.Tensor, torch.Tensor],
    warm_fit: tuple[LinearFit, LearningCurve | None] | None,
    population: np.ndarray | None,
    n_members: float | None,
    theta: np.ndarray | torch.Tensor | None,
) -> None:
    """The "shadow-ridge" initialisation of :func:`train_attacker`: the ridge map (``warm_fit``, or
    fitted here to convergence) as the attacker's head, recalibrated, or the population inversion
    when it validates better.  Its shadow releases are freed on return, before training starts."""
    validation_x, validation_b = validation

    def read(n: int) -> tuple[torch.Tensor, torch.Tensor]:  # what the attacker reads (Attacker.read)
        x, b = draw(n)
        return attacker.read(x), b

    if warm_fit is not None:
        fit, curve = warm_fit
        widths = (spec.n_outputs, spec.release_width or spec.n_outputs)  # a map of the release is restricted
        if tuple(fit.weights.shape) not in {(width, spec.n_individuals) for width in widths}:
            raise InputError(
                f"the warm-start fit maps {tuple(fit.weights.shape)} (outputs, individuals); the attacker "
                f"needs ({spec.n_outputs}, {spec.n_individuals})."
            )
        x, b = read(default_shadow_releases(spec.n_individuals, spec.n_outputs))  # for the block weights
    elif config.shadow_releases is not None:
        x, b = read(config.shadow_releases)
        fit, curve = fit_ridge(x, b, (attacker.read(validation_x), validation_b), prior_mean=theta), None
    else:
        start = default_shadow_releases(spec.n_individuals, spec.n_outputs)
        maximum = max_shadow_releases(spec.n_individuals, spec.n_outputs)
        draws = SharedDraws(read)
        fit, curve = fit_converged(
            partial(fit_ridge, prior_mean=theta), draws, start=start, maximum=maximum,
            validation=(attacker.read(validation_x), validation_b), helper=current_helper(),
        )
        x, b = draws.first(start)  # the first shadow releases again, for the block weights
    attacker.initialise_from_ridge(fit, theta)
    attacker.calibrate_head(validation_x, validation_b)
    attacker.warm_start = {"fit": fit.describe(), "learning_curve": None if curve is None else curve.to_dict()}
    if population is not None and (spec.release_width or spec.n_outputs) % population.shape[1] == 0:
        prefer_population_inversion(attacker, population, n_members, theta, x, b, validation_x, validation_b)


@dataclass(frozen=True)
class OptimisationTrace:
    """The validations of :func:`optimise_with_validation`.

    Attributes:
        steps: the step of each validation (0 = before the first step).
        losses: the validation loss at each of them.
        best_step: the step whose state was kept.
        stopped_early: whether ``patience`` validations in a row without an improvement larger than
            the tolerance ended the run.
    """

    steps: tuple[int, ...]
    losses: tuple[float, ...]
    best_step: int
    stopped_early: bool

    @property
    def still_improving(self) -> bool:
        """True when the run ended on its best validation after at least one step: more steps
        might still have lowered the validation loss (the attacker is not shown converged)."""
        return self.best_step == self.steps[-1] and self.steps[-1] > 0 and not self.stopped_early

    def curve(self, aucs: list[float], validation_releases: int) -> dict:
        """The training curve as JSON: validation cross-entropy and mean per-release AUC at each
        validated step (``aucs``, one per validation), the kept step and whether the loss was
        still falling at the end (:attr:`still_improving`)."""
        if len(aucs) != len(self.steps):
            raise InputError(f"one AUC per validation is needed: {len(self.steps)} validations, {len(aucs)} AUCs.")
        return {
            "steps": list(self.steps),
            "cross_entropy": list(self.losses),
            "auc": list(aucs),
            "best_step": self.best_step,
            "validation_releases": int(validation_releases),
            "stopped_early": self.stopped_early,
            "still_improving": self.still_improving,
        }


def optimise_with_validation(
    module: nn.Module,
    batch_loss: Callable[[], torch.Tensor],
    validation_loss: Callable[[], float],
    *,
    steps: int,
    lr: float,
    weight_decay: float,
    lr_decay: float,
    decay_every: int,
    validate_every: int,
    patience: int | None = None,
    tolerance: float = 0.0,
    progress: bool = False,
    description: str = "attacker",
) -> OptimisationTrace:
    """Minimise ``batch_loss()`` (a fresh batch each call) by Adam(lr, weight_decay) with
    ExponentialLR(lr_decay) every ``decay_every`` steps, keeping the state of lowest
    ``validation_loss()`` (measured with the module in eval mode before the first step, every
    ``validate_every`` steps and after the last one).

    The loop of every attacker trained on shadow releases (:func:`train_attacker`, the
    per-individual attacker of :mod:`bngp.attacks.per_individual`): with ``patience`` it stops
    once that many validations in a row have not lowered the loss by more than ``tolerance``
    below the last loss that did (early stopping), else it runs all ``steps``.  The module ends
    in its best validated state (the initial one included), in eval mode.  It runs with subnormal
    floats flushed to zero (:func:`bngp.device.subnormals_flushed`): a nearly perfect attacker's
    gradients underflow into them, and every product with one took the CPU's slow path.
    """
    with subnormals_flushed():
        optimiser = torch.optim.Adam(module.parameters(), lr=lr, weight_decay=weight_decay, fused=True)
        scheduler = torch.optim.lr_scheduler.ExponentialLR(optimiser, gamma=lr_decay)
        module.eval()
        best_loss, best_state, best_step = validation_loss(), copy.deepcopy(module.state_dict()), 0
        validated, losses, without_gain, stopped, reference = [0], [best_loss], 0, False, best_loss
        module.train()
        for step in tqdm(range(steps), desc=description, disable=not progress, leave=False):
            loss = batch_loss()
            optimiser.zero_grad(set_to_none=True)
            loss.backward()
            optimiser.step()
            if (step + 1) % decay_every == 0:
                scheduler.step()
            if (step + 1) % validate_every == 0 or step + 1 == steps:
                module.eval()
                current = validation_loss()
                validated.append(step + 1)
                losses.append(current)
                if current < best_loss:
                    best_loss, best_state, best_step = current, copy.deepcopy(module.state_dict()), step + 1
                if current < reference - tolerance:
                    reference, without_gain = current, 0
                else:
                    without_gain += 1
                module.train()
                if patience is not None and without_gain >= patience:
                    stopped = True
                    break
        module.load_state_dict(best_state)
        module.eval()
        return OptimisationTrace(tuple(validated), tuple(losses), best_step, stopped)


@torch.no_grad()
def prefer_population_inversion(
    attacker: Attacker,
    population: np.ndarray,
    n_members: float,
    theta: np.ndarray,
    x: torch.Tensor,
    b: torch.Tensor,
    validation_x: torch.Tensor,
    validation_b: torch.Tensor,
) -> None:
    """Replace the attacker's linear head (and zero its MLP's last layer) by the population
    inversion head when that validates better.

    With |Q| much larger than the number of shadow releases the ridge regression cannot learn
    the full inversion that the known population gives directly (Dinur & Nissim 2003).  The
    inversion of each block of the release (one block per composed mechanism, App. L.6) is
    combined with block weights fitted on the shadow releases (:func:`bngp.attacks.network.block_inversion_head`),
    then the two heads are compared by cross-entropy on held-out simulated draws.
    """
    loss_fn = nn.BCEWithLogitsLoss()
    current = _validation_loss(attacker, validation_x, validation_b, loss_fn)
    saved = [parameter.detach().clone() for parameter in attacker.refit_parameters()]
    if attacker.read_basis is None:
        attacker.set_linear_head(*block_inversion_head(population, n_members, theta, x, b))
    else:  # formed on the coordinates H reads (Attacker.read_coordinates)
        attacker.set_linear_head(*block_inversion_head(population, n_members, theta, attacker.read(x), b,
                                                       (attacker.read_basis, attacker.read_target)))
    if _validation_loss(attacker, validation_x, validation_b, loss_fn) >= current:
        for parameter, value in zip(attacker.refit_parameters(), saved):
            parameter.copy_(value)


@torch.no_grad()
def _validation_loss(attacker: Attacker, x: torch.Tensor, b: torch.Tensor, loss_fn: nn.Module) -> float:
    attacker.eval()
    return float(loss_fn(attacker(x), b))
