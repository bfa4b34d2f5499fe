"""Wall time per named phase of a long computation (the trainer's phases, benchmarks), and the
references a timing is read against: the machine's matmul throughput measured in the same run
(:func:`matmul_flops`) and the process's peak memory (:func:`peak_rss_bytes`).

A :class:`PhaseTimer` accumulates ``time.perf_counter`` intervals by name.  A phase opened
inside another (directly, or by library code through :func:`phase` while the timer is
running) is its own entry, named ``"outer / inner"``, and its time is not counted again in
the outer one: the totals add up to the time covered.  This is how the game's refit reports
the LAPACK tridiagonal reduction inside its fit (``"refit: fit / tridiagonal reduction"``,
:mod:`bngp.linear`) without the ridge code knowing about the game.  On a GPU the work a phase
queues may still be running when its Python code returns: a timer given a ``synchronize``
callable (``torch.cuda.synchronize``) waits for the device at both ends of every phase, so
that each phase is charged with its own kernels.
"""

from __future__ import annotations

import resource
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

__all__ = ["PhaseTimer", "phase", "running_phase", "best_seconds", "matmul_flops", "matvec_bandwidth", "draw_rates", "peak_rss_bytes", "peak_child_rss_bytes", "peak_device_bytes"]


class PhaseTimer:
    """Accumulated seconds and call counts per phase name, in first-use order; ``synchronize``
    (e.g. ``torch.cuda.synchronize``) is called before a phase's clock starts and before it stops.
    A phase's seconds are its own: those of the phases nested in it are theirs (module docstring)."""

    def __init__(self, synchronize: Callable[[], object] | None = None) -> None:
        self.seconds: dict[str, float] = {}
        self.calls: dict[str, int] = {}
        self._synchronize = synchronize
        self._open: list[tuple[str, list[float]]] = []  # (name, [seconds of the phases nested in it])

    @contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        if self._open:
            name = f"{self._open[-1][0]} / {name}"
        if self._synchronize is not None:
            self._synchronize()
        nested = [0.0]
        self._open.append((name, nested))
        token = _RUNNING.set(self)
        start = time.perf_counter()
        try:
            yield
        finally:
            if self._synchronize is not None:
                self._synchronize()
            elapsed = time.perf_counter() - start
            _RUNNING.reset(token)
            self._open.pop()
            if self._open:
                self._open[-1][1][0] += elapsed
            self.seconds[name] = self.seconds.get(name, 0.0) + elapsed - nested[0]
            self.calls[name] = self.calls.get(name, 0) + 1

    @property
    def current(self) -> str | None:
        """The name of the innermost phase open now ("outer / inner"), None between phases."""
        return self._open[-1][0] if self._open else None

    def to_dict(self) -> dict[str, dict[str, float | int]]:
        """{phase: {"seconds": s, "calls": n}} (JSON-ready)."""
        return {name: {"seconds": self.seconds[name], "calls": self.calls[name]} for name in self.seconds}

    def restore(self, phases: dict[str, dict[str, float | int]]) -> None:
        """Continue from the totals of :meth:`to_dict` (a resumed run counts the time before it)."""
        self.seconds = {name: float(entry["seconds"]) for name, entry in phases.items()}
        self.calls = {name: int(entry["calls"]) for name, entry in phases.items()}


#: the timer whose phase is running in this context (the innermost), for :func:`phase`.
_RUNNING: ContextVar[PhaseTimer | None] = ContextVar("bngp_running_timer", default=None)


@contextmanager
def phase(name: str) -> Iterator[None]:
    """Time the block as a phase nested in the running phase of a :class:`PhaseTimer`, if one is
    running in this context; otherwise do nothing.  For library code (the ridge fits) whose
    callers may or may not be timing it."""
    timer = _RUNNING.get()
    if timer is None:
        yield
        return
    with timer(name):
        yield


def running_phase() -> str | None:
    """The innermost phase open now in this context's running :class:`PhaseTimer` (its
    :attr:`PhaseTimer.current`), None when no timer runs: what a tool watching the work (a
    benchmark's record of the products, say) charges it to."""
    timer = _RUNNING.get()
    return None if timer is None else timer.current


