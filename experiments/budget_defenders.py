"""A defender trained for a utility budget beside every reference mechanism at the same budget.

For each budget (a fraction of the data-independent release's loss): ``bngp train --utility-budget``
(defaults otherwise), then ``bngp evaluate --attacks all`` of the delivered defender and of every
reference SPEC at the budget (Laplace, Gaussian, the best uniform shrinkage of the training's ranking,
suppression, the linear-decoder optimum; with fewer candidates than attributes also
Gaussian noise in the candidates' row space and the best shaped reference of the ranking), each also
attacked by the outside ridge of ``outside_ridge.py`` (written from scratch, thousands of shadow
releases).  Reports per mechanism the measured loss, the strongest product attack's AUC with TPR at 1%
and 0.1% FPR, and the outside ridge's AUC; then whether the defender is within 0.01 AUC and 0.02 TPR at
1% FPR of the best reference and, where shaped references exist, how far below the best isotropic reference it is.  The
shaped mechanisms use only the candidates of the population file, never the members' rows.

    python experiments/budget_defenders.py --population POP.npz --members N --fractions 0.5 0.75 \\
        --seed 3 --out experiments/results/budget_defenders/NAME --work /tmp/NAME
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

from outside_ridge import attack_defense

OUTSIDE_SHADOW = 4000


def _bngp(*args: str) -> None:
    subprocess.run(["bngp", *args], check=True, stdout=subprocess.DEVNULL)


def _row(label: str, spec: str, evaluation: dict, outside: dict) -> dict:
    strongest = evaluation["strongest_attack"]["name"]
    tpr = evaluation["attacks"][strongest]["tpr_at_fpr"]
    return {"mechanism": label, "spec": spec, "loss": evaluation["budget"]["measured_loss"],
            "met": evaluation["budget"]["met"], "strongest_attack": strongest,
            "auc": evaluation["strongest_attack"]["auc"], "tpr_at_1pct": tpr["0.01"], "tpr_at_01pct": tpr["0.001"],
            "outside_ridge_auc": outside["auc"], "outside_shadow_releases": outside["shadow_releases"]}


def _shaped_spec(label: str, budget: str) -> str:
    """The SPEC of a ranking's shaped reference ("shrinkage a=0.7 population eigen", "gaussian population flat",
    "linear-optimal population")."""
    words = label.split()
    if words[0] == "linear-optimal":
        return f"linear-optimal:budget={budget},space=population"
    weighting = words[-1]
    if words[0] == "gaussian":
        return f"budget-gaussian:budget={budget},space=population,weighting={weighting}"
    return f"shrinkage:budget={budget},{words[1].replace('a=', 'shrink=')},space=population,weighting={weighting}"


def run_budget(population: str, members: int, fraction: float, seed: int, out: Path, work: Path,
               steps: int | None = None) -> dict:
    """Train, evaluate and compare at one budget; returns the record (also written to ``out``/budget_F.json).
    The run directory and the evaluations go to ``work`` (reused when there)."""
    from bngp.cli.common import load_population_and_prior
    from bngp.defenses.registry import DefenseContext, parse_defense_spec

    budget = f"{fraction:g}x"
    run_dir = work / f"run_{fraction:g}"
    started = time.perf_counter()
    trained_now = not run_dir.exists()
    if trained_now:
        _bngp("train", "--population", population, "--members", str(members), "--utility-budget", budget,
              "--seed", str(seed), "--threads", "1", "--quiet", *(["--steps", str(steps)] if steps else []),
              "--out", str(run_dir))
    earlier = out / f"budget_{fraction:g}.json"
    train_seconds = time.perf_counter() - started if trained_now else (
        json.loads(earlier.read_text()).get("train_seconds") if earlier.exists() else None)
    summary = json.loads((run_dir / "summary.json").read_text())
    ranking = summary["start"]["ranking"]["references"]
    shrinkages = [entry for entry in ranking if entry["label"].startswith("shrinkage") and "population" not in entry["label"]]
    shaped = [entry for entry in ranking if "population" in entry["label"]]
    best_shrink = min(shrinkages, key=lambda entry: entry["auc"])["mechanism"]["shrink_mean"]
    specs = {
        "BNGP (trained)": f"run:{run_dir}",
        "laplace": f"budget-laplace:budget={budget}",
        "gaussian": f"budget-gaussian:budget={budget}",
        f"shrinkage a={best_shrink:g} + laplace": f"shrinkage:budget={budget},shrink={best_shrink:g}",
        "suppression": f"suppression:budget={budget}",
        "linear-optimal + laplace": f"linear-optimal:budget={budget}",
    }
    if shaped:
        best_shaped = min(shaped, key=lambda entry: entry["auc"])["label"]
        specs["gaussian in the row space"] = f"budget-gaussian:budget={budget},space=population"
        if best_shaped != "gaussian population flat":
            specs[f"{best_shaped} (best shaped)"] = _shaped_spec(best_shaped, budget)
        uniform = [entry for entry in shaped if entry["label"].startswith("shrinkage")]
        best_uniform = min(uniform, key=lambda entry: entry["auc"])["label"] if uniform else None
        if best_uniform not in (None, best_shaped):
            specs[f"{best_uniform} (best one shrinkage)"] = _shaped_spec(best_uniform, budget)
    population_data, prior = load_population_and_prior(population, members)
    rows = []
    for index, (label, spec) in enumerate(specs.items()):
        path = work / f"eval_{fraction:g}_{index}.json"
        if not path.exists():
            _bngp("evaluate", "--population", population, "--members", str(members), "--defense", spec,
                  "--attacks", "all", "--seed", str(seed), "--threads", "1", "--quiet", "--no-decision", "--utility-budget",
                  str(summary["budget"]["budget"]), "--out", str(path))
        defense = parse_defense_spec(spec, DefenseContext(population_data, members))
        outside = attack_defense(population_data, prior, defense, shadow=OUTSIDE_SHADOW, validation=500, test=200,
                                 seed=seed)
        rows.append(_row(label, spec, json.loads(path.read_text()), outside))
        print(f"[budget {budget}] {label}: AUC {rows[-1]['auc']:.4f} ({rows[-1]['strongest_attack']}), outside "
              f"{outside['auc']:.4f}, loss {rows[-1]['loss']:.5f}", file=sys.stderr, flush=True)
    trained = rows[0]
    references = [row for row in rows[1:] if row["mechanism"] != "time-sharing"]
    best = min(references, key=lambda row: row["auc"])
    best_outside = min(references, key=lambda row: row["outside_ridge_auc"])
    isotropic = [row for row in references if "space=population" not in row["spec"]]
    shaped_rows = [row for row in references if "space=population" in row["spec"]]
    record = {
        "population": population, "members": members, "budget": summary["budget"], "fraction": fraction, "seed": seed,
        "train_seconds": train_seconds,
        "start": {key: summary["start"][key] for key in ("reference", "kept", "reason", "final_state_moved", "final_step")
                  if key in summary["start"]},
        "selected_step": summary["selected"]["step"], "rows": rows,
        # the in-game scorings (leakage and loss every refit): the game's learning curve
        "selections": summary.get("selections"),
        "acceptance": {
            "loss_within_budget": bool(trained["met"]),
            "best_reference": best["mechanism"],
            "auc_margin": trained["auc"] - best["auc"],
            "auc_within_0.01": bool(trained["auc"] <= best["auc"] + 0.01),
            "tpr_at_1pct_margin": trained["tpr_at_1pct"] - best["tpr_at_1pct"],
            "tpr_within_0.02": bool(trained["tpr_at_1pct"] <= best["tpr_at_1pct"] + 0.02),
            "best_reference_outside": best_outside["mechanism"],
            "outside_auc_margin": trained["outside_ridge_auc"] - best_outside["outside_ridge_auc"],
            "outside_within_0.01": bool(trained["outside_ridge_auc"] <= best_outside["outside_ridge_auc"] + 0.01),
            **({"below_best_isotropic": min(row["auc"] for row in isotropic) - trained["auc"],
                "below_best_isotropic_outside": min(row["outside_ridge_auc"] for row in isotropic)
                - trained["outside_ridge_auc"],
                "best_shaped_auc": min(row["auc"] for row in shaped_rows),
                "best_shaped_tpr_at_1pct": min(shaped_rows, key=lambda row: row["auc"])["tpr_at_1pct"]}
               if shaped_rows else {}),
        },
    }
    (out / f"budget_{fraction:g}.json").write_text(json.dumps(record, indent=2) + "\n")
    return record


def markdown(records: list[dict]) -> str:
    lines = ["# Budget-trained defenders beside the reference mechanisms", ""]
    for record in records:
        budget = record["budget"]
        lines += [f"## Budget {record['fraction']:g} x L0 = {budget['budget']:.5g} (L0 = {budget['budget'] / record['fraction']:.5g})",
                  "", f"Defender: started from {record['start']['reference']}; kept {record['start']['kept']} "
                  f"({record['start']['reason']}); selected step {record['selected_step']}; "
                  + ("the run was reused (its training time was not recorded)" if record["train_seconds"] is None
                     else f"trained in {record['train_seconds']:.0f} s") + ".", "",
                  "| mechanism | loss | met | strongest product attack | AUC | TPR@1% | TPR@0.1% | outside ridge AUC |",
                  "|---|---|---|---|---|---|---|---|"]
        for row in record["rows"]:
            lines.append(f"| {row['mechanism']} | {row['loss']:.5f} | {'yes' if row['met'] else 'NO'} | "
                         f"{row['strongest_attack']} | {row['auc']:.4f} | {row['tpr_at_1pct']:.3f} | "
                         f"{row['tpr_at_01pct']:.3f} | {row['outside_ridge_auc']:.4f} |")
        acceptance = record["acceptance"]
        lines += ["", f"Best reference by the product's attacks: {acceptance['best_reference']}; the defender's AUC "
                      f"margin {acceptance['auc_margin']:+.4f} (within 0.01: {acceptance['auc_within_0.01']}), TPR at "
                      f"1% FPR margin {acceptance['tpr_at_1pct_margin']:+.3f} (within 0.02: {acceptance['tpr_within_0.02']}); "
                      f"outside ridge margin {acceptance['outside_auc_margin']:+.4f} against "
                      f"{acceptance['best_reference_outside']} (within 0.01: {acceptance['outside_within_0.01']}).", ""]
        if "below_best_isotropic" in acceptance:
            lines += [f"Below the best isotropic reference by {acceptance['below_best_isotropic']:.4f} AUC (outside ridge: "
                      f"{acceptance['below_best_isotropic_outside']:.4f}). The shaped references use only the "
                      "candidates of the population file, never the members' rows.", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--population", required=True)
    parser.add_argument("--members", type=int, required=True)
    parser.add_argument("--fractions", type=float, nargs="+", default=[0.5, 0.75])
    parser.add_argument("--seed", type=int, default=3)
    parser.add_argument("--steps", type=int, help="defender updates of each training (default: bngp train's)")
    parser.add_argument("--out", required=True, help="folder of the results (budget_F.json, report.md)")
    parser.add_argument("--work", help="folder of the run directories and evaluations; without it, only the report "
                        "is written again from the records in --out")
    args = parser.parse_args(argv)
    out, work = Path(args.out), Path(args.work or ".")
    out.mkdir(parents=True, exist_ok=True)
    if args.work:
        work.mkdir(parents=True, exist_ok=True)
    records = [run_budget(args.population, args.members, fraction, args.seed, out, work, args.steps) if args.work
               else json.loads((out / f"budget_{fraction:g}.json").read_text()) for fraction in args.fractions]
    (out / "report.md").write_text(markdown(records))
    print(json.dumps([record["acceptance"] for record in records], indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
