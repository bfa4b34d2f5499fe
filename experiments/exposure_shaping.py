"""Per-candidate shaping against the attacker's best linear response: does it reach states that noise and
shrinkage shaped in the row space's eigenbasis do not?

Notation of arXiv:2410.07414 section 2.2 and :mod:`bngp.defenses.linear_optimum`: candidates Z (K x |Q|),
N members drawn uniformly, theta = N / K, p = theta (1 - theta), t = f(theta), Zc = Z - 1 t^T = U diag(s) V^T
(:class:`bngp.data.geometry.PopulationSpace`) and Cov(b) = c (I - 11^T / K).  The family of releases here is

    x = t + V diag(rho) V^T Zc^T diag(beta) (b - theta) / N + V e + Zc^T h / N,
    e ~ N(0, tau diag(lambda)),  h ~ N(0, tau diag(w)),

with per-direction retention rho (the shrinkage of the linear-decoder optimum in the row space), per-direction
noise lambda (its eigen-weighting), and the two per-candidate freedoms of the game's generator: each
candidate's retention beta_k (its contribution to the statistic) and noise weight w_k (noise written through
the candidates' rows).  In the coordinates y = V^T (x - t), y = A (b - theta) + eta with
A = diag(rho s / N) U^T diag(beta) and Cov(eta) = tau (diag(lambda) + diag(s) U^T diag(w) U diag(s) / N^2).

The attacker's best linear response to a known Gaussian law is the linear-Gaussian decoder of b (prior
covariance p I); its posterior covariance is C = p I - p^2 A^T (Cov(eta) + p A A^T)^-1 A (Woodbury, an r x r
solve), and candidate k's decoded score has signal-to-noise ratio d_k^2 = (p - C_kk) / (p C_kk).  Scoring each
candidate by its log-likelihood ratio d_k z - d_k^2 / 2 and pooling over candidates with one threshold gives
pooled FPR(t) = mean_k Phi(-(t / d_k + d_k / 2)) and TPR(t) = mean_k Phi(-(t / d_k - d_k / 2)); the objectives
are the mean AUC mean_k Phi(d_k / sqrt 2) (the mean membership advantage's ranking form) and the pooled TPR at
1% FPR (the most exposed candidates).  The threshold is found by bisection and differentiated implicitly
(one Newton step on FPR(t) = alpha whose value is the root and whose gradient is dt/dparameters).

Utility: the deviation x - f(D) has per-attribute variance diag(V Cov_dev V^T) with Cov_dev the shrinkage's
c G (I - 11^T / K) G^T / N^2 (G = diag(rho s) U^T diag(beta) - diag(s) U^T) plus the noise's, and its mean
absolute value is taken under a Gaussian approximation, sqrt(2/pi) mean_j sqrt(var_j), as in
:mod:`bngp.defenses.linear_optimum`.  The noise scale tau is solved so that this loss equals the budget
(fraction x L0, L0 the same loss of f(theta)), by bisection, with its gradient by the implicit function
theorem.  The descent is Adam on logit(rho), log(lambda), logit(beta), log(w) from one start for every
route (rho = 1/2, lambda = c s^2 / (4 N^2): the eigen-weighted Wiener point; beta near 1; w negligible).

Routes: ``eigen`` (rho and lambda free: the row-space optimum's family under the per-attribute loss),
``candidate-noise`` (and w), ``candidate-retention`` (and beta); each for three objectives, the two above and a
soft maximum of the per-candidate AUCs (the most exposed).  The composition route (arXiv:2410.07414 Theorem 5,
Table 5): the learned block released beside fixed Gaussian copies, whose pooled information the decoder reads
too (:meth:`ExposureModel.prior_covariance`); the budget is the learned block's.  Every reading is the model's,
of the attacker that knows the law; a route that the model says gains nothing over ``eigen`` is not worth a
generator.

Usage: python experiments/exposure_shaping.py [--fractions 0.875 0.75] [--steps 400] [--threads 1]
    [--out experiments/results/exposure_shaping]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import numpy as np
import torch

from bngp.data.genome import simulate_genome
from bngp.data.geometry import PopulationSpace
from bngp.data.population import Population
from bngp.game.response import mean_auc, pooled_tpr, soft_maximum_auc

RESULTS = Path(__file__).resolve().parent / "results" / "exposure_shaping"
#: (label, K, reference panel, |Q|, seed, fixed Gaussian copies composed before the learned block, their sigma):
#: the issue's genome, a held-out one, K >= |Q|, and the issue's genome beside the paper's Table 5 copies.
POPULATIONS = (("300 x 1200, seed 61", 300, 300, 1200, 61, 0, 0.0),
               ("300 x 1200, seed 62", 300, 300, 1200, 62, 0, 0.0),
               ("400 x 400, seed 61", 400, 400, 400, 61, 0, 0.0),
               ("300 x 1200, seed 61, beside 4 Gaussian copies (sigma 0.1606)", 300, 300, 1200, 61, 4, 0.1606))
ROUTES = ("eigen", "candidate-noise", "candidate-retention")
OBJECTIVES = ("mean-auc", "tpr-1pct", "soft-max-auc")
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_CURVE_EVERY = 10


def _phi(z: torch.Tensor) -> torch.Tensor:
    return 0.5 * torch.special.erfc(-z / math.sqrt(2.0))


OBJECTIVE_FUNCTIONS = {"mean-auc": mean_auc, "tpr-1pct": lambda d2: pooled_tpr(d2, 0.01),
                       "soft-max-auc": soft_maximum_auc}


@dataclass(frozen=True)
class ExposureModel:
    """The closed forms of the module docstring for one population's geometry."""

    left: torch.Tensor
    singular: torch.Tensor
    basis: torch.Tensor
    n_members: int
    sampling_factor: float
    prior_variance: float
    fixed_noise_variance: float | None = None

    @classmethod
    def of(cls, population: Population, n_members: int, fixed_copies: int = 0,
           fixed_sigma: float = 0.0) -> "ExposureModel":
        space = PopulationSpace.of(population, n_members)
        theta = n_members / population.n_individuals
        basis = space.dense_basis()
        # attributes constant over the candidates lie outside the row space: no mechanism here moves them, and
        # leaving them out divides the loss and L0 by the same count
        basis = basis[np.einsum("ji,ji->j", basis, basis) > 0]
        return cls(torch.as_tensor(space.left), torch.as_tensor(space.singular_values), torch.as_tensor(basis),
                   n_members, space.sampling_factor, theta * (1.0 - theta),
                   fixed_sigma**2 / fixed_copies if fixed_copies else None)

    @property
    def rank(self) -> int:
        return int(self.singular.numel())

    @property
    def n_individuals(self) -> int:
        return int(self.left.shape[0])

    def _marginal(self, covariance: torch.Tensor) -> torch.Tensor:
        """diag(V X V^T) for an r x r X."""
        return ((self.basis @ covariance) * self.basis).sum(dim=1)

    def variances(self, rho, beta, lam, w) -> tuple[torch.Tensor, torch.Tensor]:
        """Per-attribute variances of the deviation's shrinkage part and of the noise at tau = 1."""
        n = self.n_members
        g = (rho * self.singular)[:, None] * self.left.T * beta[None, :] - self.singular[:, None] * self.left.T
        centred = g - g.mean(dim=1, keepdim=True)
        shrinkage = self._marginal(g @ centred.T * (self.sampling_factor / n**2))
        noise = self._marginal(self.noise_covariance(lam, w))
        return shrinkage, noise

    def noise_covariance(self, lam, w) -> torch.Tensor:
        """Cov(eta) / tau = diag(lambda) + diag(s) U^T diag(w) U diag(s) / N^2."""
        scaled = self.left * self.singular[None, :]
        return torch.diag(lam) + (scaled.T * w[None, :]) @ scaled / self.n_members**2

    def loss_at(self, shrinkage, noise, tau) -> torch.Tensor:
        return _SQRT_2_OVER_PI * torch.sqrt(shrinkage + tau * noise).mean()

    def data_independent_loss(self) -> float:
        """L0: the model loss of f(theta) (rho = 0)."""
        r, k = self.rank, self.n_individuals
        zeros, ones = partial(torch.zeros, dtype=torch.float64), partial(torch.ones, dtype=torch.float64)
        shrinkage, _ = self.variances(zeros(r), ones(k), zeros(r), zeros(k))
        return float(self.loss_at(shrinkage, 0.0, 0.0))

    def noise_scale(self, rho, beta, lam, w, budget: float) -> torch.Tensor | None:
        """tau with loss = ``budget`` (None where the shrinkage alone spends more), differentiable implicitly."""
        shrinkage, noise = self.variances(rho, beta, lam, w)
        with torch.no_grad():
            if float(self.loss_at(shrinkage, noise, 0.0)) > budget:
                return None
            low, high = 0.0, 1.0
            while float(self.loss_at(shrinkage, noise, high)) < budget:
                high *= 2.0
            for _ in range(100):
                middle = 0.5 * (low + high)
                low, high = (middle, high) if float(self.loss_at(shrinkage, noise, middle)) < budget else (low, middle)
            root = 0.5 * (low + high)
            slope = _SQRT_2_OVER_PI * (noise / (2.0 * torch.sqrt(shrinkage + root * noise))).mean()
        return root - (self.loss_at(shrinkage, noise, root) - budget) / slope

    def exposures(self, rho, beta, noise_covariance) -> torch.Tensor:
        """d_k^2 of the linear-Gaussian decoder (module docstring); with fixed copies, of the decoder that reads
        them too: its prior covariance before the learned block is P' (:meth:`prior_covariance`) and
        C = P' - P' A^T (Cov(eta) + A P' A^T)^-1 A P'."""
        p = self.prior_variance
        a = (rho * self.singular / self.n_members)[:, None] * self.left.T * beta[None, :]
        if self.fixed_noise_variance is None:
            solved = torch.cholesky_solve(a, torch.linalg.cholesky(noise_covariance + p * a @ a.T))
            gain = p**2 * (a * solved).sum(dim=0)
        else:
            prior = self.prior_covariance()
            spread = a @ prior
            solved = torch.cholesky_solve(spread, torch.linalg.cholesky(noise_covariance + spread @ a.T))
            gain = p - torch.diagonal(prior) + (spread * solved).sum(dim=0)
        return (gain / (p * (p - gain))).clamp_min(0.0)

    def prior_covariance(self) -> torch.Tensor:
        """P' = (I / p + U diag(s^2 / (N^2 sigma_f^2)) U^T)^-1 = p I - U diag(p - pi) U^T, pi_i = 1 / (1 / p + s_i^2 /
        (N^2 sigma_f^2)): the prior p I updated by the fixed copies, whose pooled Gaussian noise of variance
        sigma_f^2 per attribute is, in the coordinates, sigma_f^2 I on diag(s) U^T (b - theta) / N."""
        p = self.prior_variance
        shrunk = 1.0 / (1.0 / p + self.singular**2 / (self.n_members**2 * self.fixed_noise_variance))
        return p * torch.eye(self.n_individuals, dtype=torch.float64) - (self.left * (p - shrunk)) @ self.left.T


