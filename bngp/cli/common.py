"""Argument helpers shared by the sub-commands."""

from __future__ import annotations

import argparse

import numpy as np

from bngp.data.npz import load_population
from bngp.data.population import Population
from bngp.data.priors import UniformSubsetPrior
from bngp.errors import DataFormatError, InputError
from bngp.validation import check_readable_file

__all__ = ["add_population_args", "load_population_and_prior", "load_kappa_file"]


def add_population_args(parser: argparse.ArgumentParser, *, members: bool = True) -> None:
    """--population POP.npz [--members N]."""
    parser.add_argument("--population", required=True, metavar="POP.npz", help="population file (bngp simulate)")
    if members:
        parser.add_argument("--members", type=int, required=True, metavar="N", help="members per dataset (n of K)")


def load_population_and_prior(path: str, members: int) -> tuple[Population, UniformSubsetPrior]:
    """Load a population and the "n of K uniformly" prior, validating 1 <= N <= K."""
    population = load_population(path)
    if members < 1 or members > population.n_individuals:
        raise InputError(f"`--members` must be between 1 and K = {population.n_individuals}, got {members}.")
    return population, UniformSubsetPrior(population.n_individuals, members)


def load_kappa_file(path: str, n_attributes: int) -> np.ndarray:
    """Read per-attribute weights kappa_j from a .npy file (finite, >= 0, length |Q|)."""
    path = check_readable_file("kappa", path)
    try:
        values = np.load(path, allow_pickle=False)
    except (ValueError, OSError) as exc:
        raise DataFormatError(f"{path} is not a readable .npy array ({exc}).") from exc
    values = np.asarray(values, dtype=np.float64).ravel() if values.dtype != object else values
    if values.size != n_attributes:
        raise DataFormatError(f"`--kappa-file` must hold {n_attributes} weights (|Q|), got {values.size}.")
    if not np.all(np.isfinite(values)):
        raise DataFormatError("`--kappa-file` contains NaN or infinite values.")
    if np.any(values < 0):
        raise InputError(f"`kappa` must be >= 0, found {values[values < 0][0]:g}.")
    return values
