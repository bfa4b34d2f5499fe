"""Typed exceptions of the toolkit.

Every failure caused by bad input raises a subclass of :class:`BNGPError`; the command line
turns these into a one-line message and exit code 2.  They also subclass the matching
built-in (``ValueError``/``FileNotFoundError``) so generic handlers keep working.
"""

from __future__ import annotations

__all__ = [
    "BNGPError",
    "InputError",
    "DataFormatError",
    "MissingFileError",
    "UnknownNameError",
    "TrainingError",
    "InsufficientMemoryError",
]


class BNGPError(Exception):
    """Base class of all errors raised deliberately by bngp."""


class InputError(BNGPError, ValueError):
    """A parameter or array has an invalid value (NaN, out of range, wrong shape...)."""


class DataFormatError(InputError):
    """A data file or array does not have the expected structure or content."""


class MissingFileError(BNGPError, FileNotFoundError):
    """An input file does not exist or cannot be read."""


class UnknownNameError(InputError):
    """A registry lookup (attack, defense, mechanism, audit method) failed."""


class TrainingError(BNGPError, RuntimeError):
    """Training could not proceed (e.g. an incompatible checkpoint)."""


class InsufficientMemoryError(InputError):
    """A step's estimated peak memory exceeds the memory available (:func:`bngp.memory.require_memory`)."""
