"""Every reference mechanism at a utility budget, ranked by the converged linear attack, on a population of
the reproductions' catalog: the references half of one ``bngp reproduce budget-frontier`` cell, without the
trained defender, for sizes where a whole cell is long (the paper's genome, 800 x 5,000).

    python experiments/reference_ranking.py --dataset genome --scale paper --budget 0.5x --seed 0 \\
        --out experiments/results/reference_ranking/genome_paper_0.5x.json

Writes the ranking (:meth:`bngp.references.ReferenceRanking.to_dict`) with the population's sizes, the wall
time and the float32 matmul throughput measured before and after in the same process.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", choices=("genome", "adult"), default="genome")
    parser.add_argument("--scale", choices=("quick", "small", "paper"), default="paper")
    parser.add_argument("--budget", required=True, help="absolute, or a fraction of f(theta)'s loss such as 0.5x")
    parser.add_argument("--shrink-grid", type=float, nargs="+", default=[0.2, 0.4])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    from bngp.references import rank_references
    from bngp.reproduce.catalog import ADULT, GENOME
    from bngp.reproduce.datasets import make_population
    from bngp.reproduce.report import REFERENCE_MATMUL
    from bngp.timing import matmul_flops

    started = time.perf_counter()
    sizes = (GENOME if args.dataset == "genome" else ADULT)[args.scale]
    population = make_population(args.dataset, sizes, args.seed)
    before = matmul_flops(*REFERENCE_MATMUL)
    ranking = rank_references(population, sizes.members, args.budget, seed=args.seed,
                              shrink_grid=tuple(args.shrink_grid), progress=True)
    record = {"dataset": args.dataset, "scale": args.scale, "sizes": sizes.describe(), **ranking.to_dict(),
              "seconds": time.perf_counter() - started,
              "matmul_flops_float32": [before, matmul_flops(*REFERENCE_MATMUL)]}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(record, indent=1) + "\n")
    print(json.dumps({"best": record["best"], "seconds": round(record["seconds"]),
                      "auc": {entry["label"]: round(entry["auc"], 4) for entry in record["references"]}}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
