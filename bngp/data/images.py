"""Images as a population: the paper's image experiment (MNIST), and scikit-learn's 8x8 digits.

arXiv:2410.07414, App. L.5: the mechanism is a classifier trained on the MNIST training set that
outputs class probabilities for the images of a queried (inference) set, and membership is
whether an image was queried.  The paper does not say how the outputs of a whole query set are
released; this module fixes that release so that an image population is a
:class:`~bngp.data.population.Population` like a genome or the Adult table (K individuals x |Q|
binary attributes plus a disjoint reference panel; the release is the vector of attribute
proportions among the n members) and the game, every attack, defense and audit run on it
unchanged.

Each image is encoded by a classifier's per-class confidence bins
(:class:`~bngp.data.confidence.ConfidenceEncoder`: d_(c,b)(x) = 1 iff log p_c(x) lies in bin b of
class c).  For a query set D of n images the released statistic is the mean of the members' rows,

    x_(c,b) = (1/n) * #{ x in D : log p_c(x) in bin (c, b) },

the per-class histograms of the classifier's output probabilities on the inference set (recorded
as ``"encoding": "confidence-bins-v1"``).  The individuals are K images of the pool, the
reference panel R other pool images (never members).  docs/datasets.md says why the aggregate,
not the per-image outputs, is released.

==============  ========================================  ============================================
data set        classifier training / calibration         pool (individuals + reference)
==============  ========================================  ============================================
``digits``      500 / 297 of sklearn's 1,797 8x8 images    the other 1,000 (defaults K = 600, R = 400)
``mnist``       10,000 / 2,000 of the 60,000 train images  the 10,000 t10k test images (K = 800, R = 800)
==============  ========================================  ============================================

The splits are drawn with the seed; ids are ``digits:IDX`` (0-based row of
``sklearn.datasets.load_digits``) and ``mnist-t10k:IDX`` (0-based image of the t10k file).
MNIST is not shipped: pass the folder holding its four IDX files (:mod:`bngp.data.idx`).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from bngp.data.confidence import DIGITS_MAX_ITER, MNIST_MAX_ITER, ConfidenceEncoder, check_bins, fit_confidence_encoder
from bngp.data.idx import find_mnist_files, read_idx, read_idx_shape
from bngp.data.population import Population, resolve_pool_sizes
from bngp.errors import DataFormatError, InputError
from bngp.rng import SeedLike, resolve_rng
from bngp.validation import check_positive_int

__all__ = [
    "DIGITS_IMAGES",
    "DIGITS_DEFAULTS",
    "MNIST_DEFAULTS",
    "ENCODING",
    "ImageSplit",
    "split_digits",
    "split_mnist",
    "load_digits_population",
    "load_mnist_population",
]

#: images in scikit-learn's bundled digits data set.
DIGITS_IMAGES = 1797

#: default sizes: classifier training split, calibration split, individuals K, reference panel R.
DIGITS_DEFAULTS: dict[str, int] = {"train": 500, "calibration": 297, "individuals": 600, "reference": 400}
MNIST_DEFAULTS: dict[str, int] = {"train": 10_000, "calibration": 2_000, "individuals": 800, "reference": 800}

#: version of the encoding above, recorded in the population metadata.
ENCODING = "confidence-bins-v1"

_RELEASE = ("per-class histograms of the classifier's output probabilities on the inference set: "
            "x_(c,b) = share of queried images with log p_c in bin b (quantile bins of a calibration split)")



@dataclass(frozen=True, eq=False)
class ImageSplit:
    """A data set split for the image experiment: the fitted encoder and the pool it encodes.

    Attributes:
        encoder: the classifier and bins, fitted on the training and calibration splits.
        pool_images: (M, ...) the pool's images (individuals and reference panel are drawn here).
        pool_labels: (M,) their true classes.
        pool_ids: (M,) their ids (``digits:IDX``, ``mnist-t10k:IDX``).
        train_rows: rows of the source's training images that trained the classifier.
        calibration_rows: rows of the source's images that set the bins.
        metadata: source, seed, sizes, classifier record, pool accuracy, release description.
    """

    encoder: ConfidenceEncoder
    pool_images: np.ndarray
    pool_labels: np.ndarray
    pool_ids: np.ndarray
    train_rows: np.ndarray
    calibration_rows: np.ndarray
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def pool_size(self) -> int:
        """M, the images the individuals and the reference panel are drawn from."""
        return int(self.pool_images.shape[0])


@functools.lru_cache(maxsize=1)
def _digits() -> tuple[np.ndarray, np.ndarray]:
    from sklearn.datasets import load_digits

    bunch = load_digits()
    images, labels = bunch.images.astype(np.uint8), bunch.target.astype(np.int64)
    images.flags.writeable = False
    labels.flags.writeable = False
    return images, labels


def _resolve_split_sizes(train: int, calibration: int, available: int, what: str) -> tuple[int, int]:
    check_positive_int("train", train)
    check_positive_int("calibration", calibration)
    if train + calibration > available:
        raise InputError(f"`train` + `calibration` must be at most the {available} images of {what}, "
                         f"got {train} + {calibration}.")
    return train, calibration


def _pool_metadata(encoder: ConfidenceEncoder, pool_images: np.ndarray, pool_labels: np.ndarray) -> dict[str, Any]:
    return {
        "pool_accuracy": float(np.mean(encoder.predict(pool_images) == pool_labels)),
        "bins_per_class": list(encoder.bins_per_class),
        "bin_edges_log_p": [edges.tolist() for edges in encoder.edges],
    }


def _split_digits(rng: np.random.Generator, recorded_seed: int | None, bins: int, train: int,
                  calibration: int) -> ImageSplit:
    bins = check_bins(bins)
    train, calibration = _resolve_split_sizes(train, calibration, DIGITS_IMAGES, "sklearn's digits")
    images, labels = _digits()
    order = rng.permutation(DIGITS_IMAGES)
    train_rows = np.sort(order[:train])
    calibration_rows = np.sort(order[train:train + calibration])
    pool_rows = np.sort(order[train + calibration:])
    if pool_rows.size < 2:
        raise InputError(f"`train` + `calibration` must leave at least 2 of the {DIGITS_IMAGES} digits for the pool, "
                         f"got {train} + {calibration}.")
    encoder, classifier = fit_confidence_encoder(images[train_rows], labels[train_rows], images[calibration_rows],
                                                 bins=bins, pixel_max=16.0, max_iter=DIGITS_MAX_ITER, classes=10)
    metadata = {
        "source": "sklearn-digits",
        "seed": recorded_seed,
        "bins": bins,
        "encoding": ENCODING,
        "image_shape": [8, 8],
        "split": {"train": train, "calibration": calibration, "pool": int(pool_rows.size)},
        "classifier": classifier,
        **_pool_metadata(encoder, images[pool_rows], labels[pool_rows]),
        "release": _RELEASE,
        "citation": "UCI ML hand-written digits (Alpaydin & Kaynak 1998), as bundled with scikit-learn",
    }
    return ImageSplit(encoder=encoder, pool_images=images[pool_rows], pool_labels=labels[pool_rows],
                      pool_ids=np.array([f"digits:{i}" for i in pool_rows]), train_rows=train_rows,
                      calibration_rows=calibration_rows, metadata=metadata)


def split_digits(
    seed: SeedLike = None,
    *,
    bins: int = 10,
    train: int = DIGITS_DEFAULTS["train"],
    calibration: int = DIGITS_DEFAULTS["calibration"],
) -> ImageSplit:
    """Split scikit-learn's 1,797 digits (8x8, pixels 0..16) with ``seed`` into ``train`` images
    for the classifier, ``calibration`` images for the bins and the rest as the pool, and fit the
    encoder.  :func:`load_digits_population` with the same seed makes this split, then draws from
    the pool with the same generator."""
    rng, recorded = resolve_rng(seed)
    return _split_digits(rng, recorded, bins, train, calibration)


def _split_mnist(directory: str | Path, rng: np.random.Generator, recorded_seed: int | None, bins: int,
                 train_size: int, calibration_size: int) -> ImageSplit:
    bins = check_bins(bins)
    files = find_mnist_files(directory)
    available = read_idx_shape(files["train-images"])[0]
    train_size, calibration_size = _resolve_split_sizes(train_size, calibration_size, available,
                                                        f"the MNIST training file ({files['train-images'].name})")
    train_images, train_labels = read_idx(files["train-images"]), read_idx(files["train-labels"])
    test_images, test_labels = read_idx(files["test-images"]), read_idx(files["test-labels"])
    for role, values in (("train-labels", train_labels), ("test-labels", test_labels)):
        if values.size and values.max() > 9:
            raise DataFormatError(f"{files[role]}: MNIST labels must be 0..9, found {int(values.max())}.")
    order = rng.permutation(available)
    train_rows = np.sort(order[:train_size])
    calibration_rows = np.sort(order[train_size:train_size + calibration_size])
    encoder, classifier = fit_confidence_encoder(train_images[train_rows], train_labels[train_rows],
                                                 train_images[calibration_rows], bins=bins, pixel_max=255.0,
                                                 max_iter=MNIST_MAX_ITER, classes=10)
    pool_labels = test_labels.astype(np.int64)
    metadata = {
        "source": "mnist-idx",
        "directory": str(Path(directory).resolve()),
        "files": {role: path.name for role, path in files.items()},
        "seed": recorded_seed,
        "bins": bins,
        "encoding": ENCODING,
        "image_shape": list(test_images.shape[1:]),
        "split": {"train": train_size, "calibration": calibration_size, "pool": int(test_images.shape[0]),
                  "training_file_images": int(available)},
        "classifier": classifier,
        **_pool_metadata(encoder, test_images, pool_labels),
        "release": _RELEASE,
        "citation": "Y. LeCun, C. Cortes, C. J. C. Burges, The MNIST database of handwritten digits",
    }
    return ImageSplit(encoder=encoder, pool_images=test_images, pool_labels=pool_labels,
                      pool_ids=np.array([f"mnist-t10k:{i}" for i in range(test_images.shape[0])]),
                      train_rows=train_rows, calibration_rows=calibration_rows, metadata=metadata)


def split_mnist(
    directory: str | Path,
    seed: SeedLike = None,
    *,
    bins: int = 10,
    train_size: int = MNIST_DEFAULTS["train"],
    calibration_size: int = MNIST_DEFAULTS["calibration"],
) -> ImageSplit:
    """Read the MNIST IDX files in ``directory`` (:func:`bngp.data.idx.find_mnist_files`), draw
    ``train_size`` training images for the classifier and ``calibration_size`` other training
    images for the bins with ``seed``, fit the encoder; the pool is the whole test (t10k) set."""
    rng, recorded = resolve_rng(seed)
    return _split_mnist(directory, rng, recorded, bins, train_size, calibration_size)


def _population(split: ImageSplit, individuals: int | None, reference: int | None, rng: np.random.Generator,
                defaults: tuple[int, int], what: str) -> Population:
    k, r = resolve_pool_sizes(individuals, reference, split.pool_size, defaults, f"pool images of {what}")
    drawn = rng.choice(split.pool_size, size=k + r, replace=False)
    member_rows, reference_rows = np.sort(drawn[:k]), np.sort(drawn[k:])
    metadata = dict(split.metadata)
    metadata["split"] = {**metadata["split"], "individuals": k, "reference": r}
    return Population(
        genotypes=split.encoder.encode(split.pool_images[member_rows]),
        reference=split.encoder.encode(split.pool_images[reference_rows]),
        ids=split.pool_ids[member_rows],
        reference_ids=split.pool_ids[reference_rows],
        attribute_names=split.encoder.attribute_names(),
        metadata=metadata,
    )


def load_digits_population(
    individuals: int | None = None,
    reference: int | None = None,
    *,
    seed: SeedLike = None,
    bins: int = 10,
    train: int = DIGITS_DEFAULTS["train"],
    calibration: int = DIGITS_DEFAULTS["calibration"],
) -> Population:
    """The image experiment on scikit-learn's bundled 8x8 digits (offline; module docstring).

    Args:
        individuals: K images who may be members, drawn from the pool.
        reference: R other pool images, the reference panel.  Both ``None``: K = 600, R = 400
            (the whole default pool of 1,000); one ``None``: the rest of the pool.
        seed: int seed (recorded in the metadata), ``None`` (a fresh seed, recorded) or a
            Generator.  It draws the split (:func:`split_digits`) and then the K + R pool images
            (the first K of a uniform draw are the individuals; each group in dataset order).
        bins: B >= 2, confidence bins per class (|Q| <= 10 B).
        train: images that train the classifier.
        calibration: images that set the bin edges; the pool is the other 1797 - train - calibration.

    Returns:
        A :class:`Population` with ids ``digits:IDX``, ``attribute_names`` ``p(c) in [lo, hi)`` and
        metadata recording the source, seed, bins, split sizes, the classifier and its accuracy on
        the pool (``pool_accuracy``), the bin edges and the release.

    Raises:
        InputError: bins < 2, a non-positive size, or sizes that do not fit.

    >>> population = load_digits_population(60, 40, seed=0, bins=4)
    >>> population.genotypes.shape, population.reference.shape, int(population.genotypes.sum(axis=1).max())
    ((60, 40), (40, 40), 10)
    >>> str(population.ids[0])[:7], population.metadata["source"]
    ('digits:', 'sklearn-digits')
    """
    defaults = (DIGITS_DEFAULTS["individuals"], DIGITS_DEFAULTS["reference"])
    check_bins(bins)
    train, calibration = _resolve_split_sizes(train, calibration, DIGITS_IMAGES, "sklearn's digits")
    resolve_pool_sizes(individuals, reference, DIGITS_IMAGES - train - calibration, defaults, "pool images of the digits")
    rng, recorded = resolve_rng(seed)
    split = _split_digits(rng, recorded, bins, train, calibration)
    return _population(split, individuals, reference, rng, defaults, "the digits")


def load_mnist_population(
    directory: str | Path,
    individuals: int | None = None,
    reference: int | None = None,
    *,
    seed: SeedLike = None,
    bins: int = 10,
    train_size: int = MNIST_DEFAULTS["train"],
    calibration_size: int = MNIST_DEFAULTS["calibration"],
) -> Population:
    """The paper's image experiment on MNIST read from IDX files (module docstring).

    Args:
        directory: folder with the four MNIST files (:func:`bngp.data.idx.find_mnist_files`).
        individuals: K test images who may be members.
        reference: R other test images, the reference panel.  Both ``None``: K = R = 800; one
            ``None``: the rest of the 10,000 test images.
        seed: int seed (recorded), ``None`` (fresh, recorded) or a Generator; it draws the
            training and calibration images, then the K + R test images.
        bins: B >= 2, confidence bins per class.
        train_size: training images that train the classifier (drawn from the 60,000).
        calibration_size: other training images that set the bin edges.

    Returns:
        A :class:`Population` with ids ``mnist-t10k:IDX`` and metadata as for
        :func:`load_digits_population` (source ``mnist-idx`` and the directory).

    Raises:
        MissingFileError: the folder or one of the files is missing.
        DataFormatError: a malformed IDX file or inconsistent files.
        InputError: bins < 2, a non-positive size, or sizes that do not fit.

    The sizes are checked against the IDX headers before any file is read in full.
    """
    defaults = (MNIST_DEFAULTS["individuals"], MNIST_DEFAULTS["reference"])
    check_bins(bins)
    files = find_mnist_files(directory)  # headers only: sizes are checked before the files are read
    _resolve_split_sizes(train_size, calibration_size, read_idx_shape(files["train-images"])[0],
                         f"the MNIST training file ({files['train-images'].name})")
    resolve_pool_sizes(individuals, reference, read_idx_shape(files["test-images"])[0], defaults, "pool images of MNIST t10k")
    rng, recorded = resolve_rng(seed)
    split = _split_mnist(directory, rng, recorded, bins, train_size, calibration_size)
    return _population(split, individuals, reference, rng, defaults, "MNIST t10k")
