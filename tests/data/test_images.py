"""The image populations (bngp.data.images, idx, confidence): IDX files read back exactly and
refused when malformed, the confidence-bin encoding and its release checked against a direct histogram of the classifier's
probabilities, bins at calibration quantiles, seeded disjoint splits, MNIST from a fake IDX folder,
and a membership signal in the exact release."""

from __future__ import annotations

import gzip
import math
from pathlib import Path

import numpy as np
import pytest
from sklearn.datasets import load_digits
from sklearn.linear_model import LogisticRegression

from bngp.data.confidence import ConfidenceEncoder, fit_confidence_encoder
from bngp.data.idx import find_mnist_files, read_idx, read_idx_shape
from bngp.data.images import DIGITS_IMAGES, load_digits_population, load_mnist_population, split_digits, split_mnist
from bngp.data.npz import load_population, save_population
from bngp.data.population import Population
from bngp.data.priors import UniformSubsetPrior
from bngp.defenses.base import NoDefense
from bngp.errors import DataFormatError, InputError, MissingFileError
from bngp.evaluate import evaluate_defense

DIGITS = load_digits()


def idx_bytes(array: np.ndarray, type_byte: int = 0x08) -> bytes:
    dtype = {0x08: ">u1", 0x0B: ">i2", 0x0D: ">f4"}[type_byte]
    header = bytes([0, 0, type_byte, array.ndim]) + np.asarray(array.shape, dtype=">u4").tobytes()
    return header + np.ascontiguousarray(array, dtype=dtype).tobytes()


def write_idx(path: Path, array: np.ndarray, type_byte: int = 0x08) -> Path:
    content = idx_bytes(array, type_byte)
    path.write_bytes(gzip.compress(content) if path.name.endswith(".gz") else content)
    return path


def fake_mnist_images(rows: np.ndarray) -> np.ndarray:
    """sklearn's 8x8 digits (0..16) upsampled 3x3 to 24x24, padded to 28x28, scaled to 0..240."""
    big = np.kron(DIGITS.images[rows], np.ones((1, 3, 3))) * 15
    return np.pad(big, ((0, 0), (2, 2), (2, 2))).astype(np.uint8)


@pytest.fixture(scope="module")
def mnist_dir(tmp_path_factory):
    """A fake MNIST folder: 500 training and 300 test images, images gzip-compressed, labels plain."""
    folder = tmp_path_factory.mktemp("mnist")
    order = np.random.default_rng(0).permutation(DIGITS_IMAGES)
    train, test = order[:500], order[500:800]
    write_idx(folder / "train-images-idx3-ubyte.gz", fake_mnist_images(train))
    write_idx(folder / "train-labels-idx1-ubyte", DIGITS.target[train].astype(np.uint8))
    write_idx(folder / "t10k-images-idx3-ubyte.gz", fake_mnist_images(test))
    write_idx(folder / "t10k-labels-idx1-ubyte", DIGITS.target[test].astype(np.uint8))
    return folder


# ----------------------------------------------------------------------------------------------
# IDX files
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("suffix", ["", ".gz"])
def test_read_idx_round_trip(tmp_path, suffix):
    rng = np.random.default_rng(1)
    images = rng.integers(0, 256, size=(7, 5, 3), dtype=np.uint8)
    labels = rng.integers(0, 10, size=7, dtype=np.uint8)
    back = read_idx(write_idx(tmp_path / f"images-idx3-ubyte{suffix}", images))
    assert back.dtype == np.uint8 and back.shape == (7, 5, 3) and np.array_equal(back, images)
    back = read_idx(write_idx(tmp_path / f"labels-idx1-ubyte{suffix}", labels))
    assert back.shape == (7,) and np.array_equal(back, labels)
    assert read_idx_shape(tmp_path / f"images-idx3-ubyte{suffix}") == (7, 5, 3)
    shorts = rng.integers(-3000, 3000, size=(4, 2)).astype(np.int16)  # a big-endian type other than bytes
    back = read_idx(write_idx(tmp_path / f"shorts{suffix}", shorts, type_byte=0x0B))
    assert back.dtype == np.int16 and back.dtype.byteorder in "=|" and np.array_equal(back, shorts)


