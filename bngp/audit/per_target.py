"""Many-run audits of scores that are not independent runs: R releases x K targets.

``bngp evaluate`` draws R memberships b_1..b_R independently from the prior (n of K uniformly,
or an independent coin per individual), releases x_r = M(D_r) with fresh noise, fits every attack
on knowledge drawn independently of those draws, and scores every target k against every
release: s_rk = a(z_k, x_r), with a fixed function a of one release (``Attack.score``).  The
K R pairs (s_rk, b_rk) are not K R independent runs: the K scores of one release share its noise
and its dataset, and b_r has exactly n ones under the uniform prior.  The many-run bounds assume
independent runs, and the one-run bounds (Steinke, Nasr, Jagielski, arXiv:2305.08846, Thm. 3.1)
an independent fair inclusion coin per canary, so neither applies to the pooled pairs.

Per target the R pairs (s_rk, b_rk), r = 1..R, are independent and identically distributed: the
releases are independent draws and a is fixed.  Given b_rk = 1 the release is M(D) with D uniform
among the datasets that contain k (P_in), given b_rk = 0 it is M(D') with D' uniform among those
that do not (P_out).  The uniform prior couples the two by neighbours: D' = D - {k} + {j} with j
uniform outside D is uniform among the datasets without k, so if M is (eps, delta)-DP under
replacement, every test of P_in against P_out obeys the same trade-off inequalities, averaged
over the coupling (they are linear in the two error rates); with an independent coin per
individual the coupling is D' = D - {k} (add-remove).  So each target's R scores are one many-run
audit of "k in" against "k out" (Kairouz, Oh, Viswanath 2015; Jagielski, Ullman, Oprea 2020), to
which :func:`bngp.audit.many_run_audit` or :func:`bngp.audit.gdp_audit` applies, under the
relation of the prior.  The best of the K' targets that were in some release and out of another
is paid for by Bonferroni, each target at confidence 1 - beta / K'.  K' depends on the labels
alone, and every test is valid given the labels, so the maximum holds at confidence 1 - beta.

A target has about R theta runs in and R (1 - theta) out (theta = n / K), so the design's ceiling
(:mod:`bngp.audit.ceiling`) is about ln(R theta / ln(2 L K' / beta)): small unless R is large.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from bngp.audit.inputs import SeedLike, check_confidence, check_delta
from bngp.audit.many_run import gdp_audit, many_run_audit
from bngp.audit.thresholds import DEFAULT_STRATEGY
from bngp.audit.results import AuditResult
from bngp.errors import DataFormatError, InputError
from bngp.validation import check_finite_array

__all__ = ["PER_TARGET_METHODS", "PerTargetResult", "per_target_audit"]

#: the many-run methods :func:`per_target_audit` runs on each target.
PER_TARGET_METHODS = ("clopper-pearson", "gdp")


@dataclass(frozen=True)
class PerTargetResult(AuditResult):
    """The largest per-target many-run bound over the targets of R releases (module docstring).

    Attributes:
        epsilon_lb: the largest per-target bound.
        epsilon_kind: what it is, one of :data:`bngp.audit.BOUND_KINDS` (as the per-target method's).
        mu_lb: the largest per-target GDP mu lower bound (``gdp`` only, else None).
        per_target_method: ``"clopper-pearson"`` or ``"gdp"``.
        n_releases: R, the runs of every target.
        n_targets: K, the targets scored in every release.
        targets_audited: K', the targets in some release and out of another (the Bonferroni count).
        target_confidence: 1 - beta / K', the confidence of each target's bound.
        best_target: column of the target with the largest bound.
        best: that target's result record (``to_dict`` of its many-run result).
    """

    epsilon_lb: float
    epsilon_kind: str
    mu_lb: float | None
    per_target_method: str
    n_releases: int
    n_targets: int
    targets_audited: int
    target_confidence: float
    best_target: int
    best: dict[str, Any]


def per_target_audit(
    scores: np.ndarray,
    labels: np.ndarray,
    *,
    method: str = "clopper-pearson",
    confidence: float = 0.95,
    delta: float = 0.0,
    strategy: str = DEFAULT_STRATEGY,
    seed: SeedLike = 0,
) -> PerTargetResult:
    """Largest many-run bound over targets, each target's R scores one many-run audit.

    Args:
        scores: (R, K) scores, release r and target k, higher = member.
        labels: (R, K) memberships (1 = the target was in release r's dataset).
        method: ``"clopper-pearson"`` (:func:`bngp.audit.many_run_audit`) or ``"gdp"``
            (:func:`bngp.audit.gdp_audit`).
        confidence: 1 - beta of the maximum; each target is audited at 1 - beta / K'.
        delta: the delta of the bound.
        strategy: the threshold rule of each target's audit.
        seed: seed of each target's rule (the same for every target).

    Example:
        >>> rng = np.random.default_rng(0)
        >>> labels = rng.random((400, 20)) < 0.5
        >>> result = per_target_audit(labels + 0.1 * rng.normal(size=labels.shape), labels)
        >>> result.targets_audited, 2.0 < result.epsilon_lb < 4.0
        (20, True)
    """
    if method not in PER_TARGET_METHODS:
        raise InputError(f"`method` must be one of {', '.join(PER_TARGET_METHODS)}, got {method!r}.")
    values = check_finite_array("scores", scores, ndim=2)
    members = check_finite_array("labels", labels, ndim=2)
    if values.shape != members.shape:
        raise DataFormatError(f"`scores` {values.shape} and `labels` {members.shape} must have the same shape.")
    if np.any((members != 0) & (members != 1)):
        raise DataFormatError("`labels` must be 0/1.")
    beta = 1.0 - check_confidence(confidence)
    delta = check_delta(delta)
    members = members.astype(bool)
    n_releases, n_targets = values.shape
    counts = members.sum(axis=0)
    audited = np.flatnonzero((counts > 0) & (counts < n_releases))
    if audited.size == 0:
        raise DataFormatError("no target is a member of one release and a non-member of another: nothing to audit.")
    each = 1.0 - beta / audited.size
    audit = gdp_audit if method == "gdp" else many_run_audit
    best_target, best = None, None
    for target in audited:
        result = audit(values[:, target], members[:, target], confidence=each, delta=delta, strategy=strategy,
                       seed=seed)
        if best is None or result.epsilon_lb > best.epsilon_lb:
            best_target, best = int(target), result
    return PerTargetResult(
        method=f"per-target many-run {method}",
        confidence=1.0 - beta,
        delta=delta,
        thresholds_examined=best.thresholds_examined,
        union_bound=f"bonferroni over {audited.size} targets (each at confidence 1 - beta/{audited.size})",
        epsilon_lb=best.epsilon_lb,
        epsilon_kind=best.epsilon_kind,
        mu_lb=best.mu_lb if method == "gdp" else None,
        per_target_method=method,
        n_releases=n_releases,
        n_targets=n_targets,
        targets_audited=int(audited.size),
        target_confidence=each,
        best_target=best_target,
        best=best.to_dict(),
    )
