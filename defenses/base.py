"""The defense interface: a noise law xi ~ g(. | b) added to the released statistic.

arXiv:2410.07414, section 2.2: the defender's strategy g perturbs the output of the mechanism,
x = clip(f(D) + xi, 0, 1).  A defense here is anything that produces xi for a batch of
membership vectors: fixed DP mechanisms (their noise ignores b), trained neural defenders
G(b, r), and best-response defenders.  A defense may describe its formal guarantee as a
:class:`Guarantee` record that accountants and audits can read.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass

import torch

from bngp.release.noise_law import NoiseLaw

__all__ = ["Guarantee", "Defense", "NoDefense"]


@dataclass(frozen=True)
class Guarantee:
    """A formal privacy guarantee of a mechanism, as data.

    Attributes:
        mechanism: e.g. "laplace", "gaussian", "randomized-response", "linf-k-norm", "bgbp".
        epsilon: the eps of (eps, delta)-DP (inf if none).
        delta: the delta of (eps, delta)-DP.
        sensitivity: the sensitivity used for calibration (None if not applicable).
        norm: the norm of the sensitivity ("l1", "l2", "linf").
        neighbouring: "replace" or "add-remove".
        gdp_mu: the mu of mu-GDP where the mechanism has one.
    """

    mechanism: str
    epsilon: float
    delta: float = 0.0
    sensitivity: float | None = None
    norm: str | None = None
    neighbouring: str | None = None
    gdp_mu: float | None = None

    def to_dict(self) -> dict:
        return asdict(self)


class Defense(ABC):
    """A noise law for the released statistic."""

    #: short registry name, e.g. "none", "laplace", "run".
    name: str = "defense"
    #: copies of the summary statistic f(D) the defense perturbs (m + 1 for a defender trained
    #: after m fixed Gaussian mechanisms, App. L.6); the release is built from it by
    #: :func:`bngp.release.sampling.release_mechanism`.
    composition: int = 1

    @abstractmethod
    def noise(self, b: torch.Tensor, x_hat: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        """Return additive noise xi, shape like ``x_hat`` (B, n_outputs), for memberships ``b`` (B, K)."""

    @property
    def guarantee(self) -> Guarantee | None:
        """The formal guarantee, or None when the defense has none."""
        return None

    @property
    def noise_law(self) -> NoiseLaw | None:
        """The closed-form noise law when there is one (given to the optimal LRT)."""
        return None

    def describe(self) -> dict:
        """A JSON-serialisable description (name, parameters, guarantee)."""
        guarantee = self.guarantee
        return {"name": self.name, "guarantee": None if guarantee is None else guarantee.to_dict()}


class NoDefense(Defense):
    """Release the exact statistic (xi = 0)."""

    name = "none"

    @property
    def noise_law(self) -> NoiseLaw:
        return NoiseLaw("none", 0.0)

    def noise(self, b: torch.Tensor, x_hat: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        return torch.zeros_like(x_hat)
