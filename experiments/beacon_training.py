"""BNGP training at beacon scale on one machine: 2,500 individuals x 100,000 SNVs.

Runs the product's own commands, each in its own process, so that each one's wall time and peak
resident memory (``wait4``'s ``ru_maxrss``) are its own (:func:`beacon_scale.run_stage`):

1. ``bngp simulate --packed`` (skipped when ``--population`` is given): stdpopsim CEU chr10 from
   10 Mb, every segregating biallelic site, the first |Q| of them;
2. ``bngp train --attacker per-individual --individual-batch S``: the game with the
   per-individual attacker H(x, d_k) (its weights do not grow with K) scoring a random subset of
   S individuals per update, and the defender G(b, r) with its bottleneck capped at the paper's
   500 (:func:`bngp.defenses.network.defender_widths`); refits, defender selection and the
   held-out evaluations score all K;
3. ``bngp evaluate --defense run:RUN`` with the attacks that scale to |Q| = 10^5 (LRT, adaptive
   LRT, score; the per-individual attack, fitted to convergence, scores all K for each of its
   thousands of Adam steps, about 30 s a step here, so it is left out), and its release decision
   (the converged linear attack on the defender and on the mechanisms at its loss, whose K x |Q|
   float64 matrices dominate the stage's memory; ``train`` runs with ``--no-decision`` so that the
   decision is read once);
4. the outside ridge attack (``outside_ridge.py``, from the release to the memberships, its
   penalty chosen on validation releases over the whole spectrum; from the n x n Gram matrix
   since |Q| > n) on ``--shadow`` shadow releases of the trained defender.

What the memory is made of (float32): the genotype matrix K |Q| (1 GB, shared by f(D) and H);
G's weights with Adam's moments (79 M weights at K = 2,500, |Q| = 10^5: about 1 GB); and the
per-update activations of H, which grow as batch x |Q| x (hidden width), not with K.  The float32
matmul throughput of this machine is measured in the same run (reference for the wall times).

    OMP_NUM_THREADS=1 python experiments/beacon_training.py --population POP.npz [--steps 60]
        [--batch-size 32] [--individual-batch 256] [--kappa 1.5] [--work DIR] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
from pathlib import Path

from beacon_scale import run_stage

from bngp.data.npz import load_population
from bngp.io_utils import write_json, write_text
from bngp.timing import matmul_flops

RESULTS = Path(__file__).resolve().parent / "results" / "beacon_scale" / "training"
ATTACKS = "lrt,adaptive-lrt,score"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--population", type=Path, help="a K x |Q| population file (default: simulate one into --work)")
    parser.add_argument("--individuals", type=int, default=2500, help="K, when simulating")
    parser.add_argument("--reference", type=int, default=500, help="reference panel, when simulating")
    parser.add_argument("--snvs", type=int, default=100_000, help="|Q|, when simulating")
    parser.add_argument("--members", type=int, default=1250)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--individual-batch", type=int, default=256)
    parser.add_argument("--kappa", type=float, default=1.5)
    parser.add_argument("--refit-every", type=int, default=20)
    parser.add_argument("--eval-every", type=int, default=20)
    parser.add_argument("--eval-batch", type=int, default=128)
    parser.add_argument("--releases", type=int, default=100, help="evaluation releases (and the outside ridge's test releases)")
    parser.add_argument("--shadow", type=int, default=2000, help="shadow releases of the outside ridge attack")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--work", type=Path, default=Path("/tmp/beacon_training"), help="large files (population, run)")
    parser.add_argument("--out", type=Path, help="results directory (default experiments/results/beacon_scale/training/kappaK)")
    args = parser.parse_args(argv)
    args.out = args.out or RESULTS / f"kappa{args.kappa:g}"
    args.work.mkdir(parents=True, exist_ok=True)
    args.out.mkdir(parents=True, exist_ok=True)
    bngp = [sys.executable, "-m", "bngp.cli"]
    threads = os.environ.get("OMP_NUM_THREADS", "1")
    result = {
        "individuals": args.individuals, "reference": args.reference, "snvs": args.snvs, "members": args.members,
        "steps": args.steps, "batch_size": args.batch_size, "individual_batch": args.individual_batch,
        "kappa": args.kappa, "refit_every": args.refit_every, "eval_every": args.eval_every,
        "eval_batch": args.eval_batch, "releases": args.releases, "seed": args.seed,
        "matmul_flops_float32": matmul_flops(), "threads": threads, "load_average_at_start": os.getloadavg()[0],
        "machine": platform.platform(), "cpu_count": os.cpu_count(), "stages": [],
    }
    population = args.population
    if population is None:
        population = args.work / "population.npz"
        result["stages"].append(run_stage("simulate", bngp + [
            "simulate", "--individuals", str(args.individuals), "--reference", str(args.reference),
            "--snvs", str(args.snvs), "--min-maf", "0", "--max-r2", "1", "--packed", "--seed", str(args.seed),
            "--out", str(population)], args.work / "simulate.log"))
    result["population"] = str(population)
    result["individuals"], result["snvs"] = (int(n) for n in load_population(population).genotypes.shape)
    run = args.work / "run"
    result["stages"].append(run_stage("train", bngp + [
        "train", "--population", str(population), "--members", str(args.members), "--attacker", "per-individual",
        "--individual-batch", str(args.individual_batch), "--batch-size", str(args.batch_size),
        "--steps", str(args.steps), "--kappa", str(args.kappa), "--refit-every", str(args.refit_every),
        "--eval-every", str(args.eval_every), "--eval-batch", str(args.eval_batch), "--fresh-check-steps", "0",
        "--seed", str(args.seed), "--threads", threads, "--quiet", "--force", "--no-decision", "--out", str(run)],
        args.work / "train.log"))
    evaluation = args.out / "evaluation.json"
    result["stages"].append(run_stage("evaluate", bngp + [
        "evaluate", "--population", str(population), "--members", str(args.members), "--defense", f"run:{run}",
        "--attacks", ATTACKS, "--releases", str(args.releases), "--seed", str(args.seed), "--threads", threads,
        "--quiet", "--out", str(evaluation)], args.work / "evaluate.log"))
    outside = args.out / "outside.json"
    result["stages"].append(run_stage("outside ridge", [
        sys.executable, str(Path(__file__).resolve().parent / "outside_ridge.py"), "--population", str(population),
        "--members", str(args.members), "--defense", f"run:{run}", "--shadow", str(args.shadow), "--validation", "300",
        "--test", str(args.releases), "--seed", str(args.seed), "--out", str(outside)], args.work / "outside.log"))
    summary = json.loads((run / "summary.json").read_text())
    result["training"] = {
        "timings": summary.get("timings"), "selected": summary.get("selected"),
        "history": summary.get("history"), "defender": json.loads((run / "config.json").read_text())["defender"],
    }
    report = json.loads(evaluation.read_text())
    attacks = report["attacks"]
    result["utility"] = report["utility"]
    result["decision"] = report.get("decision")
    result["evaluation"] = {name: {"auc": entry["auc"], "auc_std": entry.get("auc_std")} for name, entry in attacks.items()}
    ridge = json.loads(outside.read_text())
    result["outside_ridge"] = {key: ridge[key] for key in ("auc", "test_auc_std", "penalty", "validation_auc", "shadow_releases")}
    write_json(args.out / "results.json", result)
    write_text(args.out / "report.md", _report(result))
    print(json.dumps({s["stage"]: [round(s["seconds"], 1), round(s["peak_rss_gib"], 2)] for s in result["stages"]}))
    return 0


def _report(r: dict) -> str:
    flops = r["matmul_flops_float32"]
    lines = [
        f"# BNGP training at {r['individuals']:,} individuals x {r['snvs']:,} SNVs",
        "",
        f"`bngp train --attacker per-individual --individual-batch {r['individual_batch']}`, "
        f"{r['steps']} defender steps of batch {r['batch_size']}, kappa {r['kappa']:g}, {r['members']:,} members, "
        f"refits every {r['refit_every']} steps; then `bngp evaluate --defense run:RUN` on {r['releases']} releases. "
        f"Each stage in its own process on {r['threads']} thread(s); float32 matmul measured in this run: "
        f"{flops / 1e9:.1f} GFLOP/s; load average at the start {r['load_average_at_start']:.2f} "
        f"on {r['cpu_count']} cores. Seed {r['seed']}.",
        "",
        "| stage | wall (s) | wall x measured matmul peak (TFLOP) | peak memory (GiB) |",
        "|---|---|---|---|",
    ]
    for s in r["stages"]:
        lines.append(f"| {s['stage']} | {s['seconds']:,.0f} | {s['seconds'] * flops / 1e12:,.1f} | {s['peak_rss_gib']:.2f} |")
    widths = r["training"]["defender"]["widths"]
    lines += ["", f"Defender widths {widths} (bottleneck capped at the paper's 500).", "",
              "Training time by phase (s):", ""]
    for phase, entry in (r["training"]["timings"] or {}).items():
        lines.append(f"- {phase}: {entry['seconds']:,.0f} over {entry['calls']} calls")
    lines += ["", "| attack | AUC (mean over releases) |", "|---|---|"]
    for name, entry in r["evaluation"].items():
        lines.append(f"| {name} | {entry['auc']:.3f} |")
    ridge = r["outside_ridge"]
    name, best = max(r["evaluation"].items(), key=lambda item: item[1]["auc"])
    strongest = best["auc"]
    # 2 standard errors of the difference, each AUC's from its spread over the (independent) test releases
    error = ((best["auc_std"] or 0.0) ** 2 + ridge["test_auc_std"] ** 2) ** 0.5 / max(1, r["releases"]) ** 0.5
    holds = strongest >= ridge["auc"] - 2 * error
    lines += [f"| outside ridge ({ridge['shadow_releases']:,} shadow releases, penalty {ridge['penalty']:g}) | "
              f"{ridge['auc']:.3f} |", ""]
    utility = r["utility"]
    lines.append(f"Utility loss {utility['utility_loss']:.5f} (the data-independent release f(theta): "
                 f"{utility['data_independent_utility_loss']:.5f}); signal retention {utility['signal_retention']:.3f}.")
    if utility["signal_retention"] == 0.0:
        lines.append("The kept defender releases f(theta) itself, which does not depend on the dataset: every attack's "
                     f"AUC is 0.5 by construction, and `{name}` ({strongest:.3f}, s.e. {error:.4f} with the outside's) and "
                     f"the outside ridge ({ridge['auc']:.3f}) read chance.")
    else:
        lines.append(f"The product's strongest attack (`{name}`, {strongest:.3f}) is "
                     f"{'not weaker than' if holds else 'WEAKER than'} the outside ridge (2 standard errors of the "
                     f"difference: {2 * error:.4f}).")
    decision = r.get("decision")
    if decision:
        strongest_linear = decision["strongest"]
        lines += ["", f"Release decision (`bngp evaluate`, part of its stage above): **{decision['sentence']}** "
                      f"(strongest reading: `{strongest_linear['name']}`, AUC {strongest_linear['auc']:.3f})."]
    history = r["training"]["history"] or []
    if history:
        lines += ["", "| step | held-out AUC (in-game attacker) | held-out utility loss |", "|---|---|---|"]
        for row in history:
            lines.append(f"| {row['step']} | {row['heldout_auc']:.3f} | {row['heldout_utility_loss']:.4f} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    raise SystemExit(main())
