"""The one way a release is drawn: x = clip(f(D) + xi, 0, 1) for a defense's noise xi.

arXiv:2410.07414, section 2.2 (output perturbation) and section 4.4 / App. L.6 (composition).
A defense perturbs ``composition`` copies of the summary statistic f(D): 1 for every fixed
mechanism, m + 1 for a defender trained after m fixed Gaussian mechanisms.  Every caller (the
evaluation, the trainer, the mechanism audits, matched utility, ``bngp release``) builds the
mechanism with :func:`release_mechanism` from the defense's own ``composition`` and draws with
:func:`sample_releases`, so the release a defense is audited on is the one it is trained and
evaluated on.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np
import torch

from bngp.errors import InputError
from bngp.validation import check_positive_int
from .composition import ComposedMechanism, copy_count
from .mechanism import Mechanism, SummaryStatistics

__all__ = ["NoiseSource", "release_mechanism", "release_tensor", "sample_releases"]


class NoiseSource(Protocol):
    """What the release needs of a defense: how many copies of f(D) it perturbs, and its noise."""

    composition: int

    def noise(self, b: torch.Tensor, x_hat: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        """Additive noise xi shaped like ``x_hat`` (B, composition * |Q|) for memberships ``b`` (B, K)."""
        ...


def release_mechanism(
    genotypes: np.ndarray | torch.Tensor, composition: int = 1, device: torch.device | str | None = None
) -> Mechanism:
    """f(D) = allele frequencies of the members, or ``composition`` copies of it concatenated
    (Theorem 5: the composed mechanism's output is the concatenation of its parts), computed on
    ``device`` (default the CPU; the BNGP game puts it on its networks' device)."""
    composition = check_positive_int("composition", composition)
    statistic = SummaryStatistics(genotypes, device)
    return statistic if composition == 1 else ComposedMechanism([statistic] * composition)


@torch.no_grad()
def release_tensor(
    mechanism: Mechanism,
    defense: NoiseSource,
    b: np.ndarray | torch.Tensor,
    generator: torch.Generator,
) -> torch.Tensor:
    """Releases x = clip(f(D) + xi, 0, 1) for each row of ``b`` as the mechanism forms them: a (B, n_outputs)
    tensor in the statistic's dtype (float32) on the mechanism's device.

    The defense draws its noise from ``generator`` (a CPU Generator)."""
    parts = copy_count(mechanism)
    if defense.composition != parts:
        raise InputError(
            f"the defense perturbs {defense.composition} copies of the statistic but the mechanism has {parts}; "
            "build it with release_mechanism(genotypes, defense.composition)."
        )
    if isinstance(b, torch.Tensor):
        b = b.detach().cpu()
    b_tensor = torch.as_tensor(np.asarray(b), dtype=torch.float32).to(mechanism.device)
    x_hat = mechanism.statistic(b_tensor)
    xi = defense.noise(b_tensor, x_hat, generator)
    return mechanism.release(b_tensor, xi, x_hat)


def sample_releases(
    mechanism: Mechanism,
    defense: NoiseSource,
    b: np.ndarray | torch.Tensor,
    generator: torch.Generator,
) -> np.ndarray:
    """Releases x = clip(f(D) + xi, 0, 1) for each row of ``b``, as a float64 (B, n_outputs) array
    (:func:`release_tensor`, brought to the CPU whatever the device)."""
    return release_tensor(mechanism, defense, b, generator).double().cpu().numpy()
