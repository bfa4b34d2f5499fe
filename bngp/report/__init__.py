"""Human-readable outputs: plots (PNG) and Markdown summaries, written atomically.

- :mod:`bngp.report.roc`: the ROC plot of an evaluation;
- :mod:`bngp.report.learning`: the learning and training curves of the attackers fitted to convergence;
- :mod:`bngp.report.evaluation`: the Markdown report of an evaluation
  (:class:`bngp.evaluation_record.EvaluationResult`) and its decision block;
- :mod:`bngp.report.audit`: the trade-off plot and the Markdown reports of the privacy audits;
- :mod:`bngp.report.figures`: a figure written to a PNG file.
"""

from bngp.report.figures import save_png
from bngp.report.roc import BASELINE_ATTACKS, TABLE_FPRS, plot_roc
from bngp.report.learning import MAX_RELEASE_LABELS, plot_learning_curves
from bngp.report.evaluation import convergence_lines, decision_markdown, evaluation_markdown, training_curve_text
from bngp.report.audit import audit_markdown, mechanism_audit_markdown, plot_tradeoff

__all__ = ["plot_roc", "plot_learning_curves", "decision_markdown", "convergence_lines", "training_curve_text",
           "evaluation_markdown", "plot_tradeoff", "audit_markdown", "mechanism_audit_markdown", "save_png",
           "BASELINE_ATTACKS", "TABLE_FPRS", "MAX_RELEASE_LABELS"]
