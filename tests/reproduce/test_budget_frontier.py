"""The verdicts of ``bngp reproduce budget-frontier`` (the quick pipeline runs in test_reproduce.py)."""

from __future__ import annotations

from bngp.reproduce.budget_frontier import REVEALING_AUC, time_sharing_line, verdicts


def _cell(fraction: float, budget: float, aucs: dict[str, float], trained: float,
          tprs: dict[str, float] | None = None) -> dict:
    tprs = tprs or {}
    return {"fraction": fraction, "budget": {"budget": budget},
            "references": [{"label": label, "auc": auc, "tpr_at_1pct_fpr": tprs.get(label, 0.0)}
                           for label, auc in aucs.items()],
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


def test_time_sharing_is_counted_against_the_envelope() -> None:
    cells = [_cell(0.5, 0.002, {"laplace": 0.9, "time-sharing": 0.8}, 0.9, {"laplace": 0.3, "time-sharing": 0.5}),
             _cell(0.75, 0.003, {"laplace": 0.7, "time-sharing": 0.75}, 0.7, {"laplace": 0.3, "time-sharing": 0.2})]
    assert time_sharing_line(cells).startswith("- Time-sharing reads a lower mean AUC than the envelope at 1 of 2 "
                                               "budgets, and the highest TPR at 1% FPR of every mechanism at 1 of 2")


def test_time_sharing_does_not_count_as_a_protecting_release() -> None:
    """Each time-sharing release is f(theta) or f(D): its low mean AUC does not make a budget protecting."""
    lines = verdicts([_cell(0.5, 0.002, {"laplace": 1.0, "time-sharing": 0.87}, 0.9999)])
    assert "no release at this budget protects membership" in lines[0]