def test_read_idx_sniffs_gzip_whatever_the_name(tmp_path):
    labels = np.arange(10, dtype=np.uint8)
    (tmp_path / "labels").write_bytes(gzip.compress(idx_bytes(labels)))
    assert np.array_equal(read_idx(tmp_path / "labels"), labels)


def test_malformed_idx_files_are_refused(tmp_path):
    good = idx_bytes(np.zeros((3, 2, 2), dtype=np.uint8))
    cases = {
        "bad-magic": (b"\x01" + good[1:], "magic"),
        "unknown-type": (good[:2] + b"\x07" + good[3:], "0x07"),
        "zero-dims": (good[:3] + b"\x00", "at least one dimension"),
        "truncated-header": (good[:9], "truncated IDX header"),
        "truncated-data": (good[:-1], "truncated"),
        "trailing-bytes": (good + b"\x00", "trailing"),
        "empty": (b"", "magic"),
    }
    for name, (content, fragment) in cases.items():
        path = tmp_path / name
        path.write_bytes(content)
        with pytest.raises(DataFormatError, match=fragment) as info:
            read_idx(path)
        assert str(path) in str(info.value) and "\n" not in str(info.value), name
    damaged = tmp_path / "damaged.gz"
    damaged.write_bytes(gzip.compress(good)[:-12])
    with pytest.raises(DataFormatError, match="gzip"):
        read_idx(damaged)
    with pytest.raises(MissingFileError, match="not found"):
        read_idx(tmp_path / "absent-idx3-ubyte")
    with pytest.raises(InputError, match="IDX file is a directory, not a file"):
        read_idx(tmp_path)


def test_find_mnist_files(tmp_path, mnist_dir):
    found = find_mnist_files(mnist_dir)
    assert found["train-images"].name == "train-images-idx3-ubyte.gz"
    assert found["test-labels"].name == "t10k-labels-idx1-ubyte"
    dotted = tmp_path / "dotted"
    dotted.mkdir()
    for role, path in found.items():
        (dotted / path.name.replace("-idx", ".idx")).write_bytes(path.read_bytes())
    assert find_mnist_files(dotted)["train-images"].name == "train-images.idx3-ubyte.gz"
    partial = tmp_path / "partial"
    partial.mkdir()
    (partial / "train-images-idx3-ubyte.gz").write_bytes(found["train-images"].read_bytes())
    with pytest.raises(MissingFileError, match="train-labels-idx1-ubyte, t10k-images-idx3-ubyte, t10k-labels"):
        find_mnist_files(partial)
    with pytest.raises(MissingFileError, match="not found"):
        find_mnist_files(tmp_path / "nowhere")
    mismatched = tmp_path / "mismatched"
    mismatched.mkdir()
    for path in found.values():
        (mismatched / path.name).write_bytes(path.read_bytes())
    write_idx(mismatched / "t10k-labels-idx1-ubyte", np.zeros(299, dtype=np.uint8))
    with pytest.raises(DataFormatError, match="300 images.*299 labels"):
        find_mnist_files(mismatched)
    write_idx(mismatched / "t10k-labels-idx1-ubyte", np.zeros((300, 1), dtype=np.uint8))
    with pytest.raises(DataFormatError, match="1-dimensional"):
        find_mnist_files(mismatched)


# ----------------------------------------------------------------------------------------------
# the encoding and the release
# ----------------------------------------------------------------------------------------------


