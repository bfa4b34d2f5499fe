"""The ``bngp`` command line: thin wiring of parsing, validation, the API and file output.

Each sub-command lives in its own module exposing ``add_parser(subparsers)`` which registers
the command and sets ``func`` (a callable taking the parsed namespace and returning an exit
code).  Errors caused by bad input become one line on stderr and exit code 2.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from bngp.errors import BNGPError

__all__ = ["main", "build_parser"]

#: sub-command modules under ``bngp.cli`` in the order shown by ``bngp --help``.
COMMAND_MODULES = ("demo", "simulate", "train", "evaluate", "release", "audit", "audit_mechanism")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every registered sub-command."""
    parser = argparse.ArgumentParser(
        prog="bngp",
        description="Bayes-Nash generative privacy for released summary statistics.",
    )
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module_name in COMMAND_MODULES:
        importlib.import_module(f"bngp.cli.{module_name}").add_parser(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``bngp`` console script; returns the process exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except (BNGPError, ValueError, OSError) as exc:
        message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        print(f"bngp {args.command}: error: {message}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"bngp {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
