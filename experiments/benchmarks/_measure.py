"""Shared measuring helpers for the benchmarks: the device's float32 matmul peak, peak memory, the report files.

Imported before torch allocates, it gives a benchmark the allocator setting of the ``bngp`` command
(``THP_MEM_ALLOC_ENABLE=1`` unless set; docs/design/game.md, "Large tensors on huge pages"), so that its
timings are those of a ``bngp`` run."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

os.environ.setdefault("THP_MEM_ALLOC_ENABLE", "1")

import torch  # noqa: E402  (after the allocator setting)

from bngp.timing import matmul_flops, peak_child_rss_bytes, peak_device_bytes, peak_rss_bytes

__all__ = ["matmul_peak_flops", "peak_memory_gib", "peak_device_memory_gib", "device_description", "linear_flops",
           "write_report"]

#: matmul sizes of the reference measurement: 2048 on the CPU (about a second on one core);
#: 8192 on a GPU, where smaller products leave the chip partly idle.
REFERENCE_SIZE = {"cpu": 2048, "cuda": 8192}


def matmul_peak_flops(size: int | None = None, repeats: int = 8, dtype: torch.dtype = torch.float32,
                      device: torch.device | str = "cpu") -> float:
    """Matmul throughput (FLOP/s) of ``device`` in ``dtype`` (:func:`bngp.timing.matmul_flops`)."""
    device = torch.device(device)
    return matmul_flops(REFERENCE_SIZE[device.type] if size is None else size, repeats, dtype, device)


def peak_memory_gib() -> float:
    """Peak resident memory of this process so far (GiB; :func:`bngp.timing.peak_rss_bytes`)."""
    return peak_rss_bytes() / 2**30


def peak_helper_memory_gib() -> float:
    """Peak resident memory of the largest finished child process, a helper process (GiB;
    :func:`bngp.timing.peak_child_rss_bytes`)."""
    return peak_child_rss_bytes() / 2**30


def peak_device_memory_gib(device: torch.device | str) -> float:
    """Peak memory torch allocated on a CUDA ``device`` so far (GiB); 0 on the CPU."""
    return peak_device_bytes(device) / 2**30


def device_description(device: torch.device | str) -> str:
    """``cpu`` or the GPU's name (``cuda:0 (NVIDIA H100 80GB HBM3)``), for the reports."""
    device = torch.device(device)
    if device.type != "cuda":
        return "cpu"
    return f"{device} ({torch.cuda.get_device_name(device)})"


def linear_flops(module: torch.nn.Module, batch: int) -> float:
    """Forward FLOPs 2 * batch * in * out summed over the module's Linear layers."""
    return sum(2.0 * batch * m.in_features * m.out_features for m in module.modules() if isinstance(m, torch.nn.Linear))


def write_report(out: Path, stem: str, command: str, record: dict, markdown: Callable[[dict, str], str]) -> None:
    """Write ``OUT/STEM.json`` (the command and the record) and ``OUT/STEM.md`` (``markdown(record,
    command)``), and print the Markdown: how a benchmark leaves its result."""
    from bngp.io_utils import write_json, write_text

    text = markdown(record, command)
    write_json(out / f"{stem}.json", {"command": command, **record})
    write_text(out / f"{stem}.md", text)
    print(text)