def test_hand_checked_encoder():
    """Two classes, one pixel: p_0 = sigmoid(2x); bins of class 0 at p = 0.25 and 0.75, class 1 one edge at 0.5."""
    encoder = ConfidenceEncoder(coef=[[1.0], [-1.0]], intercept=[0.0, 0.0],
                                edges=(np.log([0.25, 0.75]), np.log([0.5])), pixel_max=1.0)
    assert encoder.n_classes == 2 and encoder.bins_per_class == (3, 2) and encoder.n_attributes == 5
    x = np.array([[-2.0], [0.1], [2.0]])  # p_0 = 0.018, 0.550, 0.982
    assert np.allclose(encoder.probabilities(x)[:, 0], 1 / (1 + np.exp(-2 * x[:, 0])))
    assert encoder.encode(x).tolist() == [[1, 0, 0, 0, 1], [0, 1, 0, 1, 0], [0, 0, 1, 1, 0]]
    assert encoder.attribute_names().tolist() == ["p(0) in [0, 0.25)", "p(0) in [0.25, 0.75)", "p(0) in [0.75, 1]",
                                                  "p(1) in [0, 0.5)", "p(1) in [0.5, 1]"]
    with pytest.raises(DataFormatError, match="increasing"):
        ConfidenceEncoder(coef=[[1.0]], intercept=[0.0], edges=(np.log([0.5, 0.25]),), pixel_max=1.0)
    with pytest.raises(DataFormatError, match="pixels"):
        encoder.encode(np.zeros((2, 3)))


@pytest.fixture(scope="module")
def digits_split():
    return split_digits(seed=5)


def test_fit_matches_scikit_learn(digits_split):
    train = digits_split.train_rows
    model = LogisticRegression(C=1.0, max_iter=1000).fit(DIGITS.images[train].reshape(len(train), -1) / 16,
                                                         DIGITS.target[train])
    pool = digits_split.pool_images
    expected = model.predict_proba(pool.reshape(len(pool), -1) / 16)
    assert np.allclose(digits_split.encoder.probabilities(pool), expected, atol=1e-6)
    assert digits_split.metadata["classifier"]["converged"]


def test_fit_confidence_encoder_checks_its_input():
    images, labels = DIGITS.images[:300], DIGITS.target[:300]
    encoder, details = fit_confidence_encoder(images, labels, DIGITS.images[300:400], bins=3, pixel_max=16.0)
    assert encoder.n_classes == 10 and encoder.n_pixels == 64 and max(encoder.bins_per_class) <= 3
    assert details["converged"] == (details["iterations"] < details["max_iter"])
    assert 0.9 < details["training_accuracy"] <= 1
    with pytest.raises(DataFormatError, match="one class per image"):
        fit_confidence_encoder(images, labels[:-1], DIGITS.images[300:400])
    with pytest.raises(InputError, match=r"missing \[9\]"):
        fit_confidence_encoder(images[labels < 9], labels[labels < 9], DIGITS.images[300:400], classes=10)
    with pytest.raises(InputError, match="bins"):
        fit_confidence_encoder(images, labels, DIGITS.images[300:400], bins=1)
    with pytest.raises(InputError, match="at least `bins` = 10"):
        fit_confidence_encoder(images, labels, DIGITS.images[300:305], bins=10)


def test_bin_edges_are_calibration_quantiles(digits_split):
    encoder = digits_split.encoder
    calibration = DIGITS.images[digits_split.calibration_rows].reshape(-1, 64) / 16
    logits = calibration @ encoder.coef.T + encoder.intercept
    log_p = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
    for c in range(10):
        expected = np.unique(np.quantile(log_p[:, c], np.arange(1, 10) / 10))
        assert np.allclose(encoder.edges[c], expected, rtol=1e-12, atol=1e-12), c
    # each bin holds about a tenth of the calibration images
    shares = encoder.encode(DIGITS.images[digits_split.calibration_rows]).mean(axis=0)
    assert np.all(np.abs(shares - 0.1) < 0.01)


