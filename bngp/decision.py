"""The release decision a data steward reads: how much a release costs in utility, how much it reveals,
how it compares with the simple mechanisms at the same cost, and a plain verdict.

For a defense (any mechanism releasing x for a dataset D of ``n_members`` of the population):

- its utility loss is one measurement, :meth:`bngp.defenses.budget.BudgetSetting.measured_loss`
  (mean |x - f(D)| over one release per each of the fixed calibration memberships), the same number
  ``bngp train`` and ``bngp evaluate`` report, checked against a utility budget when one is given
  (met within :data:`BUDGET_TOLERANCE`, as in training);
- its privacy is read twice: by the strongest attack of an evaluation (when one was run) and by the
  converged linear attack of :func:`bngp.references.linear_attack_score` (ridge and whitened maps from
  release to membership, shadow releases doubled until the validation AUC levels off, the penalty chosen
  on validation over the whole spectrum);
- the comparison mechanisms are calibrated to the same loss and read by the same converged linear
  attack (:func:`bngp.references.rank_references`): Laplace and Gaussian noise on f(D) (with their eps),
  the best reference mechanism (shrinkage towards the data-independent release f(theta) plus noise,
  per-attribute shrinkage and noise against the linear-Gaussian decoder, suppression of the most
  revealing attributes, and where K - 1 < |Q| noise shaped to the candidates' row space,
  :mod:`bngp.defenses.shaped`) and, there, Gaussian noise in the row space; f(theta) itself has loss L0 and reveals nothing (AUC 1/2 by construction,
  arXiv:2410.07414 section 3.3).

The verdict, in this order: ``data-independent`` (loss within 1% of L0 and no attack above chance),
``dominated`` (loss at or above L0: f(theta) is as useful and reveals nothing), ``fully-revealing``
(strongest AUC >= :data:`FULLY_REVEALING_AUC`), ``exact`` (loss below :data:`EXACT_FRACTION` of L0: the
statistics f(D) themselves, which no mechanism at that loss can improve on), ``worse-than-laplace`` (the linear attack reads it more
than :data:`DECISION_TOLERANCE` above Laplace at the same loss), ``behind-reference`` (the same against
the best reference), else ``on-frontier``.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass

from bngp.data.population import Population
from bngp.defenses.base import Defense
from bngp.errors import InsufficientMemoryError
from bngp.defenses.budget import BudgetSetting, UtilityBudget
from bngp.game.config import BUDGET_TOLERANCE
from bngp.data.geometry import THREAT_MODEL, shaping_applies
from bngp.references import SHAPED_GAUSSIAN, ReferenceRanking, check_linear_attack_memory, linear_attack_score, \
    rank_references
from bngp.defenses.shaped import ProjectedDefense, ShapedNoiseDefense
from bngp.reading import reads_in_coordinates
from bngp.report import decision_markdown
from bngp.rng import named_seeds

__all__ = ["DECISION_TOLERANCE", "EXACT_FRACTION", "FULLY_REVEALING_AUC", "VERDICTS", "AttackReading", "DecisionRow",
           "ReleaseDecision", "check_decision_memory", "decide_release", "strongest_of_evaluation", "verdict", "frontier_verdict"]

#: AUC differences of the converged linear attack below this are not read as a difference between mechanisms.
DECISION_TOLERANCE = 0.005
#: a strongest-attack AUC at or above this is "fully revealing".
FULLY_REVEALING_AUC = 0.99
#: the AUC margin above 1/2 within which a release at loss L0 is read as the data-independent release.
_CHANCE_MARGIN = 0.02
#: a loss below this fraction of L0 is read as the exact release f(D): no mechanism is calibrated to it.
EXACT_FRACTION = 1e-3

#: verdict -> the sentence a report prints.
VERDICTS = {
    "data-independent": "the data-independent release: it reveals nothing and keeps none of the dataset's own signal",
    "dominated": "dominated by the data-independent release: f(theta) is at least as useful and reveals nothing",
    "fully-revealing": "fully revealing: the strongest attack reads membership almost perfectly",
    "exact": "the exact statistics f(D): without noise, it reveals what the data reveal",
    "worse-than-laplace": "worse than Laplace noise at the same error",
    "behind-reference": "behind the best reference mechanism at the same error",
    "on-frontier": "on the frontier: as private as the best reference mechanism at the same error",
}


@dataclass(frozen=True)
class AttackReading:
    """How one attack reads a release: AUC and TPR at 1% and 0.1% FPR."""

    name: str
    auc: float
    tpr_at_1pct: float
    tpr_at_01pct: float

    def to_dict(self) -> dict:
        return {"name": self.name, "auc": self.auc, "tpr_at_1pct_fpr": self.tpr_at_1pct,
                "tpr_at_0.1pct_fpr": self.tpr_at_01pct}


@dataclass(frozen=True)
class DecisionRow:
    """One mechanism of the comparison: its loss, how the converged linear attack reads it, and its eps
    (Laplace: eps-DP; Gaussian: (eps, 1e-5)-DP; None without a guarantee)."""

    label: str
    loss: float
    auc: float
    tpr_at_1pct: float
    tpr_at_01pct: float
    epsilon: float | None = None

    def to_dict(self) -> dict:
        return {"label": self.label, "loss": self.loss, "auc": self.auc, "tpr_at_1pct_fpr": self.tpr_at_1pct,
                "tpr_at_0.1pct_fpr": self.tpr_at_01pct, "epsilon": self.epsilon}


@dataclass(frozen=True)
class ReleaseDecision:
    """The decision for one release (module docstring).

    Attributes:
        verdict: a key of :data:`VERDICTS`.
        utility_loss: the measured loss mean |x - f(D)|; data_independent_loss: L0, the loss of f(theta).
        budget: the utility budget checked (None without one); budget_met: whether the loss meets it.
        strongest: the strongest reading of the release (the evaluation's strongest attack or the converged
            linear attack, whichever reads a higher AUC).
        rows: this release, matched Laplace and Gaussian, the best reference and f(theta), each read by the
            converged linear attack (the reference rows are absent when the loss is below
            :data:`EXACT_FRACTION` of L0, the exact release, or at least L0).
        best_reference: the label of the best reference row, if any.
        seed: the seed of the comparison's releases and fits.
        threat_model: :data:`bngp.data.geometry.THREAT_MODEL` when a mechanism compared (or the release) shapes
            its noise to the population, else None.
        left_out: why references are missing from the comparison (memory, :attr:`ReferenceRanking.skipped`), else
            None.
    """

    verdict: str
    utility_loss: float
    data_independent_loss: float
    budget: float | None
    budget_met: bool | None
    strongest: AttackReading
    rows: tuple[DecisionRow, ...]
    best_reference: str | None
    seed: int
    threat_model: str | None = None
    left_out: str | None = None

    @property
    def sentence(self) -> str:
        text = VERDICTS[self.verdict]
        if self.verdict == "behind-reference" and self.best_reference:
            text += f" ({self.best_reference})"
        return text

    def to_dict(self) -> dict:
        return {"verdict": self.verdict, "sentence": self.sentence, "utility_loss": self.utility_loss,
                "data_independent_loss": self.data_independent_loss, "budget": self.budget,
                "budget_met": self.budget_met, "strongest": self.strongest.to_dict(),
                "rows": [row.to_dict() for row in self.rows], "best_reference": self.best_reference,
                "seed": self.seed, "tolerance": DECISION_TOLERANCE, "threat_model": self.threat_model,
                "left_out": self.left_out}

    def summary_lines(self) -> list[str]:
        """The plain-text lines a command prints last."""
        lines = [f"decision: {self.sentence}.", f"  utility loss {self.utility_loss:.5g} (data-independent release "
                 f"{self.data_independent_loss:.5g}){self._budget_text()}",
                 f"  strongest attack {self.strongest.name}: AUC {self.strongest.auc:.4f}, TPR {self.strongest.tpr_at_1pct:.3f} "
                 f"at 1% FPR, {self.strongest.tpr_at_01pct:.3f} at 0.1% FPR"]
        for row in self.rows[1:]:
            epsilon = "" if row.epsilon is None else f", eps {row.epsilon:.3g}"
            lines.append(f"  {row.label}: linear-attack AUC {row.auc:.4f}, TPR {row.tpr_at_1pct:.3f} at 1% FPR{epsilon}")
        if self.left_out:
            lines.append(f"  references left out: {self.left_out}")
        if self.threat_model:
            lines.append(f"  threat model: {self.threat_model}")
        return lines

    def markdown_lines(self) -> list[str]:
        """The decision block that opens a report (:func:`bngp.report.decision_markdown`)."""
        return decision_markdown(self.to_dict())

    def _budget_text(self) -> str:
        if self.budget is None:
            return ""
        state = "met" if self.budget_met else "NOT met"
        return f"; utility budget {self.budget:.5g}: {state}"


def strongest_of_evaluation(payload: dict) -> AttackReading:
    """The strongest attack of an EVAL.json payload (:meth:`bngp.evaluate.EvaluationResult.to_dict`)."""
    name = payload["strongest_attack"]["name"]
    entry = payload["attacks"][name]
    return AttackReading(name, float(entry["auc"]), float(entry["tpr_at_fpr"]["0.01"]),
                         float(entry["tpr_at_fpr"]["0.001"]))


def check_decision_memory(population: Population, composition: int = 1, defense: Defense | None = None) -> None:
    """Refuse, before any work, a decision whose converged linear attack on releases of ``composition``
    copies of |Q| values would not fit in the available memory
    (:func:`bngp.references.check_linear_attack_memory`), with the command line's way around it.  The release of
    ``defense`` is read in the row-space coordinates where it would be (:func:`bngp.reading.reads_in_coordinates`),
    and then so are the references (those read whole are left out where they would not fit,
    :func:`bngp.references.rank_references`)."""
    coordinates = defense is not None and reads_in_coordinates(defense, population)
    check_linear_attack_memory(population, composition, "; pass --no-decision to skip the release decision",
                               coordinates=coordinates)


def decide_release(population: Population, n_members: int, defense: Defense, *,
                   strongest: AttackReading | None = None, budget: UtilityBudget | None = None, seed: int = 0,
                   setting: BudgetSetting | None = None, ranking: ReferenceRanking | None = None,
                   loss: float | None = None, progress: bool = False) -> ReleaseDecision:
    """The decision for ``defense`` (module docstring).

    Args:
        strongest: the strongest attack of an evaluation of the same defense, if one was run.
        budget: a utility budget to check the loss against.
        seed: the seed of the comparison (the defense's own linear attack and the references get streams of it).
        setting: a :class:`BudgetSetting` of (population, n_members) already built.
        ranking: references already ranked at this loss (a budget-trained defender's start), reused as they are.
        loss: the defense's loss by ``setting.measured_loss`` when the caller has measured it already.
        progress: a line on stderr per mechanism read.
    """
    setting = setting or BudgetSetting.of(population, n_members)
    loss = setting.measured_loss(defense) if loss is None else loss
    baseline = setting.data_independent_loss
    streams = named_seeds(seed, ("release", "references"))
    space = None
    if shaping_applies(population):  # the geometry the references use, built once
        try:
            space = setting.space
        except InsufficientMemoryError:
            pass
    own = linear_attack_score(defense, population, n_members, streams["release"], space=space)
    if progress:
        print(f"[decision] this release: linear-attack AUC {own.auc:.4f}", file=sys.stderr, flush=True)
    reading = AttackReading("linear (converged)", own.auc, own.tpr_at_1pct, own.tpr_at_01pct)
    if strongest is None or reading.auc > strongest.auc:
        strongest = reading
    rows = [DecisionRow("this release", loss, own.auc, own.tpr_at_1pct, own.tpr_at_01pct, _epsilon_of(defense))]
    best_label = None
    if EXACT_FRACTION * baseline <= loss < baseline:
        if ranking is None:
            ranking = rank_references(population, n_members, loss, seed=streams["references"], setting=setting,
                                      progress=progress)
        scores = {score.label: score for score in ranking.scores}
        for label, name in (("laplace", "Laplace noise"), ("gaussian", "Gaussian noise")):
            score = scores[label]
            rows.append(DecisionRow(f"{name} (matched)", score.loss, score.auc, score.tpr_at_1pct, score.tpr_at_01pct,
                                    score.epsilon))
        best = ranking.best_score
        best_label = best.label
        rows.append(DecisionRow(f"best reference: {best.label}", best.loss, best.auc, best.tpr_at_1pct,
                                best.tpr_at_01pct, best.epsilon))
        shaped = scores.get(SHAPED_GAUSSIAN)
        if shaped is not None:
            rows.append(DecisionRow("Gaussian noise in the population's row space (matched)", shaped.loss, shaped.auc,
                                    shaped.tpr_at_1pct, shaped.tpr_at_01pct, shaped.epsilon))
    rows.append(DecisionRow("data-independent release f(theta)", baseline, 0.5, 0.01, 0.001))
    met = None if budget is None else bool(loss <= budget.value * (1 + BUDGET_TOLERANCE) + 1e-12)
    shaping = (shaping_applies(population) and best_label is not None) or isinstance(defense, (ShapedNoiseDefense,
                                                                                               ProjectedDefense))
    return ReleaseDecision(verdict(loss, baseline, strongest, rows), loss, baseline, None if budget is None else budget.value, met, strongest,
                           tuple(rows), best_label, seed, THREAT_MODEL if shaping else None,
                           ranking.skipped if ranking is not None else None)


def verdict(loss: float, baseline: float, strongest: AttackReading, rows: list[DecisionRow] | tuple[DecisionRow, ...]) -> str:
    """The verdict of the module docstring for a release of loss ``loss`` (L0 = ``baseline``) read at best by
    ``strongest``; ``rows`` as in :class:`ReleaseDecision` (this release, then, when calibrated, matched Laplace,
    matched Gaussian and the best reference, each read by the converged linear attack; f(theta) last)."""
    if loss >= baseline * 0.99:
        near = abs(loss - baseline) <= 0.01 * baseline
        return "data-independent" if near and strongest.auc <= 0.5 + _CHANCE_MARGIN else "dominated"
    if strongest.auc >= FULLY_REVEALING_AUC:
        return "fully-revealing"
    if loss < EXACT_FRACTION * baseline:
        return "exact"
    if len(rows) > 2:
        own, laplace, best = rows[0].auc, rows[1].auc, rows[3].auc
        if own > laplace + DECISION_TOLERANCE:
            return "worse-than-laplace"
        if own > best + DECISION_TOLERANCE:
            return "behind-reference"
    return "on-frontier"


def _epsilon_of(defense: Defense) -> float | None:
    """The defense's stated eps, when it states a finite one."""
    guarantee = defense.guarantee
    return float(guarantee.epsilon) if guarantee is not None and math.isfinite(guarantee.epsilon) else None


def frontier_verdict(loss: float, auc: float, baseline: float, others: list[tuple[str, float, float]]) -> tuple[str, str | None]:
    """The verdict of a release among the mechanisms of a sweep or frontier (``others``: (label, loss, strongest
    AUC) of the other releases of the same population, each attacked the same way): ``data-independent`` and
    ``dominated`` as in :func:`verdict`; ``fully-revealing``; ``exact``; ``worse-than-laplace`` when a Laplace release
    (label starting with "laplace" or "budget-laplace") of no larger loss reads lower by more than
    :data:`DECISION_TOLERANCE`; ``behind-reference`` when any other release of no larger loss does (returned
    with its label); else ``on-frontier`` (the lower envelope of AUC against loss, Pareto order)."""
    if loss >= baseline * 0.99:
        near = abs(loss - baseline) <= 0.01 * baseline
        return ("data-independent" if near and auc <= 0.5 + _CHANCE_MARGIN else "dominated"), None
    if auc >= FULLY_REVEALING_AUC:
        return "fully-revealing", None
    if loss < EXACT_FRACTION * baseline:
        return "exact", None
    better = [(label, other_auc) for label, other_loss, other_auc in others
              if other_loss <= loss * (1 + BUDGET_TOLERANCE) and other_auc < auc - DECISION_TOLERANCE]
    laplace = [label for label, _ in better if label.startswith(("laplace", "budget-laplace"))]
    if laplace:
        return "worse-than-laplace", laplace[0]
    if better:
        return "behind-reference", min(better, key=lambda item: item[1])[0]
    return "on-frontier", None
