"""Run directories as transactions: a training run appears under its name only when complete.

A run RUN_DIR is written in the sibling ``RUN_DIR.incomplete`` (config, checkpoints,
TensorBoard logs, then the defender and the summary).  When everything is written, a
``manifest.json`` listing every file with its size and SHA-256, the configuration and the
seed is added, and the directory is renamed to RUN_DIR in one step (a previous complete run
there is replaced only with ``force``; the rename of a directory is atomic on POSIX file
systems, so a reader sees the old run or the new one, never a mixture).  A run killed at any
point leaves RUN_DIR as it was and its progress in ``RUN_DIR.incomplete``, which ``--resume``
continues from its last checkpoint.  Every reader calls :func:`verify_run`, which refuses a
directory without a manifest or whose files do not match it.  :func:`drop_from_run` removes
files a complete run no longer needs (the resumable checkpoint of a finished paper-scale run:
1.3 GB for Table 5's composed game, against 24 MB for its defender) and rewrites the manifest
to match, so the run stays verifiable and small enough to keep with the results.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path
from typing import Any

from bngp.errors import DataFormatError, InputError, MissingFileError, TrainingError
from bngp.io_utils import write_json, write_text

__all__ = ["MANIFEST_FILE", "staging_dir", "check_run_target", "open_run", "commit_run", "verify_run", "drop_from_run",
           "add_to_run"]

MANIFEST_FILE = "manifest.json"
_INCOMPLETE = ".incomplete"
_REPLACED = ".replaced"
_CHUNK = 1 << 20


def staging_dir(run_dir: str | Path) -> Path:
    """Where the run RUN_DIR is written until it is complete: ``RUN_DIR.incomplete``."""
    run_dir = Path(run_dir)
    return run_dir.with_name(run_dir.name + _INCOMPLETE)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(_CHUNK), b""):
            digest.update(block)
    return digest.hexdigest()


def _files(directory: Path) -> list[Path]:
    return sorted(path for path in directory.rglob("*") if path.is_file() and path.name != MANIFEST_FILE)


def check_run_target(run_dir: str | Path, *, resume: bool, force: bool, checkpoint: str) -> None:
    """The checks :func:`open_run` makes, without touching anything: a command runs them before its
    expensive work.  RUN_DIR must be a directory or absent, its parent writable; a fresh run needs it
    absent or empty and no interrupted run with a checkpoint in RUN_DIR.incomplete (unless ``force``: that
    progress is then discarded); ``resume`` needs a checkpoint in RUN_DIR.incomplete or RUN_DIR."""
    run_dir = Path(run_dir)
    if run_dir.exists() and not run_dir.is_dir():
        raise InputError(f"`--out` {run_dir} exists and is not a directory.")
    parent = run_dir.parent
    if parent.exists() and not os.access(parent, os.W_OK | os.X_OK):
        raise InputError(f"`--out` directory is not writable: {parent}")
    if resume:
        if not ((staging_dir(run_dir) / checkpoint).is_file() or (run_dir / checkpoint).is_file()):
            raise TrainingError(f"cannot resume: no checkpoint in {staging_dir(run_dir)} or {run_dir}.")
        return
    if run_dir.exists() and any(run_dir.iterdir()) and not force:
        raise InputError(f"`--out` {run_dir} already exists: use --force to replace it, or --resume to continue it.")
    if (staging_dir(run_dir) / checkpoint).is_file() and not force:
        raise InputError(f"`--out` {staging_dir(run_dir)} holds an interrupted run: use --resume to continue it, "
                         "or --force to start over.")


def open_run(run_dir: str | Path, *, resume: bool, force: bool, checkpoint: str) -> Path:
    """Check RUN_DIR before any work and return the directory to write the run in.

    Fresh runs: RUN_DIR must not exist or be empty, and an interrupted ``RUN_DIR.incomplete`` with a
    checkpoint is kept for ``resume`` (both unless ``force``); one without a checkpoint is discarded.  ``resume``: continue ``RUN_DIR.incomplete`` from its
    ``checkpoint``, or a complete RUN_DIR (copied to the staging directory, replaced when the
    continued run completes).
    """
    run_dir = Path(run_dir)
    staging = staging_dir(run_dir)
    check_run_target(run_dir, resume=resume, force=force, checkpoint=checkpoint)
    if resume:
        if (staging / checkpoint).is_file():
            return staging
        if (run_dir / checkpoint).is_file():
            verify_run(run_dir)
            if staging.exists():
                shutil.rmtree(staging)
            shutil.copytree(run_dir, staging)
            (staging / MANIFEST_FILE).unlink(missing_ok=True)
            return staging
    if staging.exists():
        shutil.rmtree(staging)
    staging.mkdir(parents=True)
    return staging


def commit_run(staging: Path, run_dir: str | Path, record: dict[str, Any]) -> Path:
    """Write the manifest (every file's size and SHA-256, plus ``record``) and move the complete
    run from ``staging`` to RUN_DIR, replacing a previous run there."""
    run_dir = Path(run_dir)
    files = {str(path.relative_to(staging)): {"bytes": path.stat().st_size, "sha256": _sha256(path)}
             for path in _files(staging)}
    write_json(staging / MANIFEST_FILE, {"format": "bngp-run-1", "files": files, **record})
    if run_dir.exists():
        replaced = run_dir.with_name(run_dir.name + _REPLACED)
        if replaced.exists():
            shutil.rmtree(replaced)
        os.replace(run_dir, replaced)
        os.replace(staging, run_dir)
        shutil.rmtree(replaced)
    else:
        os.replace(staging, run_dir)
    return run_dir


def verify_run(run_dir: str | Path) -> dict[str, Any]:
    """The manifest of a complete run; a one-line error for a missing, incomplete or altered one."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        hint = " (an interrupted run is in " + str(staging_dir(run_dir)) + ": --resume it)" if staging_dir(run_dir).is_dir() else ""
        raise MissingFileError(f"run directory not found: {run_dir}{hint}")
    manifest_path = run_dir / MANIFEST_FILE
    if not manifest_path.is_file():
        raise DataFormatError(f"{run_dir} is not a complete bngp run (no {MANIFEST_FILE}): it was interrupted, or "
                              "written by another tool; train it again.")
    try:
        manifest = json.loads(manifest_path.read_text())
        files = dict(manifest["files"])
    except (ValueError, KeyError, TypeError, UnicodeDecodeError):
        raise DataFormatError(f"{manifest_path} is not a bngp run manifest.") from None
    for name, entry in files.items():
        path = run_dir / name
        if not path.is_file():
            raise DataFormatError(f"{run_dir} is incomplete: {name} listed in its manifest is missing.")
        if path.stat().st_size != entry.get("bytes") or _sha256(path) != entry.get("sha256"):
            raise DataFormatError(f"{run_dir}: {name} does not match its manifest (changed after the run completed).")
    return manifest


def drop_from_run(run_dir: str | Path, names: tuple[str, ...]) -> dict[str, Any]:
    """Remove the files ``names`` (paths relative to RUN_DIR) from a complete run and return its
    new manifest.

    The run is verified first; the new manifest lists the remaining files and records each
    dropped one (size and SHA-256) under ``dropped``.  It is written (atomically) before any
    file is removed, so an interruption leaves a run that still verifies.  Names the run does
    not hold are ignored; a run without a resumable checkpoint can no longer be ``--resume``-d.
    """
    run_dir = Path(run_dir)
    manifest = verify_run(run_dir)
    files = dict(manifest["files"])
    gone = {name: files.pop(name) for name in names if name in files}
    if not gone:
        return manifest
    manifest = {**manifest, "files": files, "dropped": {**manifest.get("dropped", {}), **gone}}
    write_json(run_dir / MANIFEST_FILE, manifest)
    for name in gone:
        (run_dir / name).unlink()
    return manifest


def add_to_run(run_dir: str | Path, texts: dict[str, str]) -> dict[str, Any]:
    """Add text files (``{name relative to RUN_DIR: content}``) to a complete run and return its new
    manifest.  The run is verified first; each file is written atomically before the manifest that lists
    it, so an interruption leaves a run that still verifies."""
    run_dir = Path(run_dir)
    manifest = verify_run(run_dir)
    files = dict(manifest["files"])
    for name, text in texts.items():
        path = run_dir / name
        write_text(path, text)
        files[name] = {"bytes": path.stat().st_size, "sha256": _sha256(path)}
    manifest = {**manifest, "files": files}
    write_json(run_dir / MANIFEST_FILE, manifest)
    return manifest