def test_release_is_the_per_class_histogram_of_the_probabilities(digits_split):
    population = load_digits_population(300, 200, seed=5)
    encoder = digits_split.encoder
    assert population.n_attributes == encoder.n_attributes == 100
    for matrix in (population.genotypes, population.reference):
        for columns in encoder.groups().values():
            assert np.all(matrix[:, columns].sum(axis=1) == 1)
    pool_row = {name: i for i, name in enumerate(digits_split.pool_ids.tolist())}
    members = np.random.default_rng(0).choice(300, size=120, replace=False)
    images = digits_split.pool_images[[pool_row[name] for name in population.ids[members]]]
    release = population.genotypes[members].mean(axis=0)
    probabilities = encoder.probabilities(images)
    histogram = np.concatenate([
        np.histogram(probabilities[:, c], bins=np.concatenate([[0.0], np.exp(edges), [1.0]]))[0] / len(images)
        for c, edges in enumerate(encoder.edges)
    ])
    assert np.array_equal(release, histogram)
    assert np.array_equal(population.genotypes, encoder.encode(digits_split.pool_images[
        [pool_row[name] for name in population.ids]]))


def test_attribute_names(digits_split):
    names = load_digits_population(20, 20, seed=5, bins=4).attribute_names
    assert names.dtype.kind == "U" and len(set(names.tolist())) == len(names)
    assert names[0].startswith("p(0) in [0, ") and names[-1].startswith("p(9) in [") and names[-1].endswith(", 1]")
    full = digits_split.encoder.attribute_names()
    assert len(full) == 100 and all(name.startswith(f"p({c}) in [") for c in range(10) for name in full[10 * c:10 * c + 10])


# ----------------------------------------------------------------------------------------------
# splits, seeds, sizes
# ----------------------------------------------------------------------------------------------


def test_seeded_draws_are_reproducible_and_disjoint(digits_split):
    a = load_digits_population(seed=5)
    b = load_digits_population(seed=5)
    c = load_digits_population(seed=6)
    assert isinstance(a, Population) and a.genotypes.shape == (600, 100) and a.reference.shape == (400, 100)
    assert np.array_equal(a.ids, b.ids) and np.array_equal(a.genotypes, b.genotypes)
    assert np.array_equal(a.reference, b.reference) and a.metadata == b.metadata
    assert not np.array_equal(a.ids, c.ids)
    assert a.metadata["bin_edges_log_p"] != c.metadata["bin_edges_log_p"]  # another classifier and calibration
    train = set(digits_split.train_rows.tolist())
    calibration = set(digits_split.calibration_rows.tolist())
    individuals = {int(name.split(":")[1]) for name in a.ids}
    reference = {int(name.split(":")[1]) for name in a.reference_ids}
    assert len(train) == 500 and len(calibration) == 297 and len(individuals) == 600 and len(reference) == 400
    assert not (train & calibration or train & individuals or train & reference or calibration & individuals
                or calibration & reference or individuals & reference)
    assert train | calibration | individuals | reference == set(range(DIGITS_IMAGES))
    pool = {int(name.split(":")[1]) for name in digits_split.pool_ids}
    assert individuals | reference == pool
    meta = a.metadata
    assert meta["source"] == "sklearn-digits" and meta["seed"] == 5 and meta["bins"] == 10
    assert meta["split"] == {"train": 500, "calibration": 297, "pool": 1000, "individuals": 600, "reference": 400}
    assert 0.9 < meta["pool_accuracy"] <= 1 and "histogram" in meta["release"]
    fresh = load_digits_population(10, 10)
    assert isinstance(fresh.metadata["seed"], int)  # a fresh seed is recorded


def test_sizes_and_bins():
    assert load_digits_population(None, 100, seed=0).n_individuals == 900
    assert load_digits_population(100, None, seed=0).n_reference == 900
    small = load_digits_population(30, 30, seed=0, bins=3, train=300, calibration=100)
    assert small.n_attributes <= 30 and small.metadata["split"]["pool"] == 1397
    with pytest.raises(InputError, match="1000 pool images"):
        load_digits_population(700, 400, seed=0)
    with pytest.raises(InputError, match="bins"):
        load_digits_population(10, 10, seed=0, bins=1)
    with pytest.raises(InputError, match="individuals"):
        load_digits_population(0, 10, seed=0)
    with pytest.raises(InputError, match="1797"):
        load_digits_population(10, 10, seed=0, train=1500, calibration=400)
    with pytest.raises(InputError, match="every class"):
        load_digits_population(10, 10, seed=0, train=5)
    with pytest.raises(InputError, match="calibration"):
        load_digits_population(10, 10, seed=0, calibration=5, bins=10)


