"""Wall time per named phase of a long computation (the trainer's phases, benchmarks).

A :class:`PhaseTimer` accumulates ``time.perf_counter`` intervals by name; phases must not
nest (each interval is counted once), so the totals add up to the time covered.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["PhaseTimer"]


class PhaseTimer:
    """Accumulated seconds and call counts per phase name, in first-use order."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.calls: dict[str, int] = {}

    @contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - start
            self.calls[name] = self.calls.get(name, 0) + 1

    def to_dict(self) -> dict[str, dict[str, float | int]]:
        """{phase: {"seconds": s, "calls": n}} (JSON-ready)."""
        return {name: {"seconds": self.seconds[name], "calls": self.calls[name]} for name in self.seconds}
