"""Benchmark: scoring many targets against a batch of releases with the LRT and score attacks.

Acceptance target: scoring 2,500 targets against 100 releases of 100,000 SNVs (``lrt`` and
``score``) runs within 2 GiB of memory and reports throughput as a ratio to the machine's
float32 matrix-multiplication throughput measured in the same run (target >= 0.5).

Both attacks are affine in the target vector, so scoring is one (R x |Q|) @ (|Q| x n)
product; its useful work is 2 n R |Q| floating-point operations.  The attack's throughput
is that count over the wall time of ``attack.score`` (input validation included).  The
reference is the float32 matmul throughput of

- square products (``--square`` side), the machine's peak, and
- products of the scoring shape (R x c) @ (c x n) on operands already in float32
  (c = min(|Q|, 8192)),

each repeated to do about the same work as one scoring run, and the ratio is taken against
the faster of the two (the ratio to the scoring-shape product alone is reported too).  The
machine may be shared, so every timing is the best of ``--repeats`` runs, reference and
attack runs interleaved.  Targets
are uint8 (n |Q| bytes) and never converted to float as a whole; peak memory is the
process's maximum resident set size (it includes the Python/torch runtime).

Usage::

    OMP_NUM_THREADS=1 python experiments/benchmarks/attacks.py [--targets 2500 --releases 100 --snvs 100000]
        [--repeats 3] [--threads 1] [--out results.json]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
from collections.abc import Callable

import numpy as np
import torch

from bngp.attacks import AttackKnowledge, get_attack
from bngp.data.priors import UniformSubsetPrior
from bngp.io_utils import write_json
from bngp.metrics import auc

GIB = 1024**3


def _peak_rss_bytes() -> int:
    """Maximum resident set size of this process so far (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _matmul(m: int, k: int, n: int, total_flops: float) -> tuple[Callable[[], None], float]:
    """A run of float32 (m x k) @ (k x n) products doing about ``total_flops``; returns it and its flops."""
    generator = torch.Generator().manual_seed(0)
    left = torch.rand((m, k), generator=generator)
    right = torch.rand((k, n), generator=generator)
    count = max(1, round(total_flops / (2.0 * m * k * n)))

    def products() -> None:
        for _ in range(count):
            left @ right

    return products, 2.0 * m * k * n * count


def _seconds(function: Callable[[], object]) -> float:
    start = time.perf_counter()
    function()
    return time.perf_counter() - start


def _make_data(
    n_targets: int, n_releases: int, n_snvs: int, n_members: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Reference frequencies (true frequencies + N(0, 0.01) estimation error), uint8 targets,
    float32 releases (carrier frequencies of n-member subsets of the targets), memberships."""
    frequencies = 0.05 + 0.9 * rng.beta(0.5, 1.5, size=n_snvs)
    targets = np.empty((n_targets, n_snvs), dtype=np.uint8)
    rows = max(1, (1 << 24) // n_snvs)
    for start in range(0, n_targets, rows):
        stop = min(start + rows, n_targets)
        targets[start:stop] = rng.random((stop - start, n_snvs), dtype=np.float32) < frequencies
    reference = np.clip(frequencies + rng.normal(0.0, 0.01, n_snvs), 0.01, 0.99)
    memberships = UniformSubsetPrior(n_targets, n_members).sample(n_releases, rng)
    releases = np.empty((n_releases, n_snvs), dtype=np.float32)
    b = torch.from_numpy(memberships)
    for j0 in range(0, n_snvs, 4096):
        block = torch.from_numpy(targets[:, j0 : j0 + 4096]).to(torch.float32)
        releases[:, j0 : j0 + 4096] = ((b @ block) / n_members).numpy()
    return reference, targets, releases, memberships


def run(n_targets: int, n_releases: int, n_snvs: int, n_members: int, seed: int, square: int, repeats: int) -> dict:
    """Fit and time ``lrt`` and ``score`` against interleaved matmul references; return a dict."""
    rng = np.random.default_rng(seed)
    reference, targets, releases, memberships = _make_data(n_targets, n_releases, n_snvs, n_members, rng)
    knowledge = AttackKnowledge(reference_frequencies=reference, n_members=n_members)
    attacks = {}
    fit_seconds = {}
    for name in ("lrt", "score"):
        start = time.perf_counter()
        attacks[name] = get_attack(name).fit(knowledge, seed=seed)
        fit_seconds[name] = time.perf_counter() - start
    flops = 2.0 * n_targets * n_releases * n_snvs
    depth = min(n_snvs, 8192)
    square_products, square_flops = _matmul(square, square, square, flops)
    shape_products, shape_flops = _matmul(n_releases, depth, n_targets, flops)
    square_products()
    best = {"square": np.inf, "scoring_shape": np.inf, "lrt": np.inf, "score": np.inf}
    scores = {}
    for _ in range(repeats):
        best["square"] = min(best["square"], _seconds(square_products))
        best["scoring_shape"] = min(best["scoring_shape"], _seconds(shape_products))
        for name, attack in attacks.items():
            start = time.perf_counter()
            scores[name] = attack.score(targets, releases)
            best[name] = min(best[name], time.perf_counter() - start)
    square_gflops = square_flops / best["square"] / 1e9
    shape_gflops = shape_flops / best["scoring_shape"] / 1e9
    reference_gflops = max(square_gflops, shape_gflops)
    members = memberships.astype(bool)
    results: dict = {
        "targets": n_targets,
        "releases": n_releases,
        "snvs": n_snvs,
        "members": n_members,
        "seed": seed,
        "repeats": repeats,
        "threads": torch.get_num_threads(),
        "matmul_float32_gflops": {"square": square_gflops, "scoring_shape": shape_gflops},
        "attacks": {},
    }
    for name in attacks:
        gflops = flops / best[name] / 1e9
        results["attacks"][name] = {
            "fit_seconds": fit_seconds[name],
            "score_seconds": best[name],
            "gflops": gflops,
            "throughput_ratio": gflops / reference_gflops,
            "throughput_ratio_to_scoring_shape_matmul": gflops / shape_gflops,
            "auc_pooled": auc(scores[name], memberships),
            "mean_member_minus_non_member_score": float(
                scores[name][members].mean() - scores[name][~members].mean()
            ),
        }
    peak = _peak_rss_bytes()
    results["peak_rss_gib"] = peak / GIB
    results["within_2_gib"] = peak <= 2 * GIB
    results["throughput_ratio_target_met"] = all(a["throughput_ratio"] >= 0.5 for a in results["attacks"].values())
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--targets", type=int, default=2500)
    parser.add_argument("--releases", type=int, default=100)
    parser.add_argument("--snvs", type=int, default=100_000)
    parser.add_argument("--members", type=int, default=1250)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--square", type=int, default=2048, help="side of the square reference matmul")
    parser.add_argument("--repeats", type=int, default=3, help="timings are the best of this many runs")
    parser.add_argument("--threads", type=int, default=int(os.environ.get("OMP_NUM_THREADS", "1")))
    parser.add_argument("--out", default=None, help="write the results as JSON here")
    args = parser.parse_args(argv)
    from bngp.threads import set_threads
    set_threads(args.threads)
    results = run(args.targets, args.releases, args.snvs, args.members, args.seed, args.square, args.repeats)
    text = json.dumps(results, indent=2)
    print(text)
    if args.out:
        write_json(args.out, results)
    return 0 if results["within_2_gib"] else 1


if __name__ == "__main__":
    sys.exit(main())
