"""Pooling the copies of a composed release into one release of f(D) (arXiv:2410.07414, App. L.6).

A composition of c mechanisms releases x = [x_1, ..., x_c], c copies of the same statistic
f(D) (|Q| outputs each), each with its own noise (:mod:`bngp.attacks.composed`).  A linear
attacker on the whole c |Q|-wide release must identify a c |Q| x K map, so its learning curve
needs about c times the shadow releases of one mechanism (the float budget of
:func:`bngp.linear.max_shadow_releases` can stop it before it converges).
When the copies carry f(D) plus independent noise, the least-squares combination of the copies

    z = sum_b w_b x_b,   w = argmin_w E || (f(D) - E f) - sum_b w_b (x_b - E x_b) ||^2,

is the minimum-variance linear estimate of f(D) from the release (for unbiased copies with
independent isotropic noise of variance s_b^2, w_b is proportional to 1 / s_b^2: the
inverse-variance average, whose noise is that of one Gaussian mechanism with
1 / s^2 = sum_b 1 / s_b^2), and a copy that carries no information about f(D) (a learned
block releasing the data-independent f(theta)) gets w_b = 0.  The attacker then fits its
|Q|-wide map on z, with the learning curve of a single mechanism.  The weights are estimated on
shadow releases (c x c normal equations over all R |Q| entries: 1,000 releases of 5,000
outputs fix them to about 1e-3); the fit on z is a fit on the whole release with the map
W_b = w_b W for copy b (:meth:`CopyPooling.expand`), so it scores, warm-starts and
differentiates like any :class:`bngp.linear.LinearFit`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from bngp.errors import InputError
from bngp.release.composition import pool_copies
from bngp.linear import LinearFit

__all__ = ["CopyPooling", "POOLING_RELEASES", "pooled_sampler"]

#: shadow releases that estimate the pooling weights (drawn before the attacker's own).
POOLING_RELEASES = 1000
#: rows per block when the c x c normal equations are accumulated.
_ROW_BLOCK = 512
#: whole releases drawn at a time by :func:`pooled_sampler` (only their pooled form is kept).
_SAMPLE_BLOCK = 2000


@dataclass(frozen=True)
class CopyPooling:
    """z = sum_b w_b x_b for releases of ``copies`` x ``width`` outputs (module docstring).

    Attributes:
        weights: w_b, one per copy.
        width: |Q|, the outputs of one copy.
        releases: shadow releases the weights were estimated on.
    """

    weights: tuple[float, ...]
    width: int
    releases: int

    @property
    def copies(self) -> int:
        return len(self.weights)

    @classmethod
    def estimate(cls, releases: torch.Tensor, statistic: torch.Tensor, copies: int) -> "CopyPooling":
        """The least-squares weights from shadow ``releases`` (R, c |Q|) and their datasets' f(D)
        (``statistic``, (R, |Q|)), each centred per output over the releases.

        Raises:
            InputError: mismatched shapes, fewer than 3 releases, or no copy that varies.
        """
        rows, total = releases.shape
        if copies < 1 or total % copies or statistic.shape != (rows, total // copies):
            raise InputError(
                f"pooling needs releases of {copies} copies and one f(D) row per release: got releases "
                f"{tuple(releases.shape)} and f(D) {tuple(statistic.shape)}."
            )
        if rows < 3:
            raise InputError(f"pooling weights need at least 3 shadow releases, got {rows}.")
        width = total // copies
        release_mean = releases.to(torch.float64).mean(dim=0).reshape(copies, width)
        statistic_mean = statistic.to(torch.float64).mean(dim=0)
        normal = torch.zeros((copies, copies), dtype=torch.float64)
        target = torch.zeros(copies, dtype=torch.float64)
        for start in range(0, rows, _ROW_BLOCK):
            block = releases[start:start + _ROW_BLOCK].to(torch.float64).reshape(-1, copies, width) - release_mean
            signal = statistic[start:start + _ROW_BLOCK].to(torch.float64) - statistic_mean
            normal += torch.einsum("rbj,rcj->bc", block, block)
            target += torch.einsum("rbj,rj->b", block, signal)
        if float(torch.diagonal(normal).max()) <= 0.0:
            raise InputError("no copy of the release varies across shadow releases: there is nothing to pool.")
        # minimum-norm solution: a copy that does not vary (a constant block) gets weight 0
        weights = torch.linalg.lstsq(normal, target[:, None], rcond=1e-12, driver="gelsd").solution[:, 0]
        return cls(tuple(float(w) for w in weights), int(width), int(rows))

    def pool(self, releases: torch.Tensor) -> torch.Tensor:
        """z = sum_b w_b x_b, shape (R, |Q|), in the releases' dtype (:func:`bngp.release.composition.pool_copies`)."""
        if releases.shape[-1] != self.copies * self.width:
            raise InputError(f"releases must have {self.copies * self.width} outputs, got {releases.shape[-1]}.")
        return pool_copies(releases, self.weights)

    def expand(self, fit: LinearFit) -> LinearFit:
        """The fit on pooled releases as a fit on the whole release: b_hat = mu + (x - m) W_full with
        W_full = [w_1 W; ...; w_c W] (so x W_full = z W) and m any vector with sum_b w_b m_b = the pooled
        mean, here m_b = 0 except for the copy of largest |w_b|."""
        if fit.weights.shape[0] != self.width:
            raise InputError(f"the pooled fit maps {fit.weights.shape[0]} outputs; pooling gives {self.width}.")
        weights = torch.tensor(self.weights, dtype=fit.weights.dtype, device=fit.weights.device)
        lead = int(torch.argmax(weights.abs()))
        release_mean = fit.weights.new_zeros((self.copies, self.width))
        release_mean[lead] = fit.release_mean / weights[lead]
        full = (weights[:, None, None] * fit.weights[None]).reshape(self.copies * self.width, -1)
        return LinearFit(release_mean.reshape(-1), fit.membership_mean, full, fit.ridge, fit.criterion, fit.score,
                         fit.path, fit.releases, fit.shrinkage)

    def to_dict(self) -> dict:
        return {"weights": list(self.weights), "width": self.width, "releases": self.releases}


def pooled_sampler(
    sample: Callable[[int], tuple[torch.Tensor, torch.Tensor]], pooling: CopyPooling
) -> Callable[[int], tuple[torch.Tensor, torch.Tensor]]:
    """sample(n) of pooled releases: each call draws n whole releases from ``sample`` (by blocks
    of at most ``_SAMPLE_BLOCK``, so that only the |Q|-wide pooled releases are kept) and pools them."""

    def pooled(n: int) -> tuple[torch.Tensor, torch.Tensor]:
        pooled_x, memberships = [], []
        for start in range(0, int(n), _SAMPLE_BLOCK):
            x, b = sample(min(_SAMPLE_BLOCK, int(n) - start))
            pooled_x.append(pooling.pool(x))
            memberships.append(b)
        return torch.cat(pooled_x), torch.cat(memberships)

    return pooled

