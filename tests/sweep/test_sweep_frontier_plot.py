"""The sweep's frontier plot (bngp.sweep.frontier): each defense family in its fixed colour, one
legend off the panels, readable utility-loss ticks, rows of the same height with or without audit."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import bngp.sweep.frontier as frontier
from bngp.colours import METHOD_COLOURS
from bngp.sweep.cells import Cell
from bngp.sweep.config import DatasetSpec
from bngp.sweep.results import CellResult

DEFENSES = {"bngp": [0.5, 1.0, 1.5], "laplace": [0.1, 1.0, 10.0, 100.0], "gaussian:delta=1e-5": [0.1, 1.0, 10.0],
            "linear-optimal": ["0.25x", "0.5x"]}


def _results(audited: bool) -> tuple[CellResult, ...]:
    rng = np.random.default_rng(0)
    results = []
    for dataset in ("genome", "adult"):
        spec = DatasetSpec(dataset, Path("pop.npz"), 10)
        for defense, parameters in DEFENSES.items():
            for index, parameter in enumerate(parameters):
                for seed in (0, 1):
                    cell = Cell(spec, "fingerprint", defense, parameter, seed, ("lrt",), 10, None)
                    audit = {"epsilon_lb": 2.0 * index, "mode": "many-run", "attack": "score", "confidence": 0.95}
                    results.append(CellResult(cell, "ok", 1, 1.0, utility_loss=0.002 * 3.0 ** index + rng.uniform(0, 1e-4),
                                              data_independent_utility_loss=0.1, strongest_attack="lrt",
                                              strongest_auc=0.55 + 0.1 * index, audit=audit if audited else None))
    return tuple(results)


@pytest.fixture
def figures(keep_figures) -> list[Any]:
    return keep_figures(frontier)


def test_families_keep_their_colours_and_one_legend_sits_off_the_panels(tmp_path, figures) -> None:
    frontier.plot_frontier(_results(audited=True), tmp_path / "frontier.png")
    (figure,) = figures
    for axis in figure.axes:
        colours = {line.get_label(): line.get_color() for line in axis.get_lines() if not line.get_label().startswith("_")}
        assert colours["laplace"] == METHOD_COLOURS["laplace"] and colours["bngp"] == METHOD_COLOURS["bngp"]
        assert colours["gaussian:delta=1e-5"] == METHOD_COLOURS["gaussian"]
        assert axis.get_legend() is None
        assert axis.get_xscale() == "log"  # losses over three decades
        labels = [label for label in axis.get_xticklabels() if label.get_visible() and label.get_text()]
        boxes = [label.get_window_extent() for label in labels]
        assert labels and not any(a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1:])
        assert not any(label.get_text() for label in axis.xaxis.get_minorticklabels())
    (legend,) = figure.legends
    assert not any(legend.get_window_extent().overlaps(axis.get_window_extent()) for axis in figure.axes)
    assert "data-independent release" in [text.get_text() for text in legend.get_texts()]


def test_an_audited_frontier_is_twice_as_tall(tmp_path) -> None:
    one = frontier.plot_frontier(_results(audited=False), tmp_path / "one.png")
    two = frontier.plot_frontier(_results(audited=True), tmp_path / "two.png")
    size = [int.from_bytes(path.read_bytes()[20:24], "big") for path in (one, two)]
    assert size[1] == 2 * size[0]
