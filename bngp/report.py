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
from bngp.metrics import RocCurve, levelled_off, roc_curve

__all__ = ["plot_roc", "plot_learning_curves", "decision_markdown", "convergence_lines", "training_curve_text", "evaluation_markdown", "plot_tradeoff", "audit_markdown", "mechanism_audit_markdown", "save_png"]


#: attacks drawn in every ROC plot that holds them, however weak: the classic tests of genomic
#: summary statistics (Homer et al. 2008; the fixed-threshold LRT of Sankararaman et al. 2009).
BASELINE_ATTACKS: tuple[str, ...] = ("lrt", "homer")
#: the false-positive rates at which the evaluation tables report the TPR (marked on the log panel).
TABLE_FPRS: tuple[float, ...] = (0.01, 0.001)


def _percent(value: float, _position: object = None) -> str:
    """A rate as a percentage without trailing zeros (0.001 -> "0.1%", 1 -> "100%")."""
    return f"{100 * value:g}%"


def _roc_dashes(name: str, rocs: dict[str, RocCurve]) -> str | tuple[float, tuple[float, float]]:
    """The line style of ``name``'s ROC among ``rocs``: solid, or, when k curves coincide (every
    attack at AUC 1 draws the same curve), dashes of one colour in k that take turns along the line,
    so that each of them shows."""
    same = [other for other, roc in rocs.items()
            if np.array_equal(roc.fpr, rocs[name].fpr) and np.array_equal(roc.tpr, rocs[name].tpr)]
    if len(same) == 1:
        return "-"
    dash = 5.0
    return (dash * same.index(name), (dash, dash * (len(same) - 1)))


def _on_log_axis(roc: RocCurve, low: float) -> tuple[np.ndarray, np.ndarray]:
    """The points of ``roc`` to draw on a log FPR axis starting at ``low``: its vertices (an FPR
    below ``low`` drawn at ``low``) and, between them, points of its straight segments at 400 FPRs
    spread evenly on the log axis, so that a segment keeps its shape there (a straight chord of the
    log axis would be another curve)."""
    grid = np.geomspace(low, 1.0, 400)
    last = np.clip(np.searchsorted(roc.fpr, grid, side="right") - 1, 0, roc.fpr.size - 2)
    x0, x1, y0, y1 = roc.fpr[last], roc.fpr[last + 1], roc.tpr[last], roc.tpr[last + 1]
    between = y0 + (grid - x0) * (y1 - y0) / np.where(x1 > x0, x1 - x0, 1.0)
    x = np.concatenate((np.maximum(roc.fpr, low), grid))
    y = np.concatenate((roc.tpr, np.clip(between, 0.0, 1.0)))
    order = np.argsort(np.concatenate((roc.fpr, grid)), kind="stable")
    return x[order], y[order]


