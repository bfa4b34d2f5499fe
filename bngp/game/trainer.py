"""The trainer of the BNGP game: a general-sum GAN of a defender G against an attacker H.

arXiv:2410.07414, section 3 and App. L: alternating updates, ``attacker_steps`` attacker
steps (cross-entropy CEL(H(x), b) over draws b ~ sigma, r ~ U[0, 1]^q; its minimiser is the
posterior, Lemma 3) per defender step on the objective of :mod:`bngp.game.objectives`.
The in-game attacker's linear head is refitted in closed form on the current defender and
the defender state that does best against a freshly refitted attacker is kept
(``docs/design/game.md`` gives the reasons and the measurements).  The in-game attacker is the
paper's H(x) with one output per known individual (``GameConfig.attacker_kind = "population"``)
or H(x, d_k) with weights shared across individuals, applied to every known individual
("per-individual", :mod:`bngp.attacks.per_individual_network`), whose refits set its linear
part (per-SNV weights and their logistic calibration) in closed form instead.

Everything random is drawn from torch Generators seeded from streams spawned from the run's
seed and saved in checkpoints, so a run resumed from a checkpoint reproduces the uninterrupted
run exactly.

The networks G and H, the mechanism's genotype matrix, kappa and the in-game ridge refits live
on the run's device (``device=``, :mod:`bngp.device`); the Generators stay on the CPU and every
draw (memberships b, the defender's randomness r, the fixed Gaussian noise) is made there and
then moved to the device, so a CUDA run draws exactly what the CPU run draws and differs from it
only by floating-point rounding.  Checkpoints and ``defender.pt`` hold CPU tensors (a defender
trained on a GPU loads on a machine without one), and a run resumed on another device continues
from the same state.  ``config.json`` records the device (``"cpu"`` or ``"cuda:0"``); it is not
part of the :class:`GameConfig` a resumed run must match.
"""

from __future__ import annotations

import copy
import shutil
from functools import partial

import json
import warnings
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from tqdm.auto import tqdm

from bngp.defenses.artifact import DEFENDER_FILE, DefenderArtifact, population_fingerprint, save_defender
from bngp.defenses.budget import BudgetSetting
from bngp.defenses.shrinkage import ShrinkNoiseDefense
from bngp.defenses.trained import TrainedDefense
from bngp.attacks.training import AttackerTrainingConfig, prefer_population_inversion, train_attacker
from bngp.data.population import Population
from bngp.data.priors import MembershipPrior, UniformSubsetPrior
from bngp.device import DeviceName, resolve_device, to_cpu
from bngp.errors import InputError, TrainingError
from bngp.io_utils import atomic_write, load_torch_payload, write_json
from bngp.release.mechanism import ComposedMechanism, Mechanism, allele_frequencies, pool_copies
from bngp.release.sampling import release_mechanism
from bngp.metrics import auc, binary_entropy, release_aucs
from bngp.attacks.network import Attacker, AttackerSpec
from bngp.attacks.per_individual_network import (
    REFIT_RELEASES,
    PerIndividualAttacker,
    PerIndividualSpec,
    PopulationBoundAttacker,
    prior_mean_frequencies,
)
from bngp.defenses.network import Defender, DefenderSpec, composed_release
from bngp.run_dir import commit_run, open_run
from bngp.ridge import (
    DEFAULT_VALIDATION_RELEASES,
    LearningCurve,
    LinearFit,
    default_shadow_releases,
    fit_converged_jointly,
    fit_ridge,
    fit_ridge_and_whitened,
    max_shadow_releases,
)
from bngp.timing import PhaseTimer
from bngp.rng import SeedLike, named_seeds, resolve_seed, seeded_torch, spawn_seeds, torch_generator

from . import objectives
from .early_stop import patience_stalled
from .config import BUDGET_TOLERANCE, CHECKPOINT_FILE, CONFIG_FILE, REFIT_VALIDATION_DRAWS, SUMMARY_FILE, GameConfig
from .start import BudgetSurface, linear_attack_score, start_defender
from .summary import BgbpRecord, BudgetRecord, CollapseReport, Exploitability, TrainingSummary

__all__ = ["Game", "SEED_STREAMS"]

#: releases a refit draws at a time (:meth:`Game._attacker_releases`).
_REFIT_BLOCK = 2000

#: the named random streams of a run, each spawned from ``GameConfig.seed``.
SEED_STREAMS = ("training", "defender-network", "attacker-network", "evaluation", "evaluation-noise", "fresh-check", "opponent",
                "start-check")


@dataclass
class _History:
    rows: list[dict] = field(default_factory=list)
    collapse_events: int = 0


@contextmanager
def _held_fixed(module: nn.Module) -> Iterator[None]:
    """Within the block ``module``'s parameters take no gradient; gradients still flow through
    the module to its inputs."""
    trained = [parameter for parameter in module.parameters() if parameter.requires_grad]
    for parameter in trained:
        parameter.requires_grad_(False)
    try:
        yield
    finally:
        for parameter in trained:
            parameter.requires_grad_(True)


