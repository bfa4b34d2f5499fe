"""The box-constrained decoder: a linear map's posterior read at its mode over the memberships' hull.

A linear map b_hat(x) = mu(x) of :mod:`bngp.linear.fits` with its error covariance C = E[(b - mu)(b - mu)^T] is
the posterior N(mu(x), C) of the linear-Gaussian model of membership (arXiv:2410.07414 section 2.2; the known-law
map of :func:`bngp.linear.whitened_map_of_law` is that posterior's mean exactly).  But b is not Gaussian: it lies
in {0, 1}^K with 1^T b = N.  This decoder returns the posterior's mode over the hull of those memberships,
H = {b in [0, 1]^K : 1^T b = N}:

    b_box(x) = argmin_{b in H, b - mu in range(C)} (b - mu)^T C^+ (b - mu),

the maximum a posteriori membership under the box constraints of Dinur and Nissim's reconstruction (PODS 2003,
section 3: a candidate database in [0, 1]^n consistent with every answer).  Where the release is exact in some
directions (C singular there: suppression, directions of the row space released without noise) the affine set
{b : b - mu in range(C)} meets H, when the exact directions are many, in one point, b itself: a cube sliced by a
random affine subspace of codimension m has one point of the cube's vertices as its only point in the cube with high
probability once m > K / 2 (Donoho and Tanner, "Counting the faces of randomly-projected hypercubes and orthants",
Discrete Comput. Geom. 43, 2010: the cube's weak threshold is 1/2).  A linear map cannot use this: it reads the
same release at a lower AUC.

The problem is a convex quadratic program, solved for every release at once by ADMM (Boyd, Parikh, Chu, Peleato and
Eckstein, Found. Trends Mach. Learn. 3(1), 2011, section 5.1: min f(b) + I_H(z) subject to b = z), with
f(b) = (b - mu)^T C^+ (b - mu) / 2:

    b <- (I + rho C)^-1 (mu + rho C (z - u))   (the b-update, multiplied through by C, which is never inverted),
    z <- Pi_H(b + u) = clip(b + u - nu, 0, 1)  (nu solving 1^T z = N, by bisection: projection onto H),
    u <- u + b - z,

with C = Q diag(c) Q^T formed once, so an iteration is two K x K products for all releases; rho = 1 / mean(c).
The score is the b-iterate (continuous: no ties on the faces of the box).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from bngp.errors import InputError

from .fits import LinearFit

__all__ = ["BoxDecoder", "box_bytes", "error_covariance"]

#: the most ADMM iterations of :meth:`BoxDecoder.decode`.
MAX_ITERATIONS = 200
#: the decode stops when no score moved by more than this over :data:`_CHECK_EVERY` iterations (a ranking of
#: scores in [0, 1] does not resolve finer moves).
TOLERANCE = 1e-4
#: the decoder checks convergence every this many iterations.
_CHECK_EVERY = 10
#: the most Newton (or false-position) steps of one projection onto H, and the sum's tolerance relative to N.
_PROJECTION_STEPS = 50
_PROJECTION_TOLERANCE = 1e-10


def box_bytes(individuals: int, releases: int) -> int:
    """An upper estimate of the memory of :meth:`BoxDecoder.of` and :meth:`BoxDecoder.decode` of ``releases``
    releases: the covariance, its float64 eigendecomposition (and the solver's workspace) and float32 copy, and
    eight float32 (R, K) iterates and temporaries beside the float64 mean and result."""
    k, r = int(individuals), int(releases)
    return 8 * 4 * k * k + 4 * k * k + (4 * 8 + 8 * 2) * r * k


def error_covariance(fit: LinearFit, releases: torch.Tensor, memberships: torch.Tensor) -> torch.Tensor:
    """E[(b - mu(x))(b - mu(x))^T] estimated on ``releases`` (R, width) and their ``memberships`` (R, K),
    float64 (K, K)."""
    if releases.shape[0] != memberships.shape[0] or releases.shape[0] < 2:
        raise InputError("an error covariance needs at least two releases with their memberships.")
    residual = memberships.to(torch.float64) - fit.predict(releases)
    return residual.T @ residual / residual.shape[0]


@dataclass(frozen=True, eq=False)
class BoxDecoder:
    """The decoder of the module docstring for one linear map and its error covariance.

    Attributes:
        fit: the linear map mu(x).
        eigenvalues: c (K,), >= 0, of the error covariance C.
        eigenvectors: Q (K, K).
        n_members: N.
    """

    fit: LinearFit
    eigenvalues: torch.Tensor
    eigenvectors: torch.Tensor
    n_members: int

    @classmethod
    def of(cls, fit: LinearFit, covariance: torch.Tensor, n_members: int) -> "BoxDecoder":
        """The decoder of ``fit`` with error covariance ``covariance`` (K, K), for memberships of ``n_members``."""
        covariance = torch.as_tensor(covariance, dtype=torch.float64)
        k = fit.weights.shape[1]
        if tuple(covariance.shape) != (k, k) or not bool(torch.isfinite(covariance).all()):
            raise InputError(f"the error covariance must be a finite {k} x {k} matrix.")
        if not 1 <= int(n_members) < k:
            raise InputError(f"the number of members must be in 1..{k - 1}, got {n_members}.")
        eigenvalues, eigenvectors = torch.linalg.eigh(0.5 * (covariance + covariance.T))
        return cls(fit, eigenvalues.clamp_min(0.0), eigenvectors, int(n_members))

    def project(self, values: torch.Tensor, shift: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Pi_H row by row: clip(v - nu, 0, 1) with 1^T of it = N, and nu (R, 1).  The excess
        e(nu) = 1^T clip(v - nu, 0, 1) - N falls piecewise linearly in nu, with slope minus the count of
        coordinates strictly inside (0, 1), from K - N at min v - 1 to -N at max v: Newton's steps from ``shift``
        (the mean's offset when None) inside a bracket that shrinks with every step, the bracket's secant (false
        position) where Newton's step would leave it; exact once the bracket's ends lie on one linear piece."""
        n, k = float(self.n_members), values.shape[1]
        low = values.amin(dim=1, keepdim=True) - 1.0
        high = values.amax(dim=1, keepdim=True)
        excess_low, excess_high = torch.full_like(low, k - n), torch.full_like(high, -n)
        # the sum's rounding: K terms in [0, 1] at the values' precision
        tolerance = max(_PROJECTION_TOLERANCE * n, 4.0 * k * torch.finfo(values.dtype).eps)
        if shift is None:
            shift = values.mean(dim=1, keepdim=True) - n / k
        shift = shift.clamp(low, high)
        for _ in range(_PROJECTION_STEPS):
            moved = values - shift
            excess = moved.clamp(0.0, 1.0).sum(dim=1, keepdim=True) - n
            if float(excess.abs().max()) <= tolerance:
                break
            above = excess > 0
            low, excess_low = torch.where(above, shift, low), torch.where(above, excess, excess_low)
            high, excess_high = torch.where(above, high, shift), torch.where(above, excess_high, excess)
            inside = ((moved > 0) & (moved < 1)).sum(dim=1, keepdim=True)
            newton = shift + excess / inside.clamp_min(1)
            secant = low + excess_low * (high - low) / (excess_low - excess_high)
            shift = torch.where((inside > 0) & (newton > low) & (newton < high), newton, secant)
        return (values - shift).clamp_(0.0, 1.0), shift

    def decode(self, releases: torch.Tensor, max_iterations: int = MAX_ITERATIONS,
               tolerance: float = TOLERANCE) -> torch.Tensor:
        """b_box for each release (R, width) -> (R, K) float64 (module docstring; iterated in float32): stops when no score moved by more
        than ``tolerance`` over the last :data:`_CHECK_EVERY` iterations, or after ``max_iterations``."""
        mean = self.fit.predict(releases).detach()
        total = float(self.eigenvalues.sum())
        if total == 0.0:  # mu is exact: nothing to decode
            return mean
        # the iterations run in float32: scores in [0, 1] ranked to TOLERANCE need no more
        rho = self.eigenvalues.numel() / total
        device = mean.device
        c = (rho * self.eigenvalues).to(device=device, dtype=torch.float32)
        q = self.eigenvectors.to(device=device, dtype=torch.float32)
        mean = mean.to(torch.float32)
        inverse = 1.0 / (1.0 + c)
        rotated_mean = mean @ q
        z, shift = self.project(mean)
        u = torch.zeros_like(mean)
        b = checked = mean
        for iteration in range(1, int(max_iterations) + 1):
            b = ((rotated_mean + c * ((z - u) @ q)) * inverse) @ q.T
            z, shift = self.project(b + u, shift)
            u = u + b - z
            if iteration % _CHECK_EVERY == 0:
                if float((b - checked).abs().max()) <= tolerance:
                    break
                checked = b
        return b.to(torch.float64)