def plot_roc(
    curves: dict[str, tuple[np.ndarray, np.ndarray]],
    path: str | Path,
    title: str = "Membership inference ROC",
    baseline_loss: float | None = None,
    *,
    strongest: int = 5,
    baselines: tuple[str, ...] = BASELINE_ATTACKS,
) -> Path:
    """Plot ROC curves (``curves[name] = (scores, labels)``, pooled over releases) to a PNG file.

    Two panels share one legend below them: the ROC on linear axes, and the same curves with the
    false-positive rate on a log axis from the smallest decade the non-members resolve (1e-4 to
    1e-2) to 1, with the rates of the tables' TPR columns (:data:`TABLE_FPRS`) marked.  Only the
    ``strongest`` curves by headline AUC (the mean of per-release AUCs, as in the tables) are
    drawn, plus any of ``baselines`` present (dashed); the legend's title says how many were left
    out.  Each attack keeps its colour (:func:`bngp.colours.colour_map` of
    :func:`bngp.colours.attack_colour`); a stronger curve lies over a weaker one, curves that
    coincide (every attack at AUC 1) take turns in dashes, and the axes reach past [0, 1] so that
    a curve along the edge stays inside them.  With ``baseline_loss`` the chance line is labelled
    as the data-independent release."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    from bngp.colours import attack_colour, colour_map, role_colour
    from bngp.metrics import release_aucs

    headline = {name: float(release_aucs(scores, labels).mean()) for name, (scores, labels) in curves.items()}
    ranked = sorted(curves, key=lambda name: -headline[name])
    top = ranked[:strongest]
    extra = [name for name in ranked[strongest:] if name in baselines]
    drawn = top + extra
    rocs = {name: roc_curve(*curves[name]) for name in drawn}
    colours = colour_map(drawn, attack_colour)
    negatives = max((roc.n_nonmembers for roc in rocs.values()), default=1000)
    low = 10.0 ** min(-2, max(-4, int(np.floor(np.log10(1 / max(negatives, 1))))))

    figure, (linear, logarithmic) = plt.subplots(1, 2, figsize=(10.0, 5.6), dpi=120, layout="constrained")
    handles = []
    dashes = {name: _roc_dashes(name, {other: rocs[other] for other in top}) for name in top}
    for rank, name in enumerate(drawn):
        roc = rocs[name]
        style = {"color": colours[name], "linewidth": 2.0, "zorder": 3 + len(drawn) - rank,
                 "linestyle": dashes.get(name, "-")}
        if name not in top:
            style.update(linewidth=1.3, zorder=2, linestyle="--")
        linear.plot(roc.fpr, roc.tpr, **style)
        logarithmic.plot(*_on_log_axis(roc, low), **style)
        label = f"{name}{' (baseline)' if name in baselines else ''}: AUC {headline[name]:.3f}"
        handles.append(Line2D([], [], label=label, **{**style, "linestyle": "--" if name not in top else "-"}))
    chance = "chance" if baseline_loss is None else f"data-independent release (loss {baseline_loss:.4f}): chance"
    grid = np.geomspace(low, 1, 200)
    chance_style = {"linestyle": ":", "color": role_colour("chance"), "linewidth": 1.0, "zorder": 1}
    linear.plot([0, 1], [0, 1], **chance_style)
    logarithmic.plot(grid, grid, **chance_style)
    handles.append(Line2D([], [], label=chance, **chance_style))
    marked = [rate for rate in TABLE_FPRS if rate >= low]
    for rate in marked:
        logarithmic.axvline(rate, color="#bbbbbb", linewidth=0.8, zorder=0)
    linear.set_xlim(-0.02, 1.02)
    linear.set_title("ROC", fontsize=10)
    logarithmic.set_xscale("log")
    logarithmic.set_xlim(low / 1.5, 1.1)
    logarithmic.xaxis.set_major_locator(LogLocator(base=10))
    logarithmic.xaxis.set_major_formatter(FuncFormatter(_percent))
    logarithmic.xaxis.set_minor_formatter(NullFormatter())
    grey = f"; grey: the tables' {' and '.join(_percent(rate) for rate in marked)}" if marked else ""
    logarithmic.set_title(f"low false-positive rates (log axis{grey})", fontsize=10)
    for axis in (linear, logarithmic):
        axis.set_ylim(-0.02, 1.03)
        axis.set_xlabel("false positive rate")
        axis.set_ylabel("true positive rate")
        axis.grid(alpha=0.25, which="major")
    left_out = len(curves) - len(drawn)
    note = f"the {len(top)} strongest of {len(curves)} attacks by AUC"
    if left_out:
        note += f" ({left_out} weaker not drawn: see the table)"
    if any(style != "-" for style in dashes.values()):
        note += "; coinciding curves alternate their colours along the line"
    figure.suptitle(title, fontsize=11)
    figure.legend(handles=handles, loc="outside lower center", ncol=3, fontsize=8, title=note, title_fontsize=8,
                  frameon=False)
    return save_png(figure, path)


def _levelled_off(curve: dict) -> bool:
    """A stored learning curve's convergence.  A shadow-release curve of :func:`bngp.ridge.fit_converged`
    is judged from its points (:func:`bngp.metrics.levelled_off`) rather than its stored flag, which
    evaluations stored before the per-doubling rule did not apply; a network's curve with early
    stopping (``patience``, the per-individual attacker) keeps its flag, set by its validation loss."""
    if "patience" in curve:
        return bool(curve["converged"])
    return levelled_off(curve["releases"], curve["auc"], curve["tolerance"])


#: the most labelled ticks on the shadow-release axis of :func:`plot_learning_curves`.
MAX_RELEASE_LABELS = 9


def _count(n: float) -> str:
    """A count in at most four characters and three digits: 250, 8k, 26.8k, 1.2M."""
    for scale, suffix in ((1e6, "M"), (1e3, "k")):
        if n >= scale:
            return f"{n / scale:.3g}{suffix}"
    return f"{n:g}"


def _thinned(sizes: list[int], most: int) -> list[int]:
    """At most ``most`` (>= 2) of the sorted ``sizes`` to label on a log axis, evenly spread: from
    the smallest up, a size is kept when it lies at least 1/(``most`` - 1) of the sizes' log span
    above the last kept one, and the largest takes the place of the last kept one."""
    if len(sizes) <= 1:
        return list(sizes)
    gap = np.log10(sizes[-1] / sizes[0]) / (most - 1)
    kept = [sizes[0]]
    for size in sizes[1:]:
        if np.log10(size / kept[-1]) >= gap:
            kept.append(size)
    kept[-1] = sizes[-1]
    return kept


def plot_learning_curves(
    curves: dict[str, dict], path: str | Path, title: str = "Attackers fitted to convergence",
    training: dict[str, dict] | None = None,
) -> Path:
    """Validation AUC against shadow releases (log scale), one line per attack
    (``curves[name]`` = a :class:`bngp.ridge.LearningCurve` as a dict); a converged curve ends
    with a filled marker.  With ``training`` (``{name: training curve}``, as recorded by
    :meth:`bngp.attacks.training.OptimisationTrace.curve`) a second panel shows the validation AUC
    of each trained network against its Adam steps, the kept state marked by a filled marker.

    Each attack keeps its colour (:func:`bngp.colours.colour_map` of
    :func:`bngp.colours.attack_colour`) in both panels; every size fitted has a tick, at most
    :data:`MAX_RELEASE_LABELS` of them labelled (compactly: 26.8k), and each panel's legend sits
    below it, off the curves."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FixedLocator, MaxNLocator, NullFormatter

    from bngp.colours import attack_colour, colour_map

    panels = int(bool(curves)) + int(bool(training))
    if not panels:
        raise InputError("no learning or training curve to plot.")
    figure, axes = plt.subplots(1, panels, figsize=(5.4 * panels, 4.6), dpi=120, squeeze=False, layout="constrained")
    axes = list(axes[0])
    colours = colour_map([*curves, *(training or {})], attack_colour)
    if curves:
        axis = axes.pop(0)
        for name, curve in curves.items():
            colour = colours[name]
            axis.plot(curve["releases"], curve["auc"], marker="o", markerfacecolor="white", color=colour, label=name)
            if _levelled_off(curve):
                axis.plot(curve["releases"][-1:], curve["auc"][-1:], marker="o", color=colour)
        axis.set_xscale("log")
        sizes = sorted({int(n) for curve in curves.values() for n in curve["releases"]})
        labelled = _thinned(sizes, MAX_RELEASE_LABELS)
        axis.xaxis.set_major_locator(FixedLocator(labelled))
        axis.xaxis.set_major_formatter(lambda value, _position: _count(value))
        axis.xaxis.set_minor_locator(FixedLocator(sorted(set(sizes) - set(labelled))))
        axis.xaxis.set_minor_formatter(NullFormatter())
        axis.tick_params(axis="x", labelsize=8)
        axis.set_xlabel("shadow releases (log axis; every size fitted has a tick)")
        axis.set_ylabel("validation AUC")
        axis.set_title(title, fontsize=10)
        axis.grid(alpha=0.25)
        axis.legend(fontsize=8, title="filled marker: converged", title_fontsize=7, loc="upper center",
                    bbox_to_anchor=(0.5, -0.15), ncol=3, frameon=False)
    if training:
        axis = axes.pop(0)
        for name, curve in training.items():
            colour = colours[name]
            axis.plot(curve["steps"], curve["auc"], marker=".", color=colour, label=name)
            kept = curve["steps"].index(curve["best_step"])
            axis.plot([curve["best_step"]], [curve["auc"][kept]], marker="o", markersize=8, color=colour)
        axis.xaxis.set_major_locator(MaxNLocator(6, integer=True))
        axis.tick_params(axis="x", labelsize=8)
        axis.set_xlabel("Adam steps")
        axis.set_ylabel("validation AUC")
        axis.set_title(title if not curves else "Trained attackers by step", fontsize=10)
        axis.grid(alpha=0.25)
        axis.legend(fontsize=8, title="large marker: state kept", title_fontsize=7, loc="upper center",
                    bbox_to_anchor=(0.5, -0.15), ncol=3, frameon=False)
    return save_png(figure, path)


