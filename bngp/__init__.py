"""bngp: Bayes-Nash generative privacy for released summary statistics.

Train a defender that adds learned noise to released statistics (the BNGP game of Zhang,
Venkatesaramani, De, Malin and Vorobeychik, 2025), attack any release with membership-inference
attacks, and audit releases with valid empirical privacy bounds.

The core names are imported lazily so that ``attacks`` and ``defenses`` (which import bngp's
core modules) never meet an import cycle.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_EXPORTS = {
    # data
    "Population": "bngp.data.population",
    "BitMatrix": "bngp.data.bits",
    "UniformSubsetPrior": "bngp.data.priors",
    "BernoulliPrior": "bngp.data.priors",
    "simulate_independent": "bngp.data.independent",
    "simulate_genome": "bngp.data.genome",
    "load_vcf": "bngp.data.vcf",
    "write_vcf": "bngp.data.vcf",
    "load_adult": "bngp.data.adult",
    "load_digits_population": "bngp.data.images",
    "load_mnist_population": "bngp.data.images",
    "load_population": "bngp.data.npz",
    "save_population": "bngp.data.npz",
    # mechanism and players
    "SummaryStatistics": "bngp.release.mechanism",
    "ComposedMechanism": "bngp.release.composition",
    "release_mechanism": "bngp.release.sampling",
    "sample_releases": "bngp.release.sampling",
    "NoiseLaw": "bngp.release.noise_law",
    "Defender": "bngp.defenses.network",
    "Attacker": "bngp.attacks.network",
    # game, evaluation, metrics
    "Game": "bngp.game",
    "GameConfig": "bngp.game",
    "ObjectiveSettings": "bngp.game",
    "DefenderSettings": "bngp.game",
    "AttackerSettings": "bngp.game",
    "SelectionSettings": "bngp.game",
    "FreshCheckSettings": "bngp.game",
    "TrainingSummary": "bngp.game",
    "EvaluationResult": "bngp.evaluation_record",
    "AttackResult": "bngp.evaluation_record",
    "train_attacker": "bngp.attacks.training",
    "AttackerTrainingConfig": "bngp.attacks.training",
    "evaluate_defense": "bngp.evaluate",
    "Helper": "bngp.workers",
    "audit_mechanism": "bngp.mechanism_audit",
    "attack_knowledge": "bngp.attacks.base",
    "membership_metrics": "bngp.metrics",
    "auc": "bngp.metrics",
    "roc_curve": "bngp.metrics",
    "tpr_at_fpr": "bngp.metrics",
    "membership_advantage": "bngp.metrics",
    "bayes_weighted_advantage": "bngp.metrics",
    "bgp_risk": "bngp.metrics",
    "BudgetSetting": "bngp.defenses.budget",
    "UtilityBudget": "bngp.defenses.budget",
    "reference_at_budget": "bngp.defenses.budget",
    "ShrinkNoiseDefense": "bngp.defenses.shrinkage",
    "ShapedNoiseDefense": "bngp.defenses.shaped",
    "ProjectedDefense": "bngp.defenses.shaped",
    "shaped_at_budget": "bngp.defenses.budget",
    "PopulationSpace": "bngp.data.geometry",
    "THREAT_MODEL": "bngp.data.geometry",
    "release_coordinates": "bngp.reading",
    "rank_references": "bngp.references",
    "linear_attack_score": "bngp.references",
    "check_linear_attack_memory": "bngp.references",
    "linear_attack_bytes": "bngp.references",
    "available_memory": "bngp.memory",
    "run_demo": "bngp.demo",
    "run_sweep": "bngp.sweep",
    "resolve_device": "bngp.device",
    "subnormals_flushed": "bngp.device",
    "set_threads": "bngp.threads",
    # errors
    "BNGPError": "bngp.errors",
    "InputError": "bngp.errors",
    "DataFormatError": "bngp.errors",
    "MissingFileError": "bngp.errors",
    "InsufficientMemoryError": "bngp.errors",
    "UnknownNameError": "bngp.errors",
    "TrainingError": "bngp.errors",
}

__all__ = sorted(_EXPORTS) + ["__version__"]


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        value = getattr(importlib.import_module(_EXPORTS[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'bngp' has no attribute {name!r}")


def __dir__() -> list[str]:
    return __all__
