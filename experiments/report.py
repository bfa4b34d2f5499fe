"""The reports of a table runner: its rows and the JSON, Markdown and PNG files written from them.

:func:`write_report` writes ``<scale>_seed<S>.json`` (every number, seed, configuration, wall
time and package version), ``<scale>_seed<S>.md`` (our AUC +- std next to the one printed in
arXiv:2410.07414, App. L.9, each attack's knowledge statement, warnings) and
``<scale>_seed<S>.png`` (the same comparison as a bar chart), each atomically.
"""

from __future__ import annotations

import platform
import sys
import time
from dataclasses import asdict, dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import numpy as np
import torch

from bngp.defenses.artifact import population_fingerprint
from bngp.io_utils import atomic_write, write_json, write_text

__all__ = ["PaperAUC", "Row", "environment", "format_auc", "write_report", "markdown", "plot"]

#: (mean, std) of an AUC as printed in arXiv:2410.07414, App. L.9.
PaperAUC = tuple[float, float]
#: packages whose versions every result records.
_PACKAGES = ("bngp", "torch", "numpy", "scipy", "scikit-learn", "msprime", "stdpopsim", "tskit", "matplotlib")


@dataclass(frozen=True)
class Row:
    """One line of a reproduced table: an attack's AUC against one setting.

    Attributes:
        setting: the defense / condition (e.g. "BNGP defender, kappa=1.5").
        attack: attack registry name.
        auc: mean per-release AUC, in the direction the attack fixed from its own data.
        auc_std: std of the per-release AUCs.
        paper: the paper's (mean, std) for this cell, or None when the paper has none.
        raw_auc: our AUC in the attack's raw (unflipped) direction, as the paper reports it.
        utility_loss: mean |x - f(D)| of the evaluation releases (all released outputs).
        seconds: wall time of the attack (fit + score).
    """

    setting: str
    attack: str
    auc: float
    auc_std: float
    paper: PaperAUC | None
    raw_auc: float
    utility_loss: float
    seconds: float


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


def format_auc(value: PaperAUC | tuple[float, float] | None) -> str:
    """``mean ± std`` of an AUC, ``-`` for none."""
    return "-" if value is None else f"{value[0]:.4f} ± {value[1]:.4f}"


def _describe_defense(description: dict) -> str:
    """One phrase for a defense's description: name, DP guarantee, utility match."""
    text = description.get("name", "?")
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


def write_report(experiment: Any) -> dict[str, Path]:
    """Write the JSON, Markdown and PNG reports of ``experiment`` (an :class:`experiment.Experiment`, not
    imported here so that the report does not import its caller); returns their paths."""
    paths = {kind: experiment.out / f"{experiment.stem}.{kind}" for kind in ("json", "md", "png")}
    wall = time.perf_counter() - experiment.started
    payload = {
        "table": experiment.table,
        "title": experiment.title,
        "scale": asdict(experiment.scale),
        "seed": experiment.seed,
        "wall_seconds": wall,
        "population": {
            "fingerprint": population_fingerprint(experiment.population.genotypes),
            "seconds": experiment.population_seconds,
            "prior": experiment.prior.describe(),
            "metadata": experiment.population.metadata,
        },
        "settings": experiment.settings,
        "rows": [asdict(row) for row in experiment.rows],
        "trainings": experiment.trainings,
        "evaluations": experiment.evaluations,
        "notes": experiment.notes,
        "environment": environment(),
        "outputs": {kind: str(path) for kind, path in paths.items()},
    }
    write_json(paths["json"], payload)
    write_text(paths["md"], markdown(experiment, wall))
    plot(experiment, paths["png"])
    experiment.log(f"wrote {paths['json']}, {paths['md']}, {paths['png']} ({wall:.1f} s in all)")
    return paths


