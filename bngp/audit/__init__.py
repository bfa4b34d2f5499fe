"""Empirical privacy audits: scores in, lower bounds on eps out (numpy/scipy only).

Member = 1, higher score = member.  Every audit returns a frozen dataclass recording the
method, the confidence, delta, how many thresholds were examined and the union bound that
pays for that search (:class:`AuditResult`).

* :mod:`~bngp.audit.many_run`: eps and GDP mu lower bounds from many runs.
* :mod:`~bngp.audit.thresholds`: the many-run threshold rules and the union bound each pays.
* :mod:`~bngp.audit.order_grid`: joint tests at order statistics fixed in advance, the rule
  their default (``"auto"``) applies to continuous scores after a probe of the support.
* :mod:`~bngp.audit.roc`: empirical ROC, AUC, TPR at FPR, advantage.
* :mod:`~bngp.audit.tradeoff_curve`: the many-run f-DP view: the empirical trade-off curve
  with a simultaneous confidence region, and tests of claimed curves (Gaussian, (eps, delta)).
* :mod:`~bngp.audit.one_run`: the one-run audit of Steinke, Nasr, Jagielski (2023).
* :mod:`~bngp.audit.fdp_one_run`: the f-DP one-run audit of Mahloujifar, Melis, Chaudhuri
  (arXiv:2410.22235): GDP mu and eps lower bounds, and a test of any claimed trade-off curve.
* :mod:`~bngp.audit.panoramia`: PANORAMIA's c_lb, {c+eps}_lb and eps_tilde.
* :mod:`~bngp.audit.binomial`: the binomial test shared by the two above, CP limits.
* :mod:`~bngp.audit.bits`: the audit as bit transmission (Xiang, Wang, Wang, *Privacy Audit as Bits Transmission*).
* :mod:`~bngp.audit.tradeoff`: GDP / Laplace parameter to (eps, delta).
* :mod:`~bngp.audit.gan_samples`: privacy calculators for generated samples (Lin, Sekar, Fanti, AISTATS 2021).
* :mod:`~bngp.audit.per_target`: many-run bounds from R releases x K targets (``bngp evaluate``'s
  scores), one many-run audit per target, Bonferroni over the targets.
* :mod:`~bngp.audit.methods`: the methods by name: run one, what its bound is, its design and reading.
* :mod:`~bngp.audit.all_methods`: every score method on the same scores, Bonferroni over the methods.
* :mod:`~bngp.audit.ceiling`: the largest eps a design can certify (its bound on a perfect
  attack), and a bound read against it and against a claimed eps.
* :mod:`~bngp.audit.decision`: the verdict an audit supports (claim refuted, consistent, at the
  design's ceiling, ...), in one sentence.
"""

from bngp.audit.all_methods import ALL_METHODS, AllMethodsResult, audit_all
from bngp.audit.binomial import (
    BinomialBound,
    binomial_bound,
    binomial_p_value,
    clopper_pearson_lower,
    clopper_pearson_upper,
)
from bngp.audit.bits import (
    FAMILIES,
    INTERVALS,
    BitsResult,
    bits_audit,
    bits_audit_from_counts,
    error_rate_upper_bound,
    per_bit_error_floor,
    theta_from_error_rate,
)
from bngp.audit.tradeoff_curve import (
    CLAIM_FORMATS,
    Claim,
    ClaimCheck,
    EmpiricalTradeoff,
    check_claim,
    check_claim_error_rate,
    count_levels,
    empirical_tradeoff,
    parse_claim,
)
from bngp.audit.ceiling import CEILING_STATES, BoundReading, perfect_scores, read_bound
from bngp.audit.decision import AUDIT_VERDICTS, AuditDecision, audit_decision
from bngp.audit.fdp_one_run import (
    FdpBound,
    FdpOneRunResult,
    eps_delta_tradeoff,
    fdp_one_run_audit,
    fdp_one_run_rejects,
    fdp_one_run_search,
    gaussian_tradeoff,
    gdp_one_run_bound,
)
from bngp.audit.gan_samples import (
    auc_upper_bound,
    epsilon_lower_bound_from_tv,
    gan_sample_delta,
    gan_sample_epsilon,
    roc_tpr_upper_bound,
    tv_lower_bound_from_auc,
    tv_lower_bound_from_roc,
    tv_upper_bound_from_dp,
)
from bngp.audit.many_run import BOUND_KINDS, GdpResult, ManyRunResult, gdp_audit, many_run_audit
from bngp.audit.methods import SCORE_METHODS, read_result, score_method_audit
from bngp.audit.order_grid import grid_levels, grid_p_values
from bngp.audit.one_run import OneRunResult, default_one_run_candidates, one_run_audit, one_run_search
from bngp.audit.panoramia import PanoramiaResult, panoramia_audit
from bngp.audit.per_target import PER_TARGET_METHODS, PerTargetResult, per_target_audit
from bngp.audit.results import AuditResult
from bngp.audit.roc import RocCurve, RocSummary, roc_curve, roc_summary
from bngp.audit.thresholds import DEFAULT_STRATEGY, STRATEGIES
from bngp.audit.tradeoff import gdp_delta, gdp_epsilon, laplace_delta, laplace_epsilon

__all__ = [
    "ALL_METHODS",
    "AUDIT_VERDICTS",
    "AuditDecision",
    "AllMethodsResult",
    "AuditResult",
    "BOUND_KINDS",
    "BinomialBound",
    "BitsResult",
    "BoundReading",
    "CEILING_STATES",
    "CLAIM_FORMATS",
    "Claim",
    "ClaimCheck",
    "DEFAULT_STRATEGY",
    "EmpiricalTradeoff",
    "FAMILIES",
    "FdpBound",
    "FdpOneRunResult",
    "GdpResult",
    "INTERVALS",
    "ManyRunResult",
    "OneRunResult",
    "PER_TARGET_METHODS",
    "PanoramiaResult",
    "PerTargetResult",
    "RocCurve",
    "RocSummary",
    "SCORE_METHODS",
    "STRATEGIES",
    "auc_upper_bound",
    "audit_all",
    "audit_decision",
    "binomial_bound",
    "binomial_p_value",
    "bits_audit",
    "bits_audit_from_counts",
    "check_claim",
    "check_claim_error_rate",
    "clopper_pearson_lower",
    "clopper_pearson_upper",
    "count_levels",
    "default_one_run_candidates",
    "empirical_tradeoff",
    "eps_delta_tradeoff",
    "epsilon_lower_bound_from_tv",
    "error_rate_upper_bound",
    "fdp_one_run_audit",
    "fdp_one_run_rejects",
    "fdp_one_run_search",
    "gan_sample_delta",
    "gan_sample_epsilon",
    "gaussian_tradeoff",
    "gdp_audit",
    "gdp_delta",
    "gdp_epsilon",
    "gdp_one_run_bound",
    "grid_levels",
    "grid_p_values",
    "laplace_delta",
    "laplace_epsilon",
    "many_run_audit",
    "one_run_audit",
    "one_run_search",
    "panoramia_audit",
    "parse_claim",
    "per_bit_error_floor",
    "per_target_audit",
    "perfect_scores",
    "read_bound",
    "roc_curve",
    "roc_summary",
    "read_result",
    "roc_tpr_upper_bound",
    "score_method_audit",
    "theta_from_error_rate",
    "tv_lower_bound_from_auc",
    "tv_lower_bound_from_roc",
    "tv_upper_bound_from_dp",
]
