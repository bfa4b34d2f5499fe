"""The learning-curve plot of an evaluation: each attack fitted to convergence by its validation AUC
against the shadow releases it read, and each trained network by its validation AUC against its
Adam steps (the evidence that more shadow releases or more steps would not raise the attack)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from bngp.errors import InputError
from bngp.metrics import levelled_off
from bngp.report import figures

__all__ = ["plot_learning_curves", "curve_levelled_off", "MAX_RELEASE_LABELS"]


def curve_levelled_off(curve: dict) -> bool:
    """A stored learning curve's convergence.  A shadow-release curve of :func:`bngp.linear.fit_converged`
    is judged from its points (:func:`bngp.metrics.levelled_off`), whatever flag it was stored with; a
    network's curve with early
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
    (``curves[name]`` = a :class:`bngp.linear.LearningCurve` as a dict); a converged curve ends
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
            if curve_levelled_off(curve):
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
    return figures.save_png(figure, path)
