"""Privacy numbers that hold: the product's strongest attack against an outside ridge attack, and the
BNGP defender against Laplace noise of the same utility loss, over several seeds.

For each seed s (population and training): simulate K = 200 CEU individuals (+ 200 reference)
at |Q| = 1000 SNVs with seed s, train the BNGP defender (N = 100, kappa = 1.5, seed s, default
GameConfig unless ``--steps``), then for the defender and for Laplace matched to its utility
loss (``matched-laplace:run=RUN``):

- ``bngp evaluate --attacks all`` (every attack of the registry, the converged linear and
  whitened attackers and the stacked attacker included), 50 releases;
- the outside ridge attack of ``experiments/outside_ridge.py`` (numpy/scikit-learn only, no
  product code) on 8,000 shadow releases, penalty chosen on 500 validation releases over
  1e-10..1e2 of the largest eigenvalue, tested on 200 releases.

The report gives, per seed, utility loss (and the data-independent release's), signal
retention, strongest product attack, outside ridge AUC, and the two acceptance checks: product
strongest >= outside ridge - 0.02 (median and worst gap), and BNGP strongest <= matched Laplace
strongest - 0.05.  Seeds already in ``--out`` are not recomputed.

Usage: python experiments/privacy_holds.py [--seeds 0 1 2 3 4] [--kappa 1.5 | --budget B] [--batch-size N]
       [--steps S] [--threads T] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from outside_ridge import attack_defense

K, N, SNVS, KAPPA = 200, 100, 1000, 1.5
SHADOW, VALIDATION, TEST = 8000, 500, 200
RESULTS = Path(__file__).resolve().parent / "results" / "privacy_holds"


def _evaluate(population, prior, defense, seed: int) -> dict:
    from bngp.evaluate import evaluate_defense

    started = time.perf_counter()
    result = evaluate_defense(population, prior, defense, "all", releases=50, seed=seed, n_members=N)
    payload = result.to_dict()
    outside = attack_defense(population, prior, defense, shadow=SHADOW, validation=VALIDATION, test=TEST, seed=seed)
    return {
        "utility": payload["utility"],
        "attacks": {name: {"auc": entry["auc"], "auc_std": entry["auc_std"], **({"learning_curve": entry["learning_curve"]} if "learning_curve" in entry else {})}
                    for name, entry in payload["attacks"].items()},
        "strongest": payload["strongest_attack"],
        "outside_ridge": {key: outside[key] for key in ("auc", "penalty", "validation_auc", "shadow_releases")},
        "seconds": time.perf_counter() - started,
    }


def run_seed(seed: int, steps: int | None, out: Path, kappa: float = KAPPA, budget: float | None = None,
             batch_size: int | None = None) -> dict:
    from bngp import GameConfig, Game, UniformSubsetPrior, simulate_genome
    from bngp.game import SUMMARY_FILE, TrainingSummary
    from bngp.game.config import flat_record
    from bngp.errors import BNGPError
    from bngp.run_dir import verify_run
    from bngp.defenses import load_run_defense
    from bngp.defenses.registry import DefenseContext, parse_defense_spec

    started = time.perf_counter()
    population = simulate_genome(K, K, SNVS, seed=seed)
    prior = UniformSubsetPrior(K, N)
    run_dir = out / f"run_seed{seed}"
    settings = {"steps": steps, "batch_size": batch_size}
    config = GameConfig.from_flat({"kappa": kappa, "seed": seed, **{name: value for name, value in settings.items() if value},
                                   **({"objective": "utility-budget", "budget": budget} if budget is not None else {})})
    train_started = time.perf_counter()
    try:  # a complete run of this configuration (from an interrupted invocation) is reused
        reused = flat_record(verify_run(run_dir)["config"]) == json.loads(json.dumps(config.flat()))
    except BNGPError:
        reused = False
    if reused:
        summary = TrainingSummary.load(run_dir / SUMMARY_FILE)
    else:
        summary = Game(population, prior, config).train(run_dir, force=True, progress=False)
    train_seconds = time.perf_counter() - train_started
    bngp = _evaluate(population, prior, load_run_defense(run_dir), seed)
    laplace = _evaluate(population, prior, parse_defense_spec(f"matched-laplace:run={run_dir}", DefenseContext(population, N)), seed)
    record = {
        "seed": seed,
        "config": config.flat(),
        "train_seconds": None if reused else train_seconds,
        "selected": summary.selected,
        "exploitability": None if summary.exploitability is None else summary.exploitability.to_dict(),
        "bngp": bngp,
        "matched_laplace": laplace,
        "wall_seconds": time.perf_counter() - started,
    }
    (out / f"seed{seed}.json").write_text(json.dumps(record, indent=2) + "\n")
    return record


def report(records: list[dict]) -> str:
    config = records[0]["config"]
    objective = (f"utility budget {config['budget']:g}" if config["objective"] == "utility-budget"
                 else f"kappa = {config['kappa']:g}")
    lines = [
        f"# Privacy numbers that hold (K = 200, N = 100, |Q| = 1000, {objective}, batches of {config['batch_size']})",
        "",
        "Product = strongest of `bngp evaluate --attacks all` (50 releases); outside = ridge from scratch "
        f"(`experiments/outside_ridge.py`, {SHADOW} shadow releases, penalty by validation AUC over 1e-10..1e2 of the "
        "largest eigenvalue). Utility loss = mean |x - f(D)|; the data-independent release f(theta) has AUC 0.5 "
        "against every attack. Retention = corr(x - f(theta), f(D) - f(theta)).",
        "",
        "| seed | defense | utility loss | data-independent loss | retention | product strongest (AUC) | outside ridge | product - outside |",
        "|---|---|---|---|---|---|---|---|",
    ]
    gaps, margins = [], []
    for record in records:
        for key, label in (("bngp", "BNGP"), ("matched_laplace", "matched Laplace")):
            entry = record[key]
            gap = entry["strongest"]["auc"] - entry["outside_ridge"]["auc"]
            gaps.append(gap)
            utility = entry["utility"]
            lines.append(
                f"| {record['seed']} | {label} | {utility['utility_loss']:.4f} | {utility['data_independent_utility_loss']:.4f} | "
                f"{utility['signal_retention']:.3f} | {entry['strongest']['name']} ({entry['strongest']['auc']:.3f}) | "
                f"{entry['outside_ridge']['auc']:.3f} | {gap:+.3f} |"
            )
        margins.append(record["matched_laplace"]["strongest"]["auc"] - record["bngp"]["strongest"]["auc"])
    lines += [
        "",
        f"Product strongest minus outside ridge over {len(gaps)} evaluations: median {np.median(gaps):+.3f}, "
        f"worst {min(gaps):+.3f} (acceptance: never below -0.02: {'holds' if min(gaps) >= -0.02 else 'FAILS'}).",
        "",
        "Matched Laplace strongest minus BNGP strongest, by seed: " + ", ".join(f"{m:+.3f}" for m in margins)
        + f" (acceptance: >= 0.05 on at least 4 of 5: {sum(m >= 0.05 for m in margins)} of {len(margins)}).",
        "",
    ]
    for record in records:
        utility = record["bngp"]["utility"]
        lines.append(f"- Seed {record['seed']}: the BNGP defender is {utility['verdict']} "
                     f"(loss {utility['utility_loss']:.4f} vs {utility['data_independent_utility_loss']:.4f}); "
                     f"training {record['train_seconds'] or float('nan'):.0f} s, seed total {record['wall_seconds']:.0f} s.")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--steps", type=int, default=None)
    parser.add_argument("--kappa", type=float, default=KAPPA)
    parser.add_argument("--budget", type=float, default=None,
                        help="train under a utility budget (mean |x - f(D)| <= BUDGET) instead of the trade-off kappa")
    parser.add_argument("--batch-size", type=int, default=None, help="GameConfig.batch_size (default: its default)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--report-only", action="store_true")
    args = parser.parse_args(argv)
    from bngp.threads import set_threads
    set_threads(args.threads)
    args.out.mkdir(parents=True, exist_ok=True)
    if not args.report_only:
        for seed in args.seeds:
            if not (args.out / f"seed{seed}.json").is_file():
                record = run_seed(seed, args.steps, args.out, args.kappa, args.budget, args.batch_size)
                print(json.dumps({"seed": seed, "bngp": record["bngp"]["strongest"], "outside": record["bngp"]["outside_ridge"]["auc"]}), flush=True)
    records = [json.loads(path.read_text()) for path in sorted(args.out.glob("seed*.json"))]
    if records:
        (args.out / "report.md").write_text(report(records))
        print((args.out / "report.md").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
