"""The release mechanism: summary statistics and output perturbation.

arXiv:2410.07414, section 2.2: the original mechanism releases allele frequencies
f(D) = x_hat with x_hat_j = sum_k b_k d_kj / sum_k b_k; the defender perturbs its output,
x = R(x_hat + xi) = clip(x_hat + xi, 0, 1).  Section 4.4 / Theorem 5: mechanisms are black
boxes M(b, xi) and several of them can be composed; one generator is trained over all of
them through :class:`ComposedMechanism`, whose output is the concatenation of its parts.

Everything works on batches: b is (B, K), noise and releases are (B, n_outputs), as float32
torch tensors so that a defender can be trained through the mechanism.  The genotype matrix lives
on the CPU unless a device is given (a game trained on a GPU, :mod:`bngp.device`); the
memberships must then be on that device too.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import numpy as np
import torch

from bngp.data.bits import BitMatrix
from bngp.device import CHUNK_ELEMENTS
from bngp.errors import InputError

__all__ = [
    "Mechanism",
    "SummaryStatistics",
    "allele_frequencies",
    "perturb",
]

#: the most individuals whose counts are exact in float32 for any int8 memberships, 128 K <= 2^24
#: (see :meth:`SummaryStatistics.statistic`).
_EXACT_INT8_INDIVIDUALS = (1 << 24) // 128

#: genotype entries converted to float64 at once by the numpy f(D) (16 MB: bounds its memory).
_BLOCK_ELEMENTS = 1 << 21


def allele_frequencies(b: torch.Tensor | np.ndarray, genotypes: torch.Tensor | np.ndarray) -> torch.Tensor | np.ndarray:
    """f(D) = x_hat = b Z / sum(b): carrier frequency of each attribute among the members.

    Torch inputs give a torch result in ``b``'s dtype (differentiable, for training); numpy
    inputs give float64, computed in blocks of columns so a uint8 genotype matrix (or a
    :class:`bngp.data.bits.BitMatrix`) is never converted whole.

    Args:
        b: (B, K) membership indicators (0/1).
        genotypes: (K, Q) 0/1 matrix Z.

    Returns:
        (B, Q) frequencies; a batch row with no members releases zeros.
    """
    if isinstance(b, torch.Tensor) and isinstance(genotypes, BitMatrix):
        return _packed_frequencies(b, genotypes)
    if isinstance(b, torch.Tensor):
        counts = b.sum(dim=1, keepdim=True).clamp_min(1.0)
        return (b @ torch.as_tensor(genotypes, dtype=b.dtype)) / counts
    memberships = np.asarray(b, dtype=np.float64)
    counts = np.maximum(memberships.sum(axis=1, keepdims=True), 1.0)
    releases = np.empty((memberships.shape[0], genotypes.shape[1]))
    width = max(8, _BLOCK_ELEMENTS // max(genotypes.shape[0], 1) // 8 * 8)
    for j0 in range(0, genotypes.shape[1], width):
        block = genotypes.columns(j0, j0 + width) if isinstance(genotypes, BitMatrix) else genotypes[:, j0 : j0 + width]
        releases[:, j0 : j0 + width] = (memberships @ block.astype(np.float64)) / counts
    return releases


def perturb(x_hat: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
    """Output perturbation x = clip(x_hat + xi, 0, 1) (clipping is post-processing), summed in
    float64 and returned in x_hat's dtype: a noise that cancels the statistic (xi = t - x_hat,
    computed in float64) then releases exactly t, with no rounding residue of x_hat left in it."""
    if torch.is_grad_enabled() and (noise.requires_grad or x_hat.requires_grad):
        return torch.clamp(x_hat.double() + noise.double(), 0.0, 1.0).to(x_hat.dtype)
    # the same sum and clip in place on one float64 copy (bit for bit the same release)
    return x_hat.to(torch.float64, copy=True).add_(noise).clamp_(0.0, 1.0).to(x_hat.dtype)


class Mechanism(ABC):
    """A black-box release mechanism M(b, xi) -> x in [0, 1]^n_outputs."""

    n_individuals: int
    n_outputs: int

    @abstractmethod
    def statistic(self, b: torch.Tensor) -> torch.Tensor:
        """The un-noised statistic f(D) for a batch of memberships, shape (B, n_outputs)."""

    @property
    def device(self) -> torch.device:
        """The device f(D) is computed on (memberships must be there)."""
        return torch.device("cpu")

    def release(self, b: torch.Tensor, noise: torch.Tensor, statistic: torch.Tensor | None = None) -> torch.Tensor:
        """x = clip(f(D) + xi, 0, 1) for a batch; differentiable in ``noise``.  ``statistic``: f(D) of
        ``b`` when the caller has already computed it (it is then not computed again)."""
        if noise.shape[-1] != self.n_outputs:
            raise InputError(f"`noise` must have {self.n_outputs} columns, got {noise.shape[-1]}.")
        return perturb(self.statistic(b) if statistic is None else statistic, noise)

    def describe(self) -> dict:
        """A JSON-serialisable description."""
        return {"kind": type(self).__name__, "outputs": self.n_outputs}


def _packed_frequencies(b: torch.Tensor, genotypes: BitMatrix) -> torch.Tensor:
    """f(D) = b Z / sum(b) with Z bit-packed: one dense block of :data:`bngp.data.bits.COLUMN_BLOCK` SNVs at a
    time, in ``b``'s dtype and on its device (differentiable in ``b``)."""
    counts = b.sum(dim=1, keepdim=True).clamp_min(1.0)
    if b.requires_grad and torch.is_grad_enabled():
        blocks = [b @ torch.from_numpy(block).to(device=b.device, dtype=b.dtype) for _, _, block in genotypes.blocks()]
        return torch.cat(blocks, dim=1) / counts
    # without a graph: each block's product written into one (B, |Q|) array, divided in place (the same values)
    frequencies = torch.empty((b.shape[0], genotypes.n_columns), dtype=b.dtype, device=b.device)
    for start, stop, block in genotypes.blocks():
        torch.mm(b, torch.from_numpy(block).to(device=b.device, dtype=b.dtype), out=frequencies[:, start:stop])
    return frequencies.div_(counts)


