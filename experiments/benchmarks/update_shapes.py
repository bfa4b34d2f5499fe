"""Benchmark: how fast the products of one attacker update can run on this CPU, next to its matmul peak.

An update of the attacker network H (App. L.8 Table 2a at K = 800, |Q| = 5000: Linear(5000, 3400),
Linear(3400, 2000), Linear(2000, 800) and the Linear(5000, 800) head) on a batch of B draws (the game's
``GameConfig.batch_size``, 128) runs,
per layer of in x out weights, three products: forward (B x in) @ (in x out), the weight gradient
(out x B) @ (B x in) into a fresh tensor (as autograd makes it) and, inside the network, the input
gradient (B x out) @ (out x in); then Adam reads and writes every parameter and its two moments.
This script times each product alone (best of 3 x ``--repeats``), the fused Adam step of the
network's parameters, and a whole update (forward, backward, Adam) of the network, and reports
each as a fraction of the square float32 matmul (``--size``) measured in the same process, before,
between and after the products (the largest of the three).  The fraction a product reaches alone bounds what the update can reach
(``docs/results.md``, Speed: the target ">= 0.5 of the matmul" for the training updates).

Usage::

    OMP_NUM_THREADS=1 python experiments/benchmarks/update_shapes.py [--batch 128] [--threads 1] \\
        [--out experiments/results/benchmarks]
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _measure import matmul_peak_flops, write_report  # noqa: E402

from bngp.game.config import GameConfig  # noqa: E402
from bngp.timing import best_seconds  # noqa: E402

#: (in, out) of the attacker's layers at K = 800, |Q| = 5000 (App. L.8 Table 2a), then its head.
LAYERS = ((5000, 3400), (3400, 2000), (2000, 800), (5000, 800))


def _best(run, repeats: int) -> float:
    """Seconds of one call of ``run``: the best of three timings of ``repeats`` calls, after one."""
    return best_seconds(run, repeats) / repeats


def measure(batch: int, threads: int, repeats: int, size: int) -> dict:
    """Time the products of one update, the Adam step and a whole update; return the record."""
    os.environ.setdefault("THP_MEM_ALLOC_ENABLE", "1")  # the allocator setting of the bngp command, before torch allocates
    import torch

    from bngp.attacks.network import Attacker, AttackerSpec
    from bngp.threads import set_threads
    set_threads(threads)
    peak_before = matmul_peak_flops(size)
    products = []
    for index, (n_in, n_out) in enumerate(LAYERS):
        x, weight = torch.randn(batch, n_in), torch.randn(n_out, n_in)
        grad = torch.randn(batch, n_out)
        kinds = [("forward", lambda: x @ weight.T), ("weight gradient", lambda: grad.T @ x)]
        if index in (1, 2):  # input gradients flow inside the network only (not into the release)
            kinds.append(("input gradient", lambda: grad @ weight))
        for kind, run in kinds:
            seconds = _best(run, repeats)
            products.append({"layer": f"{n_in} x {n_out}", "product": kind, "seconds": seconds,
                             "gflop": 2.0 * batch * n_in * n_out / 1e9})
    peak_between = matmul_peak_flops(size)
    network = Attacker(AttackerSpec(5000, 800, init="shadow-ridge"))
    network.train()
    optimiser = torch.optim.Adam(network.parameters(), lr=1e-3, weight_decay=1e-5, fused=True)
    x, b = torch.randn(batch, 5000), (torch.rand(batch, 800) < 0.5).float()
    loss_fn = torch.nn.BCEWithLogitsLoss()

    def update() -> None:
        loss = loss_fn(network(x), b)
        optimiser.zero_grad(set_to_none=True)
        loss.backward()
        optimiser.step()

    update_seconds = _best(update, repeats)
    adam_seconds = _best(optimiser.step, repeats)
    parameters = sum(p.numel() for p in network.parameters())
    peak_after = matmul_peak_flops(size)
    peak = max(peak_before, peak_between, peak_after)
    product_seconds = sum(p["seconds"] for p in products)
    product_gflop = sum(p["gflop"] for p in products)
    for p in products:
        p["fraction_of_matmul"] = p["gflop"] * 1e9 / p["seconds"] / peak
    return {
        "batch": batch,
        "threads": threads,
        "matmul_size": size,
        "matmul_gflops_float32": [peak_before / 1e9, peak_between / 1e9, peak_after / 1e9],
        "products": products,
        "products_seconds": product_seconds,
        "products_gflop": product_gflop,
        "products_fraction_of_matmul": product_gflop * 1e9 / product_seconds / peak,
        "adam_seconds": adam_seconds,
        "adam_parameters": parameters,
        "adam_gbytes_per_second": parameters * 4 * 7 / adam_seconds / 1e9,  # reads p, g, m, v; writes p, m, v
        "update_seconds": update_seconds,
        "update_fraction_of_matmul": product_gflop * 1e9 / update_seconds / peak,
        "ceiling_with_adam": product_gflop * 1e9 / (product_seconds + adam_seconds) / peak,
    }


def markdown(record: dict, command: str) -> str:
    before, between, after = record["matmul_gflops_float32"]
    lines = [
        "# The products of one attacker update against the matmul peak",
        "",
        f"`{command}` (batch {record['batch']}, {record['threads']} thread(s)). Square float32 matmul "
        f"({record['matmul_size']}^2) {before:.1f} GFLOP/s before the products, {between:.1f} between them and the "
        f"update, {after:.1f} after, in the same process; fractions are of the largest (the host's speed moves "
        "within a run: the milliseconds are the measurement, the fractions depend on the reference).",
        "",
        "| layer (in x out) | product | ms | GFLOP | fraction of the matmul |",
        "|---|---|---|---|---|",
    ]
    for p in record["products"]:
        lines.append(f"| {p['layer']} | {p['product']} | {p['seconds'] * 1e3:.1f} | {p['gflop']:.2f} | "
                     f"{p['fraction_of_matmul']:.2f} |")
    lines += [
        "",
        f"- All the products, each alone: {record['products_seconds'] * 1e3:.0f} ms for "
        f"{record['products_gflop']:.1f} GFLOP, **{record['products_fraction_of_matmul']:.2f}** of the matmul.",
        f"- Fused Adam over the network's {record['adam_parameters'] / 1e6:.1f} M parameters: "
        f"{record['adam_seconds'] * 1e3:.0f} ms ({record['adam_gbytes_per_second']:.1f} GB/s of parameter and "
        "moment traffic); the products and Adam together can reach at most "
        f"**{record['ceiling_with_adam']:.2f}** of the matmul.",
        f"- A whole update (forward, backward, Adam) of the network: {record['update_seconds'] * 1e3:.0f} ms, "
        f"**{record['update_fraction_of_matmul']:.2f}** of the matmul.",
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=GameConfig().batch_size,
                        help="membership draws per update (default: %(default)s, the game's)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default: %(default)s)")
    parser.add_argument("--repeats", type=int, default=10, help="calls per timing (default: %(default)s)")
    parser.add_argument("--size", type=int, default=2048, help="square matmul of the reference (default: %(default)s)")
    parser.add_argument("--out", default="experiments/results/benchmarks", help="output folder (default: %(default)s)")
    args = parser.parse_args(argv)
    for flag, value, least in (("--batch", args.batch, 2), ("--threads", args.threads, 1), ("--repeats", args.repeats, 1),
                               ("--size", args.size, 1)):
        if value < least:
            parser.error(f"{flag} must be >= {least}, got {value}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    command = "python experiments/benchmarks/update_shapes.py " + " ".join(argv if argv is not None else sys.argv[1:])
    record = measure(args.batch, args.threads, args.repeats, args.size)
    stem = f"update_shapes_800x5000_b{args.batch}_t{args.threads}"
    write_report(out, stem, command, record, markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
