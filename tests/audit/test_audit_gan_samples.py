"""Privacy calculators for generated samples (Lin, Sekar, Fanti): check value and inverses."""

import math

import numpy as np
import pytest

from bngp.audit import (
    auc_upper_bound,
    epsilon_lower_bound_from_tv,
    gan_sample_delta,
    gan_sample_epsilon,
    roc_tpr_upper_bound,
    tv_lower_bound_from_auc,
    tv_lower_bound_from_roc,
    tv_upper_bound_from_dp,
)
from bngp.errors import InputError


def test_theorem1_check_value():
    # audits.md sec. 5: Gamma = Delta = 1, tau = xi = 0, n = 1, m = 1e4, eps = 1 -> 3.164e-4.
    assert gan_sample_delta(1, 10_000, 1.0) == pytest.approx(3.164e-4, rel=1e-3)
    assert gan_sample_delta(10, 10_000, 1.0) == pytest.approx(10 * gan_sample_delta(1, 10_000, 1.0))
    assert gan_sample_delta(1, 10_000, 1.0, xi=1e-6) == pytest.approx(3.164e-4 + 2e-6, rel=1e-3)


def test_theorem1_inverse():
    for delta in [1e-3, 3.164e-4, 1e-5]:
        eps = gan_sample_epsilon(1, 10_000, delta)
        assert gan_sample_delta(1, 10_000, eps) <= delta
        assert gan_sample_delta(1, 10_000, eps * (1 - 1e-9)) > delta * (1 - 1e-6)
    assert gan_sample_epsilon(1, 10_000, 1e-6, xi=1e-6) == math.inf


def test_roc_and_auc_bounds_and_inverses():
    assert roc_tpr_upper_bound(np.array([0.0, 0.5, 0.9]), 0.2) == pytest.approx([0.2, 0.7, 1.0])
    for tv in [0.0, 0.1, 0.5, 1.0]:
        assert tv_lower_bound_from_auc(auc_upper_bound(tv)) == pytest.approx(tv, abs=1e-12)
    assert tv_lower_bound_from_auc(0.4) == 0.0
    assert tv_lower_bound_from_roc(np.array([0.0, 0.2, 1.0]), np.array([0.0, 0.7, 1.0])) == pytest.approx(0.5)


def test_dp_total_variation_bound_and_inverse():
    assert tv_upper_bound_from_dp(0.0, 0.1) == pytest.approx(0.1)
    for eps, delta in [(0.5, 0.0), (1.0, 1e-5), (3.0, 0.01)]:
        tv = tv_upper_bound_from_dp(eps, delta)
        assert epsilon_lower_bound_from_tv(tv, delta) == pytest.approx(eps, rel=1e-9)
    assert epsilon_lower_bound_from_tv(0.05, 0.1) == 0.0
    assert epsilon_lower_bound_from_tv(1.0) == math.inf


@pytest.mark.parametrize(
    "call",
    [
        lambda: gan_sample_delta(0, 100, 1.0),
        lambda: gan_sample_delta(1, 100, 0.0),
        lambda: gan_sample_delta(1, 100, 1.0, tau=-1.0),
        lambda: auc_upper_bound(1.5),
        lambda: tv_lower_bound_from_auc(-0.1),
        lambda: roc_tpr_upper_bound(np.array([1.2]), 0.1),
        lambda: tv_lower_bound_from_roc(np.array([0.1]), np.array([0.1, 0.2])),
        lambda: tv_upper_bound_from_dp(1.0, -0.1),
    ],
)
def test_bad_input(call):
    with pytest.raises(InputError):
        call()
