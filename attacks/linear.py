"""Linear attackers fitted in closed form on releases simulated against the defense, to convergence.

Both map the release to the membership vector, b_hat(x) = b_mean + (x - x_mean) W, and score
individual k by b_hat_k (:mod:`bngp.linear` states the math):

- ``linear``: ridge regression of the memberships on the releases (the least-squares
  approximation of the posterior mean E[b | x]);
- ``whitened``: the noise-covariance-aware linear discriminant (class-mean differences of the
  releases per individual, whitened by the shrunk covariance of the defense's noise);
- ``linear-box``: the ``linear`` map read at its posterior's mode over the memberships' hull
  (:class:`bngp.linear.BoxDecoder`: memberships are 0 or 1 and sum to N, which decodes exactly a release
  exact in more than half of the K dimensions, where a linear map does not), not linear in x.

Regularisation is chosen by the mean per-release AUC of held-out simulated releases over a
path spanning the whole spectrum, and shadow releases are doubled until that AUC stops
rising; the learning curve is part of the attack's report (:meth:`LinearAttack.describe`).
Like the paper's Bayesian attacker they have one output per known individual, so they score
the individuals of the population; they are linear in x, hence differentiable.

A composed release (c copies of f(D), App. L.6) is read natively: by default the copies are
pooled into one |Q|-wide estimate of f(D) on shadow releases and the map is fitted on it
(:mod:`bngp.attacks.pooling`), so the learning curve is that of a |Q|-wide release and reaches
convergence within the float budget where a c |Q|-wide map cannot.  A scalar weight per copy
cannot see a copy that leaks some attributes and not others (a learned block with shrinkage
below 1 and no noise on a few attributes, next to noisy fixed copies, is averaged away by the
pooling; ``docs/design/evaluation.md``), so the map on the whole release is fitted as well and the one of higher
validation AUC on the same validation releases is kept; ``pool_copies=False`` fits the whole
release only.

Fitted together (:meth:`LinearAttack.fit_together_with`, what ``bngp evaluate`` does when both
are asked for on a single release), ``linear`` and ``whitened`` read the linear attack's shadow
releases and share one decomposition (:func:`bngp.linear.fit_ridge_and_whitened`).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import ClassVar

import numpy as np
import torch

from .base import Attack, AttackKnowledge, TorchAttack
from .inputs import PopulationIndex, check_binary_panel
from .pooling import POOLING_RELEASES, CopyPooling, pooled_sampler
from .registry import register_attack
from .shadow import shadow_sampler, simulated_shadow
from bngp.linear import (
    DEFAULT_VALIDATION_RELEASES,
    BoxDecoder,
    LearningCurve,
    LinearFit,
    coordinate_curve_start,
    default_shadow_releases,
    error_covariance,
    fit_converged,
    fit_converged_jointly,
    fit_ridge,
    fit_ridge_and_whitened,
    fit_whitened,
    max_shadow_releases,
)
from bngp.errors import InputError
from bngp.release.sampling import release_mechanism
from bngp.rng import spawn_seeds
from bngp.validation import check_in_open_interval, check_positive_int
from bngp.workers import current_helper

__all__ = ["BoxLinearAttack", "LinearAttack", "WhitenedAttack"]


@register_attack("linear")
class LinearAttack(TorchAttack):
    """Ridge regression from releases to memberships, fitted to convergence: score = b_hat_k(x).

    Args:
        n_shadow_releases: a fixed number of simulated releases (no learning curve); default
            None = doubling from :func:`bngp.linear.default_shadow_releases` until the validation
            AUC rises by less than ``tolerance`` (at most ``max_shadow_releases``).
        max_shadow_releases: cap of the learning curve (default
            :func:`bngp.linear.max_shadow_releases`).
        validation_releases: held-out simulated releases that choose the penalty and draw the
            learning curve.
        tolerance: AUC gain below which more shadow releases are not drawn.
        n_calibration_releases: held-out simulated releases for direction and threshold.
        alpha: target false-positive rate of the threshold on the held-out releases.
        pool_copies: on a composed release (c copies of f(D)), fit on the copies pooled by the
            least-squares combination that best reconstructs f(D) (:mod:`bngp.attacks.pooling`):
            a |Q|-wide map, converged on about c times fewer shadow releases than one fitted on
            the whole c |Q|-wide release; the whole-release map is fitted too, on its own shadow
            releases, and kept when it validates better on the same validation releases (a copy
            that leaks attribute by attribute is averaged away by the pooling).  ``False``: the
            whole release only.  A single release is never pooled.
    """

    requires: ClassVar[frozenset[str]] = frozenset({"population", "simulate"})
    reads_composed_release: ClassVar[bool] = True
    knowledge_statement: ClassVar[str] = (
        "Knows the population and can simulate releases against the defense (and the membership prior, when "
        "given, as the intercept): a ridge regression from the "
        "release to the membership vector on simulated releases, penalty chosen by validation AUC over the "
        "whole singular-value spectrum, shadow releases doubled until the validation AUC levels off; "
        "direction and threshold (false-positive rate alpha) from held-out simulated releases; on a composed "
        "release the copies of f(D) are first pooled by their least-squares reconstruction of f(D)."
    )
    #: the closed-form fit: (releases, memberships, validation) -> LinearFit.
    _fit_function = staticmethod(fit_ridge)
    #: fitted first, it fits the evaluation's ``whitened`` map too, on its shadow releases (:meth:`fit_together_with`).
    fitted_together_with: ClassVar[str | None] = "whitened"

    def __init__(
        self,
        n_shadow_releases: int | None = None,
        max_shadow_releases: int | None = None,
        validation_releases: int = DEFAULT_VALIDATION_RELEASES,
        tolerance: float = 0.005,
        n_calibration_releases: int = 20,
        alpha: float = 0.05,
        pool_copies: bool = True,
    ) -> None:
        self.n_shadow_releases = (
            None if n_shadow_releases is None else check_positive_int("n_shadow_releases", n_shadow_releases, minimum=3)
        )
        self.max_shadow_releases = (
            None if max_shadow_releases is None else check_positive_int("max_shadow_releases", max_shadow_releases, minimum=3)
        )
        self.validation_releases = check_positive_int("validation_releases", validation_releases, minimum=2)
        self.tolerance = check_in_open_interval("tolerance", tolerance, 0.0, 1.0)
        self.n_calibration_releases = check_positive_int("n_calibration_releases", n_calibration_releases)
        self.alpha = check_in_open_interval("alpha", alpha, 0.0, 1.0)
        self.pool_copies = bool(pool_copies)
        self.pooling_: CopyPooling | None = None
        #: on a composed release, the whole-release map's validation AUC and learning curve next to the
        #: pooled map's validation AUC and pooling, and whether it was kept instead of the pooled one.
        self.whole_release_: dict | None = None
        self.release_width_: int | None = None
        self.fit_: LinearFit | None = None
        #: what the fit read of the releases: None for the release itself, or its row-space coordinates.
        self.reading_: str | None = None
        self.learning_curve_: LearningCurve | None = None
        self._partner: LinearAttack | None = None
        self._given: tuple[LinearFit, LearningCurve] | None = None

    def fit_together_with(self, partner: Attack) -> "LinearAttack":
        """At the next :meth:`fit` of this ``linear`` attack on a single release, also fit ``partner``
        (a ``whitened`` attack of the same settings) to convergence on the same shadow releases, both
        from one decomposition (:func:`bngp.linear.fit_ridge_and_whitened`), and hand it its map and
        learning curve; its own :meth:`fit` then only calibrates.  The shadow releases are this
        attack's, so its fit is the one it makes alone (up to rounding; its curve runs on while the
        partner's still rises).  Returns self; settings that differ leave both to fit alone."""
        same = all(getattr(self, name) == getattr(partner, name) for name in
                   ("n_shadow_releases", "max_shadow_releases", "validation_releases", "tolerance"))
        if type(self) is LinearAttack and type(partner) is WhitenedAttack and same and self.n_shadow_releases is None:
            self._partner = partner
        return self

    def _use_fit(self, fit: LinearFit, curve: LearningCurve) -> None:
        """Take ``fit`` and ``curve`` (fitted with a partner, :meth:`fit_together_with`) at the next :meth:`fit`."""
        self._given = (fit, curve)

    def _fit(self, knowledge: AttackKnowledge, seed: int) -> None:
        population = check_binary_panel("population", knowledge.population)
        self.n_attributes_ = population.shape[1]
        self.population_index_ = PopulationIndex(population)
        train_seed, calibration_seed = spawn_seeds(seed, 2)
        reading = knowledge.coordinates.reading if knowledge.coordinates is not None else None
        sample = (shadow_sampler(knowledge, train_seed) if reading is None
                  else _coordinate_sampler(knowledge, train_seed))
        self.reading_ = None if reading is None else f"row-space coordinates ({reading.width} values)"
        self.release_width_ = population.shape[1] * knowledge.composition
        self.pooling_ = self.whole_release_ = None
        fit_function = partial(self._fit_function, prior_mean=knowledge.membership_prior)
        given, partner, self._given, self._partner = self._given, self._partner, None, None

        def lift(fit: LinearFit) -> LinearFit:  # a map of the coordinates as the same map of the release
            return fit if reading is None else reading.lift(fit)

        if given is not None and knowledge.composition == 1:
            self.fit_, self.learning_curve_ = given
        elif partner is not None and knowledge.composition == 1:
            (fit, self.learning_curve_), (whitened, curve) = fit_converged_jointly(
                partial(fit_ridge_and_whitened, prior_mean=knowledge.membership_prior), sample,
                validation=sample(self.validation_releases), tolerance=self.tolerance, helper=current_helper(),
                **self._curve_sizes(population.shape[0], self.release_width_, coordinates=reading is not None))
            self.fit_ = lift(fit)
            partner._use_fit(lift(whitened), curve)
        elif not (self.pool_copies and knowledge.composition > 1):
            fit, self.learning_curve_ = self._fit_curve(fit_function, sample, sample(self.validation_releases),
                                                        population.shape[0], self.release_width_,
                                                        coordinates=reading is not None)
            self.fit_ = lift(fit)
        else:
            releases, memberships = sample(POOLING_RELEASES)
            statistic = release_mechanism(population).statistic(memberships.to(torch.float32))
            self.pooling_ = CopyPooling.estimate(releases, statistic, knowledge.composition)
            del releases, memberships, statistic
            validation = sample(self.validation_releases)
            pooled_validation = (self.pooling_.pool(validation[0]), validation[1])
            fit, self.learning_curve_ = self._fit_curve(fit_function, pooled_sampler(sample, self.pooling_),
                                                        pooled_validation, population.shape[0], population.shape[1])
            self.fit_ = self.pooling_.expand(fit)
            # the map on the whole release, on its own shadow releases and the same validation releases:
            # kept when it validates better (a learned copy that leaks attribute by attribute, which the
            # pooled copy averages away); its curve stops at the float budget whatever max_shadow_releases
            whole_sample = shadow_sampler(knowledge, spawn_seeds(train_seed, 1)[0])
            whole_fit, whole_curve = self._fit_curve(fit_function, whole_sample, validation, population.shape[0],
                                                     self.release_width_,
                                                     max_shadow_releases(population.shape[0], self.release_width_))
            self.whole_release_ = {"validation_auc": whole_fit.score, "pooled_validation_auc": fit.score,
                                   "pooling": self.pooling_.to_dict(), "learning_curve": whole_curve.to_dict(),
                                   "kept": whole_fit.score > fit.score}
            if self.whole_release_["kept"]:  # the map reads the whole release: no pooling to report
                self.fit_, self.learning_curve_, self.pooling_ = whole_fit, whole_curve, None
        calibration = simulated_shadow(knowledge, self.n_calibration_releases, calibration_seed)
        self._calibrate(
            self._raw_numpy(calibration.targets, calibration.releases),
            calibration.labels,
            alpha=self.alpha,
            source=calibration.source,
        )

    def _fit_curve(self, fit_function, sample, validation, n_individuals: int, width: int,
                   maximum: int | None = None, coordinates: bool = False) -> tuple[LinearFit, LearningCurve]:
        """The fit on ``n_shadow_releases`` releases of ``sample``, or fitted to convergence from
        :func:`default_shadow_releases` of a ``width``-wide release up to ``maximum`` (default
        ``max_shadow_releases`` or the float budget), with its learning curve (:meth:`_curve_sizes`)."""
        if self.n_shadow_releases is not None:
            x, b = sample(self.n_shadow_releases)
            fit = fit_function(x, b, validation)
            return fit, LearningCurve((fit.releases,), (fit.score,), False, self.tolerance)
        return fit_converged(fit_function, sample, validation=validation, tolerance=self.tolerance,
                             helper=current_helper(), **self._curve_sizes(n_individuals, width, maximum, coordinates))

    def _curve_sizes(self, n_individuals: int, width: int, maximum: int | None = None,
                     coordinates: bool = False) -> dict[str, int]:
        """The learning curve's first and largest shadow sets: :func:`default_shadow_releases` of a
        ``width``-wide release, up to ``maximum`` (default ``max_shadow_releases`` or the float budget);
        read in the row-space ``coordinates``, the last doubling alone
        (:func:`bngp.linear.coordinate_curve_start`)."""
        maximum = maximum or self.max_shadow_releases or max_shadow_releases(n_individuals, width)
        start = min(default_shadow_releases(n_individuals, width), maximum)
        return {"start": coordinate_curve_start(start, maximum) if coordinates else start, "maximum": maximum}

    def _release_width(self, n_attributes: int) -> int:
        return self.release_width_

    def predict(self, releases: torch.Tensor) -> torch.Tensor:
        """b_hat(x) for each release, shape (R, K), differentiable in the releases."""
        self._check_fitted()
        return self.fit_.predict(releases)

    def _raw_torch(self, targets: torch.Tensor | np.ndarray, releases: torch.Tensor) -> torch.Tensor:
        rows = self.population_index_.rows(
            targets.detach().numpy() if isinstance(targets, torch.Tensor) else targets, self.name
        )
        return self.predict(releases)[:, torch.from_numpy(rows)].to(releases.dtype)

    def describe(self) -> dict:
        record = super().describe()
        if self.fit_ is not None:
            record["fit"] = self.fit_.describe()
            record["learning_curve"] = self.learning_curve_.to_dict()
        if self.pooling_ is not None:
            record["pooling"] = self.pooling_.to_dict()
        if self.whole_release_ is not None:
            record["whole_release"] = self.whole_release_
        if self.reading_ is not None:
            record["reading"] = self.reading_
        return record


