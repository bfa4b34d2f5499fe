"""Shared fixtures: small populations and one tiny trained run reused by several tests."""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch
from threadpoolctl import threadpool_limits

from bngp.data.independent import simulate_independent
from bngp.data.npz import save_population

# pytest-xdist runs the suite in one worker per core (pyproject's addopts): each worker then keeps
# to one thread (torch, the BLAS pools, the processes tests start); alone, the suite takes up to 2.
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ["OMP_NUM_THREADS"] = os.environ["OPENBLAS_NUM_THREADS"] = os.environ["MKL_NUM_THREADS"] = "1"
    threadpool_limits(1)
    torch.set_num_threads(1)
else:
    torch.set_num_threads(max(1, min(2, torch.get_num_threads())))


@pytest.fixture(scope="session")
def small_population():
    """K = 40 individuals, 40 reference, |Q| = 120 independent SNVs."""
    return simulate_independent(40, 40, 120, seed=11)


@pytest.fixture(scope="session")
def wide_population():
    """K = 60 individuals, 20 reference, |Q| = 40 independent attributes (K >= |Q|: the frontier at a
    utility budget has an interior); used with N = 30 members."""
    return simulate_independent(60, 20, 40, seed=5)


@pytest.fixture(scope="session")
def wide_setting(wide_population):
    """The :class:`bngp.defenses.budget.BudgetSetting` of ``wide_population`` with N = 30."""
    from bngp.defenses.budget import BudgetSetting

    return BudgetSetting.of(wide_population, 30)


@pytest.fixture(scope="session")
def small_population_file(small_population, tmp_path_factory):
    path = tmp_path_factory.mktemp("pop") / "pop.npz"
    save_population(small_population, path)
    return path


@pytest.fixture(scope="session")
def tiny_run(small_population_file, tmp_path_factory):
    """A defender trained for a few steps through the CLI (members = 20)."""
    from bngp.cli import main

    run_dir = tmp_path_factory.mktemp("runs") / "run"
    code = main(["train", "--no-decision", "--population", str(small_population_file), "--members", "20", "--kappa", "1.5",
                 "--steps", "6", "--fresh-check-steps", "5", "--seed", "3", "--quiet", "--out", str(run_dir)])
    assert code == 0
    return run_dir


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)



@pytest.fixture
def keep_figures(monkeypatch: pytest.MonkeyPatch):
    """``keep_figures(module)``: the list of every figure ``module.save_png`` then writes, each drawn first (so
    that text has its extent) and kept for the test."""

    def keep_from(module) -> list:
        drawn: list = []
        save = module.save_png

        def keep(figure, path):
            figure.canvas.draw()
            drawn.append(figure)
            return save(figure, path)

        monkeypatch.setattr(module, "save_png", keep)
        return drawn

    return keep_from
