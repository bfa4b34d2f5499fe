"""Matched-utility calibration: closed forms against Monte Carlo, root-finding, the paper's
known answer and kappa weighting."""

from __future__ import annotations

import math

import dp_accounting
import numpy as np
import pytest
import torch

from bngp.errors import InputError
from bngp.defenses import (
    LaplaceDefense,
    attribute_weights,
    expected_abs_noise,
    expected_clipped_loss,
    match_utility,
    paper_sensitivity,
    scale_for_clipped_loss,
    scale_for_expected_abs_noise,
    utility_loss,
)

torch.set_num_threads(1)


def test_paper_known_answer() -> None:
    """App. L.3: a mean |noise| of 1e-4 with sensitivity 12.5 needs eps = 1.25e5."""
    calibration = match_utility("laplace", 1e-4, paper_sensitivity("l1", 5000, 400))
    assert calibration.scale == pytest.approx(1e-4, rel=1e-15)
    assert calibration.epsilon == pytest.approx(1.25e5, rel=1e-12)
    assert calibration.loss_model == "noise"
    defense = calibration.defense()
    assert isinstance(defense, LaplaceDefense)
    assert defense.guarantee.epsilon == pytest.approx(1.25e5, rel=1e-12)


def test_expected_abs_noise_closed_forms() -> None:
    assert expected_abs_noise("laplace", 0.2) == 0.2
    assert expected_abs_noise("gaussian", 0.2) == pytest.approx(0.2 * math.sqrt(2 / math.pi))
    assert expected_abs_noise("linf", 0.2, n_attributes=9) == pytest.approx(1.0)
    for kind, d in (("laplace", None), ("gaussian", None), ("linf", 9)):
        assert expected_abs_noise(kind, scale_for_expected_abs_noise(kind, 0.37, d), d) == pytest.approx(0.37)


def test_gaussian_and_linf_matches() -> None:
    gaussian = match_utility("gaussian", 1e-3, paper_sensitivity("l2", 100, 50), delta=1e-5)
    assert gaussian.scale == pytest.approx(1e-3 * math.sqrt(math.pi / 2))
    assert gaussian.epsilon == pytest.approx(
        dp_accounting.get_epsilon_gaussian(gaussian.scale / (10 / 50), 1e-5), rel=1e-9
    )
    assert gaussian.defense().guarantee.epsilon == pytest.approx(gaussian.epsilon)
    linf = match_utility("linf", 1e-3, paper_sensitivity("linf", 100, 50), n_attributes=100)
    assert linf.scale == pytest.approx(2e-3 / 101)
    assert linf.epsilon == pytest.approx((1 / 50) / linf.scale)


X_HAT = np.array([[0.0, 0.02, 0.5, 0.97, 1.0], [0.1, 0.3, 0.6, 0.8, 0.99]])
KAPPA = np.array([50.0, 0.0, 0.0, 50.0, 1.0])


@pytest.mark.parametrize(("kind", "scale"), [("laplace", 0.05), ("gaussian", 0.08), ("linf", 0.015)])
@pytest.mark.parametrize("kappa", [None, KAPPA], ids=["uniform", "kappa"])
def test_clipped_loss_closed_form_matches_monte_carlo(kind: str, scale: float, kappa) -> None:
    """200k releases per row; tolerance 4 standard errors of the Monte Carlo mean."""
    from bngp.release.noise import sample_gaussian, sample_laplace, sample_linf

    generator = torch.Generator().manual_seed(31)
    draws = 200_000
    x_hat = np.repeat(X_HAT, draws // 2, axis=0)
    if kind == "laplace":
        xi = sample_laplace(x_hat.shape, scale, generator).numpy()
    elif kind == "gaussian":
        xi = sample_gaussian(x_hat.shape, scale, generator).numpy()
    else:
        xi = sample_linf(x_hat.shape[0], x_hat.shape[1], scale, generator).numpy()
    per_row = np.abs(np.clip(x_hat + xi, 0, 1) - x_hat) @ attribute_weights(kappa, 5)
    closed = expected_clipped_loss(kind, scale, X_HAT, kappa)
    assert closed == pytest.approx(per_row.mean(), abs=4 * per_row.std() / math.sqrt(draws))
    assert utility_loss(np.clip(x_hat + xi, 0, 1) - x_hat, kappa) == pytest.approx(per_row.mean())
    # clipping only shortens deviations
    assert closed < expected_abs_noise(kind, scale, 5)


@pytest.mark.parametrize("kind", ["laplace", "gaussian", "linf"])
def test_clipped_root_finding(kind: str) -> None:
    target = 0.03
    scale = scale_for_clipped_loss(kind, target, X_HAT, KAPPA)
    assert expected_clipped_loss(kind, scale, X_HAT, KAPPA) == pytest.approx(target, rel=1e-10)
    assert scale > scale_for_expected_abs_noise(kind, target, 5)
    uniform = scale_for_clipped_loss(kind, target, X_HAT)
    assert uniform != pytest.approx(scale, rel=1e-3)  # kappa matters once clipping does


def test_clipped_match_with_kappa_on_paper_scale() -> None:
    """|Q| = 5000, kappa_j = 50 on 10% of the SNVs (App. L.3); a tiny loss is barely clipped."""
    rng = np.random.default_rng(3)
    x_hat = rng.integers(0, 401, size=(4, 5000)) / 400
    kappa = np.where(np.arange(5000) < 500, 50.0, 0.0)
    calibration = match_utility("laplace", 1e-4, paper_sensitivity("l1", 5000, 400), x_hat=x_hat, kappa=kappa)
    assert calibration.loss_model == "clipped"
    assert calibration.scale >= 1e-4
    assert calibration.scale == pytest.approx(1e-4, rel=0.02)
    assert calibration.epsilon == pytest.approx(12.5 / calibration.scale)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: scale_for_clipped_loss("laplace", 0.5, X_HAT), "must be < 0.5"),
        (lambda: scale_for_expected_abs_noise("laplace", -1.0), "`target_loss` must be a finite number > 0"),
        (lambda: expected_abs_noise("rr", 1.0), "`kind` must be one of laplace, gaussian, linf"),
        (lambda: expected_abs_noise("linf", 1.0), "needs `n_attributes`"),
        (lambda: attribute_weights(np.array([-1.0, 2.0]), 2), "`kappa` must be >= 0"),
        (lambda: attribute_weights(np.zeros(3), 3), "positive sum"),
        (lambda: attribute_weights(np.ones(2), 3), "must have 3 entries"),
        (lambda: match_utility("gaussian", 1e-3, paper_sensitivity("l2", 3, 2)), "needs `delta`"),
        (lambda: match_utility("laplace", 1e-3, paper_sensitivity("l2", 3, 2)), "needs an l1 sensitivity"),
        (lambda: expected_clipped_loss("laplace", 0.1, np.array([[1.5]])), "`x_hat` must lie in"),
    ],
)
def test_bad_input(call, message: str) -> None:
    with pytest.raises(InputError, match=message.replace("(", r"\(").replace(")", r"\)")):
        call()
