"""A helper process: the second core of a small machine, for independent pieces of one job.

Every bngp process runs torch and BLAS on ``--threads`` threads, one by default on a machine of
up to 2 cores (:func:`bngp.threads.default_threads`): two intra-op threads of one process wait for
each other at every operation.  Two *independent* pieces of work in two single-threaded processes
never wait for each other: on an idle machine they take the time of the longer one, on a busy one
they share the cores as serial work would (``docs/design/linear.md``).

:class:`Helper` is one spawned worker process (torch and BLAS limited to ``threads``) that runs
functions submitted to it while the caller goes on; :func:`helping` makes it the current helper
of the code it wraps (a context variable, read by :func:`current_helper`).  Who uses it:

- :func:`bngp.evaluate.evaluate_defense` with ``workers=2`` fits and scores the attacks that
  depend on no other attack in the helper while this process fits the linear maps and the
  Bayesian attacker that starts from them;
- the linear attacks and the Bayesian attacker's ridge warm start pass the current helper to
  :func:`bngp.linear.fit_converged_jointly` (a :class:`bngp.linear.Prefetcher`), which fits the
  first two sizes of a learning curve (both are always fitted) at once, the smaller in the helper.

Arguments and results travel pickled *by value* (bytes through a pipe, tensors included), never
through shared memory, so a container with a small ``/dev/shm`` works as well as any machine.
The results are those of the same calls made in this process (the same code on the same
single-threaded kernels, up to the rounding of memory alignment).  What the helper cannot do
(a call that does not pickle, a class it cannot import, a helper process that died) its users do
in this process.  The helper is a *spawned* process: as for any multiprocessing code, a script
that starts one must guard its entry point (``if __name__ == "__main__":``).
"""

from __future__ import annotations

import multiprocessing
import os
import pickle
import threading
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import CancelledError, Future, ProcessPoolExecutor
from contextlib import contextmanager
from contextvars import ContextVar
from functools import partial
from typing import Any

from bngp.errors import InputError

__all__ = ["Helper", "HelperResult", "helping", "current_helper", "check_workers", "resolve_workers", "open_helper",
           "HELPER_MIN_SIZE"]

_CURRENT: ContextVar["Helper | None"] = ContextVar("bngp_helper", default=None)


def _start(threads: int, preload: tuple[str, ...]) -> None:
    """The helper process's initialiser: the caller's thread limits, and the modules its calls
    will need imported (while the caller is busy with its own share).  It inherits the caller's
    environment, with the allocator setting of the ``bngp`` command."""
    import importlib

    from bngp.threads import set_threads

    set_threads(threads)
    for module in preload:
        importlib.import_module(module)


def _ready() -> bool:
    return True


def _call(payload: bytes) -> bytes:
    function, args, kwargs = pickle.loads(payload)
    return pickle.dumps(function(*args, **kwargs), protocol=pickle.HIGHEST_PROTOCOL)


class HelperResult:
    """The pending result of :meth:`Helper.submit`."""

    def __init__(self, future: Future) -> None:
        self._future = future

    def result(self) -> Any:
        """Wait for the call and return its value (its exception is raised here)."""
        return pickle.loads(self._future.result())


