"""Shared measuring helpers for the benchmarks: the machine's float32 matmul peak, peak memory."""

from __future__ import annotations

import resource
import time

import torch

__all__ = ["matmul_peak_flops", "peak_memory_gib", "linear_flops"]


def matmul_peak_flops(size: int = 2048, repeats: int = 8, dtype: torch.dtype = torch.float32) -> float:
    """Matmul throughput (FLOP/s) of this machine in ``dtype``, measured now with torch's threads."""
    a = torch.randn(size, size, dtype=dtype)
    b = torch.randn(size, size, dtype=dtype)
    for _ in range(2):
        a @ b
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        for _ in range(repeats):
            a @ b
        best = min(best, time.perf_counter() - start)
    return 2.0 * size**3 * repeats / best


def peak_memory_gib() -> float:
    """Peak resident memory of this process so far (GiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def linear_flops(module: torch.nn.Module, batch: int) -> float:
    """Forward FLOPs 2 * batch * in * out summed over the module's Linear layers."""
    return sum(2.0 * batch * m.in_features * m.out_features for m in module.modules() if isinstance(m, torch.nn.Linear))
