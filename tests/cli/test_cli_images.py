"""``bngp data digits`` and ``bngp data mnist``: population files that evaluate and train take like a
simulated one, and bad input as one line on stderr with exit code 2 and nothing written."""

from __future__ import annotations

import gzip
import json
import math

import numpy as np
import pytest
from sklearn.datasets import load_digits

from bngp.cli import main
from bngp.data.npz import load_population


def run_cli(capsys, *argv):
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def write_idx(path, array):
    content = bytes([0, 0, 8, array.ndim]) + np.asarray(array.shape, dtype=">u4").tobytes() + array.tobytes()
    path.write_bytes(gzip.compress(content) if path.name.endswith(".gz") else content)


@pytest.fixture(scope="module")
def digits_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("digits") / "pop.npz"
    assert main(["data", "digits", "--individuals", "200", "--reference", "100", "--seed", "0",
                 "--out", str(path)]) == 0
    return path


@pytest.fixture(scope="module")
def mnist_dir(tmp_path_factory):
    """Fake MNIST: sklearn's digits upsampled to 28x28 (400 training, 200 test images)."""
    digits = load_digits()
    folder = tmp_path_factory.mktemp("mnist")
    images = np.pad(np.kron(digits.images[:600], np.ones((1, 3, 3))) * 15, ((0, 0), (2, 2), (2, 2))).astype(np.uint8)
    labels = digits.target[:600].astype(np.uint8)
    write_idx(folder / "train-images-idx3-ubyte.gz", images[:400])
    write_idx(folder / "train-labels-idx1-ubyte.gz", labels[:400])
    write_idx(folder / "t10k-images-idx3-ubyte", images[400:])
    write_idx(folder / "t10k-labels-idx1-ubyte", labels[400:])
    return folder


def test_data_digits_writes_a_population(digits_file, tmp_path, capsys):
    population = load_population(digits_file)
    assert population.genotypes.shape == (200, 100) and population.reference.shape == (100, 100)
    assert population.attribute_names[0].startswith("p(0) in [0, ")
    assert population.metadata["source"] == "sklearn-digits" and population.metadata["seed"] == 0
    assert np.all(population.genotypes.sum(axis=1) == 10)
    assert not set(population.ids.tolist()) & set(population.reference_ids.tolist())
    again = tmp_path / "again.npz"
    code, out, _ = run_cli(capsys, "data", "digits", "--individuals", 200, "--reference", 100, "--out", again)
    assert code == 0 and "200 individuals, 100 reference, 100 binary attributes (digits, 10 bins" in out
    with np.load(digits_file, allow_pickle=False) as a, np.load(again, allow_pickle=False) as b:
        assert np.array_equal(a["genotypes"], b["genotypes"]) and np.array_equal(a["ids"], b["ids"])
    fewer = tmp_path / "fewer.npz"
    code, _, err = run_cli(capsys, "data", "digits", "--individuals", 50, "--reference", 50, "--bins", 4,
                           "--train-size", 400, "--calibration-size", 100, "--seed", 1, "--out", fewer)
    assert code == 0, err
    population = load_population(fewer)
    assert population.n_attributes <= 40 and population.metadata["split"]["pool"] == 1297


def test_evaluate_on_digits(digits_file, tmp_path, capsys):
    out = tmp_path / "eval.json"
    code, _, err = run_cli(capsys, "evaluate", "--no-decision", "--population", digits_file, "--members", 100, "--defense",
                           "laplace:epsilon=50", "--attacks", "tree,svm,lrt", "--releases", 4, "--quiet", "--out", out)
    assert code == 0, err
    report = json.loads(out.read_text())
    for name in ("tree", "svm", "lrt"):
        assert math.isfinite(report["attacks"][name]["auc"]) and 0 <= report["attacks"][name]["auc"] <= 1


def test_train_on_digits(digits_file, tmp_path, capsys):
    run_dir = tmp_path / "run"
    code, _, err = run_cli(capsys, "train", "--no-decision", "--population", digits_file, "--members", 100, "--kappa", 1.5,
                           "--steps", 3, "--fresh-check-steps", 2, "--seed", 0, "--quiet", "--out", run_dir)
    assert code == 0, err
    assert (run_dir / "defender.pt").is_file() and (run_dir / "summary.json").is_file()


