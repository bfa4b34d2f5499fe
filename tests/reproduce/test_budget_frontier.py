"""The verdicts of ``bngp reproduce budget-frontier`` (the quick pipeline runs in test_reproduce.py)."""

from __future__ import annotations

from bngp.reproduce.budget_frontier import REVEALING_AUC, verdicts


def _cell(fraction: float, budget: float, aucs: dict[str, float], trained: float) -> dict:
    return {"fraction": fraction, "budget": {"budget": budget},
            "references": [{"label": label, "auc": auc, "tpr_at_1pct_fpr": 0.0} for label, auc in aucs.items()],
            "trained": {"auc": trained, "tpr_at_1pct_fpr": 0.0}}


def test_verdicts_place_the_defender_and_find_where_no_release_protects() -> None:
    cells = [
        _cell(0.25, 0.001, {"laplace": 0.999, "time-sharing": 0.995}, 0.9995),
        _cell(0.5, 0.002, {"laplace": 0.95, "suppression": 0.90, "time-sharing": 0.80}, 0.85),
        _cell(0.75, 0.003, {"laplace": 0.80, "time-sharing": 0.70}, 0.805),
    ]
    lines = verdicts(cells)
    assert "no release at this budget protects membership" in lines[0] and lines[0].startswith("- budget 0.25")
    assert "below the envelope (suppression 0.9000" in lines[1]  # time-sharing is never the envelope
    assert "on the envelope (laplace 0.8000" in lines[2]
    assert lines[-1] == f"- The smallest budget tried at which some release reads AUC <= {REVEALING_AUC}: 0.5 x L0 = 0.002."
    assert verdicts(cells[:1])[-1] == f"- No budget tried has a release reading AUC <= {REVEALING_AUC}."
