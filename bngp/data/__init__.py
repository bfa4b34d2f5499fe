"""Populations: simulated genomes, VCF files, data sets shipped with the package, and images.

The modules are imported lazily (``bngp.data.genome`` pulls in msprime and stdpopsim), so that
``from bngp.data import load_adult`` costs only what that loader needs (scikit-learn is imported
by the image loaders only when they fit their classifier).
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "Population": "bngp.data.population",
    "BitMatrix": "bngp.data.bits",
    "load_population": "bngp.data.npz",
    "save_population": "bngp.data.npz",
    "simulate_independent": "bngp.data.independent",
    "simulate_genome": "bngp.data.genome",
    "load_vcf": "bngp.data.vcf",
    "write_vcf": "bngp.data.vcf",
    "load_adult": "bngp.data.adult",
    "read_adult": "bngp.data.adult",
    "adult_attribute_names": "bngp.data.adult",
    "load_digits_population": "bngp.data.images",
    "load_mnist_population": "bngp.data.images",
    "read_idx": "bngp.data.idx",
    "find_mnist_files": "bngp.data.idx",
    "ConfidenceEncoder": "bngp.data.confidence",
    "PopulationSpace": "bngp.data.geometry",
    "THREAT_MODEL": "bngp.data.geometry",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'bngp.data' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
