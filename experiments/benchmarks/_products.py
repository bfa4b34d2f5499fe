"""The matrix products a computation runs, recorded by phase and replayed alone.

:func:`record_products` runs a computation under a torch dispatch mode and keeps every matrix
product it dispatches (``mm``, ``addmm``, ``_int_mm``, ``bmm``, ``baddbmm``: the ones a
``Linear`` layer, its backward, ``@`` and f(D) = b Z become), with the shapes, strides and
dtypes of its operands, charged to the phase of a :class:`bngp.timing.PhaseTimer` running at the
time (:func:`bngp.timing.running_phase`).  :func:`products_alone` replays each distinct product
on fresh operands of the same layout in the same process, timed in a loop
(:func:`bngp.timing.best_seconds`): the time the phase's products take at their own shapes,
whatever else the phase does (elementwise passes, draws, the optimiser, Python).  Against the
phase's measured time, that is where its time goes; against the reference matmul, how near its
products alone come to it at their sizes.

Products outside torch (numpy's and LAPACK's, inside the ridge fit's decomposition) are not
dispatched through torch and are not seen.  A product replayed in a loop finds its operands in
the caches, where in the phase they may have to be read from memory: its time alone is a floor.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from bngp.timing import best_seconds, running_phase

__all__ = ["Product", "record_products", "product_flops", "replay_seconds", "products_alone"]

#: the dispatched matrix products (their default overloads).
PRODUCTS = (torch.ops.aten.mm.default, torch.ops.aten.addmm.default, torch.ops.aten._int_mm.default,
            torch.ops.aten.bmm.default, torch.ops.aten.baddbmm.default)

#: seconds each timed loop of a replayed product lasts at least.
LOOP_SECONDS = 0.01


@dataclass(frozen=True)
class Operand:
    """The layout of a tensor operand: shape, strides, dtype and device."""

    shape: tuple[int, ...]
    stride: tuple[int, ...]
    dtype: torch.dtype
    device: torch.device

    @classmethod
    def of(cls, tensor: torch.Tensor) -> "Operand":
        return cls(tuple(tensor.shape), tuple(tensor.stride()), tensor.dtype, tensor.device)

    def make(self, generator: torch.Generator) -> torch.Tensor:
        """A tensor of this layout over fresh storage, filled with N(0, 1) (integers in [-4, 4))."""
        extent = 1 + sum((size - 1) * stride for size, stride in zip(self.shape, self.stride)) if all(self.shape) else 0
        if self.dtype.is_floating_point:
            storage = torch.randn(extent, generator=generator).to(self.dtype)
        else:
            storage = torch.randint(-4, 4, (extent,), generator=generator).to(self.dtype)
        return storage.to(self.device).as_strided(self.shape, self.stride)


@dataclass(frozen=True)
class Product:
    """One dispatched matrix product: the operator, its arguments (an :class:`Operand` for each
    tensor, the value of anything else) and its keyword arguments."""

    op: torch._ops.OpOverload
    args: tuple
    kwargs: tuple[tuple[str, object], ...]

    def operands(self) -> list[Operand]:
        return [arg for arg in self.args if isinstance(arg, Operand)]


def _layout(value: object) -> object:
    return Operand.of(value) if isinstance(value, torch.Tensor) else value


class _Recorder(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.seen: dict[str, Counter[Product]] = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in PRODUCTS:
            name = running_phase()
            if name is not None:
                product = Product(func, tuple(_layout(arg) for arg in args),
                                  tuple(sorted((key, _layout(value)) for key, value in kwargs.items())))
                self.seen.setdefault(name, Counter())[product] += 1
        return func(*args, **kwargs)


def record_products(run: Callable[[], object]) -> dict[str, Counter[Product]]:
    """Run ``run()`` and return the matrix products it dispatched, by the phase running at each
    (products run outside every phase are not kept), with how often each ran."""
    recorder = _Recorder()
    with recorder:
        run()
    return recorder.seen


def product_flops(product: Product) -> float:
    """2 m k n for an (m, k) x (k, n) product, times the batch of a batched one."""
    first, second = product.operands()[-2:]
    *batch, rows, inner = first.shape
    return 2.0 * math.prod(batch) * rows * inner * second.shape[-1]


def replay_seconds(product: Product, seed: int = 0) -> float:
    """Seconds one call of ``product`` takes alone: on fresh operands of its layout, the best of
    three loops lasting at least :data:`LOOP_SECONDS` each (the clock waits for a GPU)."""
    generator = torch.Generator().manual_seed(seed)
    args = [arg.make(generator) if isinstance(arg, Operand) else arg for arg in product.args]
    kwargs = {key: value.make(generator) if isinstance(value, Operand) else value for key, value in product.kwargs}
    device = next(operand.device for operand in product.operands())
    sync = (lambda: torch.cuda.synchronize(device)) if device.type == "cuda" else None

    def run() -> None:
        product.op(*args, **kwargs)

    once = best_seconds(run, 1, warmups=2, sync=sync)
    repeats = max(1, min(10_000, math.ceil(LOOP_SECONDS / max(once, 1e-7))))
    return best_seconds(run, repeats, warmups=0, sync=sync) / repeats


def products_alone(recorded: dict[str, Counter[Product]], calls: dict[str, int]) -> dict[str, dict[str, float]]:
    """Per phase, per call of it (``calls``: how often each phase ran while ``recorded``): the
    products it ran, their FLOPs and the seconds they take replayed alone (:func:`replay_seconds`,
    each distinct product timed once)."""
    timed: dict[Product, float] = {}
    out = {}
    for name, products in recorded.items():
        count = max(calls.get(name, 1), 1)
        for product in products:
            if product not in timed:
                timed[product] = replay_seconds(product)
        out[name] = {
            "products_per_call": sum(products.values()) / count,
            "products_gflop_per_call": sum(n * product_flops(p) for p, n in products.items()) / count / 1e9,
            "products_seconds_per_call": sum(n * timed[p] for p, n in products.items()) / count,
        }
    return out
