"""Does the composed game's pooled in-game attacker train a defender as private as the whole-release one?

``GameConfig.pool_copies`` (default since 2026-11-26) lets the in-game attacker of a composed game
(App. L.6: m fixed Gaussian mechanisms, then the learned one) read the fixed copies pooled by their
inverse-variance mean next to the learned block, and fits its refitted head on the copies pooled
by their least-squares reconstruction of f(D).  This runner trains, on the same population and
seed, one defender with the pooled attacker and one with the whole-release attacker
(``pool_copies=False``, the earlier behaviour), and attacks each frozen defender with the same
converged panel on the whole release: ``bayesian``, ``linear``, ``whitened``, ``stacked`` and the
outside ridge of ``experiments/outside_ridge.py`` (numpy and scikit-learn only; 4,000 shadow
releases).  It reports the training time, the kept state, the utility loss and every AUC, as
JSON and Markdown, with the float32 matmul throughput measured in the same run.  Each defender's
record is kept in ``--out`` as it is done, and its training resumes from its checkpoint, so an
interrupted run continues where it stopped.

The composition is Table 5's construction (``experiments/benchmarks/game_phases.py``,
:func:`composed_settings`: four fixed Gaussian mechanisms N(0, C / eps^2), eps = 0.3 each, and the
learned one under the BGBP constraint DPH^{5 eps}) on a simulated CEU genome of K individuals.

Usage: python experiments/composed_pooling.py [--individuals 200] [--snvs 1000] [--seeds 0] [--threads 1] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import replace
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE / "benchmarks"))

from _measure import matmul_peak_flops, peak_memory_gib  # noqa: E402
from game_phases import composed_settings  # noqa: E402
from outside_ridge import attack_defense  # noqa: E402

RESULTS = HERE / "results" / "composed_pooling"
ATTACKS = "bayesian,linear,whitened,stacked"
KAPPA, MECHANISMS, RELEASES, SHADOW = 1.5, 5, 50, 4000


def run(individuals: int, snvs: int, seed: int, out: Path) -> dict:
    """Train the pooled and the whole-release defenders of one seed and attack both."""
    from bngp import Game, GameConfig, UniformSubsetPrior, evaluate_defense, simulate_genome
    from bngp.defenses import load_run_defense
    from bngp.game import train_once

    population = simulate_genome(individuals, individuals, snvs, seed=seed)
    members = individuals // 2
    prior = UniformSubsetPrior(individuals, members)
    base = GameConfig(kappa=KAPPA, seed=seed, **composed_settings(population, members, MECHANISMS))
    record: dict = {"individuals": individuals, "snvs": snvs, "members": members, "seed": seed,
                    "fixed_gaussian_sigmas": list(base.fixed_gaussian_sigmas), "dp_epsilon": base.dp_epsilon}
    for label, pool in (("pooled", True), ("whole", False)):
        run_dir = out / "runs" / f"seed{seed}-{label}"
        done = out / f"seed{seed}-{label}.json"  # one defender's record, kept so that a rerun resumes
        if done.exists():
            record[label] = json.loads(done.read_text())
            continue
        game = Game(population, prior, replace(base, pool_copies=pool))
        summary, _ = train_once(game, run_dir)  # a finished run is reused, an interrupted one resumed
        # the phases the trainer timed (a reused or resumed run's own time, not this process's)
        train_seconds = float(sum(phase["seconds"] for phase in (summary.timings or {}).values()))
        defense = load_run_defense(run_dir)
        started = time.perf_counter()
        result = evaluate_defense(population, prior, defense, ATTACKS, releases=RELEASES, seed=seed, n_members=members)
        outside = attack_defense(population, prior, defense, shadow=SHADOW, validation=500, test=200, seed=seed)
        payload = result.to_dict()
        record[label] = {
            "attacker_input": game.attacker_spec.n_outputs,
            "training_seconds": train_seconds,
            "evaluation_seconds": time.perf_counter() - started,
            "selected_step": summary.selected["step"] if summary.selected else None,
            "in_game_auc": summary.in_game_auc,
            "fresh_attacker_auc": summary.fresh_attacker_auc,
            "utility_loss": payload["utility_loss"],
            "attacks": {name: entry["auc"] for name, entry in payload["attacks"].items()},
            "strongest": payload["strongest_attack"]["name"],
            "outside_ridge": outside["auc"],
        }
        done.write_text(json.dumps(record[label], indent=2) + "\n")
    return record


def markdown(report: dict) -> str:
    lines = [
        "# The composed game's pooled in-game attacker against the whole-release one",
        "",
        f"`{report['command']}`: K = {report['individuals']} simulated CEU individuals (+ as many reference), "
        f"|Q| = {report['snvs']}, N = K / 2, kappa {KAPPA}, Table 5's composition at eps = 0.3 per mechanism "
        f"({MECHANISMS - 1} fixed Gaussian mechanisms and the learned one under DPH^{MECHANISMS * 0.3:g}), default "
        f"`GameConfig` otherwise; {report['threads']} thread(s); float32 matmul {report['matmul_gflops_float32']:.1f} GFLOP/s measured in "
        f"the same run, peak memory {report['peak_memory_gib']:.2f} GiB.  Each frozen defender is attacked on the whole "
        f"release by `{ATTACKS}` ({RELEASES} releases) and by the outside ridge ({SHADOW:,} shadow releases).",
        "",
        "| seed | in-game attacker | its input | training (s) | kept step | utility loss | bayesian | linear | whitened "
        "| stacked | strongest | outside ridge |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for record in report["seeds"]:
        for label in ("pooled", "whole"):
            row = record[label]
            attacks = row["attacks"]
            lines.append(
                f"| {record['seed']} | {label} | {row['attacker_input']:,} | {row['training_seconds']:.0f} | "
                f"{row['selected_step']} | {row['utility_loss']:.4f} | "
                + " | ".join(f"{attacks[name]:.3f}" for name in ("bayesian", "linear", "whitened", "stacked"))
                + f" | {row['strongest']} ({attacks[row['strongest']]:.3f}) | {row['outside_ridge']:.3f} |"
            )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--individuals", type=int, default=200)
    parser.add_argument("--snvs", type=int, default=1000)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    if args.individuals < 4 or args.snvs < 2 or args.threads < 1:
        parser.error("--individuals >= 4, --snvs >= 2 and --threads >= 1")
    from bngp.threads import set_threads
    set_threads(args.threads)
    args.out.mkdir(parents=True, exist_ok=True)
    peak = matmul_peak_flops()
    report = {
        "command": "python experiments/composed_pooling.py " + " ".join(sys.argv[1:] if argv is None else argv),
        "individuals": args.individuals, "snvs": args.snvs, "threads": args.threads,
        "seeds": [run(args.individuals, args.snvs, seed, args.out) for seed in args.seeds],
    }
    report.update(matmul_gflops_float32=peak / 1e9, peak_memory_gib=peak_memory_gib())
    (args.out / "report.json").write_text(json.dumps(report, indent=2) + "\n")
    (args.out / "report.md").write_text(markdown(report))
    print(markdown(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
