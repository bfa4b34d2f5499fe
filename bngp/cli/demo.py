"""``bngp demo``: simulate a small genome, train defenders, evaluate them, write a report."""

from __future__ import annotations

import argparse

from bngp.cli import COMMANDS
from bngp.cli.common import add_threads_arg
from bngp.demo import DemoConfig, run_demo


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    defaults = DemoConfig()
    parser = subparsers.add_parser(
        "demo",
        help=COMMANDS["demo"][1],)
    add_threads_arg(parser)
    parser.add_argument("--out", default="bngp-demo", metavar="DIR", help="output directory (default bngp-demo)")
    parser.add_argument("--steps", type=int, default=defaults.steps, help="defender training steps")
    parser.add_argument("--seed", type=int, default=defaults.seed, help="seed of the simulation, training and evaluation")
    parser.add_argument("--budget", default=defaults.budget, metavar="U",
                        help="utility budget of the defender: mean |x - f(D)|, absolute or a fraction of the "
                             "data-independent release's loss such as 0.5x (default: %(default)s)")
    parser.add_argument("--force", action="store_true", help="replace DIR if it exists")
    parser.add_argument("--quiet", action="store_true", help="no progress output")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    run_demo(args.out, DemoConfig(steps=args.steps, seed=args.seed, budget=args.budget), progress=not args.quiet,
             force=args.force)
    return 0
