"""``bngp release``: one release (--members-file) and many shadow releases (--draws, --memberships-file).

Known answers: with ``--defense none`` the release is the members' allele frequency
b @ Z / n (computed by the mechanism in float32: equal to the float32-rounded frequency);
Laplace noise of scale s has mean 0, mean |xi| = s and standard deviation sqrt(2) s; the draws
are those of the evaluation simulator (``bngp.attacks.base.release_simulator``) for the chunk seeds.
"""

from __future__ import annotations

import numpy as np
import pytest

from bngp.cli import main
from bngp.release.shadow import RELEASE_CHUNK
from bngp.data.priors import UniformSubsetPrior
from bngp.rng import spawn_seeds
from bngp.defenses.registry import DefenseContext, parse_defense_spec

MULTI_KEYS = {"releases", "memberships", "individual_ids", "attribute_names", "defense", "seed", "n_members"}
SINGLE_KEYS = {"release", "attribute_names", "defense", "seed", "n_members"}


def run_cli(capsys, *argv):
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def load(path):
    with np.load(path, allow_pickle=False) as data:
        return {key: data[key] for key in data.files}


def frequencies(memberships, genotypes):
    """b @ Z / |b| as the float32 mechanism computes it (exact integer counts, one rounded division)."""
    counts = memberships.astype(np.float32) @ genotypes.astype(np.float32)
    return (counts / memberships.sum(axis=1, keepdims=True).astype(np.float32)).astype(np.float64)


def exact_frequencies(memberships, genotypes):
    return (memberships.astype(np.float64) @ genotypes) / memberships.sum(axis=1, keepdims=True)


def draws(capsys, population_file, out, *extra, defense="none", m=50, n=10, seed=7):
    code, stdout, err = run_cli(capsys, "release", "--population", population_file, "--defense", defense,
                                "--draws", m, "--members", n, "--seed", seed, "--out", out, *extra)
    assert code == 0, err
    return load(out), stdout, err


# ---------------------------------------------------------------------------------------------
# --draws
# ---------------------------------------------------------------------------------------------


def test_draws_without_noise_release_the_members_frequencies(small_population_file, small_population, tmp_path, capsys):
    genotypes = small_population.genotypes
    data, stdout, _ = draws(capsys, small_population_file, tmp_path / "a.npz")
    assert set(data) == MULTI_KEYS
    b, x = data["memberships"], data["releases"]
    assert b.dtype == np.int8 and b.shape == (50, small_population.n_individuals)
    assert x.dtype == np.float64 and x.shape == (50, small_population.n_attributes)
    assert set(np.unique(b)) == {0, 1}
    assert np.all(b.sum(axis=1) == 10)
    assert data["n_members"].dtype.kind == "i" and np.array_equal(data["n_members"], np.full(50, 10))
    assert np.array_equal(x, frequencies(b, genotypes))
    assert np.max(np.abs(x - exact_frequencies(b, genotypes))) < 1e-7
    assert len({row.tobytes() for row in b}) == 50  # 50 distinct memberships (C(40, 10) ~ 8.5e8)
    assert int(data["seed"]) == 7 and str(data["defense"]) == "none"
    assert np.array_equal(data["individual_ids"], small_population.ids)
    assert np.array_equal(data["attribute_names"], small_population.attribute_names)
    assert "50 releases" in stdout and "seed 7" in stdout

    again, _, _ = draws(capsys, small_population_file, tmp_path / "b.npz")
    for key in MULTI_KEYS:
        assert np.array_equal(again[key], data[key]), key
    other, _, _ = draws(capsys, small_population_file, tmp_path / "c.npz", seed=8)
    assert int(other["seed"]) == 8
    assert not np.array_equal(other["memberships"], b)
    assert np.mean(np.all(other["memberships"] == b, axis=1)) < 0.1


