"""How a linear attack that knows the candidates reads the releases of a mechanism (arXiv:2410.07414 section 2: the
attacker knows the candidate population and can simulate the mechanism).

- :func:`release_coordinates` and :class:`ReleaseReading`: where the candidates' row-space coordinates V^T (x - t)
  lose nothing of a release to a linear map (:mod:`bngp.data.geometry`), r <= K - 1 values instead of |Q|, and the
  coordinates of noise shaped to the row space drawn directly (:meth:`ReleaseReading.draw`);
- :class:`CoordinateSimulator`: shadow releases read that way, for the evaluation's linear attacks;
- :func:`known_law_fit`: the linear MMSE map at the mechanism's known law, the fitted maps' limit.

The converged linear attack and the reference ranking (:mod:`bngp.references`) and the evaluation
(:mod:`bngp.evaluate`) read releases through this module.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property

import numpy as np
import torch

from bngp.data.geometry import PopulationSpace, clip_coordinates, column_blocks, geometry_block, shaping_applies
from bngp.data.population import Population
from bngp.data.priors import MembershipPrior
from bngp.defenses.base import Defense
from bngp.defenses.budget import TimeSharingDefense
from bngp.defenses.shaped import ProjectedDefense, ShapedNoiseDefense
from bngp.defenses.shrinkage import ShrinkNoiseDefense
from bngp.defenses.trained import TrainedDefense
from bngp.errors import InsufficientMemoryError
from bngp.linear import LinearFit, whitened_map_of_law
from bngp.memory import require_memory
from bngp.release.mechanism import Mechanism, SummaryStatistics, perturb
from bngp.release.sampling import release_mechanism, release_tensor
from bngp.rng import torch_generator

__all__ = ["CoordinateSimulator", "ReleaseReading", "as_read", "draw_bytes", "known_law_fit", "reads_in_coordinates",
           "release_coordinates"]

#: releases formed at a time when a :class:`ReleaseReading` draws coordinates, at most (bounds its float32 B x |Q|
#: temporaries, with :data:`_DRAW_VALUES`).
_DRAW_BLOCK = 4096
#: released values formed at a time when a :class:`ReleaseReading` draws coordinates: 2^25 float32 values, 128 MiB.
_DRAW_VALUES = 2**25
#: the same where the basis is not held (the beacon widths): 2^22 values, 16 MiB; the mechanisms read there most
#: (per-attribute noise, noise in the row space, time-sharing) are drawn by blocks of attributes instead.
_UNHELD_DRAW_VALUES = 2**22


def _draw_block(width: int, held: bool = True) -> int:
    """Releases of ``width`` values formed at a time: :data:`_DRAW_BLOCK`, fewer where they would hold more than
    :data:`_DRAW_VALUES` values (:data:`_UNHELD_DRAW_VALUES` where the basis is not ``held``), at least one."""
    return max(1, min(_DRAW_BLOCK, (_DRAW_VALUES if held else _UNHELD_DRAW_VALUES) // max(1, int(width))))


@dataclass(frozen=True, eq=False)
class ReleaseReading:
    """What the converged linear attack reads of a release instead of its |Q| values: the candidates' row-space
    coordinates V^T (x - t), or V^T (w o (x - t)) for the attribute weights w of ``weights``
    (:func:`release_coordinates`); ``on_hull``: every release lies on the affine hull t + span(V) up to clipping
    (noise in the row space, time-sharing), so that no attack, linear or not, loses anything reading them."""

    space: PopulationSpace
    weights: np.ndarray | None = None
    on_hull: bool = False

    @property
    def hull(self) -> tuple[torch.Tensor, torch.Tensor] | None:
        """(V, t) as float32 tensors where the releases lie on the hull (``on_hull``), else None; a basis that is not
        held is formed (:meth:`~bngp.data.geometry.PopulationSpace.dense_basis`)."""
        return (self._basis, self._target) if self.on_hull else None

    @property
    def width(self) -> int:
        return self.space.rank

    def __call__(self, releases: np.ndarray) -> np.ndarray:
        if self.weights is None:
            return self.space.coordinates(releases)
        return self.space.weighted_coordinates(releases, self.weights)

    @cached_property
    def _basis(self) -> torch.Tensor:
        """V as float32 (|Q|, r): the releases are float32, and so is the product that reads them."""
        return torch.as_tensor(self.space.dense_basis(), dtype=torch.float32)

    @cached_property
    def _target(self) -> torch.Tensor:
        return torch.as_tensor(self.space.target, dtype=torch.float32)

    @torch.no_grad()
    def draw(self, mechanism: Mechanism, defense: Defense, b: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        """The coordinates of releases of ``defense`` for memberships ``b`` (B, K), float64 (B, r): the law of
        ``self(sample_releases(mechanism, defense, b, generator))``, formed by blocks of :data:`_DRAW_BLOCK`
        releases in float32, the releases' own precision.

        Noise shaped to this row space (:class:`~bngp.defenses.shaped.ShapedNoiseDefense` on the same basis, with
        no weights, memberships of N each) is drawn in the coordinates themselves: x - t = V c before clipping,
        c = diag(1 - a) V^T (f(D) - t) + w o g with V^T (f(D) - t) = S U^T (b - theta) / N (Zc = U S V^T,
        :mod:`bngp.data.geometry`), so the coordinates of the clipped release are c + V^T (clip(t + V c, 0, 1) -
        (t + V c)): one |Q|-wide product forms the release and a second reads what clipping moved, where the
        whole release costs the statistic's K x |Q| product and two passes through the basis (the second pass reads
        only the attributes clipped in some release of a block: a tenth of them or fewer on genomes).  A basis that is
        not held is applied through the candidates (:mod:`bngp.data.geometry`), the same products."""
        if self._shaped_here(defense, b):
            return self._draw_shaped(defense, b, generator)
        if not self.space.holds_basis and self._on_population(defense, b):
            if isinstance(defense, TimeSharingDefense):
                return self._draw_shared(defense, b, generator)
            if type(defense) is ShrinkNoiseDefense and isinstance(mechanism, SummaryStatistics):
                return self._draw_by_attributes(defense, b, generator)
        blocks = []
        weights = None if self.weights is None else torch.as_tensor(self.weights, dtype=torch.float32)
        step = _draw_block(self.space.n_attributes * defense.composition, self.space.holds_basis)
        for start in range(0, b.shape[0], step):
            centred = release_tensor(mechanism, defense, b[start:start + step], generator).sub_(self._target)
            if weights is not None:
                centred.mul_(weights)
            blocks.append(self._read(centred).double())
        return torch.cat(blocks) if blocks else torch.zeros((0, self.width), dtype=torch.float64)

    def _read(self, centred: torch.Tensor) -> torch.Tensor:
        """V^T y of float32 rows y (B, |Q|), in float32."""
        if self.space.holds_basis:
            return centred @ self._basis
        return self.space.apply_transpose(centred)

    def _clip(self, coordinates: torch.Tensor) -> torch.Tensor:
        """:func:`bngp.data.geometry.clip_coordinates` of ``coordinates`` (B, r), in place, by blocks of
        :func:`_draw_block` releases; where the basis is not held, by blocks of attributes for all the releases at
        once: the block's release x_E = t_E + Zc_E^T U S^-1 c and what clipping moves of it, m_E, read back as
        S^-1 U^T Zc_E m_E, each block of candidates unpacked once."""
        space = self.space
        if space.holds_basis:
            step = _draw_block(space.n_attributes)
            for start in range(0, coordinates.shape[0], step):
                clip_coordinates(coordinates[start:start + step], self._basis, self._target)
            return coordinates
        mapping = space.coordinate_map(torch.float32)
        weights = coordinates.to(torch.float32) @ mapping.T
        products = torch.zeros_like(weights)
        for start, stop, candidates in space.centred_blocks(torch.float32):
            raw = (weights @ candidates).add_(self._target[start:stop])
            moved = raw.clamp(0.0, 1.0).sub_(raw)
            products.addmm_(moved, candidates.T)
        coordinates += (products @ mapping).to(coordinates.dtype)
        return coordinates

    def lift(self, fit: LinearFit) -> LinearFit:
        """A linear fit of these coordinates as the same map of the whole release
        (:meth:`~bngp.linear.LinearFit.of_coordinates`)."""
        return fit.of_coordinates(self.space.dense_basis(), self.space.target, self.weights)

    def _shaped_here(self, defense: Defense, b: torch.Tensor) -> bool:
        """Whether :meth:`draw` draws ``defense``'s releases in the coordinates (its docstring)."""
        if not isinstance(defense, ShapedNoiseDefense) or self.weights is not None or defense.composition != 1:
            return False
        return defense.space.same_as(self.space) and bool(torch.all(b.sum(dim=1) == self.space.n_members))

    def _on_population(self, defense: Defense, b: torch.Tensor) -> bool:
        """Whether ``defense`` releases one copy of f(D) of this space's candidates for memberships ``b`` of N each
        (read whole by attributes: the candidates' own coordinates)."""
        return (defense.composition == 1 and self.space.genotypes is not None
                and bool(torch.all(b.sum(dim=1) == self.space.n_members)))

    def _signal(self, b: torch.Tensor) -> torch.Tensor:
        """V^T (f(D) - t) = S U^T (b - theta) / N for memberships b (B, K) of N each, float64 (B, r)."""
        space = self.space
        left = torch.as_tensor(space.left * (space.singular_values / space.n_members))  # U S / N, (K, r)
        return (b.double() - space.n_members / space.n_individuals) @ left

    def _draw_shared(self, defense: TimeSharingDefense, b: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        """Time-sharing's coordinates: 0 (the release t) where its draw chooses t, else V^T (f(D) - t) (f(D) is never
        clipped); the draw of :meth:`TimeSharingDefense.noise` from the same generator."""
        chosen = torch.rand((b.shape[0], 1), generator=generator, dtype=torch.float64) < defense.probability
        return self._signal(b).masked_fill_(chosen, 0.0)

    def _draw_by_attributes(self, defense: ShrinkNoiseDefense, b: torch.Tensor,
                            generator: torch.Generator) -> torch.Tensor:
        """Per-attribute shrinkage and noise read through a basis that is not held, a block of attributes at a time:
        the block's statistic f(D)_E = b Z_E / N, its release clip(f(D)_E + xi_E, 0, 1) (the noise of ``defense`` on E,
        :meth:`~bngp.defenses.shrinkage.ShrinkNoiseDefense.columns`, drawn block after block from ``generator``) and
        its part (x_E - t_E)^T Zc_E of the product S^-1 U^T Zc (x - t), so each block of candidates is unpacked once
        for every release of the call and no release is formed whole: the same law as :meth:`draw`'s whole releases,
        another order of the noise's draws."""
        space = self.space
        memberships = b.to(torch.float32)
        counts = memberships.sum(dim=1, keepdim=True).clamp_min(1.0)
        products = torch.zeros((b.shape[0], space.n_individuals), dtype=torch.float32)
        weights = None if self.weights is None else torch.as_tensor(self.weights, dtype=torch.float32)
        for start, stop, block in column_blocks(space.genotypes):
            candidates = torch.from_numpy(np.asarray(block)).to(torch.float32)
            statistic = (memberships @ candidates).div_(counts)
            released = perturb(statistic, defense.columns(start, stop).noise(memberships, statistic, generator))
            centred = released.sub_(self._target[start:stop])
            if weights is not None:
                centred.mul_(weights[start:stop])
            products.addmm_(centred, candidates.sub_(self._target[start:stop]).T)  # Zc_E, in place
        return (products @ space.coordinate_map(torch.float32)).double()

    def _draw_shaped(self, defense: ShapedNoiseDefense, b: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        space = self.space
        unit = torch.randn((b.shape[0], space.rank), generator=generator, dtype=torch.float64)
        kept = torch.as_tensor(1.0 - defense.direction_shrink)
        scales = torch.as_tensor(defense.direction_scales)
        return self._clip(self._signal(b).mul_(kept).add_(unit.mul_(scales)))


def _released_attributes(defense: ShrinkNoiseDefense) -> np.ndarray | None:
    """For a release with per-attribute shrinkage a_j and no noise (suppression): 1 on the attributes it releases
    (a_j < 1: x_j - t_j = (1 - a_j)(f(D)_j - t_j), never clipped), whose coordinates V^T (x_E - t_E) lose nothing
    of x_E (:func:`release_coordinates`); None for a release with noise, whose clipping at each attribute's own
    bounds the coordinates would not see (it is read whole), or one that releases nothing."""
    kept = defense.shrink < 1
    if np.any(defense.scale > 0) or not kept.any():
        return None
    return kept.astype(np.float64)


def _coordinate_kind(defense: Defense, population: Population) -> str | None:
    """Why :func:`release_coordinates` reads ``defense`` in the row-space coordinates, from its kind alone: "shaped"
    (noise in a row space), "isotropic" (one shrinkage, one scale), "sharing" (time-sharing), "released"
    (per-attribute shrinkage without noise: the attributes it releases); None (the whole release)."""
    if not shaping_applies(population) or defense.composition != 1:
        return None
    if isinstance(defense, (ShapedNoiseDefense, ProjectedDefense)):
        return "shaped"
    if isinstance(defense, TimeSharingDefense):  # t or f(D): both on the affine hull, never clipped
        return "sharing"
    if isinstance(defense, ShrinkNoiseDefense):
        if np.ptp(defense.shrink) == 0 and np.ptp(defense.scale) == 0:
            return "isotropic"
        return "released" if _released_attributes(defense) is not None else None
    return None


def reads_in_coordinates(defense: Defense, population: Population) -> bool:
    """Whether the converged linear attack reads ``defense``'s releases in the candidates' row-space coordinates
    where the geometry fits in memory (:func:`release_coordinates`), decided from the mechanism's kind, before the
    geometry is built: a trained defender as :func:`as_read` reads it (its closed form without a basis), a
    defender with noise in a row space and any other mechanism that :func:`release_coordinates` reads whole,
    whole."""
    if isinstance(defense, TrainedDefense):
        defense = defense.closed_form(None) or defense
    return _coordinate_kind(defense, population) is not None


def draw_bytes(width: int, individuals: int, releases: int, held: bool = True) -> int:
    """An upper estimate of the temporaries of :meth:`ReleaseReading.draw` of up to ``releases`` releases of ``width``
    values of ``individuals`` candidates: 32 bytes per value of a block of :func:`_draw_block` releases (the statistic,
    float32; the noise, float64; the release's float64 sum before clipping and the release, float32; or the
    coordinates' release and what clipping moved); where the basis is not ``held``, also the draws by blocks of
    attributes, 24 bytes per value of a block of every release and two float32 products of them with the candidates
    (releases x K)."""
    whole = 32 * _draw_block(width, held) * int(width)
    if held:
        return whole
    return whole + 24 * int(releases) * geometry_block() + 8 * int(releases) * int(individuals)


def release_coordinates(defense: Defense, population: Population, n_members: int,
                        space: PopulationSpace | None = None) -> ReleaseReading | None:
    """What a linear attack reads of the releases of ``defense`` instead of the release x (a
    :class:`ReleaseReading` of the candidates' row space), or None (the whole release); ``space``:
    ``population``'s geometry when already built.

    Noise confined to the candidates' row space (:class:`~bngp.defenses.shaped.ShapedNoiseDefense`,
    :class:`~bngp.defenses.shaped.ProjectedDefense` whose basis spans a subspace of it) leaves x - t in it up to
    clipping; for isotropic noise with one shrinkage the part of x outside it is independent of b: either way
    the best linear map from x to b depends on x only through the coordinates V^T (x - t) (:mod:`bngp.data.geometry`),
    r <= K - 1 values instead of |Q|.  A release with per-attribute shrinkage and no noise (suppression) is read
    through V^T (x_E - t_E) on the attributes E it releases: if two memberships gave the same coordinates, with
    x_E - t_E = D V y (D the positive retentions on E, 0 elsewhere) V^T D V y = 0, so ||D^(1/2) V y|| = 0 and
    x_E is the same: nothing of x_E is lost.  Time-sharing releases t or f(D), both on the affine hull: read in
    the coordinates V^T (x - t) too.  Per-attribute noise is read whole: N M Sigma^-1 (x - t) is sufficient
    before clipping, but each attribute is clipped at its own bounds, which a whole-release map can read and the
    statistic cannot.  A mechanism shaped to any other space (another panel) is read whole: the coordinates of
    the candidates' space are those of the population, never of the mechanism.  Where the basis would not fit
    in memory the release is read whole."""
    kind = _coordinate_kind(defense, population)
    if kind is None:
        return None
    shaped, sharing = kind == "shaped", kind == "sharing"
    weights = _released_attributes(defense) if kind == "released" else None
    if space is None:
        try:
            space = PopulationSpace.of(population, n_members)
        except InsufficientMemoryError:  # the basis does not fit: the whole release, as without it
            return None
    if shaped:
        inner = defense.space
        if inner.n_attributes != space.n_attributes or not np.allclose(space.target, inner.target, atol=1e-12):
            return None
        if not inner.same_as(space):
            captured = float(np.sum(space.apply_transpose(inner.dense_basis().T) ** 2))
            if captured < inner.rank * (1.0 - 1e-9):
                return None
    return ReleaseReading(space, weights, on_hull=shaped or sharing)


@dataclass(eq=False)
class CoordinateSimulator:
    """Shadow releases of ``defense`` as a linear attack reads them where the row-space coordinates lose nothing
    (:func:`release_coordinates`, built on first use; ``reading`` None: the whole release): what an attacker who
    knows the candidates and can simulate the mechanism draws (arXiv:2410.07414 section 2).  :meth:`sample` draws
    as :func:`bngp.attacks.base.release_simulator` does from the same seed, read by :meth:`ReleaseReading.draw`."""

    population: Population
    prior: MembershipPrior
    defense: Defense
    n_members: int | None

    @cached_property
    def mechanism(self) -> Mechanism:
        return release_mechanism(self.population.genotypes, self.defense.composition)

    @cached_property
    def reading(self) -> ReleaseReading | None:
        if self.n_members is None:
            return None
        return as_read(self.defense, self.population, self.n_members, None)[1]

    def sample(self, n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
        """(coordinates (n, r), memberships (n, K)) float64 tensors of n fresh releases drawn from ``seed``."""
        b = torch.as_tensor(self.prior.sample(int(n), np.random.default_rng(seed)), dtype=torch.float32)
        return self.reading.draw(self.mechanism, self.defense, b, torch_generator(seed)), b.double()


#: the variance of the unit draw of each noise law (Laplace(1): 2).
_UNIT_VARIANCE = {"gaussian": 1.0, "laplace": 2.0}


def known_law_fit(defense: Defense, population: Population, n_members: int,
                  reading: ReleaseReading | None) -> LinearFit | None:
    """The linear MMSE map from what a linear attack reads of the releases of ``defense`` (``reading``, or the whole
    release when None) to the memberships at the mechanism's known law (:func:`bngp.linear.whitened_map_of_law`),
    clipping left out; None where the law gives none.

    The N-of-K prior has mean theta = N / K and covariance theta (1 - theta) K / (K - 1) (I - 1 1^T / K); a release
    t + diag(1 - a)(f(D) - t) + noise has f(D) - t = Zc^T (b - theta) / N (Zc the centred candidates, since the
    memberships sum to N).  Read in the row-space coordinates (Zc = U S V^T): noise in the row space, V (w o g),
    gives c = (b - theta) U S diag(1 - a) / N + w o g; isotropic noise (one a, one scale s) gives the same with
    a and w = s on every direction (V^T of isotropic noise is isotropic).  Directions with a_i = 1 carry nothing
    and get weight 0; none when a direction with a_i < 1 has no noise.  Read whole, per-attribute noise gives
    the signal Zc diag(1 - a) / N on the attributes with a_j < 1 (the others carry nothing and get weight 0) and
    noise variance s_j^2 Var(e) there; none when some such attribute has no noise (an exact attribute: the
    MMSE map is then not a finite one) or when Zc would not fit in memory.  Mechanisms that are not shrinkage plus
    noise (time-sharing, a trained defender's network) have none."""
    if not isinstance(defense, ShrinkNoiseDefense) or defense.composition != 1:
        return None
    k = population.n_individuals
    theta = n_members / k
    prior_covariance = theta * (1.0 - theta) * k / (k - 1) * (np.eye(k) - 1.0 / k)
    variance = _UNIT_VARIANCE[defense.law]
    if reading is not None:
        space = reading.space
        if reading.weights is not None:  # attributes released without noise (suppression)
            return None
        if isinstance(defense, ShapedNoiseDefense):
            if not defense.space.same_as(space):
                return None
            retained, scales = 1.0 - defense.direction_shrink, defense.direction_scales
        elif isinstance(defense, ProjectedDefense) or np.ptp(defense.shrink) or np.ptp(defense.scale):
            return None
        else:
            retained = np.full(space.rank, 1.0 - defense.shrink[0])
            scales = np.full(space.rank, defense.scale[0])
        read = retained > 0  # a direction shrunk to t carries nothing: weight 0
        if not read.any() or not np.all(scales[read] > 0):
            return None
        signal = space.left[:, read] * (space.singular_values[read] * retained[read] / n_members)
        fit = whitened_map_of_law(signal, scales[read] ** 2 * variance, np.full(k, theta), prior_covariance,
                                  np.zeros(int(read.sum())))
        return _embedded(fit, read, np.zeros(space.rank))
    kept = defense.shrink < 1
    if not kept.any() or not np.all(defense.scale[kept] > 0):
        return None
    try:
        require_memory(3 * 8 * k * int(kept.sum()), "the known-law map of a whole release")
    except InsufficientMemoryError:
        return None
    columns = np.flatnonzero(kept)
    source = population.genotypes
    genotypes = np.asarray(source.take_columns(columns) if population.packed else source[:, columns], dtype=np.float64)
    signal = (genotypes - genotypes.mean(axis=0)) * ((1.0 - defense.shrink[kept]) / n_members)
    fit = whitened_map_of_law(signal, defense.scale[kept] ** 2 * variance, np.full(k, theta), prior_covariance,
                              defense.target[kept])
    return _embedded(fit, kept, defense.target)


def _embedded(fit: LinearFit, read: np.ndarray, release_mean: np.ndarray) -> LinearFit:
    """``fit``, a map of the values selected by the mask ``read``, as the same map of all of them: weight 0 on the
    others, whose centre is ``release_mean`` (the selected values' centre is the fit's own)."""
    weights = torch.zeros((read.size, fit.weights.shape[1]), dtype=torch.float64)
    weights[torch.as_tensor(read)] = fit.weights
    return replace(fit, release_mean=torch.as_tensor(release_mean, dtype=torch.float64), weights=weights)


def as_read(defense: Defense, population: Population, n_members: int,
             space: PopulationSpace | None) -> tuple[Defense, ReleaseReading | None]:
    """``defense`` as a linear attack reads it, and its reading (:func:`release_coordinates`; ``space``: the
    population's geometry when already built, else built here at most once): a trained defender whose network
    output is zero is the shrinkage-plus-noise mechanism it releases
    (:meth:`~bngp.defenses.trained.TrainedDefense.closed_form`), read as the references are; else itself."""
    if isinstance(defense, TrainedDefense):
        if space is None and defense.artifact.defender.noise_basis is not None and shaping_applies(population):
            try:
                space = PopulationSpace.of(population, n_members)
            except InsufficientMemoryError:  # no basis: the closed form of noise shaped to it is not known
                pass
        defense = defense.closed_form(space) or defense
    return defense, release_coordinates(defense, population, n_members, space)
