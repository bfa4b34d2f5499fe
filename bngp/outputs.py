"""The files one command writes, claimed before any work and put in place together.

A command names every file it may write from its ``--out`` path (the main file and its sidecars: a
report, plots, raw scores).  :func:`claim_outputs` checks them before any expensive work: none may be an
existing directory, their folder must exist and be writable (a missing folder is never created
silently), and none may exist unless the user asked for ``--force``.  :meth:`OutputSet.staged` then
yields a function that maps each final path to a temporary name beside it; the command writes there,
and on success every staged file replaces its final name and every claimed file that was not written
this time (a sidecar of an earlier run, such as a plot this run does not draw) is removed, so the
files on disk always come from one run.  On failure the temporary files are removed and the old
outputs stay as they were.
"""

from __future__ import annotations

import argparse
import os
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Iterator

from bngp.errors import InputError, MissingFileError

__all__ = ["OutputSet", "add_force_arg", "claim_outputs", "claim_report_outputs", "check_output_folder", "check_new_directory"]


def check_output_folder(flag: str, path: Path) -> None:
    """Fail unless the folder that is to hold ``path`` exists and is writable."""
    parent = path.parent
    if not parent.exists():
        ancestor = parent
        while not ancestor.exists() and ancestor != ancestor.parent:
            ancestor = ancestor.parent
        if ancestor.exists() and not ancestor.is_dir():
            raise InputError(f"`{flag}` {path}: {ancestor} is not a directory.")
        raise MissingFileError(f"`{flag}` folder does not exist: {parent} (create it first).")
    if not parent.is_dir():
        raise InputError(f"`{flag}` {path}: {parent} is not a directory.")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise InputError(f"`{flag}` folder is not writable: {parent}")


def check_new_directory(flag: str, path: str | Path, *, force: bool, hint: str = "") -> Path:
    """Fail unless the output directory ``path`` can be created: its parent an existing writable folder,
    ``path`` itself not a file, and absent unless ``force`` (``hint`` is appended to the refusal)."""
    path = Path(path)
    check_output_folder(flag, path)
    if path.exists() and not path.is_dir():
        raise InputError(f"`{flag}` {path} exists and is not a directory.")
    if path.exists() and not force:
        raise InputError(f"`{flag}` {path} already exists: use --force to replace it{hint}.")
    return path


@dataclass(frozen=True)
class OutputSet:
    """Every file a command may write (``paths[0]`` is the main one), claimed by :func:`claim_outputs`."""

    flag: str
    paths: tuple[Path, ...]

    @contextmanager
    def staged(self) -> Iterator[Callable[[str | Path], Path]]:
        """Yield ``stage(final) -> temporary path``; on success put every staged file in place and remove
        the claimed files not staged; on an exception remove the staged files and keep the old ones."""
        staged: dict[Path, Path] = {}

        def stage(final: str | Path) -> Path:
            final = Path(final)
            if final not in self.paths:
                raise ValueError(f"{final} was not claimed as an output of {self.flag}")
            temporary = final.with_name(f".{final.name}.{os.getpid()}.partial")
            staged[final] = temporary
            return temporary

        try:
            yield stage
        except BaseException:
            for temporary in staged.values():
                temporary.unlink(missing_ok=True)
            raise
        missing = [final for final, temporary in staged.items() if not temporary.exists()]
        if missing:
            for temporary in staged.values():
                temporary.unlink(missing_ok=True)
            raise RuntimeError(f"{missing[0]} was staged but never written")
        for final in self.paths:
            if final not in staged:
                final.unlink(missing_ok=True)
        for final, temporary in staged.items():
            os.replace(temporary, final)


def claim_outputs(flag: str, main: str | Path, sidecars: Iterable[str | Path] = (), *, force: bool) -> OutputSet:
    """Check the main output ``main`` (given as ``flag``) and its ``sidecars`` before any work (module
    docstring): each is not a directory, its folder exists and is writable, and none exists unless
    ``force``."""
    paths = tuple(dict.fromkeys(Path(p) for p in (main, *sidecars)))
    for path in paths:
        if path.is_dir():
            raise InputError(f"`{flag}` {path} is an existing directory; give a file name.")
        check_output_folder(flag, path)
    existing = [path for path in paths if path.exists()]
    if existing and not force:
        others = f" (and {len(existing) - 1} other output file(s) of the same run)" if len(existing) > 1 else ""
        raise InputError(f"`{flag}` {existing[0]} already exists{others}: use --force to replace it.")
    return OutputSet(flag, paths)


def claim_report_outputs(out: str | Path, *, force: bool) -> tuple[OutputSet, Path, Path]:
    """A JSON output with its Markdown report and PNG plot beside it (same stem), claimed together
    (:func:`claim_outputs`): the set, the Markdown path and the PNG path."""
    out = Path(out)
    if out.suffix.lower() in (".md", ".png"):
        raise InputError(f"`--out` {out} must not end in .md or .png: the report is written next to it.")
    markdown, png = out.with_suffix(".md"), out.with_suffix(".png")
    return claim_outputs("--out", out, [markdown, png], force=force), markdown, png


def add_force_arg(parser: argparse.ArgumentParser, what: str = "the output files") -> None:
    """--force: replace existing outputs (:func:`claim_outputs`); without it they are refused."""
    parser.add_argument("--force", action="store_true",
                        help=f"replace {what} if they exist (default: refuse, so that no result is overwritten)")
