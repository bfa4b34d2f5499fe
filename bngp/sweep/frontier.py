"""The privacy-utility frontier of a sweep as a PNG: utility loss against the strongest attack's
AUC, one panel per dataset, one colour per defense family (:func:`bngp.colours.method_colour`, the
same in every plot) and one marker per defense; with an ``audit``, a second row of panels plots
utility loss against each cell's audited eps lower bound."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from bngp.colours import colour_map, method_colour
from bngp.report import save_png

from .results import CellResult

__all__ = ["plot_frontier"]

_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")


def _plot_families(axis: Any, finished: list[CellResult], families: list[str],
                   value: Callable[[CellResult], float]) -> None:
    """Each finished cell as a point (utility loss, ``value``) and, per defense, a line through its
    mean over seeds at each kappa or eps, in its family's colour and the defense's marker."""
    colours = colour_map(families, method_colour)
    for index, defense in enumerate(families):
        points: dict[float, list[tuple[float, float]]] = defaultdict(list)
        for result in finished:
            if result.cell.defense == defense:
                points[result.cell.parameter].append((result.utility_loss, value(result)))
        if not points:
            continue
        style = {"color": colours[defense], "marker": _MARKERS[index % len(_MARKERS)]}
        every = np.array([point for group in points.values() for point in group])
        axis.scatter(every[:, 0], every[:, 1], alpha=0.45, s=22, **style)
        means = np.array([np.mean(points[parameter], axis=0) for parameter in sorted(points)])
        axis.plot(means[:, 0], means[:, 1], linewidth=1.4, markersize=6, label=defense, **style)


def _utility_axis(axis: Any, finished: list[CellResult]) -> None:
    """Label the utility-loss axis; log scale when the losses span more than a factor of 20 (a grid
    of eps over decades), with plain labels at 1, 2 and 5 times each power of ten (only the powers
    beyond two decades); at most six ticks otherwise, so that the labels do not overlap."""
    from matplotlib.ticker import LogLocator, MaxNLocator, NullFormatter

    losses = [r.utility_loss for r in finished if r.utility_loss and r.utility_loss > 0]
    if losses and max(losses) > 20 * min(losses):
        axis.set_xscale("log")
        decades = np.log10(max(losses) / min(losses))
        axis.xaxis.set_major_locator(LogLocator(subs=(1.0,) if decades > 2 else (1.0, 2.0, 5.0)))
        axis.xaxis.set_major_formatter(lambda value, _position: f"{value:g}")
        axis.xaxis.set_minor_formatter(NullFormatter())
    else:
        axis.xaxis.set_major_locator(MaxNLocator(6))
    axis.set_xlabel("utility loss (mean |x - f(D)|)")


def plot_frontier(results: tuple[CellResult, ...], path: str | Path) -> Path:
    """Plot every successful cell as a point (utility loss, strongest-attack AUC), and per
    defense a line through its mean over seeds at each kappa or eps; the grey star is the
    data-independent release (its utility loss, AUC 0.5).  When cells carry an audit, a second
    row (one panel per dataset) plots utility loss against the audited eps lower bound, with the
    same colours, markers and mean lines.  One legend, right of the panels, serves them all; each
    row is as tall with or without the other.  Written atomically."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    datasets = list(dict.fromkeys(result.cell.dataset.name for result in results))
    families = list(dict.fromkeys(result.cell.defense for result in results))
    audited = any(result.ok and result.audit is not None for result in results)
    rows = 2 if audited else 1
    figure, axes = plt.subplots(rows, len(datasets), figsize=(4.6 * len(datasets) + 2.2, 4.4 * rows), dpi=120,
                                squeeze=False, layout="constrained")
    for axis, dataset in zip(axes[0], datasets):
        finished = [r for r in results if r.cell.dataset.name == dataset and r.ok]
        _plot_families(axis, finished, families, lambda result: result.strongest_auc)
        if finished:
            baseline = float(np.mean([r.data_independent_utility_loss for r in finished]))
            axis.scatter([baseline], [0.5], marker="*", s=140, color=method_colour("data-independent"),
                         label="data-independent release", zorder=3)
        axis.axhline(0.5, linestyle="--", color="grey", linewidth=0.8)
        _utility_axis(axis, finished)
        axis.set_ylabel("strongest-attack AUC")
        axis.set_title(f"{dataset}: {len(finished)} finished cells", fontsize=10)
        axis.grid(alpha=0.25)
    if audited:
        for axis, dataset in zip(axes[1], datasets):
            finished = [r for r in results if r.cell.dataset.name == dataset and r.ok and r.audit is not None]
            _plot_families(axis, finished, families, lambda result: result.audited_epsilon_lb)
            axis.axhline(0.0, linestyle="--", color="grey", linewidth=0.8)
            _utility_axis(axis, finished)
            axis.set_ylabel("audited eps lower bound")
            axis.grid(alpha=0.25)
            if finished:
                audit = finished[0].audit
                axis.set_title(f"{dataset}: {audit['mode']} audit, attack {audit['attack']}, "
                               f"confidence {audit['confidence']:g}", fontsize=10)
    legend: dict[str, Any] = {}
    for axis in axes.flat:
        for handle, label in zip(*axis.get_legend_handles_labels()):
            legend.setdefault(label, handle)
    if legend:
        figure.legend(legend.values(), legend.keys(), loc="outside right upper", fontsize=8, title="defense",
                      title_fontsize=8)
    return save_png(figure, path)
