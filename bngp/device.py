"""Where the networks of a run live: ``auto`` (CUDA when available, else the CPU), ``cpu`` or ``cuda``.

The defender G and the attacker H of the BNGP game (arXiv:2410.07414, section 3 and App. L.8)
and the linear algebra around them (the mechanism's genotype matrix, the in-game ridge refits)
run on the chosen device; everything random is still drawn from the run's CPU torch
Generators and moved to the device afterwards, so a run draws the same memberships b, the same
defender randomness r and the same noise on every device, and only floating-point rounding
differs between a CPU and a CUDA run.  Files (checkpoints, ``defender.pt``) are written with CPU
tensors, so that a defender trained on a GPU loads on a machine without one.  A run records the
device it used as ``str(resolve_device(name))``: ``"cpu"`` or ``"cuda:0"``.

torch is imported only when a name is resolved, so that the command line can offer
``--device`` without importing torch to print its help.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Literal, get_args

from bngp.errors import InputError

if TYPE_CHECKING:
    import torch

__all__ = ["CHUNK_ELEMENTS", "DeviceName", "DEVICE_NAMES", "resolve_device", "to_cpu", "subnormals_flushed", "subnormals_are_flushed"]

#: elements of one chunk of elementwise work on the CPU, so that its float64 temporaries (1 MiB
#: each) stay in a core's cache from one pass to the next: f(D)'s division
#: (:meth:`bngp.release.mechanism.SummaryStatistics.statistic`), a release's noise arithmetic
#: (:func:`bngp.defenses.network.composed_release`) and, a quarter of it, the spans of
#: :func:`bngp.linear.logistic_calibration`.
CHUNK_ELEMENTS = 1 << 17

#: "auto": CUDA when ``torch.cuda.is_available()``, else the CPU; "cpu"; "cuda" (the current CUDA device).
DeviceName = Literal["auto", "cpu", "cuda"]
DEVICE_NAMES: tuple[str, ...] = get_args(DeviceName)


def resolve_device(name: "DeviceName | torch.device") -> "torch.device":
    """The torch device for ``name``: ``auto`` is CUDA when available, else the CPU.

    A ``torch.device`` is returned as it is (a CUDA one with its index made explicit).  Raises
    :class:`bngp.errors.InputError` (one line) for an unknown name, or for CUDA on a machine
    where ``torch.cuda.is_available()`` is false.

    Example:
        >>> resolve_device("cpu")
        device(type='cpu')
    """
    import torch

    if isinstance(name, torch.device):
        kind = name.type
    elif isinstance(name, str) and name in DEVICE_NAMES:
        kind = name
    else:
        raise InputError(f"`device` must be one of {', '.join(DEVICE_NAMES)}, got {name!r}.")
    if kind == "auto":
        kind = "cuda" if torch.cuda.is_available() else "cpu"
    if kind == "cpu":
        return torch.device("cpu")
    if kind != "cuda":
        raise InputError(f"`device` must be one of {', '.join(DEVICE_NAMES)}, got {str(name)!r}.")
    if not torch.cuda.is_available():
        raise InputError("`device` cuda was asked for, but CUDA is not available here (torch.cuda.is_available() is "
                         "false); use cpu or auto.")
    index = name.index if isinstance(name, torch.device) and name.index is not None else torch.cuda.current_device()
    if not 0 <= index < torch.cuda.device_count():
        raise InputError(f"`device` cuda:{index} does not exist here ({torch.cuda.device_count()} CUDA devices).")
    return torch.device("cuda", index)


def to_cpu(payload: Any) -> Any:
    """``payload`` with every tensor in it (nested dicts, lists, tuples) moved to the CPU, for
    the files a run writes.  Dicts keep their type and attributes (a state dict's ``_metadata``);
    on the CPU the tensors are the same objects, so a CPU run saves what it always saved."""
    import torch

    if isinstance(payload, torch.Tensor):
        return payload.cpu()
    if isinstance(payload, dict):
        moved = copy.copy(payload)
        for key, value in payload.items():
            moved[key] = to_cpu(value)
        return moved
    if isinstance(payload, tuple) and hasattr(payload, "_fields"):  # a named tuple
        return type(payload)(*(to_cpu(value) for value in payload))
    if isinstance(payload, (list, tuple)):
        return type(payload)(to_cpu(value) for value in payload)
    return payload


@contextmanager
def subnormals_flushed() -> Iterator[None]:
    """Within the block, this thread's CPU reads and writes subnormal floats (below 2^-126 in
    float32, 2^-1022 in float64) as zero (x86 FTZ and DAZ, ``torch.set_flush_denormal``); then as
    before.  A no-op where the CPU cannot.

    An attacker trained towards perfect membership inference drives its gradients into the
    subnormal range, and every product with a subnormal operand takes the CPU's slow path
    (``docs/design/numerics.md``).  Values that small move no weight: Adam's step for a gradient
    below 2^-126 is below 1e-30, under the last bit of any weight above 1e-23.

    Only the calling thread's mode changes; torch's intra-op workers keep theirs (one thread per
    process by default on a 2-core machine, :func:`bngp.threads.default_threads`)."""
    import torch

    before = subnormals_are_flushed()
    torch.set_flush_denormal(True)
    try:
        yield
    finally:
        torch.set_flush_denormal(before)


def subnormals_are_flushed() -> bool:
    """Whether this thread's CPU flushes subnormal floats now: 2^-140, a float32 subnormal, is then
    stored (and multiplied) as zero."""
    import torch

    return bool(torch.tensor([2.0**-140]).mul_(1.0)[0] == 0)
