"""Human-readable outputs: ROC plots (PNG) and Markdown summaries, written atomically."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from bngp.io_utils import atomic_write
from bngp.metrics import roc_curve

__all__ = ["plot_roc", "plot_learning_curves", "evaluation_markdown"]


def plot_roc(
    curves: dict[str, tuple[np.ndarray, np.ndarray]],
    path: str | Path,
    title: str = "Membership inference ROC",
    baseline_loss: float | None = None,
) -> Path:
    """Plot one ROC curve per attack (``curves[name] = (scores, labels)``, pooled over releases) to a
    PNG file; the legend gives the headline AUC, the mean of per-release AUCs as in the tables.
    With ``baseline_loss`` the chance line is labelled as the data-independent release."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from bngp.metrics import release_aucs

    figure, axis = plt.subplots(figsize=(5.2, 5.0), dpi=120)
    colours = plt.get_cmap("tab20").colors
    for index, (name, (scores, labels)) in enumerate(curves.items()):
        curve = roc_curve(scores, labels)
        axis.plot(curve.fpr, curve.tpr, color=colours[(2 * index) % 20 + (index // 10) % 2], label=f"{name} (AUC {release_aucs(scores, labels).mean():.3f})", linewidth=1.6)
    chance = "chance" if baseline_loss is None else f"data-independent release (loss {baseline_loss:.4f}): chance"
    axis.plot([0, 1], [0, 1], linestyle="--", color="grey", linewidth=0.8, label=chance)
    axis.set_xlabel("False positive rate")
    axis.set_ylabel("True positive rate")
    axis.set_xlim(0, 1)
    axis.set_ylim(0, 1.01)
    axis.set_title(title)
    axis.legend(loc="lower right", fontsize=8)
    figure.tight_layout()
    with atomic_write(path) as handle:
        figure.savefig(handle, format="png")
    plt.close(figure)
    return Path(path)


def plot_learning_curves(curves: dict[str, dict], path: str | Path, title: str = "Attackers fitted to convergence") -> Path:
    """Validation AUC against shadow releases (log scale), one line per attack
    (``curves[name]`` = a :class:`bngp.ridge.LearningCurve` as a dict); a converged curve ends
    with a filled marker."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(5.2, 3.8), dpi=120)
    for name, curve in curves.items():
        line = axis.plot(curve["releases"], curve["auc"], marker="o", markerfacecolor="none", label=name)[0]
        if curve["converged"]:
            axis.plot(curve["releases"][-1:], curve["auc"][-1:], marker="o", color=line.get_color())
    axis.set_xscale("log")
    sizes = sorted({n for curve in curves.values() for n in curve["releases"]})
    axis.set_xticks(sizes, [f"{n:,}" for n in sizes], fontsize=7)
    axis.minorticks_off()
    axis.set_xlabel("shadow releases")
    axis.set_ylabel("validation AUC")
    axis.set_title(title, fontsize=10)
    axis.legend(fontsize=8, title="filled: converged", title_fontsize=7)
    figure.tight_layout()
    with atomic_write(path) as handle:
        figure.savefig(handle, format="png")
    plt.close(figure)
    return Path(path)


def evaluation_markdown(payload: dict, title: str = "Evaluation") -> str:
    """A Markdown table of an EVAL.json payload (one row per attack)."""
    lines = [f"## {title}", "", f"Defense: `{payload['defense'].get('name')}`; utility loss (mean |x - f(D)|): "
             f"{payload['utility_loss']:.5f}; releases: {payload['releases']}; seed: {payload['seed']}.", "",
             "| attack | AUC | std | TPR@10% | TPR@1% | TPR@0.1% | advantage |", "|---|---|---|---|---|---|---|"]
    for name, entry in payload["attacks"].items():
        tpr = entry["tpr_at_fpr"]
        lines.append(
            f"| {name} | {entry['auc']:.4f} | {entry['auc_std']:.4f} | {tpr['0.1']:.3f} | {tpr['0.01']:.3f} | "
            f"{tpr['0.001']:.3f} | {entry['advantage']:.3f} |"
        )
    strongest = payload["strongest_attack"]
    lines += ["", f"Strongest attack: **{strongest['name']}** (AUC {strongest['auc']:.4f}) - this is the privacy result."]
    utility = payload.get("utility")
    if utility:
        lines += [
            "",
            "| release | utility loss mean abs(x - f(D)) | relative error | signal retention | strongest-attack AUC |",
            "|---|---|---|---|---|",
            f"| this defense | {utility['utility_loss']:.5f} | {utility['relative_error']:.3f} | "
            f"{utility['signal_retention']:.3f} | {strongest['auc']:.4f} |",
            f"| data-independent release f(theta) (baseline) | {utility['data_independent_utility_loss']:.5f} | 1 | 0 | 0.5 |",
            "",
            f"The defense is {utility['verdict']}.",
        ]
    curves = {name: entry["learning_curve"] for name, entry in payload["attacks"].items() if "learning_curve" in entry}
    if curves:
        lines += ["", "Learning curves (validation AUC by shadow releases; converged = the last doubling gained "
                  "less than the tolerance):"]
        for name, curve in curves.items():
            points = ", ".join(f"{n}: {a:.4f}" for n, a in zip(curve["releases"], curve["auc"]))
            state = "converged" if curve["converged"] else "NOT converged (cap or fixed size reached)"
            fit = payload["attacks"][name].get("fit", {})
            lines.append(f"- `{name}`: {points} ({state}; penalty {fit.get('ridge', float('nan')):.3g} by {fit.get('criterion')})")
    for note in payload.get("notes", []):
        lines.append(f"- Note: {note}")
    for name, entry in payload["attacks"].items():
        if entry.get("orientation_note"):
            lines.append(f"- `{name}` orientation: {entry['orientation_note']}")
    lines += ["", "Attack knowledge:"]
    lines += [f"- `{name}`: {entry['knowledge']}" for name, entry in payload["attacks"].items()]
    return "\n".join(lines) + "\n"
