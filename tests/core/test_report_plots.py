"""The plots of bngp.report read as a person needs them: the strongest attacks and the baselines on a
linear and a log-FPR panel, fixed colours per attack and per audit role, curves at AUC 1 inside the
axes, tick labels that do not overlap, legends off the curves."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from matplotlib.colors import to_rgb
from matplotlib.image import imread

import bngp.report.figures as report_figures
from bngp.colours import ROLE_COLOURS, attack_colour
from bngp.report import MAX_RELEASE_LABELS, plot_learning_curves, plot_roc, plot_tradeoff
from bngp.report.learning import _thinned

PNG = b"\x89PNG\r\n\x1a\n"
#: 13 attacks: four read every member (AUC 1), the rest from strong to chance.
SEPARATIONS = {"lrt": 0.3, "adaptive-lrt": 0.8, "optimal-lrt": 50.0, "score": 1.2, "homer": 0.1, "tree": 0.05,
               "svm": 0.5, "linear": 60.0, "whitened": 70.0, "reconstruction": 2.5, "reconstruction-l1": 2.2,
               "bayesian": 55.0, "stacked": 3.5}


@pytest.fixture
def figures(keep_figures) -> list[Any]:
    """Every figure the plots of bngp.report write, drawn (so that text has its extent) and saved."""
    return keep_figures(report_figures)


def _curves(releases: int = 20, individuals: int = 60) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(0)
    labels = np.zeros((releases, individuals), dtype=int)
    labels[:, : individuals // 2] = 1
    return {name: (rng.normal(size=labels.shape) + separation * labels, labels) for name, separation in SEPARATIONS.items()}


def _legend(figure: Any) -> dict[str, Any]:
    """label -> handle of the figure's one legend."""
    (legend,) = figure.legends
    return {text.get_text(): handle for text, handle in zip(legend.get_texts(), legend.legend_handles)}


def _overlapping(labels: list[Any]) -> list[tuple[str, str]]:
    """Pairs of visible, non-empty tick labels whose drawn boxes overlap."""
    boxes = [(label.get_text(), label.get_window_extent()) for label in labels if label.get_visible() and label.get_text()]
    return [(a, b) for i, (a, box) in enumerate(boxes) for b, other in boxes[i + 1:] if box.overlaps(other)]


def test_roc_draws_the_strongest_attacks_and_the_baselines_on_a_linear_and_a_log_panel(tmp_path, figures) -> None:
    path = plot_roc(_curves(), tmp_path / "roc.png", title="13 attacks", baseline_loss=0.01)
    assert path.read_bytes().startswith(PNG)
    (figure,) = figures
    linear, logarithmic = figure.axes
    assert linear.get_xscale() == "linear" and logarithmic.get_xscale() == "log"
    # the log panel reaches the 0.1% FPR of the tables (1,200 non-members resolve 1e-3)
    assert logarithmic.get_xlim()[0] < 1e-3
    legend = _legend(figure)
    drawn = {label.split(":")[0].removesuffix(" (baseline)") for label in legend if "AUC" in label}
    assert drawn == {"optimal-lrt", "linear", "whitened", "bayesian", "stacked", "lrt", "homer"}  # 5 + 2 baselines
    for axis in (linear, logarithmic):
        assert {line.get_color() for line in axis.get_lines()} - {ROLE_COLOURS["chance"], "#bbbbbb"} == {
            attack_colour(name) for name in drawn}
    assert "6 weaker not drawn" in figure.legends[0].get_title().get_text()
    assert all(legend[label].get_color() == attack_colour(label.split(":")[0].removesuffix(" (baseline)"))
               for label in legend if "AUC" in label)
    # the legend is outside both panels
    box = figure.legends[0].get_window_extent()
    assert not any(box.overlaps(axis.get_window_extent()) for axis in figure.axes)


def test_roc_curves_at_auc_one_stay_inside_the_axes_and_each_shows(tmp_path, figures) -> None:
    plot_roc(_curves(), tmp_path / "roc.png")
    linear, logarithmic = figures[0].axes
    (left, right), (bottom, top) = linear.get_xlim(), linear.get_ylim()
    assert left < 0 and right > 1 and bottom < 0 and top > 1
    assert logarithmic.get_ylim()[1] > 1
    lowest = min(np.min(line.get_xdata()) for line in logarithmic.get_lines())
    assert logarithmic.get_xlim()[0] < lowest
    # the four curves at AUC 1 coincide: each colour still shows in the picture
    pixels = (imread(tmp_path / "roc.png")[..., :3] * 255).reshape(-1, 3)
    for name in ("optimal-lrt", "linear", "whitened", "bayesian"):
        target = np.array(to_rgb(attack_colour(name))) * 255
        assert np.sum(np.abs(pixels - target).max(axis=1) < 8) > 200, name


