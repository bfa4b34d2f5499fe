"""The defender's gradient through the attacker's best linear response (arXiv:2410.07414 section 3.3, the
utility-budget objective, played as a Stackelberg game: the defender moves knowing the attacker answers).

Notation of :mod:`bngp.data.geometry`: candidates Z (K x |Q|), N members drawn uniformly, theta = N / K,
p = theta (1 - theta), t = f(theta), Zc = Z - 1 t^T = U diag(s) V^T.  The defender is noise shaped to the
population (:class:`bngp.defenses.shaped.ShapedNoiseDefense`) with a shrinkage a_i and a noise scale w_i per
direction of the row space, so in the coordinates y = V^T (x - t)

    y_i = (1 - a_i) s_i (U^T (b - theta))_i / N + w_i g_i,   g ~ N(0, I_r).

**The attacker's best linear response** to this known Gaussian law is the linear-Gaussian decoder of b (prior
covariance p I).  With D_i = (1 - a_i) s_i / N and U's orthonormal columns, Woodbury gives its posterior
covariance C = p I - p^2 U diag(D^2 / (w^2 + p D^2)) U^T in closed form, so candidate k's decoded score has the
signal-to-noise ratio

    d_k^2 = (p - C_kk) / (p C_kk),   p - C_kk = p^2 sum_i U_ki^2 D_i^2 / (w_i^2 + p D_i^2),

the exposure the attacker's answer gives each candidate, differentiable in (a, w).  Scoring each candidate by
its log-likelihood ratio d_k z - d_k^2 / 2, the objectives a data steward chooses from are
(:data:`RESPONSE_OBJECTIVES`):

- ``mean-auc``: mean_k Phi(d_k / sqrt 2), the mean membership advantage in its ranking form (the BGP risk's
  attacker ranks each candidate on its own);
- ``tpr``: the pooled attack's TPR at 1% FPR, one threshold for every candidate: FPR(t) = mean_k
  Phi(-(t / d_k + d_k / 2)) = 0.01 solved by bisection and differentiated implicitly, TPR = mean_k
  Phi(-(t / d_k - d_k / 2)) (the most exposed candidates set it);
- ``soft-max-auc``: T log mean_k exp(AUC_k / T), T = 0.01, the most exposed candidate's AUC, smoothed.

**The budget** is the exact one: the expected clipped loss of the release (:class:`bngp.game.start.BudgetSurface`,
on its calibration memberships) equals U.  The noise is scaled by a common factor c(a, w) that meets it (Newton's
method on the closed form), and the objective is read at (a, c w): its gradient runs through c by the implicit
function theorem, dc = -(d loss / d(a, w)) / (d loss / dc), with the loss's gradient in closed form
(:meth:`bngp.game.start.BudgetSurface.loss_and_gradient`).  So every state of the descent meets the budget
exactly, and the gradient moves along the budget surface.

**The descent** is Adam on (a, log pi), pi_i = (1 - a_i)^2 / w_i^2, from the start (the best reference, held exactly), a clipped to [0, 1]; a
step whose shrinkage alone spends more than the budget is undone and the step size halved.  The state with the
lowest objective is delivered; the model reads it, and :func:`choose_response` keeps it only where the converged
linear attack reads it below the best reference by two standard errors (:func:`best_response_start`).

Only the candidates shape the noise, never the members' rows (:data:`bngp.data.geometry.THREAT_MODEL`).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace

import numpy as np
import torch

from bngp.data.geometry import THREAT_MODEL, PopulationSpace
from bngp.data.population import Population
from bngp.defenses.base import Defense
from bngp.defenses.budget import BudgetSetting, row_space_optimal_at_budget
from bngp.defenses.shaped import ShapedNoiseDefense
from bngp.defenses.shrinkage import ShrinkNoiseDefense
from bngp.errors import InputError
from bngp.references import LinearAttackScore, ReferenceRanking, linear_attack_score
from bngp.rng import SeedLike, resolve_seed

from .start import SURFACE_DRAWS, BudgetSurface

__all__ = ["RESPONSE_OBJECTIVES", "BudgetedObjective", "LinearResponse", "ResponseResult", "ResponseChoice", "best_response_start",
           "choose_response", "mean_auc", "pooled_tpr", "respond", "soft_maximum_auc"]

#: the objectives of the module docstring.
RESPONSE_OBJECTIVES = ("mean-auc", "tpr", "soft-max-auc")
#: the FPR at which ``tpr`` reads the pooled attack.
RESPONSE_FPR = 0.01
#: the temperature of ``soft-max-auc``.
SOFT_MAX_TEMPERATURE = 0.01
#: the standard errors by which the converged attack must read a trained state lower than its start to keep it.
KEEP_MARGIN_SE = 2.0
#: the descent's lowest states (on its subset of the calibration draws) read again on all of them.
FINAL_CANDIDATES = 8
#: the budget's relative tolerance for the noise factor c.
_BUDGET_TOLERANCE = 1e-8


def _phi(z: torch.Tensor) -> torch.Tensor:
    return 0.5 * torch.special.erfc(-z / math.sqrt(2.0))


def mean_auc(d2: torch.Tensor) -> torch.Tensor:
    """mean_k Phi(d_k / sqrt 2)."""
    return _phi(torch.sqrt(d2 + 1e-18) / math.sqrt(2.0)).mean()


def pooled_tpr(d2: torch.Tensor, fpr: float = RESPONSE_FPR) -> torch.Tensor:
    """The pooled likelihood-ratio attack's TPR at ``fpr`` (module docstring), differentiable in d2: the threshold
    is the root of FPR(t) = fpr by bisection, and one Newton step from it carries the implicit dt/d(d2)."""
    if not 0.0 < fpr < 1.0:
        raise InputError(f"the FPR must be in (0, 1), got {fpr}.")
    d = torch.sqrt(d2 + 1e-12)

    def false_positives(t: torch.Tensor | float) -> torch.Tensor:
        return _phi(-(t / d + d / 2.0)).mean()

    with torch.no_grad():
        low, high = -1e3, 1e3
        for _ in range(120):
            middle = 0.5 * (low + high)
            low, high = (middle, high) if false_positives(middle) > fpr else (low, middle)
        root = torch.tensor(0.5 * (low + high), dtype=d.dtype)
        density = (torch.exp(-0.5 * (root / d + d / 2.0) ** 2) / (math.sqrt(2.0 * math.pi) * d)).mean()
    threshold = root + (false_positives(root) - fpr) / density
    return _phi(-(threshold / d - d / 2.0)).mean()


def soft_maximum_auc(d2: torch.Tensor, temperature: float = SOFT_MAX_TEMPERATURE) -> torch.Tensor:
    """T log mean_k exp(AUC_k / T), AUC_k = Phi(d_k / sqrt 2): between the mean and the largest AUC_k, within
    T log K of the largest."""
    aucs = _phi(torch.sqrt(d2 + 1e-18) / math.sqrt(2.0))
    return temperature * (torch.logsumexp(aucs / temperature, dim=0) - math.log(aucs.numel()))


_OBJECTIVES = {"mean-auc": mean_auc, "tpr": pooled_tpr, "soft-max-auc": soft_maximum_auc}


def objective_function(name: str):
    """The objective ``name`` of :data:`RESPONSE_OBJECTIVES`, as a function of the exposures d2."""
    if name not in _OBJECTIVES:
        raise InputError(f"the response objective must be one of {', '.join(RESPONSE_OBJECTIVES)}, got {name!r}.")
    return _OBJECTIVES[name]


@dataclass(frozen=True, eq=False)
class LinearResponse:
    """The exposures d_k^2 of the attacker's best linear response to a shaped release (module docstring)."""

    left_squared: torch.Tensor
    information: torch.Tensor
    prior_variance: float

    @classmethod
    def of(cls, space: PopulationSpace) -> "LinearResponse":
        theta = space.n_members / space.n_individuals
        return cls(torch.as_tensor(space.left**2), torch.as_tensor(space.singular_values**2 / space.n_members**2),
                   theta * (1.0 - theta))

    def exposures(self, shrink: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
        """d_k^2 for per-direction shrinkage a and noise scales w (float64 tensors of the rank's length)."""
        p = self.prior_variance
        signal = (1.0 - shrink) ** 2 * self.information  # D_i^2
        denominator = scale**2 + p * signal
        share = torch.where(denominator > 0, signal / denominator.clamp_min(1e-300), torch.zeros_like(signal))
        gain = p**2 * (self.left_squared @ share)
        return (gain / (p * (p - gain).clamp_min(1e-300))).clamp_min(0.0)

    def readings(self, shrink: np.ndarray, scale: np.ndarray) -> dict:
        """What the model says of a state: the mean AUC, the pooled TPR at 1% and 0.1% FPR, the largest AUC_k."""
        with torch.no_grad():
            d2 = self.exposures(torch.as_tensor(shrink, dtype=torch.float64), torch.as_tensor(scale, dtype=torch.float64))
            return {"mean_auc": float(mean_auc(d2)), "tpr_at_1pct_fpr": float(pooled_tpr(d2, 0.01)),
                    "tpr_at_0.1pct_fpr": float(pooled_tpr(d2, 0.001)),
                    "largest_auc": float(_phi(d2.max().sqrt() / math.sqrt(2.0))),
                    "soft_max_auc": float(soft_maximum_auc(d2))}


def _on_budget(surface: BudgetSurface, shrink: np.ndarray, scale: np.ndarray
               ) -> tuple[float, np.ndarray, np.ndarray] | None:
    """(c, d loss / d a, d loss / d w at (a, c w)) with loss(a, c w) = U to a relative :data:`_BUDGET_TOLERANCE`
    (Newton's method on c from 1, safeguarded by bisection on the bracket the values give), or None where the
    shrinkage alone spends more than the budget."""
    budget = surface.budget
    if surface.loss(shrink, np.zeros_like(scale)) > budget:
        return None
    low, high = 0.0, math.inf
    factor = 1.0
    for _ in range(100):
        loss, by_shrink, by_scale = surface.loss_and_gradient(shrink, factor * scale)
        value = loss - budget
        if abs(value) <= _BUDGET_TOLERANCE * budget:
            return factor, by_shrink, by_scale
        low, high = (factor, high) if value < 0 else (low, factor)
        slope = float(by_scale @ scale)
        step = factor - value / slope if slope > 0 else math.nan
        inside = np.isfinite(step) and low < step < high
        factor = step if inside else (2.0 * factor if math.isinf(high) else 0.5 * (low + high))
    raise InputError("the noise factor that meets the utility budget was not found.")


@dataclass(frozen=True)
class ResponseResult:
    """A descent's outcome: the delivered state (the lowest objective seen), the model's readings of the start and of
    it, and the curve (one row per step: the objective, the model's mean AUC, TPR at 1% FPR and largest AUC_k, the
    exact loss and the noise factor c)."""

    defense: ShapedNoiseDefense
    objective: str
    steps: int
    best_step: int
    start_model: dict
    delivered_model: dict
    curve: tuple[dict, ...]
    seconds: float
    threat_model: str = THREAT_MODEL

    def to_dict(self) -> dict:
        return {"objective": self.objective, "steps": self.steps, "best_step": self.best_step,
                "start_model": self.start_model, "delivered_model": self.delivered_model,
                "seconds": self.seconds, "curve": list(self.curve), "threat_model": self.threat_model,
                "mechanism": self.defense.summary()}


@dataclass(frozen=True, eq=False)
class BudgetedObjective:
    """The objective of a state (a_i, log pi_i) of the directions ``free`` (the others suppressed: a_i = 1, w_i = 0)
    read on the budget: w_i = (1 - a_i) / sqrt(pi_i) scaled by the factor c that meets the budget of ``surface``,
    c's gradient by the implicit function theorem (module docstring)."""

    model: LinearResponse
    surface: BudgetSurface
    function: object
    free: np.ndarray

    def full(self, values: torch.Tensor, fill: float) -> torch.Tensor:
        """The rank's vector with ``values`` on the free directions and ``fill`` on the others."""
        whole = torch.full((self.free.size,), fill, dtype=torch.float64)
        return whole.index_put((torch.as_tensor(np.flatnonzero(self.free)),), values)

    def __call__(self, shrink: torch.Tensor, log_precision: torch.Tensor
                 ) -> tuple[torch.Tensor, np.ndarray, np.ndarray, float] | None:
        """(the objective, a, c w and c) of the state, or None where the shrinkage alone spends more than the
        budget."""
        a_t = self.full(shrink, 1.0)
        w_t = self.full((1.0 - shrink) * torch.exp(-0.5 * log_precision), 0.0)
        a, w = a_t.detach().numpy(), w_t.detach().numpy()
        solved = _on_budget(self.surface, a, w)
        if solved is None:
            return None
        factor, by_shrink, by_scale = solved
        # value c, gradient -(d loss / d(a, w)) / (d loss / dc), through the loss's linearisation at (a, c w)
        change = (torch.as_tensor(by_shrink) * (a_t - torch.as_tensor(a))).sum() \
            + factor * (torch.as_tensor(by_scale) * (w_t - torch.as_tensor(w))).sum()
        moved = factor - change / float(by_scale @ w)
        return self.function(self.model.exposures(a_t, moved * w_t)), a.copy(), factor * w, factor


def _deliver(states: list, surface: BudgetSurface, model: LinearResponse, function) -> tuple[int, np.ndarray, np.ndarray]:
    """(step, a, w) delivered of the descent's ``states`` (objective, step, a, w), read on a subset of the calibration
    draws: the start and the :data:`FINAL_CANDIDATES` lowest states are put on the budget of all of them and read
    again, and the lowest of those is delivered (the start always fits)."""
    candidates = [states[0]] + sorted(states[1:], key=lambda entry: (entry[0], entry[1]))[:FINAL_CANDIDATES]
    best = None
    for _, step, a, w in candidates:
        solved = _on_budget(surface, a, w)
        if solved is None:
            continue
        with torch.no_grad():
            value = float(function(model.exposures(torch.as_tensor(a), torch.as_tensor(solved[0] * w))))
        if best is None or value < best[0]:
            best = (value, step, a, solved[0] * w)
    return best[1], best[2], best[3]


def respond(start: ShapedNoiseDefense, surface: BudgetSurface, objective: str = "mean-auc", steps: int = 200,
            rate: float = 0.02, descent_draws: int = SURFACE_DRAWS, progress=None) -> ResponseResult:
    """The descent of the module docstring from ``start`` (a mechanism shaped to the population, on the budget
    surface of its population, law and budget): ``steps`` Adam steps of size ``rate`` on (a, log pi), the state with
    the lowest objective delivered as a :class:`ShapedNoiseDefense` (weighting ``response``).  The descent reads the
    loss on the surface's first ``descent_draws`` calibration memberships, at the start's loss there; the delivered
    state is the lowest objective, read on the budget of all of them, of the start and the descent's
    :data:`FINAL_CANDIDATES` lowest states.  ``progress``: called with each curve row."""
    if not isinstance(start, ShapedNoiseDefense):
        raise InputError("the best-response gradient acts on noise shaped to the population; the start is "
                         f"{start.label!r}.")
    if surface.basis is None or surface.law != "gaussian":
        raise InputError("the budget surface must be the row space's, for Gaussian noise.")
    if steps < 0:
        raise InputError(f"`response_steps` must be >= 0, got {steps}.")
    if not np.any(start.direction_scales > 0):
        raise InputError("the start releases no noise: there is nothing for the descent to shape.")
    started = time.perf_counter()
    model = LinearResponse.of(start.space)
    descent = replace(surface, statistics=surface.statistics[:descent_draws], _shifts={})
    # the start lies on the budget of the full surface; the descent's surface holds it at its loss on the subset
    descent = replace(descent, budget=descent.loss(start.direction_shrink, start.direction_scales), _shifts={})
    # a direction the start suppresses (a = 1) carries no signal at any precision and stays suppressed; on the
    # others the state is (a_i, pi_i), w_i = (1 - a_i) / sqrt(pi_i), pi_i = (1 - a_i)^2 / w_i^2 the precision
    # that alone sets the decoder's exposure (an exact direction, w_i = 0, starts at a large finite pi_i)
    free = start.direction_shrink < 1.0
    evaluate = BudgetedObjective(model, descent, objective_function(objective), free)
    kept = 1.0 - start.direction_shrink[free]
    scales = start.direction_scales[free]
    exact = scales <= 0
    precision = np.divide(kept**2, scales**2, out=np.zeros_like(kept), where=~exact)
    precision[exact] = 1e6 * (float(precision[~exact].max()) if np.any(~exact) else 1.0)
    shrink = torch.tensor(start.direction_shrink[free], dtype=torch.float64, requires_grad=True)
    log_precision = torch.tensor(np.log(precision), dtype=torch.float64, requires_grad=True)
    optimiser = torch.optim.Adam([shrink, log_precision], lr=rate)
    previous, states, curve = None, [], []
    for step in range(steps + 1):
        state = evaluate(shrink, log_precision)
        if state is None:  # the shrinkage alone is over the budget: undo the step, halve the step size
            if previous is None:
                raise InputError("the start's shrinkage alone spends more than the budget.")
            with torch.no_grad():
                shrink.copy_(previous[0])
                log_precision.copy_(previous[1])
            for group in optimiser.param_groups:
                group["lr"] *= 0.5
            continue
        previous = (shrink.detach().clone(), log_precision.detach().clone())
        value, a, w, factor = state
        current = float(value.detach())
        states.append((current, step, a, w))
        row = {"step": step, "objective": current, "noise_factor": factor,
               **{key: reading for key, reading in model.readings(a, w).items() if key != "soft_max_auc"}}
        curve.append(row)
        if progress is not None:
            progress(row)
        if step == steps:
            break
        optimiser.zero_grad()
        value.backward()
        optimiser.step()
        with torch.no_grad():
            shrink.clamp_(0.0, 1.0 - 1e-9)
    best_step, best_shrink, best_scale = _deliver(states, surface, model, objective_function(objective))
    defense = ShapedNoiseDefense(start.space, best_shrink, best_scale, start.n_members,
                                 label=f"best response ({objective})", name="best-response", weighting="response",
                                 details={"objective": objective, "start": start.label, "step": best_step})
    return ResponseResult(defense, objective, steps, best_step,
                          model.readings(start.direction_shrink, start.direction_scales),
                          model.readings(best_shrink, best_scale), tuple(curve), time.perf_counter() - started)


@dataclass(frozen=True)
class ResponseChoice:
    """The never-worse selection: the start and the descent's state read by the same converged linear attack
    (:func:`bngp.references.linear_attack_score`, the same seed), and which is kept; ``margin`` = the trained
    state's AUC - the start's and ``tpr_margin`` the same of the TPR at 1% FPR, each with its standard error (the
    two readings' test releases are independent)."""

    kept: str
    reason: str
    start: LinearAttackScore
    trained: LinearAttackScore
    margin: float
    margin_se: float
    tpr_margin: float
    tpr_margin_se: float
    seed: int

    def to_dict(self) -> dict:
        return {"kept": self.kept, "reason": self.reason, "start": self.start.to_dict(),
                "trained": self.trained.to_dict(), "auc_margin": self.margin, "auc_margin_se": self.margin_se,
                "tpr_at_1pct_fpr_margin": self.tpr_margin, "tpr_at_1pct_fpr_margin_se": self.tpr_margin_se,
                "keep_margin_se": KEEP_MARGIN_SE, "seed": self.seed}


def choose_response(start: Defense, result: ResponseResult, population: Population, n_members: int,
                    seed: SeedLike) -> ResponseChoice:
    """Keep the descent's state only where the converged linear attack reads it lower than ``start`` (the best
    reference) by more than
    :data:`KEEP_MARGIN_SE` standard errors of the difference: its AUC for ``mean-auc`` and ``soft-max-auc``; for
    ``tpr`` its TPR at 1% FPR, at an AUC no higher than the start's by that many standard errors; else the start."""
    concrete = resolve_seed(seed)
    start_score = linear_attack_score(start, population, n_members, concrete)
    trained_score = linear_attack_score(result.defense, population, n_members, concrete)
    margin = trained_score.auc - start_score.auc
    se = math.hypot(start_score.auc_se, trained_score.auc_se)
    tpr_margin = trained_score.tpr_at_1pct - start_score.tpr_at_1pct
    tpr_se = math.hypot(start_score.tpr_at_1pct_se, trained_score.tpr_at_1pct_se)
    auc_text = f"AUC {trained_score.auc:.4f} vs the start's {start_score.auc:.4f} (margin {margin:+.4f}, SE {se:.4f})"
    if result.objective == "tpr":
        better = tpr_margin < -KEEP_MARGIN_SE * tpr_se and margin <= KEEP_MARGIN_SE * se
        what = (f"TPR at 1% FPR {trained_score.tpr_at_1pct:.4f} vs the start's {start_score.tpr_at_1pct:.4f} "
                f"(margin {tpr_margin:+.4f}, SE {tpr_se:.4f}), {auc_text}")
    else:
        better = margin < -KEEP_MARGIN_SE * se
        what = auc_text
    return ResponseChoice("trained" if better else "start", f"converged linear attack: {what}", start_score,
                          trained_score, margin, se, tpr_margin, tpr_se, concrete)


def best_response_start(ranking: ReferenceRanking, setting: BudgetSetting, population: Population, n_members: int,
                        objective: str, steps: int, seed: SeedLike, progress=None
                        ) -> tuple[ShrinkNoiseDefense, dict]:
    """The start of a budget-trained defender after the best-response descent: the descent runs from the best
    reference where it is shaped to the population, else from the row-space optimum at the budget
    (:func:`bngp.defenses.budget.row_space_optimal_at_budget`, noise correlated across attributes where K - 1 >=
    |Q|); its state is kept only where :func:`choose_response` reads it below the best reference.  Returns the
    start and the record of the descent and the choice (``response`` in the run's start record)."""
    reference = ranking.best
    origin = reference if isinstance(reference, ShapedNoiseDefense) else \
        row_space_optimal_at_budget(setting, ranking.budget)
    surface = BudgetSurface.on_setting(origin, setting, ranking.budget.value)
    result = respond(origin, surface, objective, steps, progress=progress)
    choice = choose_response(reference, result, population, n_members, seed)
    record = {**result.to_dict(), "origin": origin.label, "reference": ranking.best_score.label,
              "choice": choice.to_dict()}
    return (result.defense if choice.kept == "trained" else reference), record
