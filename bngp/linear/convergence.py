"""Linear fits to convergence in the number of shadow releases: the learning curve.

Shadow releases are doubled, from :func:`default_shadow_releases` up to :func:`max_shadow_releases`,
until the validation AUC rises by less than ``tolerance`` per doubling
(:func:`bngp.metrics.levelled_off`); the fit of highest validation AUC is returned with the learning
curve (releases, validation AUC), which every attack that uses it reports.  Each doubling keeps
the releases already drawn (:class:`SharedDraws`), so the draws are those of one sequence.

A curve always fits its first two sizes (a curve of one point has not levelled off).  Given a
``helper`` (any :class:`Prefetcher`, e.g. a :class:`bngp.workers.Helper` process), the first size
is submitted to it while this process fits the second: the same fits, in the time of the larger.
The caller decides whether there is one; without it, for releases off the CPU, or for a ``fit``
that does not pickle, every size is fitted here, and a first size the helper fails to fit (a helper
process that died) is fitted here as well.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import torch

from bngp.errors import InputError
from bngp.metrics import levelled_off

from .fits import LinearFit

__all__ = ["DEFAULT_VALIDATION_RELEASES", "SHADOW_FLOAT_BUDGET", "LearningCurve", "Pending", "Prefetcher", "Sampler",
           "SharedDraws", "converged_fit_bytes", "coordinate_curve_start", "default_shadow_releases", "fit_converged",
           "fit_converged_jointly", "max_shadow_releases"]

#: the largest shadow set (releases x outputs, float32: 512 MiB) a converged fit may reach.
SHADOW_FLOAT_BUDGET = 2**27

#: validation releases drawn by :func:`fit_converged` when the caller gives none.
DEFAULT_VALIDATION_RELEASES = 500

#: sample(n) -> (releases (n, Q), memberships (n, K)) as tensors, each call fresh draws.
Sampler = Callable[[int], tuple[torch.Tensor, torch.Tensor]]


class Pending(Protocol):
    """A call submitted to a :class:`Prefetcher`, not yet waited for."""

    def result(self) -> Any:
        """Wait for the call and return its value (its exception is raised here)."""


class Prefetcher(Protocol):
    """Where a learning curve's first fit can run while this process fits the next one
    (:class:`bngp.workers.Helper` is one): ``function`` and its arguments travel pickled, and the
    call runs before the other calls waiting there.  :meth:`submit_first` raises
    :class:`pickle.PicklingError`, ``TypeError`` or ``AttributeError`` at once for what cannot travel."""

    def submit_first(self, function: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Pending:
        """Run ``function(*args, **kwargs)`` there, ahead of the calls still waiting."""


def default_shadow_releases(n_individuals: int, n_outputs: int) -> int:
    """The first size of a converged fit, and the fixed size of the game's in-game refits:
    max(500, 2K, 2|Q|), capped at :data:`SHADOW_FLOAT_BUDGET` floats (releases x outputs), at least 500.

    With fewer shadow releases than released values the |Q|-input map is not identified.
    """
    wanted = max(500, 2 * int(n_individuals), 2 * int(n_outputs))
    return max(500, min(wanted, SHADOW_FLOAT_BUDGET // max(1, int(n_outputs))))


def coordinate_curve_start(start: int, maximum: int) -> int:
    """The first size of a converged fit's learning curve on releases read in r <= K - 1 coordinates (the candidates'
    row space, :mod:`bngp.data.geometry`): a fit then costs its K x K penalty paths whatever the shadow releases
    (drawn once for every size), so the curve is its last doubling alone, from maximum / 2 (never below ``start``)
    to ``maximum``."""
    return min(max(int(start), (int(maximum) + 1) // 2), int(maximum))


def max_shadow_releases(n_individuals: int, n_outputs: int) -> int:
    """The most shadow releases :func:`fit_converged` may draw: :data:`SHADOW_FLOAT_BUDGET` floats
    (releases x outputs), at most 64 max(K, |Q|), at least :func:`default_shadow_releases`.  A curve
    can need about 10 |Q| releases to level off (``docs/design/linear.md``).
    """
    cap = SHADOW_FLOAT_BUDGET // max(1, int(n_outputs))
    return max(default_shadow_releases(n_individuals, n_outputs), min(cap, 64 * max(int(n_individuals), int(n_outputs))))


#: bytes held at the peak of a converged ridge-and-whitened fit, per value of each array (float32 4,
#: float64 8): the shadow set (its float32 draws, their growth by concatenation, the float64 centred
#: copy that becomes the residual E, and the thin SVD's workspace), the K x |Q| float64 matrices (the
#: signal M, the product B_c^T X_c that forms it, M_perp, the ridge and whitened maps and a temporary),
#: and the validation and test releases (float32 draws and a float64 copy).
_PEAK_BYTES_PER_SHADOW_VALUE = 28
_PEAK_BYTES_PER_MAP_VALUE = 48
_PEAK_BYTES_PER_HELD_OUT_VALUE = 12


def converged_fit_bytes(n_individuals: int, n_outputs: int, held_out_releases: int = 1000,
                        releases: int | None = None) -> int:
    """An upper estimate of the peak memory (bytes) of :func:`fit_converged_jointly` with
    :func:`bngp.linear.whitened.fit_ridge_and_whitened` up to R_max = ``releases`` shadow releases (default
    :func:`max_shadow_releases`), scored on ``held_out_releases`` validation and test releases:
    28 R_max |Q| + 48 K |Q| + 12 V |Q| (V held-out releases; the bytes per value
    are those of the arrays held at once, listed above; ``docs/design/linear.md`` compares the
    estimate with measured peaks)."""
    k, q = int(n_individuals), int(n_outputs)
    shadow = (max_shadow_releases(k, q) if releases is None else int(releases)) * q
    return (_PEAK_BYTES_PER_SHADOW_VALUE * shadow + _PEAK_BYTES_PER_MAP_VALUE * k * q
            + _PEAK_BYTES_PER_HELD_OUT_VALUE * int(held_out_releases) * q)


@dataclass(frozen=True)
class LearningCurve:
    """Validation AUC of a fit by number of shadow releases (doubling), and whether it levelled off."""

    releases: tuple[int, ...]
    auc: tuple[float, ...]
    converged: bool
    tolerance: float

    def to_dict(self) -> dict:
        return {"releases": list(self.releases), "auc": list(self.auc), "converged": self.converged, "tolerance": self.tolerance}


class SharedDraws:
    """Shadow releases simulated once and read by several fits: :meth:`first` returns the first
    draws of one sequence from ``sample``, which is called only for draws no fit has asked for yet
    (the storage grows by concatenation, amortised by the doubling of :func:`fit_converged`), with
    the sizes a single fit would ask for (so the draws are those a fit of ``sample`` alone gets)."""

    def __init__(self, sample: Sampler) -> None:
        self._sample = sample
        self._x: torch.Tensor | None = None
        self._b: torch.Tensor | None = None

    def _available(self) -> int:
        return 0 if self._x is None else int(self._x.shape[0])

    def first(self, n: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The first ``n`` draws (views of the storage: not to be modified)."""
        n = int(n)
        if n > self._available():
            x, b = self._sample(n - self._available())
            self._x = x if self._x is None else torch.cat([self._x, x.to(self._x.dtype)])
            self._b = b if self._b is None else torch.cat([self._b, b.to(self._b.dtype)])
        return self._x[:n], self._b[:n]


