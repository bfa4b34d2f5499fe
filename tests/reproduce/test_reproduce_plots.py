"""The plots of a reproduction (bngp.reproduce.report.plot_aucs) and of the budget frontier
(bngp.reproduce.budget_frontier._plot) take their colours from bngp.colours and keep their legends
off the data."""

from __future__ import annotations

from types import SimpleNamespace

from matplotlib.colors import to_hex

import bngp.reproduce.budget_frontier as budget_frontier
import bngp.reproduce.report as reproduce_report
from bngp.colours import attack_colour, method_colour, role_colour
from bngp.reproduce.experiment import Row


def test_auc_bars_take_the_attack_colour_and_reach_past_one(tmp_path, keep_figures) -> None:
    figures = keep_figures(reproduce_report)
    rows = [Row(setting, attack, auc, 0.02, (min(1.0, auc + 0.02), 0.01), auc, 1, 0.01, 1.0)
            for setting in ("no defense", "Laplace eps=1") for attack, auc in (("lrt", 0.7), ("bayesian", 1.0))]
    experiment = SimpleNamespace(rows=rows, scale="quick", seed=0, spec=SimpleNamespace(name="table"))
    reproduce_report.plot_aucs(experiment, tmp_path / "auc.png")
    (axis,) = figures[0].axes
    faces = {to_hex(bar.get_facecolor()) for bar in axis.patches if bar.get_fill() and bar.get_facecolor()[:3] != (1, 1, 1)}
    assert faces == {attack_colour("lrt"), attack_colour("bayesian")}
    assert axis.get_xlim()[1] > 1.0
    labels = [label.get_text() for label in axis.get_yticklabels()]
    assert labels.count("no defense") == 1 and labels.count("bayesian") == 2


def _cell(budget: float, aucs: dict[str, float], trained: float) -> dict:
    return {"budget": {"budget": budget},
            "references": [{"label": label, "auc": auc, "tpr_at_1pct_fpr": auc / 2} for label, auc in aucs.items()],
            "trained": {"auc": trained, "tpr_at_1pct_fpr": trained / 2}}


def test_budget_frontier_families_keep_their_colours_and_the_legend_sits_off_the_panels(tmp_path, keep_figures) -> None:
    figures = keep_figures(budget_frontier)
    cells = [_cell(budget, {"laplace": 0.9 - budget, "shrinkage laplace a=0.2": 0.85 - budget, "time-sharing": 0.8 - budget},
                   0.8 - budget) for budget in (0.1, 0.2, 0.3)]
    budget_frontier._plot({"genome": cells, "adult": cells}, tmp_path / "frontier.png")
    (figure,) = figures
    for axis in figure.axes:
        colours = {line.get_label(): line.get_color() for line in axis.get_lines()}
        assert colours["laplace"] == method_colour("laplace") and colours["shrinkage"] == method_colour("shrinkage")
        assert colours["envelope (best reference)"] == role_colour("envelope")
        assert colours["BNGP (trained for the budget)"] == method_colour("bngp-budget")
        assert axis.get_legend() is None
    (legend,) = figure.legends
    assert not any(legend.get_window_extent().overlaps(axis.get_window_extent()) for axis in figure.axes)
