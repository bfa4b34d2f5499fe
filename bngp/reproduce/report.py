"""The report directory of one reproduction, and the index of several.

:func:`write_report` writes ``OUT/NAME/SCALE_seedS/`` in one step (a staging directory renamed
when complete, with a manifest of every file, :mod:`bngp.run_dir`):

* ``results.json``: every number, the seed, sizes, budgets, trainings, evaluations (per-release
  AUCs), wall time, peak memory and package versions;
* ``report.md``: our AUC +- std next to the paper's (arXiv:2410.07414, App. L.9), each attack's
  knowledge and direction, the strongest attack per defense, where and why we differ;
* ``auc.png``: the same comparison as a bar chart; ``roc-N.png``: the ROC curves of every attack
  against setting N (pooled over the evaluation releases).

:func:`write_index` writes ``OUT/index.md``, one line per report directory found under ``OUT``.
"""

from __future__ import annotations

import json
import math
import platform
import shutil
import sys
import time
from dataclasses import asdict, dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import numpy as np
import torch

from bngp.defenses.artifact import population_fingerprint
from bngp.io_utils import write_json, write_text
from bngp.report import convergence_lines, save_png, plot_roc
from bngp.reproduce.experiment import Experiment, Row, format_auc
from bngp.run_dir import MANIFEST_FILE, commit_run, staging_dir
from bngp.timing import matmul_flops, peak_rss_bytes

__all__ = ["ReproductionResult", "write_report", "write_index", "environment", "differing_rows",
           "collapsed_defenders", "reused_text", "fresh_staging", "frontier_plot_lines"]

#: packages whose versions every result records.
_PACKAGES = ("bngp", "torch", "numpy", "scipy", "scikit-learn", "msprime", "stdpopsim", "tskit", "matplotlib")
#: (size, repeats) of the float32 matmul measured with every report (bngp.timing.matmul_flops).
REFERENCE_MATMUL = (1024, 4)
#: a row "differs" from the paper when |ours - paper| exceeds both this and two combined stds.
DIFFERENCE_FLOOR = 0.02


@dataclass(frozen=True)
class ReproductionResult:
    """What one reproduction produced (returned by :func:`bngp.reproduce.reproduce`).

    Attributes:
        name: the experiment.
        scale: quick, small or paper.
        seed: the seed of the population, trainings and evaluations.
        directory: the report directory (``report.md``, ``results.json``, plots).
        wall_seconds: wall time of the whole reproduction.
        peak_rss_bytes: the process's peak resident memory at its end (:func:`bngp.timing.peak_rss_bytes`).
        rows: every (setting, attack) AUC.
    """

    name: str
    scale: str
    seed: int
    directory: Path
    wall_seconds: float
    peak_rss_bytes: int
    rows: tuple[Row, ...]


def environment() -> dict[str, Any]:
    """Python, platform, torch threads, command line and versions of the relevant packages."""
    packages: dict[str, str | None] = {}
    for name in _PACKAGES:
        try:
            packages[name] = version(name)
        except PackageNotFoundError:
            packages[name] = None
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "torch_threads": torch.get_num_threads(),
        "argv": list(sys.argv),
        "packages": packages,
    }


def differing_rows(rows: list[Row] | tuple[Row, ...]) -> list[tuple[Row, float]]:
    """Rows whose AUC (in the paper's direction) is off the paper's by more than
    max(DIFFERENCE_FLOOR, 2 sqrt(std_ours^2 + std_paper^2)), with the signed difference."""
    found = []
    for row in rows:
        if row.paper is None:
            continue
        difference = row.paper_comparable - row.paper[0]
        if abs(difference) > max(DIFFERENCE_FLOOR, 2.0 * math.hypot(row.auc_std, row.paper[1])):
            found.append((row, difference))
    return found


