"""Canary audits of the released allele frequencies: one-run and many-run.

Design (Steinke, Nasr, Jagielski, arXiv:2305.08846).  m canaries are drawn uniformly from the
population (the K individuals the attacks know); every other individual belongs to the
non-canary pool.  In each run, every canary is included independently with probability 1/2
(inclusion bits S in {0, 1}^m) and the rest of the dataset is filled from the pool:

* ``replace`` (datasets of exactly n = ``members``): the first n - |S| individuals of a
  uniformly random ordering pi of the pool.  For a fixed pi, flipping S_i from 1 to 0
  replaces canary i by the next individual of pi, so S -> release is (eps, delta)-DP in each
  bit whenever the mechanism is under replacement, and mixing over pi keeps that.
* ``add-remove``: n pool individuals plus the included canaries (sizes n..n + m); flipping
  S_i adds or removes canary i.  Calibrations that hold for datasets of at least n members
  (defenses.sensitivity) cover this.

The release is x = clip(f(D) + xi, 0, 1) from the defense (for a defense that perturbs c > 1
copies of f(D), arXiv:2410.07414 App. L.6, the c |Q| outputs of all of them, built by
:func:`bngp.release.sampling.release_mechanism`); the attack, fitted beforehand on shadow
releases it simulates itself (with the audit's own design and fresh seeds), scores every canary
against every release, higher = member (on the tiled view of a composed release,
:class:`bngp.attacks.composed.TiledAttack`).  Each canary's inclusion changes all c
copies at once, so the bound is one on the eps of the whole composed release, the mechanism a
matched DP defense's guarantee is stated for.

Bounds.

* one run (Steinke, Nasr, Jagielski, "Privacy auditing with one (1) training run",
  arXiv:2305.08846, Thm. 3.1 and Prop. 5.7): :func:`bngp.audit.one_run_search` on the m scores, guessing "in"
  for the top k+ and "out" for the bottom k-, Bonferroni over the (k+, k-) candidates.  Beside it, on the same
  guesses, the f-DP one-run bound of Mahloujifar, Melis & Chaudhuri (arXiv:2410.22235,
  :func:`bngp.audit.fdp_one_run_search`): the largest mu whose mu-GDP the guesses reject, read against a
  Gaussian mechanism's claimed mu (its eps at the audit's delta, 1e-5 for a pure-DP claim).
* many runs (R independent releases with fresh inclusions): two bounds, each at error beta/2,
  whose maximum is therefore valid at confidence 1 - beta:

  - per canary, the R (score, S_ri) pairs are i.i.d., so the Clopper-Pearson audit of
    Kairouz, Oh, Viswanath (2015) / Jagielski, Ullman, Oprea (2020)
    (:func:`bngp.audit.many_run_audit`) applies to each canary; a Bonferroni correction over
    the m canaries (error beta / (2 m) each) covers taking the best one;
  - pooled: each bit S_ri changes only release r, so the R releases together are
    (eps, delta)-DP in every one of the R m bits and the one-run theorem applies to all
    R m guesses at once (Steinke et al., arXiv:2305.08846, interpolate between one and many runs this way).

The design's ceiling (``epsilon_ceiling``, :mod:`bngp.audit.ceiling`) is each bound computed again
on a perfect attack's scores (1 for an included canary, 0 otherwise) with the same inclusions,
candidates, union bounds and tie-breaking seed: the largest eps these canaries and runs can
certify.  One run: about ln(r / ln(C / beta)) for r guesses among C candidates (arXiv:2305.08846,
Thm. 3.1 at v = r).

The record's ``diagnostics.tradeoff`` is the empirical trade-off curve of the scores behind the
bound (:func:`bngp.audit.empirical_tradeoff`): one run, the m canary scores (descriptive: canaries
of one release are not independent runs); many runs, the R scores of the canary with the largest
Clopper-Pearson bound at that canary's confidence 1 - beta / (2 m), a valid simultaneous region.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from bngp.attacks.base import Attack
from bngp.audit import empirical_tradeoff, fdp_one_run_search, many_run_audit, one_run_search, perfect_scores, \
    roc_summary
from bngp.mechanism_audit.common import attack_record, audit_seeds, check_scores, fit_attack, resolve_delta
from bngp.mechanism_audit.results import MechanismAuditResult, claimed_guarantee, resolve_neighbouring
from bngp.audit.inputs import check_confidence
from bngp.data.population import Population
from bngp.data.priors import MembershipPrior
from bngp.device import DeviceName, resolve_device
from bngp.errors import DataFormatError, InputError
from bngp.attacks.base import attack_knowledge
from bngp.rng import torch_generator
from bngp.validation import check_positive_int
from bngp.defenses.base import Defense
from bngp.release.sampling import release_mechanism, sample_releases

__all__ = ["CanaryPrior", "one_run_mechanism_audit", "many_run_mechanism_audit"]


class CanaryPrior(MembershipPrior):
    """The membership law of a canary audit (module docstring), as a :class:`MembershipPrior`.

    Attacks that simulate shadow releases get this prior, so they train on the audit's own
    design (same canaries, fresh inclusions and fillers).

    Args:
        n_individuals: K.
        canaries: indices of the m canaries among the K individuals (distinct).
        n_members: n, the dataset size (``replace``) or the non-canary part (``add-remove``).
        neighbouring: ``"replace"`` or ``"add-remove"``.
    """

    def __init__(self, n_individuals: int, canaries: np.ndarray, n_members: int, neighbouring: str) -> None:
        self.n_individuals = check_positive_int("n_individuals", n_individuals)
        canaries = np.asarray(canaries, dtype=np.int64)
        if canaries.ndim != 1 or canaries.size == 0:
            raise InputError("`canaries` must be a non-empty 1-D array of individual indices.")
        if np.unique(canaries).size != canaries.size:
            raise InputError("`canaries` must not repeat an individual.")
        if canaries.min() < 0 or canaries.max() >= self.n_individuals:
            raise InputError(f"`canaries` must index individuals in [0, {self.n_individuals}).")
        if neighbouring not in ("replace", "add-remove"):
            raise InputError(f"`neighbouring` must be 'replace' or 'add-remove', got {neighbouring!r}.")
        m = canaries.size
        pool_size = self.n_individuals - m
        self.n_members = check_positive_int("members", n_members)
        if neighbouring == "replace" and m > self.n_members:
            raise InputError(
                f"`canaries` must be <= members ({self.n_members}) under the replace relation "
                f"(every dataset has exactly {self.n_members} members), got {m}."
            )
        if self.n_members > pool_size:
            raise InputError(
                f"`members` must be <= K - canaries = {pool_size} (the non-canary pool fills the dataset), "
                f"got {self.n_members}."
            )
        self.canaries = canaries
        mask = np.ones(self.n_individuals, dtype=bool)
        mask[canaries] = False
        self.pool = np.flatnonzero(mask)
        self.neighbouring = neighbouring

    @property
    def n_canaries(self) -> int:
        """m."""
        return int(self.canaries.size)

    @property
    def marginals(self) -> np.ndarray:
        """1/2 for canaries; E[fillers] / |pool| for the pool."""
        theta = np.empty(self.n_individuals)
        theta[self.canaries] = 0.5
        fillers = self.n_members - (self.n_canaries / 2.0 if self.neighbouring == "replace" else 0.0)
        theta[self.pool] = fillers / self.pool.size
        return theta

    def _fillers(self, inclusion_counts: np.ndarray) -> np.ndarray:
        if self.neighbouring == "replace":
            return self.n_members - inclusion_counts
        return np.full_like(inclusion_counts, self.n_members)

    def draw(self, n_draws: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """``n_draws`` runs: memberships b (n_draws, K) float32 and inclusions S (n_draws, m) bool."""
        n_draws = check_positive_int("n_draws", n_draws)
        inclusion = rng.random((n_draws, self.n_canaries)) < 0.5
        ranks = np.argsort(np.argsort(rng.random((n_draws, self.pool.size)), axis=1), axis=1)
        fillers = self._fillers(inclusion.sum(axis=1))
        b = np.zeros((n_draws, self.n_individuals), dtype=np.float32)
        b[:, self.canaries] = inclusion
        b[:, self.pool] = ranks < fillers[:, None]
        return b, inclusion

    def sample(self, n_draws: int, rng: np.random.Generator) -> np.ndarray:
        return self.draw(n_draws, rng)[0]

    def sample_torch(self, n_draws: int, generator: torch.Generator) -> torch.Tensor:
        inclusion = torch.rand((n_draws, self.n_canaries), generator=generator) < 0.5
        keys = torch.rand((n_draws, self.pool.size), generator=generator)
        ranks = torch.argsort(torch.argsort(keys, dim=1), dim=1)
        counts = inclusion.sum(dim=1)
        fillers = self.n_members - counts if self.neighbouring == "replace" else torch.full_like(counts, self.n_members)
        b = torch.zeros((n_draws, self.n_individuals))
        b[:, torch.as_tensor(self.canaries)] = inclusion.float()
        b[:, torch.as_tensor(self.pool)] = (ranks < fillers[:, None]).float()
        return b

    def describe(self) -> dict[str, Any]:
        return {
            "kind": "canary",
            "individuals": self.n_individuals,
            "canaries": self.n_canaries,
            "members": self.n_members,
            "neighbouring": self.neighbouring,
            "inclusion_probability": 0.5,
        }


def _experiment(
    population: Population,
    defense: Defense,
    attack: str | Attack,
    *,
    canaries: int,
    members: int,
    runs: int,
    neighbouring: str,
    seed: int | None,
    progress: bool = False,
    device: DeviceName | torch.device = "cpu",
) -> dict[str, Any]:
    """Draw the canaries and R runs, release, fit the attack (a network on ``device``), score: the
    shared experiment."""
    device = resolve_device(device)
    n_individuals = population.n_individuals
    m = check_positive_int("canaries", canaries, minimum=1, maximum=n_individuals - 1)
    members = check_positive_int("members", members)
    relation = resolve_neighbouring(neighbouring, defense)
    seed, seeds = audit_seeds(seed)
    design_rng = np.random.default_rng(seeds["design"])
    canary_index = np.sort(design_rng.choice(n_individuals, size=m, replace=False))
    prior = CanaryPrior(n_individuals, canary_index, members, relation)
    b, inclusion = prior.draw(runs, design_rng)
    mechanism = release_mechanism(population.genotypes, defense.composition)
    releases = sample_releases(mechanism, defense, b, torch_generator(seeds["release"]))
    known_size = members if relation == "replace" else members + m // 2
    knowledge = attack_knowledge(population, prior, defense, known_size)
    fitted = fit_attack(attack, knowledge, seeds["attack"], progress, device)
    scores = check_scores(fitted.name, fitted.score(population.genotypes[canary_index], releases), (runs, m))
    design = {
        "individuals": n_individuals,
        "attributes": population.n_attributes,
        "composition": defense.composition,
        "release_outputs": mechanism.n_outputs,
        "canaries": m,
        "canary_ids": population.ids[canary_index].tolist(),
        "members": members,
        "neighbouring": relation,
        "dataset_size": (
            f"exactly {members} (included canaries replace non-canary members)"
            if relation == "replace"
            else f"{members} non-canary members + the included canaries"
        ),
        "inclusion_probability": 0.5,
        "runs": runs,
        "included_canaries_per_run_mean": float(inclusion.sum(axis=1).mean()),
    }
    shadow = (
        "shadow releases (if the attack simulates any) follow the audit design - same canaries, fresh "
        "inclusions and fillers - with seeds independent of the audited releases"
    )
    return {
        "seed": seed,
        "seeds": seeds,
        "scores": scores,
        "inclusion": inclusion,
        "design": design,
        "attack": attack_record(fitted, knowledge, seeds["attack"], shadow),
        "device": str(device),
    }


def _result(
    mode: str,
    experiment: dict[str, Any],
    defense: Defense,
    bounds: tuple[float, float],
    confidence: float,
    delta: float,
    method: dict[str, Any],
    tradeoff: dict[str, Any] | None,
) -> MechanismAuditResult:
    """The record; ``bounds`` = (epsilon_lb, epsilon_ceiling), ``tradeoff`` the diagnostics' curve."""
    relation = experiment["design"]["neighbouring"]
    scores, inclusion = experiment["scores"], experiment["inclusion"]
    mixed = 0 < inclusion.sum() < inclusion.size
    diagnostics = {"canary_roc": roc_summary(scores.ravel(), inclusion.ravel()).to_dict()} if mixed else {}
    if tradeoff is not None:
        diagnostics["tradeoff"] = tradeoff
    return MechanismAuditResult(
        mode=mode,
        epsilon_lb=float(bounds[0]),
        epsilon_ceiling=float(bounds[1]),
        is_lower_bound=True,
        interpretation=(
            f"with confidence {confidence:g}, the release is not (eps, {delta:g})-DP under the {relation} "
            "relation for any eps < epsilon_lb"
        ),
        confidence=confidence,
        delta=delta,
        claimed=claimed_guarantee(defense),
        defense=defense.describe(),
        attack=experiment["attack"],
        design=experiment["design"],
        method=method,
        diagnostics=diagnostics,
        seed=experiment["seed"],
        seeds=experiment["seeds"],
        device=experiment["device"],
    )


