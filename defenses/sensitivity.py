"""Sensitivity of the allele-frequency release under a neighbouring relation.

The released statistic is x_hat = f(D) = (1/n) sum_{k in D} d_k, the carrier frequency of each
of the |Q| binary attributes among the n members of D (arXiv:2410.07414, section 2.2).  A DP mechanism
is calibrated to the largest change of x_hat between neighbouring datasets, measured in the
norm of its noise (Dwork et al. 2006): l1 for Laplace, l2 for Gaussian, l-inf for the
l-inf K-norm mechanism.  Randomized response perturbs the members' records instead, so its
"sensitivity" is the number of attributes (bits) in which two neighbouring records can differ.

Three conventions, all in frequency units (1/n per changed attribute of one record):

``paper`` (the default)
    The record domain is all of {0,1}^|Q|, so two records can differ in every attribute:
    l1 = |Q|/n (App. L.3: m/K_dagger = 5000/400 = 12.5), l2 = sqrt(|Q|)/n, l-inf = 1/n,
    hamming = |Q| bits.  The guarantee then holds against any possible record.  Recorded
    with neighbouring "replace" (the paper's datasets have a fixed size K_dagger = n); the
    l1/l2/linf bounds also hold for add/remove with |D| >= n >= 2 (see ``add-remove``).

``replace``
    Computed from the population: D' is D with member k replaced by a non-member k' of the
    population, so x_hat - x_hat' = (d_k - d_k')/n and the worst case is the largest Hamming
    distance H between two individuals of the population: l1 = H/n, l2 = sqrt(H)/n,
    l-inf = 1/n, hamming = H bits.  This is exact for that relation, and it protects only
    against neighbours drawn from the population (the BNGP setting, where members are a
    subset of the K individuals).

``add-remove``
    Computed from the population: D' = D minus one member k, with |D| = m >= n >= 2.  Then
    x_hat - x_hat' = sum_{l in D'} (d_k - d_l) / (m (m - 1)), and the triangle inequality gives
    ||x_hat - x_hat'||_p <= max_l ||d_k - d_l||_p / m <= H^(1/p) / n, i.e. the same numbers as
    ``replace``.  This is an upper bound: the exact maximum is a subset-selection problem
    (sensitivity is NP-hard in general, Xiao & Tao 2008, cited in the paper's introduction).
    Randomized response has no add/remove bound (the number of randomized records is
    revealed by the release), so ``hamming`` is not available under this relation.

The paper's bound dominates both population bounds (H <= |Q|), so switching to ``replace``
or ``add-remove`` can only lower the noise for the same epsilon.  All bounds assume datasets
of ``n`` = ``n_members`` members (for add/remove: the larger of the two neighbours has at
least n members).

Composition (arXiv:2410.07414, section 4.4 / Theorem 5 and App. L.6).  A defense that perturbs
c copies of the statistic (a defender trained after m = c - 1 fixed Gaussian mechanisms, or a
DP mechanism matched to it) releases F(D) = [f(D), ..., f(D)], one mechanism on the
concatenated statistic, whose change between neighbours is c copies of the change of f(D):

    ||F(D) - F(D')||_1 = c ||f(D) - f(D')||_1,   ||.||_2 = sqrt(c) ||.||_2,   ||.||_inf = ||.||_inf,

so :func:`composed_sensitivity` gives c Delta_1, sqrt(c) Delta_2 and Delta_inf (and c L bits for
hamming: each of the c copies randomizes the same L differing bits).  Noise of one scale on all
c |Q| outputs calibrated to these is exactly the c-fold composition of the per-copy mechanism:
Laplace c eps, Gaussian sqrt(c) mu-GDP (Dong, Roth & Su 2022, composition of GDP), l-inf unchanged
in eps (its noise dimension grows to c |Q| instead).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from bngp.data.population import Population
from bngp.errors import InputError
from bngp.validation import check_binary_matrix, check_positive_int

__all__ = [
    "NORMS",
    "CONVENTIONS",
    "DEFAULT_SENSITIVITY",
    "Sensitivity",
    "composed_sensitivity",
    "max_pairwise_hamming",
    "paper_sensitivity",
    "population_sensitivity",
    "resolve_sensitivity",
]

#: norms a sensitivity can be measured in ("hamming" counts differing record bits).
NORMS = ("l1", "l2", "linf", "hamming")
#: named conventions accepted by ``sensitivity=`` in a defense SPEC.
CONVENTIONS = ("paper", "replace", "add-remove")
#: the convention used when a SPEC does not give ``sensitivity=``.
DEFAULT_SENSITIVITY = "paper"


@dataclass(frozen=True)
class Sensitivity:
    """A sensitivity bound, as data.

    Attributes:
        value: the bound, > 0 (frequency units for l1/l2/linf; bits for hamming).
        norm: "l1", "l2", "linf" or "hamming".
        neighbouring: "replace", "add-remove", or None when the value was given by the user
            (the relation it holds for is then the user's claim).
        source: "paper", "population" or "user".
    """

    value: float
    norm: str
    neighbouring: str | None
    source: str

    def __post_init__(self) -> None:
        if self.norm not in NORMS:
            raise InputError(f"`norm` must be one of {', '.join(NORMS)}, got {self.norm!r}.")
        value = float(self.value)
        if not math.isfinite(value) or value <= 0:
            raise InputError(f"`sensitivity` must be a finite number > 0, got {value:g}.")
        object.__setattr__(self, "value", value)
        if self.neighbouring not in (None, "replace", "add-remove"):
            raise InputError(f"`neighbouring` must be 'replace' or 'add-remove', got {self.neighbouring!r}.")
        if self.source not in ("paper", "population", "user"):
            raise InputError(f"`source` must be 'paper', 'population' or 'user', got {self.source!r}.")


def composed_sensitivity(sensitivity: Sensitivity, composition: int) -> Sensitivity:
    """The sensitivity of F(D) = [f(D), ..., f(D)] (``composition`` = c copies) from that of f(D).

    l1: c Delta_1; l2: sqrt(c) Delta_2; l-inf: Delta_inf; hamming: c L (module docstring).  The
    norm, neighbouring relation and source are those of ``sensitivity``; c = 1 returns it unchanged.

    >>> composed_sensitivity(paper_sensitivity("l1", 5000, 400), 5).value  # 5 x 12.5
    62.5
    >>> composed_sensitivity(paper_sensitivity("l2", 100, 10), 4).value  # sqrt(4) x sqrt(100) / 10
    2.0
    """
    composition = check_positive_int("composition", composition)
    if composition == 1:
        return sensitivity
    factor = {"l1": composition, "l2": math.sqrt(composition), "linf": 1.0, "hamming": composition}[sensitivity.norm]
    return Sensitivity(sensitivity.value * factor, sensitivity.norm, sensitivity.neighbouring, sensitivity.source)


def max_pairwise_hamming(genotypes: np.ndarray, *, chunk_rows: int = 1024) -> int:
    """H = max_{k, k'} ||d_k - d_k'||_1, the largest Hamming distance between two rows.

    Uses ||a - b||_1 = |a| + |b| - 2 <a, b> for 0/1 vectors, one float32 Gram block at a time
    (exact: every entry is an integer below 2^24 for |Q| < 2^24).  Cost O(K^2 |Q|) time and
    O(chunk_rows K) memory.

    Args:
        genotypes: (K, |Q|) 0/1 matrix.
        chunk_rows: rows per Gram block.

    Returns:
        H, an integer in [0, |Q|] (0 when K = 1 or all rows are equal).
    """
    matrix = check_binary_matrix("genotypes", genotypes)
    if matrix.shape[1] >= 2**24:
        raise InputError(f"`genotypes` must have fewer than 2^24 columns, got {matrix.shape[1]}.")
    chunk_rows = check_positive_int("chunk_rows", chunk_rows)
    dense = matrix.astype(np.float32)
    ones = dense.sum(axis=1)
    best = 0.0
    for start in range(0, dense.shape[0], chunk_rows):
        block = dense[start : start + chunk_rows]
        distances = ones[start : start + chunk_rows, None] + ones[None, :] - 2.0 * (block @ dense.T)
        best = max(best, float(distances.max()))
    return int(round(best))


def _scale_bits(norm: str, bits: float, n_members: int) -> float:
    """The norm of a frequency change (1/n) * v with v a 0/±1 vector of ``bits`` nonzeros."""
    if norm == "l1":
        return bits / n_members
    if norm == "l2":
        return math.sqrt(bits) / n_members
    if norm == "linf":
        return 1.0 / n_members
    return float(bits)


def paper_sensitivity(norm: str, n_attributes: int, n_members: int) -> Sensitivity:
    """The paper's convention (App. L.3) over the record domain {0,1}^|Q|.

    l1 = |Q|/n, l2 = sqrt(|Q|)/n, linf = 1/n, hamming = |Q|.

    >>> paper_sensitivity("l1", 5000, 400).value
    12.5
    """
    if norm not in NORMS:
        raise InputError(f"`norm` must be one of {', '.join(NORMS)}, got {norm!r}.")
    n_attributes = check_positive_int("n_attributes", n_attributes)
    n_members = check_positive_int("n_members", n_members)
    return Sensitivity(_scale_bits(norm, n_attributes, n_members), norm, "replace", "paper")


def population_sensitivity(norm: str, genotypes: np.ndarray, n_members: int, neighbouring: str) -> Sensitivity:
    """Sensitivity computed from the population under ``neighbouring`` (module docstring).

    Args:
        norm: "l1", "l2", "linf" or "hamming" (hamming only under "replace").
        genotypes: (K, |Q|) 0/1 matrix of the individuals who may be members.
        n_members: n, the dataset size (the larger neighbour's size for add/remove).
        neighbouring: "replace" or "add-remove".

    Returns:
        The bound H^(1/p)/n (1/n for linf, H bits for hamming), H = max pairwise Hamming distance.
    """
    if norm not in NORMS:
        raise InputError(f"`norm` must be one of {', '.join(NORMS)}, got {norm!r}.")
    if neighbouring not in ("replace", "add-remove"):
        raise InputError(f"`neighbouring` must be 'replace' or 'add-remove', got {neighbouring!r}.")
    n_members = check_positive_int("n_members", n_members)
    if neighbouring == "add-remove":
        if norm == "hamming":
            raise InputError("randomized response has no add-remove sensitivity; use `sensitivity=replace` or `paper`.")
        if n_members < 2:
            raise InputError(f"`add-remove` sensitivity needs `n_members` >= 2, got {n_members}.")
    hamming = max_pairwise_hamming(genotypes)
    if hamming == 0:
        raise InputError("all individuals of the population have identical attributes; the sensitivity is 0.")
    return Sensitivity(_scale_bits(norm, hamming, n_members), norm, neighbouring, "population")


def resolve_sensitivity(text: str, norm: str, population: Population, n_members: int) -> Sensitivity:
    """Parse a SPEC's ``sensitivity=`` value: ``paper``, ``replace``, ``add-remove`` or a number.

    A number is taken as the bound in ``norm`` itself (frequency units, or bits for hamming),
    with no neighbouring relation recorded.
    """
    text = text.strip()
    if text == "paper":
        return paper_sensitivity(norm, population.n_attributes, n_members)
    if text in ("replace", "add-remove"):
        return population_sensitivity(norm, population.genotypes, n_members, text)
    try:
        value = float(text)
    except ValueError as exc:
        raise InputError(
            f"`sensitivity` must be one of {', '.join(CONVENTIONS)} or a number, got {text!r}."
        ) from exc
    if not value > 0 or not math.isfinite(value):
        raise InputError(f"`sensitivity` must be a finite number > 0, got {text}.")
    return Sensitivity(value, norm, None, "user")
