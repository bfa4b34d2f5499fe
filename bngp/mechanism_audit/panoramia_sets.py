"""Who is where in a PANORAMIA audit of one release (arXiv:2402.09477, adapted to genomes).

The dataset D is n of the K individuals drawn uniformly (the prior the defenses are built for).
The K - n individuals outside D are split by a seeded permutation (the ``companion`` stream of
:func:`~bngp.mechanism_audit.common.audit_seeds`) into the generator's panel and R real
non-members o_1..o_R.  D is shuffled: m members a_1..a_m form the audit pool, the other n - m
train the classifiers.

* generated audit: m points, point i is a real member (s_i = 1, the next audit-pool member) with
  probability 1/2, independently, else a fresh draw of the generator;
* companion audit: R points, point i is a_i (t_i = 1) or o_i (t_i = 0), t_i a fair coin of the
  ``companion`` stream; the individual of the pair that is not audited stays where it is (a_i in
  D, o_i outside), so D is untouched.

Why the companion audit gives a valid lower bound (arXiv:2402.09477, Prop. 2 with c = 0;
arXiv:2305.08846, Thm. 3.1):

* exchangeability.  D is n of K uniformly, the audit pool a uniformly ordered draw from D, the
  real non-members a uniformly ordered draw from the outside individuals and the panel the rest
  of them.  Every such configuration has the same probability, and swapping a_i with o_i maps
  one to another, so given the unordered pairs {a_i, o_i}, the rest of D (training members and
  audit-pool members a_{R+1}..a_m) and the panel (a function of those), which individual of each
  pair is in D is a fair coin, independently over pairs.  The split is independent of the
  genotypes (a seeded permutation).
* one fair coin per audit point, independent of what the MIA saw: training members and panel
  (conditioned on), the attack's knowledge (population, reference panel, prior; never D) and the
  seeds of the other streams.  The MIA never trains on an audit point of either audit, and the
  generated audit's draws do not enter the MIA, so the two audits share the audit pool.
* one replacement per coin.  Flipping s_i swaps y_i with its unaudited partner: two datasets of n
  that differ by one replacement, so under eps-DP the "member" guesses for the r highest MIA
  scores have tp dominated by Bin(r, e^eps / (1 + e^eps)) (the one-run theorem with abstentions).
* why the split.  The panel is disjoint from the real non-members: a generator fitted on o_i
  would copy it, the MIA is trained to call the generator's output non-members, and which
  individual of a pair is outside would leak through the MIA.  A generator fitted on members
  would make mosaics of members, which correlate with the release as members do, so the
  generator never sees D either.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from bngp.data.priors import UniformSubsetPrior
from bngp.errors import DataFormatError, InputError
from bngp.mechanism_audit.common import audit_seeds
from bngp.validation import check_positive_int

__all__ = ["MIN_GENERATOR_PANEL", "MIN_TRAINING_MEMBERS", "PanoramiaDesign", "RealNonmembers", "panoramia_design"]

#: members kept out of the audit set to train the classifiers (at least).
MIN_TRAINING_MEMBERS = 10
#: individuals outside the dataset the generator keeps when some become real non-members (at least).
MIN_GENERATOR_PANEL = 10

#: the companion's real non-members: a count, "auto", or 0 / None for no companion audit.
RealNonmembers = int | Literal["auto"] | None


@dataclass(frozen=True)
class PanoramiaDesign:
    """Who is where in one PANORAMIA audit (rows of ``population.genotypes``).

    Attributes:
        membership: (K,) bool, the dataset D (n of K uniformly).
        audit_pool: (m,) members a_1..a_m in audit order; never train anything.
        training_members: the other n - m members, which train the classifiers.
        generator_panel: the individuals outside D the generator is fitted on (sorted).
        real_nonmembers: (R,) the companion's real non-members o_1..o_R, o_i paired with a_i;
            disjoint from the panel, and together they are the K - n individuals outside D.
        labels: (m,) generated audit: point i is a_j (True, the next member) or generated.
        companion_labels: (R,) companion audit: point i is a_i (True) or o_i (False).
        seed: the audit seed; ``seeds`` the derived seeds (``design`` draws D, the audit pool and
            ``labels``; ``companion`` the split and ``companion_labels``).
    """

    membership: np.ndarray
    audit_pool: np.ndarray
    training_members: np.ndarray
    generator_panel: np.ndarray
    real_nonmembers: np.ndarray
    labels: np.ndarray
    companion_labels: np.ndarray
    seed: int
    seeds: dict[str, int]

    @property
    def companion_points(self) -> np.ndarray:
        """(R,) the audited individual of each pair: a_i where ``companion_labels``, else o_i."""
        size = self.real_nonmembers.size
        return np.where(self.companion_labels, self.audit_pool[:size], self.real_nonmembers)


def _resolve_real_nonmembers(real_nonmembers: RealNonmembers, *, outside: int, audit_size: int) -> int:
    """R from ``real_nonmembers`` ("auto", None or 0 = no companion, or a count), checked."""
    room = outside - MIN_GENERATOR_PANEL
    if real_nonmembers is None:
        return 0
    if isinstance(real_nonmembers, str):
        if real_nonmembers != "auto":
            raise InputError(f"`real_nonmembers` must be a count, 0, None or 'auto', got {real_nonmembers!r}.")
        value = min(audit_size, outside // 2, room)
        return value if value >= 2 else 0
    if isinstance(real_nonmembers, bool) or not isinstance(real_nonmembers, (int, np.integer)):
        raise InputError(f"`real_nonmembers` must be an integer, got {type(real_nonmembers).__name__}.")
    value = int(real_nonmembers)
    if value == 0:
        return 0
    if value < 2:
        raise InputError(f"`real_nonmembers` must be 0 (no companion bound) or >= 2, got {value}.")
    if room < 2:
        raise InputError(
            f"too few individuals outside the dataset for a companion bound: K - n = {outside}, and the generator "
            f"keeps at least {MIN_GENERATOR_PANEL} of them while the companion needs 2; use real_nonmembers 0 or "
            "a larger population."
        )
    if value > room:
        raise InputError(
            f"`real_nonmembers` must be <= K - n - {MIN_GENERATOR_PANEL} = {room} (the generator keeps at least "
            f"{MIN_GENERATOR_PANEL} of the {outside} individuals outside the dataset), got {value}."
        )
    if value > audit_size:
        raise InputError(
            f"`real_nonmembers` must be <= canaries = {audit_size} (each real non-member is paired with one "
            f"audit-pool member), got {value}."
        )
    return value


def _split_outside(outside: np.ndarray, n_real_nonmembers: int,
                   seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(real non-members o_1..o_R, generator panel (sorted), companion labels) drawn with the
    ``companion`` stream ``seed``: a permutation of the ``outside`` individuals, then R fair coins."""
    companion_rng = np.random.default_rng(seed)
    if n_real_nonmembers:
        order = companion_rng.permutation(outside)
        pool, panel = order[:n_real_nonmembers], np.sort(order[n_real_nonmembers:])
    else:
        pool, panel = outside[:0], outside
    companion_labels = companion_rng.random(n_real_nonmembers) < 0.5
    n_companion_members = int(companion_labels.sum())
    if n_real_nonmembers and n_companion_members in (0, n_real_nonmembers):
        state = "members" if n_companion_members else "real non-members"
        raise DataFormatError(
            f"all {n_real_nonmembers} companion audit points were {state} (probability 2^(1-R)); use more real "
            "non-members, another seed, or real_nonmembers 0."
        )
    return pool, panel, companion_labels


