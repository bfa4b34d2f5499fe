"""Empirical ROC of membership scores: the threshold sweep, AUC, TPR at FPR, advantage.

Convention: member = 1 is the positive class and a higher score
means "member"; a threshold t predicts "member" for every score >= t.  Thresholds are the
distinct observed scores (never a fixed grid, which outliers break) plus "predict nobody".

These are point estimates; the confidence bounds built on the same sweep live in
:mod:`bngp.audit.many_run`.  The sweep itself is the one of :mod:`bngp.metrics`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from bngp.audit.inputs import check_scores_and_labels
from bngp.audit.results import AuditResult
from bngp.errors import InputError
from bngp.metrics import RocCurve, roc_curve, threshold_counts

__all__ = ["RocCurve", "RocSummary", "roc_curve", "roc_summary", "threshold_counts"]


@dataclass(frozen=True)
class RocSummary(AuditResult):
    """Point estimates read off the empirical ROC.

    Attributes:
        auc: area under the ROC (trapezoids at the distinct thresholds = the Mann-Whitney
            statistic with ties counted 1/2).
        advantage: max over thresholds of TPR - FPR (membership advantage, >= 0).
        tpr_at_fpr: for each target FPR, the largest TPR among thresholds with FPR <= target.
        n_members: N1.
        n_nonmembers: N0.
    """

    auc: float
    advantage: float
    tpr_at_fpr: dict[str, float]
    n_members: int
    n_nonmembers: int


def roc_summary(
    scores: np.ndarray,
    members: np.ndarray,
    fpr_targets: Sequence[float] = (0.001, 0.01, 0.1),
) -> RocSummary:
    """AUC, advantage and TPR at fixed FPRs of membership scores (no confidence statement).

    Example:
        >>> s = roc_summary(np.array([3.0, 2.0, 1.0, 0.0]), np.array([1, 1, 0, 0]))
        >>> s.auc, s.advantage
        (1.0, 1.0)
    """
    curve = roc_curve(*check_scores_and_labels(scores, members))
    targets = [float(target) for target in fpr_targets]
    for target in targets:
        if not (0.0 <= target <= 1.0):
            raise InputError(f"`fpr_targets` must lie in [0, 1], got {target}.")
    auc = float(np.sum(np.diff(curve.fpr) * (curve.tpr[1:] + curve.tpr[:-1])) / 2.0)
    advantage = float(np.max(curve.tpr - curve.fpr))
    tpr_at = {f"{target:g}": float(np.max(curve.tpr[curve.fpr <= target])) for target in targets}
    return RocSummary(
        method="empirical ROC",
        confidence=None,
        delta=0.0,
        thresholds_examined=int(curve.thresholds.shape[0]),
        union_bound="none (point estimates)",
        auc=auc,
        advantage=advantage,
        tpr_at_fpr=tpr_at,
        n_members=curve.n_members,
        n_nonmembers=curve.n_nonmembers,
    )
