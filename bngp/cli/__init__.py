"""The ``bngp`` command line: thin wiring of parsing, validation, the API and file output.

Each sub-command lives in its own module exposing ``add_parser(subparsers)`` which registers
the command and sets ``func`` (a callable taking the parsed namespace and returning an exit
code).  Errors caused by bad input become one line on stderr and exit code 2.
"""

from __future__ import annotations

import argparse
import textwrap
import functools
import importlib
import os
import sys
import warnings

from bngp import __version__
from bngp.errors import BNGPError

__all__ = ["main", "build_parser", "COMMANDS", "HelpFormatter"]

#: sub-command -> (module under ``bngp.cli``, one-line help), in the order ``bngp --help`` shows.
COMMANDS: dict[str, tuple[str, str]] = {
    "demo": ("demo", "end-to-end demonstration on built-in defaults"),
    "simulate": ("simulate", "simulate a population and reference panel"),
    "data": ("data", "population from a real data set (adult: UCI Adult; digits: 8x8 digits; mnist: local MNIST files)"),
    "train": ("train", "train a defender G(b, r) in the BNGP game"),
    "evaluate": ("evaluate", "evaluate attacks against a defense (ROC/AUC)"),
    "release": ("release", "release noisy frequencies of a member list, or many shadow releases"),
    "audit": ("audit", "empirical lower bound on eps from attack scores"),
    "audit-mechanism": ("audit_mechanism", "empirical eps lower bound of the release under a defense (canaries or PANORAMIA)"),
    "sweep": ("sweep", "run a grid of defenses x trade-offs x seeds x datasets (local or Ray) and plot the frontier"),
    "reproduce": ("reproduce", "reproduce an experiment of the BNGP paper (or all) and write its report"),
}


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Keeps descriptions as written and shows every option's default (unless its help states it)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if (
            "default" in text
            or not action.option_strings
            or action.required
            or action.default is None
            or action.default is False
            or action.default is argparse.SUPPRESS
        ):
            return text
        return f"{text} (default: %(default)s)" if text else "(default: %(default)s)"

    def _split_lines(self, text: str, width: int) -> list[str]:
        """Wrap at spaces only: a name such as ``matched-gaussian:run=RUN_DIR`` stays whole."""
        return textwrap.wrap(self._whitespace_matcher.sub(" ", text).strip(), width, break_on_hyphens=False)


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The argument parser.  Only ``command``'s module is imported and given its full options
    (every command's when ``command`` is ``"all"``); the others are listed by name and help, so
    that ``bngp --help`` and ``bngp audit ...`` never import torch."""
    parser = argparse.ArgumentParser(
        prog="bngp",
        description="Bayes-Nash generative privacy for released summary statistics.",
    )
    parser.add_argument("--version", action="version", version=f"bngp {__version__}")
    subparsers = parser.add_subparsers(
        dest="command", required=True, metavar="COMMAND",
        parser_class=functools.partial(argparse.ArgumentParser, formatter_class=HelpFormatter),
    )
    for name, (module_name, text) in COMMANDS.items():
        if command in (name, "all"):
            importlib.import_module(f"bngp.cli.{module_name}").add_parser(subparsers)
        else:
            subparsers.add_parser(name, help=text)
    return parser


def _warning_line(command: str, message: Warning | str, category: type, filename: str, lineno: int,
                  file=None, line=None) -> None:
    """A warning of the library as the command's own line: ``bngp COMMAND: warning: ...`` (no source path)."""
    print(f"bngp {command}: warning: {str(message).splitlines()[0]}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``bngp`` console script; returns the process exit code.

    Sets ``THP_MEM_ALLOC_ENABLE=1`` for this process unless the variable is set (a user's value
    wins): torch reads it at its first allocation and then advises transparent huge pages for CPU
    tensors of 2 MiB and more (why: docs/design/game.md, "Large tensors on huge pages").  Importing
    bngp changes no environment.
    """
    os.environ.setdefault("THP_MEM_ALLOC_ENABLE", "1")
    arguments = sys.argv[1:] if argv is None else [str(a) for a in argv]
    command = next((a for a in arguments if not a.startswith("-")), None)
    parser = build_parser(command if command in COMMANDS else None)
    args = parser.parse_args(arguments)
    try:
        with warnings.catch_warnings():
            warnings.showwarning = functools.partial(_warning_line, args.command)
            if getattr(args, "threads", None) is not None:
                from bngp.cli.common import set_threads

                set_threads(args.threads)
            return int(args.func(args) or 0)
    except (BNGPError, ValueError, OSError) as exc:
        message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        print(f"bngp {args.command}: error: {message}", file=sys.stderr)
        return 2
    except MemoryError:
        print(f"bngp {args.command}: error: out of memory: the inputs are too large for this machine (smaller sizes, "
              "or a bit-packed population, --packed, use less)", file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:
        print(f"bngp {args.command}: interrupted" + (f"; {exc}" if str(exc) else ""), file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
