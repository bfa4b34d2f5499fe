"""Differentially private perturbation of the allele-frequency release.

Each defense here is a fixed DP mechanism: its noise ignores the membership vector b (except
randomized response, which randomizes the members' own records), it works on a whole batch
of |Q|-vectors at once, and it states its guarantee as a :class:`~bngp.defenses.base.Guarantee`
(mechanism, eps, delta, sensitivity, norm, neighbouring relation, GDP mu) that accountants and
audits read.  The release is x = clip(x_hat + xi, 0, 1); clipping is post-processing and keeps
every guarantee below.  Sensitivities come from :mod:`bngp.defenses.sensitivity`.

Mechanisms (Delta_p = sensitivity of x_hat in the l_p norm, frequency units):

- Laplace (Dwork, McSherry, Nissim & Smith 2006): xi_j i.i.d. with density
  exp(-|z|/b) / (2b), b = Delta_1 / eps; pure eps-DP.  E|xi_j| = b.
- Gaussian (Balle & Wang 2018, "Improving the Gaussian mechanism", Thm. 8): xi_j ~ N(0, s^2),
  (eps, delta)-DP iff  Phi(Delta_2/(2s) - eps s/Delta_2) - e^eps Phi(-Delta_2/(2s) - eps s/Delta_2)
  <= delta; s is the smallest such value (the exact analytic calibration, computed by
  dp_accounting's ``get_sigma_gaussian`` and checked to lie on the private side).  In f-DP
  terms it is mu-GDP with mu = Delta_2 / s (Dong, Roth & Su 2022).  E|xi_j| = s sqrt(2/pi).
- l-inf K-norm mechanism, the "new pure DP" mechanism of the paper's Fig. 2b (Hardt & Talwar
  2010 K-norm mechanism with K the l-inf ball; Steinke & Ullman 2016, "Between pure and
  approximate differential privacy"): density proportional to
  exp(-||z||_inf / a) on R^d with a = Delta_inf / eps; pure eps-DP.  Sampled as
  r ~ Gamma(d + 1, scale a), z ~ Uniform([-r, r]^d).  E|xi_j| = (d + 1) a / 2, and its
  ||xi||_inf is O(d / eps) against O(d log d / eps) for Laplace at equal eps on d counts.
- Randomized response (Warner 1965) on the members' records: each of the |Q| bits of each
  member is flipped independently with probability p = 1 / (1 + e^eps_bit); the release is
  the frequency of the randomized bits among the members, debiased by default to
  (freq - p) / (1 - 2p) (an unbiased estimate of x_hat; post-processing).  Changing one
  member's record changes at most L bits (L = hamming sensitivity), so the release is
  (L * eps_bit)-DP under replacement; that product is the recorded epsilon.

Samplers: ``torch`` (default) draws from the caller's torch.Generator by inverse CDF in
float64, so training-time noise is fast and replayable; it is *not* floating-point safe
(Mironov 2012).  ``opendp`` draws through :mod:`bngp.defenses.secure_sampling` (OpenDP's grid
samplers, OS randomness, not replayable) for releases meant for publication; use
:meth:`DPDefense.secure_release` to obtain the published vector itself rather than the
noise, because re-adding the noise to x_hat in float32 is not exactly the OpenDP output.
"""

from __future__ import annotations

from abc import abstractmethod

import numpy as np
import torch

from bngp.errors import InputError
from bngp.release.noise import sample_gaussian, sample_laplace, sample_linf
from bngp.release.noise_law import NoiseLaw
from bngp.validation import check_binary_matrix
from .base import Defense, Guarantee
from .calibration import (
    check_delta,
    check_epsilon,
    flip_probability,
    gaussian_delta,
    gaussian_epsilon,
    gaussian_mu,
    gaussian_sigma,
    laplace_epsilon,
    laplace_scale,
    linf_epsilon,
    linf_scale,
)
from .secure_sampling import opendp_gaussian, opendp_laplace, opendp_randomized_response
from .sensitivity import Sensitivity

__all__ = [
    "SAMPLERS",
    "DEFAULT_SAMPLER",
    "DPDefense",
    "LaplaceDefense",
    "GaussianDefense",
    "LinfKNormDefense",
    "RandomizedResponseDefense",
]

