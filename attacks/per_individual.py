"""The per-individual attacker as an evaluation attack (``per-individual``; arXiv:2410.07414, sections 3.2 and 4).

One network H(x, d) -> logit P(b = 1 | x) with weights shared across individuals
(:mod:`bngp.attacks.per_individual_network` states its math), fitted like the Bayesian attacker
BNGP(A) on releases the attacker simulates itself against the (frozen, known) defense on the
known population:

1. closed-form warm start on ``warm_start_releases`` shadow releases: per-SNV weights of the
   linear channels and their logistic calibration (the calibrated variance-weighted score);
2. Adam on the cross-entropy sum_k CEL(H(x, d_k), b_k) of fresh shadow releases, the K known
   individuals of each release as the pairs (whose minimiser is the posterior, Lemma 3), with
   the validation cross-entropy and AUC on ``validation_draws`` held-out shadow releases
   measured every ``validate_every`` steps; the state of least validation cross-entropy is kept
   and training stops when ``patience`` validations in a row have not lowered it by more than
   ``tolerance`` (:func:`bngp.attacks.training.optimise_with_validation`), or after ``max_steps``.

Its scores are posterior log-odds (no threshold or flip chosen).  It scores any binary record
with the release's |Q| SNVs, individuals outside the population included.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import torch
import torch.nn.functional as F

from .base import Attack, AttackKnowledge
from .inputs import check_binary_panel, check_releases, check_targets
from .per_individual_network import (
    REFIT_RELEASES,
    PerIndividualAttacker,
    PerIndividualSpec,
    prior_mean_frequencies,
    score_in_blocks,
)
from .registry import register_attack
from .training import AttackerTrainingConfig, BatchSampler, OptimisationTrace, optimise_with_validation, PooledSampler
from bngp.device import DeviceName, resolve_device
from bngp.errors import DataFormatError, InputError
from bngp.metrics import release_aucs
from bngp.rng import seeded_torch
from bngp.validation import check_epsilon, check_nonnegative, check_positive_int

__all__ = ["PerIndividualConfig", "PerIndividualAttack", "train_per_individual"]


@dataclass(frozen=True)
class PerIndividualConfig:
    """Architecture and fitting of the per-individual attacker; validated on construction
    (:class:`bngp.errors.InputError` naming the field).

    Attributes:
        embedding, hidden, head_hidden: the widths of :class:`bngp.attacks.per_individual_network.PerIndividualSpec`.
        max_steps: Adam steps at most (>= 0; 0 = the closed-form warm start alone).
        batch_size: shadow releases per step; every individual of the population is a pair of each.
        lr, weight_decay, lr_decay, decay_every: Adam and its ExponentialLR schedule (the
            Bayesian attacker's defaults, :class:`bngp.attacks.training.AttackerTrainingConfig`).
        warm_start_releases: shadow releases of the closed-form warm start (>= 3).
        validation_draws: held-out shadow releases of the validation (>= 2).
        validate_every: steps between validations.
        individual_batch: individuals scored per Adam step, a uniform random subset (None = all K):
            the step's cross-entropy is unbiased for the all-K one and its genotype product K /
            ``individual_batch`` times cheaper; the warm start and the validation score all K.
        patience, tolerance: training stops after ``patience`` validations in a row that have not
            lowered the validation cross-entropy by more than ``tolerance`` (nats per pair) below
            the last one that did.
    """

    embedding: int = 16
    hidden: int = 16
    head_hidden: int = 32
    max_steps: int = 3000
    batch_size: int = 32
    lr: float = AttackerTrainingConfig.lr
    weight_decay: float = AttackerTrainingConfig.weight_decay
    lr_decay: float = AttackerTrainingConfig.lr_decay
    decay_every: int = AttackerTrainingConfig.decay_every
    warm_start_releases: int = REFIT_RELEASES
    validation_draws: int = 256
    validate_every: int = 50
    patience: int = 4
    tolerance: float = 1e-3
    individual_batch: int | None = None

    def __post_init__(self) -> None:
        minimum = {"embedding": 1, "hidden": 1, "head_hidden": 1, "max_steps": 0, "batch_size": 1, "decay_every": 1,
                   "warm_start_releases": 3, "validation_draws": 2, "validate_every": 1, "patience": 1}
        for name, least in minimum.items():
            check_positive_int(name, getattr(self, name), minimum=least)
        if self.individual_batch is not None:
            check_positive_int("individual_batch", self.individual_batch)
        check_epsilon(self.lr, "lr")
        check_nonnegative("weight_decay", self.weight_decay)
        check_nonnegative("tolerance", self.tolerance)
        if not 0 < self.lr_decay <= 1:
            raise InputError(f"`lr_decay` must be in (0, 1], got {self.lr_decay!r}.")

    def spec(self, n_snvs: int, n_blocks: int) -> PerIndividualSpec:
        """The network's sizes for releases of ``n_blocks`` copies of ``n_snvs`` frequencies."""
        return PerIndividualSpec(n_snvs, n_blocks, self.embedding, self.hidden, self.head_hidden)


def train_per_individual(
    sample: BatchSampler,
    population: np.ndarray,
    theta: np.ndarray,
    config: PerIndividualConfig,
    *,
    seed: int,
    device: DeviceName | torch.device = "cpu",
    progress: bool = False,
    description: str = "per-individual attacker",
) -> tuple[PerIndividualAttacker, dict]:
    """Fit H(x, d) on shadow releases from ``sample`` (see the module docstring); returns the
    network (eval mode, on ``device``) and its training record: the learning curve (validation
    AUC and cross-entropy by shadow releases read), the step kept, whether it stopped early.

    Args:
        sample: sample(n) -> (releases (n, m |Q|), memberships (n, K)) of fresh shadow releases.
        population: (K, |Q|) binary genotypes of the known individuals.
        theta: (K,) membership prior marginals.
        config: architecture and fitting.
        seed: the initial weights' seed (drawn on the CPU, so they do not depend on ``device``).
    """
    device = resolve_device(device)
    n_snvs = population.shape[1]
    genotypes = torch.as_tensor(np.asarray(population), dtype=torch.float32).to(device)

    def draw(n: int) -> tuple[torch.Tensor, torch.Tensor]:
        x, b = sample(n)
        return x.to(device=device, dtype=torch.float32), b.to(device=device, dtype=torch.float32)

    validation_x, validation_b = draw(config.validation_draws)
    if validation_x.shape[1] % n_snvs or validation_b.shape[1] != population.shape[0]:
        raise DataFormatError(
            f"shadow releases of shape {tuple(validation_x.shape)} with memberships {tuple(validation_b.shape)} do not "
            f"match a population of {population.shape[0]} individuals and {n_snvs} SNVs."
        )
    spec = config.spec(n_snvs, validation_x.shape[1] // n_snvs)
    with seeded_torch(seed):
        network = PerIndividualAttacker(spec, prior_mean_frequencies(population, theta), float(np.sum(theta)),
                                        float(np.mean(theta)))
    network.to(device)
    network.fit_linear_part(*draw(config.warm_start_releases), genotypes)
    labels = validation_b.cpu().numpy()
    aucs: list[float] = []

    def validation_loss() -> float:
        logits = score_in_blocks(network, validation_x, genotypes)
        aucs.append(float(release_aucs(logits.cpu().numpy(), labels).mean()))
        return float(F.binary_cross_entropy_with_logits(logits, validation_b))

    subsets = torch.Generator().manual_seed(seed)  # the individuals of each step (individual_batch)
    n_individuals = population.shape[0]

    def batch_loss() -> torch.Tensor:
        x, b = draw(config.batch_size)
        if config.individual_batch is None or config.individual_batch >= n_individuals:
            return F.binary_cross_entropy_with_logits(network(x, genotypes), b)
        chosen = torch.randperm(n_individuals, generator=subsets)[: config.individual_batch].to(device)
        return F.binary_cross_entropy_with_logits(network(x, genotypes[chosen]), b[:, chosen])

    trace = optimise_with_validation(
        network, batch_loss, validation_loss, steps=config.max_steps, lr=config.lr, weight_decay=config.weight_decay,
        lr_decay=config.lr_decay, decay_every=config.decay_every, validate_every=config.validate_every,
        patience=config.patience, tolerance=config.tolerance, progress=progress, description=description,
    )
    return network, _training_record(config, trace, aucs, network)


def _training_record(config: PerIndividualConfig, trace: OptimisationTrace, aucs: list[float],
                     network: PerIndividualAttacker) -> dict:
    """The record of :func:`train_per_individual`: the learning curve (validation AUC and
    cross-entropy by the shadow releases read: the warm start's, then ``batch_size`` per step) and
    the fit (the step kept, its validation AUC and cross-entropy, whether it stopped early)."""
    best = trace.steps.index(trace.best_step)
    return {
        "learning_curve": {
            "releases": [config.warm_start_releases + step * config.batch_size for step in trace.steps],
            "auc": aucs,
            "cross_entropy": list(trace.losses),
            "converged": trace.stopped_early,
            "patience": config.patience,
            "tolerance": config.tolerance,
        },
        "fit": {
            "criterion": "validation-cross-entropy",
            "validation_releases": config.validation_draws,
            "steps": trace.steps[-1],
            "best_step": trace.best_step,
            "validation_auc": aucs[best],
            "validation_cross_entropy": trace.losses[best],
            "stopped_early": trace.stopped_early,
            "parameters": sum(parameter.numel() for parameter in network.parameters()),
        },
    }


@register_attack("per-individual")
class PerIndividualAttack(Attack):
    """Cross-entropy attacker H(x, d) with weights shared across individuals, fitted on shadow
    releases against the known defense (see the module docstring).

    Args:
        config: architecture and fitting (default :class:`PerIndividualConfig`).
        progress: a progress bar while training.
        device: where the network trains and scores (:func:`bngp.device.resolve_device`).
    """

    requires: ClassVar[frozenset[str]] = frozenset({"population", "simulate", "membership_prior"})
    log_odds: ClassVar[bool] = True
    #: the per-SNV map reads the m copies of f(D) of a composed release together (one z per block).
    reads_composed_release: ClassVar[bool] = True
    knowledge_statement: ClassVar[str] = (
        "knows the population, the membership prior (hence the prior-mean release f(theta)) and the defense as a "
        "black box it can query on datasets of its choosing (shadow releases); one network H(x, d) with weights "
        "shared across individuals, trained by cross-entropy with early stopping on held-out shadow releases, "
        "so scores are posterior log-odds (no threshold or flip chosen) for any record d"
    )

    def __init__(
        self, config: PerIndividualConfig | None = None, progress: bool = False, device: DeviceName | torch.device = "cpu"
    ) -> None:
        self.config = config or PerIndividualConfig()
        self.progress = progress
        #: where the network trains and scores.
        self.device = resolve_device(device)
        self.attacker_: PerIndividualAttacker | None = None
        self.training_: dict | None = None

    def set_device(self, device: DeviceName | torch.device) -> "PerIndividualAttack":
        """Train (and score with) the network on ``device``; returns self.  A fitted network is moved there too."""
        self.device = resolve_device(device)
        if self.attacker_ is not None:
            self.attacker_.to(self.device)
        return self

    def _fit(self, knowledge: AttackKnowledge, seed: int) -> None:
        population = check_binary_panel("population", knowledge.population)
        theta = np.asarray(knowledge.membership_prior, dtype=np.float64)
        if theta.shape != (population.shape[0],) or not np.all((theta >= 0) & (theta <= 1)):
            raise InputError(f"`membership_prior` must be {population.shape[0]} probabilities (one per individual).")
        with PooledSampler(knowledge.simulate, seed, self.config.batch_size * 25) as sample:
            self.attacker_, self.training_ = train_per_individual(
                sample, population, theta, self.config, seed=seed, device=self.device, progress=self.progress
            )

    def describe(self) -> dict:
        record = super().describe()
        if self.training_ is not None:
            record.update(self.training_)
            record["spec"] = self.attacker_.spec.to_dict()
        return record

    def score(self, targets: np.ndarray, releases: np.ndarray) -> np.ndarray:
        if self.attacker_ is None:
            raise InputError("the per-individual attack must be fitted before scoring (call fit).")
        spec = self.attacker_.spec
        targets = check_targets(targets, spec.n_snvs)
        releases = check_releases(releases, spec.n_outputs)
        logits = score_in_blocks(self.attacker_, torch.as_tensor(releases, dtype=torch.float32), targets)
        return logits.cpu().numpy().astype(np.float64)
