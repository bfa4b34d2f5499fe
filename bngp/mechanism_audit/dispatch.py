"""One entry point for the end-to-end audits of the release mechanism (``bngp audit-mechanism``).

``audit_mechanism`` checks that the options fit the mode and dispatches to the one-run or
many-run canary audit (:mod:`bngp.mechanism_audit.canary`) or to PANORAMIA with generated
non-members and its real-non-member companion lower bound
(:mod:`bngp.mechanism_audit.panoramia_genome`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from bngp.attacks.base import Attack
from bngp.mechanism_audit.canary import many_run_mechanism_audit, one_run_mechanism_audit
from bngp.mechanism_audit.panoramia_genome import panoramia_mechanism_audit
from bngp.mechanism_audit.panoramia_sets import RealNonmembers
from bngp.mechanism_audit.results import MODES, MechanismAuditResult
from bngp.data.population import Population
from bngp.device import DeviceName, resolve_device
from bngp.errors import InputError
from bngp.defenses.base import Defense

if TYPE_CHECKING:
    import torch

__all__ = ["DEFAULT_RUNS", "audit_mechanism"]

#: runs of the many-run audit when none are given.
DEFAULT_RUNS = 200


def audit_mechanism(
    population: Population,
    defense: Defense,
    attack: str | Attack,
    *,
    mode: str,
    canaries: int,
    members: int,
    runs: int | None = None,
    confidence: float = 0.95,
    delta: float | None = None,
    neighbouring: str = "auto",
    real_nonmembers: RealNonmembers = "auto",
    seed: int | None = 0,
    progress: bool = False,
    device: DeviceName | torch.device = "cpu",
) -> MechanismAuditResult:
    """Audit ``defense`` on ``population`` with ``attack`` in ``mode``.

    Args:
        population: the K individuals (candidates for canaries and datasets) and reference panel.
        defense: the defense under audit, built for ``members`` members.
        attack: registry name or an unfitted attack.
        mode: ``"one-run"``, ``"many-run"`` or ``"panoramia"``.
        canaries: m, the canaries (one-run, many-run) or the audit-set size (panoramia).
        members: n, the dataset size (``add-remove``: its non-canary part).
        runs: R independent releases (many-run only; default :data:`DEFAULT_RUNS`).
        confidence: 1 - beta.
        delta: delta of the bound (canary modes; default the defense's claimed delta).
        neighbouring: ``"auto"``, ``"replace"`` or ``"add-remove"`` (canary modes).
        real_nonmembers: panoramia only: R individuals outside the dataset held out from the
            generator and audited as real non-members, for the companion lower bound that becomes
            ``epsilon_lb``; 0 or None: none (``epsilon_lb`` is then the eps_tilde measurement);
            "auto" (default): min(m, floor((K - n) / 2), K - n - 10), none if below 2.  Any value
            other than "auto" or None with another mode is an error.
        seed: the audit seed.
        progress: a line on stderr when the releases are drawn and the attack is being fitted.
        device: "auto", "cpu", "cuda" or a ``torch.device``: where an attack that trains a network
            (the Bayesian attacker, arXiv:2410.07414 section 3.2) trains and scores; the releases and
            the closed-form attacks stay on the CPU, so the audit's draws do not depend on it.
            Recorded as ``device`` in AUDIT.json.

    Example:
        >>> from bngp.data.independent import simulate_independent
        >>> from bngp.defenses.base import NoDefense
        >>> population = simulate_independent(120, 60, 300, seed=0)
        >>> result = audit_mechanism(population, NoDefense(), "score", mode="one-run", canaries=30, members=40)
        >>> result.epsilon_lb > 0
        True
    """
    if mode not in MODES:
        raise InputError(f"`mode` must be one of {', '.join(MODES)}, got {mode!r}.")
    device = resolve_device(device)
    if mode != "many-run" and runs not in (None, 1):
        raise InputError(f"`runs` applies only to the many-run mode (mode {mode!r} uses one release), got {runs}.")
    if mode != "panoramia" and not (real_nonmembers is None or real_nonmembers == "auto"):
        raise InputError(
            f"`real_nonmembers` applies only to the panoramia mode (mode {mode!r} has no generator), got "
            f"{real_nonmembers!r}."
        )
    if mode == "panoramia":
        if delta not in (None, 0.0):
            raise InputError("`delta` does not apply to panoramia (a pure-DP measurement), got a non-zero value.")
        if neighbouring != "auto":
            raise InputError("`neighbouring` does not apply to panoramia (datasets are n of K uniformly).")
        return panoramia_mechanism_audit(
            population, defense, attack, audit_size=canaries, members=members, real_nonmembers=real_nonmembers,
            confidence=confidence, seed=seed, progress=progress, device=device,
        )
    common = dict(
        canaries=canaries, members=members, confidence=confidence, delta=delta, neighbouring=neighbouring, seed=seed,
        progress=progress, device=device,
    )
    if mode == "one-run":
        return one_run_mechanism_audit(population, defense, attack, **common)
    return many_run_mechanism_audit(
        population, defense, attack, runs=DEFAULT_RUNS if runs is None else runs, **common
    )