def evaluation_markdown(payload: dict, title: str = "Evaluation") -> str:
    """The Markdown report of an EVAL.json payload: its decision block first (when the payload has one,
    :meth:`bngp.decision.ReleaseDecision.markdown_lines` as stored by ``to_dict``), then one row per attack."""
    lines = [f"## {title}", ""]
    if payload.get("decision"):
        lines += decision_markdown(payload["decision"])
    lines += [f"Defense: `{payload['defense'].get('name')}`; utility loss (mean |x - f(D)|): "
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
        ]
        if not payload.get("decision"):
            lines += ["", f"The defense is {utility['verdict']}."]
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


def decision_markdown(decision: dict) -> list[str]:
    """The decision block of a report from a stored decision (``ReleaseDecision.to_dict()``)."""
    strongest = decision["strongest"]
    budget = "" if decision["budget"] is None else (
        f"; utility budget {decision['budget']:.5g}: {'met' if decision['budget_met'] else 'NOT met'}")
    lines = ["### Decision", "", f"**This release is {decision['sentence']}.**", "",
             f"- Utility loss mean abs(x - f(D)): {decision['utility_loss']:.5g}; the data-independent release f(theta) "
             f"has {decision['data_independent_loss']:.5g}{budget}.",
             f"- Strongest attack: `{strongest['name']}`, AUC {strongest['auc']:.4f}, TPR "
             f"{strongest['tpr_at_1pct_fpr']:.3f} at 1% FPR and {strongest['tpr_at_0.1pct_fpr']:.3f} at 0.1% FPR.", "",
             "Every mechanism at the same utility loss, read by the same converged linear attack (ridge and whitened "
             "maps from release to membership; lower is more private):", "",
             "| mechanism | utility loss | AUC | TPR at 1% FPR | TPR at 0.1% FPR | eps |", "|---|---|---|---|---|---|"]
    for row in decision["rows"]:
        epsilon = "-" if row["epsilon"] is None else f"{row['epsilon']:.3g}"
        lines.append(f"| {row['label']} | {row['loss']:.5g} | {row['auc']:.4f} | {row['tpr_at_1pct_fpr']:.3f} | "
                     f"{row['tpr_at_0.1pct_fpr']:.3f} | {epsilon} |")
    if len(decision["rows"]) <= 2:
        lines += ["", "No mechanism is calibrated to this loss: it is the exact release's (below 0.1% of the "
                      "data-independent release's) or at least the data-independent release's."]
    lines += ["", f"Differences below {decision['tolerance']} AUC are not read as differences; seed {decision['seed']}.",
              ""]
    return lines


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