def _describe_defense(description: dict) -> str:
    """One phrase for a defense's description: name, DP guarantee, utility match."""
    text = description.get("name", "?")
    if text == "run":
        text = f"trained defender `{Path(description['run']).name}`, objective {description.get('objective', '?')}"
    guarantee = description.get("guarantee")
    if guarantee:
        delta = f", delta {guarantee['delta']:g}" if guarantee.get("delta") else ""
        text += (f", {guarantee['mechanism']} eps = {guarantee['epsilon']:.4g}{delta} for {guarantee['norm']} sensitivity "
                 f"{guarantee['sensitivity']:g} ({guarantee['neighbouring']})")
    parameters = description.get("parameters", {})
    for key in ("scale", "sigma"):
        if key in parameters:
            text += f", {key} {parameters[key]:.4g}"
    matched = description.get("matched")
    if matched:
        text += f", matched to utility loss {matched['target_utility_loss']:.5f} of `{matched['run']}`"
    return text


def _utility_lines(experiment: Experiment) -> list[str]:
    """The utility of every setting against the data-independent release f(theta) (:func:`bngp.evaluate.utility_record`)."""
    utilities = {setting: payload["utility"] for setting, payload in experiment.evaluations.items() if payload.get("utility")}
    if not utilities:
        return []
    baseline = next(iter(utilities.values()))["data_independent_utility_loss"]
    lines = ["", "## Utility against the data-independent release", "",
             f"The data-independent release f(theta) (the prior's expected statistic) has AUC 0.5 against every attack "
             f"and utility loss {baseline:.5f}; a release no closer to f(D) than it can only leak more.", "",
             "| setting | utility loss | relative error | signal retention | strongest AUC | verdict |",
             "|---|---|---|---|---|---|",
             f"| data-independent release f(theta) | {baseline:.5f} | 1 | 0 | 0.5 | baseline |"]
    for setting, utility in utilities.items():
        lines.append(f"| {setting} | {utility['utility_loss']:.5f} | {utility['relative_error']:.3f} | "
                     f"{utility['signal_retention']:.3f} | {experiment.evaluations[setting]['strongest_attack']['auc']:.4f} "
                     f"| {utility['verdict']} |")
    return lines


#: the verdict of :func:`bngp.evaluate.utility_record` for a release that is f(theta) itself.
_DATA_INDEPENDENT = "the data-independent release itself"


def collapsed_defenders(experiment: Experiment) -> list[str]:
    """One sentence per evaluated setting whose release is the data-independent f(theta) itself
    while the paper reports leakage for it: the reason its AUCs sit at 0.5."""
    sentences = []
    for setting, payload in experiment.evaluations.items():
        if not payload.get("utility", {}).get("verdict", "").startswith(_DATA_INDEPENDENT):
            continue
        papers = [row.paper[0] for row in experiment.rows if row.setting == setting and row.paper is not None]
        if any(abs(value - 0.5) > DIFFERENCE_FLOOR for value in papers):
            sentences.append(
                f"{setting}: our defender releases the data-independent f(theta) (signal retention "
                f"{payload['utility']['signal_retention']:.3f}, utility loss {payload['utility']['utility_loss']:.5f}), so "
                "every attack is at chance, where the paper's defender still leaks. In our measurements the game reaches "
                "one of two ends, f(theta) or a release close to f(D) (docs/results.md, 'Where the BNGP defender sits'), and "
                "not the paper's intermediate AUCs.")
    return sentences


def _direction(row: Row) -> str:
    return "raw" if row.orientation == 1 else "flipped (its shadow data showed members score lower)"


def reused_text(wall: float, reused: float, what: str = "trainings") -> str:
    """" (W s with the R s of the WHAT it reused)" after a wall time, or "" when nothing was reused."""
    return "" if reused == 0 else f" ({wall + reused:.1f} s with the {reused:.1f} s of the {what} it reused)"


