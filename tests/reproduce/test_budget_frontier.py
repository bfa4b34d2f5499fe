"""The verdicts of ``bngp reproduce budget-frontier`` (the quick pipeline runs in test_reproduce.py)."""

from __future__ import annotations

from bngp.reproduce.budget_frontier import REVEALING_AUC, time_sharing_line, verdicts


def _cell(fraction: float, budget: float, aucs: dict[str, float], trained: float,
          tprs: dict[str, float] | None = None) -> dict:
    """A cell as :func:`frontier_cell` records it (matched Gaussian 0.01 above Laplace when not given; the
    evaluation's strongest attack reads the trained defender as the linear attack does)."""
    tprs = tprs or {}
    aucs = {"gaussian": min(1.0, aucs["laplace"] + 0.01), **aucs}
    return {"fraction": fraction, "budget": {"budget": budget, "data_independent_loss": budget / fraction},
            "references": [{"label": label, "auc": auc, "tpr_at_1pct_fpr": tprs.get(label, 0.0),
                            "tpr_at_0.1pct_fpr": 0.0, "loss": budget} for label, auc in aucs.items()],
            "trained": {"auc": trained, "tpr_at_1pct_fpr": 0.0, "tpr_at_0.1pct_fpr": 0.0, "loss": budget},
            "evaluation": {"trained": {"strongest_attack": "linear", "auc": trained, "tpr_at_1pct_fpr": 0.0,
                                       "tpr_at_0.1pct_fpr": 0.0}}}


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
    # the decision of bngp.decision: 0.9995 reads fully revealing; 0.85 is behind no reference (0.90 is the envelope,
    # and the defender is below it); 0.805 is within the tolerance of Laplace's 0.80
    assert lines[0].split("; decision: ")[1].startswith("fully revealing")
    assert lines[1].split("; decision: ")[1].startswith("on the frontier")
    assert lines[2].split("; decision: ")[1].startswith("on the frontier")
    behind = verdicts([_cell(0.5, 0.002, {"laplace": 0.95, "suppression": 0.90}, 0.93)])[0]
    assert behind.split("; decision: ")[1].startswith("behind the best reference mechanism")
    worse = verdicts([_cell(0.5, 0.002, {"laplace": 0.90, "suppression": 0.85}, 0.93)])[0]
    assert worse.split("; decision: ")[1].startswith("worse than Laplace noise")
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