#: the line style and marker of each role of an audit plot (:func:`bngp.colours.role`, the leading
#: word of a label), so that a role looks the same in every file.
_ROLE_LINES = {"claim": "-", "certified": "--", "gdp": "-.", "fdp-one-run": ":"}
_ROLE_MARKERS = {"guesses": "o", "error-rate": "s"}


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

    A curve's or point's colour, line style and marker follow its role, the leading word of its
    label (``claim``, ``certified``, ``gdp``, ``fdp-one-run``, ``guesses``, ``error-rate``;
    :func:`bngp.colours.role_colour`), never its position in the list, so a role looks the same
    in every audit plot.  The legend sits below the axes, and the axes reach past [0, 1] so that
    a curve along the edge stays inside them.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MultipleLocator

    from bngp.colours import role, role_colour

    figure, axis = plt.subplots(figsize=(5.6, 6.6), dpi=120, layout="constrained")
    if region is not None:
        empirical = role_colour("empirical")
        upper = np.column_stack((region["alpha_upper"], region["beta_upper"]))
        lower = np.column_stack((region["alpha_lower"], region["beta_lower"]))[::-1]
        axis.fill(*np.vstack((upper, lower)).T, color=empirical, alpha=0.2, linewidth=0,
                  label=f"simultaneous {100 * region['confidence']:g}% region")
        axis.plot(region["alpha_upper"], region["beta_upper"], color=empirical, linewidth=0.8, linestyle=":",
                  label="conservative corner (upper limits)")
        axis.plot(region["alpha"], region["beta"], color=empirical, linewidth=1.6, label="empirical (FPR, FNR)")
    for label, x, y in curves:
        axis.plot(x, y, color=role_colour(label), linestyle=_ROLE_LINES.get(role(label), "-"), linewidth=1.6,
                  label=label, zorder=3)
    for label, x, y in points:
        axis.plot([x], [y], marker=_ROLE_MARKERS.get(role(label), "D"), color=role_colour(label), linestyle="none",
                  markersize=7, label=label, zorder=4)
    axis.plot([0, 1], [1, 0], linestyle="--", color=role_colour("chance"), linewidth=0.8, label="random guessing")
    axis.set_xlabel("false positive rate alpha (non-member called member)")
    axis.set_ylabel("false negative rate beta (member missed)")
    axis.set_xlim(-0.015, 1.015)
    axis.set_ylim(-0.015, 1.015)
    for ticks in (axis.xaxis, axis.yaxis):
        ticks.set_major_locator(MultipleLocator(0.2))
    axis.grid(alpha=0.25)
    axis.set_title(title, fontsize=10)
    figure.legend(loc="outside lower center", fontsize=7, frameon=False)
    return save_png(figure, path)


