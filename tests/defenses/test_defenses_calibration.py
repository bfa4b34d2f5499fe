"""Calibration functions: known answers, agreement with dp_accounting, private-side rounding."""

from __future__ import annotations

import math

import dp_accounting
import pytest

from bngp.errors import InputError
from bngp.defenses import (
    GaussianDefense,
    LaplaceDefense,
    LinfKNormDefense,
    flip_probability,
    gaussian_delta,
    gaussian_epsilon,
    gaussian_mu,
    gaussian_sigma,
    laplace_epsilon,
    laplace_scale,
    linf_scale,
    paper_sensitivity,
)


def test_laplace_known_answer_paper_appendix_l3() -> None:
    """App. L.3: sensitivity 5000/400 = 12.5 and scale 1e-4 give eps = 1.25e5."""
    sensitivity = paper_sensitivity("l1", 5000, 400)
    assert sensitivity.value == 12.5
    assert laplace_scale(1.25e5, sensitivity) == pytest.approx(1e-4, rel=1e-15)
    assert laplace_epsilon(1e-4, sensitivity) == pytest.approx(1.25e5, rel=1e-15)
    defense = LaplaceDefense.from_epsilon(1.25e5, sensitivity)
    assert defense.guarantee.epsilon == pytest.approx(1.25e5, rel=1e-15)
    assert defense.noise_law.scale == pytest.approx(1e-4, rel=1e-15)


CASES = [(0.1, 1e-5, 1.0), (1.0, 1e-5, 1.0), (3.0, 1e-3, 0.02), (600.0, 1e-6, 0.25), (1.25e5, 1e-5, 12.5)]


@pytest.mark.parametrize(("epsilon", "delta", "sensitivity"), CASES)
def test_gaussian_sigma_equals_dp_accounting(epsilon: float, delta: float, sensitivity: float) -> None:
    sigma = gaussian_sigma(epsilon, delta, sensitivity)
    reference = sensitivity * dp_accounting.get_sigma_gaussian(epsilon, delta)
    assert sigma == pytest.approx(reference, rel=1e-9)
    assert sigma >= reference
    # private side: the Balle & Wang profile at eps is at most delta
    assert gaussian_delta(sigma, epsilon, sensitivity) <= delta
    # and tight: 0.1% less noise breaks (eps, delta)
    assert gaussian_delta(sigma * 0.999, epsilon, sensitivity) > delta


@pytest.mark.parametrize(("epsilon", "delta", "sensitivity"), CASES)
def test_gaussian_epsilon_round_trip(epsilon: float, delta: float, sensitivity: float) -> None:
    sigma = gaussian_sigma(epsilon, delta, sensitivity)
    recovered = gaussian_epsilon(sigma, delta, sensitivity)
    assert recovered == pytest.approx(epsilon, rel=1e-8)
    assert recovered == pytest.approx(dp_accounting.get_epsilon_gaussian(sigma / sensitivity, delta), rel=1e-9)
    assert gaussian_delta(sigma, recovered, sensitivity) <= delta


def test_gaussian_delta_closed_form_small_case() -> None:
    """mu = 1, eps = 0: delta = Phi(1/2) - Phi(-1/2) = 0.38292..."""
    assert gaussian_delta(1.0, 0.0, 1.0) == pytest.approx(0.3829249225480262, rel=1e-12)
    assert gaussian_mu(0.5, 2.0) == 4.0


def test_gaussian_defense_guarantee_record() -> None:
    sensitivity = paper_sensitivity("l2", 100, 50)
    defense = GaussianDefense.from_epsilon(2.0, 1e-6, sensitivity)
    guarantee = defense.guarantee
    assert (guarantee.mechanism, guarantee.epsilon, guarantee.delta, guarantee.norm) == ("gaussian", 2.0, 1e-6, "l2")
    assert guarantee.sensitivity == pytest.approx(math.sqrt(100) / 50)
    assert guarantee.gdp_mu == pytest.approx(guarantee.sensitivity / defense.sigma)
    assert defense.sigma == pytest.approx(sensitivity.value * dp_accounting.get_sigma_gaussian(2.0, 1e-6), rel=1e-9)
    with pytest.raises(InputError, match="does not give"):
        GaussianDefense(defense.sigma * 0.99, sensitivity, delta=1e-6, epsilon=2.0)


def test_dp_events_agree_with_dp_accounting_pld() -> None:
    """The DpEvents handed to dp_accounting's PLD accountant give back our eps."""
    from dp_accounting.pld import PLDAccountant

    laplace = LaplaceDefense.from_epsilon(2.0, paper_sensitivity("l1", 10, 5))
    accountant = PLDAccountant()
    accountant.compose(laplace.dp_event)
    assert accountant.get_epsilon(1e-9) == pytest.approx(2.0, rel=1e-3)

    gaussian = GaussianDefense.from_epsilon(1.0, 1e-5, paper_sensitivity("l2", 10, 5))
    accountant = PLDAccountant()
    accountant.compose(gaussian.dp_event)
    assert accountant.get_epsilon(1e-5) == pytest.approx(1.0, rel=1e-2)


def test_linf_and_rr_calibration() -> None:
    sensitivity = paper_sensitivity("linf", 5000, 400)
    assert sensitivity.value == 1 / 400
    defense = LinfKNormDefense.from_epsilon(600.0, sensitivity)
    assert defense.noise_law.scale == pytest.approx(1 / 400 / 600)
    assert linf_scale(600.0, sensitivity) == defense.scale
    assert defense.guarantee.epsilon == pytest.approx(600.0)
    assert flip_probability(math.log(3.0)) == pytest.approx(0.25)
    assert flip_probability(1e4) == 0.0
    assert flip_probability(1e-12) == pytest.approx(0.5)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: laplace_scale(-1, 1.0), "`epsilon` must be > 0, got -1."),
        (lambda: laplace_scale(0, 1.0), "`epsilon` must be > 0, got 0."),
        (lambda: laplace_scale(float("nan"), 1.0), "`epsilon` must be > 0, got nan."),
        (lambda: laplace_scale(float("inf"), 1.0), "`epsilon` must be finite, got inf."),
        (lambda: gaussian_sigma(1.0, 1.0, 1.0), "`delta` must be in (0, 1), got 1."),
        (lambda: gaussian_sigma(1.0, 0.0, 1.0), "`delta` must be in (0, 1), got 0."),
        (lambda: laplace_scale(1.0, -2.0), "`sensitivity` must be a finite number > 0, got -2."),
        (lambda: GaussianDefense(0.1, paper_sensitivity("l2", 3, 2)), "needs `delta`"),
        (lambda: LaplaceDefense(0.1, paper_sensitivity("l2", 3, 2)), "needs an l1 sensitivity"),
    ],
)
def test_bad_parameters_raise_input_error(call, message: str) -> None:
    with pytest.raises(InputError) as info:
        call()
    assert message in str(info.value)
    assert "\n" not in str(info.value)
