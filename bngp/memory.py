"""The memory a step will hold, checked before the work starts.

:func:`available_memory` reads what the system can still give (``MemAvailable`` of ``/proc/meminfo``,
else the physical memory, less where the process's memory control group leaves less); :func:`require_memory`
refuses, with one line naming the step, its size and a way around it, a step whose estimated peak exceeds it.  The estimates live beside the steps they
describe (for example :func:`bngp.linear.converged_fit_bytes`).
"""

from __future__ import annotations

import os

from bngp.errors import InsufficientMemoryError

__all__ = ["available_memory", "cgroup_headroom", "require_memory"]


def available_memory() -> int | None:
    """Bytes of memory available: ``MemAvailable`` of ``/proc/meminfo`` where the system has it,
    else the physical memory (None where neither is reported); less where this process's memory control group
    (a container's or a batch job's limit) leaves less (:func:`cgroup_headroom`)."""
    system = None
    try:
        with open("/proc/meminfo") as handle:
            for line in handle:
                if line.startswith("MemAvailable:"):
                    system = int(line.split()[1]) * 1024
                    break
    except OSError:
        pass
    if system is None:
        try:
            system = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (AttributeError, OSError, ValueError):
            system = None
    headroom = cgroup_headroom()
    if headroom is None:
        return system
    return headroom if system is None else min(system, headroom)


def cgroup_headroom(root: str = "/") -> int | None:
    """What the memory control group of this process still allows, in bytes: its limit less what it uses, page
    cache that can be dropped (inactive files) excepted; None without a limit.  Control groups v2
    (``memory.max``, ``memory.current``) and v1 (``memory.limit_in_bytes``, ``memory.usage_in_bytes``), found
    through ``/proc/self/cgroup`` and ``/proc/self/mountinfo`` under ``root``; the group's own limit only, not its
    parents'."""
    proc = os.path.join(root, "proc", "self")
    try:
        with open(os.path.join(proc, "cgroup")) as handle:
            groups = [line.rstrip("\n").split(":", 2) for line in handle if line.count(":") >= 2]
        with open(os.path.join(proc, "mountinfo")) as handle:
            mounts = [line.split() for line in handle]
    except OSError:
        return None
    for fields in mounts:
        if "-" not in fields:
            continue
        dash = fields.index("-")
        kind, options, mount_root, mount_point = fields[dash + 1], fields[dash + 3], fields[3], fields[4]
        if kind == "cgroup2":
            paths = [path for _, controllers, path in groups if controllers == ""]
            names = ("memory.max", "memory.current", "inactive_file")
        elif kind == "cgroup" and "memory" in options.split(","):
            paths = [path for _, controllers, path in groups if "memory" in controllers.split(",")]
            names = ("memory.limit_in_bytes", "memory.usage_in_bytes", "total_inactive_file")
        else:
            continue
        for path in paths:
            relative = os.path.relpath(path, mount_root) if mount_root != "/" else path.lstrip("/")
            folder = os.path.join(root, mount_point.lstrip("/"), relative)
            headroom = _headroom(folder, *names)
            if headroom is not None:
                return headroom
    return None


def _headroom(folder: str, limit_file: str, usage_file: str, inactive: str) -> int | None:
    """limit - usage + inactive page cache of one control group's folder; None without a limit (or files)."""
    try:
        with open(os.path.join(folder, limit_file)) as handle:
            text = handle.read().strip()
        if text == "max" or int(text) >= 2**60:
            return None
        with open(os.path.join(folder, usage_file)) as handle:
            usage = int(handle.read().strip())
        cache = 0
        with open(os.path.join(folder, "memory.stat")) as handle:
            for line in handle:
                name, _, value = line.partition(" ")
                if name == inactive:
                    cache = int(value)
                    break
    except (OSError, ValueError):
        return None
    return max(0, int(text) - usage + cache)


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
