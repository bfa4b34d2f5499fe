"""Images as a population: the paper's image experiment (MNIST), and sklearn's 8x8 digits.

arXiv:2410.07414 (Zhang et al., BNGP), appendix L.5: "the original mechanism is a trained
classifier that outputs predicted class probabilities for given input images ... trained on the
MNIST training set ... we consider the privacy of the test data (inference dataset) used to query
the classifier.  The attacker aims to infer whether a specific test image belongs to the inference
dataset based on the output probabilities."  The paper does not say how the outputs of a whole
query set are released; this module fixes that release, so that an image population is the same
kind of object as a genome or the Adult table (:class:`~bngp.data.population.Population`: K
individuals x |Q| binary attributes plus a disjoint reference panel; the release is the vector of
attribute proportions among the n members) and the game, every attack, defense and audit run on
it unchanged.

**The classifier.**  A multinomial logistic regression C (scikit-learn ``LogisticRegression``,
lbfgs, deterministic; L2 penalty C = 1; pixels scaled to [0, 1]) is fitted on a training split
disjoint from every other image used.  It maps an image x to p(x) in the simplex of the L = 10
classes: p(x) = softmax(W x / s + w_0), s the largest pixel value (16 for digits, 255 for MNIST).

**The encoding ("confidence bins").**  For each class c, the B - 1 interior edges
e_c,1 < ... < e_c,B-1 are the quantiles at levels 1/B, ..., (B-1)/B of log p_c over a
calibration split (disjoint from the training split and from the pool); equal quantiles are kept
once, so a class may have fewer than B bins.  Bin b of class c is [e_c,b, e_c,b+1) on the log
scale (e_c,0 = -inf, the last bin closed at log 1 = 0).  The binary attribute (c, b) of image x is

    d_(c,b)(x) = 1  iff  e_c,b <= log p_c(x) < e_c,b+1,

so every image has exactly one 1 in each class's group of columns: L = 10 ones in
|Q| <= L * B columns.  The bins are quantiles of log p_c, not of p_c: the classifier is confident,
so p_c of the wrong classes spans many orders of magnitude and underflows near 0 on the linear
scale (where its quantiles would tie); the bins are the same sets of images either way.

**The release.**  For a query (inference) set D of n images, the released statistic is the mean
of the members' rows,

    x_(c,b) = (1/n) * #{ x in D : log p_c(x) in bin (c, b) },

the per-class histograms of the classifier's output probabilities on the inference set: an
aggregate of the output probabilities.  Membership is whether an image was in the queried set;
the individuals are K images of the pool, the reference panel R other pool images (never members;
the LRT and score attacks use their bin frequencies).

**Why the aggregate and not the per-image outputs.**  The per-image output vectors of an
unordered query set reveal membership exactly to anyone who can query the deterministic classifier
on the target image (the target is a member iff its output vector is in the set): no noise short
of destroying the utility protects them, and they are not a summary statistic.  The per-class
output histogram is what a model monitor publishes (calibration and confidence histograms); it is
a summary statistic of the same kind as allele frequencies, so every attack, defense, audit and
the game apply.

==============  ========================================  ============================================
data set        classifier training / calibration         pool (individuals + reference)
==============  ========================================  ============================================
``digits``      500 / 297 of sklearn's 1,797 8x8 images    the other 1,000 (defaults K = 600, R = 400)
``mnist``       10,000 / 2,000 of the 60,000 train images  the 10,000 t10k test images (K = 800, R = 800)
==============  ========================================  ============================================

The splits are drawn with the seed; ids are ``digits:IDX`` (0-based row of
``sklearn.datasets.load_digits``) and ``mnist-t10k:IDX`` (0-based image of the t10k file).
Times on one core (OMP_NUM_THREADS=1): ``load_digits_population()`` about 0.05 s, plus about 2 s
to import scikit-learn the first time; ``load_mnist_population`` at the default sizes (10,000 x 784
training images, 200 lbfgs iterations) about 8-10 s: 0.5 s reading the gzip files, 7 s fitting
the classifier, 0.04 s encoding the 10,000 test images.  These were measured on MNIST-shaped
stand-in files (60,000 + 10,000 digits upsampled to 28 x 28 with noise; the cost of an lbfgs
iteration depends only on the sizes).  MNIST itself is not shipped: pass the folder holding the
four IDX files (http://yann.lecun.com/exdb/mnist/ or a mirror).
"""

