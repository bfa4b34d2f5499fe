"""experiments/selection_patience.py's replay report on hand-made scorings (no training)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "experiments"))

from selection_patience import replays, report, smallest_safe_patience  # noqa: E402


def _record(name: str, scores: list[float]) -> dict:
    return {"name": name, "config": {"attacker_refit_every": 50}, "train_seconds": 1.0, "matmul_gflops_float32": 1.0,
            "selections": [{"step": 50 * i, "score": s, "privacy_loss": 0.0, "utility_loss": 0.0} for i, s in enumerate(scores)]}


def test_smallest_safe_patience_and_the_report():
    """Known answers: a run whose step 0 is never bettered is safe with any patience; one first
    bettered at step 150 (three scorings after step 0) needs 3 (P = 3 stops at 150, whose final
    scoring is the best) and P = 2 keeps step 0."""
    flat = _record("flat", [0.1, 0.5, 0.4, 0.3, 0.2])
    late = _record("late", [1.0, 1.2, 1.1, 0.7, 0.8])
    assert smallest_safe_patience(flat["selections"], 50) == 1
    assert smallest_safe_patience(late["selections"], 50) == 3
    table = replays([flat, late])
    assert table[2]["same_state"] == 1 and table[3]["same_state"] == 2
    assert table[2]["runs"][1]["kept_step"] == 0 and table[2]["runs"][1]["relative_gap"] == (1.0 - 0.7) / 0.7
    text = report([flat, late], table)
    assert "| late | 150 | 0.70000 |" in text and "| 2 | 1 of 2 |" in text and "100 / 0*" in text
