"""Evidence for ``GameConfig.selection_patience``: which patience keeps the defender a full run keeps.

Each run trains the default game for its whole budget (``GameConfig()``: 1,500 steps, a refit and a
scoring of the defender every 50) with no patience, on the setting of the speed
targets' strength check (K = 200 simulated CEU individuals, N = 100, |Q| = 1000 SNVs, population seed = run seed),
and records every selection scoring (``TrainingSummary.selections``).  A run with patience P is
the first part of that run up to its stop, its final scoring included (:mod:`bngp.game.early_stop`),
so :func:`bngp.game.replay_patience` tells exactly, for every P, where it would have stopped and
which state it would have kept.  The report gives, per P, the runs that keep the same state (the
same defender, bit for bit, hence the same privacy and utility under any attack) and, where not,
how much worse the kept state's selection score is, with the fraction of the budget trained.

Settings: the preference objective at each ``--kappas`` value and seed, and the utility-budget
objective at each ``--budgets`` value and seed (the fresh-attacker check is skipped: it does not
change what is kept).  Runs already in ``--out`` are not trained again; ``--shard i/n`` trains every
n-th run (two processes on two cores), ``--report`` only writes the report of the runs present.

Usage: python experiments/selection_patience.py [--kappas 1.5 5 10 50] [--seeds 0 1 2]
    [--budgets 0.01] [--threads 1] [--shard 0/1] [--report] [--out experiments/results/selection_patience]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent / "benchmarks"))
from _measure import matmul_peak_flops  # noqa: E402

K, N, SNVS = 200, 100, 1000
PATIENCES = (*range(1, 11), 12, 16)
RESULTS = Path(__file__).resolve().parent / "results" / "selection_patience"


def run_name(objective: str, value: float, seed: int) -> str:
    return f"{'kappa' if objective == 'preference' else 'budget'}{value:g}_seed{seed}"


def train_run(objective: str, value: float, seed: int, out: Path) -> dict:
    """Train one full run (no patience) and write its record."""
    import tempfile

    import torch

    from bngp import Game, GameConfig, UniformSubsetPrior, simulate_genome

    population = simulate_genome(K, K, SNVS, seed=seed)
    settings = {"kappa": value} if objective == "preference" else {"objective": objective, "budget": value, "kappa": 0.0}
    config = GameConfig.from_flat({"seed": seed, "fresh_check_steps": 0, **settings})
    peak = matmul_peak_flops()
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as work:
        summary = Game(population, UniformSubsetPrior(K, N), config).train(Path(work) / "run", progress=False)
    record = {
        "name": run_name(objective, value, seed),
        "objective": objective,
        "value": value,
        "seed": seed,
        "config": config.flat(),
        "train_seconds": time.perf_counter() - started,
        "matmul_gflops_float32": peak / 1e9,
        "threads": torch.get_num_threads(),
        "selected": summary.selected,
        "selections": list(summary.selections),
        "commit": subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                 cwd=Path(__file__).resolve().parent).stdout.strip(),
    }
    (out / "runs").mkdir(parents=True, exist_ok=True)
    (out / "runs" / f"{record['name']}.json").write_text(json.dumps(record, indent=2) + "\n")
    return record


def replays(records: list[dict]) -> dict:
    """Per patience: every run's replay and the summary over runs."""
    from bngp.game import replay_patience

    table = {}
    for patience in PATIENCES:
        rows = []
        for record in records:
            replay = replay_patience(record["selections"], patience, record["config"]["attacker_refit_every"])
            gap = replay.kept_score - replay.full_kept_score
            rows.append({"run": record["name"], **replay.to_dict(), "score_gap": gap,
                         "relative_gap": gap / max(abs(replay.full_kept_score), 1e-12)})
        table[patience] = {
            "runs": rows,
            "same_state": sum(row["same_state"] for row in rows),
            "worst_relative_gap": max(row["relative_gap"] for row in rows),
            "mean_steps_fraction": float(np.mean([row["steps_fraction"] for row in rows])),
        }
    return table