#: noise samplers a DP defense can use.
SAMPLERS = ("torch", "opendp")
#: the sampler used when a SPEC does not give ``sampler=``.
DEFAULT_SAMPLER = "torch"


def check_sampler(sampler: str) -> str:
    if sampler not in SAMPLERS:
        raise InputError(f"`sampler` must be one of {', '.join(SAMPLERS)}, got {sampler!r}.")
    return sampler


def _as_numpy(array: np.ndarray | torch.Tensor) -> np.ndarray:
    if isinstance(array, torch.Tensor):
        return array.detach().cpu().double().numpy()
    return np.asarray(array, dtype=np.float64)


def _check_x_hat(x_hat: torch.Tensor) -> torch.Tensor:
    if x_hat.ndim != 2:
        raise InputError(f"`x_hat` must be a 2-D (batch, outputs) tensor, got shape {tuple(x_hat.shape)}.")
    return x_hat


class DPDefense(Defense):
    """A DP mechanism: seeded torch noise for training, OpenDP noise for publication.

    Subclasses implement :meth:`_torch_noise` (float64 noise from a torch.Generator)
    and :meth:`_opendp_output` (the noisy statistic from OpenDP, before clipping).
    """

    sampler: str

    @abstractmethod
    def _torch_noise(self, b: torch.Tensor, x_hat: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        """xi as a float64 (B, Q) tensor drawn from ``generator``."""

    @abstractmethod
    def _opendp_output(self, b: np.ndarray, x_hat: np.ndarray) -> np.ndarray:
        """The unclipped noisy statistic (B, Q) as float64, drawn through OpenDP."""

    @abstractmethod
    def parameters(self) -> dict:
        """The mechanism's parameters as a JSON-serialisable dict."""

    def noise(self, b: torch.Tensor, x_hat: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        """xi, shaped and typed like ``x_hat``.  With ``sampler="opendp"`` ``generator`` is unused
        and xi = OpenDP output - x_hat (OS randomness, not replayable)."""
        x_hat = _check_x_hat(x_hat)
        if self.sampler == "opendp":
            x64 = _as_numpy(x_hat)
            xi = self._opendp_output(_as_numpy(b), x64) - x64
            return torch.from_numpy(xi).to(dtype=x_hat.dtype, device=x_hat.device)
        return self._torch_noise(b, x_hat, generator).to(dtype=x_hat.dtype, device=x_hat.device)

    def secure_release(self, b: np.ndarray | torch.Tensor, x_hat: np.ndarray | torch.Tensor) -> np.ndarray:
        """The publishable release clip(y, 0, 1), y drawn by OpenDP from x_hat (whatever ``sampler``).

        Args:
            b: (B, K) memberships (used by randomized response only).
            x_hat: (B, Q) exact statistics.

        Returns:
            (B, Q) float64 release in [0, 1]; not replayable (OS randomness).
        """
        x64 = _as_numpy(x_hat)
        if x64.ndim != 2:
            raise InputError(f"`x_hat` must be a 2-D (batch, outputs) array, got shape {x64.shape}.")
        return np.clip(self._opendp_output(_as_numpy(b), x64), 0.0, 1.0)

    def describe(self) -> dict:
        description = super().describe()
        law = self.noise_law
        description["parameters"] = self.parameters()
        description["noise_law"] = None if law is None else {"kind": law.kind, "scale": law.scale}
        return description


class LaplaceDefense(DPDefense):
    """Laplace output noise, xi_j i.i.d. Laplace(b); eps = Delta_1 / b (pure DP).

    Args:
        scale: b > 0, frequency units.
        sensitivity: the l1 bound the guarantee is stated for (None: noise only, no guarantee).
        sampler: "torch" or "opendp".
    """

    name = "laplace"

    def __init__(self, scale: float, sensitivity: Sensitivity | None = None, *, sampler: str = DEFAULT_SAMPLER) -> None:
        self.scale = check_epsilon(scale, "scale")
        if sensitivity is not None and sensitivity.norm != "l1":
            raise InputError(f"the Laplace mechanism needs an l1 sensitivity, got {sensitivity.norm}.")
        self.sensitivity = sensitivity
        self.sampler = check_sampler(sampler)

    @classmethod
    def from_epsilon(
        cls, epsilon: float, sensitivity: Sensitivity, *, sampler: str = DEFAULT_SAMPLER
    ) -> LaplaceDefense:
        """The eps-DP Laplace mechanism for ``sensitivity`` (b = Delta_1 / eps)."""
        return cls(laplace_scale(epsilon, sensitivity), sensitivity, sampler=sampler)

    @property
    def guarantee(self) -> Guarantee | None:
        if self.sensitivity is None:
            return None
        return Guarantee(
            mechanism="laplace",
            epsilon=laplace_epsilon(self.scale, self.sensitivity),
            delta=0.0,
            sensitivity=self.sensitivity.value,
            norm="l1",
            neighbouring=self.sensitivity.neighbouring,
        )

    @property
    def noise_law(self) -> NoiseLaw:
        return NoiseLaw("laplace", self.scale)

    @property
    def dp_event(self):
        """dp_accounting's ``LaplaceDpEvent`` (noise multiplier b / Delta_1), for its accountants."""
        from dp_accounting import LaplaceDpEvent

        if self.sensitivity is None:
            raise InputError("a Laplace defense without a sensitivity has no DP event.")
        return LaplaceDpEvent(self.scale / self.sensitivity.value)

    def parameters(self) -> dict:
        return {"scale": self.scale, "sampler": self.sampler, "sensitivity_source": _source(self.sensitivity)}

    def _torch_noise(self, b, x_hat, generator):
        return sample_laplace(tuple(x_hat.shape), self.scale, generator)

    def _opendp_output(self, b, x_hat):
        return opendp_laplace(x_hat, self.scale)


class GaussianDefense(DPDefense):
    """Gaussian output noise, xi_j i.i.d. N(0, sigma^2); (eps, delta)-DP and mu-GDP.

    Args:
        sigma: standard deviation > 0, frequency units.
        sensitivity: the l2 bound the guarantee is stated for (None: noise only, no guarantee).
        delta: the delta at which eps is reported (required with a sensitivity).
        sampler: "torch" or "opendp".
        epsilon: the eps to report; checked to satisfy delta(eps) <= delta for this sigma
            (Balle & Wang profile).  Default: the smallest such eps (:func:`gaussian_epsilon`).
    """

    name = "gaussian"

    def __init__(
        self,
        sigma: float,
        sensitivity: Sensitivity | None = None,
        *,
        delta: float | None = None,
        sampler: str = DEFAULT_SAMPLER,
        epsilon: float | None = None,
    ) -> None:
        self.sigma = check_epsilon(sigma, "sigma")
        if sensitivity is not None:
            if sensitivity.norm != "l2":
                raise InputError(f"the Gaussian mechanism needs an l2 sensitivity, got {sensitivity.norm}.")
            if delta is None:
                raise InputError("a Gaussian defense with a sensitivity needs `delta`.")
        self.delta = None if delta is None else check_delta(delta, allow_zero=False)
        self.sensitivity = sensitivity
        self.sampler = check_sampler(sampler)
        if sensitivity is None:
            if epsilon is not None:
                raise InputError("a Gaussian defense without a sensitivity has no `epsilon`.")
            self._epsilon = None
        elif epsilon is None:
            self._epsilon = gaussian_epsilon(self.sigma, self.delta, sensitivity)
        else:
            self._epsilon = check_epsilon(epsilon)
            if gaussian_delta(self.sigma, self._epsilon, sensitivity) > self.delta:
                raise InputError(
                    f"sigma {self.sigma:g} does not give ({self._epsilon:g}, {self.delta:g})-DP "
                    f"for sensitivity {sensitivity.value:g}."
                )

    @classmethod
    def from_epsilon(
        cls, epsilon: float, delta: float, sensitivity: Sensitivity, *, sampler: str = DEFAULT_SAMPLER
    ) -> GaussianDefense:
        """The (eps, delta)-DP Gaussian mechanism with the exact Balle & Wang sigma."""
        sigma = gaussian_sigma(epsilon, delta, sensitivity)
        return cls(sigma, sensitivity, delta=delta, sampler=sampler, epsilon=epsilon)

    @property
    def guarantee(self) -> Guarantee | None:
        if self.sensitivity is None:
            return None
        return Guarantee(
            mechanism="gaussian",
            epsilon=self._epsilon,
            delta=self.delta,
            sensitivity=self.sensitivity.value,
            norm="l2",
            neighbouring=self.sensitivity.neighbouring,
            gdp_mu=gaussian_mu(self.sigma, self.sensitivity),
        )

    @property
    def noise_law(self) -> NoiseLaw:
        return NoiseLaw("gaussian", self.sigma)

    @property
    def dp_event(self):
        """dp_accounting's ``GaussianDpEvent`` (noise multiplier sigma / Delta_2)."""
        from dp_accounting import GaussianDpEvent

        if self.sensitivity is None:
            raise InputError("a Gaussian defense without a sensitivity has no DP event.")
        return GaussianDpEvent(self.sigma / self.sensitivity.value)

    def parameters(self) -> dict:
        rho = None if self.sensitivity is None else self.sensitivity.value**2 / (2 * self.sigma**2)
        return {
            "sigma": self.sigma,
            "sampler": self.sampler,
            "sensitivity_source": _source(self.sensitivity),
            "zcdp_rho": rho,
        }

    def _torch_noise(self, b, x_hat, generator):
        return sample_gaussian(tuple(x_hat.shape), self.sigma, generator)

    def _opendp_output(self, b, x_hat):
        return opendp_gaussian(x_hat, self.sigma)


class LinfKNormDefense(DPDefense):
    """The l-inf K-norm mechanism: density proportional to exp(-||xi||_inf / a); eps = Delta_inf / a.

    Args:
        scale: a > 0, frequency units.
        sensitivity: the l-inf bound the guarantee is stated for (None: noise only).
        sampler: "torch" only (OpenDP has no K-norm sampler).
    """

    name = "linf"

    def __init__(self, scale: float, sensitivity: Sensitivity | None = None, *, sampler: str = DEFAULT_SAMPLER) -> None:
        self.scale = check_epsilon(scale, "scale")
        if sensitivity is not None and sensitivity.norm != "linf":
            raise InputError(f"the l-inf K-norm mechanism needs an linf sensitivity, got {sensitivity.norm}.")
        if check_sampler(sampler) != "torch":
            raise InputError("`sampler=opendp` is not available for `linf` (OpenDP has no K-norm sampler).")
        self.sensitivity = sensitivity
        self.sampler = sampler

    @classmethod
    def from_epsilon(
        cls, epsilon: float, sensitivity: Sensitivity, *, sampler: str = DEFAULT_SAMPLER
    ) -> LinfKNormDefense:
        """The eps-DP l-inf K-norm mechanism for ``sensitivity`` (a = Delta_inf / eps)."""
        return cls(linf_scale(epsilon, sensitivity), sensitivity, sampler=sampler)

    @property
    def guarantee(self) -> Guarantee | None:
        if self.sensitivity is None:
            return None
        return Guarantee(
            mechanism="linf-k-norm",
            epsilon=linf_epsilon(self.scale, self.sensitivity),
            delta=0.0,
            sensitivity=self.sensitivity.value,
            norm="linf",
            neighbouring=self.sensitivity.neighbouring,
        )

    @property
    def noise_law(self) -> NoiseLaw:
        return NoiseLaw("linf", self.scale)

    def parameters(self) -> dict:
        return {"scale": self.scale, "sampler": self.sampler, "sensitivity_source": _source(self.sensitivity)}

    def _torch_noise(self, b, x_hat, generator):
        return sample_linf(int(x_hat.shape[0]), int(x_hat.shape[1]), self.scale, generator)

    def _opendp_output(self, b, x_hat):
        raise InputError("`sampler=opendp` is not available for `linf` (OpenDP has no K-norm sampler).")


class RandomizedResponseDefense(DPDefense):
    """Randomized response on the members' genotype bits; release = (debiased) bit frequency.

    For a batch row with member set D (n = |D| > 0), c1_j = #{k in D: d_kj = 1}; after
    flipping each bit with probability p the number of ones is c1_j - Bin(c1_j, p) + Bin(n - c1_j, p),
    which is exactly the law of the sum of the randomized bits (the release depends on the
    randomized records only through these sums), so the torch sampler draws two binomials per
    entry instead of n |Q| Bernoullis.  A row without members releases x_hat (= 0).

    Args:
        epsilon: eps per bit (> 0), p = 1 / (1 + e^eps).
        genotypes: (K, Q) 0/1 matrix of the population.
        sensitivity: hamming bound L (bits a member change can alter); the release is
            (L eps)-DP under replacement.  None: noise only, no guarantee.
        debias: release (freq - p) / (1 - 2p) (unbiased for x_hat) instead of freq.
        sampler: "torch" or "opendp" (per-record ``make_randomized_response_bitvec``).
    """

    name = "rr"

    def __init__(
        self,
        epsilon: float,
        genotypes: np.ndarray,
        sensitivity: Sensitivity | None = None,
        *,
        debias: bool = True,
        sampler: str = DEFAULT_SAMPLER,
    ) -> None:
        self.epsilon_per_bit = check_epsilon(epsilon)
        self.flip_probability = flip_probability(self.epsilon_per_bit)
        self.genotypes = check_binary_matrix("genotypes", genotypes)
        if sensitivity is not None:
            if sensitivity.norm != "hamming":
                raise InputError(f"randomized response needs a hamming sensitivity, got {sensitivity.norm}.")
            if sensitivity.neighbouring == "add-remove":
                raise InputError("randomized response has no add-remove guarantee; use replace.")
        self.sensitivity = sensitivity
        self.debias = bool(debias)
        self.sampler = check_sampler(sampler)
        self._genotypes_t = torch.from_numpy(self.genotypes.astype(np.float64))

    @property
    def guarantee(self) -> Guarantee | None:
        if self.sensitivity is None:
            return None
        return Guarantee(
            mechanism="randomized-response",
            epsilon=self.epsilon_per_bit * self.sensitivity.value,
            delta=0.0,
            sensitivity=self.sensitivity.value,
            norm="hamming",
            neighbouring="replace",
        )

    def parameters(self) -> dict:
        return {
            "epsilon_per_bit": self.epsilon_per_bit,
            "flip_probability": self.flip_probability,
            "debias": self.debias,
            "sampler": self.sampler,
            "sensitivity_source": _source(self.sensitivity),
        }

    def _check_b(self, b_rows: int, b_cols: int, x_shape: tuple[int, ...]) -> None:
        n_individuals, n_attributes = self.genotypes.shape
        if b_cols != n_individuals:
            raise InputError(f"`b` must have {n_individuals} columns, got {b_cols}.")
        if x_shape != (b_rows, n_attributes):
            raise InputError(f"`x_hat` must have shape ({b_rows}, {n_attributes}), got {x_shape}.")

    def _finish(self, ones: torch.Tensor, n: torch.Tensor, x_hat: torch.Tensor) -> torch.Tensor:
        """Release from randomized one-counts (B, Q) and member counts (B, 1)."""
        p = self.flip_probability
        release = ones / n.clamp_min(1.0)
        if self.debias:
            release = (release - p) / (1.0 - 2.0 * p)
        return torch.where(n > 0, release, x_hat)

    def _torch_noise(self, b, x_hat, generator):
        self._check_b(int(b.shape[0]), int(b.shape[1]), tuple(x_hat.shape))
        b64 = b.detach().to(torch.float64)
        ones = b64 @ self._genotypes_t
        n = b64.sum(dim=1, keepdim=True)
        p = torch.full_like(ones, self.flip_probability)
        flipped_off = torch.binomial(ones, p, generator=generator)
        flipped_on = torch.binomial(n - ones, p, generator=generator)
        randomized = ones - flipped_off + flipped_on
        x64 = x_hat.detach().to(torch.float64)
        return self._finish(randomized, n, x64) - x64

    def _opendp_output(self, b, x_hat):
        self._check_b(b.shape[0], b.shape[1], x_hat.shape)
        ones = np.zeros(x_hat.shape, dtype=np.float64)
        for row, members in enumerate(b > 0.5):
            if members.any():
                ones[row] = opendp_randomized_response(self.genotypes[members], self.flip_probability).sum(axis=0)
        n = torch.from_numpy((b > 0.5).sum(axis=1, keepdims=True).astype(np.float64))
        return self._finish(torch.from_numpy(ones), n, torch.from_numpy(x_hat)).numpy()


def _source(sensitivity: Sensitivity | None) -> str | None:
    return None if sensitivity is None else sensitivity.source
