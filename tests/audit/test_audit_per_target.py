"""Releases x targets scores (bngp evaluate's) audited per target: each target's scores, one per
release, are one many-run audit; the bound is the best target's, Bonferroni over the targets."""

import numpy as np
import pytest

from bngp.audit import gdp_audit, many_run_audit, per_target_audit, perfect_scores
from bngp.errors import DataFormatError, InputError


def _data(seed=0, releases=40, targets=12, signal=1.5):
    rng = np.random.default_rng(seed)
    labels = (rng.random((releases, targets)) < 0.5).astype(np.int8)
    return rng.normal(size=labels.shape) + signal * labels, labels


@pytest.mark.parametrize("method, audit", [("clopper-pearson", many_run_audit), ("gdp", gdp_audit)])
def test_the_bound_is_the_best_target_at_confidence_one_minus_beta_over_k(method, audit):
    scores, labels = _data()
    labels[:, 3] = 1  # a target in every release: not audited, and not counted in the Bonferroni
    result = per_target_audit(scores, labels, method=method, delta=1e-5)
    each = 1 - 0.05 / 11
    bounds = {k: audit(scores[:, k], labels[:, k], confidence=each, delta=1e-5).epsilon_lb
              for k in range(12) if k != 3}
    best = max(bounds, key=bounds.get)
    assert result.targets_audited == 11 and result.target_confidence == pytest.approx(each)
    assert result.best_target == best and result.epsilon_lb == pytest.approx(bounds[best])
    assert result.n_releases == 40 and result.n_targets == 12
    assert result.union_bound == "bonferroni over 11 targets (each at confidence 1 - beta/11)"
    assert (result.mu_lb is None) == (method == "clopper-pearson")


def test_the_ceiling_grows_with_the_releases_not_with_the_targets():
    """A target has about R/2 runs per side: more releases raise the ceiling, more targets only
    cost Bonferroni."""
    ceilings = {}
    for releases, targets in ((40, 12), (160, 12), (40, 48)):
        _, labels = _data(releases=releases, targets=targets)
        ceilings[releases, targets] = per_target_audit(perfect_scores(labels), labels).epsilon_lb
    assert ceilings[160, 12] > ceilings[40, 12] + 0.5 > ceilings[40, 48] + 0.5


def test_bad_input():
    scores, labels = _data()
    with pytest.raises(DataFormatError, match="nothing to audit"):
        per_target_audit(scores, np.ones_like(labels))
    with pytest.raises(DataFormatError, match="same shape"):
        per_target_audit(scores[:, :5], labels)
    with pytest.raises(InputError, match="`method` must be one of clopper-pearson, gdp"):
        per_target_audit(scores, labels, method="one-run")
    with pytest.raises(InputError, match="2-D|dimension"):
        per_target_audit(scores.ravel(), labels.ravel())
