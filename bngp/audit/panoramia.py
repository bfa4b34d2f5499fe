"""PANORAMIA: privacy measurement with generated non-members (Kazmi, Lautraite, Akbari et al., *PANORAMIA: Privacy Auditing of Machine Learning Models without Retraining*, arXiv:2402.09477).

Audit set of m points, each a real training point (member, s_i = 1) with probability 1/2
and otherwise a point drawn from a generator G trained on other training data.  Two
classifiers trained on disjoint data score every audit point: the baseline b (sees only the
point) and the MIA (also sees the target model).  For a threshold on a score, r points are
predicted members and tp of them are members.

If G is c-close to the data distribution (e^-c P_D[x] <= P_G[x], PANORAMIA (arXiv:2402.09477) Def. 3), the
baseline's true positives are dominated by Bin(r, sigmoid(c)) (Prop. 1); if the target
model is also eps-DP, the MIA's by Bin(r, sigmoid(c + eps)) (Prop. 2).  The core bound
(:func:`bngp.audit.binomial.binomial_bound` with delta = 0)

    bound(r, tp, beta_t) = sup{x : P[Bin(r, sigmoid(x)) >= tp] < beta_t}   (0 if x = 0 is kept)

gives c_lb = max_t bound(r_b(t), tp_b(t), beta / 2 / T_b) and {c+eps}_lb likewise from the
MIA scores with T_a thresholds (Cor. 1-2: beta / 2 for each test, Bonferroni over the
distinct thresholds of each score; the tests condition on the scores, which fix the
thresholds).  The returned measurement is eps_tilde = max(0, {c+eps}_lb - c_lb); it is a
lower bound on eps only when the non-members are real (c = 0, "RM;RN"), otherwise it is the
paper's measurement "if the generator's closeness claim is tight, the model is not
eps_tilde-DP" (PANORAMIA (arXiv:2402.09477) sec. 4.2).  With ``real_nonmembers=True`` the baseline test is
skipped and the whole beta goes to the MIA test.

(c, gamma)-closeness (PANORAMIA (arXiv:2402.09477) App. E, Prop. 3) adds 2 m gamma max_i (1/i)
P[tp - i <= Bin < tp] to both p-values; those bounds are found by bisection, visiting
thresholds in decreasing order of their gamma = 0 bound (an upper bound) and stopping when
no remaining threshold can win.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from bngp.audit.binomial import _p_value, _p_value_floor, _pure_bound, _refine
from bngp.audit.inputs import check_confidence, check_delta, check_scores_and_labels
from bngp.audit.results import AuditResult
from bngp.audit.roc import threshold_counts
from bngp.errors import DataFormatError
from bngp.validation import check_finite_array

__all__ = ["PanoramiaResult", "panoramia_audit"]


@dataclass(frozen=True)
class _Best:
    bound: float
    threshold: float
    predicted: int
    true_positives: int
    thresholds: int


def _best_bound(scores: np.ndarray, members: np.ndarray, beta: float, gamma: float) -> _Best:
    """max over the distinct thresholds of bound(r, tp, beta / T) (with the gamma term)."""
    thresholds, tp, fp = threshold_counts(scores, members)
    thresholds, tp, predicted = thresholds[1:], tp[1:], (tp + fp)[1:]
    count = thresholds.shape[0]
    level = beta / count
    pure = _pure_bound(predicted, tp, level)
    if gamma == 0.0:
        best = int(np.argmax(pure))
        value = float(pure[best])
    else:
        # Visit thresholds by decreasing gamma = 0 bound (an upper bound on theirs); one
        # p-value tells whether a threshold rejects the current best value, and only then is
        # its bound refined by bisection between that value and its gamma = 0 bound.
        # Thresholds are visited by decreasing gamma = 0 bound (an upper bound on theirs),
        # skipping those whose p-value at eps = 0 provably reaches the level (one vectorised
        # lower bound).  Each other threshold gets one exact p-value at the current best
        # value and, if it rejects that value, a bisection between it and its gamma = 0
        # bound.  Every reported value is rejected by its own threshold's test, which the
        # Bonferroni level covers.
        m = scores.shape[0]
        best, value = int(np.argmax(pure)), 0.0
        screen = _p_value_floor(m, predicted, tp, 0.0, gamma) < level
        for index in np.argsort(-pure, kind="stable"):
            if pure[index] <= value:
                break
            r, v = int(predicted[index]), int(tp[index])
            if screen[index] and _p_value(m, r, v, value, gamma) < level:
                best, value = int(index), _refine(m, r, v, level, gamma, value, float(pure[index]))
    return _Best(
        bound=value,
        threshold=float(thresholds[best]),
        predicted=int(predicted[best]),
        true_positives=int(tp[best]),
        thresholds=count,
    )


@dataclass(frozen=True)
class PanoramiaResult(AuditResult):
    """PANORAMIA measurement.

    Attributes:
        epsilon_lb: eps_tilde = max(0, {c+eps}_lb - c_lb); a lower bound on eps only when
            ``is_lower_bound`` (real non-members).
        c_lb: lower bound on the generator closeness c (0 with real non-members).
        c_plus_epsilon_lb: lower bound on c + eps from the MIA scores.
        gamma: the (c, gamma)-closeness slack (0 for plain c-closeness).
        real_nonmembers: the non-members are real held-out points (c = 0 known).
        is_lower_bound: whether ``epsilon_lb`` is a lower bound on eps at ``confidence``.
        interpretation: one sentence stating what ``epsilon_lb`` means.
        n_audit: m, the size of the audit set.
        baseline_threshold: maximising baseline threshold (NaN with real non-members).
        baseline_predicted: r_b at that threshold (0 with real non-members).
        baseline_true_positives: tp_b at that threshold.
        baseline_thresholds: T_b, distinct baseline thresholds union-bounded.
        mia_threshold: maximising MIA threshold.
        mia_predicted: r_a at that threshold.
        mia_true_positives: tp_a at that threshold.
        mia_thresholds: T_a, distinct MIA thresholds union-bounded.
    """

    epsilon_lb: float
    c_lb: float
    c_plus_epsilon_lb: float
    gamma: float
    real_nonmembers: bool
    is_lower_bound: bool
    interpretation: str
    n_audit: int
    baseline_threshold: float
    baseline_predicted: int
    baseline_true_positives: int
    baseline_thresholds: int
    mia_threshold: float
    mia_predicted: int
    mia_true_positives: int
    mia_thresholds: int


def panoramia_audit(
    mia_scores: np.ndarray,
    members: np.ndarray,
    baseline_scores: np.ndarray | None = None,
    *,
    confidence: float = 0.95,
    gamma: float = 0.0,
) -> PanoramiaResult:
    """c_lb, {c+eps}_lb and eps_tilde from MIA and baseline scores on one audit set.

    Args:
        mia_scores: MIA score per audit point (higher = member).
        members: 1 for a real member, 0 for a non-member (generated, or real held-out).
        baseline_scores: baseline score per audit point; ``None`` means the non-members are
            real (RM;RN): c = 0 and eps_tilde is a lower bound on eps.
        confidence: 1 - beta for the joint statement (beta / 2 per test with a baseline).
        gamma: the (c, gamma)-closeness slack in [0, 1).

    Example:
        >>> members = np.repeat([1, 0], 5000)
        >>> res = panoramia_audit(members.astype(float), members)  # perfect MIA, real non-members
        >>> round(res.epsilon_lb, 4)  # two thresholds: bound(5000, 5000, 0.05 / 2)
        7.2115
    """
    scores, labels = check_scores_and_labels(mia_scores, members, scores_name="mia_scores")
    beta = 1.0 - check_confidence(confidence)
    gamma = check_delta(gamma, "gamma")
    real = baseline_scores is None
    if real:
        mia = _best_bound(scores, labels, beta, gamma)
        baseline = _Best(bound=0.0, threshold=float("nan"), predicted=0, true_positives=0, thresholds=0)
        union = f"bonferroni over {mia.thresholds} MIA thresholds"
        meaning = "lower bound on eps (real non-members: c = 0)"
    else:
        base = check_finite_array("baseline_scores", baseline_scores, ndim=1)
        if base.shape != scores.shape:
            raise DataFormatError(
                f"`baseline_scores` must have one entry per MIA score ({scores.shape[0]}), got {base.shape[0]}."
            )
        baseline = _best_bound(base, labels, beta / 2.0, gamma)
        mia = _best_bound(scores, labels, beta / 2.0, gamma)
        union = (
            f"beta/2 per test; bonferroni over {baseline.thresholds} baseline and "
            f"{mia.thresholds} MIA thresholds"
        )
        meaning = (
            "measurement, not a lower bound: if the generator's c-closeness claim (c = c_lb) "
            "is tight, the target is not eps_tilde-DP (PANORAMIA (arXiv:2402.09477) sec. 4.2)"
        )
    return PanoramiaResult(
        method="panoramia",
        confidence=1.0 - beta,
        delta=0.0,
        thresholds_examined=baseline.thresholds + mia.thresholds,
        union_bound=union,
        epsilon_lb=max(0.0, mia.bound - baseline.bound),
        c_lb=baseline.bound,
        c_plus_epsilon_lb=mia.bound,
        gamma=gamma,
        real_nonmembers=real,
        is_lower_bound=real,
        interpretation=meaning,
        n_audit=int(scores.shape[0]),
        baseline_threshold=baseline.threshold,
        baseline_predicted=baseline.predicted,
        baseline_true_positives=baseline.true_positives,
        baseline_thresholds=baseline.thresholds,
        mia_threshold=mia.threshold,
        mia_predicted=mia.predicted,
        mia_true_positives=mia.true_positives,
        mia_thresholds=mia.thresholds,
    )