def save_png(figure: Any, path: str | Path) -> Path:
    """Write ``figure`` to ``path`` as a PNG atomically and close it; a figure without a layout
    engine of its own (constrained layout, say) is laid out tightly first."""
    import matplotlib.pyplot as plt

    if figure.get_layout_engine() is None:
        figure.tight_layout()
    with atomic_write(path) as handle:
        figure.savefig(handle, format="png")
    plt.close(figure)
    return Path(path)


def _number(value: object, digits: int = 4) -> str:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return f"{value:.{digits}f}" if abs(value) >= 1e-3 or value == 0 else f"{value:.3g}"
    return str(value)


def _claim_cell(row: dict) -> str:
    """The claim column of an audit table: refuted, consistent, or why there is no verdict."""
    if row.get("claim_refuted") is not None:
        return "refuted" if row["claim_refuted"] else "consistent"
    return str(row.get("claim_verdict") or "").split(":", 1)[0]


def _reading_lines(payload: dict) -> list[str]:
    """The bound's design ceiling and, with a claim, the claimed eps and the verdict."""
    lines = [f"Design ceiling: {payload['reading']} ({payload['ceiling_state']})."]
    if payload.get("claim_verdict"):
        lines += ["", f"Claimed eps: **{payload['claim_verdict']}**."]
    return lines


