"""Acceptance: the small sweep through a local Ray runtime of 2 workers gives the results of the
local backend, cell for cell (everything but the wall seconds)."""

from __future__ import annotations

import json

import pytest

from bngp.sweep import run_sweep
from sweep_helpers import records_without_timing


def test_ray_backend_matches_the_local_backend(local_sweep, tmp_path):
    ray = pytest.importorskip("ray")
    config, local = local_sweep
    result = run_sweep(config, tmp_path / "out", backend="ray", workers=2, progress=False)
    assert not ray.is_initialized()  # the runtime it started is stopped
    assert (result.computed, result.reused, len(result.failed)) == (3, 0, 0)
    on_ray = json.loads(result.json_path.read_text())
    assert on_ray["backend"] == "ray"
    assert records_without_timing(on_ray) == records_without_timing(json.loads(local.json_path.read_text()))
    assert sorted(p.name for p in (tmp_path / "out" / "cells").iterdir()) == sorted(
        p.name for p in (local.out_dir / "cells").iterdir())
