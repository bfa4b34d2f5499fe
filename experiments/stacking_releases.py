"""How many simulated releases does the stacked attacker need?  The same evaluation, two stacking sets.

The stacked attacker (:mod:`bngp.attacks.stacking`) fits m + 1 logistic weights, one per base
attack, on the base attacks' scores of every (release, individual) pair of its stacking
releases; scoring those releases with every base (the L1 reconstruction's ADMM above all) is
most of its cost.  This experiment runs ``bngp evaluate --attacks all`` once per defense with
two stacked attackers pooling the same fitted bases: one on ``--large`` stacking releases (200,
the default), one on ``--small`` (50: about 40,000 pairs at K = 800), and reports both AUCs,
their difference against the AUC's standard error over the evaluation releases, and their times.

Result (2026-11-26, K = 800, |Q| = 5000; ``experiments/results/stacking_releases/``): against
Laplace eps = 100 the same AUC (0.6389 and 0.6388), against eps = 10 0.5186 and 0.5170, below the
best base attack (0.5187): with a weak signal the 14 weights need the larger set, so the default
stays at 200 releases (the smaller set saved 50 s of the stacked attacker's 80 s).

Usage: python experiments/stacking_releases.py [--individuals K] [--snvs Q] [--defenses SPEC;SPEC]
       [--large 200] [--small N] [--threads T] [--seed S] [--out DIR]
Writes DIR/stacking_releases_KxQ.json and .md.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

DEFENSES = "laplace:epsilon=10;laplace:epsilon=100"


def measure(individuals: int, snvs: int, spec: str, large: int, small: int, threads: int, seed: int) -> dict:
    import numpy as np
    import torch

    from bngp.attacks.base import attack_knowledge
    from bngp.attacks.bayesian import BayesianAttack
    from bngp.attacks.registry import get_attack, parse_attack_names
    from bngp.attacks.stacking import StackedAttack
    from bngp.data.independent import simulate_independent
    from bngp.data.priors import UniformSubsetPrior
    from bngp.defenses.registry import DefenseContext, parse_defense_spec
    from bngp.evaluate import evaluate_defense
    from bngp.timing import matmul_flops

    from bngp.threads import set_threads
    set_threads(threads)
    peak = matmul_flops(2048, 8, torch.float32)
    population = simulate_independent(individuals, individuals, snvs, seed=seed)
    members = individuals // 2
    prior = UniformSubsetPrior(individuals, members)
    defense = parse_defense_spec(spec, DefenseContext(population, members))
    names = [name for name in parse_attack_names("all", attack_knowledge(population, prior, defense, members))
             if name != "stacked"]
    attacks = {name: BayesianAttack() if name == "bayesian" else get_attack(name) for name in names}
    attacks["stacked"] = StackedAttack(n_stacking_releases=large)
    attacks[f"stacked-{small}"] = StackedAttack(n_stacking_releases=small)
    started = time.perf_counter()
    result = evaluate_defense(population, prior, defense, attacks, releases=50, seed=seed, n_members=members)
    wall = time.perf_counter() - started
    entries = result.attacks
    pair = {}
    for name, releases in (("stacked", large), (f"stacked-{small}", small)):
        pair[str(releases)] = {"auc": entries[name]["auc"], "auc_std": entries[name]["auc_std"],
                               "seconds": entries[name]["seconds"], "weights": entries[name].get("weights")}
    bases = {name: entries[name]["auc"] for name in names}
    difference = pair[str(small)]["auc"] - pair[str(large)]["auc"]
    standard_error = pair[str(large)]["auc_std"] / np.sqrt(result.releases)
    return {"defense": spec, "matmul_flops_float32": peak, "wall_seconds": wall, "stacked": pair,
            "difference": difference, "standard_error": float(standard_error),
            "best_base": max(bases, key=bases.get), "best_base_auc": max(bases.values()), "bases": bases}


def markdown(record: dict, command: str) -> str:
    large, small = record["large"], record["small"]
    lines = ["# Stacking releases: the stacked attacker on two stacking sets", "",
             f"`{command}` (seed {record['seed']}, {record['threads']} thread(s)).", "",
             f"K = {record['individuals']}, |Q| = {record['snvs']}, n = {record['individuals'] // 2}, 50 evaluation "
             f"releases; both stacked attackers pool the same fitted base attacks.", "",
             f"| defense | stacked AUC, {large} releases | stacked AUC, {small} releases | difference | standard error "
             f"of an AUC | best base (AUC) | s, {large} | s, {small} | matmul (same run) |",
             "|---|---|---|---|---|---|---|---|---|"]
    for entry in record["defenses"]:
        a, b = entry["stacked"][str(large)], entry["stacked"][str(small)]
        lines.append(f"| `{entry['defense']}` | {a['auc']:.4f} | {b['auc']:.4f} | {entry['difference']:+.4f} | "
                     f"{entry['standard_error']:.4f} | {entry['best_base']} ({entry['best_base_auc']:.4f}) | "
                     f"{a['seconds']:.0f} | {b['seconds']:.0f} | {entry['matmul_flops_float32'] / 1e9:.1f} GFLOP/s |")
    lines += ["", "Standard error: the AUC's standard deviation over the evaluation releases / sqrt(50)."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--individuals", type=int, default=800, help="K (default: %(default)s)")
    parser.add_argument("--snvs", type=int, default=5000, help="|Q| (default: %(default)s)")
    parser.add_argument("--defenses", default=DEFENSES, help="defense specs separated by ';' (default: %(default)s)")
    parser.add_argument("--large", type=int, default=200, help="stacking releases of the first (default: %(default)s)")
    parser.add_argument("--small", type=int, default=50, help="of the second (default: %(default)s)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default: %(default)s)")
    parser.add_argument("--seed", type=int, default=0, help="(default: %(default)s)")
    parser.add_argument("--out", default="experiments/results/stacking_releases", help="output folder (default: %(default)s)")
    args = parser.parse_args(argv)
    from bngp.io_utils import write_json, write_text

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    command = "python experiments/stacking_releases.py " + " ".join(argv if argv is not None else sys.argv[1:])
    small = args.small
    defenses = [measure(args.individuals, args.snvs, spec, args.large, small, args.threads, args.seed)
                for spec in args.defenses.split(";") if spec]
    record = {"command": command, "individuals": args.individuals, "snvs": args.snvs, "seed": args.seed,
              "threads": args.threads, "large": args.large, "small": small, "defenses": defenses}
    stem = f"stacking_releases_{args.individuals}x{args.snvs}" + (f"_{args.defenses.split(';')[0].replace(':', '_').replace('=', '')}"
                                                                   if ";" not in args.defenses else "")
    write_json(out / f"{stem}.json", record)
    write_text(out / f"{stem}.md", markdown(record, command))
    print(markdown(record, command))
    return 0


if __name__ == "__main__":
    sys.exit(main())
