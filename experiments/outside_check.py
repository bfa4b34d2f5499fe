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

A ``bngp reproduce frontier`` report, or its sweep directory before the report exists, is checked
cell by cell (the BNGP cells through the trained defenders the sweep keeps; each verdict stored in
the sweep's ``outside/`` and reused).  So is a reproduction in progress, from its runs directory
(``OUT/NAME/runs/SCALE_seedS``: the stored evaluations of the settings finished so far, each
verdict stored in its ``outside/`` and reused), for a paper-scale run spread over several invocations.

Writes ``DIR.outside.json`` and ``DIR.outside.md`` next to the report directory (not inside it:
a report directory is complete and listed in its manifest).
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
import time
from pathlib import Path

from outside_ridge import attack_defense

from bngp.cli.common import set_threads
from bngp.data.npz import load_population
from bngp.data.priors import UniformSubsetPrior
from bngp.defenses import DefenseContext, parse_defense_spec
from bngp.defenses.artifact import population_fingerprint
from bngp.errors import BNGPError
from bngp.io_utils import write_json, write_text
from bngp.reproduce import EXPERIMENTS
from bngp.reproduce.datasets import make_population
from bngp.reproduce.scales import Sizes
from bngp.run_dir import verify_run
from bngp.sweep.store import RUNS_DIR


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


def _frontier_records(directory: Path) -> tuple[Path, list[dict], dict]:
    """(sweep directory, its successful cell records, scale and seed) of a frontier report
    (OUT/frontier/SCALE_seedS) or of its sweep (OUT/frontier/sweep/SCALE_seedS) before the report exists."""
    if (directory / "cells").is_dir():
        records = [json.loads(path.read_text()) for path in sorted((directory / "cells").glob("*.json"))]
        match = re.fullmatch(r"(\w+)_seed(\d+)", directory.name)
        if match is None:
            raise SystemExit(f"{directory}: a frontier sweep directory is named SCALE_seedS")
        return directory, [record for record in records if record["status"] == "ok"], \
            {"scale": match[1], "seed": int(match[2]), "sizes": None}
    payload = json.loads((directory / "results.json").read_text())
    return directory.parent / "sweep" / directory.name, payload["sweep"]["results"], payload


def _verifies(run: Path) -> bool:
    """Whether the trained defender the sweep kept in ``run`` is there, complete and unaltered."""
    try:
        verify_run(run)
    except BNGPError:
        return False
    return True


def _cached(path: Path, record: dict, parameters: dict) -> dict | None:
    """The verdict stored for this cell with these parameters, when its strongest AUC is unchanged."""
    try:
        stored = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    entry = stored.get("entry", {})
    if stored.get("parameters") != parameters or entry.get("strongest", {}).get("auc") != record["strongest_auc"]:
        return None
    return entry


def check_frontier(directory: Path, *, shadow: int, validation: int, test: int) -> dict:
    """The outside ridge against every cell of a ``bngp reproduce frontier`` report or of its sweep
    directory (before the report exists): DP cells through their SPEC, BNGP cells through the
    trained defender the sweep keeps in ``runs/<key>/``.  Each verdict is stored in the sweep's
    ``outside/<key>.json`` and reused for the same parameters, so a paper-scale frontier spread
    over several invocations is checked cell by cell while each BNGP cell's defender is still on disk (the
    defenders are not committed).  A cell stores only its mean AUC, so the margin is two
    standard errors of the outside ridge's own test AUC."""
    sweep_dir, records, payload = _frontier_records(directory)
    parameters = {"shadow": shadow, "validation": validation, "test": test}
    populations: dict[str, object] = {}
    settings = []
    for cell in records:
        setting = f"{cell['dataset']} {cell['spec']}"
        strongest = {"name": cell["strongest_attack"], "auc": cell["strongest_auc"]}
        cache = sweep_dir / "outside" / f"{cell['key']}.json"
        spec = cell["spec"]
        if cell["family"] == "bngp":
            run = sweep_dir / RUNS_DIR / cell["key"]
            spec = f"run:{run}" if _verifies(run) else None
        entry = {"setting": setting, "defense_spec": spec, "strongest": strongest}
        cached = _cached(cache, cell, parameters)
        if cached is not None:
            settings.append(cached)
            continue
        if spec is None:
            entry["skipped"] = "its trained defender is not on disk (kept only by the sweep that trained it)"
            settings.append(entry)
            continue
        if cell["dataset"] not in populations:
            source = Path(cell["path"])
            populations[cell["dataset"]] = (load_population(source) if source.is_file() else
                                            make_population(cell["dataset"], Sizes(**payload["sizes"][cell["dataset"]]),
                                                            payload["seed"]))
        population = populations[cell["dataset"]]
        members = cell["members"]
        started = time.perf_counter()
        outside = attack_defense(population, UniformSubsetPrior(population.n_individuals, members),
                                 parse_defense_spec(spec, DefenseContext(population, members)), shadow=shadow,
                                 validation=validation, test=test, seed=payload["seed"])
        standard_error = outside["test_auc_std"] / math.sqrt(test)
        entry.update(outside=outside, seconds=time.perf_counter() - started, standard_error=standard_error,
                     holds=strongest["auc"] >= outside["auc"] - 2 * standard_error)
        print(f"[outside] {setting}: outside ridge {outside['auc']:.4f} vs strongest {strongest['name']} "
              f"{strongest['auc']:.4f}: {'holds' if entry['holds'] else 'FAILS'}", flush=True)
        write_json(cache, {"parameters": parameters, "entry": entry})
        settings.append(entry)
    return {"report": str(directory), "experiment": "frontier", "scale": payload["scale"], "seed": payload["seed"],
            "shadow": shadow, "validation": validation, "test": test, "settings": settings}


def _noise_spec(described: dict) -> str | None:
    """A SPEC drawing the same noise as a Gaussian or Laplace defense built in code (the outside
    attack sees only the releases; the Gaussian's delta enters its accounting, not its noise)."""
    law = described.get("noise_law") or {}
    if described.get("composition", 1) != 1 or law.get("kind") not in ("gaussian", "laplace") or not law.get("scale"):
        return None
    return f"gaussian:scale={law['scale']!r},delta=1e-5" if law["kind"] == "gaussian" else f"laplace:scale={law['scale']!r}"


def check_runs(directory: Path, *, shadow: int, validation: int, test: int) -> dict:
    """The outside ridge against every stored evaluation of a reproduction in progress
    (``OUT/NAME/runs/SCALE_seedS``, before its report exists): the defense through its recorded
    SPEC (a trained defender as ``run:DIR``) or, built in code, through the SPEC of the same noise
    (:func:`_noise_spec`).  Each verdict is stored in ``outside/<key>.json`` and reused for the same
    parameters and the same strongest AUC."""
    match = re.fullmatch(r"(\w+)_seed(\d+)", directory.name)
    if match is None or directory.parent.name != "runs" or directory.parent.parent.name not in EXPERIMENTS:
        raise SystemExit(f"{directory}: a reproduction's runs directory is OUT/NAME/runs/SCALE_seedS")
    name, scale, seed = directory.parent.parent.name, match[1], int(match[2])
    spec = EXPERIMENTS[name]
    population = make_population(spec.dataset, spec.sizes[scale], seed)
    fingerprint = population_fingerprint(population.genotypes)
    for config in directory.glob("*/config.json"):
        if json.loads(config.read_text()).get("population", {}).get("fingerprint") not in (None, fingerprint):
            raise SystemExit(f"{config.parent}: trained on a population other than the rebuilt one (fingerprint mismatch)")
    members = spec.sizes[scale].members
    prior = UniformSubsetPrior(population.n_individuals, members)
    context = DefenseContext(population, members)
    parameters = {"shadow": shadow, "validation": validation, "test": test}
    settings = []
    for path in sorted((directory / "evaluations").glob("*.json")):
        evaluation = json.loads(path.read_text())
        defense_spec = evaluation.get("defense_spec") or _noise_spec(evaluation["defense"])
        strongest = evaluation["strongest_attack"]
        label = (Path(defense_spec[4:]).name if (defense_spec or "").startswith("run:") else
                 f"{evaluation['defense']['name']}{'' if evaluation.get('defense_spec') else ' (built in code)'}")
        entry = {"setting": label, "defense_spec": defense_spec,
                 "strongest": strongest, "evaluation": path.stem}
        cache = directory / "outside" / f"{path.stem}.json"
        cached = _cached(cache, {"strongest_auc": strongest["auc"]}, parameters)
        if cached is not None:
            settings.append(cached)
            continue
        if defense_spec is None:
            entry["skipped"] = "no SPEC recorded and not a Gaussian or Laplace noise law"
            settings.append(entry)
            continue
        started = time.perf_counter()
        outside = attack_defense(population, prior, parse_defense_spec(defense_spec, context), shadow=shadow,
                                 validation=validation, test=test, seed=seed)
        attack = evaluation["attacks"][strongest["name"]]
        releases = len(attack["auc_per_release"])
        standard_error = math.hypot(attack["auc_std"] / math.sqrt(releases), outside["test_auc_std"] / math.sqrt(test))
        entry.update(outside=outside, seconds=time.perf_counter() - started, standard_error=standard_error,
                     holds=strongest["auc"] >= outside["auc"] - 2 * standard_error)
        print(f"[outside] {entry['setting']}: outside ridge {outside['auc']:.4f} vs strongest {strongest['name']} "
              f"{strongest['auc']:.4f}: {'holds' if entry['holds'] else 'FAILS'}", flush=True)
        write_json(cache, {"parameters": parameters, "entry": entry})
        settings.append(entry)
    return {"report": str(directory), "experiment": name, "scale": scale, "seed": seed, "shadow": shadow,
            "validation": validation, "test": test, "settings": settings}


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
    parser.add_argument("report", type=Path, help="a report directory of bngp reproduce (OUT/NAME/SCALE_seedS), a "
                        "frontier's sweep directory (OUT/frontier/sweep/SCALE_seedS) or a reproduction's runs "
                        "directory (OUT/NAME/runs/SCALE_seedS, before its report exists)")
    parser.add_argument("--defense", action="append", default=[], metavar="N=SPEC",
                        help="the SPEC of setting N (numbered as roc-N.png) when the report did not record one")
    parser.add_argument("--shadow", type=int, default=4000)
    parser.add_argument("--validation", type=int, default=500)
    parser.add_argument("--test", type=int, default=200)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    set_threads(args.threads)
    overrides = {int(number): spec for number, spec in (item.split("=", 1) for item in args.defense)}
    if (args.report / "evaluations").is_dir() and not (args.report / "results.json").is_file():
        result = check_runs(args.report, shadow=args.shadow, validation=args.validation, test=args.test)
    elif (args.report / "cells").is_dir() or json.loads((args.report / "results.json").read_text())["experiment"] == "frontier":
        result = check_frontier(args.report, shadow=args.shadow, validation=args.validation, test=args.test)
    else:
        result = check(args.report, overrides, shadow=args.shadow, validation=args.validation, test=args.test)
    base = args.report.with_name(args.report.name)
    write_json(base.parent / f"{base.name}.outside.json", result)
    write_text(base.parent / f"{base.name}.outside.md", markdown(result))
    return 0 if all(entry.get("holds", True) for entry in result["settings"]) else 1


if __name__ == "__main__":
    sys.exit(main())
