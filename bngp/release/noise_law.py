"""Description of a defense's additive noise law, as data an attacker may be given.

The optimal (Neyman-Pearson) LRT (:class:`bngp.attacks.lrt.OptimalLRT`) assumes the attacker knows
the law of xi; defenses that have a closed-form law expose it as a :class:`NoiseLaw`.
"""

from __future__ import annotations

from dataclasses import dataclass

from bngp.errors import InputError

__all__ = ["NoiseLaw", "NOISE_KINDS"]

NOISE_KINDS = ("none", "laplace", "gaussian", "linf")


@dataclass(frozen=True)
class NoiseLaw:
    """Additive i.i.d.-per-coordinate (or K-norm) noise law.

    Attributes:
        kind: "none", "laplace" (scale b: density exp(-|z|/b)/2b), "gaussian" (sigma), or
            "linf" (L-inf K-norm mechanism, density proportional to exp(-||z||_inf / scale)).
        scale: b, sigma, or Delta_inf/eps respectively (0 for "none").
    """

    kind: str
    scale: float = 0.0

    def __post_init__(self) -> None:
        if self.kind not in NOISE_KINDS:
            raise InputError(f"`kind` must be one of {', '.join(NOISE_KINDS)}, got {self.kind!r}.")
        if not (self.scale >= 0):
            raise InputError(f"`scale` must be >= 0, got {self.scale}.")
