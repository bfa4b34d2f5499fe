"""One way to handle randomness: resolve a seed once, derive independent streams from it.

Every public entry point accepts ``seed: int | None | np.random.Generator``.  ``None`` draws a
fresh seed from the OS, which is then recorded in the outputs so the run can be replayed.  A
Generator is either the stream itself (:func:`resolve_rng`, :func:`make_rng`) or, where the
entry point records an int seed, the source of that seed (:func:`resolve_seed`).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

import numpy as np

from bngp.errors import InputError

if TYPE_CHECKING:
    import torch

__all__ = ["SeedLike", "resolve_seed", "resolve_rng", "make_rng", "spawn_seeds", "named_seeds", "torch_generator", "seeded_torch"]

SeedLike = int | None | np.random.Generator


def resolve_seed(seed: SeedLike) -> int:
    """Return a concrete non-negative int seed, the one to record and to derive streams from: an
    int as given; ``None``: drawn from the OS (in [0, 2^32)); a Generator: drawn from it
    (``int(generator.integers(2**63))``, which advances it), so the same Generator state gives the
    same seed.  Anything else raises :class:`InputError` naming ``seed``."""
    if isinstance(seed, np.random.Generator):
        return int(seed.integers(2**63))
    if seed is None:
        return int(np.random.SeedSequence().entropy % (2**32))
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise InputError(f"`seed` must be a non-negative integer, None or a numpy Generator, got {seed!r}.")
    return int(seed)


def resolve_rng(seed: SeedLike) -> tuple[np.random.Generator, int | None]:
    """Return ``(generator, recorded_seed)``: an int seed is used as is; ``None`` draws a fresh
    seed from the OS (recorded so that the run can be replayed); a Generator is used as given and
    recorded as ``None``."""
    if isinstance(seed, np.random.Generator):
        return seed, None
    concrete = resolve_seed(seed)
    return np.random.default_rng(concrete), concrete


def make_rng(seed: SeedLike) -> np.random.Generator:
    """Return a numpy Generator for an int/None seed; pass a Generator through unchanged."""
    return resolve_rng(seed)[0]


def spawn_seeds(seed: int, n: int) -> list[int]:
    """Derive ``n`` independent int seeds in [0, 2^32) from ``seed`` (SeedSequence spawning).

    32-bit values stay valid seeds for numpy, torch and scikit-learn after small offsets.
    """
    children = np.random.SeedSequence(seed).spawn(n)
    return [int(c.generate_state(1, dtype=np.uint32)[0]) for c in children]


def named_seeds(seed: int, names: tuple[str, ...]) -> dict[str, int]:
    """One independent seed per named stream of a run, spawned from ``seed`` (no ``seed + 1`` offsets)."""
    return dict(zip(names, spawn_seeds(seed, len(names))))


def torch_generator(seed: int) -> "torch.Generator":
    """Return a CPU torch Generator seeded with ``seed``."""
    import torch

    generator = torch.Generator()
    generator.manual_seed(int(seed))
    return generator


@contextmanager
def seeded_torch(seed: int) -> Iterator[None]:
    """Seed torch's global generator for the block (network initialisation draws from it) and
    restore the caller's state afterwards, so that seeding a run never changes what the
    caller's own torch code draws next."""
    import torch

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed))
        yield
