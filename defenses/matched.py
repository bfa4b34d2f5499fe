"""Matched utility: a DP mechanism with the same expected utility loss as a trained defender.

arXiv:2410.07414, Fig. 2f and App. L.3: the defender's loss is v(s, b) + sum_j kappa_j |delta_j|; the
Bayesian defender reached an average utility loss of 1e-4, and the comparison Laplace mechanism
is calibrated to the same expected |noise|: scale b = 1e-4, so eps = (|Q|/n) / b =
12.5 / 1e-4 = 1.25e5.

Utility loss used throughout (frequency units), for a deviation delta (noise xi, or the
realised change clip(x_hat + xi, 0, 1) - x_hat) and weights w_j = kappa_j / sum_l kappa_l:

    U = E[ sum_j w_j |delta_j| ]          (w_j = 1/|Q| when kappa is None or a scalar)

so a scalar kappa gives the mean |noise| per attribute (the paper's App. L.3 measure), and a
per-attribute kappa gives the kappa-weighted loss normalised by sum_j kappa_j (the paper's
sum_j kappa_j |delta_j| divided by sum_j kappa_j, so that it stays in frequency units).

Two loss models:

``noise`` (the paper's)
    U = E|xi_j|, which is the same for every j for the i.i.d.-per-coordinate mechanisms here,
    so the weights do not matter: Laplace E|xi_j| = b; Gaussian E|xi_j| = sigma sqrt(2/pi);
    l-inf K-norm in dimension d, E|xi_j| = E[r] E|u_j| = (d + 1) a / 2.  Inverted in closed form.
``clipped``
    The realised loss on given statistics x_hat: clipping to [0, 1] shortens the deviation
    towards the nearer bound, |clip(x + xi, 0, 1) - x| = min(xi, 1 - x) for xi > 0 and
    min(-xi, x) for xi < 0, so for a symmetric law with m(a) = E min(|xi_j|, a),

        E|clip(x + xi_j) - x| = (m(x) + m(1 - x)) / 2,

    with closed forms
        Laplace   m(a) = b (1 - e^(-a/b)),
        Gaussian  m(a) = sigma sqrt(2/pi) (1 - e^(-a^2 / (2 sigma^2))) + 2 a Phi(-a/sigma),
        l-inf     m(a) = (d+1) a_s/2 F_{d+2}(a) + a S_{d+1}(a) - a^2 / (2 d a_s) S_d(a),
    (F_k, S_k: CDF and survival function of Gamma(k, scale a_s), from |xi_j| = r V with
    r ~ Gamma(d + 1, a_s), V ~ U(0, 1)).  Here kappa matters: the weights fall on attributes
    with different x_hat.  The scale is found by Brent's method on a checked bracket; the
    loss is increasing in the scale with supremum 1/2, so targets must lie in (0, 1/2).

Composition (arXiv:2410.07414, App. L.6).  A defender trained after m fixed Gaussian mechanisms
releases c = m + 1 copies of f(D), x = [f(D) + N(0, s_1^2), ..., f(D) + N(0, s_m^2), f(D) + G(b, r)]
(c |Q| outputs).  The mechanism matched to it releases the same c |Q| outputs, with i.i.d. noise
of one scale on all of them (one mechanism on the concatenated statistic), and U is measured
over all c |Q| columns with weights that give every copy of attribute j the defender's kappa_j:

    w_(i, j) = kappa_j / (c sum_l kappa_l)         (block i = 1..c, attribute j)

(:func:`release_weights`; uniform 1/(c |Q|) for a scalar kappa, i.e. the plain mean |x - x_hat|
over the whole release, the measure ``bngp evaluate`` reports).  The trained defender's kappa
weighs its learned block only in training; the fixed blocks release the same attributes, so the
value of attribute j is taken to be the same in every copy, and the copies weigh equally.  Its
eps is stated for the sensitivity of the concatenated statistic,
:func:`bngp.defenses.sensitivity.composed_sensitivity`: c Delta_1 (l1), sqrt(c) Delta_2 (l2),
Delta_inf (l-inf), and the l-inf K-norm law lives in dimension d = c |Q|.  c = 1 is the
uncomposed case above, unchanged.

Randomized response is not matched here (its noise is not an additive scale family).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.optimize import brentq
from scipy.special import gammainc, gammaincc, ndtr

from bngp.data.geometry import THREAT_MODEL, PopulationSpace
from bngp.errors import InputError
from bngp.validation import check_finite_array, check_positive_int
from .base import Defense
from .shrinkage import StatisticLevels, clipped_deviation_loss
from .dp import (
    GaussianDefense,
    LaplaceDefense,
    LinfKNormDefense,
    check_delta,
    gaussian_epsilon,
    laplace_epsilon,
    linf_epsilon,
)
from .sensitivity import Sensitivity, composed_sensitivity

__all__ = [
    "MATCHABLE",
    "LOSS_MODELS",
    "attribute_weights",
    "release_weights",
    "scale_for_projected_gaussian_loss",
    "utility_loss",
    "expected_abs_noise",
    "scale_for_expected_abs_noise",
    "expected_clipped_loss",
    "scale_for_clipped_loss",
    "MatchedCalibration",
    "match_utility",
]

#: mechanisms that can be matched to a utility loss.
MATCHABLE = ("laplace", "gaussian", "linf")
#: "noise": E|xi| (paper App. L.3); "clipped": realised E|clip(x_hat + xi) - x_hat| on given x_hat.
LOSS_MODELS = ("noise", "clipped")
#: the norm each matchable mechanism's sensitivity is measured in.
_NORM = {"laplace": "l1", "gaussian": "l2", "linf": "linf"}


def _check_kind(kind: str) -> str:
    if kind not in MATCHABLE:
        raise InputError(f"`kind` must be one of {', '.join(MATCHABLE)}, got {kind!r}.")
    return kind


def _check_target(target: float, upper: float | None = None) -> float:
    target = float(target)
    if math.isnan(target) or target <= 0 or math.isinf(target):
        raise InputError(f"`target_loss` must be a finite number > 0, got {target:g}.")
    if upper is not None and target >= upper:
        raise InputError(f"`target_loss` must be < {upper:g} for the clipped loss, got {target:g}.")
    return target


def attribute_weights(kappa: float | np.ndarray | None, n_attributes: int) -> np.ndarray:
    """w_j = kappa_j / sum_l kappa_l (uniform 1/|Q| for None or a scalar kappa > 0).

    Args:
        kappa: None, a scalar > 0, or a (|Q|,) array of kappa_j >= 0 with a positive sum.
        n_attributes: |Q|.

    Returns:
        (|Q|,) float64 weights summing to 1.
    """
    n_attributes = check_positive_int("n_attributes", n_attributes)
    if kappa is None or np.ndim(kappa) == 0:
        if kappa is not None and not float(kappa) > 0:
            raise InputError(f"`kappa` must be > 0, got {float(kappa):g}.")
        return np.full(n_attributes, 1.0 / n_attributes)
    values = check_finite_array("kappa", kappa, ndim=1)
    if values.shape[0] != n_attributes:
        raise InputError(f"`kappa` must have {n_attributes} entries, got {values.shape[0]}.")
    if (values < 0).any():
        raise InputError(f"`kappa` must be >= 0, found {values[values < 0][0]:g}.")
    total = values.sum()
    if total <= 0:
        raise InputError("`kappa` must have a positive sum.")
    return values / total


def release_weights(kappa: float | np.ndarray | None, n_attributes: int, composition: int = 1) -> np.ndarray:
    """Weights of the c |Q| columns of a release of c = ``composition`` copies of f(D) (module
    docstring): w_(i, j) = kappa_j / (c sum_l kappa_l), every copy weighing attribute j alike.

    Args:
        kappa: None, a scalar > 0 or a (|Q|,) array, as for :func:`attribute_weights`.
        n_attributes: |Q|, the attributes of one copy.
        composition: c >= 1.

    Returns:
        (c |Q|,) float64 weights summing to 1; c = 1 gives :func:`attribute_weights`.
    """
    composition = check_positive_int("composition", composition)
    return np.tile(attribute_weights(kappa, n_attributes), composition) / composition


def utility_loss(deviation: np.ndarray, kappa: float | np.ndarray | None = None) -> float:
    """Empirical U = mean over rows of sum_j w_j |deviation_j| (frequency units).

    Args:
        deviation: (B, |Q|) or (|Q|,) noise xi, or realised release - x_hat.
        kappa: see :func:`attribute_weights`.
    """
    values = check_finite_array("deviation", deviation)
    values = values.reshape(-1, values.shape[-1])
    weights = attribute_weights(kappa, values.shape[-1])
    return float((np.abs(values) @ weights).mean())


def _check_scale(scale: float) -> float:
    scale = float(scale)
    if not scale > 0 or math.isinf(scale):
        raise InputError(f"`scale` must be a finite number > 0, got {scale:g}.")
    return scale


def _abs_noise_factor(kind: str, n_attributes: int | None) -> float:
    """c with E|xi_j| = c * scale."""
    if kind == "laplace":
        return 1.0
    if kind == "gaussian":
        return math.sqrt(2.0 / math.pi)
    if n_attributes is None:
        raise InputError("the l-inf K-norm loss needs `n_attributes` (the noise dimension d).")
    return (check_positive_int("n_attributes", n_attributes) + 1) / 2.0


def expected_abs_noise(kind: str, scale: float, n_attributes: int | None = None) -> float:
    """E|xi_j| of one coordinate (Laplace b; Gaussian sigma sqrt(2/pi); l-inf (d + 1) a / 2).

    >>> expected_abs_noise("laplace", 1e-4)
    0.0001
    """
    return _abs_noise_factor(_check_kind(kind), n_attributes) * _check_scale(scale)


def scale_for_expected_abs_noise(kind: str, target: float, n_attributes: int | None = None) -> float:
    """The scale with E|xi_j| = ``target`` (inverse of :func:`expected_abs_noise`)."""
    return _check_target(target) / _abs_noise_factor(_check_kind(kind), n_attributes)


def _truncated_mean(kind: str, scale: float, a: np.ndarray, dim: int) -> np.ndarray:
    """m(a) = E min(|xi_j|, a) for a >= 0 (module docstring)."""
    if kind == "laplace":
        return -scale * np.expm1(-a / scale)
    if kind == "gaussian":
        return (
            scale * math.sqrt(2.0 / math.pi) * -np.expm1(-(a**2) / (2.0 * scale**2))
            + 2.0 * a * ndtr(-a / scale)
        )
    t = a / scale
    return (
        0.5 * (dim + 1) * scale * gammainc(dim + 2, t)
        + a * gammaincc(dim + 1, t)
        - a**2 / (2.0 * dim * scale) * gammaincc(dim, t)
    )


def _weighted_values(x_hat: np.ndarray, kappa: float | np.ndarray | None) -> tuple[np.ndarray, np.ndarray, int]:
    """Distinct x_hat values and their total weight (mean over rows of sum_j w_j [x_hat_bj = v])."""
    values = check_finite_array("x_hat", x_hat)
    values = values.reshape(-1, values.shape[-1])
    if values.min() < 0 or values.max() > 1:
        raise InputError("`x_hat` must lie in [0, 1].")
    weights = np.broadcast_to(attribute_weights(kappa, values.shape[1]), values.shape) / values.shape[0]
    distinct, inverse = np.unique(values, return_inverse=True)
    mass = np.bincount(inverse.ravel(), weights=weights.ravel(), minlength=distinct.size)
    return distinct, mass, values.shape[1]


def _clipped_loss(kind: str, scale: float, distinct: np.ndarray, mass: np.ndarray, dim: int) -> float:
    per_value = 0.5 * (_truncated_mean(kind, scale, distinct, dim) + _truncated_mean(kind, scale, 1.0 - distinct, dim))
    return float(per_value @ mass)


def expected_clipped_loss(
    kind: str, scale: float, x_hat: np.ndarray, kappa: float | np.ndarray | None = None
) -> float:
    """Closed-form E[sum_j w_j |clip(x_hat_j + xi_j, 0, 1) - x_hat_j|], averaged over rows of x_hat.

    Args:
        kind: "laplace", "gaussian" or "linf".
        scale: b, sigma or a.
        x_hat: (B, |Q|) or (|Q|,) statistics in [0, 1] (for linf, d = |Q|).
        kappa: see :func:`attribute_weights`.
    """
    kind = _check_kind(kind)
    distinct, mass, dim = _weighted_values(x_hat, kappa)
    return _clipped_loss(kind, _check_scale(scale), distinct, mass, dim)


def _scale_from_unclipped(excess, low: float, what: str, target: float) -> float:
    """The root of ``excess`` (increasing) from the unclipped solution ``low``, where the clipped loss is <= the
    target: the bracket's upper end doubled until it holds the root, then Brent's method."""
    if excess(low) >= 0:
        return low
    high = 2.0 * low
    for _ in range(200):
        if excess(high) >= 0:
            break
        low, high = high, 2.0 * high
    else:
        raise InputError(f"no {what} reaches the clipped loss {target:g} on this `x_hat`.")
    return float(brentq(excess, low, high, xtol=low * 1e-13, rtol=1e-13))


def scale_for_clipped_loss(
    kind: str, target: float, x_hat: np.ndarray, kappa: float | np.ndarray | None = None
) -> float:
    """The scale whose realised clipped loss on ``x_hat`` equals ``target`` (Brent's method).

    The bracket starts at the unclipped solution (clipping only shortens deviations, so the
    clipped loss there is <= target) and doubles its upper end until the loss exceeds target.
    """
    kind = _check_kind(kind)
    target = _check_target(target, upper=0.5)
    distinct, mass, dim = _weighted_values(x_hat, kappa)

    def excess(scale: float) -> float:
        return _clipped_loss(kind, scale, distinct, mass, dim) - target

    return _scale_from_unclipped(excess, scale_for_expected_abs_noise(kind, target, dim), f"{kind} scale", target)


def scale_for_projected_gaussian_loss(target: float, x_hat: np.ndarray, leverages: np.ndarray,
                                      kappa: float | np.ndarray | None = None) -> float:
    """The sigma whose Gaussian mechanism projected onto the candidates (:class:`bngp.defenses.shaped.ProjectedDefense`)
    has the realised clipped loss ``target`` on ``x_hat`` (B, |Q|), kappa-weighted (Brent's method).

    For a dataset of candidates the projected release is f(D) + V V^T n, n ~ N(0, sigma^2 I): attribute j's noise
    is N(0, sigma^2 l_j) with l_j = ||V_j||^2 its leverage (``leverages``,
    :attr:`bngp.data.geometry.PopulationSpace.leverages`), so its clipped loss is the closed form
    :func:`bngp.defenses.shrinkage.clipped_deviation_loss` at the scale sigma sqrt(l_j) (a mean absolute deviation depends on each attribute's marginal law only).  The bracket starts
    at the unclipped solution sigma = target / (sqrt(2 / pi) sum_j w_j sqrt(l_j)), where the clipped loss is
    <= target."""
    target = _check_target(target, upper=0.5)
    values = check_finite_array("x_hat", x_hat)
    values = values.reshape(-1, values.shape[-1])
    if values.min() < 0 or values.max() > 1:
        raise InputError("`x_hat` must lie in [0, 1].")
    leverages = np.asarray(leverages, dtype=np.float64).reshape(-1)
    if leverages.size != values.shape[1] or np.any(leverages < 0):
        raise InputError(f"`leverages` must hold {values.shape[1]} values >= 0.")
    weights = attribute_weights(kappa, values.shape[1])
    levels = StatisticLevels.of(values)
    root, weight = np.sqrt(leverages)[levels.columns], weights[levels.columns] * values.shape[1]
    unclipped = math.sqrt(2.0 / math.pi) * float(weights @ np.sqrt(leverages))
    if unclipped <= 0:
        raise InputError("the candidates' row space is empty: no projected noise reaches a loss.")

    def excess(scale: float) -> float:
        return levels.mean(weight * clipped_deviation_loss("gaussian", 0.0, scale * root, levels.values)) - target

    return _scale_from_unclipped(excess, target / unclipped, "projected Gaussian scale", target)


def _epsilon_for_scale(kind: str, scale: float, sensitivity: Sensitivity, delta: float | None) -> float:
    if sensitivity.norm != _NORM[kind]:
        raise InputError(f"`{kind}` needs an {_NORM[kind]} sensitivity, got {sensitivity.norm}.")
    if kind == "laplace":
        return laplace_epsilon(scale, sensitivity)
    if kind == "linf":
        return linf_epsilon(scale, sensitivity)
    if delta is None:
        raise InputError("matching a Gaussian mechanism needs `delta`.")
    return gaussian_epsilon(scale, delta, sensitivity)


@dataclass(frozen=True)
class MatchedCalibration:
    """A DP mechanism calibrated to a target utility loss.

    Attributes:
        kind: "laplace", "gaussian" or "linf".
        target_loss: the matched utility loss U (frequency units).
        loss_model: "noise" or "clipped" (module docstring).
        scale: b, sigma or a.
        epsilon: the mechanism's eps for ``sensitivity`` (at ``delta`` for the Gaussian).
        delta: the Gaussian's delta (0 for the pure-DP mechanisms).
        sensitivity: the sensitivity the eps is stated for: that of the released statistic, the
            concatenation of ``composition`` copies of f(D) (:func:`composed_sensitivity`).
        composition: c, the copies of f(D) the mechanism perturbs (1: the plain release).
        copy_sensitivity: the sensitivity of one copy f(D) (``sensitivity`` when c = 1).
        space: the candidates' geometry when the Gaussian is projected onto their row space (the same guarantee,
            by post-processing), else None.
    """

    kind: str
    target_loss: float
    loss_model: str
    scale: float
    epsilon: float
    delta: float
    sensitivity: Sensitivity
    composition: int = 1
    copy_sensitivity: Sensitivity | None = None
    space: PopulationSpace | None = None

    def defense(self, sampler: str = "torch") -> Defense:
        """The calibrated defense; for c > 1 it perturbs c copies of f(D) (its ``composition``),
        with noise of this scale on all c |Q| outputs and its guarantee stated for the
        concatenated statistic; with a ``space``, projected onto the candidates' row space."""
        if self.kind == "laplace":
            defense = LaplaceDefense(self.scale, self.sensitivity, sampler=sampler)
        elif self.kind == "gaussian":
            defense = GaussianDefense(self.scale, self.sensitivity, delta=self.delta, sampler=sampler)
        else:
            defense = LinfKNormDefense(self.scale, self.sensitivity, sampler=sampler)
        if self.composition != 1:
            defense.composition = self.composition  # the DP noise is shaped like x_hat: any width
        if self.space is not None:
            from .shaped import ProjectedDefense

            return ProjectedDefense(defense, self.space)
        return defense

    def to_dict(self) -> dict:
        record = {
            "kind": self.kind,
            "target_loss": self.target_loss,
            "loss_model": self.loss_model,
            "scale": self.scale,
            "epsilon": self.epsilon,
            "delta": self.delta,
            "sensitivity": self.sensitivity.value,
            "norm": self.sensitivity.norm,
            "neighbouring": self.sensitivity.neighbouring,
        }
        if self.composition != 1:
            record["composition"] = self.composition
            record["copy_sensitivity"] = (self.copy_sensitivity or self.sensitivity).value
        if self.space is not None:
            record.update({"space": "population", "rank": self.space.rank, "threat_model": THREAT_MODEL})
        return record


def match_utility(
    kind: str,
    target_loss: float,
    sensitivity: Sensitivity,
    *,
    delta: float | None = None,
    x_hat: np.ndarray | None = None,
    kappa: float | np.ndarray | None = None,
    n_attributes: int | None = None,
    composition: int = 1,
    space: PopulationSpace | None = None,
) -> MatchedCalibration:
    """Calibrate ``kind`` to the utility loss ``target_loss`` and report its eps.

    With ``x_hat`` None the "noise" model is used (E|xi_j| = target; ``kappa`` does not change
    it, and ``n_attributes`` is required for linf); with ``x_hat`` the realised "clipped" loss on
    those statistics, kappa-weighted, is matched.

    With ``composition`` c > 1 the mechanism perturbs c copies of f(D) (module docstring):
    ``sensitivity`` is that of one copy f(D) and eps is stated for :func:`composed_sensitivity`;
    ``x_hat`` has c |Q| columns (c copies), ``kappa`` is per attribute (|Q|,) or a scalar and
    weighs the columns by :func:`release_weights`; ``n_attributes`` is |Q| of one copy, the
    l-inf noise dimension being c |Q|.  c = 1 is exactly the uncomposed calibration.

    With ``space`` (the candidates' geometry) the Gaussian mechanism is projected onto their row space
    (:func:`scale_for_projected_gaussian_loss`; the clipped model, so ``x_hat`` is required, and c = 1): the same
    eps for the same sigma, by post-processing.  The other laws are refused: their projected noise has no
    closed-form loss.

    >>> from bngp.defenses.sensitivity import paper_sensitivity
    >>> match_utility("laplace", 1e-4, paper_sensitivity("l1", 5000, 400)).epsilon  # App. L.3
    125000.0
    """
    kind = _check_kind(kind)
    if kind == "gaussian":
        if delta is None:
            raise InputError("matching a Gaussian mechanism needs `delta`.")
        delta = check_delta(delta, allow_zero=False)
    elif delta is not None:
        raise InputError(f"`delta` applies to the Gaussian mechanism only, not `{kind}`.")
    composition = check_positive_int("composition", composition)
    if space is not None:
        if kind != "gaussian":
            raise InputError(f"`space=population` matches the Gaussian mechanism only, not `{kind}`: projected "
                             f"{kind} noise has no closed-form loss.")
        if composition != 1 or x_hat is None:
            raise InputError("a mechanism projected onto the population is matched on one copy of f(D), "
                             "on given statistics `x_hat`.")
        scale = scale_for_projected_gaussian_loss(target_loss, x_hat, space.leverages, kappa)
        epsilon = _epsilon_for_scale(kind, scale, sensitivity, delta)
        return MatchedCalibration(kind, float(target_loss), "clipped", scale, epsilon, delta, sensitivity, 1,
                                  sensitivity, space)
    if x_hat is None:
        if kappa is not None:  # checked although E|xi_j| does not depend on the weights
            attribute_weights(kappa, n_attributes if n_attributes is not None else np.size(kappa))
        dimension = None if n_attributes is None else composition * check_positive_int("n_attributes", n_attributes)
        scale = scale_for_expected_abs_noise(kind, target_loss, dimension)
        model = "noise"
    else:
        weights = kappa
        if composition != 1:
            width = np.shape(x_hat)[-1]
            if width % composition:
                raise InputError(f"`x_hat` must have a multiple of composition = {composition} columns, got {width}.")
            weights = release_weights(kappa, width // composition, composition)
        scale = scale_for_clipped_loss(kind, target_loss, x_hat, weights)
        model = "clipped"
    released = composed_sensitivity(sensitivity, composition)
    epsilon = _epsilon_for_scale(kind, scale, released, delta)
    delta_value = 0.0 if delta is None else delta
    return MatchedCalibration(
        kind, float(target_loss), model, scale, epsilon, delta_value, released, composition, sensitivity
    )
