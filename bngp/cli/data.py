"""``bngp data DATASET``: make a population (individuals + reference panel) from a real data set
and save it as .npz, usable by ``bngp train``, ``evaluate``, ``release`` and ``audit-mechanism``
like a simulated one.

Data sets: ``adult`` (UCI Adult, binarised into 120 attributes: :mod:`bngp.data.adult`),
``digits`` (scikit-learn's 8x8 digits) and ``mnist`` (MNIST IDX files the user holds): the paper's
image experiment, images encoded by a classifier's confidence bins (:mod:`bngp.data.images`).
See docs/datasets.md.
"""

from __future__ import annotations

import argparse

from bngp.cli import COMMANDS
from bngp.errors import InputError, UnknownNameError
from bngp.outputs import add_force_arg, claim_outputs
from bngp.validation import check_positive_int

#: dataset name -> one-line description.
DATASETS = {
    "adult": "UCI Adult (Census Income, Becker & Kohavi 1996, CC BY 4.0), 120 binary attributes",
    "digits": "scikit-learn's 8x8 digits (1797 images, offline): a classifier's per-class confidence bins, "
              "10 x --bins binary attributes",
    "mnist": "MNIST from the IDX files in --mnist-dir (not shipped): the paper's image experiment, "
             "pool = the 10000 t10k images",
}
SPLITS = ("all", "train", "test")
IMAGE_DATASETS = ("digits", "mnist")
DEFAULT_BINS = 10


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "data", help=COMMANDS["data"][1],
        description="Draw the individuals who may be members and a disjoint reference panel from a data set "
                    "and write them as a population .npz.\n\ndata sets:\n"
                    + "\n".join(f"  {name}: {text}" for name, text in DATASETS.items()),
    )
    parser.add_argument("dataset", metavar="DATASET", help=f"data set: {', '.join(DATASETS)}")
    parser.add_argument("--individuals", type=int, metavar="K",
                        help="individuals who may be members (default: adult, the rows not in the reference panel; "
                             "digits 600; mnist 800)")
    parser.add_argument("--reference", type=int, metavar="R",
                        help="reference-panel rows, disjoint from them (default: adult, the rows not drawn as "
                             "individuals, with neither given half of the rows; digits 400; mnist 800; an image "
                             "data set given only one of the two fills the rest of its pool)")
    parser.add_argument("--split", default="all", metavar="SPLIT",
                        help="adult only: all (adult.data + adult.test, 48842 rows), train (adult.data, 32561) "
                             "or test (adult.test, 16281)")
    parser.add_argument("--bins", type=int, metavar="B",
                        help=f"digits, mnist: confidence bins per class, >= 2 (default: {DEFAULT_BINS})")
    parser.add_argument("--mnist-dir", metavar="DIR",
                        help="mnist: folder with train-images-idx3-ubyte, train-labels-idx1-ubyte, "
                             "t10k-images-idx3-ubyte, t10k-labels-idx1-ubyte (each plain or .gz)")
    parser.add_argument("--train-size", type=int, metavar="N",
                        help="digits, mnist: images that train the classifier (default: digits 500, mnist 10000)")
    parser.add_argument("--calibration-size", type=int, metavar="N",
                        help="digits, mnist: other images that set the bin edges (default: digits 297, mnist 2000)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random draw of the rows (and image splits)")
    parser.add_argument("--out", required=True, metavar="POP.npz", help="population file to write")
    add_force_arg(parser, "the population file")
    parser.set_defaults(func=run)


def _check_options(args: argparse.Namespace) -> None:
    """Options that belong to another data set are refused, not ignored."""
    image_options = (("--bins", args.bins), ("--train-size", args.train_size),
                     ("--calibration-size", args.calibration_size))
    if args.dataset == "adult":
        given = [flag for flag, value in (*image_options, ("--mnist-dir", args.mnist_dir)) if value is not None]
        if given:
            raise InputError(f"`{given[0]}` applies to the image data sets ({', '.join(IMAGE_DATASETS)}), not adult.")
        if args.split not in SPLITS:
            raise InputError(f"`--split` must be one of {', '.join(SPLITS)}, got {args.split!r}.")
        return
    if args.split != "all":
        raise InputError(f"`--split` applies to adult only, not {args.dataset}.")
    if args.dataset == "mnist" and args.mnist_dir is None:
        raise InputError("`--mnist-dir DIR` is required for the mnist data set (MNIST is not shipped with bngp).")
    if args.dataset != "mnist" and args.mnist_dir is not None:
        raise InputError(f"`--mnist-dir` applies to the mnist data set, not {args.dataset}.")
    if args.bins is not None:
        check_positive_int("--bins", args.bins, minimum=2)
    for flag, value in image_options[1:]:
        if value is not None:
            check_positive_int(flag, value)


