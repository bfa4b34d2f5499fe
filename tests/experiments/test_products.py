"""experiments/benchmarks/_products.py: matrix products recorded by phase, counted and replayed alone."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "experiments" / "benchmarks"))

from _products import Operand, product_flops, products_alone, record_products, replay_seconds  # noqa: E402

from bngp.timing import PhaseTimer  # noqa: E402


def test_products_are_charged_to_the_running_phase_with_their_layouts():
    """A Linear(5, 3) on a batch of 4 whose input needs a gradient: forward addmm (4 x 5) @ (5 x 3),
    backward the input gradient (4 x 3) @ (3 x 5) and the weight gradient (3 x 4) @ (4 x 5), each
    2 * 4 * 5 * 3 = 120 FLOPs; the product run outside every phase is not kept."""
    torch.manual_seed(0)
    layer = torch.nn.Linear(5, 3)
    x = torch.randn(4, 5, requires_grad=True)
    timer = PhaseTimer()

    def run():
        layer(x)  # no phase running
        with timer("forward"):
            y = layer(x)
        with timer("backward"):
            y.sum().backward()

    recorded = record_products(run)
    assert set(recorded) == {"forward", "backward"}
    (forward, count), = recorded["forward"].items()
    assert count == 1 and forward.op is torch.ops.aten.addmm.default
    weight = forward.operands()[-1]
    assert weight.shape == (5, 3) and weight.stride == (1, 5)  # the transposed view of the (3, 5) weight
    assert [product_flops(p) for p in recorded["backward"]] == [120.0, 120.0]
    assert product_flops(forward) == 120.0


def test_a_batched_product_counts_its_batch_and_int8_products_are_kept():
    a, b = torch.randn(6, 4, 5), torch.randn(6, 5, 7)
    members, genotypes = torch.ones(16, 32, dtype=torch.int8), torch.ones(32, 8, dtype=torch.int8)
    timer = PhaseTimer()

    def run():
        with timer("p"):
            torch.bmm(a, b)
            torch._int_mm(members, genotypes)

    products = record_products(run)["p"]
    assert sorted(product_flops(p) for p in products) == [2.0 * 6 * 4 * 5 * 7, 2.0 * 16 * 32 * 8]
    assert {p.operands()[0].dtype for p in products} == {torch.float32, torch.int8}


def test_operands_are_remade_with_the_recorded_layout():
    """A transposed and an expanded (stride 0) operand keep their strides over fresh storage."""
    generator = torch.Generator().manual_seed(0)
    for tensor in (torch.randn(3, 5).t(), torch.randn(5).expand(4, 5), torch.zeros(0, 3)):
        made = Operand.of(tensor).make(generator)
        assert made.shape == tensor.shape and made.stride() == tensor.stride() and made.dtype == tensor.dtype


def test_replayed_products_take_the_time_of_their_size_and_are_summed_per_call():
    """A 384^3 product has 884,736 times the FLOPs of a 4^3 one: alone it takes far longer (a
    factor over 10 leaves room for the per-call overhead that dominates the small one); a phase
    recorded over 2 calls reports half of what it ran, the large product's time counted twice."""
    big, small = torch.randn(384, 384), torch.randn(4, 4)
    timer = PhaseTimer()

    def run():
        for _ in range(2):
            with timer("p"):
                big @ big
                big @ big
                small @ small

    recorded = record_products(run)
    large, tiny = sorted(recorded["p"], key=product_flops, reverse=True)
    assert replay_seconds(large) > 10 * replay_seconds(tiny)
    alone = products_alone(recorded, {"p": 2})["p"]
    assert alone["products_per_call"] == 3
    assert alone["products_gflop_per_call"] == pytest.approx((2 * 2 * 384**3 + 2 * 4**3) / 1e9)
    assert alone["products_seconds_per_call"] > 2 * 0.5 * replay_seconds(large)