def _coordinate_sampler(knowledge: AttackKnowledge, seed: int) -> Callable[[int], tuple[torch.Tensor, torch.Tensor]]:
    """sample(n) -> (coordinates (n, r), memberships (n, K)) float64 tensors, the i-th call drawn from the i-th seed
    spawned from ``seed`` as :func:`bngp.attacks.shadow.shadow_sampler` draws its releases
    (``knowledge.coordinates``, :class:`bngp.attacks.base.CoordinateSource`)."""
    calls = [0]

    def sample(n: int) -> tuple[torch.Tensor, torch.Tensor]:
        calls[0] += 1
        return knowledge.coordinates.sample(int(n), spawn_seeds(seed, calls[0])[-1])

    return sample


@register_attack("whitened")
class WhitenedAttack(LinearAttack):
    """The noise-covariance-aware linear discriminant, fitted to convergence: score = b_hat_k(x).

    Same arguments as :class:`LinearAttack`; the shrinkage of the noise covariance and the
    penalty are chosen jointly on the validation releases (:func:`bngp.linear.fit_whitened`).
    """

    knowledge_statement: ClassVar[str] = (
        "Knows the population and can simulate releases against the defense: a linear discriminant per "
        "individual (mean release of datasets with vs without it, regressed jointly) whitened by the shrunk "
        "covariance of the defense's noise, estimated from simulated releases (shrinkage and penalty by "
        "validation AUC, shadow releases doubled until it levels off); direction and threshold from held-out "
        "simulated releases; on a composed release the copies of f(D) are first pooled by their least-squares "
        "reconstruction of f(D)."
    )
    #: its map comes from the evaluation's ``linear`` attack when that one is fitted first (then it only calibrates).
    fitted_together_with: ClassVar[str | None] = "linear"
    _fit_function = staticmethod(fit_whitened)


