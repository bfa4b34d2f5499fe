"""The defender network G(b, r) of the BNGP game (arXiv:2410.07414, section 3 and App. L.8).

:class:`Defender` G(b, r) -> xi in [-0.5, 0.5]^|Q|: input the membership vector b (K) and
auxiliary randomness r ~ U[0, 1]^q; output through a scaled sigmoid sigmoid(z) - 0.5.
Optionally (``shrink``) plus a learned per-attribute shrinkage of the release towards the
prior-mean statistic t = f(theta): xi += alpha * (t - f(D)), so that
x = (1 - alpha) f(D) + alpha t + noise, alpha in [0, 1]^|Q| (projected after each optimiser
step; alpha_j > 1 would flip attribute j's signal, fooling a stale attacker while hiding
nothing).  With alpha_j = 1 attribute j no longer depends on who is in D (the attacker knows
the population and the prior, so t carries no membership signal), at a utility cost
|t_j - f_j(D)|; the defender learns per attribute whether that cost beats adding noise (not in
the paper, whose G must learn the same cancellation through its hidden layers).
Layers (App. L.8, Table 1a, K = 800, q = 30, |Q| = 5000): Linear(830, 1500)-BN-ReLU,
Linear(1500, 1100)-BN-LeakyReLU, Linear(1100, 500), Linear(500, 5000).  Widths scale with
K + q and |Q| (:func:`defender_widths`), the bottleneck capped at the paper's 500.
Optionally (``full_rank_noise``) plus per-attribute Gaussian noise sigma * e, e ~ N(0, I_|Q|),
sigma >= 0 learned: the network's own noise comes from q uniforms through a 500-wide layer,
so it lies near a q-dimensional manifold that a linear attacker fitted on enough releases
projects out (whitened by the noise covariance, :func:`bngp.linear.fit_whitened`); sigma * e
has full rank whatever q.
Optionally (``row_space_rank`` = r > 0) that noise, and the shrinkage, live in the candidates' row space
instead (:mod:`bngp.data.geometry`): xi += V diag(1 - alpha) V^T (f(D) - t) - (f(D) - t) + V (sigma o e),
e ~ N(0, I_r), V a fixed |Q| x r orthonormal basis (:meth:`Defender.set_noise_basis`), alpha and sigma one
learned value per direction: the family of :class:`bngp.defenses.shaped.ShapedNoiseDefense`; with
``row_space_output`` the network's output is projected there too, so that the whole release before clipping
lies on the candidates' affine hull t + row(Zc), and the row-space coordinates V^T (x - t) lose nothing a linear
attack could read of it but the clipping.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np
import torch
from torch import nn

from bngp.errors import InputError
from bngp.device import CHUNK_ELEMENTS
from bngp.release.mechanism import perturb
from bngp.release.noise import sample_laplace
from .shrinkage import NOISE_LAWS

__all__ = ["DefenderSpec", "Defender", "defender_widths", "composed_noise", "composed_release", "MAX_BOTTLENECK"]

#: the widest last hidden layer of G by default: the paper's 500 (App. L.8 Table 1a, |Q| = 5000).
MAX_BOTTLENECK = 500


def defender_widths(n_individuals: int, noise_dim: int, n_outputs: int) -> tuple[int, int, int]:
    """Hidden widths of G scaled from App. L.8 Table 1a (830 -> 1500 -> 1100 -> 500 -> 5000).

    The first two scale with K + q; the bottleneck with |Q| up to the paper's |Q| = 5000 and is
    capped there (:data:`MAX_BOTTLENECK`): scaled further, the output layer's h_3 |Q| weights
    would grow as |Q|^2 (10^9 at |Q| = 10^5, 16 GiB with Adam's moments), while G's own
    randomness lives on a q-dimensional manifold whatever h_3 (the full-rank noise has |Q|
    scales of its own)."""
    inputs = n_individuals + noise_dim
    return (
        max(32, math.ceil(inputs * 1500 / 830)),
        max(32, math.ceil(inputs * 1100 / 830)),
        max(32, min(MAX_BOTTLENECK, math.ceil(n_outputs * 500 / 5000))),
    )


#: rows per chunk of a release drawn without autograd by a defender with noise in the row space
#: (:func:`composed_release`): each chunk is two products with the |Q| x r basis, which want many rows.
ROW_SPACE_CHUNK_ROWS = 1024


@dataclass(frozen=True)
class DefenderSpec:
    """Architecture of G: sizes and widths (None = scaled from the paper)."""

    n_individuals: int
    n_outputs: int
    noise_dim: int = 30
    widths: tuple[int, int, int] | None = None
    skip: bool = False
    shrink: bool = False
    full_rank_noise: bool = False
    noise_law: str = "gaussian"
    row_space_rank: int = 0
    row_space_output: bool = False

    def __post_init__(self) -> None:
        if self.noise_law not in NOISE_LAWS:
            raise InputError(f"`noise_law` must be one of {', '.join(NOISE_LAWS)}, got {self.noise_law!r}.")
        if self.row_space_rank:
            if not (self.full_rank_noise and self.noise_law == "gaussian"):
                raise InputError("noise in the row space needs full-rank Gaussian noise.")
            if not 1 <= self.row_space_rank <= self.n_outputs:
                raise InputError(f"`row_space_rank` must be in 1..{self.n_outputs}, got {self.row_space_rank}.")
        elif self.row_space_output:
            raise InputError("a network output confined to the row space needs noise in it (`row_space_rank` >= 1).")

    @property
    def noise_width(self) -> int:
        """How many unit draws the full-rank noise takes: |Q|, or r in the row space (0 without it)."""
        if not self.full_rank_noise:
            return 0
        return self.row_space_rank or self.n_outputs

    @property
    def randomness_dim(self) -> int:
        """Width of the randomness G consumes per release: q uniforms, plus the full-rank noise's unit draws
        (:attr:`noise_width`; standard normal, or Laplace(1))."""
        return self.noise_dim + self.noise_width

    def resolved_widths(self) -> tuple[int, int, int]:
        return self.widths or defender_widths(self.n_individuals, self.noise_dim, self.n_outputs)

    def to_dict(self) -> dict:
        """The architecture as JSON; ``noise_law`` only when it is not the Gaussian of every earlier record."""
        data = asdict(self)
        data["widths"] = list(self.resolved_widths())
        if self.noise_law == "gaussian":
            del data["noise_law"]
        if not self.row_space_rank:
            del data["row_space_rank"]
        if not self.row_space_output:
            del data["row_space_output"]
        return data


class Defender(nn.Module):
    """G(b, r) -> xi in [-0.5, 0.5]^|Q| (App. L.8 Table 1a, scaled)."""

    def __init__(self, spec: DefenderSpec) -> None:
        super().__init__()
        self.spec = spec
        h1, h2, h3 = spec.resolved_widths()
        self.net = nn.Sequential(
            nn.Linear(spec.n_individuals + spec.noise_dim, h1),
            nn.BatchNorm1d(h1),
            nn.ReLU(),
            nn.Linear(h1, h2),
            nn.BatchNorm1d(h2),
            nn.LeakyReLU(),
            nn.Linear(h2, h3),
            nn.Linear(h3, spec.n_outputs),
        )
        self.skip = nn.Linear(spec.n_individuals, spec.n_outputs, bias=False) if spec.skip else None
        if self.skip is not None:
            nn.init.zeros_(self.skip.weight)
        if spec.shrink:
            self.shrink_weight = nn.Parameter(torch.zeros(spec.row_space_rank or spec.n_outputs))
            self.register_buffer("shrink_target", torch.zeros(spec.n_outputs))
        else:
            self.shrink_weight = None
        self.noise_scale = nn.Parameter(torch.zeros(spec.noise_width)) if spec.full_rank_noise else None
        if spec.row_space_rank:
            self.register_buffer("noise_basis", torch.zeros(spec.n_outputs, spec.row_space_rank))
        else:
            self.noise_basis = None

    def set_noise_basis(self, basis: np.ndarray | torch.Tensor) -> None:
        """Set V (|Q| x r), the orthonormal basis of the row space the full-rank noise lives in."""
        if self.noise_basis is None:
            raise InputError("this defender's noise is not in a row space (DefenderSpec.row_space_rank=0).")
        basis = torch.as_tensor(np.asarray(basis), dtype=torch.float32)
        if tuple(basis.shape) != tuple(self.noise_basis.shape):
            raise InputError(f"the noise basis must be {tuple(self.noise_basis.shape)}, got {tuple(basis.shape)}.")
        self.noise_basis.copy_(basis)

    def marginal_noise_scales(self) -> torch.Tensor | None:
        """Each attribute's standard deviation of the full-rank noise: sigma, or sqrt(V^2 sigma^2) in the row
        space (None without it)."""
        if self.noise_scale is None:
            return None
        scale = self.noise_scale.detach().double()
        if self.noise_basis is None:
            return scale.clone()
        return torch.sqrt((self.noise_basis.double() ** 2) @ scale**2)

    def set_shrink_target(self, target: np.ndarray | torch.Tensor) -> None:
        """Set t, the statistic the release is shrunk towards (the prior-mean statistic f(theta))."""
        if self.shrink_weight is None:
            raise InputError("this defender has no shrinkage (DefenderSpec.shrink=False).")
        target = torch.as_tensor(np.asarray(target), dtype=torch.float32).reshape(-1)
        if target.numel() != self.spec.n_outputs:
            raise InputError(f"the shrinkage target must have {self.spec.n_outputs} entries, got {target.numel()}.")
        self.shrink_target.copy_(target)

    @torch.no_grad()
    def project_(self) -> None:
        """Project alpha onto [0, 1] (after each optimiser step): alpha_j > 1 would flip the sign
        of attribute j's membership signal, which fools a stale attacker without hiding anything."""
        if self.shrink_weight is not None:
            self.shrink_weight.clamp_(0.0, 1.0)
        if self.noise_scale is not None:
            self.noise_scale.clamp_(min=0.0)

    def shrinkage(self) -> torch.Tensor | None:
        """alpha, the learned shrinkage towards t, per attribute or, in the row space, per direction (None without
        shrinkage)."""
        return None if self.shrink_weight is None else self.shrink_weight.detach().clone()

    def forward(self, b: torch.Tensor, r: torch.Tensor, x_hat: torch.Tensor | None = None) -> torch.Tensor:
        """xi = sigmoid(net([b, u]) (+ S b with the linear skip)) - 0.5 (+ sigma * e) (+ alpha * (t - x_hat)).

        ``r`` = (u, e) from :meth:`sample_r`: u ~ U[0, 1]^q feeds the network, e ~ N(0, I_|Q|)
        (full-rank noise only) is scaled per attribute by the learned sigma >= 0.  ``x_hat`` =
        f(D), the statistic being perturbed, is required with shrinkage.
        """
        return self._noise_from(self._output(b, r), r, x_hat)

    def _output(self, b: torch.Tensor, r: torch.Tensor) -> torch.Tensor:
        """sigmoid(net([b, u]) (+ S b)) - 0.5, G's network output (in place on its temporary without
        autograd), with ``spec.row_space_output`` projected onto the noise's row space, V V^T (sigmoid(...) - 0.5):
        then G releases only in the candidates' row space, up to clipping (a zero output layer still gives 0
        exactly).  Always formed whole: the vectorised sigmoid is not the scalar one (last bit) on a tensor's last
        elements, so by row chunks it would not give the same bits."""
        z = self.net(torch.cat([b, r[:, : self.spec.noise_dim]], dim=1))
        if self.skip is not None:
            z = z + self.skip(b)
        output = z.sigmoid_().sub_(0.5) if not torch.is_grad_enabled() else torch.sigmoid(z) - 0.5
        if self.spec.row_space_output:
            output = (output @ self.noise_basis) @ self.noise_basis.T
        return output

    def _noise_from(self, xi: torch.Tensor, r: torch.Tensor, x_hat: torch.Tensor | None) -> torch.Tensor:
        """xi from G's network output (:meth:`_output`) by exact elementwise arithmetic (the same bits
        row by row or whole): see :meth:`forward`.  Without autograd it works in place on ``xi``."""
        drawing = not torch.is_grad_enabled()
        if self.noise_basis is not None and self.noise_scale is not None and self.shrink_weight is not None:
            return self._row_space_noise_from(xi, r, x_hat, drawing)
        if self.noise_scale is not None:
            noise = self.noise_scale * r[:, self.spec.noise_dim :]
            if self.noise_basis is not None:
                noise = noise @ self.noise_basis.T
            xi = xi.add_(noise) if drawing else xi + noise
            del noise  # not held while the float64 release below is formed
        if self.shrink_weight is None:
            return xi
        if x_hat is None or x_hat.shape != xi.shape:
            raise InputError(f"a shrinking defender needs x_hat = f(D) of shape {tuple(xi.shape)}.")
        # in float64, so that alpha = 1 releases exactly t (see bngp.release.mechanism.perturb)
        if not drawing:
            return xi.double() + self.shrink_weight.double() * (self.shrink_target.double() - x_hat.double())
        # the same value bit for bit on one float64 temporary (t - x_hat cast as it is read)
        shrunk = torch.sub(self.shrink_target.double(), x_hat)
        return shrunk.mul_(self.shrink_weight.double()).add_(xi)

    def _row_space_noise_from(self, xi: torch.Tensor, r: torch.Tensor, x_hat: torch.Tensor | None,
                              drawing: bool) -> torch.Tensor:
        """:meth:`_noise_from` in the row space: xi + V (diag(1 - alpha) V^T (x_hat - t) + sigma o e) - (x_hat - t), one
        float32 pass through the basis each way (the shrunk signal's coordinates and the noise together), the
        deviation -(x_hat - t) in float64, so that alpha = 1 and sigma = 0 release exactly t."""
        if x_hat is None or x_hat.shape != xi.shape:
            raise InputError(f"a shrinking defender needs x_hat = f(D) of shape {tuple(xi.shape)}.")
        centred = x_hat.double() - self.shrink_target.double()
        coefficients = (centred.float() @ self.noise_basis) * (1.0 - self.shrink_weight) \
            + self.noise_scale * r[:, self.spec.noise_dim :]
        deviation = (coefficients @ self.noise_basis.T).double().sub_(centred) if drawing \
            else (coefficients @ self.noise_basis.T).double() - centred
        return deviation.add_(xi) if drawing else xi.double() + deviation

    @torch.no_grad()
    def row_space_coordinates(self, b: torch.Tensor, r: torch.Tensor, signal: torch.Tensor) -> torch.Tensor:
        """For G releasing only in the row space (``spec.row_space_output``, with shrinkage and row-space noise): the
        coordinates c of its release before clipping, x = t + V c, from ``signal`` = V^T (f(D) - t) (B, r) float32:
        V^T (sigmoid(net([b, u]) (+ S b)) - 0.5) + diag(1 - alpha) signal + sigma o e.  The same release as
        :meth:`forward` up to float32 rounding, with one product with V instead of four."""
        return self._coordinates(b, r, signal)

    def row_space_release(self, b: torch.Tensor, r: torch.Tensor, signal: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(x, y) with autograd for G releasing only in the row space: the clipped release x = clip(t + V c, 0, 1) of
        the coordinates c of :meth:`row_space_coordinates` and its coordinates y = V^T (x - t), from three products
        with V (c, x and y) instead of the five of :meth:`forward` and a reading of its release; the same x up to
        float32 rounding."""
        coordinates = self._coordinates(b, r, signal)
        release = torch.addmm(self.shrink_target, coordinates, self.noise_basis.T).clamp(0.0, 1.0)
        return release, (release - self.shrink_target) @ self.noise_basis

    def _coordinates(self, b: torch.Tensor, r: torch.Tensor, signal: torch.Tensor) -> torch.Tensor:
        """c of :meth:`row_space_coordinates`, in place on its temporaries without autograd."""
        if not (self.spec.row_space_output and self.shrink_weight is not None and self.noise_scale is not None):
            raise InputError("only a defender with shrinkage and noise that releases in the row space has coordinates.")
        z = self.net(torch.cat([b, r[:, : self.spec.noise_dim]], dim=1))
        if self.skip is not None:
            z = z + self.skip(b)
        noise = self.noise_scale * r[:, self.spec.noise_dim :]
        if torch.is_grad_enabled():
            return (torch.sigmoid(z) - 0.5) @ self.noise_basis + signal * (1.0 - self.shrink_weight) + noise
        coordinates = z.sigmoid_().sub_(0.5) @ self.noise_basis
        return coordinates.add_(signal * (1.0 - self.shrink_weight)).add_(noise)

    def sample_r(self, n: int, generator: torch.Generator) -> torch.Tensor:
        """r = (u, e) for a batch of n: u ~ U[0, 1]^q, then with full-rank noise e ~ N(0, I_|Q|), or e_j
        i.i.d. Laplace(1) (density exp(-|z|)/2) when ``spec.noise_law`` is "laplace".

        Drawn on ``generator``'s device (the CPU for the toolkit's Generators) whatever the
        network's device, so the draws do not depend on where G runs; the caller moves r to G."""
        uniform = torch.rand((n, self.spec.noise_dim), generator=generator)
        if not self.spec.full_rank_noise:
            return uniform
        if self.spec.noise_law == "laplace":
            unit = sample_laplace((n, self.spec.noise_width), 1.0, generator).float()
        else:
            unit = torch.randn((n, self.spec.noise_width), generator=generator)
        return torch.cat([uniform, unit], dim=1)

    @torch.no_grad()
    def is_data_independent(self) -> bool:
        """Whether G releases t = f(theta) whatever (b, r): shrinkage alpha = 1 on every attribute,
        G's output layer (and the linear skip) exactly zero, so sigmoid(0) - 0.5 = 0, and no
        full-rank noise (sigma = 0): the state training starts from (``GameConfig`` defaults).
        The release then carries no information on the dataset (up to float64 rounding of
        x_hat + (t - x_hat), which the float32 release does not keep)."""
        output = self.net[-1]
        return (self.shrink_weight is not None and bool((self.shrink_weight == 1).all())
                and not bool(output.weight.any()) and not bool(output.bias.any())
                and (self.skip is None or not bool(self.skip.weight.any()))
                and (self.noise_scale is None or not bool(self.noise_scale.any())))

    def noise_scales(self) -> torch.Tensor | None:
        """sigma, the learned per-attribute scale of the full-rank Gaussian noise (None without it)."""
        return None if self.noise_scale is None else self.noise_scale.detach().clone()


def composed_noise(
    defender: Defender,
    fixed_sigmas: tuple[float, ...],
    b: torch.Tensor,
    r: torch.Tensor,
    x_hat: torch.Tensor,
    generator: torch.Generator,
) -> torch.Tensor:
    """The noise of the composed release [f(D) + N(0, s_1^2 I), ..., f(D) + N(0, s_m^2 I), f(D) + G(b, r)]
    (arXiv:2410.07414, App. L.6): m fixed Gaussian blocks, then G's noise for the last copy of
    f(D) in ``x_hat`` (B, (m + 1)|Q|).  The fixed blocks are drawn from ``generator`` (on the CPU)
    and moved to G's output device, so the draws do not depend on the device G runs on."""
    xi = defender(b, r, x_hat[:, x_hat.shape[1] - defender.spec.n_outputs :])
    if not fixed_sigmas:
        return xi
    fixed = [(float(sigma) * torch.randn(xi.shape, generator=generator)).to(xi.device) for sigma in fixed_sigmas]
    return torch.cat(fixed + [xi], dim=1)


def composed_release(
    defender: Defender,
    fixed_sigmas: tuple[float, ...],
    statistic: torch.Tensor,
    b: torch.Tensor,
    r: torch.Tensor,
    generator: torch.Generator,
    out: torch.Tensor | None = None,
    pool: tuple[float, ...] | None = None,
) -> torch.Tensor:
    """The composed release x = clip([f(D), ..., f(D)] + xi, 0, 1) of :func:`composed_noise`'s xi, for
    f(D) = ``statistic`` (B, |Q|), the one statistic every copy perturbs (arXiv:2410.07414, App. L.6):
    bit for bit ``perturb(cat([statistic] * (m + 1)), composed_noise(...))`` (B, (m + 1)|Q|), with the
    same draws from ``generator``, but formed block by block.

    - The fixed Gaussian blocks never depend on G: they are formed without autograd, so a gradient
      flows only through the learned block (not through m more |Q|-wide clips).  They are summed
      in float32 (as is a learned block without shrinkage) with :func:`bngp.release.mechanism.perturb`'s
      bits: the float64 sum of two float32 numbers rounded to float32 is their exact sum rounded
      once (double rounding is innocuous when 53 >= 2 x 24 + 2: Figueroa, SIGNUM Newsl. 30(3),
      1995), and the clip to [0, 1] commutes with that monotone rounding.
    - No (m + 1)|Q|-wide copy of f(D) or float64 noise is formed.
    - On the CPU, the elementwise work (the fixed blocks' sums and clips; after G's output the
      full-rank noise, the shrinkage, the sum and the clip, about ten passes, most in float64) runs
      by chunks of rows of :data:`bngp.device.CHUNK_ELEMENTS`, so each pass reads what the previous one left in
      the cache instead of memory (without autograd; with it, the learned block is formed whole for
      the backward).  The fixed blocks' normals are drawn chunk by chunk too (:func:`_draw_spans`),
      the values of one draw of the whole block.

    ``pool``: the weights w of the m fixed copies: the release is then [z, x_L] (B, 2|Q|), z = sum_b
    w_b x_b the fixed copies pooled, bit for bit :func:`bngp.release.composition.pool_copies` of
    them, each copy pooled as it is drawn (chunk by chunk), so the m fixed blocks are never held.
    ``out``: without autograd, the tensor the release is written to (and returned)."""
    rows, width = statistic.shape
    copies = len(fixed_sigmas)
    if pool is not None and len(pool) != copies:
        raise InputError(f"pooling needs one weight per fixed copy ({copies}), got {len(pool)}.")
    fixed_width = width if pool is not None and copies else copies * width
    chunk = max(1, CHUNK_ELEMENTS // max(width, 1)) if statistic.device.type == "cpu" else max(rows, 1)
    if defender.noise_basis is not None:  # each chunk passes through the basis: products of enough rows
        chunk = max(chunk, ROW_SPACE_CHUNK_ROWS)
    learned = defender._output(b, r)  # G's products first: composed_noise draws nothing before its fixed blocks
    grad = torch.is_grad_enabled()
    if out is None or grad:  # with autograd only the fixed blocks are written here
        out = torch.empty((rows, fixed_width + (0 if grad else width)), dtype=statistic.dtype, device=statistic.device)
    with torch.no_grad():
        spans = _draw_spans(rows, width, chunk)
        longest = max((stop - start for start, stop in spans), default=0)
        normals = torch.empty((longest, width)) if fixed_sigmas else None  # a span's draws, on the CPU
        scratch = torch.empty((longest, width), dtype=statistic.dtype, device=statistic.device) if pool else None
        for copy, sigma in enumerate(fixed_sigmas):
            block = out[:, 0:width] if pool is not None else out[:, copy * width : (copy + 1) * width]
            added = pool is not None and copy > 0  # z = w_0 x_0, then z += w_b x_b (pool_copies' arithmetic)
            for start, stop in spans:
                e = _scaled_normals(normals[: stop - start], float(sigma), generator).to(statistic.device)
                values = _perturb_rows(scratch[: stop - start] if added else block[start:stop], statistic[start:stop], e)
                if pool is not None:
                    values.mul_(float(pool[copy]))
                if added:
                    block[start:stop].add_(values)
        del normals, scratch
    if grad:
        release = perturb(statistic, defender._noise_from(learned, r, statistic))
        return release if not copies else torch.cat([out, release], dim=1)
    block = out[:, fixed_width:]
    for start in range(0, rows, chunk):
        stop = start + chunk
        _perturb_rows(block[start:stop], statistic[start:stop],
                      defender._noise_from(learned[start:stop], r[start:stop], statistic[start:stop]))
    return out


#: torch's CPU normal_ transforms uniforms 16 at a time (Box-Muller on pairs 8 apart): a tensor of
#: at least this many elements is drawn by blocks of 16 consecutive uniforms each, the last 16
#: values redrawn when its size is not a multiple (ATen's ``normal_fill``).
_NORMAL_BLOCK = 16


def _draw_spans(rows: int, width: int, chunk: int) -> list[tuple[int, int]]:
    """Row spans (start, stop) covering ``rows`` rows of ``width`` normals, about ``chunk`` rows each,
    such that drawing them span after span gives torch.randn((rows, width))'s values bit for bit:
    every span but the last holds a multiple of 16 values (so its blocks of 16 are the whole
    draw's), and the last at least 16 when the whole draw has (its redrawn last 16 are then the
    whole draw's)."""
    if rows <= chunk:
        return [(0, rows)] if rows else []
    step = _NORMAL_BLOCK // math.gcd(max(width, 1), _NORMAL_BLOCK)
    chunk = max(step, chunk - chunk % step)
    starts = list(range(0, rows, chunk))
    if len(starts) > 1 and (rows - starts[-1]) * width < _NORMAL_BLOCK:
        starts.pop()  # a last span too short for the block transform joins the one before
    return [(start, starts[index + 1] if index + 1 < len(starts) else rows) for index, start in enumerate(starts)]


def _scaled_normals(out: torch.Tensor, sigma: float, generator: torch.Generator) -> torch.Tensor:
    """``out`` filled with sigma * N(0, 1), the values of ``sigma * torch.randn(out.shape)`` bit for bit:
    normal_(0, sigma) scales each standard normal once (sigma * z, then + 0), except below 16 values,
    where torch draws by another path and the standard normals are scaled here."""
    if out.numel() >= _NORMAL_BLOCK:
        return out.normal_(0.0, sigma, generator=generator)
    return out.normal_(generator=generator).mul_(sigma)


def _perturb_rows(out: torch.Tensor, statistic: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
    """out = clip(statistic + noise, 0, 1), the value of :func:`bngp.release.mechanism.perturb` bit for
    bit: a float64 ``noise`` (a temporary of the caller's, overwritten) is summed in float64, a
    float32 one in the statistic's dtype (the same bits for a float32 statistic:
    :func:`composed_release`).  Returns ``out``."""
    if noise.dtype == torch.float64:
        return out.copy_(noise.add_(statistic).clamp_(0.0, 1.0))
    return torch.add(statistic, noise, out=out).clamp_(0.0, 1.0)
