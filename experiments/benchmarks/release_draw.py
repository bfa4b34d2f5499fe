"""How long drawing a refit's releases of a trained-shape defender takes, phase by phase.

An in-game refit at paper scale (K = 800, |Q| = 5,000) draws 10,000 + 500 releases of the current
defender without autograd: memberships and randomness, f(D) = b Z / N, G's noise with its learned
shrinkage towards t (in float64), and x = clip(f(D) + xi, 0, 1).  This times each part on a
defender of the default game's shape (shrinkage, full-rank noise) and prints a fingerprint of the
releases, so two versions of the code can be run against each other and checked to draw the same
releases bit for bit.  The float32 matmul throughput is measured in the same process.

    OMP_NUM_THREADS=1 python experiments/benchmarks/release_draw.py --releases 10500
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _measure import matmul_peak_flops, peak_memory_gib  # noqa: E402
from bngp.defenses.network import Defender, DefenderSpec, composed_noise  # noqa: E402
from bngp.release.mechanism import SummaryStatistics  # noqa: E402
from bngp.rng import named_seeds, seeded_torch, torch_generator  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--individuals", type=int, default=800, help="K (default: 800)")
    parser.add_argument("--outputs", type=int, default=5000, help="|Q| (default: 5000)")
    parser.add_argument("--releases", type=int, default=10500, help="releases drawn (default: 10500, a paper-scale refit)")
    parser.add_argument("--seed", type=int, default=0, help="(default: 0)")
    args = parser.parse_args()
    for flag in ("individuals", "outputs", "releases"):
        if getattr(args, flag) < 1:
            parser.error(f"--{flag} must be >= 1, got {getattr(args, flag)}")
    from bngp.threads import set_threads
    set_threads(1)
    seeds = named_seeds(args.seed, ("population", "defender", "releases"))
    peak = matmul_peak_flops()
    genotypes = (np.random.default_rng(seeds["population"]).random((args.individuals, args.outputs)) < 0.3).astype(np.float32)
    mechanism = SummaryStatistics(genotypes)
    with seeded_torch(seeds["defender"]):
        defender = Defender(DefenderSpec(args.individuals, args.outputs, shrink=True, full_rank_noise=True))
    with torch.no_grad():
        defender.shrink_weight.fill_(0.7)
        defender.noise_scale.fill_(0.05)
    defender.set_shrink_target(genotypes.mean(axis=0))
    defender.eval()
    generator = torch_generator(seeds["releases"])
    seconds: dict[str, float] = {}
    with torch.no_grad():
        start = time.perf_counter()
        b = (torch.rand((args.releases, args.individuals), generator=generator) < 0.5).float()
        r = defender.sample_r(args.releases, generator)
        seconds["memberships and randomness"] = time.perf_counter() - start
        start = time.perf_counter()
        x_hat = mechanism.statistic(b)
        seconds["statistic"] = time.perf_counter() - start
        start = time.perf_counter()
        noise = composed_noise(defender, (), b, r, x_hat, generator)
        seconds["defender noise"] = time.perf_counter() - start
        start = time.perf_counter()
        releases = mechanism.release(b, noise, x_hat)
        seconds["release"] = time.perf_counter() - start
    seconds["total"] = sum(seconds.values())
    print(json.dumps({
        "individuals": args.individuals, "outputs": args.outputs, "releases": args.releases, "seed": args.seed,
        "matmul_gflops_float32": round(peak / 1e9, 1),
        "seconds": {name: round(value, 3) for name, value in seconds.items()},
        "peak_memory_gib": round(peak_memory_gib(), 2),
        "releases_sha1": hashlib.sha1(releases.numpy().tobytes()).hexdigest()[:16],
    }))


if __name__ == "__main__":
    main()
