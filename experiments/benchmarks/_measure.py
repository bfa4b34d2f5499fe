"""Shared measuring helpers for the benchmarks: the machine's float32 matmul peak, peak memory."""

from __future__ import annotations

import torch

from bngp.timing import matmul_flops, peak_rss_bytes

__all__ = ["matmul_peak_flops", "peak_memory_gib", "linear_flops"]


def matmul_peak_flops(size: int = 2048, repeats: int = 8, dtype: torch.dtype = torch.float32) -> float:
    """Matmul throughput (FLOP/s) of this machine in ``dtype`` (:func:`bngp.timing.matmul_flops`)."""
    return matmul_flops(size, repeats, dtype)


def peak_memory_gib() -> float:
    """Peak resident memory of this process so far (GiB; :func:`bngp.timing.peak_rss_bytes`)."""
    return peak_rss_bytes() / 2**30


def linear_flops(module: torch.nn.Module, batch: int) -> float:
    """Forward FLOPs 2 * batch * in * out summed over the module's Linear layers."""
    return sum(2.0 * batch * m.in_features * m.out_features for m in module.modules() if isinstance(m, torch.nn.Linear))
