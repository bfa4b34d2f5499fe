"""The outside check of a ``bngp reproduce`` report: is the product's strongest attack at least as
strong as a textbook ridge attack written from scratch (``outside_ridge.py``)?

For every setting of the report whose defense has a ``--defense`` SPEC (recorded by
``bngp reproduce`` as ``defense_spec``, or given with ``--defense N=SPEC``), the population
is rebuilt from the report's experiment, scale and seed (its fingerprint must equal the
report's), thousands of shadow releases of the defense are drawn with the product's simulator,
and the outside ridge (penalty chosen on validation releases over the whole spectrum) is scored
on test releases.  The report's privacy number holds when its strongest attack is not weaker:
strongest AUC >= outside AUC - 2 SE (SE combining both AUCs' standard errors over releases).

    python experiments/outside_check.py experiments/results/reproduce/fig3d-dp600/paper_seed0 --shadow 4000

A ``bngp reproduce frontier`` report is checked cell by cell (its DP cells; the sweep does not keep
the BNGP cells' trained defenders).

Writes ``DIR.outside.json`` and ``DIR.outside.md`` next to the report directory (not inside it:
a report directory is complete and listed in its manifest).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

from outside_ridge import attack_defense

from bngp.cli.common import set_threads
from bngp.data.priors import UniformSubsetPrior
from bngp.defenses import DefenseContext, parse_defense_spec
from bngp.defenses.artifact import population_fingerprint
from bngp.io_utils import write_json, write_text
from bngp.reproduce import EXPERIMENTS
from bngp.reproduce.datasets import make_population
from bngp.reproduce.scales import Sizes


def check(directory: Path, overrides: dict[int, str], *, shadow: int, validation: int, test: int) -> dict:
    """Run the outside ridge against every setting of the report in ``directory`` that has a SPEC
    (``overrides``: setting number, as in ``roc-N.png``, -> SPEC)."""
    payload = json.loads((directory / "results.json").read_text())
    spec = EXPERIMENTS[payload["experiment"]]
    population = make_population(spec.dataset, spec.sizes[payload["scale"]], payload["seed"])
    if population_fingerprint(population.genotypes) != payload["population"]["fingerprint"]:
        raise SystemExit(f"{directory}: the rebuilt population differs from the report's (fingerprint mismatch)")
    members = payload["sizes"]["members"]
    prior = UniformSubsetPrior(population.n_individuals, members)
    context = DefenseContext(population, members)
    settings = []
    for index, (setting, evaluation) in enumerate(payload["evaluations"].items(), start=1):
        defense_spec = overrides.get(index, evaluation.get("defense_spec"))
        strongest = evaluation["strongest_attack"]
        entry = {"setting": setting, "defense_spec": defense_spec, "strongest": strongest}
        if defense_spec is None:
            entry["skipped"] = "no --defense SPEC for this setting (a defense built in code)"
            settings.append(entry)
            continue
        started = time.perf_counter()
        outside = attack_defense(population, prior, parse_defense_spec(defense_spec, context), shadow=shadow,
                                 validation=validation, test=test, seed=payload["seed"])
        attack = evaluation["attacks"][strongest["name"]]
        releases = len(attack["auc_per_release"])
        standard_error = math.hypot(attack["auc_std"] / math.sqrt(releases), outside["test_auc_std"] / math.sqrt(test))
        entry.update(outside=outside, seconds=time.perf_counter() - started, standard_error=standard_error,
                     holds=strongest["auc"] >= outside["auc"] - 2 * standard_error)
        print(f"[outside] {setting}: outside ridge {outside['auc']:.4f} vs strongest {strongest['name']} "
              f"{strongest['auc']:.4f}: {'holds' if entry['holds'] else 'FAILS'}", flush=True)
        settings.append(entry)
    return {"report": str(directory), "experiment": payload["experiment"], "scale": payload["scale"],
            "seed": payload["seed"], "shadow": shadow, "validation": validation, "test": test, "settings": settings}


def check_frontier(directory: Path, *, shadow: int, validation: int, test: int) -> dict:
    """The outside ridge against every DP cell of a ``bngp reproduce frontier`` report (the BNGP
    cells' trained defenders are not kept by the sweep).  A cell stores only its mean AUC, so the
    margin is two standard errors of the outside ridge's own test AUC."""
    payload = json.loads((directory / "results.json").read_text())
    populations = {name: make_population(name, Sizes(**sizes), payload["seed"]) for name, sizes in payload["sizes"].items()}
    settings = []
    for cell in payload["sweep"]["results"]:
        setting = f"{cell['dataset']} {cell['spec']}"
        strongest = {"name": cell["strongest_attack"], "auc": cell["strongest_auc"]}
        entry = {"setting": setting, "defense_spec": cell["spec"], "strongest": strongest}
        if cell["family"] == "bngp":
            entry["skipped"] = "the sweep does not keep trained defenders"
            settings.append(entry)
            continue
        population = populations[cell["dataset"]]
        members = cell["members"]
        started = time.perf_counter()
        outside = attack_defense(population, UniformSubsetPrior(population.n_individuals, members),
                                 parse_defense_spec(cell["spec"], DefenseContext(population, members)), shadow=shadow,
                                 validation=validation, test=test, seed=payload["seed"])
        standard_error = outside["test_auc_std"] / math.sqrt(test)
        entry.update(outside=outside, seconds=time.perf_counter() - started, standard_error=standard_error,
                     holds=strongest["auc"] >= outside["auc"] - 2 * standard_error)
        print(f"[outside] {setting}: outside ridge {outside['auc']:.4f} vs strongest {strongest['name']} "
              f"{strongest['auc']:.4f}: {'holds' if entry['holds'] else 'FAILS'}", flush=True)
        settings.append(entry)
    return {"report": str(directory), "experiment": "frontier", "scale": payload["scale"], "seed": payload["seed"],
            "shadow": shadow, "validation": validation, "test": test, "settings": settings}


def markdown(result: dict) -> str:
    lines = [f"# Outside check of `{result['experiment']}` ({result['scale']}, seed {result['seed']})", "",
             f"Ridge from release to membership written from scratch (`experiments/outside_ridge.py`), "
             f"{result['shadow']} shadow releases, penalty chosen over the whole spectrum on {result['validation']} "
             f"validation releases, AUC on {result['test']} test releases. Holds = the report's strongest attack is not "
             "weaker than it (within 2 standard errors).", "",
             "| setting | defense | strongest attack (AUC) | outside ridge AUC | penalty / top eigenvalue | verdict |",
             "|---|---|---|---|---|---|"]
    for entry in result["settings"]:
        strongest = f"{entry['strongest']['name']} ({entry['strongest']['auc']:.4f})"
        if "skipped" in entry:
            lines.append(f"| {entry['setting']} | - | {strongest} | - | - | skipped: {entry['skipped']} |")
            continue
        outside = entry["outside"]
        lines.append(f"| {entry['setting']} | `{entry['defense_spec']}` | {strongest} | {outside['auc']:.4f} | "
                     f"{outside['penalty']:.0e} | {'holds' if entry['holds'] else '**fails**'} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("report", type=Path, help="a report directory of bngp reproduce (OUT/NAME/SCALE_seedS)")
    parser.add_argument("--defense", action="append", default=[], metavar="N=SPEC",
                        help="the SPEC of setting N (numbered as roc-N.png) when the report did not record one")
    parser.add_argument("--shadow", type=int, default=4000)
    parser.add_argument("--validation", type=int, default=500)
    parser.add_argument("--test", type=int, default=200)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    set_threads(args.threads)
    overrides = {int(number): spec for number, spec in (item.split("=", 1) for item in args.defense)}
    if json.loads((args.report / "results.json").read_text())["experiment"] == "frontier":
        result = check_frontier(args.report, shadow=args.shadow, validation=args.validation, test=args.test)
    else:
        result = check(args.report, overrides, shadow=args.shadow, validation=args.validation, test=args.test)
    base = args.report.with_name(args.report.name)
    write_json(base.parent / f"{base.name}.outside.json", result)
    write_text(base.parent / f"{base.name}.outside.md", markdown(result))
    return 0 if all(entry.get("holds", True) for entry in result["settings"]) else 1


if __name__ == "__main__":
    sys.exit(main())
