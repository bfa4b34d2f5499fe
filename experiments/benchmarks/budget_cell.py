"""How long one cell of the budget frontier takes, and where the time goes: the references ranked by the converged
linear attack, the game trained for the budget, the converged linear attack of the delivered defender (which is
the release decision's own reading: the decision reuses the cell's ranking for its other rows), and the
evaluation of the defender and of the best reference by every attack (``bngp evaluate --attacks all``).

    OMP_NUM_THREADS=1 python experiments/benchmarks/budget_cell.py --scale paper --fraction 0.875 --threads 1 \\
        --out experiments/results/benchmarks/budget_cell_paper_0.875

One process runs :func:`bngp.reproduce.budget_frontier.frontier_cell` on the frontier's genome with K < |Q| at the
scale (the paper's: 800 candidates x 5,000 SNVs, N = 400) without its end-to-end audits, which the target leaves
out.  The report gives the wall time of each phase against the target of 600 s for the whole cell on one thread,
each reference's build and scoring time, the process's peak memory, and the float32 matmul throughput of this
machine measured in the same process before and after (:func:`bngp.timing.matmul_flops`): on a shared host the
same work takes longer when that throughput is lower.  Writes ``OUT/cell.json`` and ``OUT/report.md``.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

#: the target for a paper-genome cell (references, game, converged attacks, decision) on one thread, seconds.
TARGET_SECONDS = 600.0


def _report(record: dict) -> str:
    cell, sizes = record["cell"], record["sizes"]
    flops = [value / 1e9 for value in record["matmul_flops_float32"]]
    total = record["seconds"]
    lines = [f"# One budget-frontier cell: {record['population']} {sizes['individuals']} x {sizes['attributes']}, "
             f"N = {sizes['members']}, U = {cell['fraction']:g} L0",
             "",
             f"`{record['command']}` ({record['threads']} thread(s), seed {record['seed']}); float32 matmul "
             f"{flops[0]:.1f} GFLOP/s before and {flops[1]:.1f} after, in the same process; peak memory "
             f"{record['peak_rss_bytes'] / 2**30:.2f} GiB.",
             "",
             "| phase | seconds | share |", "|---|---|---|"]
    lines += [f"| {name} | {seconds:.1f} | {seconds / total:.0%} |" for name, seconds in record["phase_seconds"].items()]
    if record["scale"] == "paper":
        verdict = f"target {TARGET_SECONDS:.0f} s: " + ("met" if total <= TARGET_SECONDS else "not met")
    else:
        verdict = "the target is judged at the paper's scale"
    lines += [f"| **whole cell** | **{total:.1f}** | {verdict} |", "",
              f"The references: built (calibrated) in {record['build_seconds']:.1f} s, then each screened and, where it "
              "could be the best or a release decision names it, read by the converged linear attack (a screened "
              "AUC is a lower reading, marked >=; `map`: the linear map that read highest):", "",
              "| reference | AUC | TPR at 1% FPR | map | shadow releases | seconds |", "|---|---|---|---|---|---|"]
    lines += [f"| {entry['label']} | {'' if entry.get('converged', True) else '>= '}{entry['auc']:.4f} | "
              f"{entry['tpr_at_1pct_fpr']:.3f} | {entry.get('map', 'ridge')} | {entry['shadow_releases']:,} | "
              f"{entry['seconds']:.1f} |" for entry in cell["references"]]
    trained = cell["trained"]
    strongest = cell["evaluation"]["trained"]
    timings = trained.get("timings") or {}
    if timings:
        lines += ["", "The game's phases (its own timer):", "", "| phase | seconds | calls |", "|---|---|---|"]
        lines += [f"| {name} | {entry['seconds']:.1f} | {entry['calls']:.0f} |"
                  for name, entry in sorted(timings.items(), key=lambda item: -item[1]["seconds"])]
    lines += ["", f"Best reference: {cell['best_reference']}. Delivered defender: converged linear attack AUC "
              f"{trained['auc']:.4f}, strongest of every attack {strongest['auc']:.4f} ({strongest['strongest_attack']}); "
              f"the game ran {trained['steps']} steps and kept the state of {trained['start'].get('kept', '-')}.",
              "The noise shaped to the population uses only the candidates in the population file, never the members' "
              "rows."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", choices=("quick", "small", "paper"), default="paper")
    parser.add_argument("--fraction", type=float, default=0.875, help="the budget as a fraction of L0")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    import torch

    torch.set_num_threads(args.threads)
    from bngp.reproduce.budget_frontier import BUDGET_FRONTIER, frontier_cell
    from bngp.reproduce.datasets import make_population
    from bngp.reproduce.report import REFERENCE_MATMUL
    from bngp.reproduce.scales import BUDGETS
    from bngp.timing import matmul_flops, peak_rss_bytes

    out = Path(args.out)
    if out.exists() and any(out.iterdir()):
        parser.error(f"{out} exists and is not empty.")
    populations = BUDGET_FRONTIER[args.scale][0]  # the genome with K < |Q| (the quick scale has none: its first)
    entry = next((item for item in populations if item.regime == "K < |Q|"), populations[0])
    before = matmul_flops(*REFERENCE_MATMUL)
    started = time.perf_counter()
    population = make_population(entry.dataset, entry.sizes, args.seed)
    simulated = time.perf_counter() - started
    with tempfile.TemporaryDirectory() as work:
        cell = frontier_cell(population, entry.sizes.members, args.fraction, args.seed, BUDGETS[args.scale],
                             Path(work) / "run", audit=False)
    seconds = time.perf_counter() - started - simulated
    record = {"command": "python experiments/benchmarks/budget_cell.py " + " ".join(argv or sys.argv[1:]),
              "scale": args.scale, "population": entry.label, "sizes": asdict(entry.sizes), "seed": args.seed, "threads": args.threads,
              "population_seconds": simulated, "seconds": seconds, "target_seconds": TARGET_SECONDS,
              "phase_seconds": cell["phase_seconds"], "build_seconds": cell["reference_build_seconds"],
              "matmul_flops_float32": [before, matmul_flops(*REFERENCE_MATMUL)], "peak_rss_bytes": peak_rss_bytes(),
              "cell": cell}
    out.mkdir(parents=True, exist_ok=True)
    (out / "cell.json").write_text(json.dumps(record, indent=1) + "\n")
    (out / "report.md").write_text(_report(record))
    print(json.dumps({"seconds": round(seconds), "phases": {k: round(v) for k, v in cell["phase_seconds"].items()}}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