def markdown(experiment: Any, wall: float) -> str:
    """The Markdown report: our numbers next to the paper's, knowledge statements, notes."""
    scale = experiment.scale
    lines = [
        f"# {experiment.title}",
        "",
        experiment.description,
        "",
        f"Scale **{scale.name}**: K = {scale.individuals}, N = {scale.members}, |Q| = {scale.snvs}, reference "
        f"panel {scale.reference}; {scale.steps} training steps, Bayesian attacker {scale.attacker_eval_steps} "
        f"steps, {scale.releases} evaluation releases; seed {experiment.seed}; wall time {wall:.1f} s.",
        "",
    ]
    shown = {key: value for key, value in experiment.settings.items() if not (isinstance(value, list) and len(value) > 8)}
    if shown:
        listed = "; ".join(f"{key} = {value}" for key, value in shown.items())
        lines += [f"Settings (all of them in the JSON): {listed}.", ""]
    lines += [
        "| setting | attack | AUC ± std (ours) | AUC ± std (paper) | ours, raw direction | utility loss "
        "| attack time (s) |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in experiment.rows:
        lines.append(f"| {row.setting} | {row.attack} | {format_auc((row.auc, row.auc_std))} | {format_auc(row.paper)} "
                     f"| {row.raw_auc:.4f} | {row.utility_loss:.5f} | {row.seconds:.2f} |")
    lines += [
        "",
        "AUCs are means over releases, each attack in the direction it fixed from its own shadow data (never "
        "from evaluation labels); \"raw direction\" is the unflipped statistic, the form in which the paper "
        "reports e.g. the adaptive LRT. Utility loss = mean |x - f(D)| over all released outputs.",
        "",
        "Defenses and strongest attack per setting (a defense is only as private as its strongest attack shows):",
    ]
    for setting, payload in experiment.evaluations.items():
        strongest = payload["strongest_attack"]
        gap = payload.get("attack_gap")
        versus = "" if gap is None else f"; best analytic `{gap['best_analytic']}` minus Bayesian AUC {gap['gap']:+.4f}"
        lines.append(f"- {setting} [{_describe_defense(payload['defense'])}]: strongest **{strongest['name']}** "
                     f"(AUC {strongest['auc']:.4f}){versus}")
    utilities = {setting: payload["utility"] for setting, payload in experiment.evaluations.items() if payload.get("utility")}
    if utilities:
        baseline = next(iter(utilities.values()))["data_independent_utility_loss"]
        lines += [
            "",
            f"Against the data-independent release f(theta) (AUC 0.5 against every attack, utility loss {baseline:.5f}):",
            "",
            "| setting | utility loss | relative error | signal retention | strongest AUC | verdict |",
            "|---|---|---|---|---|---|",
            f"| data-independent release f(theta) | {baseline:.5f} | 1 | 0 | 0.5 | baseline |",
        ]
        for setting, utility in utilities.items():
            lines.append(f"| {setting} | {utility['utility_loss']:.5f} | {utility['relative_error']:.3f} | "
                         f"{utility['signal_retention']:.3f} | {experiment.evaluations[setting]['strongest_attack']['auc']:.4f} | "
                         f"{utility['verdict']} |")
    if experiment.trainings:
        lines += ["", "Trained defenders (fresh attacker = a new network trained against the frozen defender):"]
        for label, record in experiment.trainings.items():
            check = record["fresh_attacker_check"]
            fresh = f"fresh attacker AUC {check['auc']:.4f}" if check else "no fresh-attacker check"
            bgbp = record["bgbp"]
            if bgbp is not None and check is not None:
                fresh += (f"; BGBP constraint DPH^{bgbp['epsilon']:g} (Prop. 10: eps_hat = {bgbp['implied_epsilon']:.3f}-DP "
                          f"if it holds), fresh attacker outside its bounds on "
                          f"{check.get('dp_bound_violation_rate', float('nan')):.1%} of outputs")
            delivered = record.get("selected") or record["final"]
            kept = f"state of step {delivered['step']} kept (best against a refitted attacker); " if record.get("selected") else ""
            lines.append(f"- `{label}` ({record['against']}): {fresh}; {kept}in-game held-out utility loss of the learned "
                         f"noise {delivered.get('heldout_utility_loss', float('nan')):.5f}; "
                         f"{record['seconds']:.1f} s{' (reused)' if record['reused'] else ''}.")
    knowledge: dict[str, str] = {}
    for payload in experiment.evaluations.values():
        for name, entry in payload["attacks"].items():
            knowledge.setdefault(name, entry["knowledge"])
    lines += ["", "Attack knowledge:"] + [f"- `{name}`: {text}" for name, text in knowledge.items()]
    if experiment.notes:
        lines += ["", "Notes and warnings:"] + [f"- {note}" for note in experiment.notes]
    versions = ", ".join(f"{name} {value}" for name, value in environment()["packages"].items() if value)
    lines += ["", f"Python {platform.python_version()}; {versions}; torch threads {torch.get_num_threads()}."]
    return "\n".join(lines) + "\n"


def plot(experiment: Any, path: Path) -> Path:
    """Bar chart of our AUC +- std next to the paper's, one pair of bars per row."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = experiment.rows
    labels = [f"{row.setting}\n{row.attack}" for row in rows]
    positions = np.arange(len(rows))
    figure, axis = plt.subplots(figsize=(8.0, 1.2 + 0.55 * len(rows)), dpi=110)
    axis.barh(positions - 0.2, [row.auc for row in rows], height=0.38,
              xerr=[row.auc_std for row in rows], label=f"ours ({experiment.scale.name})", color="tab:blue")
    paper = [(i, row.paper) for i, row in enumerate(rows) if row.paper is not None]
    if paper:
        axis.barh([i + 0.2 for i, _ in paper], [value[0] for _, value in paper], height=0.38,
                  xerr=[value[1] for _, value in paper], label="paper", color="tab:orange")
    axis.axvline(0.5, color="grey", linestyle="--", linewidth=0.8, label="data-independent release (0.5)")
    axis.set_yticks(positions, labels, fontsize=7)
    axis.invert_yaxis()
    axis.set_xlim(0.0, 1.0)
    axis.set_xlabel("AUC (mean ± std over releases)")
    axis.set_title(f"{experiment.table} ({experiment.scale.name}, seed {experiment.seed})", fontsize=9, loc="left")
    axis.legend(loc="lower right", bbox_to_anchor=(1.0, 1.0), ncol=2, fontsize=8, frameon=False)
    figure.tight_layout()
    with atomic_write(path) as handle:
        figure.savefig(handle, format="png")
    plt.close(figure)
    return path