def test_audit_mechanism_on_digits(digits_file, tmp_path, capsys):
    """The one-run canary audit (100 canaries, reconstruction attack) certifies leakage of the exact
    release (measured eps_lb 2.16 at seed 0) and none under Laplace eps = 1 (it cannot exceed 1)."""
    bounds = {}
    for defense in ("none", "laplace:epsilon=1"):
        out = tmp_path / "audit.json"
        code, _, err = run_cli(capsys, "audit-mechanism", "--population", digits_file, "--members", 100, "--defense",
                               defense, "--mode", "one-run", "--canaries", 100, "--attack", "reconstruction", "--seed", 0,
                               "--quiet", "--force", "--out", out)
        assert code == 0, err
        report = json.loads(out.read_text())
        assert report["is_lower_bound"]
        bounds[defense] = report["epsilon_lb"]
    assert bounds["none"] > 1.5
    assert bounds["laplace:epsilon=1"] <= 1.0


def test_data_mnist_from_idx_files(mnist_dir, tmp_path, capsys):
    out = tmp_path / "mnist.npz"
    code, text, err = run_cli(capsys, "data", "mnist", "--mnist-dir", mnist_dir, "--individuals", 100,
                              "--reference", 60, "--train-size", 300, "--calibration-size", 100, "--bins", 5,
                              "--seed", 3, "--out", out)
    assert code == 0, err
    assert "100 individuals, 60 reference" in text and "(mnist, 5 bins per class" in text
    population = load_population(out)
    assert population.metadata["source"] == "mnist-idx" and population.metadata["split"]["pool"] == 200
    assert all(name.startswith("mnist-t10k:") for name in population.ids)


def _malformed(tmp, mnist_dir):
    """A copy of the fake MNIST folder whose test images lose their last 50 bytes."""
    folder = tmp / "bad-mnist"
    folder.mkdir()
    for path in mnist_dir.iterdir():
        (folder / path.name).write_bytes(path.read_bytes())
    (folder / "t10k-images-idx3-ubyte").write_bytes((mnist_dir / "t10k-images-idx3-ubyte").read_bytes()[:-50])
    return folder


def _mnist(tmp, folder, *extra):
    return ["mnist", "--mnist-dir", folder, "--individuals", 50, "--reference", 50, "--train-size", 300,
            "--calibration-size", 100, *extra, "--out", tmp / "p.npz"]


CASES = {
    # name: (arguments after `bngp data`, given the work folder and the fake MNIST folder; message fragment)
    "unknown-dataset": (lambda t, m: ["cifar", "--out", t / "p.npz"], "cifar"),
    "bins-1": (lambda t, m: ["digits", "--bins", 1, "--out", t / "p.npz"], "--bins"),
    "too-many-digits": (lambda t, m: ["digits", "--individuals", 700, "--reference", 400, "--out", t / "p.npz"],
                        "1000 pool images"),
    "train-too-large": (lambda t, m: ["digits", "--train-size", 1700, "--out", t / "p.npz"], "1797"),
    "split-with-images": (lambda t, m: ["digits", "--split", "test", "--out", t / "p.npz"], "--split"),
    "bins-with-adult": (lambda t, m: ["adult", "--bins", 4, "--out", t / "p.npz"], "--bins"),
    "mnist-without-dir": (lambda t, m: ["mnist", "--out", t / "p.npz"], "--mnist-dir"),
    "mnist-dir-for-digits": (lambda t, m: ["digits", "--mnist-dir", m, "--out", t / "p.npz"], "--mnist-dir"),
    "missing-dir": (lambda t, m: _mnist(t, t / "nowhere"), "not found"),
    "missing-files": (lambda t, m: _mnist(t, t), "lacks train-images-idx3-ubyte"),
    "malformed-idx": (lambda t, m: _mnist(t, _malformed(t, m)), "truncated"),
    "too-many-mnist": (lambda t, m: ["mnist", "--mnist-dir", m, "--train-size", 300, "--calibration-size", 100,
                                     "--out", t / "p.npz"], "200 pool images"),
    "mnist-train-too-large": (lambda t, m: _mnist(t, m, "--train-size", 350), "400 training images"),
    "out-is-a-directory": (lambda t, m: ["digits", "--out", t], "existing directory"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_input_is_one_line_exit_2(case, mnist_dir, tmp_path, capsys):
    build, fragment = CASES[case]
    work = tmp_path / "work"
    work.mkdir()
    argv = build(work, mnist_dir)
    before = sorted(str(p) for p in work.rglob("*"))
    code, out, err = run_cli(capsys, "data", *argv)
    lines = [line for line in err.strip().splitlines() if line]
    assert code == 2 and len(lines) == 1 and "Traceback" not in err, err
    assert lines[0].startswith("bngp data: error:") and fragment in lines[0], lines[0]
    after = sorted(str(p) for p in work.rglob("*"))
    assert after == before, after
