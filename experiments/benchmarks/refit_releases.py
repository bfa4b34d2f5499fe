"""How long the default game's refit takes to draw its releases, against that phase's own bound.

An in-game refit draws the releases its attacker head is fitted on (10,000 at paper scale, 5,368 for
a composition of 5) and 500 validation releases, without autograd (``Game._refit_releases``).  This
times exactly that phase of the default game of one size (``game_phases._game``: K x |Q|, or
K x |Q| x c for Table 5's composition of c mechanisms) on a defender moved off its data-independent
start (shrinkage, full-rank noise and G's output layer drawn from the seed), best of ``--repeats``.
It reports the phase's bound as ``game_phases.py`` counts it (its products at the float32 matmul
and its draws at the generator's rates, both measured in the same process) and a fingerprint of the
releases, so two versions of the code can be run in turn on the same host and checked to draw the
same releases bit for bit.

    OMP_NUM_THREADS=1 python experiments/benchmarks/refit_releases.py --size 800x5000x5
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def _figures(value: float) -> float:
    """``value`` to four significant figures (seconds from microseconds to minutes)."""
    return float(f"{value:.4g}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", default="800x5000", help="KxQ, or KxQxC for a composition of C (default: %(default)s)")
    parser.add_argument("--repeats", type=int, default=3, help="timings, the best reported (default: 3)")
    parser.add_argument("--seed", type=int, default=0, help="(default: 0)")
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error(f"--repeats must be >= 1, got {args.repeats}")
    import game_phases

    try:
        individuals, attributes, composition = game_phases._size(args.size)
    except SystemExit as error:
        parser.error(str(error))
    import torch

    from _measure import matmul_peak_flops
    from bngp.game.config import REFIT_VALIDATION_DRAWS
    from bngp.ridge import default_shadow_releases
    from bngp.threads import set_threads
    from bngp.timing import draw_rates

    set_threads(1)
    game = game_phases._game(individuals, attributes, composition, args.seed, None, 0, None)
    defender = game.defender
    with torch.no_grad():  # off the data-independent start, fixed by the seed
        defender.shrink_weight.uniform_(0.0, 1.0, generator=torch.Generator().manual_seed(args.seed + 1))
        defender.noise_scale.uniform_(0.0, 0.1, generator=torch.Generator().manual_seed(args.seed + 2))
        defender.net[-1].weight.normal_(0.0, 0.01, generator=torch.Generator().manual_seed(args.seed + 3))
    rows = default_shadow_releases(game.population.n_individuals, game.mechanism.n_outputs)

    game.generator.manual_seed(args.seed)
    x, _, (validation, _, _) = game._refit_releases(rows)
    fingerprint = hashlib.sha1(x.numpy().tobytes() + validation.numpy().tobytes()).hexdigest()[:16]
    seconds = []
    for _ in range(args.repeats):
        start = time.perf_counter()
        game._refit_releases(rows)
        seconds.append(time.perf_counter() - start)
    peak = matmul_peak_flops()
    rates = draw_rates()
    products = game_phases.phase_flops(game, rows)["refit: releases"] / peak
    bound = game_phases.draw_bound(products, game_phases.phase_draws(game, rows)["refit: releases"], rates)
    best = min(seconds)
    print(json.dumps({
        "size": args.size, "refit_rows": rows, "validation_rows": REFIT_VALIDATION_DRAWS,
        "seed": args.seed, "seconds": [_figures(value) for value in seconds], "best_seconds": _figures(best),
        "matmul_gflops_float32": round(peak / 1e9, 1), "normals_per_second": round(rates[0]),
        "products_seconds": _figures(products), "bound_seconds": _figures(bound),
        "fraction_of_matmul": round(products / best, 3), "fraction_of_bound": round(bound / best, 3),
        "releases_sha1": fingerprint,
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
