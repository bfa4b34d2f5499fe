"""The per-individual attacker network H(x, d) -> logit P(b = 1 | x) (arXiv:2410.07414, sections 3.2 and 4).

Section 3.2 of the paper writes the attack as individual decisions A_h^k(d_k, x) on the target's
record d_k and the release x; the network H of section 4 (App. L.8,
:class:`bngp.attacks.network.Attacker`) instead maps x to K outputs, one per known individual,
through dense |Q|-wide layers: its size grows as K |Q| and it cannot score anyone it was not
trained on.  The network here is one function of (x, d) whose weights are shared by all
individuals: its parameter count does not depend on K, it is defined for any binary record d,
and trained by cross-entropy it estimates the posterior log-odds of membership (Lemma 3).

**Inputs.**  The attacker knows the population and the membership prior theta, hence the
prior-mean release p = f(theta), p_j = sum_k theta_k d_kj / n with n = sum_k theta_k: the
frequencies a release is centred on under the prior.  They play the role of the reference
frequencies (a disjoint reference panel's frequencies differ from p by sampling noise, which
would add a fixed offset to each individual's score).  With p clipped to [1e-3, 1 - 1e-3],
v_j = p_j (1 - p_j), and a release of m blocks x = [x^1, ..., x^m] (m copies of f(D) under a
composition, App. L.6; m = 1 otherwise), for each SNV j and block i:

    z_ij(x)   = (x^i_j - p_j) sqrt(n / v_j)                       standardised deviation
    u_j(x)    = (z_1j..z_mj, [x^i_j <= 0]_i, [x^i_j >= 1]_i, logit(p_j) / 4)
    g_j(d)    = (d - p_j) / sqrt(v_j)                             standardised genotype
    phi(u, d) = MLP([u, d, g_j(d)]) in R^h                         learned, shared by SNVs and individuals
    l_i(x, d) = g_j(d) z_ij(x) = sqrt(n) (d - p_j)(x^i_j - p_j) / v_j    fixed: the Gaussian
                                                                  log-likelihood-ratio direction
    e(x, d)   = |Q|^(-1/2) sum_j [s_j phi(u_j(x), d_j), w_j l(x_j, d_j)]   in R^(h + m)
    c(x)      = per block: mean_j z, mean_j |z|, log(1 + mean_j z^2), fraction of x at 0, at 1
    H(x, d)   = b_0 + beta . e_l(x, d) + MLP_out([e(x, d), c(x)])        (a logit)

with e_l the last m entries of e, learned per-SNV weights s_j of the learned channels and w_j of
the linear ones (2 |Q| parameters, none per individual), and the release context c(x) that lets
the output adapt its threshold and scale to the release.  :meth:`PerIndividualAttacker.fit_linear_part`
sets (w, beta, b_0) in closed form on shadow releases, w_j = Cov(x_j, f(D)_j) / Var(x_j) (the
share of SNV j's release that is the dataset's signal: the matched filter's per-SNV weight
under Gaussian noise), (beta, b_0) by logistic regression, MLP_out's last layer at zero: the
network is then the calibrated variance-weighted score, and training only adds to it.

**Evaluation without (R, K, |Q|, h) tensors.**  d_kj is binary, so every per-SNV term is affine
in it: psi_j(x, d) = psi_j^0(x) + d (psi_j^1(x) - psi_j^0(x)), psi = [s phi, w l], with
psi_j^b = psi_j(x, b) evaluated once per (release, SNV).  Hence

    e(x_r, d_k) = a_r + sum_j d_kj Delta_rj,   a_r = |Q|^(-1/2) sum_j psi_j^0(x_r),
                                               Delta_rj = |Q|^(-1/2) (psi_j^1(x_r) - psi_j^0(x_r)),

and for R releases and K targets E = a[:, None, :] + D Delta: one (K x |Q|) @ (|Q| x R (h + m))
matrix product with the genotype matrix D (:func:`genotype_product`).  Cost: 2 R |Q| times the
per-SNV MLP's FLOPs, plus 2 R K |Q| (h + m) FLOPs for the product and O(R K (h + m)) for the
output MLP; memory O(R |Q| (h + m) + R K (h + m)).

**What sharing weights across individuals gives up.**  The K-output attacker can invert the
release against the known population (its linear head, b_hat = (A^T A + lam I)^-1 A^T x with
A = D^T / n), which removes the other members' contribution to x.  H(x, d_k) sees one target, so
that contribution is noise to it: for the linear score under the prior its inverse squared
signal-to-noise ratio is that of the inversion plus about n / |Q| (0.08 at K = 800, n = 400,
|Q| = 5000; 0.15 at n = 30, |Q| = 200), which matters only where a release gives members
away almost surely.  The network is exchangeable in the individuals: its constant b_0 is the
average prior log-odds, so under a prior whose marginals theta_k differ it does not add the
individual's own logit(theta_k) (the K-output attacker, with one output each, does).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np
import torch
from torch import nn

from bngp.data.bits import COLUMN_BLOCK, BitMatrix
from bngp.errors import InputError
from bngp.linear import logistic_calibration
from bngp.validation import check_positive_int

__all__ = [
    "PerIndividualSpec",
    "PerIndividualAttacker",
    "PopulationBoundAttacker",
    "genotype_product",
    "prior_mean_frequencies",
    "score_in_blocks",
    "FREQUENCY_FLOOR",
    "REFIT_RELEASES",
]

#: p_j is clipped to [FREQUENCY_FLOOR, 1 - FREQUENCY_FLOOR] (SNVs monomorphic in the population).
FREQUENCY_FLOOR = 1e-3
#: shadow releases of a closed-form fit of the linear part (:meth:`PerIndividualAttacker.fit_linear_part`):
#: it estimates 2 numbers per SNV and m + 1 logistic weights, so a few hundred releases suffice.
REFIT_RELEASES = 500
#: the largest linear weight w_j (the release at SNV j barely varies but follows f(D) there).
_MAX_LINEAR_WEIGHT = 100.0
#: floats of one (releases x targets x channels) or (releases x SNVs x hidden) block when scoring.
_BLOCK_FLOATS = 1 << 23


@dataclass(frozen=True)
class PerIndividualSpec:
    """Sizes of H(x, d): |Q| SNVs, m blocks per release, and the widths (none depends on K).

    Attributes:
        n_snvs: |Q|, the SNVs of one copy of f(D).
        n_blocks: m, the copies of f(D) in a release (composition, App. L.6).
        embedding: h, the learned channels of the per-SNV map phi.
        hidden: width of phi's two hidden layers.
        head_hidden: width of the output MLP's hidden layer.
    """

    n_snvs: int
    n_blocks: int = 1
    embedding: int = 16
    hidden: int = 16
    head_hidden: int = 32

    def __post_init__(self) -> None:
        for name in ("n_snvs", "n_blocks", "embedding", "hidden", "head_hidden"):
            check_positive_int(name, getattr(self, name))

    @property
    def n_outputs(self) -> int:
        """Width of a release, m |Q|."""
        return self.n_snvs * self.n_blocks

    @property
    def channels(self) -> int:
        """h + m: the learned and the linear channels of the pair embedding e(x, d)."""
        return self.embedding + self.n_blocks

    @property
    def snv_inputs(self) -> int:
        """Inputs of phi per SNV: u_j (3m + 1) and the genotype (d, g_j(d))."""
        return 3 * self.n_blocks + 3

    @property
    def context_size(self) -> int:
        """Entries of the release context c(x): 5 per block."""
        return 5 * self.n_blocks

    def to_dict(self) -> dict:
        return {"kind": "per-individual", **asdict(self)}


def prior_mean_frequencies(population: np.ndarray | BitMatrix, theta: np.ndarray) -> np.ndarray:
    """p = f(theta) = theta^T D / sum(theta): the release of the prior-mean membership, (|Q|,) float64,
    computed over blocks of SNVs of the (K, |Q|) binary ``population`` (dense, or a bit-packed
    :class:`bngp.data.bits.BitMatrix`), so that no float64 copy of it is made."""
    theta = np.asarray(theta, dtype=np.float64)
    total = float(theta.sum())
    if not total > 0:
        raise InputError("the membership prior must give a positive expected number of members.")
    n_snvs = population.shape[1]
    frequencies = np.empty(n_snvs)
    for start in range(0, n_snvs, COLUMN_BLOCK):
        stop = min(start + COLUMN_BLOCK, n_snvs)
        block = population.columns(start, stop) if isinstance(population, BitMatrix) else population[:, start:stop]
        frequencies[start:stop] = theta @ np.asarray(block, dtype=np.float64) / total
    return frequencies


def genotype_product(genotypes: torch.Tensor, delta: torch.Tensor) -> torch.Tensor:
    """sum_j d_kj Delta_rj for all targets k and releases r, shape (R, K, H): one matmul of the
    (K, |Q|) genotypes with Delta (R, |Q|, H) laid out as (|Q|, R H)."""
    n_releases, n_snvs, channels = delta.shape
    product = genotypes @ delta.permute(1, 0, 2).reshape(n_snvs, n_releases * channels)
    return product.reshape(genotypes.shape[0], n_releases, channels).transpose(0, 1)


class PerIndividualAttacker(nn.Module):
    """H(x, d) -> membership logit for any binary record d (see the module docstring).

    Args:
        spec: the sizes.
        frequencies: p = f(theta) (|Q|,), see :func:`prior_mean_frequencies`.
        n_members: n = sum_k theta_k, the expected number of members.
        prior: the mean marginal membership probability; b_0 starts at its log-odds, so the
            untrained network (beta = 0, MLP_out's last layer at 0) outputs the prior.
    """

    def __init__(self, spec: PerIndividualSpec, frequencies: np.ndarray, n_members: float, prior: float) -> None:
        super().__init__()
        values = np.asarray(frequencies, dtype=np.float64)
        if values.shape != (spec.n_snvs,) or not np.all(np.isfinite(values)) or values.min() < 0 or values.max() > 1:
            raise InputError(f"`frequencies` must be {spec.n_snvs} numbers in [0, 1], got shape {values.shape}.")
        if not (math.isfinite(n_members) and n_members > 0):
            raise InputError(f"`n_members` must be a finite number > 0, got {n_members!r}.")
        if not 0 < prior < 1:
            raise InputError(f"`prior` must be in (0, 1), got {prior!r}.")
        self.spec = spec
        p = torch.as_tensor(np.clip(values, FREQUENCY_FLOOR, 1 - FREQUENCY_FLOOR), dtype=torch.float64)
        variance = p * (1 - p)
        self.register_buffer("frequencies", p.float())
        self.register_buffer("z_scale", (n_members / variance).sqrt().float())
        self.register_buffer("genotype_scale", variance.rsqrt().float())
        self.register_buffer("logit_frequencies", (torch.logit(p) / 4).float())
        self.phi = nn.Sequential(
            nn.Linear(spec.snv_inputs, spec.hidden),
            nn.ReLU(),
            nn.Linear(spec.hidden, spec.hidden),
            nn.ReLU(),
            nn.Linear(spec.hidden, spec.embedding),
        )
        self.snv_weights = nn.Parameter(torch.ones(spec.n_snvs))
        self.linear_weights = nn.Parameter(torch.ones(spec.n_snvs))
        self.out = nn.Sequential(
            nn.Linear(spec.channels + spec.context_size, spec.head_hidden), nn.ReLU(), nn.Linear(spec.head_hidden, 1)
        )
        self.beta = nn.Parameter(torch.zeros(spec.n_blocks))
        self.bias = nn.Parameter(torch.tensor(math.log(prior / (1 - prior)), dtype=torch.float32))
        with torch.no_grad():
            self.out[-1].weight.zero_()
            self.out[-1].bias.zero_()

    def closed_form_parameters(self) -> list[nn.Parameter]:
        """What :meth:`fit_linear_part` fits: w, beta and b_0."""
        return [self.linear_weights, self.beta, self.bias]

    def refit_parameters(self) -> list[nn.Parameter]:
        """Everything :meth:`fit_linear_part` overwrites: w, beta, b_0 and MLP_out's last layer."""
        return [*self.closed_form_parameters(), self.out[-1].weight, self.out[-1].bias]

    def _standardised(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(blocks (R, m, |Q|), z (R, m, |Q|)) of releases (R, m |Q|)."""
        if x.ndim != 2 or x.shape[1] != self.spec.n_outputs:
            raise InputError(f"releases must have shape (R, {self.spec.n_outputs}), got {tuple(x.shape)}.")
        blocks = x.reshape(x.shape[0], self.spec.n_blocks, self.spec.n_snvs)
        return blocks, (blocks - self.frequencies) * self.z_scale

    def _genotype_inputs(self, value: float) -> torch.Tensor:
        """(|Q|, 2): d = value and g_j(d) for every SNV."""
        genotype = (value - self.frequencies) * self.genotype_scale
        return torch.stack([torch.full_like(genotype, value), genotype], dim=1)

    def release_terms(self, x: torch.Tensor, *, learned: bool = True) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(a (R, H), Delta (R, |Q|, H), c(x) (R, 5m)) of releases x (R, m |Q|), so that
        e(x_r, d) = a_r + sum_j d_j Delta_rj.  ``learned=False`` keeps the m linear channels only
        (H = m; no MLP evaluated), the features of :meth:`fit_linear_part`.

        The per-SNV terms are computed SNV-major, (|Q|, R, .), and Delta is returned as a
        transposed view of that: :func:`genotype_product` then reads it without a copy."""
        blocks, z = self._standardised(x)
        n_releases = x.shape[0]
        scale = self.spec.n_snvs**-0.5
        z_major = z.permute(2, 0, 1)  # (|Q|, R, m)
        # linear channels: l_i(x, d) = g_j(d) z_ij, so psi^0 = g_j(0) z and psi^1 - psi^0 = z / sqrt(v_j)
        step = (self.linear_weights * scale * self.genotype_scale)[:, None, None] * z_major  # (|Q|, R, m)
        start = torch.einsum("qrm,q->rm", step, 0.0 - self.frequencies)
        low, high = (blocks <= 0).to(x.dtype), (blocks >= 1).to(x.dtype)
        context = torch.cat(
            [z.mean(dim=2), z.abs().mean(dim=2), torch.log1p((z * z).mean(dim=2)), low.mean(dim=2), high.mean(dim=2)], dim=1
        )
        if not learned:
            return start, step.transpose(0, 1), context
        release_side = torch.cat(
            [z, low, high, self.logit_frequencies.expand(n_releases, 1, -1)], dim=1
        ).permute(2, 0, 1).reshape(self.spec.n_snvs * n_releases, -1)  # (|Q| R, 3m + 1)
        # phi's first layer on [u_j(x), d, g_j(d)] is W_u u_j(x) + W_d (d, g_j(d)) + bias: the release
        # part is computed once for both genotype values, the genotype part is a (|Q|, hidden) offset
        first = self.phi[0]
        n_release_inputs = release_side.shape[1]
        shared = torch.addmm(first.bias, release_side, first.weight[:, :n_release_inputs].T)
        shared = shared.reshape(self.spec.n_snvs, n_releases, -1)  # (|Q|, R, hidden)
        genotype_weight = first.weight[:, n_release_inputs:]
        phi0, phi1 = (self.phi[1:](shared + (self._genotype_inputs(b) @ genotype_weight.T)[:, None, :]) for b in (0.0, 1.0))
        weights = self.snv_weights * scale  # (|Q|,)
        a = torch.cat([torch.einsum("qrh,q->rh", phi0, weights), start], dim=1)
        delta = torch.cat([(phi1 - phi0) * weights[:, None, None], step], dim=2)  # (|Q|, R, h + m)
        return a, delta.transpose(0, 1), context

    def pair_logits(self, embedding: torch.Tensor, context: torch.Tensor) -> torch.Tensor:
        """H from the pair embeddings e (R, K, h + m) and the release context c (R, 5m): (R, K)."""
        n_releases, n_targets, _ = embedding.shape
        features = torch.cat([embedding, context[:, None, :].expand(n_releases, n_targets, -1)], dim=2)
        linear = embedding[..., self.spec.embedding :] @ self.beta
        return self.bias + linear + self.out(features).squeeze(-1)

    def forward(self, x: torch.Tensor, genotypes: torch.Tensor) -> torch.Tensor:
        """Logits (R, K) of releases x (R, m |Q|) for the binary records ``genotypes`` (K, |Q|),
        a float tensor of the network's dtype (see the module docstring for the evaluation)."""
        a, delta, context = self.release_terms(x)
        return self.pair_logits(a[:, None, :] + genotype_product(genotypes, delta), context)

    @torch.no_grad()
    def fit_linear_part(self, releases: torch.Tensor, memberships: torch.Tensor, genotypes: torch.Tensor) -> None:
        """Set w, beta and b_0 in closed form on shadow releases (R, m |Q|) with their memberships
        (R, K) of the population ``genotypes`` (K, |Q|), and zero MLP_out's last layer: the network
        becomes the calibrated variance-weighted score.

        w_j = mean over blocks of Cov_r(x^i_rj, f(D_r)_j) / Var_r(x^i_rj), clipped to
        [0, 100] (0 where the release does not vary: it carries nothing there), with
        f(D_r) = b_r D / |b_r| the shadow datasets' own frequencies; (beta, b_0) minimise the
        cross-entropy of b_0 + beta . e_l pooled over (release, individual) pairs
        (:func:`bngp.linear.logistic_calibration`).
        """
        blocks, _ = self._standardised(releases)
        signal = (memberships @ genotypes) / memberships.sum(dim=1, keepdim=True).clamp(min=1)  # f(D_r), (R, |Q|)
        centred = blocks - blocks.mean(dim=0)
        centred_signal = (signal - signal.mean(dim=0))[:, None, :]
        variance = (centred * centred).mean(dim=0)
        covariance = (centred * centred_signal).mean(dim=0)
        varies = variance > 1e-12 * (self.z_scale**-2)
        ratio = torch.where(varies, covariance / variance.clamp(min=1e-30), torch.zeros_like(variance))
        self.linear_weights.copy_(ratio.mean(dim=0).clamp(0.0, _MAX_LINEAR_WEIGHT))
        start, step, _ = self.release_terms(releases, learned=False)
        features = start[:, None, :] + genotype_product(genotypes, step)  # (R, K, m)
        params = logistic_calibration(features.reshape(-1, self.spec.n_blocks), memberships.reshape(-1))
        self.beta.copy_(params[:-1].to(self.beta.dtype))
        self.bias.copy_(params[-1].to(self.bias.dtype))
        self.out[-1].weight.zero_()
        self.out[-1].bias.zero_()


@torch.no_grad()
def score_in_blocks(attacker: PerIndividualAttacker, releases: torch.Tensor, targets: torch.Tensor | np.ndarray) -> torch.Tensor:
    """H(x_r, d_k) for every release and target, (R, K) on the attacker's device, without
    gradients, in blocks of releases and of targets so that no block holds more than about
    2^23 floats; ``targets`` (K, |Q|) may be any binary numeric array or a bit-packed
    :class:`bngp.data.bits.BitMatrix` (converted, or unpacked, block by block).
    A score does not depend on the block it was computed in beyond float32 rounding."""
    device = attacker.frequencies.device
    dtype = attacker.frequencies.dtype
    spec = attacker.spec
    packed = isinstance(targets, BitMatrix)  # unpacked one block of targets at a time
    if not packed:
        targets = torch.as_tensor(targets)
    per_release = max(spec.n_snvs * 2 * spec.hidden, spec.channels)
    release_block = max(1, _BLOCK_FLOATS // per_release)
    target_block = max(1, _BLOCK_FLOATS // max(1, min(release_block, releases.shape[0]) * spec.channels))
    pieces = []
    for r0 in range(0, releases.shape[0], release_block):
        a, delta, context = attacker.release_terms(releases[r0 : r0 + release_block].to(device=device, dtype=dtype))
        columns = []
        for k0 in range(0, targets.shape[0], target_block):
            rows = torch.from_numpy(targets.take_rows(slice(k0, k0 + target_block)).to_dense()) if packed \
                else targets[k0 : k0 + target_block]
            genotypes = rows.to(device=device, dtype=dtype)
            columns.append(attacker.pair_logits(a[:, None, :] + genotype_product(genotypes, delta), context))
        pieces.append(torch.cat(columns, dim=1))
    return torch.cat(pieces, dim=0)


class PopulationBoundAttacker(nn.Module):
    """H(x, d_k) applied to every individual of a known population: x (R, m |Q|) -> logits (R, K),
    the interface of the K-output attacker that the game trainer (:class:`bngp.game.Game`) uses.

    The population is a non-persistent buffer: ``state_dict()`` holds only H's weights (their
    number does not depend on K), and a checkpoint is restored into a module bound to the same
    population.
    """

    def __init__(self, attacker: PerIndividualAttacker, genotypes: np.ndarray | torch.Tensor) -> None:
        super().__init__()
        self.net = attacker
        dtype = attacker.frequencies.dtype
        # a float tensor of the network's dtype is bound as it is (shared with the caller, e.g. the game's mechanism)
        values = genotypes.detach().to(dtype) if isinstance(genotypes, torch.Tensor) \
            else torch.as_tensor(np.asarray(genotypes)).to(dtype)
        if values.ndim != 2 or values.shape[1] != attacker.spec.n_snvs:
            raise InputError(f"`genotypes` must have shape (K, {attacker.spec.n_snvs}), got {tuple(values.shape)}.")
        self.register_buffer("genotypes", values, persistent=False)

    @property
    def spec(self) -> PerIndividualSpec:
        return self.net.spec

    def closed_form_parameters(self) -> list[nn.Parameter]:
        """The parameters :meth:`refit` fits in closed form (w, beta, b_0)."""
        return self.net.closed_form_parameters()

    def refit_parameters(self) -> list[nn.Parameter]:
        """The parameters :meth:`refit` overwrites (those, and MLP_out's last layer)."""
        return self.net.refit_parameters()

    def refit(self, releases: torch.Tensor, memberships: torch.Tensor) -> None:
        """:meth:`PerIndividualAttacker.fit_linear_part` on releases of the bound population."""
        self.net.fit_linear_part(releases, memberships, self.genotypes)

    def forward(self, x: torch.Tensor, individuals: torch.Tensor | None = None) -> torch.Tensor:
        """Logits (R, K) of releases x for every bound individual, or (R, |S|) for the indices
        ``individuals`` = S only.  Without gradients they are computed by :func:`score_in_blocks`
        (bounded memory: an evaluation scores hundreds of releases against all K)."""
        genotypes = self.genotypes if individuals is None else self.genotypes[individuals]
        if torch.is_grad_enabled():
            return self.net(x, genotypes)
        return score_in_blocks(self.net, x, genotypes)
