"""Composition: several mechanisms released together (arXiv:2410.07414, section 4.4, Theorem 5; App. L.6).

A composed release is the concatenation [M_1(b, xi_1), ..., M_m(b, xi_m)] of mechanisms on the same
individuals (:class:`ComposedMechanism`).  The toolkit composes c copies of one statistic f(D): a defense
declares how many copies it perturbs (its ``composition``; 1 for every fixed mechanism, m + 1 for a defender
trained after m fixed Gaussian mechanisms, App. L.6), and :func:`bngp.release.sampling.release_mechanism`
builds the matching mechanism.  This module holds what every role needs of a composed release:

* :func:`copy_count` -- how many copies of f(D) a mechanism releases;
* :func:`copy_blocks` -- a (B, c |Q|) release viewed as its c copies, (B, c, |Q|);
* :func:`inverse_variance_weights` -- w_b = s_b^-2 / sum_c s_c^-2, the weights of the minimum-variance
  unbiased pooling of copies f(D) + N(0, s_b^2 I);
* :func:`pool_copies` -- z = sum_b w_b x_b, the copies pooled into one release of f(D).

Where composition is used: the composed defender's noise (:func:`bngp.defenses.network.composed_release`),
matched utility over c |Q| outputs (:func:`bngp.defenses.matched.release_weights`), the in-game attacker
reading pooled copies (``AttackerSettings.pool_copies``), the pooling attacker with least-squares weights
(:class:`bngp.attacks.pooling.CopyPooling`) and the composed attacker (:mod:`bngp.attacks.composed`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from bngp.errors import InputError
from .mechanism import Mechanism

__all__ = ["ComposedMechanism", "copy_blocks", "copy_count", "inverse_variance_weights", "pool_copies"]


def copy_count(mechanism: Mechanism) -> int:
    """The number of parts of ``mechanism``: c for a :class:`ComposedMechanism` of c parts, else 1."""
    return len(mechanism.parts) if isinstance(mechanism, ComposedMechanism) else 1


def copy_blocks(releases: torch.Tensor | np.ndarray, count: int) -> torch.Tensor | np.ndarray:
    """A (B, c |Q|) release of c = ``count`` copies as (B, c, |Q|) (a view; copy b is ``[:, b]``).

    Raises:
        InputError: a width that is not ``count`` copies."""
    if count < 1 or releases.shape[-1] % count:
        raise InputError(f"a release of {count} copies needs a width that is a multiple of {count}, "
                         f"got {releases.shape[-1]}.")
    return releases.reshape(*releases.shape[:-1], count, releases.shape[-1] // count)


def inverse_variance_weights(sigmas: Sequence[float]) -> tuple[float, ...]:
    """w_b = s_b^-2 / sum_c s_c^-2 for copies f(D) + N(0, s_b^2 I): the pooled z = sum_b w_b x_b is the
    minimum-variance unbiased combination, with the noise of one Gaussian mechanism of variance
    1 / sum_b s_b^-2 (App. L.6).

    Raises:
        InputError: no sigma, or one that is not finite and > 0."""
    if not sigmas or not all(np.isfinite(float(sigma)) and float(sigma) > 0 for sigma in sigmas):
        raise InputError(f"inverse-variance weights need standard deviations > 0, got {list(sigmas)}.")
    precision = [float(sigma) ** -2 for sigma in sigmas]
    return tuple(value / sum(precision) for value in precision)


def pool_copies(releases: torch.Tensor, weights: tuple[float, ...], out: torch.Tensor | None = None) -> torch.Tensor:
    """z = sum_b w_b x_b, the c = len(``weights``) copies x_b (|Q| outputs each) of composed releases
    (B, c |Q|) pooled into one release of f(D) (arXiv:2410.07414, App. L.6; the weights:
    :class:`bngp.attacks.pooling.CopyPooling` and ``GameConfig.pool_copies``), (B, |Q|) in the
    releases' dtype, written to ``out`` if given.

    The arithmetic is elementwise and fixed: each product w_b x_b is rounded in the releases' dtype
    (w_b rounded to it first), then they are added in copy order.  So z has the same bits whole, by
    rows, or formed as the copies are drawn (:func:`bngp.defenses.network.composed_release`'s
    ``pool``), on any BLAS (a contraction such as ``einsum`` leaves the order and the fused
    multiply-adds to the library).

    Raises:
        InputError: no weights, or a width that is not c copies."""
    copies = len(weights)
    if copies < 1:
        raise InputError("pooling needs one weight per copy, got none.")
    if releases.shape[-1] % copies:
        raise InputError(f"pooling {copies} copies needs a release width that is a multiple of {copies}, "
                         f"got {releases.shape[-1]}.")
    width = releases.shape[-1] // copies
    pooled = torch.mul(releases[..., :width], float(weights[0]), out=out)
    for copy in range(1, copies):
        pooled.add_(releases[..., copy * width : (copy + 1) * width] * float(weights[copy]))
    return pooled


class ComposedMechanism(Mechanism):
    """Composition of black-box mechanisms on the same individuals (Theorem 5).

    The release is the concatenation [M_1(b, xi_1), ..., M_m(b, xi_m)]; the noise vector is
    split into consecutive blocks of each part's ``n_outputs``.
    """

    def __init__(self, parts: Sequence[Mechanism]) -> None:
        if not parts:
            raise InputError("`parts` must contain at least one mechanism.")
        sizes = {part.n_individuals for part in parts}
        if len(sizes) != 1:
            raise InputError("all composed mechanisms must act on the same individuals.")
        self.parts = list(parts)
        self.n_individuals = sizes.pop()
        self.n_outputs = sum(part.n_outputs for part in parts)
        self.boundaries = np.cumsum([0] + [part.n_outputs for part in parts])

    def statistic(self, b: torch.Tensor) -> torch.Tensor:
        """The parts' statistics side by side; a part that appears several times (the same
        object, as in :func:`bngp.release.sampling.release_mechanism`) is computed once."""
        computed: dict[int, torch.Tensor] = {}
        for part in self.parts:
            if id(part) not in computed:
                computed[id(part)] = part.statistic(b)
        return torch.cat([computed[id(part)] for part in self.parts], dim=1)

    @property
    def device(self) -> torch.device:
        return self.parts[0].device

    def release(self, b: torch.Tensor, noise: torch.Tensor, statistic: torch.Tensor | None = None) -> torch.Tensor:
        if noise.shape[-1] != self.n_outputs:
            raise InputError(f"`noise` must have {self.n_outputs} columns, got {noise.shape[-1]}.")
        statistic = self.statistic(b) if statistic is None else statistic
        blocks = [
            part.release(b, noise[:, start:stop], statistic[:, start:stop])
            for part, start, stop in zip(self.parts, self.boundaries[:-1], self.boundaries[1:])
        ]
        return torch.cat(blocks, dim=1)

    def describe(self) -> dict:
        return {"kind": "ComposedMechanism", "outputs": self.n_outputs, "parts": [p.describe() for p in self.parts]}
