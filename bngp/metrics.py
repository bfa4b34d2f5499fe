"""Membership-inference metrics (arXiv:2410.07414, sections 2.3 and 5; App. L.9): the one ROC.

Conventions: labels are 1 for members; scores are higher for "more likely member".
All functions take flat arrays of scores and labels (any shape, flattened) and are
vectorised over every distinct score threshold, so outlier scores never break a grid.

- ROC curve and AUC (Mann-Whitney statistic, ties counted 1/2);
- TPR at a fixed FPR (the largest TPR among thresholds whose FPR <= alpha);
- membership advantage max_t (TPR - FPR) (Yeom et al. 2018);
- (sigma, gamma) Bayes-weighted membership advantage max_t [(1 - gamma) TPR - gamma FPR]
  (paper eq. 3, Proposition 1);
- BGP risk: the held-out cross-entropy of the attacker's probabilities (Lemma 3: the
  minimal expected CEL equals the conditional entropy H(B | X));
- whether an attacker's learning curve (validation AUC by shadow releases) has levelled off.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

from bngp.errors import InputError

__all__ = [
    "RocCurve",
    "roc_curve",
    "threshold_counts",
    "auc",
    "tpr_at_fpr",
    "membership_advantage",
    "bayes_weighted_advantage",
    "bgp_risk",
    "binary_entropy",
    "MembershipMetrics",
    "membership_metrics",
    "release_aucs",
    "clustered_auc_se",
    "clustered_tpr_se",
    "levelled_off",
    "DEFAULT_FPRS",
]

DEFAULT_FPRS = (0.1, 0.01, 0.001)


def _flatten(scores: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    scores = np.asarray(scores, dtype=np.float64).ravel()
    labels = np.asarray(labels).ravel()
    if scores.shape != labels.shape:
        raise InputError(f"`scores` and `labels` must have the same size, got {scores.size} and {labels.size}.")
    if scores.size == 0:
        raise InputError("`scores` must not be empty.")
    if not np.all(np.isfinite(scores)):
        raise InputError("`scores` contains NaN or infinite values.")
    if not np.all((labels == 0) | (labels == 1)):
        raise InputError("`labels` must be 0/1 (member = 1).")
    labels = labels.astype(bool)
    if labels.all() or not labels.any():
        raise InputError("`labels` must contain both members and non-members.")
    return scores, labels


def threshold_counts(scores: np.ndarray, members: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Counts at every distinct threshold, from "predict nobody" down to "predict everyone".

    Args:
        scores: flat float scores (validated).
        members: flat bool labels (validated).

    Returns:
        ``(thresholds, tp, fp)``: ``thresholds[j]`` is the smallest score predicted "member"
        at step j (``+inf`` for step 0), ``tp[j]``/``fp[j]`` the members/non-members with
        score >= thresholds[j].  Length = number of distinct scores + 1.
    """
    order = np.argsort(-scores, kind="stable")
    sorted_scores = scores[order]
    cum_tp = np.concatenate(([0], np.cumsum(members[order], dtype=np.int64)))
    ends = np.concatenate((np.flatnonzero(sorted_scores[1:] != sorted_scores[:-1]) + 1, [scores.shape[0]]))
    positions = np.concatenate(([0], ends))
    tp = cum_tp[positions]
    return np.concatenate(([np.inf], sorted_scores[ends - 1])), tp, positions - tp


@dataclass(frozen=True, eq=False)
class RocCurve:
    """Empirical ROC at every distinct threshold t (descending): FPR and TPR of "score >= t".

    The first point is (0, 0) (threshold +inf) and the last (1, 1).

    Attributes:
        fpr: false-positive rate FP / N0 at each threshold.
        tpr: true-positive rate TP / N1 at each threshold.
        thresholds: score >= threshold predicts "member" (first entry +inf).
        n_members: N1.
        n_nonmembers: N0.
    """

    fpr: np.ndarray
    tpr: np.ndarray
    thresholds: np.ndarray
    n_members: int
    n_nonmembers: int


