"""``bngp simulate``: make a population (individuals + reference panel) and save it as .npz,
simulated (stdpopsim or independent SNVs) or read from a VCF."""

from __future__ import annotations

import argparse

from bngp.cli import COMMANDS
from bngp.data.filters import DEFAULT_MAX_R2
from bngp.errors import InputError
from bngp.memory import require_memory
from bngp.outputs import add_force_arg, claim_outputs

MODELS = ("stdpopsim", "independent")


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("simulate", help=COMMANDS["simulate"][1])
    parser.add_argument("--individuals", type=int, metavar="K",
                        help="individuals who may be members (required unless --vcf)")
    parser.add_argument("--reference", type=int, metavar="R",
                        help="reference-panel individuals, disjoint from them (required unless --vcf; with --vcf: "
                             "R samples drawn at random for the panel, default half of the samples)")
    parser.add_argument("--snvs", type=int, metavar="Q",
                        help="SNVs |Q| kept after the filters (required unless --vcf; with --vcf default: all that pass)")
    parser.add_argument("--model", choices=MODELS, default="stdpopsim",
                        help="stdpopsim: HomSap OutOfAfrica_3G09 CEU chr10; independent: independent SNVs")
    parser.add_argument("--vcf", metavar="FILE.vcf[.gz]",
                        help="read the individuals from a VCF (GT field) instead of simulating them")
    parser.add_argument("--min-maf", type=float, default=0.05, help="minor allele frequency filter, in [0, 0.5)")
    parser.add_argument("--max-r2", type=float, default=DEFAULT_MAX_R2,
                        help="LD pruning (stdpopsim, VCF): keep an SNV only if its carrier-status r^2 with the recent "
                             "kept ones is below this, in (0, 1] (1 drops only perfect proxies)")
    parser.add_argument("--packed", action="store_true",
                        help="store the genotypes bit-packed (8x smaller in memory and on disk; for beacon-scale "
                             "populations: the release and the analytic attacks read them a block of SNVs at a time)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the simulation (or of the VCF panel draw)")
    parser.add_argument("--out", required=True, metavar="POP.npz", help="population file to write")
    add_force_arg(parser, "the population file")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    outputs = claim_outputs("--out", args.out, force=args.force)
    if not 0 <= args.min_maf < 0.5:
        raise InputError(f"`--min-maf` must be in [0, 0.5), got {args.min_maf}.")
    if not 0 < args.max_r2 <= 1:
        raise InputError(f"`--max-r2` must be in (0, 1], got {args.max_r2}.")
    if args.vcf is not None:
        from bngp.data.vcf import load_vcf

        population = load_vcf(args.vcf, reference_samples=args.reference, n_snvs=args.snvs, min_maf=args.min_maf,
                              max_r2=args.max_r2, seed=args.seed, packed=args.packed)
        source = f"VCF {args.vcf}"
    else:
        missing = [flag for flag, value in (("--individuals", args.individuals), ("--reference", args.reference),
                                            ("--snvs", args.snvs)) if value is None]
        if missing:
            raise InputError(f"`{missing[0]}` is required (unless --vcf is given).")
        _check_memory(args.individuals + args.reference, args.snvs, args.packed)
        if args.model == "independent":
            from bngp.data.independent import simulate_independent

            population = simulate_independent(args.individuals, args.reference, args.snvs, seed=args.seed,
                                              min_frequency=args.min_maf, packed=args.packed)
        else:
            from bngp.data.genome import simulate_genome

            population = simulate_genome(args.individuals, args.reference, args.snvs, seed=args.seed,
                                         min_maf=args.min_maf, max_r2=args.max_r2, packed=args.packed)
        source = f"{args.model}, seed {args.seed}"
    from bngp.data.npz import save_population

    with outputs.staged() as stage:
        save_population(population, stage(args.out))
    layout = ", bit-packed" if population.packed else ""
    print(f"wrote {args.out}: {population.n_individuals} individuals, {population.n_reference} reference, "
          f"{population.n_attributes} SNVs ({source}{layout})")
    return 0


#: bytes held per SNV besides the matrices: its carrier frequency (float64) and its name (a
#: unicode array and the Python strings it is built from).
_BYTES_PER_SNV = 100


def _check_memory(rows: int, snvs: int, packed: bool) -> None:
    """Refuse, before any work, a population of ``rows`` people x ``snvs`` SNVs that does not fit in
    the available memory.  Held at once: the bit-packed draw and its split into individuals and
    reference panel (1/8 byte per genotype each), the dense uint8 matrices unless ``packed`` (1 byte
    per genotype) and :data:`_BYTES_PER_SNV` per SNV."""
    if rows < 1 or snvs < 1:
        return
    needed = rows * snvs * (0.25 + (0.0 if packed else 1.0)) + _BYTES_PER_SNV * snvs
    hint = "" if packed else "; --packed holds the genotypes 8x smaller"
    require_memory(needed, f"`--snvs` {snvs:,} for {rows:,} people", hint)
