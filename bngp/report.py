"""Human-readable outputs: ROC plots (PNG) and Markdown summaries, written atomically.

Plain arrays and dicts in, files out: the audit report (:func:`plot_tradeoff`,
:func:`audit_markdown`) gets its curves from the command, since this module may not import
:mod:`bngp.audit` (same layer).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from bngp.errors import InputError
from bngp.io_utils import atomic_write
from bngp.metrics import levelled_off, roc_curve

__all__ = ["plot_roc", "plot_learning_curves", "convergence_lines", "training_curve_text", "evaluation_markdown", "plot_tradeoff", "audit_markdown", "save_png"]


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
    return save_png(figure, path)


def _levelled_off(curve: dict) -> bool:
    """A stored learning curve's convergence.  A shadow-release curve of :func:`bngp.ridge.fit_converged`
    is judged from its points (:func:`bngp.metrics.levelled_off`) rather than its stored flag, which
    evaluations stored before the per-doubling rule did not apply; a network's curve with early
    stopping (``patience``, the per-individual attacker) keeps its flag, set by its validation loss."""
    if "patience" in curve:
        return bool(curve["converged"])
    return levelled_off(curve["releases"], curve["auc"], curve["tolerance"])


def plot_learning_curves(
    curves: dict[str, dict], path: str | Path, title: str = "Attackers fitted to convergence",
    training: dict[str, dict] | None = None,
) -> Path:
    """Validation AUC against shadow releases (log scale), one line per attack
    (``curves[name]`` = a :class:`bngp.ridge.LearningCurve` as a dict); a converged curve ends
    with a filled marker.  With ``training`` (``{name: training curve}``, as recorded by
    :meth:`bngp.attacks.training.OptimisationTrace.curve`) a second panel shows the validation AUC
    of each trained network against its Adam steps, the kept state marked by a filled marker."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = int(bool(curves)) + int(bool(training))
    if not panels:
        raise InputError("no learning or training curve to plot.")
    figure, axes = plt.subplots(1, panels, figsize=(5.2 * panels, 3.8), dpi=120, squeeze=False)
    axes = list(axes[0])
    if curves:
        axis = axes.pop(0)
        for name, curve in curves.items():
            line = axis.plot(curve["releases"], curve["auc"], marker="o", markerfacecolor="none", label=name)[0]
            if _levelled_off(curve):
                axis.plot(curve["releases"][-1:], curve["auc"][-1:], marker="o", color=line.get_color())
        axis.set_xscale("log")
        sizes = sorted({n for curve in curves.values() for n in curve["releases"]})
        axis.set_xticks(sizes, [f"{n:,}" for n in sizes], fontsize=7)
        axis.minorticks_off()
        axis.set_xlabel("shadow releases")
        axis.set_ylabel("validation AUC")
        axis.set_title(title, fontsize=10)
        axis.legend(fontsize=8, title="filled: converged", title_fontsize=7)
    if training:
        axis = axes.pop(0)
        for name, curve in training.items():
            line = axis.plot(curve["steps"], curve["auc"], marker=".", label=name)[0]
            kept = curve["steps"].index(curve["best_step"])
            axis.plot([curve["best_step"]], [curve["auc"][kept]], marker="o", color=line.get_color())
        axis.set_xlabel("Adam steps")
        axis.set_ylabel("validation AUC")
        axis.set_title(title if not curves else "Trained attackers by step", fontsize=10)
        axis.legend(fontsize=8, title="filled: state kept", title_fontsize=7)
    return save_png(figure, path)


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
    budget = payload.get("budget")
    if budget:
        lines += ["", f"Utility budget: {budget['budget']:.5g} ({budget['fraction_of_data_independent']:.3g} of the "
                      f"data-independent release's {budget['data_independent_loss']:.5g}); measured loss "
                      f"{budget['measured_loss']:.5g} (one release per each of 2,000 fixed memberships): "
                      f"**{'met' if budget['met'] else 'NOT met'}**."]
    lines += convergence_lines(payload["attacks"])
    for note in payload.get("notes", []):
        lines.append(f"- Note: {note}")
    for name, entry in payload["attacks"].items():
        if entry.get("orientation_note"):
            lines.append(f"- `{name}` orientation: {entry['orientation_note']}")
    lines += ["", "Attack knowledge:"]
    lines += [f"- `{name}`: {entry['knowledge']}" for name, entry in payload["attacks"].items()]
    return "\n".join(lines) + "\n"