class Helper:
    """One spawned worker process that runs submitted calls one at a time: in the order of
    :meth:`submit`, except that a call of :meth:`submit_first` runs next (after the call running).

    Args:
        threads: torch and BLAS threads of the helper process (>= 1; the caller's, as a rule).
        preload: modules the helper imports as it starts (those of the calls to come).

    The process starts at once (its imports overlap the caller's work) and ends at
    :meth:`close` (or on leaving a ``with`` block).  The calls wait here, not in the process, so
    that one submitted first can overtake them.
    """

    def __init__(self, threads: int = 1, preload: tuple[str, ...] = ("bngp.linear",)) -> None:
        if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
            raise InputError(f"`threads` of a helper must be an integer >= 1, got {threads!r}.")
        self.threads = threads
        self._executor = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"),
                                             initializer=_start, initargs=(threads, tuple(preload)))
        self._lock = threading.RLock()
        self._waiting: deque[tuple[bytes, Future]] = deque()
        self._running: Future | None = self._executor.submit(_ready)
        self._running.add_done_callback(self._finished)

    def submit(self, function: Callable[..., Any], /, *args: Any, **kwargs: Any) -> HelperResult:
        """Run ``function(*args, **kwargs)`` in the helper process after the calls submitted
        before it.  ``function`` and the arguments are pickled here (a :class:`pickle.PicklingError`,
        ``TypeError`` or ``AttributeError`` is raised at once for what cannot be)."""
        return self._enqueue(pickle.dumps((function, args, kwargs), protocol=pickle.HIGHEST_PROTOCOL), first=False)

    def submit_first(self, function: Callable[..., Any], /, *args: Any, **kwargs: Any) -> HelperResult:
        """:meth:`submit`, but the call runs before those still waiting (once the one running ends)."""
        return self._enqueue(pickle.dumps((function, args, kwargs), protocol=pickle.HIGHEST_PROTOCOL), first=True)

    def _enqueue(self, payload: bytes, first: bool) -> HelperResult:
        result: Future = Future()
        with self._lock:
            (self._waiting.appendleft if first else self._waiting.append)((payload, result))
            self._dispatch()
        return HelperResult(result)

    def _dispatch(self) -> None:
        """Send the next waiting call to the process when none is running (under the lock)."""
        while self._running is None and self._waiting:
            payload, result = self._waiting.popleft()
            if not result.set_running_or_notify_cancel():
                continue
            try:
                running = self._executor.submit(_call, payload)
            except Exception as exc:  # a helper process that died, or one closed
                result.set_exception(exc)
                continue
            self._running = running
            running.add_done_callback(partial(self._finished, result=result))

    def _finished(self, running: Future, result: Future | None = None) -> None:
        if result is not None:
            if running.cancelled():  # the helper closed before the call reached it
                result.set_exception(CancelledError("the helper process closed before the call ran"))
            elif running.exception() is not None:
                result.set_exception(running.exception())
            else:
                result.set_result(running.result())
        with self._lock:
            self._running = None
            self._dispatch()

    def close(self, wait: bool = True) -> None:
        """Stop the helper process: calls still waiting are cancelled; the call it is running is
        waited for, or with ``wait=False`` the process is terminated at once."""
        with self._lock:
            while self._waiting:
                self._waiting.popleft()[1].cancel()
        if not wait:
            for process in list(getattr(self._executor, "_processes", {}).values()):
                process.terminate()
        self._executor.shutdown(wait=wait, cancel_futures=True)

    def __enter__(self) -> "Helper":
        return self

    def __exit__(self, kind: type[BaseException] | None, *exc: object) -> None:
        self.close(wait=kind is None)  # an error here: the helper's work is not waited for


#: the smallest evaluation (individuals x release width) for which ``workers="auto"`` starts a helper
#: process: below it the helper's start (a second Python with torch) costs what the second core
#: saves (``docs/design/linear.md``).
HELPER_MIN_SIZE = 400 * 1000


def check_workers(workers: int) -> int:
    """``workers`` (processes of one job: 1 = this one alone, 2 = with a :class:`Helper`) validated."""
    if isinstance(workers, bool) or not isinstance(workers, int) or workers not in (1, 2):
        raise InputError(f"`workers` must be 1 or 2, got {workers!r}.")
    return workers


def resolve_workers(workers: int | str, size: int) -> int:
    """``workers`` (1, 2, or ``"auto"``: 2 on a machine of 2 cores or more when ``size`` =
    individuals x release width >= :data:`HELPER_MIN_SIZE`, else 1) for a job of ``size``."""
    if isinstance(workers, str):
        value = workers.strip().lower()
        if value == "auto":
            return 2 if (os.cpu_count() or 1) >= 2 and size >= HELPER_MIN_SIZE else 1
        if value not in ("1", "2"):
            raise InputError(f"`--workers` must be auto, 1 or 2, got {workers!r}.")
        return int(value)
    return check_workers(workers)


@contextmanager
def open_helper(workers: int, threads: int, preload: tuple[str, ...] = ("bngp.linear",)) -> Iterator[Helper | None]:
    """A :class:`Helper` (``threads``, ``preload``) made current (:func:`helping`) for the block
    when ``workers`` is 2, else None; closed on leaving."""
    if check_workers(workers) == 1:
        yield None
        return
    with Helper(threads, preload) as helper, helping(helper):
        yield helper


@contextmanager
def helping(helper: Helper | None) -> Iterator[Helper | None]:
    """Make ``helper`` the current helper (:func:`current_helper`) inside the block."""
    token = _CURRENT.set(helper)
    try:
        yield helper
    finally:
        _CURRENT.reset(token)


def current_helper() -> Helper | None:
    """The helper made current by :func:`helping` in this context, or None."""
    return _CURRENT.get()

