"""A reproduction reads its stored evaluations (EVAL.json records) whatever their age, and refuses one
written in a newer format with a one-line error."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from bngp.data.priors import UniformSubsetPrior
from bngp.defenses.dp import LaplaceDefense
from bngp.errors import DataFormatError
from bngp.evaluate import evaluate_defense
from bngp.evaluation_record import EVALUATION_FORMAT
from bngp.reproduce.experiment import EVALUATIONS, Experiment


@pytest.fixture
def stored(small_population, tmp_path: Path) -> tuple[SimpleNamespace, Path]:
    """An evaluation stored as a reproduction stores it, and the folder standing in for the experiment."""
    result = evaluate_defense(small_population, UniformSubsetPrior(small_population.n_individuals, 20),
                              LaplaceDefense(scale=0.5), ["score"], releases=2, seed=0, n_members=20)
    experiment = SimpleNamespace(runs_dir=tmp_path)
    Experiment._store_evaluation(experiment, "key", result, result.to_dict())
    return experiment, tmp_path / EVALUATIONS / "key.json"


def _rewrite(record: Path, **changes: object) -> None:
    payload = {key: value for key, value in json.loads(record.read_text()).items() if key != "format"}
    record.write_text(json.dumps({**payload, **changes}))


def test_a_stored_evaluation_of_this_format_or_older_is_reused(stored) -> None:
    experiment, record = stored
    result, payload = Experiment._stored_evaluation(experiment, "key")
    assert payload["format"] == EVALUATION_FORMAT and payload["reused"]
    _rewrite(record)  # written before evaluation records named their format
    older, payload = Experiment._stored_evaluation(experiment, "key")
    assert "format" not in payload and np.array_equal(older.scores["score"], result.scores["score"])


def test_a_stored_evaluation_of_a_newer_format_is_refused(stored) -> None:
    experiment, record = stored
    _rewrite(record, format="bngp-evaluation-2")
    with pytest.raises(DataFormatError, match="newer than this bngp reads") as raised:
        Experiment._stored_evaluation(experiment, "key")
    assert str(raised.value).startswith(str(record)) and "\n" not in str(raised.value)