def test_draws_are_the_evaluation_simulator_draws(small_population_file, small_population, tmp_path, capsys):
    from bngp.attacks.base import release_simulator
    from bngp.release.sampling import release_mechanism

    spec = "laplace:scale=0.05"
    data, _, _ = draws(capsys, small_population_file, tmp_path / "l.npz", defense=spec, m=30, n=12, seed=5)
    defense = parse_defense_spec(spec, DefenseContext(small_population, 12))
    prior = UniformSubsetPrior(small_population.n_individuals, 12)
    simulate = release_simulator(release_mechanism(small_population.genotypes, defense.composition), prior, defense)
    x, b = simulate(30, spawn_seeds(5, 1)[0])
    assert np.array_equal(data["memberships"], b.astype(np.int8))
    assert np.array_equal(data["releases"], x)


def test_laplace_noise_has_mean_zero_and_the_laplace_spread(small_population_file, small_population, tmp_path, capsys):
    # epsilon is large enough that the Laplace scale (paper sensitivity |Q| / (n eps)) is small:
    # clipping to [0, 1] then never acts on attributes whose frequency lies in [0.2, 0.8].
    spec = "laplace:epsilon=400"
    scale = parse_defense_spec(spec, DefenseContext(small_population, 10)).scale
    assert scale == pytest.approx(120 / (10 * 400))
    data, _, _ = draws(capsys, small_population_file, tmp_path / "l.npz", defense=spec, m=400, n=10, seed=3)
    exact = exact_frequencies(data["memberships"], small_population.genotypes)
    inside = (exact >= 0.2) & (exact <= 0.8)
    xi = (data["releases"] - exact)[inside]
    assert xi.size > 10_000
    # mean: standard error sqrt(2) s / sqrt(N) ~ 4e-4; tolerance ~ 5 standard errors.
    assert abs(xi.mean()) < 5 * np.sqrt(2) * scale / np.sqrt(xi.size)
    # spread: the Laplace(s) law has E|xi| = s and sd = sqrt(2) s; both estimated within 5%.
    assert np.mean(np.abs(xi)) == pytest.approx(scale, rel=0.05)
    assert xi.std() == pytest.approx(np.sqrt(2) * scale, rel=0.05)
    assert np.all((data["releases"] >= 0) & (data["releases"] <= 1))


def test_many_draws_are_chunked_uniform_and_show_progress(small_population_file, small_population, tmp_path, capsys):
    m = 2 * RELEASE_CHUNK + 500  # three chunks, the last one partial
    data, _, err = draws(capsys, small_population_file, tmp_path / "big.npz", m=m, n=10, seed=1)
    assert "bngp release" in err  # tqdm progress bar on stderr
    b = data["memberships"]
    assert b.shape == (m, 40) and np.all(b.sum(axis=1) == 10)
    assert np.array_equal(data["releases"], frequencies(b, small_population.genotypes))
    # uniform prior: P(member) = n / K = 0.25 for every individual (sd over m rows ~ 0.0087).
    assert np.max(np.abs(b.mean(axis=0) - 0.25)) < 0.05
    # chunks use different seeds: their first rows differ.
    starts = [b[i * RELEASE_CHUNK] for i in range(3)]
    assert not np.array_equal(starts[0], starts[1]) and not np.array_equal(starts[1], starts[2])
    assert len({row.tobytes() for row in b}) == m
    quiet, _, err = draws(capsys, small_population_file, tmp_path / "quiet.npz", "--quiet", m=m, n=10, seed=1)
    assert err == ""
    assert np.array_equal(quiet["releases"], data["releases"])


# ---------------------------------------------------------------------------------------------
# --memberships-file
# ---------------------------------------------------------------------------------------------


def membership_matrix(k):
    """Rows of different sizes (1, 3, 10, 10, K - 1, K), given out of size order."""
    rng = np.random.default_rng(0)
    rows = []
    for n in (10, 3, 39, 1, 10, 40):
        row = np.zeros(k, dtype=np.int64)
        row[rng.choice(k, n, replace=False)] = 1
        rows.append(row)
    return np.array(rows)


