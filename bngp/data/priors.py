"""Membership priors sigma(b) over b in {0,1}^K (paper section 2.2 and App. L.1).

- :class:`UniformSubsetPrior`: each dataset is n of the K individuals drawn uniformly without
  replacement ("choose n of K"), the paper's genomic setup (K = 800, n = 400).
- :class:`BernoulliPrior`: b_k ~ Bernoulli(theta_k) independently.

Both sample batches of membership vectors as float32 arrays (B, K) of 0/1, in numpy or torch.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

import numpy as np
import torch

from bngp.errors import InputError
from bngp.validation import check_positive_int, check_probability_vector

__all__ = ["MembershipPrior", "UniformSubsetPrior", "BernoulliPrior", "prior_from_description"]


class MembershipPrior(ABC):
    """A distribution over membership vectors b in {0,1}^K."""

    n_individuals: int

    @property
    @abstractmethod
    def marginals(self) -> np.ndarray:
        """theta_k = P(b_k = 1), shape (K,)."""

    @abstractmethod
    def sample(self, n_draws: int, rng: np.random.Generator) -> np.ndarray:
        """Return ``n_draws`` membership vectors as a (n_draws, K) float32 0/1 array."""

    @abstractmethod
    def sample_torch(self, n_draws: int, generator: torch.Generator) -> torch.Tensor:
        """Return ``n_draws`` membership vectors as a (n_draws, K) float32 0/1 tensor."""

    @abstractmethod
    def describe(self) -> dict:
        """A JSON-serialisable description of the prior."""


@dataclass(frozen=True)
class UniformSubsetPrior(MembershipPrior):
    """Exactly ``n_members`` of ``n_individuals`` drawn uniformly without replacement."""

    n_individuals: int
    n_members: int

    def __post_init__(self) -> None:
        check_positive_int("n_individuals", self.n_individuals)
        check_positive_int("members", self.n_members, maximum=self.n_individuals)

    @property
    def marginals(self) -> np.ndarray:
        return np.full(self.n_individuals, self.n_members / self.n_individuals)

    def sample(self, n_draws: int, rng: np.random.Generator) -> np.ndarray:
        keys = rng.random((n_draws, self.n_individuals))
        chosen = np.argpartition(keys, self.n_members - 1, axis=1)[:, : self.n_members]
        b = np.zeros((n_draws, self.n_individuals), dtype=np.float32)
        np.put_along_axis(b, chosen, 1.0, axis=1)
        return b

    def sample_torch(self, n_draws: int, generator: torch.Generator) -> torch.Tensor:
        keys = torch.rand((n_draws, self.n_individuals), generator=generator)
        # the same set as a sorted top-k (sorting it only orders the indices the scatter writes):
        # half the time of the draw of a paper-scale refit's 10,000 x 800 memberships
        chosen = torch.topk(keys, self.n_members, dim=1, sorted=False).indices
        b = torch.zeros((n_draws, self.n_individuals))
        return b.scatter_(1, chosen, 1.0)

    def describe(self) -> dict:
        return {"kind": "uniform-subset", "individuals": self.n_individuals, "members": self.n_members}


class BernoulliPrior(MembershipPrior):
    """b_k ~ Bernoulli(theta_k) independently, theta_k in (0, 1)."""

    def __init__(self, theta: np.ndarray | list[float]) -> None:
        theta = np.atleast_1d(np.asarray(theta, dtype=np.float64))
        self._theta = check_probability_vector("theta", theta)
        self.n_individuals = int(self._theta.size)

    @property
    def marginals(self) -> np.ndarray:
        return self._theta.copy()

    def sample(self, n_draws: int, rng: np.random.Generator) -> np.ndarray:
        return (rng.random((n_draws, self.n_individuals)) < self._theta).astype(np.float32)

    def sample_torch(self, n_draws: int, generator: torch.Generator) -> torch.Tensor:
        theta = torch.as_tensor(self._theta, dtype=torch.float32)
        return (torch.rand((n_draws, self.n_individuals), generator=generator) < theta).float()

    def describe(self) -> dict:
        return {"kind": "bernoulli", "theta": self._theta.tolist()}

    def __eq__(self, other: object) -> bool:
        return isinstance(other, BernoulliPrior) and np.array_equal(self._theta, other._theta)

    def __hash__(self) -> int:
        return hash(self._theta.tobytes())


def prior_from_description(description: dict) -> MembershipPrior:
    """Rebuild a prior from :meth:`MembershipPrior.describe` output."""
    kind = description.get("kind")
    if kind == "uniform-subset":
        return UniformSubsetPrior(int(description["individuals"]), int(description["members"]))
    if kind == "bernoulli":
        return BernoulliPrior(np.asarray(description["theta"]))
    raise InputError(f"`prior.kind` must be 'uniform-subset' or 'bernoulli', got {kind!r}.")