def best_seconds(run: Callable[[], object], repeats: int, warmups: int = 1,
                 sync: Callable[[], object] | None = None) -> float:
    """Seconds of ``repeats`` calls of ``run``: the best of three timings, after ``warmups`` calls;
    ``sync`` (e.g. ``torch.cuda.synchronize``) is called before each clock is read."""
    sync = sync or (lambda: None)
    for _ in range(warmups):
        run()
    sync()
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        for _ in range(repeats):
            run()
        sync()
        best = min(best, time.perf_counter() - start)
    return best


def matmul_flops(size: int = 2048, repeats: int = 8, dtype: "torch.dtype | None" = None,
                 device: "torch.device | str" = "cpu") -> float:
    """Matmul throughput (FLOP/s) of ``device``, measured now (on the CPU with torch's threads):
    the best of three timings of ``repeats`` products of two ``size`` x ``size`` matrices
    (2 size^3 FLOP each) in ``dtype`` (default float32), after two warm-up products.  On a GPU
    the clock waits for the device (``torch.cuda.synchronize``) and the products use torch's
    float32 matmul precision as the networks do (``torch.get_float32_matmul_precision()``)."""
    import torch

    dtype = torch.float32 if dtype is None else dtype
    device = torch.device(device)
    sync = (lambda: torch.cuda.synchronize(device)) if device.type == "cuda" else None
    a = torch.randn(size, size, dtype=dtype, device=device)
    b = torch.randn(size, size, dtype=dtype, device=device)
    return 2.0 * size**3 * repeats / best_seconds(lambda: a @ b, repeats, warmups=2, sync=sync)


def matvec_bandwidth(size: int = 4096, repeats: int = 8, dtype: "torch.dtype | None" = None) -> float:
    """Memory bandwidth (bytes/s) of matrix-vector products on the CPU, measured now with torch's
    threads: the bytes of a ``size`` x ``size`` matrix (default float64; 128 MiB at 4096, larger
    than the caches) read per second by ``matrix @ vector`` (BLAS gemv), best of three timings of
    ``repeats`` products after one warm-up.  The reference of work bound by reading a matrix once
    per vector, as the matrix-vector half of a tridiagonal reduction (:mod:`bngp.linear`)."""
    import torch

    dtype = torch.float64 if dtype is None else dtype
    matrix = torch.rand(size, size, dtype=dtype)
    vector = torch.rand(size, dtype=dtype)
    return repeats * matrix.numel() * matrix.element_size() / best_seconds(lambda: matrix @ vector, repeats)


def draw_rates(size: int = 1 << 22, repeats: int = 4) -> tuple[float, float]:
    """(standard normals, uniforms) drawn per second into float32 tensors of ``size`` entries from a
    CPU ``torch.Generator`` (the toolkit's generators, :mod:`bngp.rng`), measured now with torch's
    threads: best of three timings of ``repeats`` draws of each after one warm-up.  The reference of
    work bound by drawing random numbers, as the releases' Gaussian noise (:mod:`bngp.release`)."""
    import torch

    generator = torch.Generator().manual_seed(0)
    out = torch.empty(size)
    normals = best_seconds(lambda: out.normal_(generator=generator), repeats)
    uniforms = best_seconds(lambda: out.uniform_(generator=generator), repeats)
    return repeats * size / normals, repeats * size / uniforms


def peak_rss_bytes() -> int:
    """Peak resident set size of this process so far (``getrusage``: KiB on Linux, bytes on macOS).
    A high-water mark: it includes everything the process ran before."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak if sys.platform == "darwin" else peak * 1024)


def peak_child_rss_bytes() -> int:
    """Peak resident set size of the largest child process of this one that has ended and been
    waited for (``getrusage(RUSAGE_CHILDREN)``; a helper process, :mod:`bngp.workers`), 0 if none."""
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return int(peak if sys.platform == "darwin" else peak * 1024)


def peak_device_bytes(device: "torch.device | str") -> int:
    """Peak memory torch allocated on the CUDA ``device`` in this process so far
    (``torch.cuda.max_memory_allocated``); 0 for the CPU, whose peak is :func:`peak_rss_bytes`."""
    import torch

    device = torch.device(device)
    return int(torch.cuda.max_memory_allocated(device)) if device.type == "cuda" else 0
