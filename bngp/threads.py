"""How many CPU threads a process computes with: torch's intra-op pool and the BLAS pools of
numpy, scipy and scikit-learn, limited together.

Limiting torch alone leaves numpy's and scipy's OpenBLAS at one thread per core: the in-game
ridge refits (Gram matrix, tridiagonal reduction, reflectors) then run on every core while the
networks run on one, and a benchmark that reports "1 thread" measures two.  The command line
(``--threads``), the helper process (:mod:`bngp.workers`) and the benchmarks under
``experiments/benchmarks/`` all set both through :func:`set_threads`.
"""

from __future__ import annotations

import os

from bngp.errors import InputError

__all__ = ["default_threads", "set_threads"]


def default_threads() -> int:
    """Threads per process by default: 1 on machines of up to 2 cores (two intra-op threads of one
    process wait for each other at every operation; ``docs/design/linear.md``), else half the cores
    (at most 8)."""
    cores = os.cpu_count() or 1
    return 1 if cores <= 2 else min(8, cores // 2)


def set_threads(threads: int) -> None:
    """Limit torch and the BLAS thread pools (numpy, scipy, scikit-learn) to ``threads``, for the
    rest of the process."""
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise InputError(f"`--threads` must be an integer >= 1, got {threads!r}.")
    import torch
    from threadpoolctl import threadpool_limits

    torch.set_num_threads(threads)
    threadpool_limits(threads)
