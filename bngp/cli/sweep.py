"""``bngp sweep``: run a grid of defenses x trade-offs x seeds x datasets (``docs/sweep.md``)."""

from __future__ import annotations

import argparse
import json

from bngp.cli import COMMANDS
from bngp.sweep import BACKENDS, run_sweep


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "sweep",
        help=COMMANDS["sweep"][1],
        description="Run one task per cell of the grid in CONFIG (.json or .toml, docs/sweep.md), reuse the\n"
                    "cells already finished in DIR/cells/, and merge every cell into DIR/sweep.json, DIR/sweep.md\n"
                    "and DIR/frontier.png.  Exit code 1 when a cell failed after its retries (the outputs report\n"
                    "it), 2 on bad input.",
    )
    parser.add_argument("config", metavar="CONFIG", help="sweep config (.json or .toml)")
    parser.add_argument("--backend", choices=BACKENDS, default="local",
                        help="local: cells one after another in this process; ray: one Ray task per cell")
    parser.add_argument("--address", metavar="ADDR",
                        help="Ray cluster to join (ray backend; default: start a local Ray runtime)")
    parser.add_argument("--workers", type=int, metavar="N", help="CPUs of the local Ray runtime (default: all cores)")
    parser.add_argument("--out", required=True, metavar="DIR", help="output directory (created if needed)")
    parser.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    result = run_sweep(args.config, args.out, backend=args.backend, address=args.address, workers=args.workers,
                       progress=not args.quiet)
    print(json.dumps({
        "cells": len(result.cells),
        "computed": result.computed,
        "reused": result.reused,
        "failed": len(result.failed),
        "json": str(result.json_path),
        "markdown": str(result.markdown_path),
        "frontier_plot": str(result.plot_path),
    }))
    return 1 if result.failed else 0