def one_run_mechanism_audit(
    population: Population,
    defense: Defense,
    attack: str | Attack,
    *,
    canaries: int,
    members: int,
    confidence: float = 0.95,
    delta: float | None = None,
    neighbouring: str = "auto",
    seed: int | None = 0,
    progress: bool = False,
    device: DeviceName | torch.device = "cpu",
) -> MechanismAuditResult:
    """One-run canary audit of ``defense`` (Steinke, Nasr, Jagielski, arXiv:2305.08846); module docstring.

    Args:
        population: the K individuals (canaries and pool) and the reference panel.
        defense: the noise law under audit (built for ``members`` members).
        attack: registry name or an unfitted :class:`~bngp.attacks.base.Attack`.
        canaries: m >= 2 canaries, each included with probability 1/2.
        members: n, the dataset size (``replace``) or its non-canary part (``add-remove``).
        confidence: 1 - beta.
        delta: delta of the bound (default: the defense's claimed delta, 0 without a claim).
        neighbouring: ``"auto"`` (the defense's relation, else replace), ``"replace"`` or
            ``"add-remove"``.
        seed: the audit seed; every random stream is derived from it.
        progress: a line on stderr when the releases are drawn and the attack is being fitted.
        device: where an attack that trains a network (the Bayesian attacker) trains; the
            releases and the other attacks stay on the CPU (:mod:`bngp.device`).
    """
    check_positive_int("canaries", canaries, minimum=2)
    confidence = check_confidence(confidence)
    delta = resolve_delta(delta, defense)
    experiment = _experiment(
        population, defense, attack, canaries=canaries, members=members, runs=1, neighbouring=neighbouring, seed=seed,
        progress=progress, device=device,
    )
    inclusion = experiment["inclusion"][0]
    included = int(inclusion.sum())
    if included in (0, inclusion.size):
        state = "included" if included else "excluded"
        raise DataFormatError(
            f"all {inclusion.size} canaries were {state} in the audited release (probability 2^(1-m)); "
            "use more canaries or another seed."
        )
    scores = experiment["scores"][0]

    def bound(values: np.ndarray) -> Any:
        return one_run_search(values, inclusion, confidence=confidence, delta=delta, seed=experiment["seeds"]["ties"])

    result = bound(scores)
    fdp = fdp_one_run_search(scores, inclusion, confidence=confidence, delta=delta if delta > 0 else 1e-5,
                             seed=experiment["seeds"]["ties"])
    method = {"name": "one-run (steinke-nasr-jagielski 2023)", "one_run": result.to_dict(),
              "fdp_one_run": fdp.to_dict()}
    tradeoff = {"scores": f"the {inclusion.size} canary scores of the one release", "is_test": False,
                **empirical_tradeoff(scores, inclusion, confidence=confidence).to_dict()}
    ceiling = bound(perfect_scores(inclusion)).epsilon_lb
    return _result("one-run", experiment, defense, (result.epsilon_lb, ceiling), confidence, delta, method, tradeoff)


