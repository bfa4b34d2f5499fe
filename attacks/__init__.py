"""Membership-inference attacks on released summary statistics.

Importing the package registers every attack: ``lrt``, ``adaptive-lrt``, ``optimal-lrt``
(:mod:`attacks.lrt`), ``score``, ``homer`` (:mod:`attacks.tracing`), ``tree``, ``svm``
(:mod:`attacks.learned`), ``linear``, ``whitened`` (:mod:`attacks.linear`), ``reconstruction``,
``reconstruction-l1`` (:mod:`attacks.reconstruction`), ``bayesian`` (:mod:`attacks.bayesian`) and ``stacked``
(:mod:`attacks.stacking`, pooling the others).  Raw statistics shared by the attacks are in
:mod:`attacks.statistics`.
"""

from attacks.base import Attack, AttackKnowledge, ReleaseSimulator, TorchAttack
from attacks.registry import (
    applicable_attacks,
    attack_requirements,
    available_attacks,
    get_attack,
    parse_attack_names,
    register_attack,
)
from attacks.statistics import dwork_score, dwork_score_torch, homer, homer_torch, lrs, lrs_torch

# Attack modules, imported in this order so that registration (and `all`) runs from the
# classical likelihood-ratio tests to the learned attackers.
from attacks.lrt import AdaptiveLRT, FixedThresholdLRT, OptimalLRT  # noqa: I001
from attacks.tracing import HomerAttack, ScoreAttack
from attacks.learned import DecisionTreeAttack, SVMAttack, pair_features
from attacks.linear import LinearAttack, WhitenedAttack
from attacks.reconstruction import L1Reconstruction, LeastSquaresReconstruction
from attacks.bayesian import BayesianAttack
from attacks.stacking import StackedAttack

__all__ = [
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
    "WhitenedAttack",
    "LeastSquaresReconstruction",
    "L1Reconstruction",
    "BayesianAttack",
    "StackedAttack",
    "pair_features",
    "lrs",
    "lrs_torch",
    "dwork_score",
    "dwork_score_torch",
    "homer",
    "homer_torch",
]
