"""Human-readable outputs: ROC plots (PNG) and Markdown summaries, written atomically."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from bngp.io_utils import atomic_write
from bngp.metrics import roc_curve

__all__ = ["plot_roc", "evaluation_markdown"]


def plot_roc(curves: dict[str, tuple[np.ndarray, np.ndarray]], path: str | Path, title: str = "Membership inference ROC") -> Path:
    """Plot one ROC curve per attack (``curves[name] = (scores, labels)``) to a PNG file."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from bngp.metrics import auc

    figure, axis = plt.subplots(figsize=(5.2, 5.0), dpi=120)
    for name, (scores, labels) in curves.items():
        curve = roc_curve(scores, labels)
        axis.plot(curve.fpr, curve.tpr, label=f"{name} (AUC {auc(scores, labels):.3f})", linewidth=1.6)
    axis.plot([0, 1], [0, 1], linestyle="--", color="grey", linewidth=0.8, label="chance")
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
    for note in payload.get("notes", []):
        lines.append(f"- Note: {note}")
    for name, entry in payload["attacks"].items():
        if entry.get("orientation_note"):
            lines.append(f"- `{name}` orientation: {entry['orientation_note']}")
    lines += ["", "Attack knowledge:"]
    lines += [f"- `{name}`: {entry['knowledge']}" for name, entry in payload["attacks"].items()]
    return "\n".join(lines) + "\n"
