"""``bngp sweep``: run a grid of defenses x trade-offs x seeds x datasets (``docs/sweep.md``)."""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

from bngp.cli import COMMANDS
from bngp.errors import InputError
from bngp.outputs import check_new_directory
from bngp.sweep import BACKENDS, run_sweep


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "sweep",
        help=COMMANDS["sweep"][1],
        description="Run one task per cell of the grid in CONFIG (.json or .toml, docs/sweep.md), reuse the\n"
                    "cells already finished in DIR/cells/ with --resume, and merge every cell into DIR/sweep.json, DIR/sweep.md\n"
                    "and DIR/frontier.png.  Exit code 1 when a cell failed after its retries (the outputs report\n"
                    "it), 2 on bad input.",
    )
    parser.add_argument("config", metavar="CONFIG", help="sweep config (.json or .toml)")
    parser.add_argument("--backend", choices=BACKENDS, default="local",
                        help="local: cells one after another in this process; ray: one Ray task per cell")
    parser.add_argument("--address", metavar="ADDR",
                        help="Ray cluster to join (ray backend; default: start a local Ray runtime)")
    parser.add_argument("--workers", type=int, metavar="N", help="CPUs of the local Ray runtime (default: all cores)")
    parser.add_argument("--out", required=True, metavar="DIR", help="output directory (created in an existing folder)")
    parser.add_argument("--resume", action="store_true", help="reuse the finished cells of an earlier sweep in DIR")
    parser.add_argument("--force", action="store_true", help="remove an earlier sweep in DIR and start over")
    parser.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.resume and args.force:
        raise InputError("`--resume` and `--force` exclude each other: reuse the earlier cells, or start over.")
    out = Path(args.out)
    if not (args.resume and out.is_dir()):
        check_new_directory("--out", out, force=args.force, hint=", or --resume to reuse its finished cells")
    replaced = out.with_name(f".{out.name}.replaced") if args.force and out.is_dir() else None
    if replaced is not None:  # the earlier sweep is removed only once the new one has run
        shutil.rmtree(replaced, ignore_errors=True)
        out.rename(replaced)
    try:
        result = run_sweep(args.config, args.out, backend=args.backend, address=args.address, workers=args.workers,
                           progress=not args.quiet)
    except BaseException:
        if replaced is not None:
            shutil.rmtree(out, ignore_errors=True)
            replaced.rename(out)
        raise
    if replaced is not None:
        shutil.rmtree(replaced)
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
