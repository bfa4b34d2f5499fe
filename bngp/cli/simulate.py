"""``bngp simulate``: make a population (individuals + reference panel) and save it as .npz."""

from __future__ import annotations

from bngp.cli import COMMANDS

import argparse

from bngp.data.npz import save_population

MODELS = ("stdpopsim", "independent")


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "simulate",
        help=COMMANDS["simulate"][1],)
    parser.add_argument("--individuals", type=int, required=True, metavar="K")
    parser.add_argument("--reference", type=int, required=True, metavar="R")
    parser.add_argument("--snvs", type=int, required=True, metavar="Q")
    parser.add_argument("--model", choices=MODELS, default="stdpopsim",
                        help="stdpopsim (HomSap OutOfAfrica_3G09 CEU chr10, default) or independent SNVs")
    parser.add_argument("--min-maf", type=float, default=0.05, help="minor allele frequency filter")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", required=True, metavar="POP.npz")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.model == "independent":
        from bngp.data.independent import simulate_independent

        population = simulate_independent(args.individuals, args.reference, args.snvs, seed=args.seed,
                                          min_frequency=args.min_maf)
    else:
        from bngp.data.genome import simulate_genome

        population = simulate_genome(args.individuals, args.reference, args.snvs, seed=args.seed, min_maf=args.min_maf)
    save_population(population, args.out)
    print(f"wrote {args.out}: {population.n_individuals} individuals, {population.n_reference} reference, "
          f"{population.n_attributes} SNVs ({args.model}, seed {args.seed})")
    return 0