class Game:
    """Defender vs attacker training on one population and membership prior.

    ``device`` ("auto", "cpu", "cuda" or a ``torch.device``; default the CPU) is where the
    networks train (see the module docstring: the draws do not depend on it).

    ``start`` (a reference mechanism of :mod:`bngp.defenses.budget`, N-of-K prior only) sets G to release it
    exactly before training; ``start_record`` describes it (``TrainingSummary.start``).  Under the
    utility-budget objective G's shrinkage and noise are then held on the budget after each step
    (:class:`bngp.game.start.BudgetSurface`) and the run delivers a trained state only where
    :meth:`check_against_start` finds it more private than the start.

    Example:
        >>> game = Game(population, prior, GameConfig(kappa=1.5, steps=500))   # doctest: +SKIP
        >>> summary = game.train(run_dir)                                      # doctest: +SKIP
    """

    def __init__(
        self, population: Population, prior: MembershipPrior, config: GameConfig, device: DeviceName | torch.device = "cpu",
        start: ShrinkNoiseDefense | None = None, start_record: dict | None = None,
    ) -> None:
        #: where the networks, the mechanism and the refits live (the Generators stay on the CPU).
        self.device = resolve_device(device)
        if prior.n_individuals != population.n_individuals:
            raise InputError(
                f"the prior has {prior.n_individuals} individuals but the population has {population.n_individuals}."
            )
        self.population = population
        self.prior = prior
        self.config = config
        source = population.genotypes
        if config.attacker_kind == "per-individual" and population.packed:
            source = np.asarray(source)  # H(x, d_k) needs the dense genotypes: the mechanism shares them
        self.mechanism = release_mechanism(source, len(config.fixed_gaussian_sigmas) + 1, self.device)
        del source
        n_out = population.n_attributes
        self.kappa = torch.as_tensor(config.kappa_weights(n_out), dtype=torch.float32).to(self.device)
        self.theta = prior.marginals
        #: h(theta_k) per individual, and their mean h(theta), the prior-only attacker's cross-entropy.
        entropies = binary_entropy(self.theta)
        self.entropies = torch.as_tensor(entropies, dtype=torch.float32)
        self.prior_entropy = float(np.mean(entropies))
        self.n_members = float(np.sum(self.theta))
        #: independent streams of the run, spawned from its seed.
        self.seeds = named_seeds(config.seed, SEED_STREAMS)
        self.generator = torch_generator(self.seeds["training"])
        with seeded_torch(self.seeds["defender-network"]):
            self.defender = Defender(
                DefenderSpec(
                    population.n_individuals,
                    n_out,
                    config.noise_dim,
                    skip=config.defender_skip,
                    shrink=config.defender_shrink,
                    full_rank_noise=config.defender_full_rank_noise,
                    noise_law=config.noise_law,
                )
            )
        if config.defender_zero_output:
            with torch.no_grad():
                self.defender.net[-1].weight.zero_()
                self.defender.net[-1].bias.zero_()
        if config.defender_shrink:
            self.defender.set_shrink_target(allele_frequencies(torch.as_tensor(self.theta, dtype=torch.float32)[None], population.genotypes)[0])
            with torch.no_grad():
                self.defender.shrink_weight.fill_(config.shrink_init)
        #: the reference mechanism G starts from (:mod:`bngp.game.start`), its description, and G's state there.
        self.start, self.start_record, self._start_state = start, start_record, None
        #: under a utility budget, started from a reference: (alpha, sigma) held on the budget after each step.
        self._budget_surface: BudgetSurface | None = None
        if start is not None:
            if not isinstance(prior, UniformSubsetPrior):
                raise InputError("a defender starts from a reference mechanism under the N-of-K prior only "
                                 "(the references are calibrated on its draws).")
            start_defender(self.defender, start)
            self._start_state = copy.deepcopy(self.defender.state_dict())
            if config.objective == "utility-budget":
                self._budget_surface = BudgetSurface.of(start, population, prior, config.budget)
        self.defender.to(self.device)  # initialised on the CPU, so its weights do not depend on the device
        #: inverse-variance weights of the fixed Gaussian copies when the in-game attacker reads them pooled
        #: (``GameConfig.pool_copies``), else None: that attacker then reads the whole release.
        self.pool_weights: tuple[float, ...] | None = None
        if config.pool_copies and config.fixed_gaussian_sigmas and config.attacker_kind != "per-individual":
            precision = [float(sigma) ** -2 for sigma in config.fixed_gaussian_sigmas]
            self.pool_weights = tuple(value / sum(precision) for value in precision)
        width = 2 * n_out if self.pool_weights is not None else self.mechanism.n_outputs
        self.attacker_spec = AttackerSpec(width, population.n_individuals, init=config.attacker_init)
        with seeded_torch(self.seeds["attacker-network"]):
            self.attacker = self._new_attacker()
        self.opt_d = torch.optim.Adam(self._defender_param_groups(), lr=config.defender_lr, weight_decay=config.weight_decay, fused=True)
        trained = self._attacker_trained_parameters()
        trained_ids = {id(p) for p in trained}
        for parameter in self.attacker.parameters():
            # a part refitted in closed form takes no gradient: its backward would be discarded
            parameter.requires_grad_(id(parameter) in trained_ids)
        self.opt_a = torch.optim.Adam(trained, lr=config.attacker_lr, weight_decay=config.weight_decay, fused=True)
        self.sched_d = torch.optim.lr_scheduler.ExponentialLR(self.opt_d, gamma=config.lr_decay)
        self.sched_a = torch.optim.lr_scheduler.ExponentialLR(self.opt_a, gamma=config.lr_decay)
        self.multiplier = 0.0
        self.step = 0
        #: (score, step, defender state) of the best defender seen by a freshly refitted attacker.
        self.best: tuple[float, int, dict[str, torch.Tensor]] | None = None
        #: every scoring of the defender by a freshly refitted attacker (step, selection score,
        #: privacy and utility losses on the refit's held-out draws), in order.
        self.selections: list[dict[str, float]] = []
        #: the step at which ``config.selection_patience`` stopped training, None before (or without).
        self.stopped_at: int | None = None
        self.history = _History()
        #: wall time per phase of the training (:mod:`bngp.timing`; on a GPU each phase waits for
        #: its kernels); not part of a checkpoint.
        self.timer = PhaseTimer(partial(torch.cuda.synchronize, self.device) if self.device.type == "cuda" else None)
        self.opponent = self._build_opponent() if config.against != "bayesian" else None
        self.dp_bounds = None
        if config.dp_epsilon is not None:
            self.dp_bounds = tuple(t.to(self.device) for t in objectives.dp_bounds(self.theta, config.dp_epsilon))
        eval_generator = torch_generator(self.seeds["evaluation"])
        self._eval_b = prior.sample_torch(config.eval_batch, eval_generator).to(self.device)
        self._eval_r = self.defender.sample_r(config.eval_batch, eval_generator).to(self.device)

    # -- building blocks -------------------------------------------------------------------
    def _attacker_trained_parameters(self) -> list[nn.Parameter]:
        """The attacker parameters Adam trains: all of them, except those refitted in closed form
        (``attacker_refit_every`` > 0 and not ``train_refitted_head``): the K-output attacker's
        linear head, the per-individual attacker's linear part (per-SNV weights w, beta, b_0)."""
        if isinstance(self.attacker, PopulationBoundAttacker):
            refitted = self.attacker.closed_form_parameters()
        else:
            refitted = [] if self.attacker.head is None else list(self.attacker.head.parameters())
        if not refitted or not self.config.attacker_refit_every or self.config.train_refitted_head:
            return list(self.attacker.parameters())
        frozen = {id(p) for p in refitted}
        return [p for p in self.attacker.parameters() if id(p) not in frozen]

    def _defender_param_groups(self) -> list[dict]:
        """G's network weights at ``defender_lr``; the shrinkage alpha and the noise scales sigma
        at ``shrink_lr``, no decay; started from a reference mechanism, G's weights and sigma at those rates
        times the reference's mean noise scale."""
        per_attribute = [p for p in (self.defender.shrink_weight, self.defender.noise_scale) if p is not None]
        chosen = {id(p) for p in per_attribute}
        network = [p for p in self.defender.parameters() if id(p) not in chosen]
        if per_attribute and self.start is not None and self.defender.noise_scale is not None:
            # Started at a reference whose noise is a small fraction of a frequency, steps of these sizes would
            # change it by more than itself in a few updates (sigma at shrink_lr; G's zero output layer at
            # defender_lr grows by about its fan-in times that per step): the release leaves its budget several
            # times over and the multiplier chases it.  Every step is made relative to the starting scale.
            scale = max(float(np.mean(self.start.scale)), 1e-6)
            groups = [{"params": network, "lr": self.config.defender_lr * scale}]
            groups.append({"params": [self.defender.shrink_weight], "lr": self.config.shrink_lr, "weight_decay": 0.0})
            groups.append({"params": [self.defender.noise_scale], "lr": self.config.shrink_lr * scale, "weight_decay": 0.0})
            return groups
        groups = [{"params": network}]
        if per_attribute:
            groups.append({"params": per_attribute, "lr": self.config.shrink_lr, "weight_decay": 0.0})
        return groups

    def _new_attacker(self) -> Attacker | PopulationBoundAttacker:
        """H on the run's device, its weights drawn on the CPU (from the caller's seeded torch state):
        the K-output network, or the per-individual one bound to the population (``attacker_kind``),
        which starts at the prior and gets its linear part at the first refit."""
        if self.config.attacker_kind == "per-individual":
            spec = PerIndividualSpec(self.population.n_attributes, self.mechanism.n_outputs // self.population.n_attributes)
            network = PerIndividualAttacker(
                spec, prior_mean_frequencies(self.population.genotypes, self.theta), self.n_members, float(np.mean(self.theta))
            )
            return PopulationBoundAttacker(network.to(self.device), self._mechanism_matrix())
        attacker = Attacker(self.attacker_spec).to(self.device)
        if self.attacker_spec.init == "reconstruction":
            genotypes = self.mechanism_genotypes()
            if self.pool_weights is not None:  # the rows are statistics: pooled like releases
                genotypes = self.attacker_input(torch.from_numpy(genotypes).to(self.device)).cpu().numpy()
            attacker.initialise_from_population(genotypes, self.n_members, self.theta)
        return attacker

    def _mechanism_matrix(self) -> torch.Tensor:
        """The mechanism's (K, |Q|) float32 genotype tensor on the run's device (dense whenever the
        attacker is per-individual), which H(x, d_k) shares: one copy of the population in memory."""
        return self._part.genotypes

    @property
    def _part(self) -> Mechanism:
        """The mechanism f(D) that each copy of the release perturbs (the same object in every part)."""
        return self.mechanism.parts[-1] if isinstance(self.mechanism, ComposedMechanism) else self.mechanism

    def _draw_individuals(self) -> torch.Tensor | None:
        """The individuals S scored in one update (``GameConfig.individual_batch``): None for all
        K, else that many indices, uniform without replacement, drawn from the training stream."""
        size = self.config.individual_batch
        if size is None or size >= self.population.n_individuals:
            return None
        chosen = torch.randperm(self.population.n_individuals, generator=self.generator)[:size]
        return chosen.sort().values.to(self.device)

    def attacker_input(self, x: torch.Tensor) -> torch.Tensor:
        """What the in-game attacker reads of releases x: x itself, or with ``GameConfig.pool_copies``
        [z, x_L], z = sum_b w_b x_b the inverse-variance mean of the m fixed Gaussian copies (weights
        w_b = s_b^-2 / sum_c s_c^-2; :func:`bngp.release.mechanism.pool_copies`) and x_L the learned
        block (linear in x, so differentiable).  :meth:`_attacker_release` forms it without the
        whole release, bit for bit."""
        if self.pool_weights is None:
            return x
        fixed = len(self.pool_weights) * self.population.n_attributes
        return torch.cat([pool_copies(x[:, :fixed], self.pool_weights), x[:, fixed:]], dim=1)

    def _attack(self, x: torch.Tensor, individuals: torch.Tensor | None = None) -> torch.Tensor:
        """The in-game attacker's logits on its input x (:meth:`attacker_input`, as
        :meth:`_attacker_release` forms it): (R, K), or (R, |S|) for the individuals S."""
        return self.attacker(x) if individuals is None else self.attacker(x, individuals)

    def mechanism_genotypes(self) -> np.ndarray:
        """The (K, n_outputs) matrix whose frequencies the mechanism releases (for the head)."""
        stat = self.mechanism.statistic(torch.eye(self.population.n_individuals, device=self.device))
        return stat.cpu().numpy()

    def _build_opponent(self):
        from .best_response import best_response_loss

        n_members = int(round(self.n_members)) if self.prior.describe()["kind"] == "uniform-subset" else None
        return best_response_loss(self.config.against, self.population, self.prior, n_members, seed=self.seeds["opponent"])

    def implied_dp_epsilon(self) -> float | None:
        """eps_hat of Prop. 10 for the run's ``dp_epsilon`` (None without the constraint)."""
        if self.config.dp_epsilon is None:
            return None
        return objectives.implied_dp_epsilon(self.config.dp_epsilon, self.theta)

    def _dp_violation(self, probabilities: torch.Tensor, individuals: torch.Tensor | None = None) -> torch.Tensor:
        bounds = self.dp_bounds if individuals is None else tuple(bound[individuals] for bound in self.dp_bounds)
        return objectives.dp_violation(probabilities, bounds)

    def _draw(self, n: int) -> tuple[torch.Tensor, torch.Tensor]:
        """n memberships b ~ sigma and defender randomness r, drawn on the CPU, on the run's device."""
        b = self.prior.sample_torch(n, self.generator)
        r = self.defender.sample_r(n, self.generator)
        return b.to(self.device), r.to(self.device)

    def _opponent_loss(self, b: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """The fixed opponent's relaxed TPR (App. M), computed on the CPU where its fitted attack
        lives (differentiable through the move), on the run's device."""
        return self.opponent(b.cpu(), x.cpu()).to(self.device)

    def _release(self, b: torch.Tensor, r: torch.Tensor, generator: torch.Generator | None = None,
                 out: torch.Tensor | None = None, *, pooled: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
        """Releases x of memberships b (fixed Gaussian blocks, if any, then G's) and f(D), the one
        statistic every copy perturbs (B, |Q|): :func:`bngp.defenses.network.composed_release`
        (``out``: where x is written without autograd).  ``pooled``: with pooled copies, x as the
        in-game attacker reads it (:meth:`attacker_input`, bit for bit), formed as the copies are
        drawn, without the (m + 1)|Q|-wide release."""
        statistic = self._part.statistic(b)
        return composed_release(self.defender, self.config.fixed_gaussian_sigmas, statistic, b, r,
                                generator or self.generator, out, pool=self.pool_weights if pooled else None), statistic

    def _attacker_release(self, b: torch.Tensor, r: torch.Tensor, generator: torch.Generator | None = None,
                          out: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """What the in-game attacker reads of the releases of :meth:`_release` (the same draws) and f(D)."""
        return self._release(b, r, generator, out, pooled=True)

    def _utility(self, x: torch.Tensor, statistic: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(kappa-weighted, plain) utility losses over the learned mechanism's outputs x_L, the last
        |Q| columns of a release or of what the attacker reads of it, of f(D) = ``statistic``."""
        return objectives.utility_losses(x[:, x.shape[1] - statistic.shape[1] :], statistic, self.kappa)

    def _leakage(self, logits: torch.Tensor, b: torch.Tensor, individuals: torch.Tensor | None = None) -> torch.Tensor:
        """Leakage of logits (R, K) of memberships b, or of the columns S = ``individuals`` (logits
        (R, |S|), b (R, K)) measured against their own mean prior entropy."""
        entropy = self.prior_entropy
        if individuals is not None:
            b = b[:, individuals]
            entropy = float(self.entropies[individuals.cpu()].mean())
        return objectives.leakage(logits, b, entropy, recalibrate=self.config.recalibrate, mode=self.config.leakage)

    @torch.no_grad()
    def refit_attacker(self, score_defender: bool = True) -> None:
        """Refit the in-game attacker's head on releases of the current defender: ridge regression,
        or the block-calibrated population inversion when it validates better (as a fresh attacker does);
        for the per-individual attacker, its linear part; with ``score_defender``, also score the
        current defender against it (``GameConfig.select_defender``).  The plain paper network
        (init "paper") has no head and is not refitted."""
        per_individual = isinstance(self.attacker, PopulationBoundAttacker)
        if not per_individual and self.attacker.head is None:
            return
        # as many shadow releases as for the whole release (the pooled input's map is the whole map
        # restricted to the fixed copies' sufficient statistic: no weaker on the same releases)
        n = self.config.refit_releases or (
            REFIT_RELEASES if per_individual
            else default_shadow_releases(self.population.n_individuals, self.mechanism.n_outputs)
        )
        with self.timer("refit: releases"):
            x, b, (validation_x, validation_statistic, validation_b) = self._refit_releases(n)
        with self.timer("refit: fit"):
            if per_individual:
                # No K-output head here: the ridge map from x to the K memberships, its separate
                # recalibration (calibrate_head) and the population-inversion head
                # (prefer_population_inversion) do not apply to H(x, d_k).  Its closed-form part,
                # per-SNV weights and their logistic calibration (which is the recalibration), is
                # fitted instead; like the head's refit, it zeroes the output MLP's last layer.
                self.attacker.refit(x, b)
            else:
                self._refit_population_attacker(x, b, validation_x, validation_b)
        for parameter in self.attacker.refit_parameters():
            self.opt_a.state.pop(parameter, None)
        if score_defender and self.selects_defender:
            with self.timer("selection"):
                self._consider_defender(validation_x, validation_statistic, validation_b)

    @torch.no_grad()
    def _refit_releases(self, n: int) -> tuple[torch.Tensor, torch.Tensor, tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
        """A refit's draws from the current defender (eval mode): n releases as the in-game attacker
        reads them and their memberships, then (releases, f(D), memberships) of
        ``REFIT_VALIDATION_DRAWS`` validation draws."""
        b, r = self._draw(n)
        validation_b, validation_r = self._draw(REFIT_VALIDATION_DRAWS)
        self.defender.eval()
        x = self._attacker_releases(b, r)
        validation_x, validation_statistic = self._attacker_release(validation_b, validation_r)
        self.defender.train()
        return x, b, (validation_x, validation_statistic, validation_b)

    def _attacker_releases(self, b: torch.Tensor, r: torch.Tensor) -> torch.Tensor:
        """The releases of (b, r) as the in-game attacker reads them (:meth:`_attacker_release`), drawn
        by blocks of ``_REFIT_BLOCK`` rows, each written in place into one tensor.  With pooled copies
        only the pooled releases are formed (a whole composed refit set is 5,368 x 25,000 at paper
        scale)."""
        x = torch.empty((b.shape[0], self.attacker_spec.n_outputs), device=self.device)  # H's input width
        for start in range(0, b.shape[0], _REFIT_BLOCK):
            stop = min(start + _REFIT_BLOCK, b.shape[0])
            self._attacker_release(b[start:stop], r[start:stop], out=x[start:stop])
        return x

    def _refit_population_attacker(
        self, x: torch.Tensor, b: torch.Tensor, validation_x: torch.Tensor, validation_b: torch.Tensor
    ) -> None:
        """The K-output attacker's head on its input x: the ridge map, recalibrated, or the population inversion."""
        self.attacker.initialise_from_ridge(fit_ridge(x, b, (validation_x, validation_b), prior_mean=self.theta), self.theta)
        self.attacker.calibrate_head(validation_x, validation_b)
        prefer_population_inversion(
            self.attacker, self.population.genotypes, self.n_members, self.theta, x, b, validation_x, validation_b
        )

    @property
    def selects_defender(self) -> bool:
        """Whether the best defender state is kept (see ``GameConfig.select_defender``)."""
        return self.config.select_defender and bool(self.config.attacker_refit_every) and self.opponent is None

    @torch.no_grad()
    def _consider_defender(self, x: torch.Tensor, statistic: torch.Tensor, b: torch.Tensor) -> None:
        """Score the current defender against the just-refitted attacker head on held-out draws
        by the defender's objective; keep its state if it is the best so far.

        Under a budget objective only states that meet the budget on these draws compete (by
        the objective they minimise); while none has, the one that misses it by least is kept."""
        self.attacker.eval()
        logits = self._attack(x)
        self.attacker.train()
        weighted, plain = self._utility(x, statistic)
        leakage = self._leakage(logits, b)
        score = objectives.selection_score(self.config, float(leakage), float(weighted), float(plain))
        if self.dp_bounds is not None:
            score = score + self.config.dp_penalty * float(self._dp_violation(torch.sigmoid(logits)))
        self.selections.append({"step": self.step, "score": float(score), "privacy_loss": float(leakage),
                                "utility_loss": float(plain)})
        if self.best is None or float(score) < self.best[0]:
            self.best = (float(score), self.step, copy.deepcopy(self.defender.state_dict()))

    def training_step(self) -> dict[str, float]:
        """``attacker_steps`` attacker updates, then one defender update; returns the losses."""
        if self.config.attacker_refit_every and self.step % self.config.attacker_refit_every == 0:
            self.refit_attacker()
        self.defender.train()
        self.attacker.train()
        attacker_loss = torch.tensor(0.0)
        with self.timer("attacker steps"):
            for _ in range(self.config.attacker_steps):
                b, r = self._draw(self.config.batch_size)
                with torch.no_grad():
                    x, _ = self._attacker_release(b, r)
                individuals = self._draw_individuals()
                targets = b if individuals is None else b[:, individuals]
                attacker_loss = F.binary_cross_entropy_with_logits(self._attack(x, individuals), targets)
                self.opt_a.zero_grad(set_to_none=True)
                attacker_loss.backward()
                self.opt_a.step()
        with self.timer("defender step"):
            return self._defender_step(attacker_loss)

    def _defender_step(self, attacker_loss: torch.Tensor) -> dict[str, float]:
        """One defender update against the current attacker; returns the losses."""
        b, r = self._draw(self.config.batch_size)
        x, statistic = self._attacker_release(b, r)  # the whole release when there is an opponent (no composition)
        individuals = self._draw_individuals()
        # H held fixed: the backward computes the gradients through H for the defender only,
        # not H's own (which the next attacker update would discard)
        with _held_fixed(self.attacker):
            logits = self._attack(x, individuals)
            if self.opponent is None:
                leakage = self._leakage(logits, b, individuals)
            else:
                leakage = self._opponent_loss(b, x)
            weighted, plain = self._utility(x, statistic)
            defender_loss = objectives.defender_loss(self.config, self.multiplier, leakage, weighted, plain)
            violation = torch.zeros(())
            if self.dp_bounds is not None:
                violation = self._dp_violation(torch.sigmoid(logits), individuals)
                defender_loss = defender_loss + self.config.dp_penalty * violation
            self.opt_d.zero_grad(set_to_none=True)
            defender_loss.backward()
        self.opt_d.step()
        self.defender.project_()
        if self._budget_surface is not None:
            self._budget_surface.project(self.defender)
        self.multiplier = objectives.updated_multiplier(self.config, self.multiplier, leakage.item(), plain.item())
        self.step += 1
        if self.step % self.config.decay_every == 0:
            self.sched_d.step()
            self.sched_a.step()
        return {
            "attacker_loss": attacker_loss.item(),
            "defender_loss": defender_loss.item(),
            "privacy_loss": leakage.item(),
            "utility_loss": plain.item(),
            "weighted_utility_loss": weighted.item(),
            "dp_violation": violation.item(),
            "multiplier": self.multiplier,
        }

    @torch.no_grad()
    def evaluate_heldout(self) -> dict[str, float]:
        """The current attacker on the fixed held-out batch: AUC, cross-entropy, collapse flag."""
        self.defender.eval()
        self.attacker.eval()
        x, statistic = self._attacker_release(self._eval_b, self._eval_r, torch_generator(self.seeds["evaluation-noise"]))
        logits = self._attack(x)
        probabilities = torch.sigmoid(logits)
        cross_entropy = float(F.binary_cross_entropy_with_logits(logits, self._eval_b))
        _, plain = self._utility(x, statistic)
        spread = float(probabilities.std(dim=0).mean())
        at_prior = spread < 1e-3 and abs(self.prior_entropy - cross_entropy) < 1e-3
        self.defender.train()
        self.attacker.train()
        extra = {} if self.dp_bounds is None else {"heldout_dp_violation": float(self._dp_violation(probabilities))}
        alpha = self.defender.shrinkage()
        if alpha is not None:
            extra["shrinkage_mean"] = float(alpha.mean())
        if self.opponent is not None:
            extra["heldout_opponent_tpr"] = float(self._opponent_loss(self._eval_b, x))
        return {
            **extra,
            "heldout_auc": auc(probabilities.cpu().numpy(), self._eval_b.cpu().numpy()),
            "heldout_cross_entropy": cross_entropy,
            "heldout_privacy_loss": self.prior_entropy - cross_entropy,
            "heldout_utility_loss": float(plain),
            "attacker_output_spread": spread,
            "attacker_at_prior": float(at_prior),
        }

    # -- checkpoints ---------------------------------------------------------------------------
    def state(self) -> dict[str, Any]:
        """Everything needed to resume, loadable with ``weights_only=True``, as CPU tensors."""
        return to_cpu({
            "format": "bngp-checkpoint-1",
            "step": self.step,
            "config": self.config.to_dict(),
            "fingerprint": population_fingerprint(self.population.genotypes),
            "defender": self.defender.state_dict(),
            "attacker": self.attacker.state_dict(),
            "opt_d": self.opt_d.state_dict(),
            "opt_a": self.opt_a.state_dict(),
            "sched_d": self.sched_d.state_dict(),
            "sched_a": self.sched_a.state_dict(),
            "generator": self.generator.get_state(),
            "torch_rng": torch.get_rng_state(),
            "multiplier": self.multiplier,
            "history": json.dumps(self.history.rows),
            "selections": json.dumps(self.selections),
            "stopped_at": -1 if self.stopped_at is None else self.stopped_at,
            "collapse_events": self.history.collapse_events,
            "timings": json.dumps(self.timer.to_dict()),
            **(
                {"best_score": self.best[0], "best_step": self.best[1], "best_defender": self.best[2]}
                if self.best is not None
                else {}
            ),
        })

    def save_checkpoint(self, path: str | Path) -> None:
        with atomic_write(path) as handle:
            torch.save(self.state(), handle)

    def load_checkpoint(self, path: str | Path) -> None:
        """Restore a checkpoint written by :meth:`save_checkpoint` (safe loading)."""
        payload = load_torch_payload(path, "bngp-checkpoint-1", TrainingError, "bngp training checkpoint")
        if payload["fingerprint"] != population_fingerprint(self.population.genotypes):
            raise TrainingError("the checkpoint was trained on a different population.")
        saved = dict(payload["config"])
        current = self.config.to_dict()
        changed = [k for k in saved if k != "steps" and saved[k] != current.get(k)]
        if changed:
            raise TrainingError(f"cannot resume: the checkpoint was trained with a different `{changed[0]}`.")
        self.defender.load_state_dict(payload["defender"])
        self.attacker.load_state_dict(payload["attacker"])
        self.opt_d.load_state_dict(payload["opt_d"])
        self.opt_a.load_state_dict(payload["opt_a"])
        self.sched_d.load_state_dict(payload["sched_d"])
        self.sched_a.load_state_dict(payload["sched_a"])
        self.generator.set_state(payload["generator"])
        torch.set_rng_state(payload["torch_rng"])
        self.multiplier = float(payload["multiplier"])
        self.step = int(payload["step"])
        self.history = _History(json.loads(payload["history"]), int(payload["collapse_events"]))
        if "selections" in payload:  # checkpoints written before 2026-11-26 did not keep them
            self.selections = json.loads(payload["selections"])
            self.stopped_at = None if int(payload["stopped_at"]) < 0 else int(payload["stopped_at"])
        if "timings" in payload:  # checkpoints written before 2026-11-24 did not keep them
            self.timer.restore(json.loads(payload["timings"]))
        if "best_defender" in payload:
            self.best = (float(payload["best_score"]), int(payload["best_step"]), payload["best_defender"])

    # -- the loop ---------------------------------------------------------------------------
    def train(self, run_dir: str | Path, *, resume: bool = False, force: bool = False, progress: bool = True) -> TrainingSummary:
        """Train to ``config.steps`` defender steps, writing the run directory as a transaction.

        The run is written in ``RUN_DIR.incomplete`` and moved to RUN_DIR only when complete,
        with a ``manifest.json`` (:mod:`bngp.run_dir`): ``config.json``, ``checkpoint.pt``
        (resumable), ``defender.pt`` (the trained G), ``tensorboard/`` (scalars) and
        ``summary.json`` (history, collapse report, fresh-attacker check; ``final`` is the last
        training evaluation, ``selected`` the restored best state of ``GameConfig.select_defender``
        with its held-out evaluation).  An existing RUN_DIR is replaced only with ``force``;
        ``resume`` continues an interrupted (or complete) run from its last checkpoint.
        Returns the summary (:class:`bngp.game.summary.TrainingSummary`, whose ``to_dict()``
        is ``summary.json``).
        """
        from torch.utils.tensorboard import SummaryWriter

        work = open_run(run_dir, resume=resume, force=force, checkpoint=CHECKPOINT_FILE)
        checkpoint = work / CHECKPOINT_FILE
        try:
            if resume:
                self.load_checkpoint(checkpoint)
            write_json(work / CONFIG_FILE, self._run_config())
            writer = SummaryWriter(log_dir=str(work / "tensorboard"))
            bar = tqdm(total=self.config.steps, initial=self.step, desc="bngp train", disable=not progress)
            try:
                while self.step < self.config.steps:
                    if self._selection_stalled():
                        self.stopped_at = self.step
                        with self.timer("checkpoint"):
                            self.save_checkpoint(checkpoint)
                        break
                    losses = self.training_step()
                    for name, value in losses.items():
                        writer.add_scalar(f"train/{name}", value, self.step)
                    if self.step % self.config.eval_every == 0 or self.step == self.config.steps:
                        with self.timer("held-out evaluation"):
                            self._record_evaluation(writer, losses, bar)
                    if self.step % self.config.checkpoint_every == 0 or self.step == self.config.steps:
                        with self.timer("checkpoint"):
                            self.save_checkpoint(checkpoint)
                    bar.update(1)
            finally:
                bar.close()
            if self.start is not None:  # where the training left G, before the selection restores a state
                self.start_record = {**(self.start_record or {}), "final_state_moved": self._moved_from_start(),
                                     "final_step": self.step}
            selection = self._restore_best()
            if self.start is not None:
                with self.timer("start check"):
                    selection = self.check_against_start(selection)
            try:
                summary = self._finish(work, writer, progress, selection)
            finally:
                writer.close()
        except BaseException:
            if not checkpoint.is_file():  # nothing to resume from: leave nothing behind
                shutil.rmtree(work, ignore_errors=True)
            raise
        commit_run(work, run_dir, {"config": self.config.to_dict(), "seed": self.config.seed,
                                   "population_fingerprint": population_fingerprint(self.population.genotypes)})
        return summary

    def _selection_stalled(self) -> bool:
        """Whether ``config.selection_patience`` stops training before this step: at a refit step
        s_best + P * ``attacker_refit_every``, s_best the kept state's step (the refit it would make
        now is the run's final scoring instead, :meth:`_restore_best`)."""
        patience, every = self.config.selection_patience, self.config.attacker_refit_every
        if self.stopped_at is not None:  # a resumed run that had stopped
            return True
        if patience is None or not self.selects_defender or self.best is None:
            return False
        return patience_stalled(self.step, self.best[1], patience, every)

    def _restore_best(self) -> dict[str, Any] | None:
        """Score the final defender (one more refit), restore the best scored state and evaluate
        it on the held-out batch; None when no selection is made."""
        if not self.selects_defender:
            return None
        self.refit_attacker()
        score, step, state = self.best
        if step != self.step:  # the final state is not the best: restore it and refit against it
            self.defender.load_state_dict(state)
            self.refit_attacker(score_defender=False)
        return {"step": step, "score": score, **self.evaluate_heldout()}

    def delivered_defense(self) -> TrainedDefense:
        """The defender in its current state as a :class:`~bngp.defenses.trained.TrainedDefense` (shared, not copied)."""
        artifact = DefenderArtifact(self.defender, "", self.prior.describe(), self.kappa.cpu().numpy(), self.config.to_dict())
        return TrainedDefense(artifact, "in memory")

    def check_against_start(self, selection: dict[str, Any] | None) -> dict[str, Any] | None:
        """Never worse than the start: when the kept state is not the reference G started from, both are
        attacked by the same converged linear attack (:func:`bngp.game.start.linear_attack_score`, the same
        seed) and the kept state stays only if its AUC is lower; otherwise G returns to the start.  The
        outcome is recorded in ``start_record`` (``TrainingSummary.start``: ``kept``, ``reason``, the scores, how
        far the kept state had moved from the start, and, written before the selection, how far the final state
        of the training had).  Returns the selection."""
        record = dict(self.start_record or {})
        n_members = int(round(self.n_members))
        trained_step = None if selection is None else selection["step"]
        record["trained_step"] = trained_step
        record["kept_state_moved"] = self._moved_from_start()
        if trained_step in (None, 0):
            record.update(kept="start", reason="the game kept its first state, the start")
            self.start_record = record
            return selection
        self.defender.eval()
        seed = self.seeds["start-check"]
        start_score = linear_attack_score(self.start, self.population, n_members, seed)
        trained_score = linear_attack_score(self.delivered_defense(), self.population, n_members, seed)
        record["start_check"] = {"seed": seed, "start": start_score.to_dict(), "trained": trained_score.to_dict()}
        if trained_score.auc < start_score.auc:
            record.update(kept="trained", reason=f"converged linear attack AUC {trained_score.auc:.4f} < start's {start_score.auc:.4f}")
            self.start_record = record
            return selection
        record.update(kept="start", reason=f"converged linear attack AUC {trained_score.auc:.4f} >= start's {start_score.auc:.4f}")
        self.start_record = record
        self.defender.load_state_dict(self._start_state)
        self.refit_attacker(score_defender=False)
        return {"step": 0, "score": None, "returned_to_start": True, **self.evaluate_heldout()}

    @torch.no_grad()
    def _moved_from_start(self) -> dict[str, float]:
        """How far G's current state is from its start: the mean shrinkage and noise scale at the start and now,
        mean |alpha - a| and mean |sigma - s|, and the largest |weight| of G's output layer (0 at the start)."""
        start = self.start
        shrink = self.defender.shrink_weight.detach().double().cpu().numpy()
        scale = self.defender.noise_scale.detach().double().cpu().numpy()
        output = self.defender.net[-1]
        return {"shrink_mean": [float(start.shrink.mean()), float(shrink.mean())],
                "scale_mean": [float(start.scale.mean()), float(scale.mean())],
                "shrink_mean_abs_change": float(np.abs(shrink - start.shrink).mean()),
                "scale_mean_abs_change": float(np.abs(scale - start.scale).mean()),
                "output_layer_max_abs": float(max(output.weight.abs().max(), output.bias.abs().max()))}

    def _record_evaluation(self, writer: Any, losses: dict[str, float], bar: Any) -> None:
        metrics = self.evaluate_heldout()
        for name, value in metrics.items():
            writer.add_scalar(f"heldout/{name}", value, self.step)
        if metrics["attacker_at_prior"]:
            self.history.collapse_events += 1
        self.history.rows.append({"step": self.step, **losses, **metrics})
        # H as trained so far, not the summary's in-game AUC (H refitted against the delivered state)
        bar.set_postfix({"H auc before final refit": f"{metrics['heldout_auc']:.3f}",
                         "util": f"{metrics['heldout_utility_loss']:.4f}"})

    def _run_config(self) -> dict:
        return {
            "config": self.config.to_dict(),
            "prior": self.prior.describe() if self.prior.describe()["kind"] != "bernoulli" else {"kind": "bernoulli"},
            "population": {
                "individuals": self.population.n_individuals,
                "attributes": self.population.n_attributes,
                "fingerprint": population_fingerprint(self.population.genotypes),
                "metadata": self.population.metadata,
            },
            "mechanism": self.mechanism.describe(),
            "defender": self.defender.spec.to_dict(),
            "attacker": (self.attacker.spec if isinstance(self.attacker, PopulationBoundAttacker) else self.attacker_spec).to_dict(),
            "device": str(self.device),
        }

    def fresh_attacker_check(self, steps: int, seed: SeedLike, progress: bool = False) -> dict:
        """Fit the linear and whitened attackers to convergence against the frozen defender, then
        train a new network attacker warm-started from the linear one's ridge map (as in
        evaluation, which fits that map once for both) for up to ``steps`` steps, stopped early
        by ``config.fresh_check_patience`` (its training curve records where); held-out AUC and
        cross-entropy over 512 fresh draws.  Every draw derives from ``seed`` (an int, None or a
        Generator, :func:`bngp.rng.resolve_seed`)."""
        seed = resolve_seed(seed)
        init = "paper" if self.config.attacker_init == "paper" else "shadow-ridge"
        config = AttackerTrainingConfig(steps=steps, batch_size=self.config.batch_size, init=init,
                                        patience=self.config.fresh_check_patience)
        test_seed, linear_seed = spawn_seeds(seed, 2)
        x, b = self.release_sampler(test_seed)(512)
        if self._releases_data_independent(x):
            return self._data_independent_check(steps, config.patience)
        labels = b.cpu().numpy()
        check: dict[str, Any] = {}
        fits = self._converged_linear_fits(linear_seed)
        for name, (fit, curve) in fits.items():
            with torch.no_grad():
                scores = fit.predict(x).cpu().numpy()
            check[f"{name}_auc"] = float(release_aucs(scores, labels).mean())
            check[f"{name}_learning_curve"] = curve.to_dict()
        attacker = train_attacker(
            self.release_sampler(seed),
            AttackerSpec(self.mechanism.n_outputs, self.population.n_individuals, init=init),
            config,
            seed=seed,
            population=self.population.genotypes,
            n_members=self.n_members,
            theta=self.theta,
            progress=progress,
            description="fresh-attacker check",
            device=self.device,
            warm_fit=fits["linear"] if init == "shadow-ridge" else None,
        )
        with torch.no_grad():
            logits = attacker(x)
            probabilities = torch.sigmoid(logits)
        check.update({
            "steps": steps,
            "patience": config.patience,
            "auc": float(release_aucs(logits.cpu().numpy(), labels).mean()),
            "bgp_risk": float(F.binary_cross_entropy_with_logits(logits, b)),
            "prior_entropy": self.prior_entropy,
            "warm_start": attacker.warm_start,
            "training_curve": attacker.training_curve,
        })
        check["strongest_auc"] = max(check["auc"], check["linear_auc"], check["whitened_auc"])
        if self.dp_bounds is not None:
            check["dp_bound_violation_rate"] = self._dp_bound_violation_rate(probabilities)
        return check

    def _dp_bound_violation_rate(self, probabilities: torch.Tensor) -> float:
        """The share of an attacker's probabilities (R, K) outside the DPH^eps bounds."""
        lower, upper = self.dp_bounds
        return float(((probabilities < lower - 1e-6) | (probabilities > upper + 1e-6)).float().mean())

    def _releases_data_independent(self, x: torch.Tensor) -> bool:
        """Whether no attacker can do better than the prior against the frozen defender: G releases
        f(theta) whatever the data (:meth:`Defender.is_data_independent`), nothing else is released
        (no fixed composed copies), the check's releases ``x`` are identical bit for bit, and the prior
        is the same for every individual (with individual priors, ranking by the prior alone beats
        0.5 on any release)."""
        theta = np.asarray(self.theta)
        return (not self.config.fixed_gaussian_sigmas and self.defender.is_data_independent()
                and bool((x == x[0]).all()) and float(theta.max() - theta.min()) == 0.0)

    def _data_independent_check(self, steps: int, patience: int | None) -> dict:
        """The fresh-attacker check of a data-independent release, without fitting: the release is
        independent of b, so every attacker's posterior is the (exchangeable) prior and every
        individual ties: AUC 0.5, cross-entropy the prior entropy (no attacker is trained)."""
        return {
            "data_independent": True,
            "statement": "the defender releases f(theta) whatever the data (shrinkage 1, zero output, no noise; "
                         "the check's 512 releases identical) under an exchangeable prior: every attacker's "
                         "posterior is the prior, so no attacker was fitted",
            "linear_auc": 0.5, "whitened_auc": 0.5, "steps": steps, "patience": patience, "auc": 0.5,
            "bgp_risk": self.prior_entropy, "prior_entropy": self.prior_entropy, "warm_start": None,
            "training_curve": None, "strongest_auc": 0.5,
            # an attacker at the prior (0 for the bounds of objectives.dp_bounds, which contain theta)
            **({"dp_bound_violation_rate": self._dp_bound_violation_rate(
                torch.as_tensor(np.asarray(self.theta), dtype=self.dp_bounds[0].dtype, device=self.dp_bounds[0].device)
            )} if self.dp_bounds is not None else {}),
        }

    def _converged_linear_fits(self, seed: int) -> dict[str, tuple[LinearFit, LearningCurve]]:
        """The linear and whitened attackers fitted to convergence on the same shadow releases of the
        frozen defender (simulated once from ``seed``), both from the whitened fit's decomposition
        (:func:`bngp.ridge.fit_ridge_and_whitened`); the releases are freed on return: the network
        attacker trained next does not hold them (up to 20,000 x 5,000 at paper scale)."""
        sampler = self.release_sampler(seed)
        start = default_shadow_releases(self.population.n_individuals, self.mechanism.n_outputs)
        maximum = max_shadow_releases(self.population.n_individuals, self.mechanism.n_outputs)
        validation = sampler(DEFAULT_VALIDATION_RELEASES)
        linear, whitened = fit_converged_jointly(partial(fit_ridge_and_whitened, prior_mean=self.theta), sampler,
                                                 start=start, maximum=maximum, validation=validation)
        return {"linear": linear, "whitened": whitened}

    def release_sampler(self, seed: SeedLike):
        """A sampler of (releases, memberships) from the frozen defender (eval mode), drawn on the
        CPU from ``seed`` (an int, None or a Generator, :func:`bngp.rng.resolve_seed`) and returned
        on the run's device."""
        generator = torch_generator(resolve_seed(seed))
        defender = self.defender

        @torch.no_grad()
        def sample(n: int) -> tuple[torch.Tensor, torch.Tensor]:
            defender.eval()
            b = self.prior.sample_torch(n, generator).to(self.device)
            r = self.defender.sample_r(n, generator).to(self.device)
            return self._release(b, r, generator)[0], b

        return sample

    def _finish(self, run_dir: Path, writer: Any, progress: bool, selection: dict[str, Any] | None) -> TrainingSummary:
        self.defender.eval()
        save_defender(
            run_dir / DEFENDER_FILE,
            self.defender,
            population_fingerprint(self.population.genotypes),
            self.prior.describe(),
            self.kappa.cpu().numpy(),
            self.config.to_dict(),
        )
        last = self.history.rows[-1] if self.history.rows else {}
        delivered = selection if selection is not None else last
        budget = None
        if self.config.objective != "preference" and selection is not None:
            measured = selection["heldout_utility_loss" if self.config.objective == "utility-budget" else "heldout_privacy_loss"]
            if self.config.objective == "utility-budget" and isinstance(self.prior, UniformSubsetPrior):
                # the one measurement of a loss against a budget (``bngp evaluate`` reads the same)
                measured = BudgetSetting.of(self.population, self.prior.n_members).measured_loss(self.delivered_defense())
            met = measured <= self.config.budget * (1 + BUDGET_TOLERANCE) + 1e-12
            message = None
            if not met:
                message = (f"no defender state met the {self.config.objective} {self.config.budget:g} on held-out draws; "
                           f"the one kept misses it least ({measured:.4g})")
                warnings.warn(message, stacklevel=2)
            budget = BudgetRecord(self.config.objective, self.config.budget, measured, bool(met), message)
        bgbp = None
        if self.config.dp_epsilon is not None:
            bgbp = BgbpRecord(
                epsilon=self.config.dp_epsilon,
                theta_max=float(np.max(self.theta)),
                implied_epsilon=self.implied_dp_epsilon(),
                statement="if the attacker's best response satisfies DPH^eps, the mechanism is "
                "eps_hat-DP with eps_hat = log(1 + (e^eps - 1) / theta*) (Prop. 10); the penalty "
                "enforces DPH^eps on the trained attacker only, so check dp_bound_violation_rate",
            )
        check = exploitability = None
        if self.config.fresh_check_steps > 0:
            with self.timer("fresh-attacker check"):
                check = self.fresh_attacker_check(self.config.fresh_check_steps, self.seeds["fresh-check"], progress)
            writer.add_scalar("final/fresh_attacker_auc", check["auc"], self.step)
            writer.add_scalar("final/strongest_fresh_auc", check["strongest_auc"], self.step)
            in_game = delivered.get("heldout_auc", check["strongest_auc"])
            gap = check["strongest_auc"] - in_game
            exploitability = Exploitability(
                in_game_auc=in_game,
                strongest_fresh_auc=check["strongest_auc"],
                gap=gap,
                statement="AUC of the strongest attacker fitted to convergence against the final defender "
                "(fresh Bayesian network, converged ridge, converged whitened discriminant) next to the "
                "in-game attacker's; the former is the defender's privacy",
            )
            if gap > 0.05:
                message = (
                    f"a fresh attacker reaches AUC {check['strongest_auc']:.3f} against the trained defender, "
                    f"{gap:.3f} above the in-game attacker: the defender fools its own attacker only; "
                    "train with more attacker steps per defender step or more frequent attacker refits"
                )
                check["warning"] = message
                warnings.warn(message, stacklevel=2)
        collapse_warning = None
        if self.history.collapse_events:
            collapse_warning = (
                f"the in-game attacker's outputs sat at the prior in {self.history.collapse_events} of "
                f"{len(self.history.rows)} evaluations (attacker collapse or a perfect defense; the "
                "fresh-attacker check tells which)"
            )
        summary = TrainingSummary(
            steps=self.step,
            against=self.config.against if self.opponent is None else self.opponent.describe(),
            final=last,
            selected=selection,
            collapse=CollapseReport(self.history.collapse_events, len(self.history.rows), collapse_warning),
            history=tuple(self.history.rows),
            budget=budget,
            bgbp=bgbp,
            fresh_attacker_check=check,
            exploitability=exploitability,
            seed=self.config.seed,
            seeds=self.seeds,
            timings=self.timer.to_dict(),
            selections=tuple(self.selections) if self.selects_defender else None,
            early_stop=None if self.stopped_at is None else {
                "step": self.stopped_at, "patience": self.config.selection_patience,
                "refit_every": self.config.attacker_refit_every, "kept_step": self.best[1], "steps": self.config.steps},
            start=self.start_record if self.start is not None else None,
        )
        write_json(run_dir / SUMMARY_FILE, summary.to_dict())
        return summary
