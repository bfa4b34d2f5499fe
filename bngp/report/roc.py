"""The ROC plot of an evaluation: every attack's true-positive rate against its false-positive rate,
on linear axes and with the false-positive rate on a log axis (arXiv:2410.07414, section 5 reports
the AUC and the TPR at low FPR; Carlini et al., arXiv:2112.03570, argue for the log axis)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from bngp.metrics import RocCurve, roc_curve
from bngp.report import figures

__all__ = ["plot_roc", "BASELINE_ATTACKS", "TABLE_FPRS"]


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
    _style_axes(linear, logarithmic, low)
    left_out = len(curves) - len(drawn)
    note = f"the {len(top)} strongest of {len(curves)} attacks by AUC"
    if left_out:
        note += f" ({left_out} weaker not drawn: see the table)"
    if any(style != "-" for style in dashes.values()):
        note += "; coinciding curves alternate their colours along the line"
    figure.suptitle(title, fontsize=11)
    figure.legend(handles=handles, loc="outside lower center", ncol=3, fontsize=8, title=note, title_fontsize=8,
                  frameon=False)
    return figures.save_png(figure, path)


def _style_axes(linear: Any, logarithmic: Any, low: float) -> None:
    """The axes of :func:`plot_roc`: the linear panel over [0, 1] and a little past it, the log panel
    from ``low`` with the tables' false-positive rates (:data:`TABLE_FPRS`) marked in grey."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

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
