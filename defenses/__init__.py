"""Defenses: noise laws for the released statistic, and the ``--defense SPEC`` registry.

Every defense (``none``, ``laplace``, ``gaussian``, ``linf``, ``rr``, ``run``, ``matched-*``, the
references at a budget and ``data-independent``) is one entry of :data:`bngp.defenses.registry.DEFENSES`,
from which the SPEC parser, the ``--defense`` help line and the lists of names are derived.

* :mod:`~bngp.defenses.registry`: the entries, the SPEC grammar and parser;
  :mod:`~bngp.defenses.context`: what a SPEC factory is given.

* :mod:`~bngp.defenses.base`: the :class:`Defense` interface and its :class:`Guarantee`.
* :mod:`~bngp.defenses.calibration`: eps, delta, sensitivity <-> noise scale.
* :mod:`~bngp.defenses.dp`: the DP mechanisms; :mod:`~bngp.defenses.specs`: their SPECs.
* :mod:`~bngp.defenses.sensitivity`, :mod:`~bngp.defenses.secure_sampling`.
* :mod:`~bngp.defenses.network`, :mod:`~bngp.defenses.artifact`, :mod:`~bngp.defenses.trained`:
  the defender network G, its file format and the trained defense (``run:RUN_DIR``).
* :mod:`~bngp.defenses.matched`, :mod:`~bngp.defenses.matched_run`: DP mechanisms matched in
  utility to a trained defender (``matched-laplace:run=RUN_DIR``).
* :mod:`~bngp.defenses.shrinkage`, :mod:`~bngp.defenses.budget`, :mod:`~bngp.defenses.linear_optimum`:
  shrinkage towards f(theta) plus noise, and the reference mechanisms at a utility budget
  (``budget-laplace:budget=0.5x``, ``shrinkage:...``, ``suppression:...``, ``linear-optimal:...``).
"""

from .base import Defense, Guarantee, NoDefense
from .context import DefenseContext
from .registry import (
    BUDGET_SPECS,
    DEFENSES,
    DP_SPECS,
    DefenseEntry,
    available_defenses,
    defense_help,
    parse_defense_spec,
)
from .sensitivity import (
    DEFAULT_SENSITIVITY,
    Sensitivity,
    max_pairwise_hamming,
    paper_sensitivity,
    population_sensitivity,
    resolve_sensitivity,
)
from .dp import (
    DEFAULT_SAMPLER,
    SAMPLERS,
    DPDefense,
    GaussianDefense,
    LaplaceDefense,
    LinfKNormDefense,
    RandomizedResponseDefense,
)
from .calibration import (
    flip_probability,
    gaussian_delta,
    gaussian_epsilon,
    gaussian_mu,
    gaussian_sigma,
    laplace_epsilon,
    laplace_scale,
    linf_epsilon,
    linf_scale,
)
from .trained import TrainedDefense, load_run_defense
from .matched_run import MatchedDefense, matched_to_run
from .shrinkage import NOISE_LAWS, ShrinkNoiseDefense, clipped_deviation_loss, clipped_deviation_loss_and_slopes
from .shaped import WEIGHTINGS, ProjectedDefense, ShapedNoiseDefense, direction_weights, pairwise_sensitivity
from .budget import (
    CALIBRATION_DRAWS,
    CALIBRATION_VALUES,
    calibration_draws,
    CALIBRATION_SEED,
    REFERENCE_KINDS,
    BudgetSetting,
    TimeSharingDefense,
    UtilityBudget,
    parse_budget,
    reference_at_budget,
    shaped_at_budget,
)
from .linear_optimum import LinearOptimum, decoder_aucs, optimise_direction_precisions, optimise_precisions
from .matched import (
    MatchedCalibration,
    attribute_weights,
    expected_abs_noise,
    expected_clipped_loss,
    match_utility,
    scale_for_clipped_loss,
    scale_for_expected_abs_noise,
    utility_loss,
)

__all__ = [
    "BUDGET_SPECS",
    "DEFENSES",
    "DP_SPECS",
    "DefenseEntry",
    "NOISE_LAWS",
    "ShrinkNoiseDefense",
    "clipped_deviation_loss",
    "clipped_deviation_loss_and_slopes",
    "WEIGHTINGS",
    "ProjectedDefense",
    "ShapedNoiseDefense",
    "direction_weights",
    "pairwise_sensitivity",
    "shaped_at_budget",
    "CALIBRATION_DRAWS",
    "CALIBRATION_VALUES",
    "calibration_draws",
    "CALIBRATION_SEED",
    "REFERENCE_KINDS",
    "BudgetSetting",
    "TimeSharingDefense",
    "UtilityBudget",
    "parse_budget",
    "reference_at_budget",
    "LinearOptimum",
    "decoder_aucs",
    "optimise_direction_precisions",
    "optimise_precisions",
    "TrainedDefense",
    "MatchedDefense",
    "matched_to_run",
    "load_run_defense",
    "Defense",
    "Guarantee",
    "NoDefense",
    "DefenseContext",
    "available_defenses",
    "parse_defense_spec",
    "defense_help",
    "DEFAULT_SENSITIVITY",
    "Sensitivity",
    "max_pairwise_hamming",
    "paper_sensitivity",
    "population_sensitivity",
    "resolve_sensitivity",
    "DEFAULT_SAMPLER",
    "SAMPLERS",
    "DPDefense",
    "GaussianDefense",
    "LaplaceDefense",
    "LinfKNormDefense",
    "RandomizedResponseDefense",
    "flip_probability",
    "gaussian_delta",
    "gaussian_epsilon",
    "gaussian_mu",
    "gaussian_sigma",
    "laplace_epsilon",
    "laplace_scale",
    "linf_epsilon",
    "linf_scale",
    "MatchedCalibration",
    "attribute_weights",
    "expected_abs_noise",
    "expected_clipped_loss",
    "match_utility",
    "scale_for_clipped_loss",
    "scale_for_expected_abs_noise",
    "utility_loss",
]