def convergence_lines(attacks: dict[str, dict]) -> list[str]:
    """Markdown lines showing that the attacks of an evaluation (its ``attacks`` entries) were
    fitted to convergence: each learning curve (validation AUC by shadow releases, with the
    penalty or state chosen) and each trained network's training curve (validation AUC by Adam
    step, :func:`training_curve_text`); no lines when no entry carries a curve."""
    lines: list[str] = []
    curves = {name: entry["learning_curve"] for name, entry in attacks.items() if "learning_curve" in entry}
    if curves:
        lines += ["", "Learning curves (validation AUC by shadow releases; converged = the last step gained "
                  "less than the tolerance per doubling):"]
        for name, curve in curves.items():
            points = ", ".join(f"{n}: {a:.4f}" for n, a in zip(curve["releases"], curve["auc"]))
            state = "converged" if _levelled_off(curve) else "NOT converged (cap or fixed size reached)"
            fit = attacks[name].get("fit", {})
            if "ridge" in fit:
                chosen = f"penalty {fit['ridge']:.3g} by {fit.get('criterion')}"
            else:  # a network trained with early stopping (the per-individual attacker)
                chosen = f"state of step {fit.get('best_step')} kept by {fit.get('criterion')}"
            lines.append(f"- `{name}`: {points} ({state}; {chosen})")
    trained = {name: entry["training_curve"] for name, entry in attacks.items() if entry.get("training_curve")}
    if trained:
        lines += ["", "Training curves (validation AUC by Adam step; the state of least validation cross-entropy is kept):"]
        lines += [f"- `{name}`: {training_curve_text(curve)}" for name, curve in trained.items()]
    return lines


def training_curve_text(curve: dict) -> str:
    """One line for a trained attacker's training curve (see :func:`plot_learning_curves`): the
    validation AUC at each validated step, the kept step, and whether the loss was still falling."""
    points = ", ".join(f"{step}: {auc:.4f}" for step, auc in zip(curve["steps"], curve["auc"]))
    if curve["still_improving"]:
        state = "NOT shown converged: the validation loss was still falling at the last step"
    else:
        state = "stopped early: the validation loss stopped falling" if curve["stopped_early"] else "converged"
    return (f"{points} (on {curve['validation_releases']:,} held-out releases; state of step {curve['best_step']} kept; "
            f"{state})")