def audit_markdown(payload: dict, rows: list[dict], notes: list[str] = ()) -> str:
    """The Markdown report of an AUDIT.json payload of ``bngp audit``.

    ``rows`` are the table's rows (``method``, ``epsilon_lb``, ``epsilon_ceiling``, ``epsilon_kind``,
    ``confidence``, ``delta``, ``detail`` and the claim fields ``claim_refuted``, ``claim_verdict``),
    one per method run; ``payload`` gives the header (``input``, ``rows``, ``runs``, ``method``,
    ``confidence``, ``delta``, ``epsilon_lb``, ``epsilon_kind``, ``reading``, ``ceiling_state`` and,
    when present, ``attack``, ``epsilon_lb_method``, ``claimed_epsilon``, ``claim_verdict``,
    ``claim``, ``tradeoff`` and ``report``).
    """
    source = f"`{payload['input']}`" + (f" (attack `{payload['attack']}`)" if payload.get("attack") else "")
    lines = [
        "## Privacy audit",
        "",
        f"Input: {source}, {payload['rows']} rows; method: `{payload['method']}`; confidence "
        f"{payload['confidence']:g}; delta {payload['delta']:g}.",
        "",
        f"Runs: {payload['runs']}.",
        "",
    ]
    origin = f", from `{payload['epsilon_lb_method']}`" if payload.get("epsilon_lb_method") else ""
    lines += [f"**epsilon_lb = {_number(payload['epsilon_lb'])}** ({payload['epsilon_kind']}{origin}).", ""]
    lines += _reading_lines(payload) + [""]
    claimed = any(row.get("claim_verdict") for row in rows)
    lines += ["| method | epsilon_lb | design ceiling | kind | confidence | delta |" + (" claimed eps |" if claimed else "")
              + " detail |", "|---|---|---|---|---|---|" + ("---|" if claimed else "") + "---|"]
    for row in rows:
        claim_cell = f" {_claim_cell(row)} |" if claimed else ""
        lines.append(
            f"| {row['method']} | {_number(row['epsilon_lb'])} | {_number(row['epsilon_ceiling'])} | "
            f"{row['epsilon_kind']} | {row['confidence']:g} | {row['delta']:g} |{claim_cell} {row['detail']} |"
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
        lines += ["", f"Claim `{claim['claim']}` (its trade-off curve): {verdict} at confidence "
                  f"{claim['confidence']:g} ({where}; assumes {claim['assumption']})."]
    tradeoff = payload.get("tradeoff")
    if tradeoff:
        lines += [
            "",
            f"Trade-off region: {tradeoff['thresholds_examined']} thresholds ({tradeoff['decision_rule']}) over "
            f"{tradeoff['n_nonmembers']} non-members and {tradeoff['n_members']} members; simultaneous at "
            f"confidence {tradeoff['confidence']:g} ({tradeoff['union_bound']}).",
        ]
    return _plot_and_notes(lines, payload, notes, "trade-off plot: FPR on x, FNR on y")


def mechanism_audit_markdown(payload: dict, rows: list[dict], notes: list[str] = ()) -> str:
    """The Markdown report of an AUDIT.json payload of ``bngp audit-mechanism``.

    ``rows`` are the table's rows (``bound``, ``epsilon_lb``, ``epsilon_ceiling``, ``kind``,
    ``detail``): the number reported as ``epsilon_lb`` and the bounds it comes from or stands
    beside.  ``payload`` gives the header (``mode``, ``defense.spec``, ``population``, ``attack.name``,
    ``confidence``, ``delta``, ``design``, ``seed``, ``epsilon_lb``, ``is_lower_bound``,
    ``interpretation``, ``reading``, ``ceiling_state``, ``claimed_epsilon``, ``claim_verdict``,
    ``claimed_guarantee`` and, when present, ``report``).
    """
    design = payload["design"]
    lines = [
        f"## Mechanism audit: `{payload['defense']['spec']}` ({payload['mode']})",
        "",
        f"Population: `{payload['population']}` ({design['individuals']} individuals, {design['attributes']} "
        f"attributes); attack `{payload['attack']['name']}`; confidence {payload['confidence']:g}; delta "
        f"{payload['delta']:g}; neighbouring {design['neighbouring']}; seed {payload['seed']}.",
        "",
    ]
    kind = "lower bound" if payload["is_lower_bound"] else "measurement, not a lower bound"
    lines += [f"**epsilon_lb = {_number(payload['epsilon_lb'])}** ({kind}): {payload['interpretation']}.", ""]
    lines += _reading_lines(payload)
    guarantee = payload.get("claimed_guarantee")
    if guarantee is None:
        lines += ["", "Claimed eps: none (the defense states no DP guarantee)."]
    lines += ["", "| bound | epsilon_lb | design ceiling | kind | detail |", "|---|---|---|---|---|"]
    for row in rows:
        lines.append(f"| {row['bound']} | {_number(row['epsilon_lb'])} | {_number(row['epsilon_ceiling'])} | "
                     f"{row['kind']} | {row['detail']} |")
    return _plot_and_notes(lines, payload, notes, "trade-off plot of the audit's scores: FPR on x, FNR on y")


def _plot_and_notes(lines: list[str], payload: dict, notes: list[str], caption: str) -> str:
    """An audit report's end: its plot (``payload["report"]["png"]``, by file name) and its notes."""
    png = payload.get("report", {}).get("png")
    if png:
        lines += ["", f"![{caption}]({Path(png).name})"]
    if notes:
        lines.append("")
    lines += [f"- Note: {note}" for note in notes]
    return "\n".join(lines) + "\n"