def _divide_counts(counts: torch.Tensor, sizes: torch.Tensor) -> torch.Tensor:
    """counts / sizes for int32 ``counts`` (B, |Q|) and float32 ``sizes`` (B, 1): bit for bit
    ``torch.div(counts, sizes)`` (each count, an integer below 2^24, is exact in float32, then one
    float32 division), written over the counts' own memory by row chunks of :data:`bngp.device.CHUNK_ELEMENTS`,
    each converted in the cache: no float32 copy of the whole counts (40 MB for 2,000 x 5,000)."""
    frequencies = counts.view(torch.float32)
    rows = max(1, CHUNK_ELEMENTS // max(counts.shape[1], 1))
    for start in range(0, counts.shape[0], rows):
        stop = start + rows
        torch.div(counts[start:stop].to(torch.float32), sizes[start:stop], out=frequencies[start:stop])
    return frequencies


class SummaryStatistics(Mechanism):
    """f(D) = allele (carrier) frequencies of the members, section 2.2; the genotype matrix is
    kept on ``device`` (default the CPU) as float32, or kept bit-packed on the CPU when it is a
    :class:`bngp.data.bits.BitMatrix` (then each SNV block is unpacked and moved to the
    memberships' device on the fly: memory stays one block beyond the bits, at beacon scale)."""

    def __init__(self, genotypes: np.ndarray | torch.Tensor | BitMatrix,
                 device: torch.device | str | None = None) -> None:
        if isinstance(genotypes, BitMatrix):
            self.genotypes = genotypes
            self._device = torch.device("cpu" if device is None else device)
            self.n_individuals, self.n_outputs = genotypes.shape
            return
        if isinstance(genotypes, torch.Tensor):
            genotypes = genotypes.detach().cpu()
        self.genotypes = torch.as_tensor(np.asarray(genotypes), dtype=torch.float32)
        if device is not None:
            self.genotypes = self.genotypes.to(device)
        if self.genotypes.ndim != 2:
            raise InputError(f"`genotypes` must be 2-D, got shape {tuple(self.genotypes.shape)}.")
        self.n_individuals, self.n_outputs = (int(s) for s in self.genotypes.shape)
        #: Z as int8 when it is 0/1 on the CPU (and K is small enough for exact counts): see :meth:`statistic`.
        self._binary: torch.Tensor | None = None
        if (hasattr(torch, "_int_mm") and self.genotypes.device.type == "cpu" and self.n_individuals <= _EXACT_INT8_INDIVIDUALS
                and bool(((self.genotypes == 0) | (self.genotypes == 1)).all())):
            self._binary = self.genotypes.to(torch.int8)

    def statistic(self, b: torch.Tensor) -> torch.Tensor:
        """f(D) = b Z / sum(b) (:func:`allele_frequencies`).  On the CPU, with 0/1 genotypes and
        integer memberships b (no gradient), the counts b Z are int8 products summed in int32: exact
        integers, as the float32 product's are (every partial sum is an integer below 2^24), so the
        same bits, at 2-3x the float32 product's speed where the CPU has int8 dot-product
        instructions (VNNI, AMX)."""
        if b.shape[-1] != self.n_individuals:
            raise InputError(f"`b` must have {self.n_individuals} columns, got {b.shape[-1]}.")
        if isinstance(self.genotypes, BitMatrix):
            return _packed_frequencies(b, self.genotypes)
        if (self._binary is not None and b.device.type == "cpu" and b.dtype == torch.float32 and b.ndim == 2
                and not (b.requires_grad and torch.is_grad_enabled())):
            members = b.to(torch.int8)
            if bool((members == b).all()):
                return _divide_counts(torch._int_mm(members, self._binary), b.sum(dim=1, keepdim=True).clamp_min(1.0))
        return allele_frequencies(b, self.genotypes)

    @property
    def device(self) -> torch.device:
        return self._device if isinstance(self.genotypes, BitMatrix) else self.genotypes.device
