"""Plumbing shared by the mechanism audits: seeds, the attack's set-up and checks.

Independence of the streams is what makes the bounds valid: the audit's membership draws,
the release noise, the attack's own shadow simulations and the tie-breaking of the one-run
guesses each get a seed derived from the audit seed by :func:`bngp.rng.spawn_seeds`, so the
attack never sees (nor regenerates) the audited releases.  PANORAMIA's ``companion`` stream
splits the individuals outside the dataset into the generator's panel and the real non-members
and draws the companion audit's inclusion coins (:mod:`bngp.mechanism_audit.panoramia_sets`).
Streams are only ever appended to :data:`SEED_STREAMS`: SeedSequence children do not depend on
how many are spawned, so a new stream leaves the seeds of the others, and their draws, unchanged.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

import numpy as np

from bngp.attacks.base import Attack, AttackKnowledge
from bngp.attacks.composed import for_composition
from bngp.attacks.registry import get_attack
from bngp.audit.inputs import check_delta
from bngp.device import DeviceName
from bngp.errors import DataFormatError, InputError
from bngp.rng import named_seeds, resolve_seed
from bngp.defenses.base import Defense

if TYPE_CHECKING:
    import torch

__all__ = [
    "SEED_STREAMS",
    "audit_seeds",
    "fit_attack",
    "attack_record",
    "resolve_delta",
    "check_scores",
]

#: the independent random streams of an audit, in the order they are derived.
SEED_STREAMS = ("design", "release", "attack", "ties", "generator", "companion")
#: derived seeds are kept below 2^31 so that every consumer (numpy, torch, an attack that
#: offsets its seed for successive shadow batches) accepts them.
_SEED_MODULUS = 2**31


def audit_seeds(seed: int | None) -> tuple[int, dict[str, int]]:
    """Resolve ``seed`` and derive one independent seed per stream of :data:`SEED_STREAMS`."""
    seed = resolve_seed(seed)
    return seed, {name: value % _SEED_MODULUS for name, value in named_seeds(seed, SEED_STREAMS).items()}


def fit_attack(
    attack: str | Attack,
    knowledge: AttackKnowledge,
    seed: int,
    progress: bool = False,
    device: DeviceName | torch.device = "cpu",
) -> Attack:
    """Instantiate ``attack`` (a registry name) if needed and fit it on ``knowledge`` only; with
    ``progress``, a line on stderr once the attack's knowledge is known to be there (so that a bad
    input still gives exactly one line, the error).  For a release of ``knowledge.composition`` > 1
    copies of f(D), an attack that does not read composed releases natively is run on the tiled view
    (:func:`bngp.attacks.composed.for_composition`).  An attack that trains a network (the Bayesian
    attacker) trains it on ``device`` (:meth:`bngp.attacks.base.Attack.set_device`); the others run
    on the CPU."""
    if isinstance(attack, str):
        attack = get_attack(attack)
    elif not isinstance(attack, Attack):
        raise InputError(f"`attack` must be an attack name or an Attack, got {type(attack).__name__}.")
    attack = for_composition(attack, knowledge.composition).set_device(device)
    attack.check_knowledge(knowledge)
    if progress:
        print(f"[audit-mechanism] releases drawn; fitting and scoring attack `{attack.name}`", file=sys.stderr, flush=True)
    return attack.fit(knowledge, seed=seed)


def attack_record(attack: Attack, knowledge: AttackKnowledge, seed: int, shadow: str) -> dict[str, Any]:
    """The attack's description for AUDIT.json: knowledge statement, what it was given, how fitted."""
    return {
        **attack.describe(),
        "knowledge_given": sorted(knowledge.available()),
        "fit_seed": seed,
        "shadow_simulations": shadow,
    }


def resolve_delta(delta: float | None, defense: Defense) -> float:
    """``None`` becomes the delta of the defense's guarantee (0 when it has none)."""
    if delta is None:
        guarantee = defense.guarantee
        return 0.0 if guarantee is None else float(guarantee.delta)
    return check_delta(delta)


def check_scores(name: str, scores: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """The attack's scores as float64 of the expected shape, all finite."""
    values = np.asarray(scores, dtype=np.float64)
    if values.shape != shape:
        raise DataFormatError(f"attack `{name}` returned scores of shape {values.shape}, expected {shape}.")
    if not np.all(np.isfinite(values)):
        raise DataFormatError(f"attack `{name}` returned NaN or infinite scores.")
    return values