def test_npz_round_trip_without_pickle(tmp_path):
    population = load_digits_population(30, 20, seed=1)
    path = save_population(population, tmp_path / "digits.npz")
    with np.load(path, allow_pickle=False) as archive:
        assert archive["attribute_names"].dtype.kind == "U" and archive["ids"].dtype.kind == "U"
    back = load_population(path)
    assert np.array_equal(back.genotypes, population.genotypes)
    assert np.array_equal(back.attribute_names, population.attribute_names)
    assert back.metadata["source"] == "sklearn-digits" and back.metadata["split"]["individuals"] == 30


# ----------------------------------------------------------------------------------------------
# MNIST from IDX files
# ----------------------------------------------------------------------------------------------


def test_mnist_population_from_a_fake_folder(mnist_dir):
    population = load_mnist_population(mnist_dir, 120, 80, seed=2, bins=5, train_size=300, calibration_size=150)
    assert population.genotypes.shape[0] == 120 and population.reference.shape[0] == 80
    assert population.n_attributes <= 50 and np.all(population.genotypes.sum(axis=1) == 10)
    assert all(name.startswith("mnist-t10k:") for name in population.ids)
    assert not set(population.ids.tolist()) & set(population.reference_ids.tolist())
    meta = population.metadata
    assert meta["source"] == "mnist-idx" and meta["directory"] == str(Path(mnist_dir).resolve())
    assert meta["seed"] == 2 and meta["image_shape"] == [28, 28] and meta["pool_accuracy"] > 0.8
    assert meta["split"]["train"] == 300 and meta["split"]["calibration"] == 150 and meta["split"]["pool"] == 300
    again = load_mnist_population(mnist_dir, 120, 80, seed=2, bins=5, train_size=300, calibration_size=150)
    assert np.array_equal(again.genotypes, population.genotypes) and np.array_equal(again.ids, population.ids)
    split = split_mnist(mnist_dir, seed=2, bins=5, train_size=300, calibration_size=150)
    assert not set(split.train_rows.tolist()) & set(split.calibration_rows.tolist())
    rows = [int(name.split(":")[1]) for name in population.ids]
    assert np.array_equal(population.genotypes, split.encoder.encode(split.pool_images[rows]))
    with pytest.raises(InputError, match="500"):
        load_mnist_population(mnist_dir, 10, 10, seed=0, train_size=400, calibration_size=200)
    with pytest.raises(InputError, match="300 pool images"):
        load_mnist_population(mnist_dir, seed=0, train_size=300, calibration_size=150)  # defaults 800 + 800


def test_mnist_malformed_file_is_refused(tmp_path, mnist_dir):
    for path in mnist_dir.iterdir():
        (tmp_path / path.name).write_bytes(path.read_bytes())
    content = gzip.decompress((tmp_path / "t10k-images-idx3-ubyte.gz").read_bytes())
    (tmp_path / "t10k-images-idx3-ubyte.gz").write_bytes(gzip.compress(content[:-100]))
    with pytest.raises(DataFormatError, match="t10k-images-idx3-ubyte.gz.*truncated"):
        load_mnist_population(tmp_path, 10, 10, seed=0, train_size=300, calibration_size=150)


# ----------------------------------------------------------------------------------------------
# a membership signal
# ----------------------------------------------------------------------------------------------


def test_exact_release_leaks_membership():
    """K = 200, n = 100, no noise: the reconstruction attack's AUC was 0.898 (seed 0; 0.894 and 0.901
    for seeds 1 and 2, 20 releases); the LRT's 0.68."""
    population = load_digits_population(200, 100, seed=0)
    result = evaluate_defense(population, UniformSubsetPrior(200, 100), NoDefense(), "reconstruction,lrt",
                              releases=10, seed=0, n_members=100)
    assert result.attacks["reconstruction"].auc > 0.8
    assert result.attacks["lrt"].auc > 0.6
    assert math.isfinite(result.utility_loss) and result.utility_loss == 0.0
