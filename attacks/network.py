"""The attacker network H(x) of the BNGP game (arXiv:2410.07414, section 3 and App. L.8).

:class:`Attacker` H(x) -> logits of P(b_k = 1 | x) for the K known individuals.  Layers
(Table 2a, |Q| = 5000, K = 800): Linear(5000, 3400)-BN-ReLU, Linear(3400, 2000),
Linear(2000, 800)-sigmoid; widths scale with |Q| (:func:`attacker_widths`).

The attacker adds, by default, a *population-informed linear head*: a Linear(|Q|, K) layer
initialised at the ridge inversion of the release, b_hat = theta + W (x - A theta) with
A = Z^T / n and W = (A^T A + lam I)^-1 A^T (a least-squares reconstruction in the sense of
Dinur & Nissim 2003), summed with the paper's MLP whose last layer starts at zero.  The
attacker is tied to the known population exactly as the paper's is (one output per known
individual), and its cross-entropy training is unchanged; the head only removes the failure
mode where a budget-limited network is a far weaker attacker than a textbook inversion.
``init="paper"`` gives the plain paper network.

Releases that lie on the candidates' affine hull t + span(V) (a defender whose every output is in the row space
of the centred candidates, ``DefenderSpec.row_space_output``) can be read in their r <= K - 1 row-space
coordinates c = V^T (x - t) instead of their |Q| values (:meth:`Attacker.read_coordinates`; the geometry of
:mod:`bngp.data.geometry`): every such release is t + V c up to clipping, so the coordinates keep what x holds
while H's input, widths and head scale with r (``AttackerSpec.release_width`` records the width read).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Literal, get_args

import numpy as np
import torch
from torch import nn

from bngp.errors import InputError
from .inversion import population_inverse
from bngp.linear import LinearFit, affine_calibration, logistic_calibration

__all__ = [
    "AttackerSpec",
    "Attacker",
    "attacker_widths",
    "ridge_inversion",
    "block_inversion_head",
    "restricted_to_hull",
    "INVERSION_GAIN",
    "ATTACKER_INITS",
    "AttackerInit",
]


def attacker_widths(n_outputs: int) -> tuple[int, int]:
    """Hidden widths of H scaled from App. L.8 Table 2a (5000 -> 3400 -> 2000 -> 800), capped at
    the paper's 3400 and 2000.

    The cap keeps wider releases (compositions of several mechanisms, App. L.6: 5 x 5000
    outputs; whole-chromosome panels) trainable on a CPU: uncapped, a 25,000-output release
    would need a 600M-parameter attacker.  The population-informed linear head sees every
    output whatever the widths, so the attacker stays at least the linear attack.
    """
    return (max(32, min(3400, math.ceil(n_outputs * 3400 / 5000))),
            max(32, min(2000, math.ceil(n_outputs * 2000 / 5000))))


#: "reconstruction": head = ridge inversion of the known population (no data needed);
#: "shadow-ridge": head = ridge regression fitted on releases simulated against the defense;
#: "paper": the plain network of App. L.8.
AttackerInit = Literal["reconstruction", "shadow-ridge", "paper"]
ATTACKER_INITS: tuple[str, ...] = get_args(AttackerInit)


@dataclass(frozen=True)
class AttackerSpec:
    """Architecture of H: sizes, widths (None = scaled from the paper) and initialisation; ``n_outputs`` is the width
    H reads, the release's or, with ``release_width`` (the release's), its row-space coordinates'
    (:meth:`Attacker.read_coordinates`)."""

    n_outputs: int
    n_individuals: int
    widths: tuple[int, int] | None = None
    init: AttackerInit = "reconstruction"
    release_width: int | None = None

    def __post_init__(self) -> None:
        if self.init not in ATTACKER_INITS:
            raise InputError(f"`attacker init` must be one of {', '.join(ATTACKER_INITS)}, got {self.init!r}.")
        if self.release_width is not None and not 1 <= self.n_outputs < self.release_width:
            raise InputError(f"an attacker reading {self.n_outputs} row-space coordinates of releases of "
                             f"{self.release_width} values needs 1 <= coordinates < values.")

    def resolved_widths(self) -> tuple[int, int]:
        return self.widths or attacker_widths(self.n_outputs)

    def to_dict(self) -> dict:
        data = asdict(self)
        data["widths"] = list(self.resolved_widths())
        return data


def ridge_inversion(
    genotypes: np.ndarray, n_members: float, theta: np.ndarray, ridge: float = 1e-2
) -> tuple[np.ndarray, np.ndarray]:
    """Linear map (W, c) with b_hat = W x + c = theta + W (x - A theta), A = Z^T / n,
    W = (A^T A + lam I)^+ A^T, lam = ``ridge`` * trace(A^T A) / K (:mod:`bngp.attacks.inversion`).

    Returns:
        W of shape (K, |Q|) and c of shape (K,), float64.
    """
    return population_inverse(genotypes, n_members, ridge).linear_map(theta)


#: logit scale of the population-inversion head: logit = INVERSION_GAIN * (b_hat - 1/2).
INVERSION_GAIN = 2.0


def restricted_to_hull(weight: torch.Tensor | np.ndarray, bias: torch.Tensor | np.ndarray, basis: torch.Tensor,
                       target: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """A linear map weight x + bias of releases x (weight (K, |Q|)) as the same map of the row-space coordinates
    c_x = (x - t) V of releases on the affine hull x = t + V c_x: (weight V, bias + weight t), in float64."""
    weight = torch.as_tensor(weight, dtype=torch.float64)
    bias = torch.as_tensor(bias, dtype=torch.float64).to(weight.device)
    return weight @ basis.double().to(weight.device), bias + weight @ target.double().to(weight.device)


def block_inversion_head(
    genotypes: np.ndarray,
    n_members: float,
    theta: np.ndarray,
    releases: torch.Tensor,
    memberships: torch.Tensor,
    reading: tuple[torch.Tensor, torch.Tensor] | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Linear head (weight (K, m|Q|), bias (K,)) combining the ridge inversion of each of the m
    blocks of a composed release, with block weights fitted by logistic regression.  With ``reading`` = (V, t)
    the releases (m = 1) are given as their row-space coordinates (x - t) V (:meth:`Attacker.read_coordinates`)
    and the head maps those: the inversion W x + c on the affine hull t + span(V) is (W V) c_x + (c + W t).

    A composition of m mechanisms that each release the frequencies of the same population
    (section 4.4, Theorem 5; App. L.6's five Gaussian mechanisms) gives m noisy copies x_1..x_m
    of A b (A = Z^T / n).  Each is inverted, b_hat_j = W x_j + c (:func:`ridge_inversion`), and
    the logit of individual k is sum_j a_j g (b_hat_jk - 1/2) + s, g = ``INVERSION_GAIN``, with
    (a_1..a_m, s) the cross-entropy minimisers on the simulated ``releases`` (R, m|Q|) and
    ``memberships`` (R, K), pooled over individuals: the attacker learns how much each block's
    noise lets it trust that block.  m = 1 is the recalibrated reconstruction attack.
    """
    w, c = (torch.as_tensor(a, dtype=torch.float64).to(releases.device) for a in ridge_inversion(genotypes, n_members, theta))
    if reading is not None:
        w, c = restricted_to_hull(w, c, *reading)
    n_attributes = w.shape[1]
    if releases.shape[1] % n_attributes:
        raise InputError(f"a release of {releases.shape[1]} outputs is not made of blocks of {n_attributes} frequencies.")
    n_blocks = releases.shape[1] // n_attributes
    blocks = releases.to(torch.float64).reshape(releases.shape[0], n_blocks, n_attributes)
    features = INVERSION_GAIN * (blocks @ w.T + c - 0.5)  # (R, m, K)
    params = logistic_calibration(features.transpose(1, 2).reshape(-1, n_blocks), memberships.reshape(-1))
    scales, shift = params[:-1], params[-1]
    weight = torch.cat([INVERSION_GAIN * scale * w for scale in scales], dim=1)
    bias = INVERSION_GAIN * scales.sum() * (c - 0.5) + shift
    return weight, bias


