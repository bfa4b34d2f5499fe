"""``bngp reproduce NAME|all``: run the experiments of arXiv:2410.07414 and write their reports
(:mod:`bngp.reproduce`, docs/reproduce.md)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from bngp.cli import COMMANDS
from bngp.cli.common import add_device_arg, add_threads_arg, add_workers_arg


def _experiments_help() -> str:
    from bngp.reproduce import EXPERIMENTS

    def line(name: str, spec) -> str:
        text = f"{spec.label}: {spec.title.split(': ', 1)[-1]}"
        return f"  {name:<21} {text if len(text) <= 90 else text[:87] + '...'}"

    return "\n".join([*(line(name, spec) for name, spec in EXPERIMENTS.items()),
                      f"  {'frontier':<21} privacy-utility frontier with audited eps (genome and Adult; beyond the paper)"])


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    from bngp.reproduce import SCALES

    parser = subparsers.add_parser(
        "reproduce", help=COMMANDS["reproduce"][1],
        description="Train and attack what an experiment of the BNGP paper trained and attacked, and write\n"
                    "OUT/NAME/SCALE_seedS/ (report.md: our AUC +- std next to the paper's, each attack's knowledge\n"
                    "and direction, the strongest attack per defense, where and why we differ; results.json with\n"
                    "wall time and peak memory; auc.png and ROC plots) and OUT/index.md. Trained defenders and\n"
                    "finished evaluations go to OUT/NAME/runs/ and are reused (an interrupted training resumed from\n"
                    "its checkpoint) when the command is run again with --resume.\n\n"
                    "experiments:\n" + _experiments_help(),
    )
    parser.add_argument("names", metavar="NAME", help="an experiment, a comma-separated list, or `all`")
    parser.add_argument("--scale", choices=SCALES, default="quick",
                        help="quick: a pipeline check in well under a minute per experiment (its AUCs mean nothing); "
                             "small: shrunk setups, minutes per training; paper: the paper's sizes and budgets")
    parser.add_argument("--seed", type=int, default=0, help="seed of the populations, trainings and evaluations")
    parser.add_argument("--out", default="reproduce", metavar="DIR",
                        help="output root (created in an existing folder if needed)")
    parser.add_argument("--resume", action="store_true",
                        help="reuse the finished trainings and evaluations of an earlier run of the same experiments, "
                             "scale and seed in DIR (resuming an interrupted training from its checkpoint)")
    parser.add_argument("--force", action="store_true",
                        help="remove an earlier run of the same experiments, scale and seed in DIR and start over")
    parser.add_argument("--steps", type=int, metavar="S", help="defender training steps (default: the scale's)")
    parser.add_argument("--attacker-steps", type=int, metavar="S",
                        help="steps of the evaluation's Bayesian attacker and of the fresh-attacker check (default: the scale's)")
    parser.add_argument("--releases", type=int, metavar="R", help="evaluation releases (default: the scale's)")
    add_device_arg(parser, "training and the Bayesian attacker")
    add_threads_arg(parser)
    add_workers_arg(parser)
    parser.add_argument("--quiet", action="store_true", help="no progress lines")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from bngp.reproduce import budget_for, claim_output_root, reproduce
    from bngp.validation import check_positive_int

    for flag, value, minimum in (("--steps", args.steps, 1), ("--attacker-steps", args.attacker_steps, 1),
                                 ("--releases", args.releases, 2)):
        if value is not None:
            check_positive_int(flag, value, minimum=minimum)
    claim_output_root(args.names, args.scale, args.seed, args.out, resume=args.resume, force=args.force)
    budget = budget_for(args.scale, steps=args.steps, attacker_steps=args.attacker_steps, releases=args.releases)
    results = reproduce(args.names, scale=args.scale, seed=args.seed, out=args.out, budget=budget, device=args.device,
                        progress=not args.quiet, workers=args.workers)
    print(json.dumps({
        "experiments": [{"name": r.name, "report": str(r.directory / "report.md"), "wall_seconds": round(r.wall_seconds, 1),
                         "peak_rss_gib": round(r.peak_rss_bytes / 2**30, 3)} for r in results],
        "index": str(Path(args.out) / "index.md"),
    }))
    return 0