@pytest.mark.parametrize("suffix", [".npy", ".txt", ".csv"])
def test_memberships_file_is_echoed_and_released_exactly(suffix, small_population_file, small_population, tmp_path, capsys):
    b = membership_matrix(small_population.n_individuals)
    path = tmp_path / f"B{suffix}"
    if suffix == ".npy":
        np.save(path, b)
    else:
        np.savetxt(path, b, fmt="%d", delimiter="," if suffix == ".csv" else " ")
    out = tmp_path / "r.npz"
    code, _, err = run_cli(capsys, "release", "--population", small_population_file, "--defense", "none",
                           "--memberships-file", path, "--seed", 4, "--out", out)
    assert code == 0, err
    data = load(out)
    assert set(data) == MULTI_KEYS
    assert data["memberships"].dtype == np.int8 and np.array_equal(data["memberships"], b)
    assert np.array_equal(data["n_members"], [10, 3, 39, 1, 10, 40])
    assert np.array_equal(data["releases"], frequencies(b, small_population.genotypes))
    assert int(data["seed"]) == 4 and np.array_equal(data["individual_ids"], small_population.ids)


def test_memberships_file_calibrates_each_row_for_its_size(small_population_file, small_population, tmp_path, capsys):
    # paper l1 sensitivity |Q| / n: rows with 20 members get half the Laplace scale of rows with 10.
    rng = np.random.default_rng(1)
    b = np.zeros((300, 40), dtype=np.int8)
    for i in range(300):
        b[i, rng.choice(40, 10 if i % 2 else 20, replace=False)] = 1
    np.save(tmp_path / "B.npy", b)
    spec = "laplace:epsilon=300"
    code, _, err = run_cli(capsys, "release", "--population", small_population_file, "--defense", spec,
                           "--memberships-file", tmp_path / "B.npy", "--out", tmp_path / "r.npz")
    assert code == 0, err
    data = load(tmp_path / "r.npz")
    exact = exact_frequencies(b, small_population.genotypes)
    for n in (10, 20):
        rows = b.sum(axis=1) == n
        scale = parse_defense_spec(spec, DefenseContext(small_population, n)).scale
        inside = (exact[rows] >= 0.25) & (exact[rows] <= 0.75)
        xi = (data["releases"][rows] - exact[rows])[inside]
        assert np.mean(np.abs(xi)) == pytest.approx(scale, rel=0.06), n


# ---------------------------------------------------------------------------------------------
# The single release (unchanged) and bad input.
# ---------------------------------------------------------------------------------------------


def test_single_release_keeps_its_keys(small_population_file, small_population, tmp_path, capsys):
    ids = tmp_path / "ids.txt"
    ids.write_text("\n".join(small_population.ids[5:17]) + "\n")
    out = tmp_path / "release.npz"
    code, stdout, err = run_cli(capsys, "release", "--population", small_population_file, "--defense", "none",
                                "--members-file", ids, "--seed", 2, "--out", out)
    assert code == 0, err
    data = load(out)
    assert set(data) == SINGLE_KEYS
    assert data["release"].shape == (small_population.n_attributes,) and data["release"].dtype == np.float64
    assert np.allclose(data["release"], small_population.genotypes[5:17].mean(axis=0), atol=1e-7)
    assert int(data["seed"]) == 2 and int(data["n_members"]) == 12 and str(data["defense"]) == "none"
    assert stdout.startswith(f"wrote {out}: 120 statistics for 12 members")


def _write(path, content):
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif isinstance(content, str):
        path.write_text(content)
    else:
        np.save(path, content)
    return path


def _ones(rows, cols):
    return np.ones((rows, cols), dtype=np.int64)


