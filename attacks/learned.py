"""Learned attackers trained on releases the attacker simulates against the (known) defense.

Both use ``knowledge.simulate(n, seed) -> (releases (R, |Q|), memberships (R, K))``: releases
of the known population under the actual defense, with their memberships as labels.  None of
them sees evaluation labels; their direction and threshold (false-positive rate alpha) are
checked on a second, held-out batch of simulated releases.

- ``tree`` and ``svm`` (paper Fig. 2d; scikit-learn): classifiers on per-(release, target)
  features whose number does not grow with K (:func:`pair_features`): the raw statistics
  -lrs, <d - p_bar, x - p_bar>, Homer's D, the variance-weighted score (each divided by
  |Q|), the target's log-likelihood under p_bar, and four summaries of the release (mean
  and mean absolute shift from p_bar, excess variance, fraction of clipped coordinates).
  Training pairs are subsampled.  Because features are per pair, they score any target.

The linear attackers fitted in closed form (``linear``, ``whitened``) are in :mod:`bngp.attacks.linear`.
"""

from __future__ import annotations

from abc import abstractmethod
from typing import ClassVar

import numpy as np
import torch
from sklearn.metrics.pairwise import rbf_kernel
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.svm import SVC
from sklearn.tree import DecisionTreeClassifier

from .base import Attack, AttackKnowledge
from .inputs import (
    check_binary_panel,
    check_pair,
    check_reference_frequencies,
    check_releases,
    check_targets,
)
from .registry import register_attack
from .shadow import ShadowData, simulated_shadow
from .statistics import (
    DEFAULT_EPSILON,
    affine_statistic,
    dwork_score_torch,
    homer_torch,
    lrs_torch,
    weighted_score_torch,
)
from bngp.errors import InputError
from bngp.rng import spawn_seeds
from bngp.validation import check_in_open_interval, check_positive_int

__all__ = ["pair_features", "FEATURE_NAMES", "DecisionTreeAttack", "SVMAttack"]

#: (release, target) pairs featurised at once when scoring (bounds the feature array).
_PAIR_BLOCK = 1 << 18
#: kernel entries formed at once by the SVM's decision values (64 MB in float64).
_KERNEL_BLOCK = 1 << 23

FEATURE_NAMES = (
    "minus_lrs_per_snv",
    "score_per_snv",
    "homer_per_snv",
    "weighted_score_per_snv",
    "target_log_likelihood_per_snv",
    "release_mean_shift",
    "release_mean_abs_shift",
    "release_excess_variance",
    "release_clipped_fraction",
)


def pair_features(
    targets: np.ndarray, releases: np.ndarray, reference_frequencies: np.ndarray, epsilon: float = DEFAULT_EPSILON
) -> np.ndarray:
    """Per-(release, target) features, shape (R, n, len(FEATURE_NAMES)) (see module docstring).

    Args:
        targets: (n, |Q|) validated binary targets.
        releases: (R, |Q|) validated releases.
        reference_frequencies: p_bar (|Q|,).
        epsilon: clipping of frequencies in the log-likelihood features.
    """
    n_attributes = targets.shape[1]
    x = torch.from_numpy(np.asarray(releases, dtype=np.float64))
    p = torch.from_numpy(reference_frequencies)
    clipped_p = p.clamp(epsilon, 1 - epsilon)
    with torch.no_grad():
        per_pair = [
            -lrs_torch(targets, x, p, epsilon),
            dwork_score_torch(targets, x, p),
            homer_torch(targets, x, p),
            weighted_score_torch(targets, x, p, epsilon),
        ]

        def log_likelihood(_: torch.Tensor, columns: slice) -> tuple[torch.Tensor, torch.Tensor]:
            pj = clipped_p[columns]
            return (torch.log(pj) - torch.log1p(-pj))[None, :], torch.log1p(-pj).sum()[None]

        target_ll = affine_statistic(targets, torch.zeros((1, n_attributes), dtype=torch.float64), log_likelihood)
    shift = x - p
    release_summaries = torch.stack(
        [
            shift.mean(dim=1),
            shift.abs().mean(dim=1),
            (shift * shift).mean(dim=1) / (clipped_p * (1 - clipped_p)).mean(),
            ((x <= 0) | (x >= 1)).to(torch.float64).mean(dim=1),
        ],
        dim=1,
    )
    n_releases, n_targets = per_pair[0].shape
    features = torch.empty((n_releases, n_targets, len(FEATURE_NAMES)), dtype=torch.float64)
    for index, statistic in enumerate(per_pair):
        features[:, :, index] = statistic / n_attributes
    features[:, :, 4] = target_ll / n_attributes
    features[:, :, 5:] = release_summaries[:, None, :]
    return features.numpy()


