"""The record of an end-to-end mechanism audit (the AUDIT.json payload).

Every audit of a release mechanism reports, next to its bound, what it was compared with and
how it was obtained: the defense's claimed guarantee, the attack and its knowledge statement,
the experimental design (canaries, dataset size, neighbouring relation, runs), the bound's
statistical method (the :mod:`bngp.audit` result records) and the seeds that replay it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from bngp.audit.results import to_jsonable
from bngp.errors import InputError
from bngp.defenses.base import Defense

__all__ = ["MODES", "NEIGHBOURING", "MechanismAuditResult", "claimed_guarantee", "resolve_neighbouring"]

#: audit modes of :func:`bngp.mechanism_audit.audit_mechanism` and ``bngp audit-mechanism --mode``.
MODES = ("one-run", "many-run", "panoramia")
#: neighbouring relations a canary audit can follow ("auto": the defense's own).
NEIGHBOURING = ("auto", "replace", "add-remove")


def claimed_guarantee(defense: Defense) -> dict[str, Any] | None:
    """The defense's formal guarantee as a dict, or None when it claims none (or eps = inf).

    For a defense that perturbs c > 1 copies of f(D) (arXiv:2410.07414, App. L.6) the claim is
    one on the whole release, with the sensitivity of the concatenated statistic
    (:func:`bngp.defenses.sensitivity.composed_sensitivity`); ``composition`` = c is added.
    """
    guarantee = defense.guarantee
    if guarantee is None or not math.isfinite(guarantee.epsilon):
        return None
    claim = guarantee.to_dict()
    composition = int(getattr(defense, "composition", 1))
    if composition != 1:
        claim["composition"] = composition
    return claim


def resolve_neighbouring(neighbouring: str, defense: Defense) -> str:
    """``"auto"`` becomes the relation of the defense's guarantee, else ``"replace"``.

    ``"replace"`` (datasets of exactly n) is the default because the trained defenders and the
    paper's DP calibration are defined for a fixed dataset size (arXiv:2410.07414, section 2.2).
    """
    if neighbouring not in NEIGHBOURING:
        raise InputError(f"`neighbouring` must be one of {', '.join(NEIGHBOURING)}, got {neighbouring!r}.")
    if neighbouring != "auto":
        return neighbouring
    claim = claimed_guarantee(defense)
    relation = None if claim is None else claim.get("neighbouring")
    return relation if relation in ("replace", "add-remove") else "replace"


@dataclass(frozen=True)
class MechanismAuditResult:
    """An empirical privacy audit of a release mechanism against one defense.

    Attributes:
        mode: ``"one-run"``, ``"many-run"`` or ``"panoramia"``.
        epsilon_lb: the audit's number (a lower bound on eps at ``delta`` when
            ``is_lower_bound``; PANORAMIA's eps_tilde measurement otherwise).  PANORAMIA with
            real non-members reports its companion lower bound here, eps_tilde in ``panoramia``.
        is_lower_bound: whether ``epsilon_lb`` is a statistically valid lower bound.
        interpretation: one sentence saying what ``epsilon_lb`` means.
        confidence: 1 - beta of the whole statement.
        delta: the delta the bound is stated at.
        claimed: the defense's guarantee (``Guarantee.to_dict()``), None if it claims none.
        defense: the defense's description (``Defense.describe()``).
        attack: the attack's description, with its knowledge statement.
        design: the audit's design (individuals, canaries, dataset size, relation, runs).
        method: the statistical method and its result records.
        diagnostics: point estimates that help reading the bound (AUCs, generator fit).
        seed: the audit seed; ``seeds`` derived from it for each independent stream.
        seeds: the derived seeds by purpose.
        device: where an attack that trains a network ran (``"cpu"`` or ``"cuda:0"``).
        panoramia: PANORAMIA only (None otherwise): its two numbers with their meaning,
            ``real_nonmembers`` (the companion's ``epsilon_lb``, a valid lower bound, with its
            audit-set sizes; None without real non-members) and ``generated_nonmembers``
            (``epsilon_tilde``, a measurement that assumes the generator's closeness c = c_lb),
            and ``reported_as_epsilon_lb`` naming the one in ``epsilon_lb``: the lower bound when
            there is one (:mod:`bngp.mechanism_audit.panoramia_genome`).
    """

    mode: str
    epsilon_lb: float
    is_lower_bound: bool
    interpretation: str
    confidence: float
    delta: float
    claimed: dict[str, Any] | None
    defense: dict[str, Any]
    attack: dict[str, Any]
    design: dict[str, Any]
    method: dict[str, Any]
    diagnostics: dict[str, Any]
    seed: int
    seeds: dict[str, int]
    device: str = "cpu"
    panoramia: dict[str, Any] | None = None

    @property
    def claimed_epsilon(self) -> float | None:
        """The eps the defense claims, or None."""
        return None if self.claimed is None else float(self.claimed["epsilon"])

    @property
    def comparable(self) -> bool:
        """Whether a bound above the claim would contradict it.

        True for a lower bound stated at a delta >= the claimed delta ((eps, delta)-DP implies
        (eps, delta')-DP for delta' >= delta) under the claimed neighbouring relation (or a
        claim that names none).
        """
        if self.claimed is None or not self.is_lower_bound:
            return False
        relation = self.claimed.get("neighbouring")
        same_relation = relation is None or relation == self.design.get("neighbouring")
        return same_relation and self.delta >= float(self.claimed.get("delta", 0.0))

    @property
    def exceeds_claim(self) -> bool | None:
        """epsilon_lb > claimed eps (evidence against the claim), None when not comparable."""
        if not self.comparable:
            return None
        return self.epsilon_lb > self.claimed_epsilon

    def to_dict(self) -> dict[str, Any]:
        """The AUDIT.json payload: the bound first, the claim next to it, then the details
        (PANORAMIA: its two numbers, ``panoramia``, right after the interpretation)."""
        payload: dict[str, Any] = {
            "command": "audit-mechanism",
            "mode": self.mode,
            "epsilon_lb": self.epsilon_lb,
            "claimed_epsilon": self.claimed_epsilon,
            "claimed_delta": None if self.claimed is None else self.claimed.get("delta", 0.0),
            "bound_exceeds_claim": self.exceeds_claim,
            "is_lower_bound": self.is_lower_bound,
            "interpretation": self.interpretation,
        }
        if self.panoramia is not None:
            payload["panoramia"] = self.panoramia
        return to_jsonable(
            {
                **payload,
                "confidence": self.confidence,
                "delta": self.delta,
                "claimed_guarantee": self.claimed,
                "defense": self.defense,
                "attack": self.attack,
                "design": self.design,
                "method": self.method,
                "diagnostics": self.diagnostics,
                "seed": self.seed,
                "seeds": self.seeds,
                "device": self.device,
            }
        )
