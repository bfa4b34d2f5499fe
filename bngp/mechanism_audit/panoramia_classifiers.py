"""The baseline and the membership-inference classifiers of a PANORAMIA audit (arXiv:2402.09477, sec. 3).

* baseline b(y): a logistic regression on genotype features phi(y) = [y_j, 1{y_j = y_{j+1}}]
  (carrier status and adjacent-pair agreement, which carries the LD structure), trained on the
  training members against as many generated individuals; it never sees the release.
* MIA a(y, x): a logistic regression on [b(y), s(y, x)], the baseline's log-odds (out-of-fold on
  the training split, so that no training point is scored by a model that saw it) and s the
  attack's membership score of y on the release x.  Stacking keeps the MIA as informed as the
  baseline while leaving it two coefficients to learn from the few training members.

Both are standardised features and an L2 logistic regression whose inverse strength is chosen
from :data:`CS` by 3-fold cross-validation on the ROC AUC.  phi(y) reads the individual's own
|Q| attributes, never the release, so its width is 2|Q| - 1 whatever the release's composition
(arXiv:2410.07414, App. L.6).
"""

from __future__ import annotations

import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegressionCV
from sklearn.model_selection import cross_val_predict
from sklearn.pipeline import Pipeline, make_pipeline
from sklearn.preprocessing import StandardScaler

from bngp.validation import check_binary_matrix

__all__ = ["CS", "fit_classifier", "genotype_features", "log_odds", "mia_log_odds", "out_of_fold_log_odds"]

#: inverse L2 strengths tried by the classifiers' 3-fold cross-validation.
CS = (0.01, 0.1, 1.0)


def genotype_features(genotypes: np.ndarray) -> np.ndarray:
    """phi(y) = [y_1..y_Q, 1{y_1 = y_2}..1{y_{Q-1} = y_Q}] as float32, shape (n, 2Q - 1).

    ``genotypes`` are individuals (n, |Q|), never releases: for a composed release of c |Q|
    outputs the features stay those of the |Q| attributes.
    """
    values = check_binary_matrix("genotypes", genotypes)
    agreement = values[:, 1:] == values[:, :-1]
    return np.concatenate([values, agreement], axis=1).astype(np.float32)


def _classifier() -> Pipeline:
    """Standardised features, L2 logistic regression with C chosen by 3-fold cross-validation."""
    return make_pipeline(StandardScaler(), LogisticRegressionCV(Cs=list(CS), cv=3, scoring="roc_auc", max_iter=2000))


def fit_classifier(features: np.ndarray, labels: np.ndarray) -> Pipeline:
    """The classifier fitted on ``features`` (n, d) with 0/1 ``labels`` (n,)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        warnings.simplefilter("ignore", FutureWarning)
        return _classifier().fit(features, labels)


def log_odds(classifier: Pipeline, features: np.ndarray) -> np.ndarray:
    """(n,) the fitted classifier's log-odds of membership, float64."""
    return classifier.decision_function(features).astype(np.float64)


def out_of_fold_log_odds(features: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """3-fold out-of-fold log-odds on the training split (no point scored by a model that saw it)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        warnings.simplefilter("ignore", FutureWarning)
        scores = cross_val_predict(_classifier(), features, labels, cv=3, method="decision_function")
    return scores.astype(np.float64)


def mia_log_odds(baseline: Pipeline, mia: Pipeline, points: np.ndarray,
                 attack_scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(b(y), a(y, x)) of the individuals ``points`` (n, |Q|) whose attack scores on the release
    are ``attack_scores`` (n,): the baseline's and the MIA's log-odds."""
    baseline_scores = log_odds(baseline, genotype_features(points))
    return baseline_scores, log_odds(mia, np.stack([baseline_scores, attack_scores], axis=1))
