import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.metrics import log_loss, roc_auc_score
from sklearn.metrics import roc_curve as sk_roc_curve

from bngp.errors import InputError
from bngp.metrics import (
    auc,
    bayes_weighted_advantage,
    bgp_risk,
    binary_entropy,
    membership_advantage,
    membership_metrics,
    release_aucs,
    roc_curve,
    tpr_at_fpr,
)


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 10_000), st.integers(4, 200), st.booleans())
def test_auc_and_roc_match_scikit_learn(seed, n, ties):
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 2, n)
    labels[:2] = [0, 1]
    scores = rng.normal(labels * 0.7, 1.0)
    if ties:
        scores = np.round(scores)
    assert auc(scores, labels) == pytest.approx(roc_auc_score(labels, scores), abs=1e-12)
    curve = roc_curve(scores, labels)
    fpr, tpr, _ = sk_roc_curve(labels, scores, drop_intermediate=False)
    assert np.allclose(curve.fpr, fpr) and np.allclose(curve.tpr, tpr)



@settings(max_examples=60, deadline=None)
@given(st.integers(0, 10_000), st.integers(1, 12), st.integers(2, 60), st.sampled_from(["none", "some", "heavy", "constant"]))
def test_release_aucs_match_scikit_learn_row_by_row(seed, rows, n, ties):
    """Per-release AUCs (sorted ranks without ties, scipy's average ranks for rows with ties) against
    scikit-learn's roc_auc_score on each row that holds both classes (the reference)."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 2, (rows, n))
    labels[0] = rng.integers(0, 2) if rows > 1 else labels[0]  # a row with one class only when there are others
    scores = rng.normal(size=(rows, n))
    if ties == "some":
        scores[::2] = np.round(scores[::2])
    elif ties == "heavy":
        scores = np.round(scores)
    elif ties == "constant":
        scores[rows // 2] = 1.5
    kept = [row for row in range(rows) if 0 < labels[row].sum() < n]
    expected = [roc_auc_score(labels[row], scores[row]) for row in kept]
    np.testing.assert_allclose(release_aucs(scores, labels), expected, rtol=0, atol=1e-12)


def test_known_cases():
    labels = np.array([0, 0, 1, 1])
    assert auc([0.1, 0.2, 0.8, 0.9], labels) == 1.0
    assert auc([0.9, 0.8, 0.2, 0.1], labels) == 0.0
    assert auc([0.5] * 4, labels) == 0.5
    assert membership_advantage([0.1, 0.2, 0.8, 0.9], labels) == 1.0
    assert tpr_at_fpr([0.1, 0.6, 0.5, 0.9], labels, 0.0) == 0.5
    assert tpr_at_fpr([0.1, 0.6, 0.5, 0.9], labels, 0.5) == 1.0
    # gamma = 0.5: max 0.5 TPR - 0.5 FPR = 0.5 * advantage
    assert bayes_weighted_advantage([0.1, 0.6, 0.5, 0.9], labels, 0.5) == pytest.approx(0.25)


def test_gaussian_scores_have_analytic_auc():
    # member ~ N(d, 1), non-member ~ N(0, 1): AUC = Phi(d / sqrt 2)
    from scipy.stats import norm

    rng = np.random.default_rng(3)
    d = 1.0
    labels = np.r_[np.ones(200_000), np.zeros(200_000)]
    scores = rng.normal(labels * d, 1.0)
    assert auc(scores, labels) == pytest.approx(norm.cdf(d / np.sqrt(2)), abs=3e-3)
    # TPR at FPR alpha = 1 - Phi(Phi^-1(1 - alpha) - d)
    assert tpr_at_fpr(scores, labels, 0.1) == pytest.approx(1 - norm.cdf(norm.ppf(0.9) - d), abs=5e-3)


def test_bgp_risk_matches_log_loss_and_entropy():
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 2, 1000)
    probabilities = rng.uniform(0.05, 0.95, 1000)
    assert bgp_risk(probabilities, labels) == pytest.approx(log_loss(labels, probabilities))
    assert binary_entropy(0.5) == pytest.approx(np.log(2))
    assert binary_entropy(0.0) == 0.0


def test_membership_metrics_per_release_std():
    rng = np.random.default_rng(1)
    labels = rng.integers(0, 2, (5, 100))
    scores = rng.normal(labels, 1.0)
    result = membership_metrics(scores, labels)
    per_release = [roc_auc_score(l, s) for l, s in zip(labels, scores)]
    assert result.auc == pytest.approx(np.mean(per_release))
    assert result.auc_std == pytest.approx(np.std(per_release, ddof=1))
    assert set(result.tpr_at_fpr) == {"0.1", "0.01", "0.001"}


@pytest.mark.parametrize(
    "scores, labels",
    [([], []), ([0.1, np.nan], [0, 1]), ([0.1, 0.2], [1, 1]), ([0.1, 0.2], [0, 2]), ([0.1], [0, 1])],
)
def test_bad_input(scores, labels):
    with pytest.raises(InputError):
        auc(scores, labels)
