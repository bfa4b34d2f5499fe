"""The product's `linear` attack on a reproduction's defense, its learning curve continued past the
default float budget: where does it level off?

`bngp.linear.max_shadow_releases` stops a converged fit at 2^27 floats of shadow releases (26,843 at
|Q| = 5,000), so on a weak or composed release the report's curve can end "NOT converged".  This
runs the same attack (same seed, so the same first curve points and the same evaluation releases
as the report) with a larger cap, on a defense (a `--defense` SPEC, such as the run directory
of a reproduction's trained defender) of a `bngp reproduce` experiment's population:

    python experiments/linear_curve.py table5 \\
        run:experiments/results/reproduce/table5/runs/paper_seed0/composition-eps-1 \\
        --scale paper --max-shadow 107372 --out experiments/results/linear_curve/table5_paper_eps1_composition

and writes OUT.json and OUT.md: the learning curve (validation AUC by shadow releases), the AUC on
the evaluation releases, the pooling weights of a composed release, the wall time next to the
float32 matmul throughput measured in the same run, and the peak memory.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path


def markdown(record: dict) -> str:
    """The Markdown page of a run's JSON record."""
    curve = record["learning_curve"]
    lines = [
        f"# `linear` on `{record['defense_spec']}` ({record['experiment']}, {record['scale']}, seed {record['seed']}), "
        f"curve capped at {record['max_shadow_releases']:,} shadow releases", "",
        f"`python experiments/linear_curve.py {record['experiment']} {record['defense_spec']} --scale {record['scale']} "
        f"--seed {record['seed']} --max-shadow {record['max_shadow_releases']}`", "",
        "| shadow releases | validation AUC |", "|---|---|",
        *[f"| {n:,} | {a:.4f} |" for n, a in zip(curve["releases"], curve["auc"])], "",
        f"- Converged (gain under {curve['tolerance']} per doubling): **{'yes' if curve['converged'] else 'no'}**.",
        f"- AUC on the report's {record['releases']} evaluation releases: **{record['auc']:.4f} +- "
        f"{record['auc_std']:.4f}**.",
    ]
    if record["pooling"]:
        weights = ", ".join(f"{w:.4g}" for w in record["pooling"]["weights"])
        lines.append(f"- Copies pooled with weights ({weights}) before the fit (`bngp.attacks.pooling`).")
    lines.append(f"- {record['seconds']:.0f} s at a float32 matmul of {record['matmul_flops_float32'] / 1e9:.1f} GFLOP/s "
                 f"measured in the same run; peak memory {record['peak_memory_bytes'] / 2**30:.2f} GiB.")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("experiment", help="a `bngp reproduce` experiment, e.g. table5")
    parser.add_argument("defense", help="a `--defense` SPEC, e.g. run:DIR of a trained defender")
    parser.add_argument("--scale", default="paper", choices=("quick", "small", "paper"))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--root", default="experiments/results/reproduce", help="the reproductions' output root")
    parser.add_argument("--max-shadow", type=int, required=True, help="cap of the learning curve (shadow releases)")
    parser.add_argument("--out", required=True, help="output stem: OUT.json and OUT.md")
    args = parser.parse_args(argv)
    if args.max_shadow < 3:
        parser.error("--max-shadow: at least 3 shadow releases")
    out = Path(args.out)
    if not out.parent.is_dir():
        parser.error(f"--out: folder not found: {out.parent}")
    from bngp.attacks import LinearAttack
    from bngp.defenses.registry import available_defenses, split_spec
    from bngp.errors import BNGPError
    from bngp.evaluate import evaluate_defense
    from bngp.reproduce.catalog import EXPERIMENTS
    from bngp.reproduce.report import REFERENCE_MATMUL
    from bngp.reproduce.scales import BUDGETS
    from bngp.timing import matmul_flops, peak_rss_bytes

    if args.experiment not in EXPERIMENTS:
        parser.error(f"unknown experiment {args.experiment!r}; known: {', '.join(EXPERIMENTS)}")
    try:  # the SPEC's name and form before the population is made (its parameters need the population)
        if split_spec(args.defense)[0] not in available_defenses():
            parser.error(f"unknown defense {args.defense!r}; known: {', '.join(available_defenses())}")
    except BNGPError as error:
        parser.error(f"defense: {error}")
    from bngp.reproduce.experiment import Experiment

    started = time.perf_counter()
    experiment = Experiment(EXPERIMENTS[args.experiment], args.scale, args.seed, Path(args.root), BUDGETS[args.scale])
    try:
        defense = experiment.defense(args.defense)
    except BNGPError as error:
        parser.error(f"defense: {error}")
    attack = LinearAttack(max_shadow_releases=args.max_shadow)
    result = evaluate_defense(experiment.population, experiment.prior, defense, {"linear": attack},
                              releases=experiment.budget.releases, seed=args.seed, n_members=experiment.sizes.members)
    entry = result.attacks["linear"].to_dict()
    record = {
        "experiment": args.experiment, "defense_spec": args.defense, "scale": args.scale, "seed": args.seed,
        "defense": result.defense, "max_shadow_releases": args.max_shadow,
        "auc": entry["auc"], "auc_std": entry["auc_std"], "learning_curve": entry["learning_curve"],
        "pooling": entry.get("pooling"), "fit": {k: v for k, v in entry["fit"].items() if k != "path"},
        "releases": experiment.budget.releases, "seconds": time.perf_counter() - started, "matmul_flops_float32": matmul_flops(*REFERENCE_MATMUL),
        "peak_memory_bytes": peak_rss_bytes(),
    }
    Path(f"{out}.json").write_text(json.dumps(record, indent=2) + "\n")
    text = markdown(record)
    Path(f"{out}.md").write_text(text)
    print(text, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
