"""Fixtures of the sweep tests: a tiny population file and one local sweep
(2 kappas x 1 seed of BNGP defenders trained for 10 steps, plus one Laplace eps) shared by the
tests that read its outputs."""

from __future__ import annotations

import pytest

from bngp.data.independent import simulate_independent
from bngp.data.npz import save_population
from bngp.sweep import run_sweep
from sweep_helpers import small_config


@pytest.fixture(scope="session")
def sweep_population(tmp_path_factory):
    """K = 20 individuals, 20 reference, |Q| = 40 SNVs, written as `bngp simulate` writes it."""
    path = tmp_path_factory.mktemp("sweep-data") / "pop.npz"
    save_population(simulate_independent(20, 20, 40, seed=0), path)
    return path


@pytest.fixture(scope="session")
def local_sweep(sweep_population, tmp_path_factory):
    """The small sweep run once through the local backend: (config dict, result)."""
    config = small_config(sweep_population)
    out = tmp_path_factory.mktemp("sweep-local") / "out"
    return config, run_sweep(config, out, progress=False)
