"""Benchmark: `bngp evaluate --attacks all` against a fixed defense, time per attack.

Runs :func:`bngp.evaluate.evaluate_defense` (every attack the evaluation's knowledge allows,
50 releases by default) on an independent-SNV population of K individuals and |Q| outputs, with
n = K / 2 members, against a fixed DP defense, in this process after measuring the machine's
float32 and float64 matmul throughput with the same threads.  Reports each attack's wall time
(fit + scoring), its share, the total against the target (<= 180 s at K = 800,
|Q| = 5000), peak memory and each attack's AUC (so a faster run can be checked to be as
strong).  ``--device cuda`` runs the attacks that can use a GPU there (:mod:`bngp.device`) and
measures the matmul references on it.  The converged linear fits report their learning curves;
their cost is dominated, at each size of the curve, by the |Q| x |Q| Gram matrix of the residual
and its tridiagonal form (an eigendecomposition on a GPU), one for both maps since they are
fitted together (see ``docs/results.md``, Speed).  ``--workers`` is the command's: by default
(auto) a paper-scale evaluation on 2 cores or more runs with a helper process
(:mod:`bngp.workers`), and the record gives its peak memory next to this process's.

Usage::

    OMP_NUM_THREADS=1 python experiments/benchmarks/evaluation.py --individuals 800 --snvs 5000 \\
        [--defense laplace:epsilon=10] [--releases 50] [--threads 1] [--workers auto|1|2] \\
        [--out experiments/results/benchmarks]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from bngp.device import DEVICE_NAMES

if TYPE_CHECKING:
    import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _measure import (device_description, matmul_peak_flops, peak_device_memory_gib, peak_helper_memory_gib,  # noqa: E402
                      peak_memory_gib, write_report)

#: the target for K = 800, |Q| = 5000, 50 releases (seconds).
PAPER_SCALE_TARGET_SECONDS = 180.0
#: the fixed defense evaluated by default (a DP defense whose releases keep a weak signal, AUC about 0.51).
DEFAULT_DEFENSE = "laplace:epsilon=10"


def measure(individuals: int, snvs: int, defense_spec: str, releases: int, threads: int, seed: int,
            device: str = "cpu", workers: int = 1) -> dict:
    """Evaluate every attack against ``defense_spec`` and return the timing record."""
    import torch

    from bngp.data.independent import simulate_independent
    from bngp.data.priors import UniformSubsetPrior
    from bngp.defenses.registry import DefenseContext, parse_defense_spec
    from bngp.device import resolve_device
    from bngp.threads import set_threads

    set_threads(threads)
    where = resolve_device(device)
    peak32 = matmul_peak_flops(device=where)
    peak64 = matmul_peak_flops(dtype=torch.float64, device=where)
    population = simulate_independent(individuals, individuals, snvs, seed=seed)
    members = individuals // 2
    prior = UniformSubsetPrior(individuals, members)
    defense = parse_defense_spec(defense_spec, DefenseContext(population, members))
    timed = timed_evaluation(population, prior, members, defense, releases, seed, where, workers)
    return {
        "individuals": individuals,
        "snvs": snvs,
        "members": members,
        "defense": defense_spec,
        "releases": releases,
        "threads": threads,
        "workers": workers,
        "device": device_description(where),
        "seed": seed,
        "matmul_gflops_float32": peak32 / 1e9,
        "matmul_gflops_float64": peak64 / 1e9,
        "wall_seconds": timed["wall_seconds"],
        "peak_memory_gib": peak_memory_gib(),
        "peak_helper_memory_gib": peak_helper_memory_gib(),
        "peak_device_memory_gib": peak_device_memory_gib(where),
        "attacks": timed["attacks"],
    }


def timed_evaluation(population, prior, members: int, defense, releases: int, seed: int, where: "torch.device",
                     workers: int) -> dict:
    """``bngp evaluate --attacks all`` of ``defense`` (:func:`bngp.evaluate.evaluate_defense`, ``releases``
    releases, datasets of n = ``members``): its wall time and, per attack, its seconds (fit +
    scoring), share of the wall time and AUC."""
    from bngp.evaluate import evaluate_defense

    started = time.perf_counter()
    result = evaluate_defense(population, prior, defense, "all", releases=releases, seed=seed,
                              n_members=members, progress=True, device=where, workers=workers)
    wall = time.perf_counter() - started
    return {"wall_seconds": wall, "workers": workers,
            "attacks": {name: {"seconds": entry.seconds, "share": entry.seconds / wall, "auc": entry.auc}
                        for name, entry in result.attacks.items()}}


def markdown(record: dict, command: str) -> str:
    paper_scale = record["individuals"] == 800 and record["snvs"] == 5000
    target = ""
    if paper_scale and record.get("device", "cpu") != "cpu":
        target = f"; (the target, <= {PAPER_SCALE_TARGET_SECONDS:.0f} s, is the 2-core CPU's)"
    elif paper_scale:
        met = record["wall_seconds"] <= PAPER_SCALE_TARGET_SECONDS
        target = f"; target <= {PAPER_SCALE_TARGET_SECONDS:.0f} s: {'met' if met else 'NOT met'}"
    gib = record.get("peak_device_memory_gib") or 0.0
    gpu_memory = f" (GPU: {gib:.2f} GiB allocated)" if gib else ""
    workers = record.get("workers", 1)
    helper_gib = record.get("peak_helper_memory_gib")
    helper_memory = ("" if workers == 1 else " (helper process: not measured)" if helper_gib is None
                     else f" (helper process: {helper_gib:.2f} GiB)")
    lines = [
        "# Evaluation time by attack",
        "",
        f"`{command}` (seed {record['seed']}, {record['threads']} thread(s), {workers} process(es), device "
        f"{record.get('device', 'cpu')}).",
        "",
        f"K = {record['individuals']}, |Q| = {record['snvs']}, n = {record['members']}, defense "
        f"`{record['defense']}`, {record['releases']} releases. matmul {record['matmul_gflops_float32']:.1f} GFLOP/s "
        f"(float32), {record['matmul_gflops_float64']:.1f} (float64), measured in the same process; "
        f"**evaluation {record['wall_seconds']:.0f} s**{target}; peak memory {record['peak_memory_gib']:.2f} GiB"
        f"{helper_memory}{gpu_memory}.",
        "",
        *(["With a helper process the attacks run two at a time: `s` is each attack's own time and the "
           "shares add up to more than 100%.", ""] if workers > 1 else []),
        "| attack | s | share | AUC |",
        "|---|---|---|---|",
    ]
    for name, entry in sorted(record["attacks"].items(), key=lambda item: -item[1]["seconds"]):
        lines.append(f"| {name} | {entry['seconds']:.1f} | {entry['share']:.0%} | {entry['auc']:.4f} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--individuals", type=int, default=800, help="K (default: %(default)s)")
    parser.add_argument("--snvs", type=int, default=5000, help="|Q| (default: %(default)s)")
    parser.add_argument("--defense", default=DEFAULT_DEFENSE, help="defense spec (default: %(default)s)")
    parser.add_argument("--releases", type=int, default=50, help="(default: %(default)s)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default: %(default)s)")
    parser.add_argument("--workers", default="auto", metavar="auto|1|2",
                        help="processes: 1, or 2 with a helper process (bngp.workers); auto: as `bngp evaluate` "
                             "(default: %(default)s)")
    parser.add_argument("--seed", type=int, default=0, help="(default: %(default)s)")
    parser.add_argument("--device", choices=DEVICE_NAMES, default="cpu",
                        help="where the attacks that can use a GPU run (default: %(default)s)")
    parser.add_argument("--out", default="experiments/results/benchmarks", help="output folder (default: %(default)s)")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    command = "python experiments/benchmarks/evaluation.py " + " ".join(argv if argv is not None else sys.argv[1:])
    from bngp.workers import resolve_workers

    workers = resolve_workers(args.workers, args.individuals * args.snvs)
    record = measure(args.individuals, args.snvs, args.defense, args.releases, args.threads, args.seed, args.device,
                     workers)
    stem = (f"evaluation_{args.individuals}x{args.snvs}_t{args.threads}" + ("" if workers == 1 else f"_w{workers}")
            + ("" if args.device == "cpu" else f"_{args.device}"))
    write_report(out, stem, command, record, markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
