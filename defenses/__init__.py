"""Defenses: noise laws for the released statistic, and the ``--defense SPEC`` registry.

Importing this package registers every built-in defense (``none``, ``laplace``, ``gaussian``,
``linf``, ``rr``) with :mod:`bngp.defenses.registry`.
"""

from .base import Defense, Guarantee, NoDefense, sample_releases
from .registry import DefenseContext, available_defenses, parse_defense_spec, register_defense
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
    "TrainedDefense",
    "MatchedDefense",
    "matched_to_run",
    "load_run_defense",
    "Defense",
    "Guarantee",
    "NoDefense",
    "sample_releases",
    "DefenseContext",
    "available_defenses",
    "parse_defense_spec",
    "register_defense",
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