def _per_canary(scores: np.ndarray, inclusion: np.ndarray, confidence: float, delta: float) -> list[Any]:
    """The Clopper-Pearson record of every canary at ``confidence`` (None where the canary was in
    every run or in none): the R (score, S_ri) pairs of canary i are i.i.d. (Kairouz, Oh,
    Viswanath 2015; Jagielski, Ullman, Oprea 2020; :func:`bngp.audit.many_run_audit`)."""
    runs = inclusion.shape[0]
    return [
        many_run_audit(scores[:, i], inclusion[:, i], confidence=confidence, delta=delta,
                       strategy="bonferroni") if 0 < inclusion[:, i].sum() < runs else None
        for i in range(inclusion.shape[1])
    ]


def _best_canary(records: list[Any]) -> tuple[int | None, float]:
    """(index, epsilon_lb) of the audited canary with the largest bound (the first of equal
    bounds); (None, 0) when no canary was audited."""
    audited = [i for i, record in enumerate(records) if record is not None]
    if not audited:
        return None, 0.0
    top = max(audited, key=lambda i: records[i].epsilon_lb)
    return top, records[top].epsilon_lb


def _many_run_method(experiment: dict[str, Any], records: list[Any], best: tuple[int | None, float],
                     pooled_result: Any, ceilings: tuple[float, float], beta: float) -> dict[str, Any]:
    """The ``method`` record of a many-run audit; ``best`` = :func:`_best_canary` of ``records``,
    ``ceilings`` = (per-canary, pooled)."""
    ids = experiment["design"]["canary_ids"]
    best_canary = best[0]
    m = len(records)
    return {
        "name": "many-run: max(per-canary clopper-pearson, pooled one-run), beta/2 each",
        "union_bound": (
            f"beta/2 for the pooled one-run bound; beta/2 shared by the {m} per-canary clopper-pearson audits "
            f"(bonferroni, error {beta / (2.0 * m):.3g} each)"
        ),
        "clopper_pearson_epsilon_lb": best[1],
        "clopper_pearson_epsilon_ceiling": ceilings[0],
        "clopper_pearson_best_canary": None if best_canary is None else ids[best_canary],
        "pooled_one_run_epsilon_lb": pooled_result.epsilon_lb,
        "pooled_one_run_epsilon_ceiling": ceilings[1],
        "per_canary": [
            {"canary": ids[i], "epsilon_lb": 0.0, "skipped": True} if record is None
            else {"canary": ids[i], **record.to_dict()}
            for i, record in enumerate(records)
        ],
        "pooled_one_run": pooled_result.to_dict(),
    }


