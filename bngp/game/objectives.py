"""The objectives of the BNGP game (arXiv:2410.07414, section 3, section 4.3 and App. L.3).

- leakage: the defender's privacy loss is -CEL of the best attacker (Lemma 3: the BGP risk
  is the minimal cross-entropy).  Measured as max(h(theta) - CEL, 0) in nats per individual
  (h = binary entropy of the marginal membership probability, the prior-only attacker's CEL):
  both CELs bound the BGP risk from above, so the smaller is the better estimate; ``raw`` gives
  h - CEL, the paper's -CEL up to a constant.
- utility loss: UtilityL = mean_j kappa_j |x_j - f(D)_j| (App. L.3), measured on the clipped
  release, so clipping counts.
- defender objectives (section 3.3): ``preference`` = leakage + UtilityL; ``utility-budget``
  = leakage s.t. mean |x - f(D)| <= budget; ``privacy-budget`` = mean |x - f(D)| s.t.
  leakage <= budget, both as Lagrangians with a multiplier updated by dual ascent.
- the BGBP response constraint DPH^eps (section 4.3): the attacker's probabilities must stay
  within max(theta e^-eps, 1 - (1-theta) e^eps) <= H <= min(theta e^eps, 1 - (1-theta) e^-eps);
  Prop. 10 then gives eps_hat = log(1 + (e^eps - 1) / theta*) with theta* = max_k theta_k.

Best responses to a fixed differentiable attack (App. M) are in :mod:`bngp.game.best_response`.
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F

from bngp.linear import affine_calibration
from .config import BUDGET_TOLERANCE, INFEASIBLE, ObjectiveSettings

__all__ = [
    "leakage",
    "utility_losses",
    "defender_loss",
    "updated_multiplier",
    "dp_bounds",
    "dp_violation",
    "implied_dp_epsilon",
    "selection_score",
]


def leakage(logits: torch.Tensor, b: torch.Tensor, prior_entropy: float, *, recalibrate: bool, mode: str) -> torch.Tensor:
    """h(theta) - CEL(H(x), b), clamped at 0 when ``mode`` is "clamped".

    With ``recalibrate`` the attacker's logits are first recalibrated as a * logit + c, (a, c)
    fitted on the batch by Newton's method on the cross-entropy (detached): an attacker whose
    ranking is informative but whose confidence is off still counts with its informative part.
    """
    if recalibrate:
        scale, shift = affine_calibration(logits.detach(), b)
        logits = scale * logits + shift
    gain = prior_entropy - F.binary_cross_entropy_with_logits(logits, b)
    return torch.clamp(gain, min=0.0) if mode == "clamped" else gain


def utility_losses(x: torch.Tensor, x_hat: torch.Tensor, kappa: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(mean_j kappa_j |x_j - x_hat_j|, mean |x - x_hat|), batch means (App. L.3)."""
    deviation = (x - x_hat).abs()
    return (deviation * kappa).mean(), deviation.mean()


def defender_loss(objective: ObjectiveSettings, multiplier: float, leak: torch.Tensor, weighted: torch.Tensor, plain: torch.Tensor) -> torch.Tensor:
    """The defender's loss under ``objective.kind`` (section 3.3); budgets enter as Lagrangians."""
    if objective.kind == "preference":
        return leak + weighted
    if objective.kind == "utility-budget":
        return leak + multiplier * (plain - objective.budget)
    return plain + multiplier * (leak - objective.budget)


def updated_multiplier(objective: ObjectiveSettings, multiplier: float, leak: float, plain: float) -> float:
    """One dual-ascent step on the budget constraint's multiplier (unchanged for ``preference``):
    lambda <- max(0, lambda + dual_lr * violation / max(budget, 1e-3))."""
    if objective.kind == "utility-budget":
        violation = plain - objective.budget
    elif objective.kind == "privacy-budget":
        violation = leak - objective.budget
    else:
        return multiplier
    return max(0.0, multiplier + objective.dual_lr * violation / max(objective.budget, 1e-3))


def dp_bounds(theta: np.ndarray, epsilon: float) -> tuple[torch.Tensor, torch.Tensor]:
    """DPH^eps bounds on the attacker's probabilities (section 4.3):
    max(theta e^-eps, 1 - (1-theta) e^eps) <= H <= min(theta e^eps, 1 - (1-theta) e^-eps)."""
    t = torch.as_tensor(theta, dtype=torch.float32)
    lower = torch.maximum(t * math.exp(-epsilon), 1 - (1 - t) * math.exp(epsilon))
    upper = torch.minimum(t * math.exp(epsilon), 1 - (1 - t) * math.exp(-epsilon))
    return lower, upper


def dp_violation(probabilities: torch.Tensor, bounds: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    """Mean distance of the attacker's probabilities outside the DPH^eps bounds."""
    lower, upper = bounds
    return (torch.relu(probabilities - upper) + torch.relu(lower - probabilities)).mean()


def implied_dp_epsilon(epsilon: float, theta: np.ndarray) -> float:
    """eps_hat = log(1 + (e^eps - 1) / theta*) of Prop. 10 (theta* = max_k theta_k)."""
    return math.log1p(math.expm1(epsilon) / float(np.max(theta)))


def selection_score(objective: ObjectiveSettings, leak: float, weighted: float, plain: float) -> float:
    """How a defender state ranks in the selection against a freshly refitted attacker (lower is
    better): its own objective; under a budget objective, states that miss the budget by more than
    BUDGET_TOLERANCE of it rank after every state that meets it, by how far they miss
    (INFEASIBLE + violation)."""
    if objective.kind == "utility-budget":
        violation = plain - objective.budget
        return leak if violation <= BUDGET_TOLERANCE * objective.budget else INFEASIBLE + violation
    if objective.kind == "privacy-budget":
        violation = leak - objective.budget
        return plain if violation <= BUDGET_TOLERANCE * objective.budget else INFEASIBLE + violation
    return leak + weighted