def fit_converged(
    fit: Callable[[torch.Tensor, torch.Tensor, tuple[torch.Tensor, torch.Tensor]], LinearFit],
    sample: Sampler | SharedDraws,
    *,
    start: int,
    maximum: int,
    validation: tuple[torch.Tensor, torch.Tensor] | None = None,
    tolerance: float = 0.005,
    helper: Prefetcher | None = None,
) -> tuple[LinearFit, LearningCurve]:
    """Fit ``fit(x, b, validation)`` on ``start``, 2 ``start``, 4 ``start``, ... shadow releases
    drawn from ``sample`` (each doubling keeps the releases already drawn) until the validation
    AUC rises by less than ``tolerance`` or ``maximum`` releases are reached.

    Returns the fit of highest validation AUC and the learning curve.  ``validation`` defaults
    to :data:`DEFAULT_VALIDATION_RELEASES` fresh draws from ``sample``, drawn first.  Given
    :class:`SharedDraws` (draws other fits read too; ``validation`` then required), the fits read
    its first releases in place, without a copy of their own.  Given a ``helper``, the first size is
    fitted there while this process fits the second (module docstring).

    Raises:
        InputError: unless 3 <= ``start`` <= ``maximum``, or on :class:`SharedDraws` without ``validation``.
    """
    return fit_converged_jointly(_AsTuple(fit), sample, start=start, maximum=maximum, validation=validation,
                                 tolerance=tolerance, helper=helper)[0]


