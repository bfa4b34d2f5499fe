"""The Markdown report of an evaluation (EVAL.md): its decision block, one row per attack, the
utility next to the data-independent release, the convergence of the fitted attackers, and what
each attack knows (:class:`bngp.evaluation_record.EvaluationResult`)."""

from __future__ import annotations

from collections.abc import Mapping

from bngp.evaluation_record import AttackResult, EvaluationResult
from bngp.report.learning import curve_levelled_off

__all__ = ["evaluation_markdown", "decision_markdown", "convergence_lines", "training_curve_text"]


def evaluation_markdown(result: EvaluationResult, title: str = "Evaluation", *, decision: dict | None = None,
                        budget: dict | None = None) -> str:
    """The Markdown report of an evaluation: the ``decision`` block first (when given,
    ``ReleaseDecision.to_dict()``, :func:`decision_markdown`), then one row per attack, the strongest
    attack, the utility next to the data-independent release, the ``budget`` check (when given, as
    ``bngp evaluate`` records it), the attackers' convergence, the notes and each attack's knowledge."""
    lines = [f"## {title}", ""]
    if decision:
        lines += decision_markdown(decision)
    lines += [f"Defense: `{result.defense.get('name')}`; utility loss (mean |x - f(D)|): "
              f"{result.utility_loss:.5f}; releases: {result.releases}; seed: {result.seed}.", "",
              "| attack | AUC | std | TPR@10% | TPR@1% | TPR@0.1% | advantage |", "|---|---|---|---|---|---|---|"]
    for name, attack in result.attacks.items():
        tpr = attack.tpr_at_fpr
        lines.append(f"| {name} | {attack.auc:.4f} | {attack.auc_std:.4f} | {tpr['0.1']:.3f} | {tpr['0.01']:.3f} | "
                     f"{tpr['0.001']:.3f} | {attack.advantage:.3f} |")
    strongest = result.strongest_attack
    strongest_auc = result.attacks[strongest].auc
    lines += ["", f"Strongest attack: **{strongest}** (AUC {strongest_auc:.4f}) - this is the privacy result."]
    lines += _utility_lines(result.utility, strongest_auc, verdict=not decision)
    if budget:
        lines += ["", f"Utility budget: {budget['budget']:.5g} ({budget['fraction_of_data_independent']:.3g} of the "
                      f"data-independent release's {budget['data_independent_loss']:.5g}); measured loss "
                      f"{budget['measured_loss']:.5g} (one release per each of 2,000 fixed memberships): "
                      f"**{'met' if budget['met'] else 'NOT met'}**."]
    lines += convergence_lines(result.attacks)
    lines += [f"- Note: {note}" for note in result.notes]
    lines += [f"- `{name}` orientation: {attack.orientation_note}" for name, attack in result.attacks.items()
              if attack.orientation_note]
    lines += ["", "Attack knowledge:"]
    lines += [f"- `{name}`: {attack.knowledge}" for name, attack in result.attacks.items()]
    return "\n".join(lines) + "\n"


def _utility_lines(utility: dict, strongest_auc: float, *, verdict: bool) -> list[str]:
    """The table of the release's utility next to the data-independent release f(theta)
    (:func:`bngp.evaluate.utility_record`), and with ``verdict`` its verdict; none without a record."""
    if not utility:
        return []
    lines = [
        "",
        "| release | utility loss mean abs(x - f(D)) | relative error | signal retention | strongest-attack AUC |",
        "|---|---|---|---|---|",
        f"| this defense | {utility['utility_loss']:.5f} | {utility['relative_error']:.3f} | "
        f"{utility['signal_retention']:.3f} | {strongest_auc:.4f} |",
        f"| data-independent release f(theta) (baseline) | {utility['data_independent_utility_loss']:.5f} | 1 | 0 | 0.5 |",
    ]
    if verdict:
        lines += ["", f"The defense is {utility['verdict']}."]
    return lines


