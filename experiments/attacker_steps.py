"""Does the Bayesian attacker need its 1,500 steps?  Its training curve against fixed defenses.

The evaluation's Bayesian attacker (arXiv:2410.07414, section 3.2) trains ``steps`` Adam steps
from the converged ridge fit of the ``linear`` attack and keeps the state of least validation
cross-entropy on 500 held-out simulated releases, measured every 100 steps
(:func:`bngp.attacks.training.train_attacker`).  At the paper's scale it is the evaluation's
largest cost (about 45% of ``bngp evaluate --attacks all``), so this experiment records, per
defense, the validation AUC and cross-entropy at every validation, the step kept, the AUC on the
evaluation's releases and the wall time; then, for each patience P, where early stopping
("stop after P validations in a row that did not lower the loss") would have ended the run,
and whether it would have kept the same state (then every score, hence every AUC, is the same).

Usage: python experiments/attacker_steps.py [--individuals K] [--snvs Q] [--defenses SPEC;SPEC]
       [--patience 2,3,4,5] [--threads T] [--seed S] [--out DIR]
Writes DIR/attacker_steps_KxQ.json and .md.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path

DEFENSES = "laplace:epsilon=10;laplace:epsilon=300;none"


def early_stop(steps: Sequence[int], losses: Sequence[float], patience: int) -> tuple[int, int]:
    """(the step at which early stopping with ``patience`` ends the run, the step it keeps):
    the rule of :func:`bngp.attacks.training.optimise_with_validation` with tolerance 0, replayed
    on a recorded curve (the run ends at its last step when the rule never fires)."""
    best_loss, best_step, reference, without_gain = losses[0], steps[0], losses[0], 0
    for step, loss in zip(steps[1:], losses[1:]):
        if loss < best_loss:
            best_loss, best_step = loss, step
        if loss < reference:
            reference, without_gain = loss, 0
        else:
            without_gain += 1
        if without_gain >= patience:
            return step, best_step
    return steps[-1], best_step


def measure(individuals: int, snvs: int, specs: Sequence[str], patiences: Sequence[int], threads: int, seed: int) -> dict:
    import torch

    from bngp.attacks.bayesian import BayesianAttack
    from bngp.attacks.linear import LinearAttack
    from bngp.attacks.training import AttackerTrainingConfig
    from bngp.data.independent import simulate_independent
    from bngp.data.priors import UniformSubsetPrior
    from bngp.defenses.registry import DefenseContext, parse_defense_spec
    from bngp.evaluate import evaluate_defense
    from bngp.timing import matmul_flops, peak_rss_bytes

    from bngp.threads import set_threads
    set_threads(threads)
    peak = matmul_flops(2048, 8, torch.float32)
    population = simulate_independent(individuals, individuals, snvs, seed=seed)
    members = individuals // 2
    prior = UniformSubsetPrior(individuals, members)
    defenses = []
    for spec in specs:
        defense = parse_defense_spec(spec, DefenseContext(population, members))
        bayesian = BayesianAttack(AttackerTrainingConfig(patience=None))  # every step: the curve to replay
        started = time.perf_counter()
        result = evaluate_defense(population, prior, defense, {"linear": LinearAttack(), "bayesian": bayesian},
                                  releases=50, seed=seed, n_members=members)
        wall = time.perf_counter() - started
        curve = result.attacks["bayesian"].training_curve
        stops = {}
        for patience in patiences:
            stop, kept = early_stop(curve["steps"], curve["cross_entropy"], patience)
            stops[str(patience)] = {"stop_step": stop, "kept_step": kept, "same_state": kept == curve["best_step"],
                                    "steps_saved": curve["steps"][-1] - stop}
        defenses.append({
            "defense": spec,
            "utility_loss": result.utility_loss,
            "linear_auc": result.attacks["linear"].auc,
            "bayesian_auc": result.attacks["bayesian"].auc,
            "linear_seconds": result.attacks["linear"].seconds,
            "bayesian_seconds": result.attacks["bayesian"].seconds,
            "wall_seconds": wall,
            "training_curve": curve,
            "early_stopping": stops,
        })
        print(f"[attacker-steps] {spec}: kept step {curve['best_step']} of {curve['steps'][-1]}, bayesian AUC "
              f"{result.attacks['bayesian'].auc:.4f} ({result.attacks['bayesian'].seconds:.0f} s)", flush=True)
    return {"individuals": individuals, "snvs": snvs, "members": members, "seed": seed, "threads": threads,
            "matmul_flops_float32": peak, "peak_rss_gib": peak_rss_bytes() / 2**30, "defenses": defenses}


def markdown(record: dict, command: str) -> str:
    from bngp.report import training_curve_text

    patiences = list(record["defenses"][0]["early_stopping"]) if record["defenses"] else []
    lines = ["# The Bayesian attacker's training curve against fixed defenses", "",
             f"`{command}` (seed {record['seed']}, {record['threads']} thread(s)).", "",
             f"K = {record['individuals']}, |Q| = {record['snvs']}, n = {record['members']}, 50 evaluation releases; "
             f"matmul {record['matmul_flops_float32'] / 1e9:.1f} GFLOP/s (float32) measured in the same process; "
             f"peak memory {record['peak_rss_gib']:.2f} GiB.", "",
             "| defense | utility loss | linear AUC | Bayesian AUC | Bayesian s | kept step | "
             + " | ".join(f"patience {p}: stop / same state" for p in patiences) + " |",
             "|---" * (6 + len(patiences)) + "|"]
    for entry in record["defenses"]:
        stops = " | ".join(f"{s['stop_step']} / {'yes' if s['same_state'] else 'NO'}" for s in entry["early_stopping"].values())
        lines.append(f"| `{entry['defense']}` | {entry['utility_loss']:.5f} | {entry['linear_auc']:.4f} | "
                     f"{entry['bayesian_auc']:.4f} | {entry['bayesian_seconds']:.0f} | {entry['training_curve']['best_step']} | "
                     f"{stops} |")
    lines += ["", "Same state = early stopping keeps the state the full run keeps, so every score and AUC is unchanged.",
              "", "Training curves:"]
    lines += [f"- `{entry['defense']}`: {training_curve_text(entry['training_curve'])}" for entry in record["defenses"]]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--individuals", type=int, default=800, help="K (default: %(default)s)")
    parser.add_argument("--snvs", type=int, default=5000, help="|Q| (default: %(default)s)")
    parser.add_argument("--defenses", default=DEFENSES, help="defense specs separated by ';' (default: %(default)s)")
    parser.add_argument("--patience", default="2,3,4,5", help="patiences to replay (default: %(default)s)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default: %(default)s)")
    parser.add_argument("--seed", type=int, default=0, help="(default: %(default)s)")
    parser.add_argument("--out", default="experiments/results/attacker_steps", help="output folder (default: %(default)s)")
    args = parser.parse_args(argv)
    from bngp.io_utils import write_json, write_text

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    command = "python experiments/attacker_steps.py " + " ".join(argv if argv is not None else sys.argv[1:])
    record = measure(args.individuals, args.snvs, [s for s in args.defenses.split(";") if s],
                     [int(p) for p in args.patience.split(",")], args.threads, args.seed)
    stem = f"attacker_steps_{args.individuals}x{args.snvs}"
    write_json(out / f"{stem}.json", {"command": command, **record})
    write_text(out / f"{stem}.md", markdown(record, command))
    print(markdown(record, command))
    return 0


if __name__ == "__main__":
    sys.exit(main())
