"""Checks shared by the audits: confidence, delta, score/label arrays and seeds.

Every failure raises :class:`bngp.errors.InputError` (or its subclass ``DataFormatError``)
with a one-line message of the form "`name` must be ..., got ...".
"""

from __future__ import annotations

import numpy as np

from bngp.errors import DataFormatError
from bngp.rng import SeedLike, resolve_rng
from bngp.validation import check_delta, check_finite_array, check_in_open_interval

__all__ = [
    "tagged_rng",
    "SeedLike",
    "check_confidence",
    "check_delta",
    "check_labels",
    "check_scores_and_labels",
    "resolve_rng",
]

def check_confidence(confidence: float) -> float:
    """Return ``confidence`` as float if it lies in (0, 1)."""
    return check_in_open_interval("confidence", confidence, 0.0, 1.0)


def check_labels(name: str, labels: np.ndarray, length: int | None = None) -> np.ndarray:
    """Return a 1-D 0/1 (or bool) label array as bool; reject NaN, other values, bad length."""
    values = check_finite_array(name, labels, ndim=1)
    bad = (values != 0) & (values != 1)
    if bad.any():
        raise DataFormatError(f"`{name}` must be 0/1, found value {values[bad][0]:g}.")
    if length is not None and values.shape[0] != length:
        raise DataFormatError(f"`{name}` must have length {length} (one per score), got {values.shape[0]}.")
    return values.astype(bool)


def check_scores_and_labels(
    scores: np.ndarray,
    members: np.ndarray,
    *,
    scores_name: str = "scores",
    members_name: str = "members",
) -> tuple[np.ndarray, np.ndarray]:
    """Validate a score vector and its membership labels (member = 1, higher score = member).

    Returns:
        (scores as float64, members as bool), both 1-D of the same length, with at least one
        member and one non-member.
    """
    values = check_finite_array(scores_name, scores, ndim=1)
    labels = check_labels(members_name, members, length=values.shape[0])
    n_members = int(labels.sum())
    if n_members == 0 or n_members == labels.shape[0]:
        kind = "non-member (0)" if n_members else "member (1)"
        raise DataFormatError(
            f"`{members_name}` must contain both members and non-members, got no {kind} among {labels.shape[0]}."
        )
    return values, labels


def tagged_rng(seed: SeedLike, tag: int) -> tuple[np.random.Generator, int | None]:
    """``(generator, recorded_seed)`` for an audit's own randomness (tie-breaking keys, a random
    split).

    An int (or ``None``, drawn from the OS and recorded) seed s gives
    ``default_rng(SeedSequence([s, tag]))``, a stream unrelated to ``default_rng(s)``: with
    ``seed=0`` the audit does not replay the ``default_rng(0)`` stream that may have drawn the
    scores themselves (which made two-valued scores certify eps 4.8 for a true eps of 1).  A
    Generator is used as given (recorded as ``None``); its later outputs are independent of
    what it produced before.
    """
    rng, recorded = resolve_rng(seed)
    if recorded is None:
        return rng, None
    return np.random.default_rng(np.random.SeedSequence([recorded, int(tag)])), recorded
