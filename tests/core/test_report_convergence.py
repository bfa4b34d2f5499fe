"""How reports label an attacker's learning curve (bngp.report.convergence_lines).

A shadow-release curve is judged from its points by the per-doubling rule
(:func:`bngp.metrics.levelled_off`), whatever flag it was stored with; a network's curve with early
stopping (the per-individual attacker: ``patience``, tolerance in cross-entropy) keeps its own flag."""

from __future__ import annotations

from bngp.evaluation_record import AttackResult
from bngp.report import convergence_lines


def _state(curve: dict) -> str:
    record = AttackResult(auc=0.5, auc_std=0.0, auc_per_release=(0.5,), tpr_at_fpr={}, advantage=0.0,
                          bayes_weighted_advantage=0.0, gamma=0.5, knowledge="", seconds=0.0, orientation=1, raw_auc=0.5,
                          learning_curve=curve)
    (line,) = [line for line in convergence_lines({"linear": record}) if line.startswith("- `linear`")]
    return line


def test_a_stored_capped_curve_is_relabelled_by_the_per_doubling_rule() -> None:
    # Table 5's one mechanism at eps 0.05, stored "converged" by the raw gain 0.0047 < 0.005 of a short last step
    stored = {"releases": [10000, 20000, 26843], "auc": [0.5261, 0.5354, 0.5401], "converged": True, "tolerance": 0.005}
    assert "NOT converged" in _state(stored)
    doubled = {"releases": [10000, 20000, 40000], "auc": [0.5261, 0.5354, 0.5401], "converged": True, "tolerance": 0.005}
    assert "(converged" in _state(doubled)


def test_an_early_stopped_network_curve_keeps_its_flag() -> None:
    rising = {"releases": [60, 140, 220], "auc": [0.6, 0.7, 0.8], "cross_entropy": [0.69, 0.6, 0.5],
              "converged": True, "patience": 4, "tolerance": 0.0}
    assert "(converged" in _state(rising)
    assert "NOT converged" in _state({**rising, "converged": False})
