"""The learned Bayesian attacker BNGP(A) (arXiv:2410.07414, sections 3.2 and 5).

A cross-entropy attacker network H(x) (see :class:`bngp.attacks.network.Attacker`) trained on
releases the attacker simulates itself against the (frozen, known) defense on the known
population: the minimiser of the expected cross-entropy is the posterior P(b_k = 1 | x)
(Lemma 3), so its scores are posterior log-odds.  Orientation needs no choice: the training
objective itself makes higher = more likely member.  The network trains and scores on the
attack's device (:meth:`BayesianAttack.set_device`, default the CPU); its shadow releases are
simulated as on the CPU, so they do not depend on the device.  Where every release lies on the candidates' affine
hull t + span(V) up to clipping (noise in their row space, time-sharing; ``AttackKnowledge.coordinates``), the
network reads the row-space coordinates (x - t) V, which lose nothing of x, and its widths scale with their number
r <= K - 1 instead of |Q| (:class:`bngp.attacks.network.AttackerSpec`).
"""

from __future__ import annotations

from dataclasses import asdict

import numpy as np
import torch

from .base import Attack, AttackKnowledge
from .linear import LinearAttack
from .registry import register_attack
from .training import AttackerTrainingConfig, PooledSampler, train_attacker
from bngp.device import DeviceName, resolve_device
from bngp.errors import DataFormatError, InputError
from .network import Attacker, AttackerSpec
from bngp.linear import LearningCurve, LinearFit

__all__ = ["BayesianAttack"]


@register_attack("bayesian")
class BayesianAttack(Attack):
    """Fresh cross-entropy attacker trained on shadow releases against the known defense."""

    requires = frozenset({"population", "simulate", "membership_prior"})
    log_odds = True
    #: one inversion block per copy of f(D) (:func:`bngp.attacks.network.block_inversion_head`).
    reads_composed_release = True
    trained_by_config = True
    #: the ridge map of the evaluation's ``linear`` attack is its "shadow-ridge" warm start (:meth:`start_from`).
    warm_start_from = "linear"
    knowledge_statement = (
        "knows the population (one output per known individual), the membership prior and the "
        "defense as a black box it can query on datasets of its choosing (shadow releases); "
        "trained by cross-entropy, so scores are posterior log-odds (no threshold or flip chosen)"
    )

    def __init__(
        self, config: AttackerTrainingConfig | None = None, progress: bool = False, device: DeviceName | torch.device = "cpu"
    ) -> None:
        self.config = config or AttackerTrainingConfig()
        self.progress = progress
        #: where the network trains and scores (:func:`bngp.device.resolve_device`).
        self.device = resolve_device(device)
        self.attacker_: Attacker | None = None
        self._rows: dict[bytes, int] = {}
        self._warm_fit: tuple[LinearFit, LearningCurve | None] | None = None
        self.reading_: str | None = None

    def use_ridge_fit(self, fit: LinearFit, curve: LearningCurve | None = None) -> "BayesianAttack":
        """Start the next :meth:`fit` from ``fit`` (a ridge map from the release to the memberships
        fitted on releases of the same defense, e.g. the ``linear`` attack's converged fit) instead
        of fitting its own ("shadow-ridge" warm start only); returns self."""
        self._warm_fit = (fit, curve)
        return self

    def start_from(self, fitted: Attack) -> "BayesianAttack":
        """:meth:`use_ridge_fit` of ``fitted``'s converged ridge map and learning curve when it is a
        :class:`bngp.attacks.linear.LinearAttack` (one converged ridge fit, not two); returns self."""
        if isinstance(fitted, LinearAttack):
            self.use_ridge_fit(fitted.fit_, fitted.learning_curve_)
        return self

    def set_device(self, device: DeviceName | torch.device) -> "BayesianAttack":
        """Train (and score with) the attacker network on ``device``; returns self.  A fitted
        attacker is moved there too."""
        self.device = resolve_device(device)
        if self.attacker_ is not None:
            self.attacker_.to(self.device)
        return self

    def _fit(self, knowledge: AttackKnowledge, seed: int) -> None:
        population = np.asarray(knowledge.population, dtype=np.uint8)
        theta = np.asarray(knowledge.membership_prior, dtype=np.float64)
        n_individuals = population.shape[0]
        reading = knowledge.coordinates.reading if knowledge.coordinates is not None else None
        hull = reading.hull if reading is not None else None
        #: what the network read of the releases: None for the release itself, or its row-space coordinates.
        self.reading_ = None if hull is None else f"row-space coordinates ({reading.width} values)"
        with PooledSampler(knowledge.simulate, seed, self.config.batch_size * 25) as sample:
            n_outputs = int(sample(1)[0].shape[1])  # the release width (composed mechanisms are wider)
            spec = AttackerSpec(n_outputs, n_individuals, init=self.config.init) if hull is None else \
                AttackerSpec(reading.width, n_individuals, init=self.config.init, release_width=n_outputs)
            self.attacker_ = train_attacker(
                sample,
                spec,
                self.config,
                seed=seed,
                population=population,
                n_members=float(knowledge.n_members if knowledge.n_members is not None else theta.sum()),
                theta=theta,
                progress=self.progress,
                description="bayesian attacker",
                device=self.device,
                warm_fit=self._warm_fit if self.config.init == "shadow-ridge" else None,
                reading=hull,
            )
        self._rows = {row.tobytes(): i for i, row in enumerate(population)}

    def describe(self) -> dict:
        record = super().describe()
        record["training"] = asdict(self.config)
        warm_start = None if self.attacker_ is None else self.attacker_.warm_start
        if warm_start is not None:
            record["fit"] = warm_start["fit"]
            if warm_start["learning_curve"] is not None:
                record["learning_curve"] = warm_start["learning_curve"]
        if self.attacker_ is not None and self.attacker_.training_curve is not None:
            record["training_curve"] = self.attacker_.training_curve
        if self.reading_ is not None:
            record["reading"] = self.reading_
        return record

    def score(self, targets: np.ndarray, releases: np.ndarray) -> np.ndarray:
        if self.attacker_ is None:
            raise InputError("the bayesian attack must be fitted before scoring.")
        targets = np.asarray(targets, dtype=np.uint8)
        releases = np.atleast_2d(np.asarray(releases, dtype=np.float32))
        width = self.attacker_.spec.release_width or self.attacker_.spec.n_outputs
        if releases.ndim != 2 or releases.shape[1] != width:
            raise DataFormatError(f"`releases` must have {width} columns, got {releases.shape[1]}.")
        try:
            columns = np.array([self._rows[row.tobytes()] for row in targets])
        except KeyError as exc:
            raise DataFormatError("the bayesian attacker can only score individuals of its known population.") from exc
        with torch.no_grad():
            logits = self.attacker_(torch.as_tensor(releases).to(self.device)).cpu().numpy().astype(np.float64)
        return logits[:, columns]
