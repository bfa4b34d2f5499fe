"""DP mechanisms matched to a trained defender's utility loss (paper 003, Fig. 2f, App. L.3).

``matched-laplace:run=RUN_DIR`` (also ``matched-gaussian:run=RUN_DIR,delta=D`` and
``matched-linf:run=RUN_DIR``) measures the trained defender's realised utility loss
U = mean_b sum_j w_j |clip(x_hat_j + xi_j, 0, 1) - x_hat_j| (w_j = kappa_j / sum kappa, uniform
for scalar kappa) over ``draws`` membership draws from its prior, then calibrates the DP
mechanism to the same realised (clipped) loss on the same statistics x_hat, and reports the
implied eps under the chosen sensitivity (default: the paper's |Q|/n convention).
"""

from __future__ import annotations

import numpy as np
import torch

from bngp.data.priors import prior_from_description
from bngp.errors import InputError
from bngp.release.sampling import release_mechanism
from bngp.rng import torch_generator
from .base import Defense
from .matched import match_utility, utility_loss
from .registry import DefenseContext, float_param, register_defense
from .sensitivity import resolve_sensitivity
from .trained import load_run_defense

__all__ = ["matched_to_run", "MatchedDefense"]

_NORMS = {"laplace": "l1", "gaussian": "l2", "linf": "linf"}


class MatchedDefense(Defense):
    """A DP defense calibrated to a trained defender, carrying the record of the match."""

    def __init__(self, name: str, inner: Defense, record: dict) -> None:
        self.name = name
        self.inner = inner
        self.record = record

    def noise(self, b: torch.Tensor, x_hat: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        return self.inner.noise(b, x_hat, generator)

    @property
    def guarantee(self):
        return self.inner.guarantee

    @property
    def noise_law(self):
        return self.inner.noise_law

    def describe(self) -> dict:
        return {**self.inner.describe(), "name": self.name, "matched": self.record}


def matched_to_run(
    kind: str,
    run_dir: str,
    context: DefenseContext,
    *,
    delta: float | None = None,
    sensitivity: str = "paper",
    draws: int = 200,
    seed: int = 0,
) -> tuple[Defense, dict]:
    """Return the matched DP defense and a record of the match (target loss, scale, eps)."""
    trained = load_run_defense(run_dir, context)
    prior = prior_from_description(trained.artifact.prior)
    mechanism = release_mechanism(context.population.genotypes, trained.composition)
    b = torch.as_tensor(prior.sample(draws, np.random.default_rng(seed)))
    with torch.no_grad():
        x_hat = mechanism.statistic(b)
        x = mechanism.release(b, trained.noise(b, x_hat, torch_generator(seed)))
    kappa = trained.artifact.kappa
    weights = None if np.allclose(kappa, kappa[0]) else kappa
    target = utility_loss((x - x_hat).double().numpy(), weights)
    if target <= 0:
        raise InputError(f"the defender in {run_dir} adds no noise; nothing to match.")
    sens = resolve_sensitivity(sensitivity, _NORMS[kind], context.population, context.n_members)
    calibration = match_utility(kind, target, sens, delta=delta, x_hat=x_hat.double().numpy(), kappa=weights)
    record = {"run": run_dir, "target_utility_loss": target, "draws": draws, **calibration.to_dict()}
    return calibration.defense(), record


def _factory(kind: str):
    def build(params: dict[str, str], context: DefenseContext) -> Defense:
        allowed = {"run", "sensitivity", "draws"} | ({"delta"} if kind == "gaussian" else set())
        unknown = set(params) - allowed
        if unknown:
            raise InputError(f"defense `matched-{kind}` does not take `{sorted(unknown)[0]}`.")
        if "run" not in params:
            raise InputError(f"defense `matched-{kind}` needs `run=RUN_DIR`.")
        delta = float_param(params, "delta", f"matched-{kind}") if kind == "gaussian" else None
        draws = int(float_param(params, "draws", f"matched-{kind}")) if "draws" in params else 200
        defense, record = matched_to_run(kind, params["run"], context, delta=delta,
                                         sensitivity=params.get("sensitivity", "paper"), draws=draws)
        return MatchedDefense(f"matched-{kind}", defense, record)

    return build


for _kind in _NORMS:
    register_defense(f"matched-{_kind}")(_factory(_kind))