BAD_INPUT = {
    "no source": (lambda d: [], "exactly one of"),
    "two sources": (lambda d: ["--members-file", _write(d / "ids.txt", "ind0\nind1\n"), "--draws", 3, "--members", 2],
                    "--members-file and --draws"),
    "file and draws": (lambda d: ["--memberships-file", _write(d / "B.npy", _ones(2, 40)), "--draws", 3, "--members", 2],
                       "exactly one of"),
    "draws 0": (lambda d: ["--draws", 0, "--members", 10], "`--draws` must be >= 1"),
    "draws without members": (lambda d: ["--draws", 5], "`--draws` needs `--members"),
    "members K": (lambda d: ["--draws", 5, "--members", 40], "`--members` must be >= 1 and <= 39, got 40"),
    "members 0": (lambda d: ["--draws", 5, "--members", 0], "`--members` must be >= 1"),
    "members without draws": (lambda d: ["--memberships-file", _write(d / "B.npy", _ones(2, 40)), "--members", 3],
                              "only used with `--draws`"),
    "negative seed": (lambda d: ["--draws", 5, "--members", 3, "--seed", -1], "`--seed` must be >= 0"),
    "wrong columns": (lambda d: ["--memberships-file", _write(d / "B.npy", _ones(3, 39))], "has 39 columns"),
    "non-binary": (lambda d: ["--memberships-file", _write(d / "B.txt", "1 " * 39 + "2\n")], "must be binary"),
    "all-zero row": (lambda d: ["--memberships-file", _write(d / "B.csv", ",".join(["1"] * 40) + "\n"
                                                              + ",".join(["0"] * 40) + "\n")], "no member"),
    "nan": (lambda d: ["--memberships-file", _write(d / "B.npy", np.full((2, 40), np.nan))], "NaN"),
    "corrupt npy": (lambda d: ["--memberships-file", _write(d / "B.npy", b"\x93NUMPY\x01\x00garbage")],
                    "not a readable .npy"),
    "pickled npy": (lambda d: ["--memberships-file", _write(d / "B.npy", np.array([[1, 0]], dtype=object))],
                    "not a readable .npy"),
    "ragged txt": (lambda d: ["--memberships-file", _write(d / "B.txt", "1 0 1\n1 0\n")], "not a readable .txt"),
    "empty txt": (lambda d: ["--memberships-file", _write(d / "B.txt", "")], "holds no rows"),
    "1-D npy": (lambda d: ["--memberships-file", _write(d / "B.npy", np.ones(40))], "2-D"),
    "bad suffix": (lambda d: ["--memberships-file", _write(d / "B.json", "[]")], "must end in .npy"),
    "missing file": (lambda d: ["--memberships-file", d / "absent.npy"], "absent.npy"),
    "bad defense": (lambda d: ["--draws", 3, "--members", 2, "--defense", "nope"], "unknown defense"),
}
#: cases whose error is about the memberships file: the message names it.
NAMES_THE_FILE = {"wrong columns", "non-binary", "all-zero row", "nan", "corrupt npy", "pickled npy", "ragged txt",
                  "empty txt", "1-D npy", "bad suffix", "missing file"}


@pytest.mark.parametrize("case", list(BAD_INPUT))
def test_bad_input_is_one_line_exit_2_and_no_output(case, small_population_file, tmp_path, capsys):
    build, fragment = BAD_INPUT[case]
    inputs = tmp_path / "in"
    inputs.mkdir()
    extra = [str(a) for a in build(inputs)]
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    out = out_dir / "release.npz"
    argv = ["release", "--population", small_population_file, "--out", out, *extra]
    if "--defense" not in extra:
        argv[3:3] = ["--defense", "none"]
    code, stdout, err = run_cli(capsys, *argv)
    assert code == 2
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert "Traceback" not in err and lines[0].startswith("bngp release: error: ")
    assert fragment in lines[0], lines[0]
    if case in NAMES_THE_FILE:
        assert str(inputs) in lines[0], lines[0]
    assert stdout == ""
    assert list(out_dir.iterdir()) == []  # no output, no temporary file


def test_out_naming_a_directory_or_a_missing_directory(small_population_file, tmp_path, capsys):
    existing = tmp_path / "existing"
    existing.mkdir()
    for out, fragment in ((existing, "is an existing directory"), (tmp_path / "missing" / "r.npz", "does not exist")):
        code, _, err = run_cli(capsys, "release", "--population", small_population_file, "--defense", "none",
                               "--draws", 3, "--members", 2, "--out", out)
        lines = [line for line in err.splitlines() if line.strip()]
        assert code == 2 and len(lines) == 1 and "Traceback" not in err
        assert fragment in lines[0], lines[0]
    assert list(existing.iterdir()) == [] and not (tmp_path / "missing").exists()


def test_help_documents_every_new_option(capsys):
    with pytest.raises(SystemExit) as stop:
        main(["release", "--help"])
    assert stop.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    for option in ("--draws M", "--members N", "--memberships-file B.npy|B.txt|B.csv", "--quiet", "--seed SEED"):
        assert option in text, option
    assert "(default: 0)" in text and "required with --draws" in text and "exactly one" in text