def roc_curve(scores: np.ndarray, labels: np.ndarray) -> RocCurve:
    """ROC over every distinct score (decide member when score >= threshold).

    Example:
        >>> curve = roc_curve(np.array([0.9, 0.8, 0.1]), np.array([1, 0, 0]))
        >>> curve.tpr.tolist(), curve.fpr.tolist()
        ([0.0, 1.0, 1.0, 1.0], [0.0, 0.0, 0.5, 1.0])
    """
    scores, labels = _flatten(scores, labels)
    thresholds, tp, fp = threshold_counts(scores, labels)
    n1 = int(labels.sum())
    n0 = labels.size - n1
    return RocCurve(fpr=fp / n0, tpr=tp / n1, thresholds=thresholds, n_members=n1, n_nonmembers=n0)


def auc(scores: np.ndarray, labels: np.ndarray) -> float:
    """Area under the ROC curve = P(score_member > score_nonmember) + P(tie)/2."""
    scores, labels = _flatten(scores, labels)
    from scipy.stats import rankdata  # scipy.stats is slow to import: only when used

    ranks = rankdata(scores)
    n_pos = labels.sum()
    n_neg = labels.size - n_pos
    return float((ranks[labels].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def clustered_auc_se(scores: np.ndarray, labels: np.ndarray) -> float:
    """The standard error of the pooled AUC of (R, n) scores whose rows are clusters (one release each: its
    scores share the release's noise), by Obuchowski's clustered form of DeLong's variance (Biometrics 53, 1997,
    eq. 3-5): with the placements V10(p) = P(score_n < score_p) + P(tie) / 2 of every member p over all
    non-members and V01(n) likewise of every non-member over all members, their sums V10_i, V01_i over
    cluster i (m_i members, n_i non-members; M and N in all, I clusters),

        S10 = I / ((I - 1) M) sum_i (V10_i - m_i A)^2,   S01 = I / ((I - 1) N) sum_i (V01_i - n_i A)^2,
        S11 = I / (I - 1) sum_i (V10_i - m_i A)(V01_i - n_i A),   Var A = S10 / M + S01 / N + 2 S11 / (M N).

    Needs at least two rows."""
    from scipy.stats import rankdata

    scores = np.atleast_2d(np.asarray(scores, dtype=np.float64))
    labels = np.atleast_2d(np.asarray(labels)).astype(bool)
    if scores.shape != labels.shape:
        raise InputError(f"`scores` and `labels` must have the same shape, got {scores.shape} and {labels.shape}.")
    if scores.shape[0] < 2:
        raise InputError("the clustered standard error needs at least two releases (rows).")
    if not np.all(np.isfinite(scores)):
        raise InputError("`scores` contains NaN or infinite values.")
    flat, members = scores.ravel(), labels.ravel()
    n_members = int(members.sum())
    n_others = members.size - n_members
    if n_members == 0 or n_others == 0:
        raise InputError("the AUC needs both members and non-members.")
    overall = rankdata(flat)
    within_members = rankdata(flat[members])
    within_others = rankdata(flat[~members])
    # a member's placement: (its rank among all - its rank among members) non-members below it, ties counted 1/2
    placements = np.zeros(flat.size)
    placements[members] = (overall[members] - within_members) / n_others
    placements[~members] = (n_members - (overall[~members] - within_others)) / n_members
    area = float(placements[members].mean())
    rows = np.broadcast_to(np.arange(scores.shape[0])[:, None], scores.shape).ravel()
    count = scores.shape[0]
    member_sums = np.bincount(rows, weights=np.where(members, placements, 0.0), minlength=count)
    other_sums = np.bincount(rows, weights=np.where(members, 0.0, placements), minlength=count)
    member_counts = labels.sum(axis=1)
    other_counts = labels.shape[1] - member_counts
    member_part = member_sums - member_counts * area
    other_part = other_sums - other_counts * area
    factor = count / (count - 1)
    variance = (factor * (member_part @ member_part) / n_members / n_members
                + factor * (other_part @ other_part) / n_others / n_others
                + 2.0 * factor * (member_part @ other_part) / (n_members * n_others))
    return math.sqrt(max(variance, 0.0))


def clustered_tpr_se(scores: np.ndarray, labels: np.ndarray, fpr: float) -> float:
    """The standard error of :func:`tpr_at_fpr` of (R, n) scores whose rows are clusters (releases), at the pooled
    threshold held fixed: the TPR is the ratio of the members above it to the members, sum_i h_i / sum_i m_i over
    releases, whose delta-method variance is I / (I - 1) sum_i (h_i - m_i TPR)^2 / M^2 (the threshold's own
    sampling error is left out: it is set by all R n non-members)."""
    scores = np.atleast_2d(np.asarray(scores, dtype=np.float64))
    labels = np.atleast_2d(np.asarray(labels)).astype(bool)
    if scores.shape != labels.shape or scores.shape[0] < 2:
        raise InputError("the clustered standard error needs scores and labels of one shape, with two releases or more.")
    curve = roc_curve(scores, labels)
    allowed = curve.fpr <= fpr + 1e-12
    index = int(np.flatnonzero(allowed)[np.argmax(curve.tpr[allowed])])
    detected = (scores >= curve.thresholds[index]) & labels
    hits, members = detected.sum(axis=1), labels.sum(axis=1)
    rate = hits.sum() / members.sum()
    count = scores.shape[0]
    return math.sqrt(count / (count - 1) * float(((hits - members * rate) ** 2).sum())) / float(members.sum())


def release_aucs(scores: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """AUC of each release (row) separately, vectorised: (R, n) scores and 0/1 labels -> the AUCs
    of the rows that hold both members and non-members (Mann-Whitney, ties counted 1/2).

    The mean of these is the headline AUC of an evaluation (the paper's AUC over releases,
    App. L.9): each release is one dataset whose members the attacker tries to tell apart.
    """
    scores = np.atleast_2d(np.asarray(scores, dtype=np.float64))
    labels = np.atleast_2d(np.asarray(labels))
    if scores.shape != labels.shape:
        raise InputError(f"`scores` and `labels` must have the same shape, got {scores.shape} and {labels.shape}.")
    if not np.all(np.isfinite(scores)):
        raise InputError("`scores` contains NaN or infinite values.")
    positives = labels.astype(bool)
    n_pos = positives.sum(axis=1)
    keep = (n_pos > 0) & (n_pos < labels.shape[1])
    if not keep.all():
        scores, positives = scores[keep], positives[keep]
    # the rank sum of the members: one sort per row; a row without ties ranks its sorted entries
    # 1..n, and only rows with ties go through scipy's average ranks (slower); the sorted entries are
    # gathered through flat indices (faster than take_along_axis)
    rows, width = scores.shape
    flat = np.argsort(scores, axis=1)
    flat += (np.arange(rows) * width)[:, None]
    ordered = scores.ravel()[flat]
    rank_sums = positives.ravel()[flat] @ np.arange(1.0, width + 1.0)
    tied = (ordered[:, 1:] == ordered[:, :-1]).any(axis=1)
    if tied.any():
        from scipy.stats import rankdata

        rank_sums[tied] = (rankdata(scores[tied], axis=1) * positives[tied]).sum(axis=1)
    n_pos = n_pos[keep].astype(np.float64)
    n_neg = labels.shape[1] - n_pos
    return (rank_sums - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg)


def tpr_at_fpr(scores: np.ndarray, labels: np.ndarray, fpr: float) -> float:
    """The largest TPR over thresholds whose empirical FPR is <= ``fpr``."""
    if not 0 <= fpr <= 1:
        raise InputError(f"`fpr` must be in [0, 1], got {fpr}.")
    curve = roc_curve(scores, labels)
    return float(curve.tpr[curve.fpr <= fpr + 1e-12].max())


def membership_advantage(scores: np.ndarray, labels: np.ndarray) -> float:
    """max over thresholds of TPR - FPR (>= 0 thanks to the trivial thresholds)."""
    curve = roc_curve(scores, labels)
    return float(np.max(curve.tpr - curve.fpr))


def bayes_weighted_advantage(scores: np.ndarray, labels: np.ndarray, gamma: float = 0.5) -> float:
    """(sigma, gamma)-BWMA, paper eq. (3): max over thresholds of (1-gamma) TPR - gamma FPR."""
    if not 0 < gamma <= 1:
        raise InputError(f"`gamma` must be in (0, 1], got {gamma}.")
    curve = roc_curve(scores, labels)
    return float(np.max((1 - gamma) * curve.tpr - gamma * curve.fpr))


def binary_entropy(p: np.ndarray | float) -> np.ndarray | float:
    """h(p) = -p log p - (1-p) log(1-p) in nats (0 at p in {0, 1})."""
    p = np.asarray(p, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        h = -(np.where(p > 0, p * np.log(p), 0.0) + np.where(p < 1, (1 - p) * np.log1p(-p), 0.0))
    return h if h.ndim else float(h)


def bgp_risk(probabilities: np.ndarray, labels: np.ndarray, eps: float = 1e-7) -> float:
    """Held-out cross-entropy -mean[b log p + (1-b) log(1-p)] per individual (nats).

    By Lemma 3 the minimum over attackers is the conditional entropy H(B|X) per individual;
    a trained attacker's held-out value is an upper estimate of the BGP risk.
    """
    p = np.clip(np.asarray(probabilities, dtype=np.float64).ravel(), eps, 1 - eps)
    b = np.asarray(labels, dtype=np.float64).ravel()
    if p.shape != b.shape:
        raise InputError(f"`probabilities` and `labels` must have the same size, got {p.size} and {b.size}.")
    return float(-np.mean(b * np.log(p) + (1 - b) * np.log1p(-p)))


@dataclass(frozen=True)
class MembershipMetrics:
    """Summary of an attack's scores over R releases x n targets."""

    auc: float
    auc_std: float
    auc_per_release: list[float]
    tpr_at_fpr: dict[str, float]
    advantage: float
    bayes_weighted_advantage: float
    gamma: float

    def to_dict(self) -> dict:
        return asdict(self)


def membership_metrics(
    scores: np.ndarray, labels: np.ndarray, *, fprs: tuple[float, ...] = DEFAULT_FPRS, gamma: float = 0.5
) -> MembershipMetrics:
    """AUC mean and std over releases (rows), pooled TPR at FPR and advantages.

    Args:
        scores: (R, n) attack scores; labels: (R, n) true memberships.
    """
    scores = np.atleast_2d(np.asarray(scores, dtype=np.float64))
    labels = np.atleast_2d(np.asarray(labels))
    if scores.shape != labels.shape:
        raise InputError(f"`scores` and `labels` must have the same shape, got {scores.shape} and {labels.shape}.")
    per_release = release_aucs(scores, labels).tolist()
    if not per_release:
        per_release = [auc(scores, labels)]
    return MembershipMetrics(
        auc=float(np.mean(per_release)),
        auc_std=float(np.std(per_release, ddof=1)) if len(per_release) > 1 else 0.0,
        auc_per_release=[float(v) for v in per_release],
        tpr_at_fpr={f"{alpha:g}": tpr_at_fpr(scores, labels, alpha) for alpha in fprs},
        advantage=membership_advantage(scores, labels),
        bayes_weighted_advantage=bayes_weighted_advantage(scores, labels, gamma),
        gamma=gamma,
    )


def levelled_off(releases: tuple[int, ...] | list[int], auc: tuple[float, ...] | list[float], tolerance: float) -> bool:
    """Whether a learning curve's last step gained less than ``tolerance`` per doubling of shadow
    releases: AUC_last - AUC_prev < tolerance * log2(R_last / R_prev).  A last step shorter than a
    doubling (20,000 to the cap 26,843) must gain proportionally less: the same gain over a third
    of a doubling is a curve still rising at about three times the tolerance per doubling."""
    if len(releases) < 2 or releases[-1] <= releases[-2]:
        return False
    return auc[-1] - auc[-2] < tolerance * math.log2(releases[-1] / releases[-2])