@register_attack("linear-box")
class BoxLinearAttack(LinearAttack):
    """The ``linear`` map's posterior read at its mode over the memberships' hull: score = b_box_k(x)
    (:class:`bngp.linear.BoxDecoder`), with the map's error covariance estimated on
    :func:`bngp.linear.default_shadow_releases` fresh simulated releases.  Same arguments as :class:`LinearAttack`."""

    requires: ClassVar[frozenset[str]] = frozenset({"population", "simulate", "n_members"})
    knowledge_statement: ClassVar[str] = (
        "As `linear`, and the dataset size N: the ridge map's estimate read at the mode of its Gaussian posterior "
        "(error covariance from fresh simulated releases) over the memberships in [0, 1] summing to N (the "
        "box-constrained reconstruction of Dinur and Nissim); direction and threshold from held-out simulated "
        "releases."
    )
    differentiable: ClassVar[bool] = False
    fitted_together_with: ClassVar[str | None] = None
    #: the decoder of the fitted map (None before :meth:`fit`).
    decoder_: BoxDecoder | None = None

    def _fit(self, knowledge: AttackKnowledge, seed: int) -> None:
        fit_seed, covariance_seed, calibration_seed = spawn_seeds(seed, 3)
        self.decoder_ = None
        super()._fit(knowledge, fit_seed)
        population = check_binary_panel("population", knowledge.population)
        n_members = check_positive_int("n_members", knowledge.n_members, maximum=population.shape[0] - 1)
        x, b = shadow_sampler(knowledge, covariance_seed)(default_shadow_releases(population.shape[0],
                                                                                  self.release_width_))
        covariance = error_covariance(self.fit_, x, b)
        del x, b
        self.decoder_ = BoxDecoder.of(self.fit_, covariance, n_members)
        calibration = simulated_shadow(knowledge, self.n_calibration_releases, calibration_seed)
        self._calibrate(self._raw_numpy(calibration.targets, calibration.releases), calibration.labels,
                        alpha=self.alpha, source=calibration.source)

    def score_torch(self, targets: torch.Tensor, releases: torch.Tensor) -> torch.Tensor:
        """Not available: the decoding is an iterative solve, not differentiated here."""
        raise InputError(f"attack `{self.name}` has no differentiable (torch) form.")

    def predict(self, releases: torch.Tensor) -> torch.Tensor:
        """b_box(x) for each release, shape (R, K) (the ridge map's b_hat(x) until the decoder is fitted)."""
        self._check_fitted()
        if self.decoder_ is None:
            return self.fit_.predict(releases)
        return self.decoder_.decode(releases.detach())
