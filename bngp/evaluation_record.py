"""The record of an attack x defense evaluation (EVAL.json, format ``bngp-evaluation-1``).

:class:`AttackResult` is one attack's metrics and description; :class:`EvaluationResult` holds
every attack's record and scores against one defense (arXiv:2410.07414, section 5 and App. L.9:
the AUC over independent releases, TPR at low FPR, membership advantage, and the BGP risk of an
attacker that outputs posterior log-odds).  ``to_dict`` writes the JSON payload and
``from_dict`` reads one back, of this format or of one written before formats were named
(:func:`check_evaluation_format`); :func:`bngp.evaluate.evaluate_defense` builds the records.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from bngp.errors import DataFormatError, InputError

__all__ = ["AttackResult", "EvaluationResult", "attack_gap", "check_evaluation_format", "ANALYTIC_ATTACKS", "EVALUATION_FORMAT",
           "EVALUATION_FORMAT_VERSION"]

#: attacks computed in closed form from the release (their best is compared with the Bayesian attacker).
ANALYTIC_ATTACKS = ("lrt", "adaptive-lrt", "optimal-lrt", "score", "homer", "reconstruction")

#: the ``format`` of an EVAL.json record, named as bngp's other files are ("bngp-run-1",
#: "bngp-sweep-1"): ``bngp-evaluation-N``, N raised whenever a reader of N - 1 could not read it.
EVALUATION_FORMAT_VERSION = 1
EVALUATION_FORMAT = f"bngp-evaluation-{EVALUATION_FORMAT_VERSION}"
_FORMAT_PATTERN = re.compile(r"bngp-evaluation-([0-9]+)")

#: the fields of :class:`AttackResult` that are always written, in the payload's order.
_REQUIRED = ("auc", "auc_std", "auc_per_release", "tpr_at_fpr", "advantage", "bayes_weighted_advantage", "gamma",
             "knowledge", "seconds", "orientation", "raw_auc")
#: the fields written only when set (not None), in the payload's order.
_OPTIONAL = ("bgp_risk", "prior_entropy", "fit", "learning_curve", "pooling", "whole_release", "training",
             "training_curve", "weights", "release_view", "reading", "orientation_note")


@dataclass(frozen=True)
class AttackResult:
    """One attack's record in an evaluation.

    Attributes:
        auc, auc_std, auc_per_release: the AUC of each evaluation release, their mean and sample
            standard deviation (:func:`bngp.metrics.membership_metrics`).
        tpr_at_fpr: the TPR pooled over releases at each false-positive rate (keys ``"0.1"``,
            ``"0.01"``, ``"0.001"``).
        advantage, bayes_weighted_advantage, gamma: the membership advantage max(TPR - FPR) and
            its Bayes-weighted form at prior weight ``gamma``.
        knowledge: the attack's knowledge statement.
        seconds: the attack's own fit and scoring time.
        orientation: +1 when the attack's raw statistic is used as is, -1 when flipped.
        raw_auc: the AUC of the raw statistic's direction (the paper's reading).
        bgp_risk, prior_entropy: for an attack whose scores are posterior log-odds, the held-out
            cross-entropy of sigmoid(score) in nats per individual, next to the prior's entropy.
        fit, learning_curve, pooling, whole_release, training, training_curve, weights,
            release_view, reading: the attack's description (``Attack.describe()``) where it has them:
            the closed-form fit and its learning curve, the pooling of a composed release's copies,
            the whole-release map, the network's training settings and curve, the stacking
            weights, the view of a composed release it reads, and what a linear fit read of the
            releases (the candidates' row-space coordinates).
        orientation_note: why the raw statistic was flipped, when it was.
    """

    auc: float
    auc_std: float
    auc_per_release: tuple[float, ...]
    tpr_at_fpr: dict[str, float]
    advantage: float
    bayes_weighted_advantage: float
    gamma: float
    knowledge: str
    seconds: float
    orientation: int
    raw_auc: float
    bgp_risk: float | None = None
    prior_entropy: float | None = None
    fit: dict | None = None
    learning_curve: dict | None = None
    pooling: dict | None = None
    whole_release: dict | None = None
    training: dict | None = None
    training_curve: dict | None = None
    weights: dict[str, float] | None = None
    release_view: str | None = None
    reading: str | None = None
    orientation_note: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "auc_per_release", tuple(self.auc_per_release))

    def to_dict(self) -> dict:
        """The attack's entry of EVAL.json's ``attacks`` (a fresh copy): the fields always written,
        then those that are set."""
        entry = {name: getattr(self, name) for name in _REQUIRED}
        entry["auc_per_release"] = list(self.auc_per_release)
        entry.update({name: getattr(self, name) for name in _OPTIONAL if getattr(self, name) is not None})
        return copy.deepcopy(entry)

    @classmethod
    def from_dict(cls, entry: dict) -> "AttackResult":
        """The record of an entry of EVAL.json's ``attacks`` (:meth:`to_dict`); keys it does not
        know are left out, a missing required key raises :class:`DataFormatError`."""
        missing = [name for name in _REQUIRED if name not in entry]
        if missing:
            raise DataFormatError(f"an attack's evaluation record lacks {', '.join(missing)}.")
        return cls(**{name: entry[name] for name in (*_REQUIRED, *_OPTIONAL) if name in entry})


@dataclass(frozen=True, eq=False)
class EvaluationResult:
    """Scores and records of every attack against one defense (the EVAL.json record).

    Frozen: :func:`bngp.evaluate.evaluate_defense` builds it once, complete.  Compared by identity
    (it holds arrays); compare ``to_dict()`` payloads instead.

    Attributes:
        defense: the defense's description (``Defense.describe()``), with
            ``weighted_utility_loss`` when per-attribute weights kappa were given.
        utility_loss: mean |x - f(D)| over releases and attributes.
        labels: memberships b of the evaluation releases, (R, K) int8.
        scores: every attack's scores, (R, K) each, higher = more likely member.
        attacks: every attack's :class:`AttackResult`, in the order the attacks were given.
        seed: the evaluation seed.
        releases: R.
        utility: :func:`bngp.evaluate.utility_record` of the releases.
        notes: warnings about the result (an analytic attack beating the Bayesian attacker).
        device: where the attacks that train a network ran, ``"cpu"`` or ``"cuda:0"``.
        workers: the processes that fitted the attacks (2: with a helper process).
    """

    defense: dict
    utility_loss: float
    labels: np.ndarray
    scores: dict[str, np.ndarray]
    attacks: dict[str, AttackResult]
    seed: int
    releases: int
    utility: dict = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    device: str = "cpu"
    workers: int = 1

    def __post_init__(self) -> None:
        object.__setattr__(self, "notes", tuple(self.notes))
        if set(self.scores) != set(self.attacks):
            raise InputError("`scores` and `attacks` of an evaluation must name the same attacks.")
        shape = np.shape(self.labels)
        if len(shape) != 2 or shape[0] != self.releases:
            raise InputError(f"`labels` must have shape (releases = {self.releases}, K), got {shape}.")
        for name, scores in self.scores.items():
            if np.shape(scores) != shape:
                raise InputError(f"`scores` of `{name}` must have the labels' shape {shape}, got {np.shape(scores)}.")

    @property
    def strongest_attack(self) -> str:
        """The attack with the highest mean AUC."""
        return max(self.attacks, key=lambda name: self.attacks[name].auc)

    def to_dict(self) -> dict:
        """The EVAL.json payload, its ``format`` (:data:`EVALUATION_FORMAT`) first (a fresh copy:
        editing it leaves the record unchanged)."""
        strongest = self.strongest_attack
        payload = {
            "format": EVALUATION_FORMAT,
            "defense": self.defense,
            "utility_loss": self.utility_loss,
            "utility": self.utility,
            "releases": self.releases,
            "seed": self.seed,
            "device": self.device,
            "workers": self.workers,
            "attacks": {name: result.to_dict() for name, result in self.attacks.items()},
            "strongest_attack": {"name": strongest, "auc": self.attacks[strongest].auc},
            "notes": list(self.notes),
        }
        gap = attack_gap(self.attacks)
        if gap is not None:
            payload["attack_gap"] = {"best_analytic": gap[0], "gap": gap[1]}
        return copy.deepcopy(payload)

    @classmethod
    def from_dict(cls, payload: dict, labels: np.ndarray, scores: dict[str, np.ndarray]) -> "EvaluationResult":
        """The record of an EVAL.json ``payload`` that :func:`check_evaluation_format` accepts, with
        the ``labels`` and ``scores`` stored beside it; ``workers`` is 1 when not recorded."""
        return cls(defense=payload["defense"], utility_loss=payload["utility_loss"], labels=labels, scores=scores,
                   attacks={name: AttackResult.from_dict(entry) for name, entry in payload["attacks"].items()},
                   seed=payload["seed"], releases=payload["releases"], utility=payload["utility"],
                   notes=tuple(payload["notes"]), device=payload["device"], workers=payload.get("workers", 1))


def attack_gap(attacks: dict[str, AttackResult]) -> tuple[str, float] | None:
    """The best analytic attack of ``attacks`` (:data:`ANALYTIC_ATTACKS`) and its AUC minus the
    Bayesian attacker's, when both were evaluated.  A positive gap means the Bayesian attacker, which
    approximates the posterior, the optimal attack (arXiv:2410.07414, Lemma 3), is under-trained."""
    analytic = [name for name in attacks if name in ANALYTIC_ATTACKS]
    if "bayesian" not in attacks or not analytic:
        return None
    best = max(analytic, key=lambda name: attacks[name].auc)
    return best, attacks[best].auc - attacks["bayesian"].auc


def check_evaluation_format(payload: object, source: str | Path) -> dict:
    """Return ``payload``, an EVAL.json record read from ``source``, if this bngp can read it: its
    ``format`` is :data:`EVALUATION_FORMAT` or absent (a record written before formats were named);
    a newer ``bngp-evaluation-N``, another format or a non-object raises :class:`DataFormatError`."""
    if not isinstance(payload, dict):
        raise DataFormatError(f"{source} is not a bngp evaluation record (a JSON object).")
    written = payload.get("format")
    if written is None or written == EVALUATION_FORMAT:
        return payload
    match = _FORMAT_PATTERN.fullmatch(str(written))
    if match is not None and int(match.group(1)) > EVALUATION_FORMAT_VERSION:
        raise DataFormatError(f"{source} is an evaluation of format {written}, newer than this bngp reads "
                              f"({EVALUATION_FORMAT}); upgrade bngp to read it.")
    raise DataFormatError(f"{source} is not a bngp evaluation record (format {written!r}).")