def decision_markdown(decision: dict, heading: str = "### Decision") -> list[str]:
    """The decision block of a report from a stored decision (``ReleaseDecision.to_dict()``), under ``heading``."""
    strongest = decision["strongest"]
    budget = "" if decision["budget"] is None else (
        f"; utility budget {decision['budget']:.5g}: {'met' if decision['budget_met'] else 'NOT met'}")
    lines = [heading, "", f"**This release is {decision['sentence']}.**", "",
             f"- Utility loss mean abs(x - f(D)): {decision['utility_loss']:.5g}; the data-independent release f(theta) "
             f"has {decision['data_independent_loss']:.5g}{budget}.",
             f"- Strongest attack: `{strongest['name']}`, AUC {strongest['auc']:.4f}, TPR "
             f"{strongest['tpr_at_1pct_fpr']:.3f} at 1% FPR and {strongest['tpr_at_0.1pct_fpr']:.3f} at 0.1% FPR.", "",
             "Every mechanism at the same utility loss, read by the same converged linear attack (ridge and whitened "
             "maps from release to membership; lower is more private):", "",
             "| mechanism | utility loss | AUC | TPR at 1% FPR | TPR at 0.1% FPR | eps |", "|---|---|---|---|---|---|"]
    for row in decision["rows"]:
        epsilon = "-" if row["epsilon"] is None else f"{row['epsilon']:.3g}"
        lines.append(f"| {row['label']} | {row['loss']:.5g} | {row['auc']:.4f} | {row['tpr_at_1pct_fpr']:.3f} | "
                     f"{row['tpr_at_0.1pct_fpr']:.3f} | {epsilon} |")
    if len(decision["rows"]) <= 2:
        lines += ["", "No mechanism is calibrated to this loss: it is the exact release's (below 0.1% of the "
                      "data-independent release's) or at least the data-independent release's."]
    if decision.get("left_out"):
        lines += ["", f"References left out: {decision['left_out']}."]
    if decision.get("threat_model"):
        lines += ["", f"Threat model: {decision['threat_model']}"]
    lines += ["", f"Differences below {decision['tolerance']} AUC are not read as differences; seed {decision['seed']}.",
              ""]
    return lines


def convergence_lines(attacks: Mapping[str, AttackResult]) -> list[str]:
    """Markdown lines showing that the attacks of an evaluation were fitted to convergence: each
    learning curve (validation AUC by shadow releases, with the penalty or state chosen) and each
    trained network's training curve (validation AUC by Adam step, :func:`training_curve_text`); no
    lines when no attack carries a curve."""
    lines: list[str] = []
    curves = {name: attack.learning_curve for name, attack in attacks.items() if attack.learning_curve is not None}
    if curves:
        lines += ["", "Learning curves (validation AUC by shadow releases; converged = the last step gained "
                  "less than the tolerance per doubling):"]
        for name, curve in curves.items():
            points = ", ".join(f"{n}: {a:.4f}" for n, a in zip(curve["releases"], curve["auc"]))
            state = "converged" if curve_levelled_off(curve) else "NOT converged (cap or fixed size reached)"
            fit = attacks[name].fit or {}
            if "ridge" in fit:
                chosen = f"penalty {fit['ridge']:.3g} by {fit.get('criterion')}"
            else:  # a network trained with early stopping (the per-individual attacker)
                chosen = f"state of step {fit.get('best_step')} kept by {fit.get('criterion')}"
            lines.append(f"- `{name}`: {points} ({state}; {chosen})")
    trained = {name: attack.training_curve for name, attack in attacks.items() if attack.training_curve}
    if trained:
        lines += ["", "Training curves (validation AUC by Adam step; the state of least validation cross-entropy is kept):"]
        lines += [f"- `{name}`: {training_curve_text(curve)}" for name, curve in trained.items()]
    return lines


def training_curve_text(curve: dict) -> str:
    """One line for a trained attacker's training curve (:meth:`bngp.attacks.training.OptimisationTrace.curve`): the
    validation AUC at each validated step, the kept step, and whether the loss was still falling."""
    points = ", ".join(f"{step}: {auc:.4f}" for step, auc in zip(curve["steps"], curve["auc"]))
    if curve["still_improving"]:
        state = "NOT shown converged: the validation loss was still falling at the last step"
    else:
        state = "stopped early: the validation loss stopped falling" if curve["stopped_early"] else "converged"
    return (f"{points} (on {curve['validation_releases']:,} held-out releases; state of step {curve['best_step']} kept; "
            f"{state})")