def _header_lines(experiment: Experiment, wall: float, peak: int, matmul: float) -> list[str]:
    """Title, description, the command with its sizes and budgets, the run's cost, the settings."""
    spec, budget = experiment.spec, experiment.budget
    lines = [
        f"# {spec.title}",
        "",
        spec.description,
        "",
        f"`bngp reproduce {spec.name} --scale {experiment.scale} --seed {experiment.seed}`: {spec.dataset} "
        f"({experiment.sizes.describe()}); {budget.steps} defender steps, Bayesian attacker "
        f"{budget.attacker_eval_steps} steps, {budget.releases} evaluation releases. Wall time {wall:.1f} s"
        f"{reused_text(wall, experiment.reused_training_seconds)} at a float32 matmul throughput of {matmul / 1e9:.1f} GFLOP/s measured "
        f"in the same run, peak memory {peak / 2**30:.2f} GiB.",
        "",
    ]
    if experiment.scale == "quick":
        lines += ["**Quick scale: a pipeline check. These AUCs come from a few training steps on a tiny population "
                  "and say nothing about the paper's claims.**", ""]
    shown = {key: value for key, value in experiment.settings.items() if not (isinstance(value, list) and len(value) > 8)}
    if shown:
        lines += ["Settings (all of them in results.json): " + "; ".join(f"{k} = {v}" for k, v in shown.items()) + ".", ""]
    return lines


