"""The memory a step will hold, checked before the work starts.

:func:`available_memory` reads what the system can still give (``MemAvailable`` of ``/proc/meminfo``,
else the physical memory); :func:`require_memory` refuses, with one line naming the step, its size and
a way around it, a step whose estimated peak exceeds it.  The estimates live beside the steps they
describe (for example :func:`bngp.linear.converged_fit_bytes`).
"""

from __future__ import annotations

import os

from bngp.errors import InsufficientMemoryError

__all__ = ["available_memory", "require_memory"]


def available_memory() -> int | None:
    """Bytes of memory available: ``MemAvailable`` of ``/proc/meminfo`` where the system has it,
    else the physical memory (None where neither is reported)."""
    try:
        with open("/proc/meminfo") as handle:
            for line in handle:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, OSError, ValueError):
        return None


def require_memory(needed: float, what: str, hint: str = "", available: int | None = None) -> None:
    """Raise :class:`InsufficientMemoryError` when ``needed`` bytes exceed ``available`` (default
    :func:`available_memory`; nothing is checked where the system reports none).

    The message reads "``what`` needs about X GiB of memory, more than the Y GiB available``hint``".
    """
    available = available_memory() if available is None else available
    if available is None or needed <= available:
        return
    raise InsufficientMemoryError(f"{what} needs about {needed / 2**30:.1f} GiB of memory, more than the "
                                  f"{available / 2**30:.1f} GiB available{hint}.")
