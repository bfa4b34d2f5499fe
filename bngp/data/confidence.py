"""The image encoder: a classifier's per-class confidence bins (arXiv:2410.07414, App. L.5).

**Classifier.**  A multinomial logistic regression C (scikit-learn ``LogisticRegression``, lbfgs,
deterministic; L2 penalty C = :data:`CLASSIFIER_C`; pixels scaled to [0, 1]) maps an image x to
p(x) in the simplex of the L classes: p(x) = softmax(W x / s + w_0), s the largest pixel value.

**Confidence bins.**  For each class c, the B - 1 interior edges e_c,1 < ... < e_c,B-1 are the
quantiles at levels 1/B, ..., (B-1)/B of log p_c over a calibration split (disjoint from the
training split and from the pool); equal quantiles are kept once, so a class may have fewer than
B bins.  Bin b of class c is [e_c,b, e_c,b+1) on the log scale (e_c,0 = -inf, the last bin closed
at log 1 = 0).  The binary attribute (c, b) of image x is

    d_(c,b)(x) = 1  iff  e_c,b <= log p_c(x) < e_c,b+1,

so every image has exactly one 1 in each class's group of columns: L ones in |Q| <= L B columns.
Quantiles of log p_c and of p_c define the same sets of images; the log scale keeps the wrong
classes' probabilities, which span many orders of magnitude, from tying.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from bngp.errors import DataFormatError, InputError
from bngp.validation import check_positive_int

__all__ = ["CLASSIFIER_C", "DIGITS_MAX_ITER", "MNIST_MAX_ITER", "ConfidenceEncoder", "check_bins",
           "fit_confidence_encoder"]

#: L2 penalty and lbfgs iterations of the classifier (digits converges well within its budget).
CLASSIFIER_C = 1.0
DIGITS_MAX_ITER = 1000
MNIST_MAX_ITER = 200


def _log_softmax(logits: np.ndarray) -> np.ndarray:
    shifted = logits - logits.max(axis=1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))


def _format_probability(value: float, digits: int) -> str:
    return f"{value:.{digits}g}"


@dataclass(frozen=True, eq=False)
class ConfidenceEncoder:
    """A fitted multinomial logistic regression and its per-class confidence bins (module docstring).

    Attributes:
        coef: (L, P) weights W of the classifier on pixels scaled to [0, 1].
        intercept: (L,) intercepts w_0.
        edges: L increasing arrays: the interior bin edges e_c,1 < ... of class c on the log p_c
            scale (class c has ``len(edges[c]) + 1`` bins).
        pixel_max: s, the pixel value that maps to 1 (16 for digits, 255 for MNIST).
    """

    coef: np.ndarray
    intercept: np.ndarray
    edges: tuple[np.ndarray, ...]
    pixel_max: float
    n_classes: int = field(init=False)

    def __post_init__(self) -> None:
        coef = np.array(self.coef, dtype=np.float64)
        intercept = np.array(self.intercept, dtype=np.float64)
        if coef.ndim != 2 or intercept.shape != (coef.shape[0],):
            raise DataFormatError(f"`coef` must be (L, P) and `intercept` (L,), got {coef.shape} and {intercept.shape}.")
        edges = tuple(np.array(e, dtype=np.float64).reshape(-1) for e in self.edges)
        if len(edges) != coef.shape[0]:
            raise DataFormatError(f"`edges` must hold one array per class ({coef.shape[0]}), got {len(edges)}.")
        for c, e in enumerate(edges):
            if not np.all(np.isfinite(e)) or np.any(np.diff(e) <= 0):
                raise DataFormatError(f"the bin edges of class {c} must be finite and strictly increasing.")
        if not (math.isfinite(self.pixel_max) and self.pixel_max > 0):
            raise InputError(f"`pixel_max` must be a finite number > 0, got {self.pixel_max}.")
        for array in (coef, intercept, *edges):
            array.flags.writeable = False
        object.__setattr__(self, "coef", coef)
        object.__setattr__(self, "intercept", intercept)
        object.__setattr__(self, "edges", edges)
        object.__setattr__(self, "pixel_max", float(self.pixel_max))
        object.__setattr__(self, "n_classes", int(coef.shape[0]))

    @property
    def n_pixels(self) -> int:
        """P, the pixels of an image."""
        return int(self.coef.shape[1])

    @property
    def bins_per_class(self) -> tuple[int, ...]:
        """The number of bins of each class (at most B; fewer where quantiles tied)."""
        return tuple(len(e) + 1 for e in self.edges)

    @property
    def n_attributes(self) -> int:
        """|Q| = the sum of the bins of all classes."""
        return int(sum(self.bins_per_class))

    def groups(self) -> dict[int, slice]:
        """Class c -> the slice of its columns (the slices tile 0..|Q| in class order)."""
        stops = np.cumsum(self.bins_per_class)
        return {c: slice(int(stop - n), int(stop)) for c, (stop, n) in enumerate(zip(stops, self.bins_per_class))}

    def _pixels(self, images: np.ndarray) -> np.ndarray:
        images = np.asarray(images)
        if images.ndim < 2 or math.prod(images.shape[1:]) != self.n_pixels:
            raise DataFormatError(f"images must be an (n, ...) array of {self.n_pixels} pixels each, "
                                  f"got shape {images.shape}.")
        return images.reshape(images.shape[0], -1).astype(np.float64) / self.pixel_max

    def log_probabilities(self, images: np.ndarray) -> np.ndarray:
        """(n, L) log p_c(x) of the images (any shape (n, ...) with P pixels each, raw pixel values)."""
        return _log_softmax(self._pixels(images) @ self.coef.T + self.intercept)

    def probabilities(self, images: np.ndarray) -> np.ndarray:
        """(n, L) predicted class probabilities p(x), rows summing to 1."""
        return np.exp(self.log_probabilities(images))

    def predict(self, images: np.ndarray) -> np.ndarray:
        """(n,) the predicted class argmax_c p_c(x)."""
        return self.log_probabilities(images).argmax(axis=1)

    def encode(self, images: np.ndarray) -> np.ndarray:
        """(n, |Q|) uint8: column (c, b) is 1 iff log p_c(x) lies in bin b of class c; exactly one 1
        per class group (the columns of :meth:`attribute_names`)."""
        log_p = self.log_probabilities(images)
        n = log_p.shape[0]
        codes = np.empty((n, self.n_classes), dtype=np.int64)
        for c, (edges, columns) in enumerate(zip(self.edges, self.groups().values())):
            codes[:, c] = columns.start + np.searchsorted(edges, log_p[:, c], side="right")
        matrix = np.zeros((n, self.n_attributes), dtype=np.uint8)
        np.put_along_axis(matrix, codes, 1, axis=1)
        return matrix

    def attribute_names(self) -> np.ndarray:
        """The |Q| column names ``p(c) in [lo, hi)`` (probabilities, the last bin ``[lo, 1]``), as a
        fixed-width unicode array; printed with as many significant digits as keep them distinct."""
        for digits in range(3, 18):
            names = []
            for c, edges in enumerate(self.edges):
                bounds = ["0", *(_format_probability(math.exp(e), digits) for e in edges), "1"]
                names += [f"p({c}) in [{lo}, {hi})" for lo, hi in zip(bounds[:-2], bounds[1:-1])]
                names.append(f"p({c}) in [{bounds[-2]}, 1]")
            if len(set(names)) == len(names):
                break
        return np.array(names)


def check_bins(bins: int) -> int:
    """``bins`` checked: an integer B >= 2 (confidence bins per class)."""
    return check_positive_int("bins", bins, minimum=2)


def fit_confidence_encoder(
    images: np.ndarray,
    labels: np.ndarray,
    calibration: np.ndarray,
    *,
    bins: int = 10,
    pixel_max: float = 255.0,
    max_iter: int = MNIST_MAX_ITER,
    classes: int | None = None,
) -> tuple[ConfidenceEncoder, dict[str, Any]]:
    """Fit the classifier on ``images`` / ``labels`` and the bins on ``calibration`` (module docstring).

    Args:
        images: (m, ...) training images (raw pixel values in [0, ``pixel_max``]).
        labels: (m,) their classes 0..L-1; every class must occur.
        calibration: (m', ...) calibration images (disjoint from ``images`` and from the pool).
        bins: B >= 2, the bins of each class before equal quantiles are merged.
        pixel_max: s, the pixel value that maps to 1.
        max_iter: lbfgs iterations of scikit-learn's ``LogisticRegression`` (L2, C = 1).
        classes: L (default: the largest label + 1).

    Returns:
        ``(encoder, details)``: the :class:`ConfidenceEncoder` and a record of the fit
        (``iterations``, ``converged``, ``training_accuracy``).
    """
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import LogisticRegression

    bins = check_bins(bins)
    check_positive_int("max_iter", max_iter)
    images, labels, calibration = np.asarray(images), np.asarray(labels).astype(np.int64), np.asarray(calibration)
    if labels.ndim != 1 or labels.shape[0] != images.shape[0]:
        raise DataFormatError(f"`labels` must have one class per image ({images.shape[0]}), got shape {labels.shape}.")
    classes = int(labels.max()) + 1 if classes is None else check_positive_int("classes", classes, minimum=2)
    absent = sorted(set(range(classes)) - set(np.unique(labels).tolist()))
    if absent or labels.min() < 0 or labels.max() >= classes:
        raise InputError(f"the classifier's training split must hold every class 0..{classes - 1} and no other; "
                         f"missing {absent}: draw a larger training split.")
    if calibration.shape[0] < bins:
        raise InputError(f"the calibration split must hold at least `bins` = {bins} images, got {calibration.shape[0]}.")
    x = images.reshape(images.shape[0], -1).astype(np.float64) / pixel_max
    model = LogisticRegression(C=CLASSIFIER_C, solver="lbfgs", max_iter=max_iter, tol=1e-4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model.fit(x, labels)
    empty = (np.empty(0),) * classes
    encoder = ConfidenceEncoder(coef=model.coef_, intercept=model.intercept_, edges=empty, pixel_max=pixel_max)
    log_p = encoder.log_probabilities(calibration)
    levels = np.arange(1, bins) / bins
    edges = tuple(np.unique(np.quantile(log_p[:, c], levels)) for c in range(classes))
    encoder = ConfidenceEncoder(coef=model.coef_, intercept=model.intercept_, edges=edges, pixel_max=pixel_max)
    iterations = int(np.max(model.n_iter_))
    details = {
        "kind": "multinomial logistic regression (scikit-learn LogisticRegression, lbfgs)",
        "C": CLASSIFIER_C,
        "max_iter": max_iter,
        "iterations": iterations,
        "converged": iterations < max_iter,
        "pixel_scale": f"x / {pixel_max:g}",
        "training_accuracy": float(np.mean(encoder.predict(images) == labels)),
    }
    return encoder, details