def _stratified_subsample(labels: np.ndarray, size: int, rng: np.random.Generator, attack_name: str) -> np.ndarray:
    """Indices of at most ``size`` pairs, members and non-members in their proportions (>= 1 each)."""
    members = np.flatnonzero(labels == 1)
    non_members = np.flatnonzero(labels == 0)
    if members.size == 0 or non_members.size == 0:
        raise InputError(f"attack `{attack_name}`: the simulated releases must contain members and non-members.")
    size = min(size, labels.size)
    n_members = min(members.size, max(1, round(size * members.size / labels.size)))
    n_non_members = min(non_members.size, max(1, size - n_members))
    return np.r_[
        rng.choice(members, size=n_members, replace=False),
        rng.choice(non_members, size=n_non_members, replace=False),
    ]


class _PairClassifierAttack(Attack):
    """Shared fit/score of the scikit-learn pair classifiers (``tree``, ``svm``)."""

    requires: ClassVar[frozenset[str]] = frozenset({"population", "simulate", "reference_frequencies"})

    def __init__(
        self,
        n_shadow_releases: int = 50,
        max_pairs: int = 20000,
        n_calibration_releases: int = 10,
        alpha: float = 0.05,
    ) -> None:
        self.n_shadow_releases = check_positive_int("n_shadow_releases", n_shadow_releases)
        self.max_pairs = check_positive_int("max_pairs", max_pairs, minimum=2)
        self.n_calibration_releases = check_positive_int("n_calibration_releases", n_calibration_releases)
        self.alpha = check_in_open_interval("alpha", alpha, 0.0, 1.0)
        self.n_attributes_: int | None = None

    @abstractmethod
    def _make_classifier(self, seed: int) -> object:
        """A fresh scikit-learn classifier."""

    @abstractmethod
    def _classifier_scores(self, features: np.ndarray) -> np.ndarray:
        """Membership scores of the fitted classifier for (pairs, features) rows."""

    def _features(self, shadow: ShadowData) -> np.ndarray:
        return pair_features(shadow.targets, shadow.releases, self.reference_frequencies_)

    def _fit(self, knowledge: AttackKnowledge, seed: int) -> None:
        self.reference_frequencies_ = check_reference_frequencies(knowledge.reference_frequencies)
        self.n_attributes_ = self.reference_frequencies_.size
        check_binary_panel("population", knowledge.population, self.n_attributes_)
        train_seed, calibration_seed, subsample_seed, model_seed = spawn_seeds(seed, 4)
        shadow = simulated_shadow(knowledge, self.n_shadow_releases, train_seed)
        features = self._features(shadow).reshape(-1, len(FEATURE_NAMES))
        labels = shadow.labels.reshape(-1)
        chosen = _stratified_subsample(labels, self.max_pairs, np.random.default_rng(subsample_seed), self.name)
        self.classifier_ = self._make_classifier(model_seed)
        self.classifier_.fit(features[chosen], labels[chosen].astype(np.int64))
        calibration = simulated_shadow(knowledge, self.n_calibration_releases, calibration_seed)
        self._calibrate(
            self._raw(self._features(calibration)), calibration.labels, alpha=self.alpha, source=calibration.source
        )

    def _raw(self, features: np.ndarray) -> np.ndarray:
        n_releases, n_targets, n_features = features.shape
        return self._classifier_scores(features.reshape(-1, n_features)).reshape(n_releases, n_targets)

    def score(self, targets: np.ndarray, releases: np.ndarray) -> np.ndarray:
        if self.n_attributes_ is None:
            raise InputError(f"attack `{self.name}` must be fitted before scoring (call fit).")
        targets = check_targets(targets, self.n_attributes_)
        releases = check_releases(releases)
        check_pair(targets, releases)
        block = max(1, _PAIR_BLOCK // targets.shape[0])
        raw = [
            self._raw(pair_features(targets, releases[start : start + block], self.reference_frequencies_))
            for start in range(0, releases.shape[0], block)
        ]
        return self.orientation_ * np.concatenate(raw, axis=0)


@register_attack("tree")
class DecisionTreeAttack(_PairClassifierAttack):
    """Decision-tree attacker (paper Fig. 2d): P(member | pair features), a CART tree.

    Args:
        n_shadow_releases: releases simulated against the defense for training.
        max_pairs: training (release, individual) pairs subsampled from them.
        n_calibration_releases: held-out simulated releases for direction and threshold.
        alpha: target false-positive rate of the threshold on the held-out releases.
        max_depth: depth of the tree.
        min_samples_leaf: minimum pairs per leaf.
    """

    knowledge_statement: ClassVar[str] = (
        "Knows the population, p_bar and can simulate releases against the defense: a decision tree on "
        "per-(release, target) statistics (lrs, score, Homer, release summaries) trained on simulated releases "
        "labelled on the population; direction and threshold (false-positive rate alpha) from held-out "
        "simulated releases."
    )

    def __init__(
        self,
        n_shadow_releases: int = 50,
        max_pairs: int = 20000,
        n_calibration_releases: int = 10,
        alpha: float = 0.05,
        max_depth: int = 8,
        min_samples_leaf: int = 20,
    ) -> None:
        super().__init__(n_shadow_releases, max_pairs, n_calibration_releases, alpha)
        self.max_depth = check_positive_int("max_depth", max_depth)
        self.min_samples_leaf = check_positive_int("min_samples_leaf", min_samples_leaf)

    def _make_classifier(self, seed: int) -> DecisionTreeClassifier:
        return DecisionTreeClassifier(
            max_depth=self.max_depth, min_samples_leaf=self.min_samples_leaf, random_state=seed % (2**32)
        )

    def _classifier_scores(self, features: np.ndarray) -> np.ndarray:
        return self.classifier_.predict_proba(features)[:, 1]


@register_attack("svm")
class SVMAttack(_PairClassifierAttack):
    """SVM attacker (paper Fig. 2d): RBF-kernel SVC decision value on standardised pair features.

    Args:
        n_shadow_releases: releases simulated against the defense for training.
        max_pairs: training (release, individual) pairs subsampled from them (SVC training
            is quadratic in this number).
        n_calibration_releases: held-out simulated releases for direction and threshold.
        alpha: target false-positive rate of the threshold on the held-out releases.
        regularization: the SVC's C.
    """

    knowledge_statement: ClassVar[str] = (
        "Knows the population, p_bar and can simulate releases against the defense: an RBF support-vector "
        "classifier on per-(release, target) statistics (lrs, score, Homer, release summaries) trained on "
        "simulated releases labelled on the population; direction and threshold (false-positive rate alpha) "
        "from held-out simulated releases."
    )

    def __init__(
        self,
        n_shadow_releases: int = 50,
        max_pairs: int = 3000,
        n_calibration_releases: int = 10,
        alpha: float = 0.05,
        regularization: float = 1.0,
    ) -> None:
        super().__init__(n_shadow_releases, max_pairs, n_calibration_releases, alpha)
        self.regularization = check_in_open_interval("regularization", regularization, 0.0, np.inf)

    def _make_classifier(self, seed: int) -> object:
        return make_pipeline(StandardScaler(), SVC(kernel="rbf", C=self.regularization, gamma="scale"))

    def _classifier_scores(self, features: np.ndarray) -> np.ndarray:
        """The SVC's decision value sum_i alpha_i y_i exp(-gamma ||z - s_i||^2) + b on standardised
        features z, with the kernel by scikit-learn's BLAS-backed :func:`~sklearn.metrics.pairwise.rbf_kernel`
        over blocks of pairs: ``decision_function`` to 1e-12 (libsvm evaluates the kernel one pair
        at a time)."""
        scaler, svc = self.classifier_[0], self.classifier_[-1]
        standardised = scaler.transform(features)
        scores = np.empty(standardised.shape[0])
        block = max(1, _KERNEL_BLOCK // max(1, svc.support_vectors_.shape[0]))
        for start in range(0, standardised.shape[0], block):
            kernel = rbf_kernel(standardised[start:start + block], svc.support_vectors_, gamma=svc._gamma)
            scores[start:start + block] = kernel @ svc.dual_coef_[0] + svc.intercept_[0]
        return scores