def plot_tradeoff(
    path: str | Path,
    *,
    region: dict | None = None,
    curves: list[tuple[str, np.ndarray, np.ndarray]] = (),
    points: list[tuple[str, float, float]] = (),
    title: str = "Empirical trade-off curve",
) -> Path:
    """Plot FNR against FPR (the f-DP picture, Dong, Roth, Su, arXiv:1905.02383) to a PNG file.

    ``region`` holds the arrays of :class:`bngp.audit.EmpiricalTradeoff` as a dict (``alpha``,
    ``beta`` and the ``_upper``/``_lower`` limits, plus ``confidence``): the point estimates are
    drawn as a line and the simultaneous region as a shaded band between the conservative
    corners (alpha_upper, beta_upper) and the optimistic ones (alpha_lower, beta_lower).
    ``curves`` are (label, x, y) trade-off functions (a claim, the certified eps), ``points``
    single (label, FPR, FNR) points (the bits audit).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(5.4, 5.0), dpi=120)
    if region is not None:
        upper = np.column_stack((region["alpha_upper"], region["beta_upper"]))
        lower = np.column_stack((region["alpha_lower"], region["beta_lower"]))[::-1]
        axis.fill(*np.vstack((upper, lower)).T, color="tab:blue", alpha=0.2, linewidth=0,
                  label=f"simultaneous {100 * region['confidence']:g}% region")
        axis.plot(region["alpha_upper"], region["beta_upper"], color="tab:blue", linewidth=0.8, linestyle=":",
                  label="conservative corner (upper limits)")
        axis.plot(region["alpha"], region["beta"], color="tab:blue", linewidth=1.6, label="empirical (FPR, FNR)")
    styles = [("tab:red", "-"), ("tab:green", "--"), ("tab:purple", "-."), ("tab:orange", ":")]
    for index, (label, x, y) in enumerate(curves):
        colour, style = styles[index % len(styles)]
        axis.plot(x, y, color=colour, linestyle=style, linewidth=1.4, label=label)
    markers = ["o", "s", "^", "D"]
    for index, (label, x, y) in enumerate(points):
        axis.plot([x], [y], marker=markers[index % len(markers)], linestyle="none", markersize=6, label=label)
    axis.plot([0, 1], [1, 0], linestyle="--", color="grey", linewidth=0.8, label="random guessing")
    axis.set_xlabel("false positive rate alpha (non-member called member)")
    axis.set_ylabel("false negative rate beta (member missed)")
    axis.set_xlim(0, 1)
    axis.set_ylim(0, 1.01)
    axis.set_title(title, fontsize=10)
    axis.legend(loc="upper right", fontsize=7)
    return save_png(figure, path)


def save_png(figure: Any, path: str | Path) -> Path:
    """Lay out ``figure``, write it to ``path`` as a PNG atomically and close it."""
    import matplotlib.pyplot as plt

    figure.tight_layout()
    with atomic_write(path) as handle:
        figure.savefig(handle, format="png")
    plt.close(figure)
    return Path(path)


def _number(value: object, digits: int = 4) -> str:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return f"{value:.{digits}f}" if abs(value) >= 1e-3 or value == 0 else f"{value:.3g}"
    return str(value)


def audit_markdown(payload: dict, rows: list[dict], notes: list[str] = ()) -> str:
    """The Markdown report of an AUDIT.json payload of ``bngp audit``.

    ``rows`` are the table's rows (``method``, ``epsilon_lb``, ``epsilon_kind``, ``confidence``,
    ``delta``, ``detail``), one per method run; ``payload`` gives the header (``input``,
    ``rows``, ``method``, ``confidence``, ``delta``, ``epsilon_lb``, ``epsilon_kind`` and,
    when present, ``attack``, ``epsilon_lb_method``, ``claim``, ``tradeoff`` and ``report``).
    """
    source = f"`{payload['input']}`" + (f" (attack `{payload['attack']}`)" if payload.get("attack") else "")
    lines = [
        "## Privacy audit",
        "",
        f"Input: {source}, {payload['rows']} rows; method: `{payload['method']}`; confidence "
        f"{payload['confidence']:g}; delta {payload['delta']:g}.",
        "",
    ]
    origin = f", from `{payload['epsilon_lb_method']}`" if payload.get("epsilon_lb_method") else ""
    lines += [f"**epsilon_lb = {_number(payload['epsilon_lb'])}** ({payload['epsilon_kind']}{origin}).", ""]
    lines += ["| method | epsilon_lb | kind | confidence | delta | detail |", "|---|---|---|---|---|---|"]
    for row in rows:
        lines.append(
            f"| {row['method']} | {_number(row['epsilon_lb'])} | {row['epsilon_kind']} | {row['confidence']:g} | "
            f"{row['delta']:g} | {row['detail']} |"
        )
    claim = payload.get("claim")
    if claim:
        where = (
            f"at FPR <= {_number(claim['alpha'])} the FNR is at most {_number(claim['beta_upper'])}, below the "
            f"claimed {_number(claim['claimed_beta'])}"
            if claim["refuted"]
            else f"closest point: FPR <= {_number(claim['alpha'])}, FNR <= {_number(claim['beta_upper'])}, claimed "
            f"FNR >= {_number(claim['claimed_beta'])}"
        )
        verdict = "**refuted**" if claim["refuted"] else "**not refuted**"
        lines += ["", f"Claim `{claim['claim']}`: {verdict} at confidence {claim['confidence']:g} ({where}; "
                  f"assumes {claim['assumption']})."]
    tradeoff = payload.get("tradeoff")
    if tradeoff:
        lines += [
            "",
            f"Trade-off region: {tradeoff['thresholds_examined']} thresholds ({tradeoff['decision_rule']}) over "
            f"{tradeoff['n_nonmembers']} non-members and {tradeoff['n_members']} members; simultaneous at "
            f"confidence {tradeoff['confidence']:g} ({tradeoff['union_bound']}).",
        ]
    report = payload.get("report", {})
    if report.get("png"):
        name = Path(report["png"]).name
        lines += ["", f"![trade-off plot: FPR on x, FNR on y]({name})"]
    if notes:
        lines.append("")
    for note in notes:
        lines.append(f"- Note: {note}")
    return "\n".join(lines) + "\n"