def many_run_mechanism_audit(
    population: Population,
    defense: Defense,
    attack: str | Attack,
    *,
    canaries: int,
    members: int,
    runs: int,
    confidence: float = 0.95,
    delta: float | None = None,
    neighbouring: str = "auto",
    seed: int | None = 0,
    progress: bool = False,
    device: DeviceName | torch.device = "cpu",
) -> MechanismAuditResult:
    """Many-run canary audit over ``runs`` independent releases; module docstring.

    epsilon_lb is the larger of the per-canary Clopper-Pearson bound (Bonferroni over the m
    canaries, error beta / 2 in total) and the pooled one-run bound over the R m inclusion
    bits (error beta / 2).  Arguments as :func:`one_run_mechanism_audit`, plus ``runs`` (R >= 2).
    """
    runs = check_positive_int("runs", runs, minimum=2)
    confidence = check_confidence(confidence)
    delta = resolve_delta(delta, defense)
    experiment = _experiment(
        population, defense, attack, canaries=canaries, members=members, runs=runs, neighbouring=neighbouring, seed=seed,
        progress=progress, device=device,
    )
    scores, inclusion = experiment["scores"], experiment["inclusion"]
    beta = 1.0 - confidence
    per_canary_confidence = 1.0 - beta / (2.0 * inclusion.shape[1])

    def pooled(values: np.ndarray) -> Any:
        return one_run_search(values.ravel(), inclusion.ravel(), confidence=1.0 - beta / 2.0, delta=delta,
                              seed=experiment["seeds"]["ties"])

    records = _per_canary(scores, inclusion, per_canary_confidence, delta)
    best_canary, best_value = _best_canary(records)
    pooled_result = pooled(scores)
    perfect = perfect_scores(inclusion)
    canary_ceiling = _best_canary(_per_canary(perfect, inclusion, per_canary_confidence, delta))[1]
    pooled_ceiling = pooled(perfect).epsilon_lb
    tradeoff = None
    if best_canary is not None:
        tradeoff = {
            "scores": f"the {runs} scores of canary {experiment['design']['canary_ids'][best_canary]} (one per "
                      f"release, independent runs), at its confidence 1 - beta/(2 m) = {per_canary_confidence:.6g}",
            "is_test": True,
            **empirical_tradeoff(scores[:, best_canary], inclusion[:, best_canary],
                                 confidence=per_canary_confidence).to_dict(),
        }
    method = _many_run_method(experiment, records, (best_canary, best_value), pooled_result,
                              (canary_ceiling, pooled_ceiling), beta)
    bounds = (max(best_value, pooled_result.epsilon_lb), max(canary_ceiling, pooled_ceiling))
    return _result("many-run", experiment, defense, bounds, confidence, delta, method, tradeoff)
