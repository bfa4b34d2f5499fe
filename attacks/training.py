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
from functools import partial
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn
from tqdm.auto import tqdm

from bngp.device import DeviceName, resolve_device
from bngp.errors import InputError
from bngp.rng import seeded_torch
from .network import ATTACKER_INITS, Attacker, AttackerInit, AttackerSpec, block_inversion_head
from bngp.ridge import (
    DEFAULT_VALIDATION_RELEASES,
    LearningCurve,
    LinearFit,
    SharedDraws,
    default_shadow_releases,
    fit_converged,
    fit_ridge,
    max_shadow_releases,
)

__all__ = ["AttackerTrainingConfig", "train_attacker", "BatchSampler", "prefer_population_inversion"]

#: sample(n) -> (releases (n, Q) float32 tensor, memberships (n, K) float32 tensor)
BatchSampler = Callable[[int], tuple[torch.Tensor, torch.Tensor]]


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
            fit it to convergence (:func:`bngp.ridge.fit_converged`).
        validation_draws: held-out simulated draws on which states are compared (>= 2).
        validate_every: steps between validations (>= 1); the best state is kept.
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

    def __post_init__(self) -> None:
        minimum = {"steps": 0, "batch_size": 2, "decay_every": 1, "validation_draws": 2, "validate_every": 1}
        for name, least in minimum.items():
            value = getattr(self, name)
            if not _is_integer(value) or value < least:
                raise InputError(f"`{name}` must be an integer >= {least}, got {value!r}.")
        if self.shadow_releases is not None and (not _is_integer(self.shadow_releases) or self.shadow_releases < 3):
            raise InputError(f"`shadow_releases` must be an integer >= 3 or None (fitted to convergence), got {self.shadow_releases!r}.")
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
    seed: int,
    population: np.ndarray | None = None,
    n_members: float | None = None,
    theta: np.ndarray | None = None,
    progress: bool = False,
    description: str = "fresh attacker",
    device: DeviceName | torch.device = "cpu",
    warm_fit: tuple[LinearFit, LearningCurve | None] | None = None,
) -> Attacker:
    """Train a new attacker for ``config.steps`` steps on batches from ``sample``.

    With ``spec.init == "shadow-ridge"`` (default) the linear head is first set to a ridge
    regression of memberships on releases drawn from ``sample`` (the linear least-squares
    approximation of the posterior mean; ``shadow_releases`` of them, or by default as many as
    :func:`bngp.ridge.fit_converged` needs for its validation AUC to level off, the penalty
    chosen by that AUC) with its logit recalibrated, or to the recalibrated inversion of the known
    ``population`` (block by block for a composed release) when that validates better; with
    "reconstruction" to the ridge inversion of the known ``population``
    (see :class:`bngp.attacks.network.Attacker`).  Every ``validate_every`` steps the cross-entropy on
    ``validation_draws`` held-out simulated draws is measured and the best state (the
    initialisation included) is kept, so training can only improve on the warm start.
    ``warm_fit`` (a ridge map and its learning curve, fitted on releases of the same defense,
    e.g. by the evaluation's ``linear`` attack) replaces the "shadow-ridge" fit: the same
    converged map is not fitted twice.

    The attacker, the warm-start fits and the training run on ``device`` ("auto", "cpu",
    "cuda" or a ``torch.device``); its initial weights (drawn on the CPU from ``seed``) and the
    batches of ``sample`` do not depend on it.  Returns the attacker in eval mode, on ``device``.
    """
    device = resolve_device(device)

    def draw(n: int) -> tuple[torch.Tensor, torch.Tensor]:
        x, b = sample(n)
        return x.to(device), b.to(device)

    with seeded_torch(seed):
        attacker = Attacker(spec)
    attacker.to(device)
    if spec.init == "reconstruction":
        attacker.initialise_from_population(population, n_members, theta)
    validation_x, validation_b = draw(config.validation_draws)
    loss_fn = nn.BCEWithLogitsLoss()
    if spec.init == "shadow-ridge":
        validation = (validation_x, validation_b)
        if warm_fit is not None:
            fit, curve = warm_fit
            if tuple(fit.weights.shape) != (spec.n_outputs, spec.n_individuals):
                raise InputError(
                    f"the warm-start fit maps {tuple(fit.weights.shape)} (outputs, individuals); the attacker "
                    f"needs ({spec.n_outputs}, {spec.n_individuals})."
                )
            x, b = draw(default_shadow_releases(spec.n_individuals, spec.n_outputs))  # for the block weights
        elif config.shadow_releases is not None:
            x, b = draw(config.shadow_releases)
            fit, curve = fit_ridge(x, b, validation, prior_mean=theta), None
        else:
            start = default_shadow_releases(spec.n_individuals, spec.n_outputs)
            maximum = max_shadow_releases(spec.n_individuals, spec.n_outputs)
            draws = SharedDraws(draw)
            fit, curve = fit_converged(
                partial(fit_ridge, prior_mean=theta), draws.reader(), start=start, maximum=maximum, validation=validation
            )
            x, b = draws.reader()(start)  # the first shadow releases again, for the block weights
        attacker.initialise_from_ridge(fit, theta)
        attacker.calibrate_head(validation_x, validation_b)
        attacker.warm_start = {"fit": fit.describe(), "learning_curve": None if curve is None else curve.to_dict()}
        if population is not None and spec.n_outputs % population.shape[1] == 0:
            prefer_population_inversion(attacker, population, n_members, theta, x, b, validation_x, validation_b)
    optimiser = torch.optim.Adam(attacker.parameters(), lr=config.lr, weight_decay=config.weight_decay, fused=True)
    scheduler = torch.optim.lr_scheduler.ExponentialLR(optimiser, gamma=config.lr_decay)
    best = _validation_loss(attacker, validation_x, validation_b, loss_fn), copy.deepcopy(attacker.state_dict())
    attacker.train()
    for step in tqdm(range(config.steps), desc=description, disable=not progress, leave=False):
        x, b = draw(config.batch_size)
        loss = loss_fn(attacker(x), b)
        optimiser.zero_grad(set_to_none=True)
        loss.backward()
        optimiser.step()
        if (step + 1) % config.decay_every == 0:
            scheduler.step()
        if (step + 1) % config.validate_every == 0 or step + 1 == config.steps:
            current = _validation_loss(attacker, validation_x, validation_b, loss_fn)
            if current < best[0]:
                best = current, copy.deepcopy(attacker.state_dict())
            attacker.train()
    attacker.load_state_dict(best[1])
    attacker.eval()
    return attacker


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
    attacker.set_linear_head(*block_inversion_head(population, n_members, theta, x, b))
    if _validation_loss(attacker, validation_x, validation_b, loss_fn) >= current:
        for parameter, value in zip(attacker.refit_parameters(), saved):
            parameter.copy_(value)


@torch.no_grad()
def _validation_loss(attacker: Attacker, x: torch.Tensor, b: torch.Tensor, loss_fn: nn.Module) -> float:
    attacker.eval()
    return float(loss_fn(attacker(x), b))
