"""``bngp data DATASET``: make a population (individuals + reference panel) from a real data set
shipped with the package and save it as .npz, usable by ``bngp train``, ``evaluate``,
``release`` and ``audit-mechanism`` like a simulated one.

Data sets: ``adult`` (UCI Adult, binarised into 120 attributes: :mod:`bngp.data.adult`,
docs/datasets.md).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from bngp.cli import COMMANDS
from bngp.errors import InputError, UnknownNameError
from bngp.validation import check_output_file, check_positive_int

#: dataset name -> one-line description.
DATASETS = {"adult": "UCI Adult (Census Income, Becker & Kohavi 1996, CC BY 4.0), 120 binary attributes"}
SPLITS = ("all", "train", "test")


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "data", help=COMMANDS["data"][1],
        description="Draw the individuals who may be members and a disjoint reference panel from a data set "
                    "shipped with bngp and write them as a population .npz.\n\ndata sets:\n"
                    + "\n".join(f"  {name}: {text}" for name, text in DATASETS.items()),
    )
    parser.add_argument("dataset", metavar="DATASET", help=f"data set: {', '.join(DATASETS)}")
    parser.add_argument("--individuals", type=int, metavar="K",
                        help="individuals who may be members (default: the rows not in the reference panel)")
    parser.add_argument("--reference", type=int, metavar="R",
                        help="reference-panel rows, disjoint from them (default: the rows not drawn as individuals; "
                             "with neither given, half of the rows)")
    parser.add_argument("--split", default="all", metavar="SPLIT",
                        help="adult: all (adult.data + adult.test, 48842 rows), train (adult.data, 32561) "
                             "or test (adult.test, 16281)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random draw of the rows")
    parser.add_argument("--out", required=True, metavar="POP.npz", help="population file to write")
    parser.set_defaults(func=run)


def _check_output(path: str) -> None:
    """The checks of :func:`check_output_file`, and for a folder still to be created, its
    nearest existing ancestor must be a writable folder."""
    target = check_output_file("--out", path, parent_must_exist=False)
    ancestor = target.parent
    while not ancestor.exists() and ancestor != ancestor.parent:
        ancestor = ancestor.parent
    if ancestor != target.parent:
        check_output_file("--out", ancestor / "probe", parent_must_exist=True)


def run(args: argparse.Namespace) -> int:
    if args.dataset not in DATASETS:
        raise UnknownNameError(f"unknown data set {args.dataset!r}; available: {', '.join(DATASETS)}.")
    if args.split not in SPLITS:
        raise InputError(f"`--split` must be one of {', '.join(SPLITS)}, got {args.split!r}.")
    for flag, value in (("--individuals", args.individuals), ("--reference", args.reference)):
        if value is not None:
            check_positive_int(flag, value)
    if args.seed < 0:
        raise InputError(f"`--seed` must be >= 0, got {args.seed}.")
    from bngp.data.adult import ADULT_ROWS

    rows = ADULT_ROWS[args.split]
    asked = (args.individuals or 0) + (args.reference or 0)
    if asked > rows or (asked == rows and (args.individuals is None or args.reference is None)):
        raise InputError(f"`--individuals` + `--reference` must leave room in the {rows} rows of {args.dataset} "
                         f"split {args.split!r}, got {args.individuals} + {args.reference}.")
    _check_output(args.out)

    from bngp.data.adult import load_adult
    from bngp.data.npz import save_population

    population = load_adult(args.individuals, args.reference, seed=args.seed, split=args.split)
    save_population(population, Path(args.out))
    print(f"wrote {args.out}: {population.n_individuals} individuals, {population.n_reference} reference, "
          f"{population.n_attributes} binary attributes ({args.dataset}, split {args.split}, seed {args.seed})")
    return 0