@dataclass(frozen=True)
class _AsTuple:
    """``fit`` returning its one fit as a tuple (picklable, so that a helper process can run it)."""

    fit: Callable[[torch.Tensor, torch.Tensor, tuple[torch.Tensor, torch.Tensor]], LinearFit]

    def __call__(self, x: torch.Tensor, b: torch.Tensor, validation: tuple[torch.Tensor, torch.Tensor]) -> tuple[LinearFit]:
        return (self.fit(x, b, validation),)


def fit_converged_jointly(
    fit: Callable[[torch.Tensor, torch.Tensor, tuple[torch.Tensor, torch.Tensor]], tuple[LinearFit, ...]],
    sample: Sampler | SharedDraws,
    *,
    start: int,
    maximum: int,
    validation: tuple[torch.Tensor, torch.Tensor] | None = None,
    tolerance: float = 0.005,
    helper: Prefetcher | None = None,
) -> tuple[tuple[LinearFit, LearningCurve], ...]:
    """:func:`fit_converged` for a ``fit`` that returns several fits of the same releases
    (:func:`bngp.linear.whitened.fit_ridge_and_whitened`): shadow releases are doubled until the validation AUC of every
    one of them has levelled off (or ``maximum`` is reached), and each keeps its fit of highest
    validation AUC and its own learning curve.  A fit whose curve levelled off earlier is fitted
    at the later sizes too, so its curve runs on and its best fit can only be better."""
    if start < 3 or maximum < start:
        raise InputError(f"shadow releases must satisfy 3 <= start <= maximum, got {start} and {maximum}.")
    if isinstance(sample, SharedDraws):
        if validation is None:
            raise InputError("a converged fit on shared draws needs `validation` releases.")
        draws = sample
    else:
        if validation is None:
            validation = sample(DEFAULT_VALIDATION_RELEASES)
        draws = SharedDraws(sample)
    sizes: list[int] = []
    scores: list[list[float]] = []
    best: list[LinearFit] = []

    def record(size: int, current: tuple[LinearFit, ...]) -> list[bool]:
        nonlocal best, scores
        sizes.append(size)
        if not best:
            best, scores = list(current), [[] for _ in current]
        for index, one in enumerate(current):
            scores[index].append(one.score)
            if one.score > best[index].score:
                best[index] = one
        return [levelled_off(sizes, curve, tolerance) for curve in scores]

    size = start
    ahead = _fit_ahead(helper, fit, draws, start, maximum, validation)
    while True:
        if ahead is not None:  # the first size is the helper's: this process fits the second meanwhile
            second = min(2 * size, maximum)
            # kept as drawn (float32 releases: half the memory); each fit makes its own float64 copy
            x, b = draws.first(second)
            current = fit(x, b, validation)
            try:
                first = ahead.result()
            except Exception:  # the helper could not (a helper process that died): fitted here
                first = fit(*draws.first(size), validation)
            record(size, first)
            ahead, size = None, second
        else:
            x, b = draws.first(size)
            current = fit(x, b, validation)
        converged = record(size, current)
        if all(converged) or size >= maximum:
            break
        size = min(2 * size, maximum)
    return tuple((one, LearningCurve(tuple(sizes), tuple(curve), done, tolerance))
                 for one, curve, done in zip(best, scores, converged))


def _fit_ahead(helper: Prefetcher | None, fit: Callable, draws: SharedDraws, start: int, maximum: int,
               validation: tuple[torch.Tensor, torch.Tensor]) -> Pending | None:
    """With a ``helper``, the fit of the first ``start`` CPU draws submitted to it ahead of its other
    calls (a learning curve always fits its first two sizes: a curve of one point has not levelled
    off); None without one, when there is no second size, or when ``fit`` cannot travel to it (then
    every size is fitted here)."""
    if helper is None or maximum <= start:
        return None
    x, b = draws.first(start)
    if x.device.type != "cpu" or validation[0].device.type != "cpu":
        return None
    try:  # before the helper's other work (this process will wait for it); copies: a view sends the whole storage
        return helper.submit_first(fit, x.clone(), b.clone(), validation)
    except (pickle.PicklingError, TypeError, AttributeError):
        return None