def _check_adult_sizes(args: argparse.Namespace) -> None:
    from bngp.data.adult import ADULT_ROWS

    rows = ADULT_ROWS[args.split]
    asked = (args.individuals or 0) + (args.reference or 0)
    if asked > rows or (asked == rows and (args.individuals is None or args.reference is None)):
        raise InputError(f"`--individuals` + `--reference` must leave room in the {rows} rows of {args.dataset} "
                         f"split {args.split!r}, got {args.individuals} + {args.reference}.")


def _check_image_sizes(args: argparse.Namespace) -> dict:
    """The loader's keyword arguments, with every size checked against the data (for mnist,
    against the IDX headers: nothing is read in full yet)."""
    from bngp.data import images
    from bngp.data.idx import find_mnist_files, read_idx_shape
    from bngp.data.population import resolve_pool_sizes

    defaults = images.DIGITS_DEFAULTS if args.dataset == "digits" else images.MNIST_DEFAULTS
    train = defaults["train"] if args.train_size is None else args.train_size
    calibration = defaults["calibration"] if args.calibration_size is None else args.calibration_size
    if args.dataset == "digits":
        available, pool, what = images.DIGITS_IMAGES, images.DIGITS_IMAGES - train - calibration, "the digits"
        kwargs = {"train": train, "calibration": calibration}
    else:
        files = find_mnist_files(args.mnist_dir)
        available, pool = read_idx_shape(files["train-images"])[0], read_idx_shape(files["test-images"])[0]
        what = "MNIST t10k"
        kwargs = {"train_size": train, "calibration_size": calibration}
    if train + calibration > available:
        raise InputError(f"`--train-size` + `--calibration-size` must be at most the {available} "
                         f"{'images' if args.dataset == 'digits' else 'training images'} of {args.dataset}, "
                         f"got {train} + {calibration}.")
    if args.dataset == "digits" and pool < 2:
        raise InputError(f"`--train-size` + `--calibration-size` must leave at least 2 of the {available} digits "
                         f"for the pool, got {train} + {calibration}.")
    try:
        resolve_pool_sizes(args.individuals, args.reference, pool, (defaults["individuals"], defaults["reference"]),
                           f"pool images of {what}")
    except InputError as exc:
        raise InputError(str(exc).replace("`individuals`", "`--individuals`").replace("`reference`", "`--reference`")) \
            from None
    return {"bins": DEFAULT_BINS if args.bins is None else args.bins, **kwargs}


def run(args: argparse.Namespace) -> int:
    if args.dataset not in DATASETS:
        raise UnknownNameError(f"unknown data set {args.dataset!r}; available: {', '.join(DATASETS)}.")
    _check_options(args)
    for flag, value in (("--individuals", args.individuals), ("--reference", args.reference)):
        if value is not None:
            check_positive_int(flag, value)
    if args.seed < 0:
        raise InputError(f"`--seed` must be >= 0, got {args.seed}.")
    if args.dataset == "adult":
        _check_adult_sizes(args)
    else:
        loader_kwargs = _check_image_sizes(args)
    outputs = claim_outputs("--out", args.out, force=args.force)

    from bngp.data.npz import save_population

    if args.dataset == "adult":
        from bngp.data.adult import load_adult

        population = load_adult(args.individuals, args.reference, seed=args.seed, split=args.split)
        detail = f"split {args.split}"
    elif args.dataset == "digits":
        from bngp.data.images import load_digits_population

        population = load_digits_population(args.individuals, args.reference, seed=args.seed, **loader_kwargs)
        detail = f"{loader_kwargs['bins']} bins per class, pool accuracy {population.metadata['pool_accuracy']:.3f}"
    else:
        from bngp.data.images import load_mnist_population

        population = load_mnist_population(args.mnist_dir, args.individuals, args.reference, seed=args.seed,
                                           **loader_kwargs)
        detail = f"{loader_kwargs['bins']} bins per class, pool accuracy {population.metadata['pool_accuracy']:.3f}"
    with outputs.staged() as stage:
        save_population(population, stage(args.out))
    print(f"wrote {args.out}: {population.n_individuals} individuals, {population.n_reference} reference, "
          f"{population.n_attributes} binary attributes ({args.dataset}, {detail}, seed {args.seed})")
    return 0
