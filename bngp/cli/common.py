"""Argument helpers shared by the sub-commands."""

from __future__ import annotations

import argparse

import numpy as np

from bngp.data.npz import load_population
from bngp.data.population import Population
from bngp.data.priors import UniformSubsetPrior
from bngp.device import DEVICE_NAMES
from bngp.errors import DataFormatError, InputError
from bngp.threads import default_threads, set_threads
from bngp.validation import check_readable_file
from bngp.workers import HELPER_MIN_SIZE

__all__ = [ "add_population_args", "add_threads_arg", "add_device_arg", "add_workers_arg", "default_threads",
           "set_threads", "load_population_and_prior", "load_kappa_file"]


def add_threads_arg(parser: argparse.ArgumentParser) -> None:
    """--threads T (torch intra-op threads and the BLAS pools of numpy and scikit-learn)."""
    parser.add_argument("--threads", type=int, default=default_threads(), metavar="T",
                        help=f"CPU threads for torch and BLAS (default {default_threads()}: 1 on machines of up to "
                             "2 cores, else half the cores, at most 8)")


def add_device_arg(parser: argparse.ArgumentParser, what: str) -> None:
    """--device auto|cpu|cuda: where ``what`` runs (:mod:`bngp.device`; auto = CUDA when
    available, else the CPU).  The command resolves it before any work, so that asking for CUDA
    on a machine without it is a one-line error; random draws do not depend on the device."""
    parser.add_argument("--device", choices=DEVICE_NAMES, default="auto",
                        help=f"where {what} runs: auto (cuda when available, else cpu), cpu or cuda; "
                             "random draws are the same on every device")


def add_workers_arg(parser: argparse.ArgumentParser) -> None:
    """--workers auto|1|2: processes of the command's evaluations (2 = with a helper process, :mod:`bngp.workers`)."""
    parser.add_argument("--workers", default="auto", metavar="auto|1|2",
                        help="processes of an evaluation: 1, or 2 with a helper process that fits the attacks "
                             "independent of the others (same results); auto (default): 2 on a machine of 2 cores "
                             f"or more when individuals x release width >= {HELPER_MIN_SIZE:,}, else 1")


def add_population_args(parser: argparse.ArgumentParser, *, members: bool = True) -> None:
    """--population POP.npz [--members N]."""
    parser.add_argument("--population", required=True, metavar="POP.npz", help="population file (bngp simulate)")
    if members:
        parser.add_argument("--members", type=int, required=True, metavar="N", help="members per dataset (n of K)")


def load_population_and_prior(path: str, members: int) -> tuple[Population, UniformSubsetPrior]:
    """Load a population and the "n of K uniformly" prior, validating 1 <= N <= K - 1 (with N = K
    every individual is always a member: there is nothing to infer or to hide)."""
    population = load_population(path)
    if members < 1 or members >= population.n_individuals:
        raise InputError(f"`--members` must be between 1 and K - 1 = {population.n_individuals - 1}, got {members}.")
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


def parse_patience(text: str, flag: str) -> int | None:
    """An early-stopping patience option (``flag``): an integer >= 1, or ``none`` for all steps."""
    if text.strip().lower() == "none":
        return None
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise InputError(f"`{flag}` must be an integer >= 1 or none, got {text!r}.")
    return value