def smallest_safe_patience(selections: list[dict], refit_every: int, largest: int = 60) -> int | None:
    """The smallest P from which every patience up to ``largest`` keeps the full run's state."""
    from bngp.game import replay_patience

    safe = [replay_patience(selections, patience, refit_every).same_state for patience in range(1, largest + 1)]
    for patience in range(1, largest + 1):
        if all(safe[patience - 1:]):
            return patience
    return None


def report(records: list[dict], table: dict) -> str:
    """The Markdown report of the full runs and of their replays (:func:`replays`)."""
    lines = [
        "# Selection patience: which patience keeps the state a full run keeps",
        "",
        f"`python experiments/selection_patience.py` (K = {K}, N = {N}, |Q| = {SNVS}, simulated CEU population, "
        "default game, 1,500 steps, a scoring every 50; fresh-attacker check skipped). Each run trained its "
        "whole budget once; every patience is replayed exactly from its scorings (`bngp.game.replay_patience`). "
        "`train s`: wall time of the run with two or three such runs sharing the two cores (not a benchmark).",
        "",
        "## The full runs",
        "",
        "| run | kept step | kept score | privacy loss | utility loss | scorings that bettered the kept state before it | "
        "smallest patience keeping it | train s | matmul GFLOP/s |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for record in records:
        rows = record["selections"]
        kept = min(rows, key=lambda row: (row["score"], row["step"]))
        improvements, best = [], float("inf")
        for row in rows:
            if row["score"] < best:
                best = row["score"]
                improvements.append(row["step"])
        lines.append(f"| {record['name']} | {kept['step']} | {kept['score']:.5f} | {kept['privacy_loss']:.5f} | "
                     f"{kept['utility_loss']:.5f} | {', '.join(map(str, improvements))} | "
                     f"{smallest_safe_patience(rows, record['config']['attacker_refit_every'])} | {record['train_seconds']:.0f} | "
                     f"{record['matmul_gflops_float32']:.0f} |")
    lines += [
        "",
        "## Replayed patience",
        "",
        "| patience P | runs keeping the same state | worst relative score gap | mean fraction of the budget trained |",
        "|---|---|---|---|",
    ]
    for patience, entry in table.items():
        lines.append(f"| {patience} | {entry['same_state']} of {len(records)} | {entry['worst_relative_gap']:.2e} | "
                     f"{entry['mean_steps_fraction']:.2f} |")
    lines += ["", "## Where each patience stops (step stopped / step kept, * = another state than the full run's)", "",
              "| run | " + " | ".join(f"P = {p}" for p in PATIENCES) + " |", "|---|" + "---|" * len(PATIENCES)]
    for index, record in enumerate(records):
        cells = []
        for patience in PATIENCES:
            row = table[patience]["runs"][index]
            cells.append(f"{row['stop_step']} / {row['kept_step']}{'' if row['same_state'] else '*'}")
        lines.append(f"| {record['name']} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kappas", type=float, nargs="*", default=[1.5, 5.0, 10.0, 50.0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--budgets", type=float, nargs="*", default=[0.01])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--shard", default="0/1", help="i/n: train every n-th run from the i-th")
    parser.add_argument("--report", action="store_true", help="only write the report of the runs present")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    from bngp.threads import set_threads
    set_threads(args.threads)
    index, count = (int(part) for part in args.shard.split("/"))
    plan = [("preference", kappa, seed) for kappa in args.kappas for seed in args.seeds]
    plan += [("utility-budget", budget, seed) for budget in args.budgets for seed in args.seeds]
    if not args.report:
        for objective, value, seed in plan[index::count]:
            if not (args.out / "runs" / f"{run_name(objective, value, seed)}.json").is_file():
                record = train_run(objective, value, seed, args.out)
                print(f"{record['name']}: kept step {record['selected']['step']}, {record['train_seconds']:.0f} s", flush=True)
    records = [json.loads(path.read_text()) for path in sorted((args.out / "runs").glob("*.json"))]
    if records:
        args.out.mkdir(parents=True, exist_ok=True)
        table = replays(records)
        (args.out / "report.md").write_text(report(records, table))
        (args.out / "report.json").write_text(json.dumps({"records": [r["name"] for r in records],
                                                          "replays": {str(p): e for p, e in table.items()}},
                                                         indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