def panoramia_design(
    n_individuals: int,
    members: int,
    audit_size: int,
    *,
    real_nonmembers: RealNonmembers = "auto",
    seed: int | None = 0,
) -> PanoramiaDesign:
    """Draw D, the audit pool, the split of the outside individuals and both audits' labels.

    Every argument is checked before anything is drawn (module docstring for the design).

    Args:
        n_individuals: K.
        members: n (n of K uniformly), at most K - 2.
        audit_size: m >= 2, at most n - :data:`MIN_TRAINING_MEMBERS`.
        real_nonmembers: R, the companion's real non-members: 2 <= R <= m and
            R <= K - n - :data:`MIN_GENERATOR_PANEL`; 0 or None: no companion; "auto" (default):
            min(m, floor((K - n) / 2), K - n - MIN_GENERATOR_PANEL), or none if that is below 2.
        seed: the audit seed.

    Raises:
        InputError: a bad argument.  DataFormatError: one audit's labels fell all on one side
            (probability 2^(1-m) for the generated audit, 2^(1-R) for the companion).

    Example:
        >>> design = panoramia_design(100, 40, 20, seed=0)
        >>> design.real_nonmembers.size, design.generator_panel.size
        (20, 40)
        >>> bool(np.intersect1d(design.real_nonmembers, design.generator_panel).size)
        False
    """
    n_individuals = check_positive_int("individuals", n_individuals, minimum=3)
    m = check_positive_int("canaries", audit_size, minimum=2)
    members = check_positive_int("members", members, maximum=n_individuals - 2)
    if m > members - MIN_TRAINING_MEMBERS:
        raise InputError(
            f"`canaries` must be <= members - {MIN_TRAINING_MEMBERS} = {members - MIN_TRAINING_MEMBERS} "
            f"(PANORAMIA keeps at least {MIN_TRAINING_MEMBERS} members to train its classifiers), got {m}."
        )
    n_real_nonmembers = _resolve_real_nonmembers(real_nonmembers, outside=n_individuals - members, audit_size=m)
    seed, seeds = audit_seeds(seed)

    design_rng = np.random.default_rng(seeds["design"])
    b = UniformSubsetPrior(n_individuals, members).sample(1, design_rng)[0].astype(bool)
    member_index = design_rng.permutation(np.flatnonzero(b))
    outside = np.flatnonzero(~b)
    labels = design_rng.random(m) < 0.5
    n_real = int(labels.sum())
    if n_real in (0, m):
        state = "real members" if n_real else "generated"
        raise DataFormatError(
            f"all {m} audit points were {state} (probability 2^(1-m)); use more canaries or another seed."
        )

    pool, panel, companion_labels = _split_outside(outside, n_real_nonmembers, seeds["companion"])
    return PanoramiaDesign(
        membership=b,
        audit_pool=member_index[:m],
        training_members=member_index[m:],
        generator_panel=panel,
        real_nonmembers=pool,
        labels=labels,
        companion_labels=companion_labels,
        seed=seed,
        seeds=seeds,
    )
