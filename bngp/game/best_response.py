"""Best-response defenders against a fixed attack (arXiv:2410.07414, App. M and App. L.2).

Against a fixed-threshold LRT the defender solves (FixedLRT):
    min_g  sum_k P[lrs(d_k, x) <= tau | b_k = 1, g] theta_k  +  kappa E[U],
the expected number of members the attack detects, and the analogous problem (M) for the
adaptive-threshold LRT with tau^(N)(x) in place of tau.  The indicator is relaxed by a
sigmoid (App. L.2): 1{lrs <= tau} ~ sigmoid((tau - lrs) / T).  Here every differentiable
attack of the ``attacks`` package can be the opponent: its oriented score s_k(x) and fitted
threshold t give the relaxed detection probability sigmoid((s_k(x) - t) / T), and the privacy
loss is the relaxed true-positive rate sum_k b_k sigmoid(.) / sum_k b_k.  The temperature T is
the standard deviation of the attack's scores on its own shadow releases (with T = 1 the
sigmoid saturates on lrs values of tens of nats and gives no gradient).

The opponent is fitted as it would be without any defense: with the public knowledge it is
defined to have and shadow releases of the undefended mechanism, exactly the attacker a
best-response defender anticipates.
"""

from __future__ import annotations

import numpy as np
import torch

from bngp.attacks.base import Attack, attack_knowledge
from bngp.attacks.registry import available_attacks, get_attack
from bngp.data.population import Population
from bngp.data.priors import MembershipPrior
from bngp.errors import InputError, UnknownNameError
from bngp.rng import SeedLike, named_seeds, resolve_seed
from bngp.defenses.base import NoDefense

__all__ = ["BestResponseLoss", "best_response_loss", "BEST_RESPONSE_OPPONENTS"]

#: opponents named in the paper (App. L.2, M); any other differentiable attack also works.
BEST_RESPONSE_OPPONENTS = ("lrt", "adaptive-lrt", "score")


class BestResponseLoss:
    """Relaxed true-positive rate of a fitted differentiable attack, as a defender loss."""

    def __init__(self, attack: Attack, genotypes: np.ndarray, temperature: float) -> None:
        if not attack.differentiable:
            raise InputError(f"attack `{attack.name}` is not differentiable; a defender cannot be trained against it.")
        if attack.threshold_ is None:
            raise InputError(f"attack `{attack.name}` has no decision threshold.")
        if not temperature > 0:
            raise InputError(f"`temperature` must be > 0, got {temperature}.")
        self.attack = attack
        self.targets = torch.as_tensor(np.asarray(genotypes, dtype=np.uint8))
        self.threshold = float(attack.threshold_)
        self.temperature = float(temperature)

    def detection_probability(self, x: torch.Tensor) -> torch.Tensor:
        """sigmoid((s_k(x) - t) / T) for every release and known individual, shape (B, K)."""
        scores = self.attack.score_torch(self.targets, x).to(x.dtype)
        return torch.sigmoid((scores - self.threshold) / self.temperature)

    def __call__(self, b: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """Relaxed TPR: sum_k b_k P(detect k) / sum_k b_k, averaged over the batch."""
        detected = self.detection_probability(x)
        return ((detected * b).sum(dim=1) / b.sum(dim=1).clamp_min(1.0)).mean()

    def describe(self) -> dict:
        return {"attack": self.attack.describe(), "threshold": self.threshold, "temperature": self.temperature}


def best_response_loss(
    name: str, population: Population, prior: MembershipPrior, n_members: int | None, *, seed: SeedLike = 0,
    shadow_releases: int = 64,
) -> BestResponseLoss:
    """Fit attack ``name`` with public knowledge on undefended shadow releases drawn from ``seed`` (an
    int, None or a Generator, :func:`bngp.rng.resolve_seed`); return its loss."""
    if name not in available_attacks():
        raise UnknownNameError(f"unknown attack {name!r}; known: {', '.join(available_attacks())}.")
    attack = get_attack(name)
    if not attack.differentiable:
        raise InputError(f"attack `{name}` is not differentiable; choose one of {', '.join(BEST_RESPONSE_OPPONENTS)}.")
    seeds = named_seeds(resolve_seed(seed), ("fit", "temperature"))
    knowledge = attack_knowledge(population, prior, NoDefense(), n_members)
    attack.fit(knowledge, seed=seeds["fit"])
    x, _ = knowledge.simulate(shadow_releases, seeds["temperature"])
    scores = attack.score(population.genotypes, x)
    temperature = float(np.std(scores)) or 1.0
    return BestResponseLoss(attack, population.genotypes, temperature)
