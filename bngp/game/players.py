"""The players of the BNGP game and what they act on (arXiv:2410.07414, section 3, App. L.8).

:class:`Players` builds, from a population, a membership prior and a :class:`~bngp.game.config.GameConfig`:
the defender G(b, r) (:class:`bngp.defenses.network.Defender`), the in-game attacker H (the paper's H(x)
with one output per known individual, or H(x, d_k) with weights shared across individuals,
:mod:`bngp.attacks.per_individual_network`), their Adam optimisers with ExponentialLR decay (App. L.8),
the mechanism f(D) with any fixed Gaussian copies composed before G (App. L.6), and the run's random
streams.  It draws memberships b ~ sigma and G's randomness r, forms releases, and measures the two
losses of section 3: the leakage (the best attacker's cross-entropy below the prior's, Lemma 3) and
the utility loss (App. L.3), through :mod:`bngp.game.objectives`.

Every random draw is made on the CPU from torch Generators seeded from streams spawned from the run's
seed (:data:`SEED_STREAMS`) and moved to the run's device, so a CUDA run draws exactly what the CPU run
draws and differs from it only by floating-point rounding.
"""

from __future__ import annotations

import copy
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from functools import cached_property, partial
from typing import TYPE_CHECKING, Callable, Iterator

import numpy as np
import torch
from torch import nn

from bngp.attacks.network import Attacker
from bngp.attacks.per_individual_network import (
    PerIndividualAttacker,
    PerIndividualSpec,
    PopulationBoundAttacker,
    prior_mean_frequencies,
)
from bngp.data.geometry import clip_coordinates
from bngp.data.population import Population
from bngp.data.priors import MembershipPrior, UniformSubsetPrior
from bngp.defenses.artifact import DefenderArtifact
from bngp.defenses.network import Defender, composed_release
from bngp.defenses.shrinkage import ShrinkNoiseDefense
from bngp.defenses.trained import TrainedDefense
from bngp.device import DeviceName, resolve_device
from bngp.errors import InputError
from bngp.metrics import binary_entropy
from bngp.release.composition import ComposedMechanism, inverse_variance_weights, pool_copies
from bngp.release.mechanism import Mechanism, allele_frequencies
from bngp.release.sampling import release_mechanism
from bngp.rng import SeedLike, named_seeds, resolve_seed, seeded_torch, torch_generator
from bngp.timing import PhaseTimer

from . import objectives
from .config import GameConfig
from .start import BudgetSurface, defender_row_space_rank, start_defender

if TYPE_CHECKING:
    from .best_response import BestResponseLoss

__all__ = ["Players", "SEED_STREAMS"]

#: the named random streams of a run, each spawned from ``GameConfig.seed``.
SEED_STREAMS = ("training", "defender-network", "attacker-network", "evaluation", "evaluation-noise", "fresh-check", "opponent",
                "start-check")


@dataclass
class History:
    """The held-out evaluations of a run, in order, and how many found the attacker at the prior."""

    rows: list[dict] = field(default_factory=list)
    collapse_events: int = 0


@contextmanager
def held_fixed(module: nn.Module) -> Iterator[None]:
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