def _auc_table_lines(experiment: Experiment) -> list[str]:
    """Every (setting, attack) row: our AUC next to the paper's, direction, utility loss, time."""
    lines = [
        "| setting | attack | AUC ± std (ours) | AUC ± std (paper) | ours in the paper's direction | direction "
        "| utility loss | attack time (s) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in experiment.rows:
        comparable = "-" if row.paper is None else f"{row.paper_comparable:.4f}"
        lines.append(f"| {row.setting} | {row.attack} | {format_auc((row.auc, row.auc_std))} | {format_auc(row.paper)} "
                     f"| {comparable} | {'+1' if row.orientation == 1 else '-1'} | {row.utility_loss:.5f} "
                     f"| {row.seconds:.2f} |")
    return lines + [
        "",
        "AUCs are means over releases (± std over releases), each attack in the direction it fixed from its own shadow "
        "data, never from evaluation labels. The paper prints the adaptive-LRT and score attacks in their raw direction "
        "(AUCs below 0.5); where the paper's number is below 0.5 the column \"ours in the paper's direction\" gives our "
        "raw-direction AUC. Utility loss = mean |x - f(D)| over all released outputs.",
    ]


def _strongest_lines(experiment: Experiment) -> list[str]:
    """The strongest attack of every evaluated setting, with its ROC plot."""
    lines = ["", "## Strongest attack per defense", "",
             "A defense is only as private as the strongest attack fitted to convergence shows.", ""]
    for index, (setting, payload) in enumerate(experiment.evaluations.items(), start=1):
        strongest = payload["strongest_attack"]
        gap = payload.get("attack_gap")
        versus = "" if gap is None else f"; best analytic `{gap['best_analytic']}` minus Bayesian AUC {gap['gap']:+.4f}"
        lines.append(f"- {setting} [{_describe_defense(payload['defense'])}]: strongest **{strongest['name']}** "
                     f"(AUC {strongest['auc']:.4f}){versus}. ROC: `roc-{index}.png`.")
    return lines


def _difference_lines(experiment: Experiment) -> list[str]:
    """Where and why we differ: the spec's reasons, the scale, collapsed defenders, cells off the paper's."""
    lines = ["", "## Where and why we differ from the paper", ""]
    lines += [f"- {text}" for text in experiment.spec.differences]
    if experiment.scale != "paper":
        lines.append(f"- Scale `{experiment.scale}`: sizes and budgets below the paper's (see above).")
    lines += [f"- {text}" for text in collapsed_defenders(experiment)]
    differing = differing_rows(experiment.rows)
    if differing:
        lines.append("- Cells off the paper's by more than max(0.02, two combined stds): " + "; ".join(
            f"{row.setting} / {row.attack}: {row.paper_comparable:.4f} vs {row.paper[0]:.4f} ({d:+.4f})"
            for row, d in differing) + ".")
    elif any(row.paper is not None for row in experiment.rows):
        lines.append("- Every cell with a paper number is within max(0.02, two combined stds) of it.")
    return lines


def _training_lines(experiment: Experiment) -> list[str]:
    """Each trained defender: its fresh-attacker check, BGBP constraint, kept state and utility."""
    if not experiment.trainings:
        return []
    lines = ["", "## Trained defenders", "",
             "Fresh attacker = a new network trained against the frozen defender after training."]
    for label, record in experiment.trainings.items():
        check = record["fresh_attacker_check"]
        fresh = f"fresh attacker AUC {check['auc']:.4f}" if check else "no fresh-attacker check"
        bgbp = record["bgbp"]
        if bgbp is not None and check is not None:
            fresh += (f"; BGBP constraint DPH^{bgbp['epsilon']:g} (Prop. 10: eps_hat = {bgbp['implied_epsilon']:.3f}"
                      f"-DP if it holds), fresh attacker outside its bounds on "
                      f"{check.get('dp_bound_violation_rate', float('nan')):.1%} of outputs")
        delivered = record.get("selected") or record["final"]
        kept = f"state of step {delivered['step']} kept (best against a refitted attacker); " if record.get("selected") else ""
        lines.append(f"- `{label}` (against {record['against']}): {fresh}; {kept}in-game held-out utility loss "
                     f"{delivered.get('heldout_utility_loss', float('nan')):.5f}; {record['seconds']:.1f} s"
                     f"{' (reused)' if record['reused'] else ''}.")
    return lines


def _convergence_section(experiment: Experiment) -> list[str]:
    """Per setting, the learned attacks' evidence of convergence (:func:`bngp.report.convergence_lines`)."""
    converged = [(setting, convergence_lines(result.attacks)) for setting, result in experiment.results.items()]
    if not any(found for _, found in converged):
        return []
    lines = ["", "## Attackers fitted to convergence", "",
             "The privacy result is the strongest attack's, so each learned attack shows that more shadow releases "
             "or more steps no longer raised its validation AUC."]
    for setting, found in converged:
        if found:
            lines += ["", f"### {setting}"] + found
    return lines


def _knowledge_lines(experiment: Experiment) -> list[str]:
    """Each attack's knowledge and the directions it fixed."""
    knowledge: dict[str, str] = {}
    directions: dict[str, set[str]] = {}
    for payload in experiment.evaluations.values():
        for name, entry in payload["attacks"].items():
            knowledge.setdefault(name, entry["knowledge"])
    for row in experiment.rows:
        directions.setdefault(row.attack, set()).add(_direction(row))
    lines = ["", "## Attacks: knowledge and direction", ""]
    return lines + [f"- `{name}`: {text.rstrip('. ')}. Direction: {'; '.join(sorted(directions.get(name, ())))}."
                    for name, text in knowledge.items()]


def markdown(experiment: Experiment, wall: float, peak: int, matmul: float) -> str:
    """The Markdown report: our numbers next to the paper's, knowledge, direction, differences."""
    lines = _header_lines(experiment, wall, peak, matmul) + _auc_table_lines(experiment) + _strongest_lines(experiment)
    lines += _utility_lines(experiment)
    lines += _difference_lines(experiment) + _training_lines(experiment) + _convergence_section(experiment)
    lines += _knowledge_lines(experiment)
    if experiment.notes:
        lines += ["", "## Notes and warnings", ""] + [f"- {note}" for note in experiment.notes]
    versions = ", ".join(f"{name} {value}" for name, value in environment()["packages"].items() if value)
    lines += ["", f"Python {platform.python_version()}; {versions}; torch threads {torch.get_num_threads()}."]
    return "\n".join(lines) + "\n"


def plot_aucs(experiment: Experiment, path: Path) -> Path:
    """Bar chart of our AUC +- std (in the paper's direction) next to the paper's, one pair per row,
    the rows grouped under their setting (a bold label).  Our bar is filled in the attack's colour
    (:func:`bngp.colours.attack_colour`, as in every plot), the paper's is hatched in the same
    colour, and the AUC axis reaches past 1 so that a bar at 1 keeps its end and error bar."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    from bngp.colours import attack_colour

    groups: dict[str, list[Row]] = {}
    for row in experiment.rows:
        groups.setdefault(row.setting, []).append(row)
    positions, labels, headers = [], [], []
    place = 0.0
    for setting, rows in groups.items():
        headers.append((place, setting))
        place += 0.8
        for row in rows:
            positions.append((place, row))
            labels.append((place, row.attack))
            place += 1.0
        place += 0.3
    figure, axis = plt.subplots(figsize=(8.0, 1.4 + 0.5 * place), dpi=110, layout="constrained")
    for y, row in positions:
        colour = attack_colour(row.attack)
        axis.barh(y - 0.2, row.paper_comparable, height=0.38, xerr=row.auc_std, color=colour,
                  error_kw={"elinewidth": 1.0, "capsize": 2})
        if row.paper is not None:
            axis.barh(y + 0.2, row.paper[0], height=0.38, xerr=row.paper[1], color="white", edgecolor=colour,
                      hatch="////", linewidth=0.8, error_kw={"elinewidth": 1.0, "capsize": 2})
    axis.axvline(0.5, color="grey", linestyle="--", linewidth=0.8)
    axis.set_yticks([y for y, _ in labels] + [y for y, _ in headers],
                    [label for _, label in labels] + [setting for _, setting in headers])
    for tick in axis.get_yticklabels()[len(labels):]:
        tick.set_fontweight("bold")
    axis.tick_params(axis="y", length=0, labelsize=8)
    axis.invert_yaxis()
    axis.set_xlim(0.0, 1.06)
    axis.set_xticks(np.linspace(0.0, 1.0, 6))
    axis.grid(axis="x", alpha=0.25)
    axis.set_xlabel("AUC (mean ± std over releases; the paper's direction)")
    axis.set_title(f"{experiment.spec.name} ({experiment.scale}, seed {experiment.seed})", fontsize=9, loc="left")
    handles = [Patch(facecolor="grey", label=f"ours ({experiment.scale}): filled, the attack's colour"),
               Patch(facecolor="white", edgecolor="grey", hatch="////", label="paper: hatched"),
               plt.Line2D([], [], color="grey", linestyle="--", linewidth=0.8, label="chance (0.5)")]
    figure.legend(handles=handles, loc="outside upper center", ncol=3, fontsize=8, frameon=False)
    return save_png(figure, path)


def fresh_staging(target: Path) -> Path:
    """The empty staging directory of the report directory ``target`` (:func:`bngp.run_dir.staging_dir`; a stale
    one is discarded), where a report is written before :func:`bngp.run_dir.commit_run` moves it in place."""
    staging = staging_dir(target)
    if staging.exists():
        shutil.rmtree(staging)
    staging.mkdir(parents=True)
    return staging


def frontier_plot_lines(scale: str, caption: str) -> list[str]:
    """A frontier report's plot (``frontier.png``) with its caption, after the quick scale's warning."""
    lines = ["**Quick scale: a pipeline check; these numbers say nothing about the frontier.**", ""] if scale == "quick" else []
    return lines + ["![frontier](frontier.png)", "", caption, ""]


def write_report(experiment: Experiment) -> ReproductionResult:
    """Write ``experiment``'s report directory in one step; returns what it produced."""
    wall = time.perf_counter() - experiment.started
    peak = peak_rss_bytes()
    matmul = matmul_flops(*REFERENCE_MATMUL)
    target = experiment.result_dir
    staging = fresh_staging(target)
    payload = {
        "experiment": experiment.spec.name,
        "title": experiment.spec.title,
        "dataset": experiment.spec.dataset,
        "scale": experiment.scale,
        "sizes": asdict(experiment.sizes),
        "budget": asdict(experiment.budget),
        "seed": experiment.seed,
        "wall_seconds": wall,
        "wall_seconds_with_reused_trainings": wall + experiment.reused_training_seconds,
        "matmul_flops_float32": matmul,
        "peak_rss_bytes": peak,
        "peak_rss_note": "process high-water mark (getrusage) at the end of this experiment",
        "population": {
            "fingerprint": population_fingerprint(experiment.population.genotypes),
            "attributes": experiment.population.n_attributes,
            "seconds": experiment.population_seconds,
            "prior": experiment.prior.describe(),
            "metadata": experiment.population.metadata,
        },
        "settings": experiment.settings,
        "rows": [{**asdict(row), "paper_direction_auc": row.paper_comparable} for row in experiment.rows],
        "differences": list(experiment.spec.differences),
        "differing_cells": [{"setting": row.setting, "attack": row.attack, "difference": d}
                            for row, d in differing_rows(experiment.rows)],
        "trainings": experiment.trainings,
        "evaluations": experiment.evaluations,
        "notes": experiment.notes,
        "environment": environment(),
    }
    write_json(staging / "results.json", payload)
    write_text(staging / "report.md", markdown(experiment, wall, peak, matmul))
    if experiment.rows:
        plot_aucs(experiment, staging / "auc.png")
    for index, (setting, result) in enumerate(experiment.results.items(), start=1):
        curves = {name: (scores, result.labels) for name, scores in result.scores.items()}
        plot_roc(curves, staging / f"roc-{index}.png", title=f"{experiment.spec.name}: {setting}"[:80],
                 baseline_loss=result.utility.get("data_independent_utility_loss"))
    commit_run(staging, target, {"experiment": experiment.spec.name, "scale": experiment.scale, "seed": experiment.seed})
    experiment.log(f"wrote {target} ({wall:.1f} s, peak memory {peak / 2**30:.2f} GiB)")
    return ReproductionResult(experiment.spec.name, experiment.scale, experiment.seed, target, wall, peak,
                              tuple(experiment.rows))


def _gflops(payload: dict) -> str:
    matmul = payload.get("matmul_flops_float32")
    return "not measured" if matmul is None else f"{matmul / 1e9:.1f}"


def write_index(out: Path) -> Path:
    """``OUT/index.md``: one line per complete report directory under ``OUT`` (every experiment,
    scale and seed reproduced there so far, not only those of the last call), in the catalog's order."""
    from bngp.reproduce.catalog import EXPERIMENTS

    order = {name: index for index, name in enumerate(EXPERIMENTS)}
    found = []
    for path in out.glob("*/*/results.json"):
        if not (path.parent / MANIFEST_FILE).is_file():
            continue
        payload = json.loads(path.read_text())
        found.append((order.get(payload["experiment"], len(order)), payload["experiment"], payload["scale"],
                      payload["seed"], path.parent, payload))
    lines = ["# Reproductions of arXiv:2410.07414", "",
             "Written by `bngp reproduce`; each line links its report. \"Cells off\" counts the cells with a paper number "
             "that differ from it by more than max(0.02, two combined stds).", "",
             "| experiment | scale | seed | strongest attack (AUC) | cells off the paper | wall time (s, reused trainings included) "
             "| matmul float32, same run (GFLOP/s) | peak memory (GiB) | report |",
             "|---|---|---|---|---|---|---|---|---|"]
    for _, name, scale, seed, directory, payload in sorted(found, key=lambda item: item[:4]):
        rows = payload["rows"]
        best = max(rows, key=lambda row: row["auc"], default=None)
        strongest = "-" if best is None else f"{best['attack']} vs {best['setting']} ({best['auc']:.4f})"
        compared = sum(row["paper"] is not None for row in rows)
        off = f"{len(payload['differing_cells'])} of {compared}" if compared else "-"
        report = (directory / "report.md").relative_to(out)
        label = EXPERIMENTS[name].label if name in EXPERIMENTS else payload["title"].split(" (")[0]
        lines.append(f"| {label} (`{name}`) | {scale} | {seed} | {strongest} | {off} "
                     f"| {payload.get('wall_seconds_with_reused_trainings', payload['wall_seconds']):.1f} "
                     f"| {_gflops(payload)} "
                     f"| {payload['peak_rss_bytes'] / 2**30:.2f} | [{report}]({report}) |")
    return write_text(out / "index.md", "\n".join(lines) + "\n")
