"""Membership-inference attacks on released summary statistics.

Importing the package registers every attack: ``lrt``, ``adaptive-lrt``, ``optimal-lrt``
(:mod:`bngp.attacks.lrt`), ``score``, ``homer`` (:mod:`bngp.attacks.tracing`), ``tree``, ``svm``
(:mod:`bngp.attacks.learned`), ``linear``, ``whitened`` (:mod:`bngp.attacks.linear`), ``reconstruction``,
``reconstruction-l1`` (:mod:`bngp.attacks.reconstruction`), ``bayesian`` (:mod:`bngp.attacks.bayesian`),
``per-individual`` (:mod:`bngp.attacks.per_individual`, one network H(x, d) shared by all individuals)
and ``stacked`` (:mod:`bngp.attacks.stacking`, pooling the others).  Raw statistics shared by the attacks are in
:mod:`bngp.attacks.statistics`.
"""

from .base import Attack, AttackKnowledge, ReleaseSimulator, TorchAttack
from .registry import (
    applicable_attacks,
    attack_requirements,
    available_attacks,
    get_attack,
    parse_attack_names,
    register_attack,
)
from .statistics import dwork_score, dwork_score_torch, homer, homer_torch, lrs, lrs_torch

# Attack modules, imported in this order so that registration (and `all`) runs from the
# classical likelihood-ratio tests to the learned attackers.
from .lrt import AdaptiveLRT, FixedThresholdLRT, OptimalLRT  # noqa: I001
from .tracing import HomerAttack, ScoreAttack
from .learned import DecisionTreeAttack, SVMAttack, pair_features
from .linear import BoxLinearAttack, LinearAttack, WhitenedAttack
from .reconstruction import L1Reconstruction, LeastSquaresReconstruction
from .bayesian import BayesianAttack
from .per_individual import PerIndividualAttack, PerIndividualConfig
from .per_individual_network import PerIndividualAttacker, PerIndividualSpec
from .stacking import StackedAttack
from .composed import TiledAttack, for_composition

__all__ = [
    "TiledAttack",
    "for_composition",
    "Attack",
    "AttackKnowledge",
    "ReleaseSimulator",
    "TorchAttack",
    "register_attack",
    "get_attack",
    "available_attacks",
    "applicable_attacks",
    "attack_requirements",
    "parse_attack_names",
    "FixedThresholdLRT",
    "AdaptiveLRT",
    "OptimalLRT",
    "ScoreAttack",
    "HomerAttack",
    "DecisionTreeAttack",
    "SVMAttack",
    "LinearAttack",
    "BoxLinearAttack",
    "WhitenedAttack",
    "LeastSquaresReconstruction",
    "L1Reconstruction",
    "BayesianAttack",
    "PerIndividualAttack",
    "PerIndividualConfig",
    "PerIndividualAttacker",
    "PerIndividualSpec",
    "StackedAttack",
    "pair_features",
    "lrs",
    "lrs_torch",
    "dwork_score",
    "dwork_score_torch",
    "homer",
    "homer_torch",
]
