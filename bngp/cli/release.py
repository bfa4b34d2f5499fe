"""``bngp release``: publish noisy summary-statistics releases.

Three sources of membership vectors, exactly one per call:

- ``--members-file IDS.txt``: one release for the listed individuals (keys ``release``,
  ``attribute_names``, ``defense``, ``seed``, ``n_members``);
- ``--draws M --members N``: M shadow releases, each for N of the K individuals drawn
  uniformly without replacement (the prior of ``bngp evaluate``/``bngp train``);
- ``--memberships-file B.npy|B.txt|B.csv``: one release per row of a (M, K) 0/1 matrix.

The last two write ``releases`` (M, |Q|) float64, ``memberships`` (M, K) int8, ``individual_ids``,
``attribute_names``, ``defense``, ``seed`` and ``n_members`` (per row), so that outside
researchers can run their own attacks on many releases of a defense, drawn by
:func:`bngp.release.shadow.simulate_releases` (chunks of its ``RELEASE_CHUNK`` rows, seeded as the
evaluation simulator is).  Each row's defense is calibrated for that row's number of members
(``DefenseContext(population, n)``).
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

import numpy as np

from bngp.cli import COMMANDS
from bngp.cli.common import add_population_args, add_threads_arg
from bngp.data.npz import load_population
from bngp.errors import DataFormatError, InputError
from bngp.io_utils import atomic_write, save_npz
from bngp.rng import resolve_seed, torch_generator
from bngp.outputs import OutputSet, add_force_arg, claim_outputs
from bngp.validation import check_positive_int, check_readable_file
from bngp.defenses.base import Defense
from bngp.release.sampling import release_mechanism
from bngp.release.shadow import RELEASE_CHUNK, publish_batch, simulate_releases
from bngp.defenses.registry import DefenseContext, defense_help, parse_defense_spec

__all__ = ["MEMBERSHIP_SUFFIXES", "read_member_ids", "load_memberships"]

#: accepted ``--memberships-file`` formats.
MEMBERSHIP_SUFFIXES = (".npy", ".txt", ".csv")

_SOURCES = ("--members-file", "--draws", "--memberships-file")


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "release",
        help=COMMANDS["release"][1],
        description="Publish noisy summary statistics under a defense. Give exactly one of --members-file "
        "(one release), --draws with --members (M releases of memberships drawn from the prior) or "
        "--memberships-file (one release per row of a 0/1 matrix).",
    )
    add_threads_arg(parser)
    add_population_args(parser, members=False)
    parser.add_argument("--defense", required=True, metavar="SPEC",
                        help=f"{defense_help()}; calibrated for each release's number of members")
    source = parser.add_argument_group("membership source (exactly one)")
    source.add_argument("--members-file", metavar="IDS.txt",
                        help="one individual id per line: write a single release (default: none)")
    source.add_argument("--draws", type=int, metavar="M",
                        help="write M >= 1 releases, each for --members N of the K individuals drawn uniformly "
                             "without replacement (default: none)")
    source.add_argument("--memberships-file", metavar="B.npy|B.txt|B.csv",
                        help="(M, K) 0/1 matrix, one release per row, columns in population order; .txt is "
                             "whitespace-separated, .csv comma-separated (default: none)")
    parser.add_argument("--members", type=int, metavar="N",
                        help="members per drawn dataset, 1 <= N <= K-1; required with --draws (default: none)")
    parser.add_argument("--seed", type=int, default=0,
                        help="seed of the membership draws and the noise, recorded in the output (default: 0)")
    parser.add_argument("--out", required=True, metavar="RELEASE.npz",
                        help="output .npz, written atomically once everything succeeded")
    parser.add_argument("--quiet", action="store_true",
                        help=f"no progress bar (shown for more than {RELEASE_CHUNK} releases; default: shown)")
    add_force_arg(parser, "the release file")
    parser.set_defaults(func=run)


# ---------------------------------------------------------------------------------------------
# Inputs.
# ---------------------------------------------------------------------------------------------


def read_member_ids(path: str) -> list[str]:
    """Ids listed one per line (blank lines and '#' comments ignored); no duplicates."""
    path = check_readable_file("members", path)
    try:
        lines = Path(path).read_text().splitlines()
    except UnicodeDecodeError as exc:
        raise DataFormatError(f"{path} is not a text file of ids.") from exc
    ids = [line.strip() for line in lines if line.strip() and not line.strip().startswith("#")]
    if not ids:
        raise DataFormatError(f"{path} lists no member ids.")
    if len(set(ids)) != len(ids):
        raise DataFormatError(f"{path} lists an id more than once.")
    return ids


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    line = text[0] if text else type(exc).__name__
    return line if len(line) <= 120 else line[:117] + "..."


def load_memberships(path: str | Path, n_individuals: int) -> np.ndarray:
    """Read a (M, K) 0/1 membership matrix from .npy (no pickles), .txt or .csv.

    Every row must have at least one member; NaN, values other than 0/1 and a column count
    other than K are rejected.  Errors name the file.

    Returns:
        (M, K) int8 matrix, member = 1.
    """
    path = check_readable_file("--memberships-file", path)
    suffix = path.suffix.lower()
    if suffix not in MEMBERSHIP_SUFFIXES:
        raise DataFormatError(f"memberships file {path} must end in {', '.join(MEMBERSHIP_SUFFIXES)}, got {suffix!r}.")
    try:
        if suffix == ".npy":
            values = np.load(path, allow_pickle=False)
            if not isinstance(values, np.ndarray):
                values.close()
                raise DataFormatError(f"memberships file {path} is an .npz archive, not a .npy array.")
        else:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                values = np.loadtxt(path, delimiter="," if suffix == ".csv" else None, ndmin=2, dtype=np.float64)
    except DataFormatError:
        raise
    except (ValueError, OSError, EOFError, UnicodeError) as exc:
        reason = _first_line(exc)
        if "pickle" in reason:
            reason = "pickled or unrecognised content; only plain numeric .npy arrays are read"
        raise DataFormatError(f"memberships file {path} is not a readable {suffix} matrix ({reason}).") from exc
    if values.dtype.kind not in "biuf":
        raise DataFormatError(f"memberships file {path} must hold 0/1 numbers, got dtype {values.dtype}.")
    if values.ndim != 2:
        raise DataFormatError(f"memberships file {path} must hold a 2-D (M, K) matrix, got shape {values.shape}.")
    if values.shape[0] == 0:
        raise DataFormatError(f"memberships file {path} holds no rows.")
    if values.shape[1] != n_individuals:
        raise DataFormatError(
            f"memberships file {path} has {values.shape[1]} columns, the population has K = {n_individuals} individuals."
        )
    floats = values.astype(np.float64, copy=False)
    finite = np.isfinite(floats)
    if not finite.all():
        row = int(np.argwhere(~finite)[0, 0])
        raise DataFormatError(f"memberships file {path} contains NaN or infinite values (row index {row}).")
    bad = (floats != 0) & (floats != 1)
    if bad.any():
        row, col = (int(i) for i in np.argwhere(bad)[0])
        raise DataFormatError(
            f"memberships file {path} must be binary (0/1), found {floats[row, col]:g} at row index {row}, column {col}."
        )
    memberships = floats.astype(np.int8)
    empty = np.flatnonzero(memberships.sum(axis=1, dtype=np.int64) == 0)
    if empty.size:
        raise DataFormatError(
            f"memberships file {path} has {empty.size} row(s) with no member (first: row index {int(empty[0])})."
        )
    return memberships


# ---------------------------------------------------------------------------------------------
# The command.
# ---------------------------------------------------------------------------------------------


def _check_sources(args: argparse.Namespace) -> str:
    given = [name for name, value in zip(_SOURCES, (args.members_file, args.draws, args.memberships_file))
             if value is not None]
    if len(given) != 1:
        found = f", got {' and '.join(given)}" if given else ""
        raise InputError(f"give exactly one of {', '.join(_SOURCES)}{found}.")
    if args.draws is not None:
        check_positive_int("--draws", args.draws)
        if args.members is None:
            raise InputError("`--draws` needs `--members N` (members per drawn dataset).")
    elif args.members is not None:
        raise InputError(f"`--members` is only used with `--draws`, not with {given[0]}.")
    return given[0]


def run(args: argparse.Namespace) -> int:
    source = _check_sources(args)
    outputs = claim_outputs("--out", args.out, force=args.force)
    if source == "--members-file":
        return _run_single(args, outputs)
    if args.seed < 0:
        raise InputError(f"`--seed` must be >= 0, got {args.seed}.")
    seed = resolve_seed(args.seed)
    out = outputs.paths[0]
    population = load_population(args.population)
    k = population.n_individuals

    def defense_for(n: int) -> Defense:
        return parse_defense_spec(args.defense, DefenseContext(population, n))

    if source == "--draws":
        check_positive_int("--members", args.members, maximum=k - 1)
        progress = not args.quiet and args.draws > RELEASE_CHUNK
        releases, memberships = simulate_releases(population, defense_for, seed, label=args.defense, draws=args.draws,
                                                  n_members=args.members, progress=progress)
    else:
        given = load_memberships(args.memberships_file, k)
        progress = not args.quiet and given.shape[0] > RELEASE_CHUNK
        releases, memberships = simulate_releases(population, defense_for, seed, label=args.defense,
                                                  memberships=given, progress=progress)
    n_members = memberships.sum(axis=1, dtype=np.int64)
    if progress:
        print(f"bngp release: writing {out} ({releases.nbytes / 2**20:.0f} MiB of releases before compression)",
              file=sys.stderr, flush=True)
    with outputs.staged() as stage, atomic_write(stage(out)) as handle:
        save_npz(handle, releases=releases, memberships=memberships, individual_ids=population.ids,
                 attribute_names=population.attribute_names, defense=np.array(args.defense),
                 seed=np.array(seed, dtype=np.int64), n_members=n_members)
    sizes = f"{n_members[0]}" if np.all(n_members == n_members[0]) else f"{n_members.min()}-{n_members.max()}"
    print(f"wrote {out}: {releases.shape[0]} releases of {releases.shape[1]} statistics for {sizes} members "
          f"under `{args.defense}` (seed {seed})")
    return 0


def _run_single(args: argparse.Namespace, outputs: OutputSet) -> int:
    """The original one-release path (unchanged output)."""
    population = load_population(args.population)
    ids = read_member_ids(args.members_file)
    rows = population.index_of(ids)
    defense = parse_defense_spec(args.defense, DefenseContext(population, len(rows)))
    b = np.zeros((1, population.n_individuals), dtype=np.float32)
    b[0, rows] = 1.0
    mechanism = release_mechanism(population.genotypes, defense.composition)
    x = publish_batch(mechanism, defense, b, torch_generator(args.seed))
    with outputs.staged() as stage, atomic_write(stage(args.out)) as handle:
        np.savez_compressed(handle, release=x[0], attribute_names=population.attribute_names,
                            defense=np.array(args.defense), seed=np.array(args.seed), n_members=np.array(len(rows)))
    print(f"wrote {args.out}: {x.shape[1]} statistics for {len(rows)} members under `{args.defense}`")
    return 0