class Attacker(nn.Module):
    """H(x) -> membership logits for the K known individuals (App. L.8 Table 2a, scaled).

    ``forward`` returns logits; probabilities are ``torch.sigmoid(logits)``.
    """

    def __init__(self, spec: AttackerSpec) -> None:
        super().__init__()
        self.spec = spec
        h1, h2 = spec.resolved_widths()
        self.net = nn.Sequential(
            nn.Linear(spec.n_outputs, h1),
            nn.BatchNorm1d(h1),
            nn.ReLU(),
            nn.Linear(h1, h2),
            nn.Linear(h2, spec.n_individuals),
        )
        self.head = nn.Linear(spec.n_outputs, spec.n_individuals) if spec.init != "paper" else None
        # V (|Q| x r) and t (|Q|) of read_coordinates; set from G's own tensors, so not saved with H's state
        self.register_buffer("read_basis", None, persistent=False)
        self.register_buffer("read_target", None, persistent=False)
        #: how the linear head was warm-started (regularisation path, learning curve), if it was.
        self.warm_start: dict | None = None
        #: the validations of its training by :func:`bngp.attacks.training.train_attacker`, if it was trained.
        self.training_curve: dict | None = None

    def _require_head(self) -> nn.Linear:
        if self.head is None:
            raise InputError("this attacker has no linear head (init='paper').")
        return self.head

    def read_coordinates(self, basis: torch.Tensor, target: torch.Tensor) -> None:
        """Read each release x (|Q| values) as its row-space coordinates (x - t) V (module docstring), V = ``basis``
        (|Q| x r, orthonormal columns) and t = ``target`` (|Q|), the tensors themselves (not copies): H is built
        for them (``AttackerSpec.release_width`` = |Q|, ``n_outputs`` = r)."""
        if self.spec.release_width is None or tuple(basis.shape) != (self.spec.release_width, self.spec.n_outputs) \
                or tuple(target.shape) != (self.spec.release_width,):
            raise InputError(f"this attacker reads {self.spec.n_outputs} values of releases of "
                             f"{self.spec.release_width or self.spec.n_outputs}; got a basis {tuple(basis.shape)} and "
                             f"a target {tuple(target.shape)}.")
        self.read_basis, self.read_target = basis, target

    def read(self, x: torch.Tensor) -> torch.Tensor:
        """What H reads of releases x: x itself, or (x - t) V (:meth:`read_coordinates`); x itself when it is
        already r wide (the coordinates, formed directly)."""
        if self.read_basis is None or x.shape[1] == self.spec.n_outputs:
            return x
        return (x - self.read_target) @ self.read_basis

    def set_linear_head(self, weight: torch.Tensor | np.ndarray, bias: torch.Tensor | np.ndarray) -> None:
        """Set the linear head to logits = weight x + bias and zero the MLP's last layer, so the
        untrained attacker is exactly that linear attack.  Reading coordinates, a map of the whole release
        (weight K x |Q|) is set as the same map on the affine hull: weight V on the coordinates, bias + weight t."""
        head = self._require_head()
        if self.read_basis is not None and weight.shape[1] == self.read_basis.shape[0]:
            weight, bias = restricted_to_hull(weight, bias, self.read_basis, self.read_target)
        with torch.no_grad():
            head.weight.copy_(torch.as_tensor(weight, dtype=torch.float32))
            head.bias.copy_(torch.as_tensor(bias, dtype=torch.float32))
            last = self.net[-1]
            last.weight.zero_()
            last.bias.zero_()

    def initialise_from_population(
        self, genotypes: np.ndarray, n_members: float, theta: np.ndarray, gain: float = INVERSION_GAIN
    ) -> None:
        """Set the linear head to gain * (b_hat - 1/2) with b_hat the ridge inversion, and
        zero the MLP's last layer, so the untrained attacker is the reconstruction attack."""
        self._require_head()
        w, c = ridge_inversion(genotypes, n_members, theta)
        self.set_linear_head(gain * w, gain * (c - 0.5))

    def initialise_from_ridge(self, fit: LinearFit, theta: np.ndarray) -> None:
        """Set the head to the first-order logit of the ridge estimate of E[b | x]:
        logit_k ~ logit(theta_k) + (b_hat_k(x) - theta_k) / (theta_k (1 - theta_k)),
        and zero the MLP's last layer (so the untrained attacker is the shadow ridge attack)."""
        theta_t = torch.as_tensor(np.clip(theta, 1e-6, 1 - 1e-6), dtype=torch.float64).to(fit.weights.device)
        slope = 1.0 / (theta_t * (1 - theta_t))
        weight = (fit.weights * slope).T
        bias = torch.logit(theta_t) + slope * (fit.membership_mean - fit.release_mean @ fit.weights - theta_t)
        self.set_linear_head(weight, bias)

    @torch.no_grad()
    def calibrate_head(self, x: torch.Tensor, b: torch.Tensor) -> None:
        """Rescale the linear head to its best affine recalibration a * logit + c (cross-entropy on
        (x, b), :func:`bngp.linear.affine_calibration`); the MLP's last layer must be zero (as after
        :meth:`set_linear_head`).  A first-order logit of a heavily penalised ridge map ranks
        members well but is far from calibrated; recalibrated, its cross-entropy is at its best."""
        head = self._require_head()
        was_training = self.training
        self.eval()
        scale, shift = affine_calibration(self(x.to(head.weight.dtype)).double(), b.double())
        head.weight.mul_(scale)
        head.bias.mul_(scale).add_(shift)
        self.train(was_training)

    def refit_parameters(self) -> list[nn.Parameter]:
        """The parameters :meth:`initialise_from_ridge` overwrites (head and the MLP's last layer)."""
        if self.head is None:
            return []
        return [self.head.weight, self.head.bias, self.net[-1].weight, self.net[-1].bias]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.head is not None and not self.training and not torch.is_grad_enabled() and self._mlp_is_silent():
            # the MLP's output is exactly 0 (its last layer is, as after a refit: set_linear_head), so
            # the logits are the head's, the same values (0 + y = y) without the MLP's products (most
            # of the FLOPs).  Only without autograd (the last layer's gradient
            # needs the hidden activations) and in eval mode (training BatchNorm updates its statistics).
            return self.head(self.read(x))
        x = self.read(x)
        logits = self.net(x)
        if self.head is not None:
            logits = logits + self.head(x)
        return logits

    def _mlp_is_silent(self) -> bool:
        """Whether the MLP's last layer (weight and bias) is exactly zero."""
        last = self.net[-1]
        return not (bool(last.weight.any()) or bool(last.bias.any()))
