"""Reconstruction attacks: invert the release against the known population (Dinur-Nissim style).

The release is x = clip(A b + xi, 0, 1) with A = Z^T / N (Z the K x |Q| population, N the
number of members, b in {0,1}^K).  The attacker knows Z and N, estimates b and scores each
individual by its coordinate: score(d_k, x) = b_hat_k.

- ``reconstruction`` -- (weighted) least squares / ridge:
  b_hat = b0 + argmin_delta sum_j w_j ((A delta)_j - y_j)^2 + lambda ||delta||^2,
  y = x - A b0, b0 = (N / K) 1 the prior mean (only matters with ridge or rank deficiency),
  lambda = ridge * trace(A^T A) / K.
- ``reconstruction-l1`` -- LP decoding (Dwork, McSherry, Talwar 2007): the L1 fit
  argmin sum_j w_j |(A delta)_j - y_j|, robust to large sparse noise, solved for the whole
  batch of releases by ADMM (Boyd et al. 2011, section 6.1, least absolute deviations):
  delta <- (A^T A + lambda I)^+ A^T (y + z - u), z <- soft(A delta - y + u, w / rho),
  u <- u + A delta - y - z, started at the weighted least-squares solution, with
  rho = 1 / mean weighted |least-squares residual| per release; each release stops when
  its b_hat moves by at most ``tolerance`` (so results do not depend on the batch).  The
  iterations run in float32 by default (``precision``), with the two products of an
  iteration as one |Q| x K matrix each way, (A^T A + lambda I)^+ A^T and A (the iterations,
  not the float32 rounding, set the result; ``docs/design/evaluation.md``).

Clipping: a coordinate released at exactly 0 or 1 is censored (the noise pushed it past the
bound), so it gets weight w_j = ``clipped_weight`` (default 0: dropped); all others have
weight 1.  Releases without clipped coordinates use the precomputed solver
(A^T A + lambda I)^+ A^T directly; the others are solved by conjugate gradients
preconditioned with that solver (exact after a few iterations when few coordinates are
clipped).  Everything is torch and differentiable in x (the CG/ADMM iterations are
unrolled; masks and soft-thresholding are piecewise linear).

The precomputed matrices take O(K^2) memory in float64, plus A: O(K |Q|) float64 for a dense
population, the bits alone for a bit-packed one (:class:`bngp.attacks.inversion.Design` then
runs every product over blocks of SNVs; the K x K Gram matrix costs O(K^2 |Q|) once).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar, Literal

import numpy as np
import torch

from .base import AttackKnowledge, TorchAttack
from .inputs import PopulationIndex, check_binary_panel
from .inversion import population_inverse
from .registry import register_attack
from .shadow import population_shadow
from bngp.errors import InputError
from bngp.validation import check_nonnegative, check_positive_int

__all__ = ["LeastSquaresReconstruction", "L1Reconstruction"]

#: floating-point types of the ADMM iterations of :class:`L1Reconstruction`.
_PRECISIONS = {"float32": torch.float32, "float64": torch.float64}

def _soft_threshold(values: torch.Tensor, threshold: torch.Tensor) -> torch.Tensor:
    """sign(v) max(|v| - t, 0) for thresholds t >= 0, as v - clamp(v, -t, t) (two passes)."""
    return values - values.clamp(-threshold, threshold)


@register_attack("reconstruction")
class LeastSquaresReconstruction(TorchAttack):
    """Least-squares / ridge reconstruction of b from x = A b + noise, A = Z^T / N; score = b_hat_k.

    Args:
        ridge: lambda relative to the mean eigenvalue of A^T A (0 = least squares).
        clipped_weight: weight of coordinates released at exactly 0 or 1 (0 drops them).
        max_iterations: cap on the conjugate-gradient (or ADMM) iterations.
        tolerance: relative residual at which conjugate gradients stop.
        n_shadow_releases: no-defense releases of the population used to check the direction.
    """

    requires: ClassVar[frozenset[str]] = frozenset({"population", "n_members"})
    knowledge_statement: ClassVar[str] = (
        "Knows the population genotypes Z and the dataset size N, not the defense: estimates b by least squares "
        "on x = Z^T b / N (coordinates released at 0 or 1 dropped), scores b_hat_k; direction checked on "
        "no-defense releases of the population, threshold b_hat_k > 1/2."
    )

    def __init__(
        self,
        ridge: float = 0.0,
        clipped_weight: float = 0.0,
        max_iterations: int = 200,
        tolerance: float = 1e-10,
        n_shadow_releases: int = 20,
    ) -> None:
        self.ridge = check_nonnegative("ridge", ridge)
        self.clipped_weight = check_nonnegative("clipped_weight", clipped_weight)
        self.max_iterations = check_positive_int("max_iterations", max_iterations)
        self.tolerance = check_nonnegative("tolerance", tolerance)
        self.n_shadow_releases = check_positive_int("n_shadow_releases", n_shadow_releases)

    def _fit(self, knowledge: AttackKnowledge, seed: int) -> None:
        population = check_binary_panel("population", knowledge.population)
        n_individuals, n_attributes = population.shape
        n_members = check_positive_int("n_members", knowledge.n_members, maximum=n_individuals)
        self.n_attributes_ = n_attributes
        self.population_index_ = PopulationIndex(population)
        inverse = population_inverse(population, n_members, self.ridge)
        design = inverse.design
        self.design_ = design
        self.penalty_ = inverse.penalty
        self.preconditioner_ = inverse.gram_inverse
        self.prior_mean_ = n_members / n_individuals
        self.prior_release_ = design.row_sums() * self.prior_mean_
        shadow = population_shadow(population, n_members, self.n_shadow_releases, seed)
        self._calibrate(
            self._raw_numpy(shadow.targets, shadow.releases),
            shadow.labels,
            source=shadow.source,
            threshold=0.5,
        )

    def _weights(self, releases: torch.Tensor) -> torch.Tensor:
        clipped = (releases <= 0) | (releases >= 1)
        return torch.where(clipped, torch.full_like(releases, self.clipped_weight), torch.ones_like(releases))

    def _normal_operator(self, delta: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
        """(A^T W A + lambda I) delta for a batch of rows delta (R, K)."""
        return self.design_.adjoint(self.design_.apply(delta) * weights) + self.penalty_ * delta

    def _weighted_solve(self, rhs: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
        """Preconditioned conjugate gradients for (A^T W A + lambda I) delta = rhs, row-batched."""
        delta = rhs @ self.preconditioner_
        residual = rhs - self._normal_operator(delta, weights)
        direction = residual @ self.preconditioner_
        rz = (residual * direction).sum(dim=1)
        scale = rhs.detach().norm(dim=1).clamp(min=1e-300)
        for _ in range(self.max_iterations):
            active = residual.detach().norm(dim=1) > self.tolerance * scale
            if not bool(active.any()):
                break
            image = self._normal_operator(direction, weights)
            curvature = (direction * image).sum(dim=1)
            step = torch.where(active & (curvature > 0), rz / curvature.clamp(min=1e-300), torch.zeros_like(rz))
            delta = delta + step[:, None] * direction
            residual = residual - step[:, None] * image
            preconditioned = residual @ self.preconditioner_
            rz_next = (residual * preconditioned).sum(dim=1)
            ratio = torch.where(rz > 0, rz_next / rz.clamp(min=1e-300), torch.zeros_like(rz))
            direction = preconditioned + ratio[:, None] * direction
            rz = rz_next
        return delta

    def _least_squares(self, y: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
        """delta solving the weighted ridge problem for each row of y (R, |Q|) -> (R, K)."""
        rhs = self.design_.adjoint(y * weights)
        unweighted = bool((weights == 1).all())
        return rhs @ self.preconditioner_ if unweighted else self._weighted_solve(rhs, weights)

    def _solve(self, y: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
        return self._least_squares(y, weights)

    def reconstruct(self, releases: torch.Tensor) -> torch.Tensor:
        """b_hat for each release, shape (R, K), differentiable in the releases."""
        x = releases.to(torch.float64)
        delta = self._solve(x - self.prior_release_, self._weights(x))
        return self.prior_mean_ + delta

    def _raw_torch(self, targets: torch.Tensor | np.ndarray, releases: torch.Tensor) -> torch.Tensor:
        rows = self.population_index_.rows(
            targets.detach().numpy() if isinstance(targets, torch.Tensor) else targets, self.name
        )
        return self.reconstruct(releases)[:, torch.from_numpy(rows)].to(releases.dtype)


@register_attack("reconstruction-l1")
class L1Reconstruction(LeastSquaresReconstruction):
    """LP-decoding reconstruction: b_hat = argmin sum_j w_j |(A b)_j - x_j| by ADMM; score = b_hat_k.

    Args:
        ridge: lambda of the ADMM least-squares step, relative to the mean eigenvalue of A^T A.
        clipped_weight: weight of coordinates released at exactly 0 or 1 (0 drops them).
        max_iterations: ADMM iterations (and cap on conjugate-gradient iterations).
        tolerance: ADMM stops when no coordinate of b_hat moves by more than this (in float32,
            set it above the float32 resolution of b_hat, about 1e-7, or it runs every iteration).
        n_shadow_releases: no-defense releases of the population used to check the direction.
        precision: "float32" (default) or "float64" iterations (the least-squares start, rho and
            the returned b_hat are float64 either way).
    """

    knowledge_statement: ClassVar[str] = (
        "Knows the population genotypes Z and the dataset size N, not the defense: estimates b by an L1 fit "
        "(LP decoding, robust to large sparse noise) of x = Z^T b / N, coordinates released at 0 or 1 dropped, "
        "scores b_hat_k; direction checked on no-defense releases of the population, threshold b_hat_k > 1/2."
    )

    def __init__(
        self,
        ridge: float = 0.0,
        clipped_weight: float = 0.0,
        max_iterations: int = 500,
        tolerance: float = 1e-6,
        n_shadow_releases: int = 20,
        precision: Literal["float32", "float64"] = "float32",
    ) -> None:
        super().__init__(
            ridge=ridge,
            clipped_weight=clipped_weight,
            max_iterations=max_iterations,
            tolerance=tolerance,
            n_shadow_releases=n_shadow_releases,
        )
        if precision not in _PRECISIONS:
            raise InputError(f"`precision` must be one of {', '.join(_PRECISIONS)}, got {precision!r}.")
        self.precision = precision
        self._operators: tuple | None = None

    def _fit(self, knowledge: AttackKnowledge, seed: int) -> None:
        self._operators = None
        super()._fit(knowledge, seed)

    def __getstate__(self) -> dict:
        """The state without the cached operators (closures, formed again on the next solve), so a
        fitted attack pickles (:mod:`bngp.workers`)."""
        return {**self.__dict__, "_operators": None}

    def _iteration_operators(self) -> tuple[Callable[[torch.Tensor], torch.Tensor], Callable[[torch.Tensor], torch.Tensor]]:
        """(v -> (A^T A + lambda I)^+ A^T v, delta -> A delta) row-wise in the iterations' precision;
        a dense design as one |Q| x K matrix each way (formed once per fit)."""
        if self._operators is None:
            dtype = _PRECISIONS[self.precision]
            design, solver = self.design_, self.preconditioner_
            if design.matrix is not None:
                to_delta = (design.matrix @ solver).to(dtype)
                forward = design.matrix.to(dtype)
                self._operators = (lambda v: v @ to_delta, lambda delta: delta @ forward.T)
            else:  # packed: the products run over blocks of SNVs in the argument's precision
                solver = solver.to(dtype)
                self._operators = (lambda v: design.adjoint(v) @ solver, design.apply)
        return self._operators

    def _solve(self, y: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
        delta = self._least_squares(y, weights)
        fitted = self.design_.apply(delta)
        rho = 1.0 / ((fitted - y).abs().detach() * weights).mean(dim=1, keepdim=True).clamp(min=1e-12)
        threshold = weights / rho
        dtype = _PRECISIONS[self.precision]
        to_delta, forward = self._iteration_operators()
        slack = _soft_threshold(fitted - y, threshold).to(dtype)
        y, threshold, delta = y.to(dtype), threshold.to(dtype), delta.to(dtype)
        dual = torch.zeros_like(y)
        active = torch.ones(y.shape[0], dtype=torch.bool)
        for _ in range(self.max_iterations):
            new_delta = to_delta(y + slack - dual)
            argument = forward(new_delta).sub_(y).add_(dual)  # A delta - y + u
            new_slack = _soft_threshold(argument, threshold)  # soft(argument, w / rho)
            new_dual = argument - new_slack  # u + A delta - y - z
            change = (new_delta.detach() - delta.detach()).abs().amax(dim=1)
            if bool(active.all()):
                delta, slack, dual = new_delta, new_slack, new_dual
            else:
                rows = active[:, None]
                delta = torch.where(rows, new_delta, delta)
                slack = torch.where(rows, new_slack, slack)
                dual = torch.where(rows, new_dual, dual)
            active = active & (change > self.tolerance)
            if not bool(active.any()):
                break
        return delta.to(torch.float64)
