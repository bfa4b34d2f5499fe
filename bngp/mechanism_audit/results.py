"""The record of an end-to-end mechanism audit (the AUDIT.json payload).

Every audit of a release mechanism reports, next to its bound, what it was compared with and
how it was obtained: the defense's claimed guarantee and the verdict, the largest eps the design
can certify (the same bound on a perfect attack, :mod:`bngp.audit.ceiling`), the attack and its
knowledge statement, the experimental design (canaries, dataset size, neighbouring relation,
runs), the bound's statistical method (the :mod:`bngp.audit` result records) and the seeds that
replay it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from bngp.audit.ceiling import BoundReading, read_bound
from bngp.audit.decision import audit_decision
from bngp.audit.results import to_jsonable
from bngp.errors import InputError
from bngp.defenses.base import Defense

__all__ = ["MECHANISM_AUDIT_FORMAT", "MODES", "NEIGHBOURING", "MechanismAuditResult", "claimed_guarantee",
           "resolve_neighbouring"]

#: the ``format`` of the AUDIT.json of ``bngp audit-mechanism``; the number is its version.
MECHANISM_AUDIT_FORMAT = "bngp-mechanism-audit-1"

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
        epsilon_ceiling: the largest number this design can give: the same bound on the scores of
            a perfect attack (:func:`bngp.audit.perfect_scores`), same canaries, inclusions,
            union bounds and seeds (:mod:`bngp.audit.ceiling`).
        is_lower_bound: whether ``epsilon_lb`` is a statistically valid lower bound.
        interpretation: one sentence saying what ``epsilon_lb`` means.
        confidence: 1 - beta of the whole statement.
        delta: the delta the bound is stated at.
        claimed: the defense's guarantee (``Guarantee.to_dict()``), None if it claims none.
        defense: the defense's description (``Defense.describe()``).
        attack: the attack's description, with its knowledge statement.
        design: the audit's design (individuals, canaries, dataset size, relation, runs).
        method: the statistical method and its result records.
        diagnostics: point estimates that help reading the bound (AUCs, generator fit) and
            ``tradeoff``, the empirical trade-off curve of the scores behind the bound
            (:func:`bngp.audit.empirical_tradeoff`) with ``scores`` saying which they are and
            ``is_test`` whether its region is a valid simultaneous statement (independent runs).
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
    epsilon_ceiling: float
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

    def _incomparable(self) -> str | None:
        """Why a claim cannot be compared with the bound: another neighbouring relation, or a bound
        at a delta below the claim's ((eps, delta)-DP implies (eps, delta')-DP only for delta' >=
        delta); None when it can, or when there is no claim."""
        if self.claimed is None:
            return None
        relation = self.claimed.get("neighbouring")
        if relation is not None and relation != self.design.get("neighbouring"):
            return f"the claim is under the {relation} relation, the audit under {self.design.get('neighbouring')}"
        claimed_delta = float(self.claimed.get("delta", 0.0))
        if self.delta < claimed_delta:
            return f"the claim is stated at delta {claimed_delta:g}, the bound at delta {self.delta:g} below it"
        return None

    @property
    def comparable(self) -> bool:
        """Whether a bound above the claim would contradict it.

        True for a lower bound stated at a delta >= the claimed delta ((eps, delta)-DP implies
        (eps, delta')-DP for delta' >= delta) under the claimed neighbouring relation (or a
        claim that names none).
        """
        return self.claimed is not None and self.is_lower_bound and self._incomparable() is None

    @property
    def exceeds_claim(self) -> bool | None:
        """epsilon_lb > claimed eps (evidence against the claim), None when not comparable."""
        if not self.comparable:
            return None
        return self.epsilon_lb > self.claimed_epsilon

    def _design_words(self) -> tuple[str, str]:
        """(the design in words, how to enlarge it) for the sentences on the ceiling."""
        design = self.design
        if self.mode == "one-run":
            return (f"{design['canaries']} canaries in one release",
                    "more canaries, --canaries: the ceiling grows about ln 2 = 0.69 per doubling of the guesses")
        if self.mode == "many-run":
            return (f"{design['canaries']} canaries x {design['runs']} releases",
                    "more releases, --runs, or more canaries, --canaries")
        if self.panoramia is not None and self.panoramia["real_nonmembers"] is not None:
            return (f"{design['companion_audit_size']} real audit points",
                    "more real non-members, --real-nonmembers (a larger population), and a larger audit set, "
                    "--canaries")
        return f"an audit set of {design['audit_size']}", "a larger audit set, --canaries"

    def reading(self) -> BoundReading:
        """epsilon_lb read against the design's ceiling and the defense's claimed eps
        (:func:`bngp.audit.read_bound`)."""
        kind = "lower bound" if self.is_lower_bound else "estimate"
        words, advice = self._design_words()
        reason = self._incomparable()
        claim: dict[str, Any] = {}
        if reason is not None:
            claim = {"not_comparable": reason}
        elif self.claimed is not None:
            claim = {"claimed_epsilon": self.claimed_epsilon}
        return read_bound(self.epsilon_lb, kind, self.epsilon_ceiling, words, advice, **claim)

    def to_dict(self) -> dict[str, Any]:
        """The AUDIT.json payload (``format`` :data:`MECHANISM_AUDIT_FORMAT`): the bound first, the
        claim and the verdict next to it, the design's ceiling, then the details (PANORAMIA: its two
        numbers, ``panoramia``, right after the interpretation)."""
        reading = self.reading()
        payload: dict[str, Any] = {
            "format": MECHANISM_AUDIT_FORMAT,
            "command": "audit-mechanism",
            "mode": self.mode,
            "epsilon_lb": self.epsilon_lb,
            "claimed_epsilon": self.claimed_epsilon,
            "claimed_delta": None if self.claimed is None else self.claimed.get("delta", 0.0),
            "bound_exceeds_claim": self.exceeds_claim,
            "claim_verdict": reading.claim_verdict,
            "epsilon_ceiling": self.epsilon_ceiling,
            "ceiling_state": reading.ceiling_state,
            "reading": reading.sentence,
            "audit_decision": audit_decision(reading).to_dict(),
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