from __future__ import annotations

import functools
import gzip
import math
import warnings
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from bngp.data.population import Population, resolve_pool_sizes
from bngp.errors import DataFormatError, InputError, MissingFileError
from bngp.rng import SeedLike, resolve_rng
from bngp.validation import check_positive_int

__all__ = [
    "IDX_TYPES",
    "MNIST_FILES",
    "DIGITS_IMAGES",
    "DIGITS_DEFAULTS",
    "MNIST_DEFAULTS",
    "ConfidenceEncoder",
    "ImageSplit",
    "read_idx",
    "read_idx_shape",
    "find_mnist_files",
    "fit_confidence_encoder",
    "split_digits",
    "split_mnist",
    "load_digits_population",
    "load_mnist_population",
]

#: IDX type byte -> big-endian numpy dtype (0x08 unsigned byte is MNIST's).
IDX_TYPES: dict[int, str] = {0x08: ">u1", 0x09: ">i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}

#: role -> the standard MNIST file name (also accepted: ``.gz``, and ``.idx3-ubyte`` for ``-idx3-ubyte``).
MNIST_FILES: dict[str, str] = {
    "train-images": "train-images-idx3-ubyte",
    "train-labels": "train-labels-idx1-ubyte",
    "test-images": "t10k-images-idx3-ubyte",
    "test-labels": "t10k-labels-idx1-ubyte",
}

#: images in scikit-learn's bundled digits data set.
DIGITS_IMAGES = 1797

#: default sizes: classifier training split, calibration split, individuals K, reference panel R.
DIGITS_DEFAULTS: dict[str, int] = {"train": 500, "calibration": 297, "individuals": 600, "reference": 400}
MNIST_DEFAULTS: dict[str, int] = {"train": 10_000, "calibration": 2_000, "individuals": 800, "reference": 800}

#: L2 penalty and lbfgs iterations of the classifier (digits converges well within its budget).
CLASSIFIER_C = 1.0
DIGITS_MAX_ITER = 1000
MNIST_MAX_ITER = 200

#: version of the encoding above, recorded in the population metadata.
ENCODING = "confidence-bins-v1"

_GZIP_MAGIC = b"\x1f\x8b"
_RELEASE = ("per-class histograms of the classifier's output probabilities on the inference set: "
            "x_(c,b) = share of queried images with log p_c in bin b (quantile bins of a calibration split)")


# ----------------------------------------------------------------------------------------------
# IDX files
# ----------------------------------------------------------------------------------------------


def _is_gzip(path: Path) -> bool:
    with path.open("rb") as handle:
        return handle.read(2) == _GZIP_MAGIC


def _open_idx(path: str | Path) -> tuple[Path, bool]:
    path = Path(path)
    if path.is_dir():
        raise InputError(f"IDX file is a directory, not a file: {path}")
    if not path.is_file():
        raise MissingFileError(f"IDX file not found: {path}")
    try:
        return path, _is_gzip(path)
    except OSError as exc:
        raise MissingFileError(f"IDX file cannot be read: {path} ({exc.strerror})") from None


def _parse_header(path: Path, head: bytes) -> tuple[np.dtype, tuple[int, ...], int]:
    """(dtype, shape, header length) of the IDX bytes ``head`` (at least the whole header)."""
    if len(head) < 4 or head[0] != 0 or head[1] != 0:
        raise DataFormatError(f"{path} is not an IDX file: its magic number must start with two zero bytes.")
    type_code, dims = head[2], head[3]
    if type_code not in IDX_TYPES:
        raise DataFormatError(f"{path}: unknown IDX data type byte 0x{type_code:02X} "
                              f"(known: {', '.join(f'0x{c:02X}' for c in IDX_TYPES)}).")
    if dims == 0:
        raise DataFormatError(f"{path}: an IDX file must have at least one dimension, got 0.")
    length = 4 + 4 * dims
    if len(head) < length:
        raise DataFormatError(f"{path}: truncated IDX header ({len(head)} bytes, {dims} dimensions need {length}).")
    shape = tuple(int(n) for n in np.frombuffer(head[4:length], dtype=">u4"))
    return np.dtype(IDX_TYPES[type_code]), shape, length


def _read_bytes(path: Path, gzipped: bool, limit: int | None = None) -> bytes:
    try:
        if gzipped:
            with gzip.open(path, "rb") as handle:
                return handle.read() if limit is None else handle.read(limit)
        with path.open("rb") as handle:
            return handle.read() if limit is None else handle.read(limit)
    except (EOFError, zlib.error, gzip.BadGzipFile) as exc:
        raise DataFormatError(f"{path}: damaged gzip stream ({type(exc).__name__}).") from None
    except OSError as exc:
        raise MissingFileError(f"IDX file cannot be read: {path} ({exc.strerror or type(exc).__name__})") from None


def read_idx_shape(path: str | Path) -> tuple[int, ...]:
    """The dimensions in the header of the IDX file ``path`` (plain or gzip-compressed), read
    without the data.  Raises like :func:`read_idx` on a missing file or a malformed header."""
    path, gzipped = _open_idx(path)
    head = _read_bytes(path, gzipped, limit=4 + 4 * 255)
    return _parse_header(path, head)[1]


def read_idx(path: str | Path) -> np.ndarray:
    """The array stored in the IDX file ``path`` (the MNIST format), plain or gzip-compressed
    (recognised by its magic bytes, whatever the name).

    Layout: a 4-byte magic number (two zero bytes, a type byte, the number of dimensions D),
    D big-endian uint32 sizes, then the data in row-major order, big-endian.  Type bytes:
    :data:`IDX_TYPES` (0x08: unsigned byte).  Returns a read-write array of that shape in native
    byte order.  No pickle is involved.

    Raises:
        MissingFileError: no such file, or it cannot be read.
        DataFormatError: a bad magic number or type byte, a truncated header, a damaged gzip
            stream, or data whose length is not the product of the sizes (named in the message).

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     path = Path(folder) / "labels-idx1-ubyte"  # magic 0 0 8 1 (ubyte, 1 dim), size 3, data
    ...     _ = path.write_bytes(bytes([0, 0, 8, 1, 0, 0, 0, 3, 7, 2, 1]))
    ...     read_idx(path).tolist()
    [7, 2, 1]
    """
    path, gzipped = _open_idx(path)
    content = _read_bytes(path, gzipped)
    dtype, shape, start = _parse_header(path, content)
    expected = math.prod(shape) * dtype.itemsize
    found = len(content) - start
    if found != expected:
        raise DataFormatError(f"{path}: the header's sizes {'x'.join(map(str, shape))} need {expected} data bytes, "
                              f"the file has {found} ({'truncated' if found < expected else 'trailing bytes'}).")
    return np.frombuffer(content, dtype=dtype, offset=start).reshape(shape).astype(dtype.newbyteorder("="))


def _candidates(name: str) -> list[str]:
    dotted = name.replace("-idx", ".idx")
    return [name, name + ".gz", dotted, dotted + ".gz"]


def find_mnist_files(directory: str | Path) -> dict[str, Path]:
    """The four MNIST IDX files in ``directory``: role (``train-images``, ``train-labels``,
    ``test-images``, ``test-labels``) -> path.

    Each standard name (:data:`MNIST_FILES`, e.g. ``train-images-idx3-ubyte``) is accepted plain
    or with ``.gz``, and with the common dot spelling ``train-images.idx3-ubyte``.  Only the
    headers are read: images must be 3-dimensional (count x rows x columns, unsigned bytes),
    labels 1-dimensional (unsigned bytes), each image file as long as its label file, and the
    training and test images of the same size.

    Raises:
        MissingFileError: ``directory`` is not a folder, or files are missing (all named).
        DataFormatError: a malformed header or sizes that do not agree.
    """
    folder = Path(directory)
    if not folder.is_dir():
        raise MissingFileError(f"MNIST directory not found: {folder}")
    found: dict[str, Path] = {}
    missing = []
    for role, name in MNIST_FILES.items():
        path = next((folder / c for c in _candidates(name) if (folder / c).is_file()), None)
        if path is None:
            missing.append(name)
        else:
            found[role] = path
    if missing:
        raise MissingFileError(f"MNIST directory {folder} lacks {', '.join(missing)} (plain or .gz).")
    shapes = {}
    for role, path in found.items():
        path, gzipped = _open_idx(path)
        dtype, shape, _ = _parse_header(path, _read_bytes(path, gzipped, limit=4 + 4 * 255))
        want = 3 if role.endswith("images") else 1
        if len(shape) != want or dtype != np.dtype(">u1"):
            raise DataFormatError(f"{path}: MNIST {role} must be a {want}-dimensional unsigned-byte IDX array, "
                                  f"got {len(shape)} dimensions of {dtype.name}.")
        shapes[role] = shape
    for part in ("train", "test"):
        images, labels = shapes[f"{part}-images"][0], shapes[f"{part}-labels"][0]
        if images != labels:
            raise DataFormatError(f"MNIST {part} files disagree: {found[f'{part}-images'].name} has {images} images, "
                                  f"{found[f'{part}-labels'].name} {labels} labels.")
    if shapes["train-images"][1:] != shapes["test-images"][1:]:
        raise DataFormatError(f"MNIST training images are {shapes['train-images'][1:]}, test images "
                              f"{shapes['test-images'][1:]}: they must have the same size.")
    return found


# ----------------------------------------------------------------------------------------------
# the encoder: classifier + confidence bins
# ----------------------------------------------------------------------------------------------


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


def _check_bins(bins: int) -> int:
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

    bins = _check_bins(bins)
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


# ----------------------------------------------------------------------------------------------
# splits and populations
# ----------------------------------------------------------------------------------------------


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
    bins = _check_bins(bins)
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
    bins = _check_bins(bins)
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
    """Read the MNIST IDX files in ``directory`` (:func:`find_mnist_files`), draw ``train_size``
    training images for the classifier and ``calibration_size`` other training images for the
    bins with ``seed``, fit the encoder; the pool is the whole test (t10k) set."""
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
        the pool (``pool_accuracy``, about 0.95), the bin edges and the release.

    Raises:
        InputError: bins < 2, a non-positive size, or sizes that do not fit.

    >>> population = load_digits_population(60, 40, seed=0, bins=4)
    >>> population.genotypes.shape, population.reference.shape, int(population.genotypes.sum(axis=1).max())
    ((60, 40), (40, 40), 10)
    >>> str(population.ids[0])[:7], population.metadata["source"]
    ('digits:', 'sklearn-digits')
    """
    defaults = (DIGITS_DEFAULTS["individuals"], DIGITS_DEFAULTS["reference"])
    _check_bins(bins)
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
        directory: folder with the four MNIST files (:func:`find_mnist_files`).
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

    Time on one core at the defaults: about 8-10 s (reading, and 200 lbfgs iterations on
    10,000 x 784 pixels; measured on MNIST-shaped stand-in files).  The sizes are checked
    against the IDX headers before any file is read in full.
    """
    defaults = (MNIST_DEFAULTS["individuals"], MNIST_DEFAULTS["reference"])
    _check_bins(bins)
    files = find_mnist_files(directory)  # headers only: sizes are checked before the files are read
    _resolve_split_sizes(train_size, calibration_size, read_idx_shape(files["train-images"])[0],
                         f"the MNIST training file ({files['train-images'].name})")
    resolve_pool_sizes(individuals, reference, read_idx_shape(files["test-images"])[0], defaults, "pool images of MNIST t10k")
    rng, recorded = resolve_rng(seed)
    split = _split_mnist(directory, rng, recorded, bins, train_size, calibration_size)
    return _population(split, individuals, reference, rng, defaults, "MNIST t10k")