def test_roc_keeps_its_old_call_and_draws_every_curve_when_few(tmp_path, figures) -> None:
    curves = {name: value for name, value in _curves().items() if name in ("linear", "score")}
    plot_roc(curves, str(tmp_path / "two.png"), "two attacks", None)
    legend = _legend(figures[0])
    assert sum("AUC" in label for label in legend) == 2 and "chance" in legend
    assert "not drawn" not in figures[0].legends[0].get_title().get_text()


def _learning_curves(sizes: list[list[int]]) -> dict[str, dict]:
    names = ["linear", "whitened", "tree", "svm", "reconstruction", "stacked"]
    return {name: {"releases": releases, "auc": list(np.linspace(0.55, 0.8, len(releases))), "converged": False,
                   "tolerance": 0.005} for name, releases in zip(names, sizes)}


def test_learning_curve_ticks_are_thinned_and_do_not_overlap(tmp_path, figures) -> None:
    rng = np.random.default_rng(1)
    sizes = [sorted({int(n) for n in rng.integers(200, 90_000, size=12)}) for _ in range(6)]
    training = {"bayesian": {"steps": list(range(0, 2001, 100)), "auc": list(np.linspace(0.5, 0.9, 21)), "best_step": 1500}}
    plot_learning_curves(_learning_curves(sizes), tmp_path / "learning.png", training=training)
    (figure,) = figures
    shadow, steps = figure.axes
    assert shadow.get_xscale() == "log"
    labelled = [label for label in shadow.get_xticklabels() if label.get_text()]
    assert 2 <= len(labelled) <= MAX_RELEASE_LABELS
    assert len(shadow.xaxis.get_minorticklocs()) + len(labelled) == len({n for group in sizes for n in group})
    for axis in (shadow, steps):
        assert not _overlapping(axis.get_xticklabels())
        assert not axis.get_legend().get_window_extent().overlaps(axis.get_window_extent())
    colours = {line.get_label(): line.get_color() for axis in figure.axes for line in axis.get_lines()}
    assert colours["linear"] == attack_colour("linear") and colours["bayesian"] == attack_colour("bayesian")


def test_the_same_attack_has_the_same_colour_in_a_roc_and_a_learning_plot(tmp_path, figures) -> None:
    plot_roc(_curves(), tmp_path / "roc.png")
    plot_learning_curves(_learning_curves([[250, 500, 1000]] * 6), tmp_path / "learning.png")
    roc = {label.split(":")[0]: handle.get_color() for label, handle in _legend(figures[0]).items()}
    learning = {line.get_label(): line.get_color() for line in figures[1].axes[0].get_lines()}
    assert roc["whitened"] == learning["whitened"] == attack_colour("whitened")
    assert roc["stacked"] == learning["stacked"] == attack_colour("stacked")


@pytest.mark.parametrize("most", [2, 5, 9])
def test_thinned_sizes_keep_both_ends_and_at_most_the_count(most: int) -> None:
    sizes = sorted({int(n) for n in np.geomspace(100, 100_000, 40)})
    kept = _thinned(sizes, most)
    assert kept[0] == sizes[0] and kept[-1] == sizes[-1] and 2 <= len(kept) <= most
    assert _thinned([500], most) == [500]


def _tradeoff(path: Path, curves: list[str]) -> None:
    x = np.linspace(0.0, 1.0, 101)
    plot_tradeoff(path, curves=[(label, x, 1 - x ** 0.5) for label in curves])


def test_an_audit_role_keeps_its_colour_and_style_whatever_else_the_file_holds(tmp_path, figures) -> None:
    certified = "certified by many-run: (eps = 0.412, delta = 1e-05)-DP curve"
    _tradeoff(tmp_path / "with-claim.png", ["claim gaussian:mu=1", certified, "gdp: mu_lb = 0.7 Gaussian curve"])
    _tradeoff(tmp_path / "without.png", [certified])
    styles = [{line.get_label(): (line.get_color(), line.get_linestyle()) for line in figure.axes[0].get_lines()}
              for figure in figures]
    assert styles[0][certified] == styles[1][certified] and styles[0][certified][0] == ROLE_COLOURS["certified"]
    assert styles[0]["claim gaussian:mu=1"][0] == ROLE_COLOURS["claim"]
    axis = figures[0].axes[0]
    assert axis.get_xlim()[0] < 0 < 1 < axis.get_xlim()[1] and axis.get_ylim()[0] < 0 < 1 < axis.get_ylim()[1]
    assert not figures[0].legends[0].get_window_extent().overlaps(axis.get_window_extent())
    assert not _overlapping(axis.get_xticklabels()) and not _overlapping(axis.get_yticklabels())
