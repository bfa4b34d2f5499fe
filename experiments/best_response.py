"""The defender's gradient through the attacker's best linear response (:mod:`bngp.game.response`), on held-out
genomes at a utility budget: does the descent reach a state the converged attack reads below the best reference?

For each population and budget: the references ranked by the converged linear attack
(:func:`bngp.references.rank_references`), then for each objective (mean AUC, TPR at 1% FPR, the most exposed
candidate's AUC) the descent from the best reference (from the row-space optimum where the best reference is not
shaped) and the never-worse choice (:func:`bngp.game.response.choose_response`: the same converged attack, the
margin with its standard error).  A control: the descent from Gaussian noise flat in the row space, which the
ranking reads far higher, shows what the gradient finds from a poor start.  Every reading of the model is the
linear-Gaussian decoder's, for an attacker that knows the law; every AUC in the tables is the converged linear
attack's (box decoding included) on 500 test releases.

Usage: OMP_NUM_THREADS=1 python experiments/best_response.py --population POP.npz --members N --label LABEL
    [--fractions 0.875 0.75] [--steps 200] [--seed 0] --out experiments/results/best_response/LABEL
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

from bngp.data.npz import load_population
from bngp.defenses.budget import BudgetSetting, row_space_optimal_at_budget, shaped_at_budget
from bngp.defenses.shaped import ShapedNoiseDefense
from bngp.game import RESPONSE_OBJECTIVES, BudgetSurface, choose_response, respond
from bngp.references import rank_references
from bngp.rng import spawn_seeds


def cell(population, members: int, fraction: float, steps: int, seed: int) -> dict:
    started = time.perf_counter()
    setting = BudgetSetting.of(population, members)
    ranking_seed, choice_seed = spawn_seeds(seed, 2)
    ranking = rank_references(population, members, f"{fraction:g}x", ranking_seed, setting=setting)
    best = ranking.best_score
    origin = ranking.best if isinstance(ranking.best, ShapedNoiseDefense) else \
        row_space_optimal_at_budget(setting, ranking.budget)
    record = {"fraction": fraction, "budget": ranking.budget.value, "best_reference": best.to_dict(),
              "origin": origin.label, "ranking_seconds": time.perf_counter() - started, "runs": []}
    print(f"[{fraction:g}] best reference {best.label}: AUC {best.auc:.4f} ({record['ranking_seconds']:.0f} s)",
          flush=True)
    starts = [(objective, origin) for objective in RESPONSE_OBJECTIVES]
    starts.append(("mean-auc", shaped_at_budget(setting, ranking.budget, 0.0, "flat")))  # the control
    for objective, start in starts:
        began = time.perf_counter()
        surface = BudgetSurface.on_setting(start, setting, ranking.budget.value)
        result = respond(start, surface, objective, steps, rate=0.02 if start is origin else 0.05)
        choice = choose_response(ranking.best, result, population, members, choice_seed)
        run = {"objective": objective, "start": start.label, "control": start is not origin,
               **{key: value for key, value in result.to_dict().items() if key != "mechanism"},
               "delivered_loss": setting.loss(result.defense), "choice": choice.to_dict(),
               "seconds": time.perf_counter() - began}
        record["runs"].append(run)
        print(f"[{fraction:g}] {objective} from {start.label}: model {result.start_model['mean_auc']:.4f} -> "
              f"{result.delivered_model['mean_auc']:.4f}; attack {choice.trained.auc:.4f} vs best reference "
              f"{choice.start.auc:.4f} (margin {choice.margin:+.4f}, SE {choice.margin_se:.4f}), kept {choice.kept} "
              f"({run['seconds']:.0f} s)", flush=True)
    return record


def markdown(record: dict) -> str:
    lines = [f"# The gradient through the best linear response: {record['label']} ({record['individuals']} x "
             f"{record['attributes']}, N = {record['members']})", "",
             f"`{record['command']}` (seed {record['seed']}, {record['steps']} steps). AUC and TPR: the converged "
             "linear attack (box decoding included) on 500 test releases, the descent's state beside the best reference "
             "on the same seed; margin = state - best reference, with its standard error. Model: the linear-Gaussian "
             "decoder's mean AUC for an attacker that knows the law. The noise is shaped to the candidates in the "
             "population file only, never to the members' rows.", "",
             "| budget (x L0) | objective | start | model mean AUC: start -> delivered | AUC (TPR at 1% FPR) | best "
             "reference | AUC margin (SE) | TPR margin (SE) | kept |", "|---|---|---|---|---|---|---|---|---|"]
    for entry in record["cells"]:
        best = entry["best_reference"]
        for run in entry["runs"]:
            choice = run["choice"]
            trained = choice["trained"]
            lines.append(
                f"| {entry['fraction']:g} | {run['objective']} | {run['start']}{' (control)' if run['control'] else ''} | "
                f"{run['start_model']['mean_auc']:.4f} -> {run['delivered_model']['mean_auc']:.4f} | "
                f"{trained['auc']:.4f} ({trained['tpr_at_1pct_fpr']:.3f}) | {best['label']} {choice['start']['auc']:.4f} "
                f"({choice['start']['tpr_at_1pct_fpr']:.3f}) | {choice['auc_margin']:+.4f} ({choice['auc_margin_se']:.4f}) | "
                f"{choice['tpr_at_1pct_fpr_margin']:+.4f} ({choice['tpr_at_1pct_fpr_margin_se']:.4f}) | {choice['kept']} |")
    return "\n".join(lines) + "\n"


def plot(record: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cells = record["cells"]
    figure, axes = plt.subplots(1, len(cells), figsize=(5 * len(cells), 3.6), squeeze=False)
    for axis, entry in zip(axes[0], cells):
        for run in entry["runs"]:
            steps = [row["step"] for row in run["curve"]]
            axis.plot(steps, [row["mean_auc"] for row in run["curve"]],
                      label=f"{run['objective']} from {'flat noise' if run['control'] else 'best reference'}")
        axis.axhline(entry["runs"][0]["start_model"]["mean_auc"], color="black", linewidth=0.6, linestyle=":")
        axis.set_title(f"{record['label']}, {entry['fraction']:g} x L0")
        axis.set_xlabel("descent step")
        axis.set_ylabel("model mean AUC (best linear response)")
        axis.legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--population", required=True)
    parser.add_argument("--members", type=int, required=True)
    parser.add_argument("--label", required=True)
    parser.add_argument("--fractions", type=float, nargs="+", default=[0.875, 0.75])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    if args.out.exists() and any(args.out.iterdir()):
        parser.error(f"{args.out} exists and is not empty.")
    torch.set_num_threads(args.threads)
    population = load_population(args.population)
    record = {"command": "python experiments/best_response.py " + " ".join(sys.argv[1:] if argv is None else argv),
              "label": args.label, "individuals": population.n_individuals, "attributes": population.n_attributes,
              "members": args.members, "seed": args.seed, "steps": args.steps,
              "cells": [cell(population, args.members, fraction, args.steps, args.seed) for fraction in args.fractions]}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps(record, indent=1) + "\n")
    (args.out / "report.md").write_text(markdown(record))
    plot(record, args.out / "curves.png")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