@dataclass(frozen=True)
class Parameters:
    """The unconstrained parameters of a state: logit(rho), log(lambda), logit(beta), log(w)."""

    chi: torch.Tensor
    phi: torch.Tensor
    omega: torch.Tensor
    psi: torch.Tensor

    @classmethod
    def start(cls, model: ExposureModel) -> "Parameters":
        r, k, n = model.rank, model.n_individuals, model.n_members
        return cls(torch.zeros(r, dtype=torch.float64),
                   torch.log(0.25 * model.sampling_factor * model.singular**2 / n**2),
                   torch.full((k,), 8.0, dtype=torch.float64),
                   torch.full((k,), math.log(1e-4 * model.sampling_factor), dtype=torch.float64))

    def constrained(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        return torch.sigmoid(self.chi), torch.exp(self.phi), torch.sigmoid(self.omega), torch.exp(self.psi)

    def free(self, route: str) -> list[torch.Tensor]:
        return [self.chi, self.phi] + {"eigen": [], "candidate-noise": [self.psi],
                                       "candidate-retention": [self.omega]}[route]


def readings(model: ExposureModel, parameters: Parameters, budget: float) -> dict | None:
    """The model's readings of a state at ``budget`` (None where its shrinkage alone is over it)."""
    rho, lam, beta, w = parameters.constrained()
    tau = model.noise_scale(rho, beta, lam, w, budget)
    if tau is None:
        return None
    d2 = model.exposures(rho, beta, tau * model.noise_covariance(lam, w))
    shrinkage, noise = model.variances(rho, beta, lam, w)
    return {"exposures": d2, "tau": tau, "noise_share": (tau * noise / (shrinkage + tau * noise)).mean()}


def objective_value(model: ExposureModel, parameters: Parameters, budget: float, objective: str) -> torch.Tensor | None:
    state = readings(model, parameters, budget)
    return None if state is None else OBJECTIVE_FUNCTIONS[objective](state["exposures"])


def summary(model: ExposureModel, parameters: Parameters, budget: float) -> dict:
    with torch.no_grad():
        state = readings(model, parameters, budget)
        d2 = state["exposures"]
        _, lam, beta, w = parameters.constrained()
        candidate = torch.trace(model.noise_covariance(torch.zeros_like(lam), w))
        return {"mean_auc": float(mean_auc(d2)), "tpr_at_1pct_fpr": float(pooled_tpr(d2, 0.01)),
                "largest_auc": float(_phi(d2.max().sqrt() / math.sqrt(2.0))),
                "tpr_at_0.1pct_fpr": float(pooled_tpr(d2, 0.001)), "largest_exposure": float(d2.max().sqrt()),
                "noise_share": float(state["noise_share"]),
                "retention_percentiles_0_5_50": [float(v) for v in np.percentile(beta.numpy(), [0, 5, 50])],
                "candidate_share_of_noise": float(candidate / torch.trace(model.noise_covariance(lam, w)))}


def gradient_check(model: ExposureModel, budget: float, objective: str, seed: int, count: int = 6,
                   step: float = 1e-5) -> float:
    """The largest relative error of the autograd gradient against central differences, over ``count`` random
    coordinates of every parameter, at a start moved off its symmetric point."""
    generator = torch.Generator().manual_seed(seed)
    base = Parameters.start(model)
    moved = Parameters(*(value + 0.3 * torch.randn(value.shape, generator=generator, dtype=value.dtype)
                         for value in (base.chi, base.phi, base.omega - 6.0, base.psi + 6.0)))
    tensors = [value.clone().requires_grad_(True) for value in (moved.chi, moved.phi, moved.omega, moved.psi)]
    objective_value(model, Parameters(*tensors), budget, objective).backward()
    worst = 0.0
    for index, tensor in enumerate(tensors):
        for coordinate in torch.randint(tensor.numel(), (count,), generator=generator).tolist():
            values = []
            for sign in (1.0, -1.0):
                shifted = [value.detach().clone() for value in tensors]
                shifted[index][coordinate] += sign * step
                with torch.no_grad():
                    values.append(float(objective_value(model, Parameters(*shifted), budget, objective)))
            numeric = (values[0] - values[1]) / (2.0 * step)
            analytic = float(tensor.grad[coordinate])
            worst = max(worst, abs(analytic - numeric) / max(abs(numeric), abs(analytic), 1e-8))
    return worst


def descend(model: ExposureModel, budget: float, route: str, objective: str, steps: int, rate: float = 0.05) -> dict:
    """Adam from :meth:`Parameters.start` on the route's free parameters; the best state by the objective, its
    summary and the curve (every :data:`_CURVE_EVERY` steps)."""
    parameters = Parameters(*(value.clone().requires_grad_(True) for value in vars(Parameters.start(model)).values()))
    optimiser = torch.optim.Adam(parameters.free(route), lr=rate)
    best, curve = None, []
    for step in range(steps):
        value = objective_value(model, parameters, budget, objective)
        if value is None:  # the shrinkage alone is over the budget: retain more
            with torch.no_grad():
                parameters.chi.add_(0.05)
                parameters.omega.add_(0.05)
            continue
        current = float(value.detach())
        if best is None or current < best[0]:
            best = (current, Parameters(*(tensor.detach().clone() for tensor in vars(parameters).values())))
        if step % _CURVE_EVERY == 0 or step == steps - 1:
            curve.append({"step": step, "objective": current})
        optimiser.zero_grad()
        value.backward()
        optimiser.step()
    return {"route": route, "objective": objective, "best_objective": best[0], "curve": curve,
            **summary(model, best[1], budget)}


def run_population(label: str, k: int, panel: int, width: int, seed: int, copies: int, sigma: float, fractions,
                   steps: int) -> dict:
    population = simulate_genome(k, panel, width, seed=seed)
    n_members = k // 2
    model = ExposureModel.of(population, n_members, copies, sigma)
    l0 = model.data_independent_loss()
    record = {"population": label, "K": k, "attributes": population.n_attributes,
              "varying_attributes": int(model.basis.shape[0]), "rank": model.rank,
              "members": n_members, "seed": seed, "fixed_copies": copies, "fixed_sigma": sigma, "model_l0": l0,
              "cells": []}
    for fraction in fractions:
        budget = fraction * l0
        cell = {"fraction": fraction, "start": summary(model, Parameters.start(model), budget),
                "gradient_check_max_relative_error": {objective: gradient_check(model, budget, objective, seed)
                                                      for objective in OBJECTIVES},
                "runs": []}
        for objective in OBJECTIVES:
            for route in ROUTES:
                started = time.perf_counter()
                result = descend(model, budget, route, objective, steps)
                result["seconds"] = time.perf_counter() - started
                cell["runs"].append(result)
                print(f"[{label} {fraction:g}] {objective} {route}: mean AUC {result['mean_auc']:.4f}, "
                      f"TPR@1% {result['tpr_at_1pct_fpr']:.4f} ({result['seconds']:.0f} s)", flush=True)
        record["cells"].append(cell)
    return record


def markdown(records: list[dict], command: str) -> str:
    lines = ["# Per-candidate shaping against the best linear response (the model's readings)", "",
             f"`{command}`. Every number is the linear-Gaussian decoder model's (module docstring of "
             "`experiments/exposure_shaping.py`), for an attacker that knows the law; the budget is the model's "
             "per-attribute loss. Shaping uses only the candidates, never the members' rows.", "",
             "| population | budget (x L0) | objective | route | mean AUC | pooled TPR at 1% FPR | at 0.1% | "
             "largest AUC_k | noise share of the loss variance |", "|---|---|---|---|---|---|---|---|---|"]
    for record in records:
        for cell in record["cells"]:
            start = cell["start"]
            lines.append(f"| {record['population']} (r = {record['rank']}) | {cell['fraction']:g} | - | start | "
                         f"{start['mean_auc']:.4f} | {start['tpr_at_1pct_fpr']:.4f} | {start['tpr_at_0.1pct_fpr']:.4f} | "
                         f"{start['largest_auc']:.4f} | {start['noise_share']:.3f} |")
            for run in cell["runs"]:
                lines.append(f"| | | {run['objective']} | {run['route']} | {run['mean_auc']:.4f} | "
                             f"{run['tpr_at_1pct_fpr']:.4f} | {run['tpr_at_0.1pct_fpr']:.4f} | "
                             f"{run['largest_auc']:.4f} | {run['noise_share']:.3f} |")
    checks = [value for record in records for cell in record["cells"]
              for value in cell["gradient_check_max_relative_error"].values()]
    lines += ["", f"Gradient against central differences: largest relative error {max(checks):.1e} over every cell "
              "and objective.", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fractions", type=float, nargs="+", default=[0.875, 0.75])
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    records = [run_population(*entry, args.fractions, args.steps) for entry in POPULATIONS]
    command = "python experiments/exposure_shaping.py " + " ".join(sys.argv[1:] if argv is None else argv)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps({"command": command, "steps": args.steps, "populations": records},
                                                      indent=1))
    (args.out / "report.md").write_text(markdown(records, command.strip()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
