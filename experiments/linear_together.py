"""Are ``linear`` and ``whitened`` as strong fitted together as apart?

``bngp evaluate`` fits the two closed-form linear attackers together when both are asked for:
on the linear attack's shadow releases, from one decomposition
(:meth:`bngp.attacks.linear.LinearAttack.fit_together_with`, :func:`bngp.ridge.fit_ridge_and_whitened`).
This experiment evaluates both attacks against Laplace defenses, once together (``linear``
first, as in ``--attacks all``) and once apart (``whitened`` first: each on its own releases),
on the same evaluation releases for each seed, and reports both AUCs, the learning curves'
sizes and the two attacks' time.

Usage: python experiments/linear_together.py [--individuals K] [--snvs Q] [--epsilons 100,300]
       [--seeds 0,1,2] [--threads T] [--out DIR]
Writes DIR/linear_together_KxQ.json and .md.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def measure(individuals: int, snvs: int, epsilons: list[float], seeds: list[int], threads: int) -> dict:
    import torch

    from bngp.attacks import LinearAttack, WhitenedAttack
    from bngp.data.independent import simulate_independent
    from bngp.data.priors import UniformSubsetPrior
    from bngp.defenses.registry import DefenseContext, parse_defense_spec
    from bngp.evaluate import evaluate_defense
    from bngp.timing import matmul_flops

    from bngp.threads import set_threads
    set_threads(threads)
    peak = matmul_flops(2048, 8, torch.float32)
    population = simulate_independent(individuals, individuals, snvs, seed=0)
    members = individuals // 2
    prior = UniformSubsetPrior(individuals, members)
    rows = []
    for epsilon in epsilons:
        defense = parse_defense_spec(f"laplace:epsilon={epsilon:g}", DefenseContext(population, members))
        for seed in seeds:
            row = {"epsilon": epsilon, "seed": seed}
            for mode, attacks in (("together", {"linear": LinearAttack(), "whitened": WhitenedAttack()}),
                                  ("apart", {"whitened": WhitenedAttack(), "linear": LinearAttack()})):
                entries = evaluate_defense(population, prior, defense, attacks, releases=50, seed=seed,
                                           n_members=members).attacks
                row[mode] = {name: {"auc": entries[name]["auc"], "releases": entries[name]["learning_curve"]["releases"]}
                             for name in ("linear", "whitened")}
                row[mode]["seconds"] = entries["linear"]["seconds"] + entries["whitened"]["seconds"]
            rows.append(row)
            print(f"[linear-together] eps {epsilon:g} seed {seed}: whitened {row['together']['whitened']['auc']:.4f} "
                  f"together, {row['apart']['whitened']['auc']:.4f} apart", flush=True)
    return {"individuals": individuals, "snvs": snvs, "threads": threads, "matmul_flops_float32": peak, "rows": rows}


def markdown(record: dict, command: str) -> str:
    lines = ["# linear and whitened, fitted together and apart", "",
             f"`{command}` ({record['threads']} thread(s); matmul {record['matmul_flops_float32'] / 1e9:.1f} GFLOP/s "
             "float32, same run).", "",
             f"K = {record['individuals']}, |Q| = {record['snvs']}, n = {record['individuals'] // 2}, Laplace defenses, "
             "50 evaluation releases per seed (the same for both modes).", "",
             "| eps | seed | linear AUC together / apart | whitened AUC together / apart | curve sizes together / apart (whitened) | s together / apart |",
             "|---|---|---|---|---|---|"]
    for row in record["rows"]:
        t, a = row["together"], row["apart"]
        lines.append(f"| {row['epsilon']:g} | {row['seed']} | {t['linear']['auc']:.4f} / {a['linear']['auc']:.4f} | "
                     f"{t['whitened']['auc']:.4f} / {a['whitened']['auc']:.4f} | {t['whitened']['releases'][-1]} / "
                     f"{a['whitened']['releases'][-1]} | {t['seconds']:.1f} / {a['seconds']:.1f} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--individuals", type=int, default=200, help="K (default: %(default)s)")
    parser.add_argument("--snvs", type=int, default=1000, help="|Q| (default: %(default)s)")
    parser.add_argument("--epsilons", default="100,300", help="Laplace epsilons (default: %(default)s)")
    parser.add_argument("--seeds", default="0,1,2", help="evaluation seeds (default: %(default)s)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default: %(default)s)")
    parser.add_argument("--out", default="experiments/results/linear_together", help="output folder (default: %(default)s)")
    args = parser.parse_args(argv)
    from bngp.io_utils import write_json, write_text

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    command = "python experiments/linear_together.py " + " ".join(argv if argv is not None else sys.argv[1:])
    record = measure(args.individuals, args.snvs, [float(e) for e in args.epsilons.split(",")],
                     [int(s) for s in args.seeds.split(",")], args.threads)
    stem = f"linear_together_{args.individuals}x{args.snvs}"
    write_json(out / f"{stem}.json", {"command": command, **record})
    write_text(out / f"{stem}.md", markdown(record, command))
    print(markdown(record, command))
    return 0


if __name__ == "__main__":
    sys.exit(main())