class Players:
    """G, H, their optimisers, the mechanism and the run's streams and state (see the module docstring).

    It is the state every role of the game reads and updates: :class:`bngp.game.selection.Refits`,
    :class:`bngp.game.step.TrainingStep` and :class:`bngp.game.checks.PostTrainingChecks` each hold it,
    and :class:`bngp.game.trainer.Game` checkpoints it.

    ``device`` ("auto", "cpu", "cuda" or a ``torch.device``; default the CPU) is where the networks train;
    the draws do not depend on it.  ``start`` (a reference mechanism of :mod:`bngp.defenses.budget`, N-of-K
    prior only) sets G to release it exactly before training; ``start_record`` describes it.  Under the
    utility-budget objective G's shrinkage and noise are then held on the budget after each step
    (:class:`bngp.game.start.BudgetSurface`).
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
        if config.attacker.kind == "per-individual" and population.packed:
            source = np.asarray(source)  # H(x, d_k) needs the dense genotypes: the mechanism shares them
        self.mechanism = release_mechanism(source, len(config.defender.fixed_gaussian_sigmas) + 1, self.device)
        del source
        self.kappa = torch.as_tensor(config.objective.kappa_weights(population.n_attributes), dtype=torch.float32).to(self.device)
        self.theta = prior.marginals
        #: h(theta_k) per individual, and their mean h(theta), the prior-only attacker's cross-entropy.
        entropies = binary_entropy(self.theta)
        self.entropies = torch.as_tensor(entropies, dtype=torch.float32)
        self.prior_entropy = float(np.mean(entropies))
        self.n_members = float(np.sum(self.theta))
        #: independent streams of the run, spawned from its seed.
        self.seeds = named_seeds(config.seed, SEED_STREAMS)
        self.generator = torch_generator(self.seeds["training"])
        self._build_defender(start, start_record)
        self._build_attacker()
        self._build_optimisers()
        self.multiplier = 0.0
        self.step = 0
        #: (score, step, defender state) of the best defender seen by a freshly refitted attacker.
        self.best: tuple[float, int, dict[str, torch.Tensor]] | None = None
        #: every scoring of the defender by a freshly refitted attacker (step, selection score,
        #: privacy and utility losses on the refit's held-out draws), in order.
        self.selections: list[dict[str, float]] = []
        #: the step at which ``config.selection.patience`` stopped training, None before (or without).
        self.stopped_at: int | None = None
        self.history = History()
        #: wall time per phase of the training (:mod:`bngp.timing`; on a GPU each phase waits for
        #: its kernels); not part of a checkpoint.
        self.timer = PhaseTimer(partial(torch.cuda.synchronize, self.device) if self.device.type == "cuda" else None)
        self.opponent = self._build_opponent() if config.objective.against != "bayesian" else None
        self.dp_bounds = None
        if config.objective.dp_epsilon is not None:
            self.dp_bounds = tuple(t.to(self.device) for t in objectives.dp_bounds(self.theta, config.objective.dp_epsilon))
        eval_generator = torch_generator(self.seeds["evaluation"])
        self.eval_b = prior.sample_torch(config.eval_batch, eval_generator).to(self.device)
        self.eval_r = self.defender.sample_r(config.eval_batch, eval_generator).to(self.device)

    def _build_defender(self, start: ShrinkNoiseDefense | None, start_record: dict | None) -> None:
        """G, its weights drawn on the CPU from the "defender-network" stream: at the data-independent release
        f(theta) (zero output layer, shrinkage 1) by default, or at the reference mechanism ``start``."""
        config, population = self.config.defender, self.population
        with seeded_torch(self.seeds["defender-network"]):
            spec = config.spec(population.n_individuals, population.n_attributes)
            if start is not None and defender_row_space_rank(start):  # G releases only in the row space
                spec = replace(spec, row_space_rank=defender_row_space_rank(start), row_space_output=True)
            self.defender = Defender(spec)
        if config.zero_output:
            with torch.no_grad():
                self.defender.net[-1].weight.zero_()
                self.defender.net[-1].bias.zero_()
        if config.shrink:
            self.defender.set_shrink_target(allele_frequencies(torch.as_tensor(self.theta, dtype=torch.float32)[None], population.genotypes)[0])
            with torch.no_grad():
                self.defender.shrink_weight.fill_(config.shrink_init)
        #: the reference mechanism G starts from (:mod:`bngp.game.start`), its description, and G's state there.
        self.start, self.start_record, self.start_state = start, start_record, None
        #: under a utility budget, started from a reference: (alpha, sigma) held on the budget after each step.
        self.budget_surface: BudgetSurface | None = None
        if start is not None:
            if not isinstance(self.prior, UniformSubsetPrior):
                raise InputError("a defender starts from a reference mechanism under the N-of-K prior only "
                                 "(the references are calibrated on its draws).")
            start_defender(self.defender, start)
            self.start_state = copy.deepcopy(self.defender.state_dict())
            if self.config.objective.kind == "utility-budget":
                self.budget_surface = BudgetSurface.of(start, population, self.prior, self.config.objective.budget)
        self.defender.to(self.device)  # initialised on the CPU, so its weights do not depend on the device

    def _build_attacker(self) -> None:
        """H, its weights drawn on the CPU from the "attacker-network" stream, reading the release whole or,
        with ``AttackerSettings.pool_copies`` in a composed game, the fixed copies pooled."""
        config, n_out = self.config, self.population.n_attributes
        #: inverse-variance weights of the fixed Gaussian copies when the in-game attacker reads them pooled
        #: (``AttackerSettings.pool_copies``), else None: that attacker then reads the whole release.
        self.pool_weights: tuple[float, ...] | None = None
        sigmas = config.defender.fixed_gaussian_sigmas
        if config.attacker.pool_copies and sigmas and config.attacker.kind != "per-individual":
            self.pool_weights = inverse_variance_weights(sigmas)
        width = 2 * n_out if self.pool_weights is not None else self.mechanism.n_outputs
        spec = config.attacker.spec(width, self.population.n_individuals)
        if self.reads_coordinates:
            spec = replace(spec, n_outputs=self.defender.spec.row_space_rank, release_width=width)
        self.attacker_spec = spec
        with seeded_torch(self.seeds["attacker-network"]):
            self.attacker = self._new_attacker()

    @property
    def reads_coordinates(self) -> bool:
        """Whether the K-output H reads the releases in the candidates' row-space coordinates
        (:meth:`bngp.attacks.network.Attacker.read_coordinates`): when G releases only in the row space
        (``DefenderSpec.row_space_output``, started at a reference shaped to it) and nothing else (no fixed copies)."""
        return (self.defender.spec.row_space_output and self.config.attacker.kind != "per-individual"
                and not self.config.defender.fixed_gaussian_sigmas)

    @property
    def read_width(self) -> int:
        """The width of what :meth:`attacker_release` forms: the release's, or with pooled copies the pooled one's."""
        return self.attacker_spec.release_width or self.attacker_spec.n_outputs

    def _build_optimisers(self) -> None:
        """Adam for G and H (App. L.8) and their ExponentialLR decay; a part of H refitted in closed form
        takes no gradient."""
        config = self.config
        self.opt_d = torch.optim.Adam(self._defender_param_groups(), lr=config.defender.lr, weight_decay=config.weight_decay, fused=True)
        trained = self._attacker_trained_parameters()
        trained_ids = {id(p) for p in trained}
        for parameter in self.attacker.parameters():
            # a part refitted in closed form takes no gradient: its backward would be discarded
            parameter.requires_grad_(id(parameter) in trained_ids)
        self.opt_a = torch.optim.Adam(trained, lr=config.attacker.lr, weight_decay=config.weight_decay, fused=True)
        self.sched_d = torch.optim.lr_scheduler.ExponentialLR(self.opt_d, gamma=config.lr_decay)
        self.sched_a = torch.optim.lr_scheduler.ExponentialLR(self.opt_a, gamma=config.lr_decay)

    def _attacker_trained_parameters(self) -> list[nn.Parameter]:
        """The attacker parameters Adam trains: all of them, except those refitted in closed form
        (``AttackerSettings.refit_every`` > 0 and not ``train_refitted_head``): the K-output attacker's
        linear head, the per-individual attacker's linear part (per-SNV weights w, beta, b_0)."""
        if isinstance(self.attacker, PopulationBoundAttacker):
            refitted = self.attacker.closed_form_parameters()
        else:
            refitted = [] if self.attacker.head is None else list(self.attacker.head.parameters())
        if not refitted or not self.config.attacker.refit_every or self.config.attacker.train_refitted_head:
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
            groups = [{"params": network, "lr": self.config.defender.lr * scale}]
            groups.append({"params": [self.defender.shrink_weight], "lr": self.config.defender.shrink_lr, "weight_decay": 0.0})
            groups.append({"params": [self.defender.noise_scale], "lr": self.config.defender.shrink_lr * scale, "weight_decay": 0.0})
            return groups
        groups = [{"params": network}]
        if per_attribute:
            groups.append({"params": per_attribute, "lr": self.config.defender.shrink_lr, "weight_decay": 0.0})
        return groups

    def _new_attacker(self) -> Attacker | PopulationBoundAttacker:
        """H on the run's device, its weights drawn on the CPU (from the caller's seeded torch state):
        the K-output network, or the per-individual one bound to the population (``attacker_kind``),
        which starts at the prior and gets its linear part at the first refit."""
        if self.config.attacker.kind == "per-individual":
            spec = PerIndividualSpec(self.population.n_attributes, self.mechanism.n_outputs // self.population.n_attributes)
            network = PerIndividualAttacker(
                spec, prior_mean_frequencies(self.population.genotypes, self.theta), self.n_members, float(np.mean(self.theta))
            )
            return PopulationBoundAttacker(network.to(self.device), self._mechanism_matrix())
        attacker = Attacker(self.attacker_spec).to(self.device)
        if self.reads_coordinates:
            attacker.read_coordinates(self.defender.noise_basis, self.defender.shrink_target)
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

    def draw_individuals(self) -> torch.Tensor | None:
        """The individuals S scored in one update (``AttackerSettings.individual_batch``): None for all
        K, else that many indices, uniform without replacement, drawn from the training stream."""
        size = self.config.attacker.individual_batch
        if size is None or size >= self.population.n_individuals:
            return None
        chosen = torch.randperm(self.population.n_individuals, generator=self.generator)[:size]
        return chosen.sort().values.to(self.device)

    def attacker_input(self, x: torch.Tensor) -> torch.Tensor:
        """What the in-game attacker reads of releases x: x itself, or with ``AttackerSettings.pool_copies``
        [z, x_L], z = sum_b w_b x_b the inverse-variance mean of the m fixed Gaussian copies (weights
        w_b = s_b^-2 / sum_c s_c^-2; :func:`bngp.release.composition.pool_copies`) and x_L the learned
        block (linear in x, so differentiable).  :meth:`attacker_release` forms it without the
        whole release, bit for bit."""
        if self.pool_weights is None:
            return x
        fixed = len(self.pool_weights) * self.population.n_attributes
        return torch.cat([pool_copies(x[:, :fixed], self.pool_weights), x[:, fixed:]], dim=1)

    def attack(self, x: torch.Tensor, individuals: torch.Tensor | None = None) -> torch.Tensor:
        """The in-game attacker's logits on its input x (:meth:`attacker_input`, as
        :meth:`attacker_release` forms it): (R, K), or (R, |S|) for the individuals S."""
        return self.attacker(x) if individuals is None else self.attacker(x, individuals)

    def mechanism_genotypes(self) -> np.ndarray:
        """The (K, n_outputs) matrix whose frequencies the mechanism releases (for the head)."""
        stat = self.mechanism.statistic(torch.eye(self.population.n_individuals, device=self.device))
        return stat.cpu().numpy()

    def _build_opponent(self) -> BestResponseLoss:
        """The fixed opponent of App. M named by ``ObjectiveSettings.against``, fitted on the "opponent" stream."""
        from .best_response import best_response_loss

        n_members = int(round(self.n_members)) if self.prior.describe()["kind"] == "uniform-subset" else None
        return best_response_loss(self.config.objective.against, self.population, self.prior, n_members, seed=self.seeds["opponent"])

    def implied_dp_epsilon(self) -> float | None:
        """eps_hat of Prop. 10 for the run's ``dp_epsilon`` (None without the constraint)."""
        if self.config.objective.dp_epsilon is None:
            return None
        return objectives.implied_dp_epsilon(self.config.objective.dp_epsilon, self.theta)

    def dp_violation(self, probabilities: torch.Tensor, individuals: torch.Tensor | None = None) -> torch.Tensor:
        """How far an attacker's probabilities (R, K), or (R, |S|) for the individuals S, lie outside the
        DPH^eps bounds of the BGBP constraint (section 4.3, :func:`bngp.game.objectives.dp_violation`)."""
        bounds = self.dp_bounds if individuals is None else tuple(bound[individuals] for bound in self.dp_bounds)
        return objectives.dp_violation(probabilities, bounds)

    def draw(self, n: int) -> tuple[torch.Tensor, torch.Tensor]:
        """n memberships b ~ sigma and defender randomness r, drawn on the CPU, on the run's device."""
        b = self.prior.sample_torch(n, self.generator)
        r = self.defender.sample_r(n, self.generator)
        return b.to(self.device), r.to(self.device)

    def opponent_loss(self, b: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """The fixed opponent's relaxed TPR (App. M), computed on the CPU where its fitted attack
        lives (differentiable through the move), on the run's device."""
        return self.opponent(b.cpu(), x.cpu()).to(self.device)

    def release(self, b: torch.Tensor, r: torch.Tensor, generator: torch.Generator | None = None,
                 out: torch.Tensor | None = None, *, pooled: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
        """Releases x of memberships b (fixed Gaussian blocks, if any, then G's) and f(D), the one
        statistic every copy perturbs (B, |Q|): :func:`bngp.defenses.network.composed_release`
        (``out``: where x is written without autograd).  ``pooled``: with pooled copies, x as the
        in-game attacker reads it (:meth:`attacker_input`, bit for bit), formed as the copies are
        drawn, without the (m + 1)|Q|-wide release."""
        statistic = self._part.statistic(b)
        return composed_release(self.defender, self.config.defender.fixed_gaussian_sigmas, statistic, b, r,
                                generator or self.generator, out, pool=self.pool_weights if pooled else None), statistic

    def attacker_release(self, b: torch.Tensor, r: torch.Tensor, generator: torch.Generator | None = None,
                          out: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """What the in-game attacker reads of the releases of :meth:`release` (the same draws) and f(D)."""
        return self.release(b, r, generator, out, pooled=True)

    def defender_release(self, b: torch.Tensor, r: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(what the in-game attacker reads, the release x, f(D)) of (b, r), with autograd, for the defender's step:
        where H reads the row-space coordinates and there is no opponent, x and its coordinates from
        :meth:`~bngp.defenses.network.Defender.row_space_release` (V^T (f(D) - t) = (b - theta) Z V / N as the
        memberships sum to N); else :meth:`attacker_release`'s releases, read by H as they are."""
        if self.reads_coordinates and self.opponent is None:
            statistic = self._part.statistic(b)
            signal = (b - torch.as_tensor(self.theta, dtype=b.dtype, device=b.device)) @ self._candidate_coordinates
            release, coordinates = self.defender.row_space_release(b, r, signal)
            return coordinates, release, statistic
        release, statistic = self.attacker_release(b, r)
        return release, release, statistic

    def attacker_draws(self, b: torch.Tensor, r: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
        """What the in-game attacker reads of the releases of (b, r) without autograd, formed the cheapest way: the
        row-space coordinates directly (:meth:`attacker_coordinates`) when it reads them (:attr:`reads_coordinates`),
        else :meth:`attacker_release`'s releases; written into ``out`` when given."""
        if self.reads_coordinates:
            return self.attacker_coordinates(b, r, out)
        with torch.no_grad():
            return self.attacker_release(b, r, out=out)[0]

    def attacker_coordinates(self, b: torch.Tensor, r: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
        """What an attacker reading the row-space coordinates reads of the releases of (b, r)
        (:attr:`reads_coordinates`): V^T (x - t) of the clipped release x, formed from the coordinates G releases
        (:meth:`~bngp.defenses.network.Defender.row_space_coordinates`, V^T (f(D) - t) = (b - theta) Z V / N as
        the memberships sum to N) and clipped (:func:`bngp.data.geometry.clip_coordinates`), without the
        statistic's K x |Q| product or the whole release's other passes through the basis; written into ``out``."""
        defender = self.defender
        with torch.no_grad():
            signal = (b - torch.as_tensor(self.theta, dtype=b.dtype, device=b.device)) @ self._candidate_coordinates
            coordinates = clip_coordinates(defender.row_space_coordinates(b, r, signal), defender.noise_basis,
                                           defender.shrink_target)
        if out is None:
            return coordinates
        return out.copy_(coordinates)

    @cached_property
    def _candidate_coordinates(self) -> torch.Tensor:
        """Z V / N (K, r) float32: each candidate's genotype row (the statistic of a dataset of that candidate alone,
        f(e_k) = z_k) in the row-space basis, per member of a dataset of N."""
        alone = torch.as_tensor(self.mechanism_genotypes(), dtype=torch.float32, device=self.device)
        return (alone @ self.defender.noise_basis) / self.n_members

    def utility(self, x: torch.Tensor, statistic: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(kappa-weighted, plain) utility losses over the learned mechanism's outputs x_L, the last
        |Q| columns of a release or of what the attacker reads of it, of f(D) = ``statistic``."""
        return objectives.utility_losses(x[:, x.shape[1] - statistic.shape[1] :], statistic, self.kappa)

    def leakage(self, logits: torch.Tensor, b: torch.Tensor, individuals: torch.Tensor | None = None) -> torch.Tensor:
        """Leakage of logits (R, K) of memberships b, or of the columns S = ``individuals`` (logits
        (R, |S|), b (R, K)) measured against their own mean prior entropy."""
        entropy = self.prior_entropy
        if individuals is not None:
            b = b[:, individuals]
            entropy = float(self.entropies[individuals.cpu()].mean())
        return objectives.leakage(logits, b, entropy, recalibrate=self.config.objective.recalibrate, mode=self.config.objective.leakage)

    def release_sampler(self, seed: SeedLike) -> Callable[[int], tuple[torch.Tensor, torch.Tensor]]:
        """A sampler of (releases, memberships) from the frozen defender (eval mode), drawn on the
        CPU from ``seed`` (an int, None or a Generator, :func:`bngp.rng.resolve_seed`) and returned
        on the run's device."""
        generator = torch_generator(resolve_seed(seed))
        defender = self.defender

        @torch.no_grad()
        def sample(n: int) -> tuple[torch.Tensor, torch.Tensor]:
            """n releases of the frozen defender and their memberships."""
            defender.eval()
            b = self.prior.sample_torch(n, generator).to(self.device)
            r = self.defender.sample_r(n, generator).to(self.device)
            return self.release(b, r, generator)[0], b

        return sample

    def delivered_defense(self) -> TrainedDefense:
        """The defender in its current state as a :class:`~bngp.defenses.trained.TrainedDefense` (shared, not copied)."""
        artifact = DefenderArtifact(self.defender, "", self.prior.describe(), self.kappa.cpu().numpy(), self.config.flat())
        return TrainedDefense(artifact, "in memory")
