"""A haplotype-copying generator of synthetic individuals (Li & Stephens 2003).

Model.  Given a panel of H binary individuals h_1..h_H over Q attributes in genomic order
(columns of a :class:`~bngp.data.population.Population`), a synthetic individual y is an
imperfect mosaic of panel individuals:

    Z_1 ~ Uniform{1..H},
    Z_{j+1} = Z_j with probability 1 - rho, else Z_{j+1} ~ Uniform{1..H}   (a switch),
    y_j | Z_j = h:  y_j = h_j with probability 1 - theta, else y_j ~ Bernoulli(p_j)  (a mismatch),

with p_j = (c_j + 1/2) / (H + 1) the panel carrier frequency (c_j carriers) smoothed by a
Jeffreys pseudo-count.  This is the copying process of Li & Stephens (2003), "Modeling linkage
disequilibrium and identifying recombination hotspots using single-nucleotide polymorphism
data", Genetics 165:2213, eq. (A1)-(A3), with two changes forced by the data: the spacing of
the attributes is unknown, so one switch probability rho per adjacent pair of columns
replaces their 1 - exp(-rho_j d_j / H); and a mismatch draws a fresh allele from p_j instead of
flipping the copied one, so that E[y_j] = p_j exactly for every (rho, theta) (a flip would pull
frequencies towards 1/2 by theta (1 - 2 p_j)).

Linkage disequilibrium.  Two adjacent attributes are copied from the same panel individual
with probability 1 - rho, and each keeps the copied allele with probability 1 - theta, so

    Cov_synthetic(y_j, y_{j+1}) = (1 - rho) (1 - theta)^2 Cov_panel(j, j + 1)

(and (1 - rho)^k (1 - theta)^2 Cov_panel(j, j + k) at lag k): the panel's haplotype blocks
are kept up to a factor set by the fit.  rho = 1 is linkage equilibrium (independent
Bernoulli columns, the model of :func:`bngp.data.independent.simulate_independent`);
rho, theta -> 0 copies panel individuals whole.

Fit.  (rho, theta) maximise the leave-one-out composite likelihood of Li & Stephens' "product
of approximate conditionals": T held-out panel individuals, each modelled as a mosaic of the
other H - 1, over a grid of (rho, theta).  The forward algorithm of the hidden copying state,

    a_1(h) = e_1(h) / (H - 1),
    a_{j+1}(h) = [(1 - rho) a_j(h) + rho / (H - 1) sum_h' a_j(h')] e_{j+1}(h),
    e_j(h) = (1 - theta) 1{y_j = h_j} + theta p_j^{y_j} (1 - p_j)^{1 - y_j}   (h != target),

is run once over the columns, vectorised over the grid, the held-out individuals and the
panel, rescaled at every column (log-likelihood = sum of the log scale factors); p_j there
leaves the held-out individual out.  The two parameters are shared by all columns, so they are
fitted on one window of at most L consecutive columns (a seeded random start), which bounds the
cost at O(L G T H) for G grid points whatever Q.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from bngp.errors import InputError
from bngp.rng import SeedLike, make_rng
from bngp.validation import check_binary_matrix, check_positive_int

__all__ = [
    "DEFAULT_MISMATCH_GRID",
    "DEFAULT_SWITCH_GRID",
    "GeneratorDiagnostics",
    "HaplotypeCopyingModel",
    "adjacent_r2",
    "compare_genotypes",
]

#: switch probabilities rho tried by :meth:`HaplotypeCopyingModel.fit` (1 = linkage equilibrium).
DEFAULT_SWITCH_GRID = (0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0)
#: mismatch probabilities theta tried by :meth:`HaplotypeCopyingModel.fit`.
DEFAULT_MISMATCH_GRID = (0.0002, 0.001, 0.005, 0.02, 0.05, 0.1, 0.2, 0.4)
#: rows of synthetic individuals generated at once (bounds the (rows, Q) index arrays).
_SAMPLE_BLOCK = 512


def _check_grid(name: str, values: tuple[float, ...] | list[float], *, upper_inclusive: bool) -> np.ndarray:
    grid = np.asarray(values, dtype=np.float64)
    if grid.ndim != 1 or grid.size == 0:
        raise InputError(f"`{name}` must be a non-empty sequence of probabilities, got {values!r}.")
    upper_ok = grid <= 1.0 if upper_inclusive else grid < 1.0
    if not np.all((grid > 0.0) & upper_ok):
        interval = "(0, 1]" if upper_inclusive else "(0, 1)"
        raise InputError(f"`{name}` must lie in {interval}, got {values!r}.")
    return grid


def _smoothed_frequencies(carriers: np.ndarray, n_rows: float) -> np.ndarray:
    """(c + 1/2) / (n + 1): carrier frequency with a Jeffreys pseudo-count (never 0 or 1)."""
    return (carriers + 0.5) / (n_rows + 1.0)


class HaplotypeCopyingModel:
    """Li & Stephens (2003) copying generator for binary individuals (module docstring).

    Constructor arguments only store settings; :meth:`fit` learns ``switch_rate_``,
    ``mismatch_rate_`` and keeps the panel; :meth:`sample` draws synthetic individuals.

    Args:
        switch_grid: candidate switch probabilities rho in (0, 1].
        mismatch_grid: candidate mismatch probabilities theta in (0, 1).
        n_holdout: T, panel individuals whose leave-one-out likelihood scores the grid
            (capped at H; each is modelled from the other H - 1).
        max_fit_columns: L, the length of the window of consecutive columns the fit uses.

    Example:
        >>> rng = np.random.default_rng(0)
        >>> panel = (rng.random((60, 40)) < 0.3).astype(np.uint8)
        >>> model = HaplotypeCopyingModel(n_holdout=8).fit(panel, seed=1)
        >>> model.sample(5, seed=2).shape
        (5, 40)
    """

    def __init__(
        self,
        switch_grid: tuple[float, ...] | list[float] = DEFAULT_SWITCH_GRID,
        mismatch_grid: tuple[float, ...] | list[float] = DEFAULT_MISMATCH_GRID,
        n_holdout: int = 32,
        max_fit_columns: int = 256,
    ) -> None:
        self.switch_grid = _check_grid("switch_grid", switch_grid, upper_inclusive=True)
        self.mismatch_grid = _check_grid("mismatch_grid", mismatch_grid, upper_inclusive=False)
        self.n_holdout = check_positive_int("n_holdout", n_holdout)
        self.max_fit_columns = check_positive_int("max_fit_columns", max_fit_columns)
        self.panel_: np.ndarray | None = None
        self.frequencies_: np.ndarray | None = None
        self.switch_rate_: float | None = None
        self.mismatch_rate_: float | None = None
        self.log_likelihood_grid_: np.ndarray | None = None
        self.holdout_size_: int | None = None
        self.fit_columns_: tuple[int, int] | None = None

    # ------------------------------------------------------------------------------------------
    # fitting
    # ------------------------------------------------------------------------------------------

    def fit(self, panel: np.ndarray, seed: SeedLike = 0) -> "HaplotypeCopyingModel":
        """Keep ``panel`` (H, Q) and choose (rho, theta) by leave-one-out likelihood; returns self.

        Args:
            panel: (H, Q) 0/1 matrix of the individuals the generator copies from, H >= 2.
            seed: chooses the T held-out individuals and the window of L columns.
        """
        panel = check_binary_matrix("panel", panel)
        n_panel = panel.shape[0]
        if n_panel < 2:
            raise InputError(f"`panel` must hold at least 2 individuals to fit the copying model, got {n_panel}.")
        rng = make_rng(seed)
        holdout = np.sort(rng.choice(n_panel, size=min(self.n_holdout, n_panel), replace=False))
        width = min(self.max_fit_columns, panel.shape[1])
        start = int(rng.integers(0, panel.shape[1] - width + 1))
        grid = self.leave_one_out_log_likelihood(panel[:, start : start + width], holdout)
        best = np.unravel_index(int(np.argmax(grid)), grid.shape)
        self.panel_ = panel
        self.frequencies_ = _smoothed_frequencies(panel.sum(axis=0, dtype=np.float64), n_panel)
        self.switch_rate_ = float(self.switch_grid[best[0]])
        self.mismatch_rate_ = float(self.mismatch_grid[best[1]])
        self.log_likelihood_grid_ = grid
        self.holdout_size_ = int(holdout.size)
        self.fit_columns_ = (start, start + width)
        return self

    def leave_one_out_log_likelihood(self, panel: np.ndarray, holdout: np.ndarray) -> np.ndarray:
        """Sum over ``holdout`` rows of log P(y_t | other panel rows; rho, theta), per grid point.

        Returns:
            (len(switch_grid), len(mismatch_grid)) array of log-likelihoods (nats), computed by
            the scaled forward algorithm of the module docstring.
        """
        panel = check_binary_matrix("panel", panel)
        n_panel, n_columns = panel.shape
        holdout = np.asarray(holdout, dtype=np.int64)
        targets = panel[holdout]
        sources = n_panel - 1
        rho = np.repeat(self.switch_grid, self.mismatch_grid.size)[:, None, None]
        theta = np.tile(self.mismatch_grid, self.switch_grid.size)[:, None, None]
        # p_j without the held-out individual: (T, Q), then the probability of its own allele.
        loo = _smoothed_frequencies(panel.sum(axis=0, dtype=np.float64)[None, :] - targets, sources)
        own = np.where(targets == 1, loo, 1.0 - loo)
        not_self = np.ones((holdout.size, n_panel))
        not_self[np.arange(holdout.size), holdout] = 0.0
        log_likelihood = np.zeros((rho.shape[0], holdout.size))
        alpha = None
        for j in range(n_columns):
            same = (panel[None, :, j] == targets[:, j, None]).astype(np.float64)
            emission = ((1.0 - theta) * same[None] + theta * own[None, :, j, None]) * not_self[None]
            if alpha is None:
                alpha = emission / sources
            else:
                alpha = ((1.0 - rho) * alpha + rho * alpha.sum(axis=2, keepdims=True) / sources) * emission
            scale = alpha.sum(axis=2, keepdims=True)
            log_likelihood += np.log(scale[..., 0])
            alpha /= scale
        return log_likelihood.sum(axis=1).reshape(self.switch_grid.size, self.mismatch_grid.size)

    # ------------------------------------------------------------------------------------------
    # sampling
    # ------------------------------------------------------------------------------------------

    def _check_fitted(self) -> np.ndarray:
        if self.panel_ is None:
            raise InputError("the haplotype-copying model must be fitted before sampling (call fit).")
        return self.panel_

    def sample(self, n_individuals: int, seed: SeedLike = 0) -> np.ndarray:
        """Draw ``n_individuals`` synthetic individuals, a (n, Q) uint8 0/1 matrix.

        Vectorised: switch indicators (n, Q) give each column a segment number (cumulative
        sum), each segment a uniformly drawn panel row, and mismatches are redrawn from p_j.
        """
        panel = self._check_fitted()
        n_individuals = check_positive_int("n_individuals", n_individuals)
        rng = make_rng(seed)
        n_panel, n_columns = panel.shape
        columns = np.arange(n_columns)
        out = np.empty((n_individuals, n_columns), dtype=np.uint8)
        for start in range(0, n_individuals, _SAMPLE_BLOCK):
            rows = min(_SAMPLE_BLOCK, n_individuals - start)
            switches = rng.random((rows, n_columns)) < self.switch_rate_
            switches[:, 0] = True
            segment = np.cumsum(switches, axis=1) - 1
            source = np.take_along_axis(rng.integers(0, n_panel, size=(rows, n_columns)), segment, axis=1)
            copied = panel[source, columns[None, :]]
            mismatch = rng.random((rows, n_columns)) < self.mismatch_rate_
            fresh = rng.random((rows, n_columns)) < self.frequencies_
            out[start : start + rows] = np.where(mismatch, fresh, copied)
        return out

    def describe(self) -> dict[str, Any]:
        """Model name, citation, fitted parameters and the grid searched (JSON-ready)."""
        fitted = self.panel_ is not None
        per_value = None
        if fitted:
            best = float(self.log_likelihood_grid_.max())
            per_value = best / (self.holdout_size_ * (self.fit_columns_[1] - self.fit_columns_[0]))
        return {
            "model": "haplotype copying (Li & Stephens 2003), mismatches drawn from the panel frequency",
            "panel_size": None if not fitted else int(self.panel_.shape[0]),
            "switch_rate": self.switch_rate_,
            "mismatch_rate": self.mismatch_rate_,
            "switch_grid": self.switch_grid.tolist(),
            "mismatch_grid": self.mismatch_grid.tolist(),
            "fit": "maximum leave-one-out composite likelihood over the grid",
            "holdout_individuals": self.holdout_size_,
            "fit_columns": None if not fitted else list(self.fit_columns_),
            "log_likelihood_per_attribute": per_value,
        }


# ----------------------------------------------------------------------------------------------
# diagnostics: how close are synthetic individuals to real ones?
# ----------------------------------------------------------------------------------------------


def adjacent_r2(genotypes: np.ndarray) -> np.ndarray:
    """Squared correlation r^2 between adjacent columns j and j + 1, shape (Q - 1,).

    Columns that are constant contribute r^2 = 0.
    """
    values = check_binary_matrix("genotypes", genotypes).astype(np.float64)
    centred = values - values.mean(axis=0)
    covariance = (centred[:, :-1] * centred[:, 1:]).mean(axis=0)
    variance = (centred**2).mean(axis=0)
    denominator = variance[:-1] * variance[1:]
    with np.errstate(divide="ignore", invalid="ignore"):
        r2 = np.where(denominator > 0, covariance**2 / denominator, 0.0)
    return r2


@dataclass(frozen=True)
class GeneratorDiagnostics:
    """Marginal and adjacent-pair agreement between real and synthetic individuals.

    Attributes:
        max_abs_frequency_difference: max_j |mean(real_j) - mean(synthetic_j)|.
        mean_abs_frequency_difference: mean_j of the same.
        mean_adjacent_r2_real: mean over j of r^2(j, j + 1) among real individuals.
        mean_adjacent_r2_synthetic: the same among synthetic individuals.
        n_real: number of real individuals compared.
        n_synthetic: number of synthetic individuals compared.
    """

    max_abs_frequency_difference: float
    mean_abs_frequency_difference: float
    mean_adjacent_r2_real: float
    mean_adjacent_r2_synthetic: float
    n_real: int
    n_synthetic: int

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def compare_genotypes(real: np.ndarray, synthetic: np.ndarray) -> GeneratorDiagnostics:
    """Compare carrier frequencies and adjacent LD of ``real`` and ``synthetic`` individuals."""
    real = check_binary_matrix("real", real)
    synthetic = check_binary_matrix("synthetic", synthetic)
    if real.shape[1] != synthetic.shape[1]:
        raise InputError(
            f"`synthetic` must have the same number of attributes as `real` ({real.shape[1]}), "
            f"got {synthetic.shape[1]}."
        )
    difference = np.abs(real.mean(axis=0) - synthetic.mean(axis=0))
    has_pairs = real.shape[1] > 1
    return GeneratorDiagnostics(
        max_abs_frequency_difference=float(difference.max()),
        mean_abs_frequency_difference=float(difference.mean()),
        mean_adjacent_r2_real=float(adjacent_r2(real).mean()) if has_pairs else 0.0,
        mean_adjacent_r2_synthetic=float(adjacent_r2(synthetic).mean()) if has_pairs else 0.0,
        n_real=int(real.shape[0]),
        n_synthetic=int(synthetic.shape[0]),
    )
