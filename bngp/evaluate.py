"""The attack x defense evaluation harness (arXiv:2410.07414, section 5; App. L.9).

For one population, membership prior and defense:
1. draw R evaluation memberships b ~ sigma and their releases x = clip(f(D) + xi, 0, 1);
2. set every requested attack up with exactly the knowledge it is defined to have (shadow
   releases it simulates itself with seeds independent of the evaluation draws; the
   reference panel; the defense's noise law for the optimal LRT) - never the evaluation labels;
3. score all K individuals against every release: scores (R, K), labels b (R, K);
4. report per attack the AUC mean and std over releases, TPR at FPR 10%/1%/0.1%, membership
   advantage, Bayes-weighted advantage, its knowledge statement, orientation (and the AUC of
   the raw statistic's direction, as the paper reports it), wall time, the BGP risk (held-out
   cross-entropy, nats per individual) of attacks that output posterior log-odds, the learning
   curve and regularisation path of attacks fitted to convergence, and the strongest attack
   (a defense is only as private as the strongest attack shows);
5. report the utility of the release next to the *data-independent* release t = f(theta),
   the statistic of the prior-mean membership, which does not depend on who is in the dataset
   (AUC exactly 0.5 against every attack): mean |x - f(D)| and mean |t - f(D)|, their ratio
   (the relative error), and the signal retention corr(x - t, f(D) - t) over releases and
   attributes (1 for the exact release, about 0 for a release that keeps nothing of the
   dataset's own signal).  A defense is only useful where it is closer to f(D) than t.

The stacked attacker (``stacked``) is fitted last and pools every other fitted attack.  When
``linear`` is fitted before ``bayesian`` (as in ``all``), the Bayesian attacker starts from the
linear attack's converged ridge map instead of fitting the same map again (at K = 800,
|Q| = 5000 that fit is about 120-170 s of a single core).  When ``linear`` is fitted before
``whitened`` (as in ``all``) on a single release, both are fitted to convergence on the linear
attack's shadow releases from one decomposition (:meth:`bngp.attacks.linear.LinearAttack.fit_together_with`):
the time of both maps is reported under ``linear``, and ``whitened`` only calibrates and scores.

The attacks that train a network (the Bayesian attacker) train it on ``device``
(:mod:`bngp.device`); the releases, the defense's noise and the closed-form attacks stay on
the CPU, so the evaluation draws are the same on every device.  The record says which device
was used (``device``: ``"cpu"`` or ``"cuda:0"``).

With ``workers=2`` (``bngp evaluate``'s default for a large evaluation on 2 cores or more) a
helper process (:mod:`bngp.workers`) fits and scores the attacks that depend on no other one,
and the first size of the linear maps' learning curve, while this process fits the linear maps,
the Bayesian attacker and the stacked attacker: the same seeds, knowledge and releases, so the
same scores up to rounding (tested), and at K = 800, |Q| = 5000 on the 2-core machine 162-177 s
instead of 260 s (``docs/results.md``, Speed).
"""

from __future__ import annotations

import copy
import pickle
import re
import sys
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from bngp.attacks.base import Attack, AttackKnowledge, attack_knowledge
from bngp.attacks.registry import get_attack, parse_attack_names
from bngp.attacks.composed import for_composition
from bngp.attacks.bayesian import BayesianAttack
from bngp.attacks.training import AttackerTrainingConfig
from bngp.attacks.linear import LinearAttack
from bngp.attacks.shadow import ShadowData
from bngp.attacks.stacking import StackedAttack
from bngp.data.population import Population
from bngp.data.priors import MembershipPrior
from bngp.device import DeviceName, resolve_device
from bngp.errors import DataFormatError, InputError
from bngp.metrics import bgp_risk, binary_entropy, membership_metrics
from bngp.rng import SeedLike, resolve_seed, spawn_seeds, torch_generator
from bngp.defenses.base import Defense
from bngp.release.sampling import release_mechanism, sample_releases
from bngp.workers import Helper, HelperResult, check_workers, open_helper

__all__ = ["EvaluationResult", "evaluate_defense", "utility_record", "check_evaluation_format", "ANALYTIC_ATTACKS",
           "EVALUATION_FORMAT", "EVALUATION_FORMAT_VERSION"]

#: attacks computed in closed form from the release (their best is compared with the Bayesian attacker).
ANALYTIC_ATTACKS = ("lrt", "adaptive-lrt", "optimal-lrt", "score", "homer", "reconstruction")

#: the ``format`` of an EVAL.json record, named as bngp's other files are ("bngp-run-1",
#: "bngp-sweep-1"): ``bngp-evaluation-N``, N raised whenever a reader of N - 1 could not read it.
EVALUATION_FORMAT_VERSION = 1
EVALUATION_FORMAT = f"bngp-evaluation-{EVALUATION_FORMAT_VERSION}"
_FORMAT_PATTERN = re.compile(r"bngp-evaluation-([0-9]+)")


@dataclass(frozen=True, eq=False)
class EvaluationResult:
    """Scores and metrics of every attack against one defense (the EVAL.json record).

    Frozen: :func:`evaluate_defense` builds it once, complete.  Compared by identity (it holds
    arrays); compare ``to_dict()`` payloads instead.

    Attributes:
        defense: the defense's description (``Defense.describe()``), with
            ``weighted_utility_loss`` when per-attribute weights kappa were given.
        utility_loss: mean |x - f(D)| over releases and attributes.
        labels: memberships b of the evaluation releases, (R, K) int8.
        scores: every attack's scores, (R, K) each, higher = more likely member.
        attacks: every attack's metrics and description (see the module docstring, step 4).
        seed: the evaluation seed.
        releases: R.
        utility: :func:`utility_record` of the releases (step 5).
        notes: warnings about the result (an analytic attack beating the Bayesian attacker).
        device: where the attacks that train a network ran, ``"cpu"`` or ``"cuda:0"``.
        workers: the processes that fitted the attacks (2: with a helper process).
    """

    defense: dict
    utility_loss: float
    labels: np.ndarray
    scores: dict[str, np.ndarray]
    attacks: dict[str, dict]
    seed: int
    releases: int
    utility: dict = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    device: str = "cpu"
    workers: int = 1

    def __post_init__(self) -> None:
        object.__setattr__(self, "notes", tuple(self.notes))
        if set(self.scores) != set(self.attacks):
            raise InputError("`scores` and `attacks` of an evaluation must name the same attacks.")
        shape = np.shape(self.labels)
        if len(shape) != 2 or shape[0] != self.releases:
            raise InputError(f"`labels` must have shape (releases = {self.releases}, K), got {shape}.")
        for name, scores in self.scores.items():
            if np.shape(scores) != shape:
                raise InputError(f"`scores` of `{name}` must have the labels' shape {shape}, got {np.shape(scores)}.")

    @property
    def strongest_attack(self) -> str:
        """The attack with the highest mean AUC."""
        return max(self.attacks, key=lambda name: self.attacks[name]["auc"])

    def to_dict(self) -> dict:
        """The EVAL.json payload, its ``format`` (:data:`EVALUATION_FORMAT`) first (a fresh copy:
        editing it leaves the record unchanged)."""
        strongest = self.strongest_attack
        analytic = [name for name in self.attacks if name in ANALYTIC_ATTACKS]
        payload = {
            "format": EVALUATION_FORMAT,
            "defense": self.defense,
            "utility_loss": self.utility_loss,
            "utility": self.utility,
            "releases": self.releases,
            "seed": self.seed,
            "device": self.device,
            "workers": self.workers,
            "attacks": self.attacks,
            "strongest_attack": {"name": strongest, "auc": self.attacks[strongest]["auc"]},
            "notes": list(self.notes),
        }
        if "bayesian" in self.attacks and analytic:
            best = max(analytic, key=lambda name: self.attacks[name]["auc"])
            payload["attack_gap"] = {
                "best_analytic": best,
                "gap": self.attacks[best]["auc"] - self.attacks["bayesian"]["auc"],
            }
        return copy.deepcopy(payload)


def check_evaluation_format(payload: object, source: str | Path) -> dict:
    """Return ``payload``, an EVAL.json record read from ``source``, if this bngp can read it: its
    ``format`` is :data:`EVALUATION_FORMAT` or absent (a record written before formats were named);
    a newer ``bngp-evaluation-N``, another format or a non-object raises :class:`DataFormatError`."""
    if not isinstance(payload, dict):
        raise DataFormatError(f"{source} is not a bngp evaluation record (a JSON object).")
    written = payload.get("format")
    if written is None or written == EVALUATION_FORMAT:
        return payload
    match = _FORMAT_PATTERN.fullmatch(str(written))
    if match is not None and int(match.group(1)) > EVALUATION_FORMAT_VERSION:
        raise DataFormatError(f"{source} is an evaluation of format {written}, newer than this bngp reads "
                              f"({EVALUATION_FORMAT}); upgrade bngp to read it.")
    raise DataFormatError(f"{source} is not a bngp evaluation record (format {written!r}).")


def utility_record(x: np.ndarray, x_hat: np.ndarray, data_independent: np.ndarray) -> dict:
    """Utility of releases ``x`` (R, Q) of statistics ``x_hat`` (R, Q) against the data-independent
    release ``data_independent`` (Q,) (see the module docstring, step 5)."""
    loss = float(np.abs(x - x_hat).mean())
    baseline = float(np.abs(data_independent - x_hat).mean())
    kept, signal = (x - data_independent).ravel(), (x_hat - data_independent).ravel()
    spread = float(np.std(kept) * np.std(signal))
    retention = float(np.mean((kept - kept.mean()) * (signal - signal.mean())) / spread) if spread > 0 else 0.0
    if abs(loss - baseline) <= 1e-9 * max(baseline, 1e-12) and abs(retention) < 1e-9:
        verdict = "the data-independent release itself: it keeps none of the dataset's own signal"
    elif loss < baseline:
        verdict = "closer to f(D) than the data-independent release"
    else:
        verdict = "dominated by the data-independent release: no closer to f(D), and it can only leak more"
    return {
        "utility_loss": loss,
        "data_independent_utility_loss": baseline,
        "relative_error": loss / baseline if baseline > 0 else float("inf"),
        "signal_retention": retention,
        "verdict": verdict,
    }


def evaluate_defense(
    population: Population,
    prior: MembershipPrior,
    defense: Defense,
    attacks: str | list[str] | dict[str, Attack],
    *,
    releases: int = 50,
    seed: SeedLike = 0,
    n_members: int | None = None,
    kappa: np.ndarray | None = None,
    progress: bool = False,
    device: DeviceName | torch.device = "cpu",
    attacker: AttackerTrainingConfig | None = None,
    workers: int = 1,
) -> EvaluationResult:
    """Evaluate ``attacks`` (names or fitted-able instances) against ``defense``.

    Args:
        population: individuals and reference panel.
        prior: membership prior (e.g. n of K uniformly).
        defense: the noise law under test.
        attacks: a comma-separated string of names (``all`` = every attack whose knowledge
            requirements this evaluation meets), a list of names, or ``{name: Attack}``.
        releases: R, number of independent evaluation releases (AUC std is over these).
        seed: evaluation seed (int, None or Generator: :func:`bngp.rng.resolve_seed`, the int
            recorded); attack set-up uses seeds derived from it, independent of the evaluation draws.
        n_members: dataset size n known to the attacks (None when the prior has no fixed n).
        kappa: per-attribute weights for the reported weighted utility loss (optional).
        progress: one line per attack on stderr as it is fitted and scored.
        device: "auto", "cpu", "cuda" or a ``torch.device``: where the attacks that train a
            network (the Bayesian attacker) train and score (:meth:`bngp.attacks.base.Attack.set_device`,
            applied to every attack, those given as instances included); the others run on the CPU.
        attacker: the training settings of a Bayesian attacker named in ``attacks`` (default
            :class:`bngp.attacks.training.AttackerTrainingConfig`'s: up to 1,500 steps with early
            stopping); an instance given in ``attacks`` keeps its own.
        workers: 1, every attack fitted in this process one after the other; 2, with a helper
            process (:mod:`bngp.workers`) that fits the attacks independent of the others while
            this one fits the linear maps, the Bayesian attacker and the stacked attacker (the
            same scores up to rounding, on two cores in about the time of the longer share; the
            command's default on a machine of 2 cores or more).  ``seconds`` stays each attack's
            own time, so with 2 they add up to more than the wall time.
    """
    check_workers(workers)
    seed = resolve_seed(seed)
    device = resolve_device(device)
    if releases < 2:
        raise InputError(f"`releases` must be >= 2, got {releases}.")
    mechanism = release_mechanism(population.genotypes, defense.composition)
    knowledge = attack_knowledge(population, prior, defense, n_members)
    if isinstance(attacks, str):
        attacks = parse_attack_names(attacks, knowledge)
    eval_seed, *attack_seeds = spawn_seeds(seed, 1 + len(attacks))
    b = prior.sample(releases, np.random.default_rng(eval_seed))
    x = sample_releases(mechanism, defense, b, torch_generator(eval_seed))
    x_hat = mechanism.statistic(torch.as_tensor(b)).double().numpy()
    deviation = np.abs(x - x_hat)
    data_independent = mechanism.statistic(torch.as_tensor(prior.marginals, dtype=torch.float32)[None]).double().numpy()[0]
    if not isinstance(attacks, dict):
        attacks = {name: BayesianAttack(attacker) if name == "bayesian" else get_attack(name) for name in attacks}
    instances = {name: for_composition(attack, knowledge.composition).set_device(device) for name, attack in attacks.items()}
    instances = dict(sorted(instances.items(), key=lambda item: isinstance(item[1], StackedAttack)))  # stacking last
    described = defense.describe()
    if kappa is not None:
        weights = np.asarray(kappa, dtype=np.float64)
        if weights.size != deviation.shape[1]:  # kappa_j of one copy of f(D) applies to every copy
            weights = np.tile(weights, defense.composition)
        described["weighted_utility_loss"] = float((deviation * weights).mean())
    seeds = dict(zip(instances, attack_seeds))
    with open_helper(workers, torch.get_num_threads(), preload=(__name__,)) as helper:
        fitted = _fit_and_score_all(instances, seeds, knowledge, (population, prior, defense, n_members), x, b, helper,
                                    progress)
    entries: dict[str, dict] = {}
    all_scores: dict[str, np.ndarray] = {}
    for name in instances:  # the attacks' order, wherever they ran
        attack, scores, seconds = fitted[name]
        entries[name] = _entry(attack, scores, seconds, b, prior)
        all_scores[name] = scores
    return EvaluationResult(
        defense=described,
        utility_loss=float(deviation.mean()),
        labels=b.astype(np.int8),
        scores=all_scores,
        attacks=entries,
        seed=seed,
        releases=releases,
        utility=utility_record(x, x_hat, data_independent),
        notes=_attack_gap_notes(entries),
        device=str(device),
        workers=workers,
    )


_Fitted = tuple[Attack, np.ndarray, float]  # the fitted attack, its scores (R, K), seconds of fit and scoring


def _fit_and_score_all(
    instances: dict[str, Attack],
    seeds: dict[str, int],
    knowledge: AttackKnowledge,
    setting: tuple[Population, MembershipPrior, Defense, int | None],
    x: np.ndarray,
    labels: np.ndarray,
    helper: Helper | None,
    progress: bool,
) -> dict[str, _Fitted]:
    """Fit every attack with its seed and score the evaluation releases ``x`` (memberships ``labels``).

    Alone (no ``helper``) in the attacks' order, stacking last.  With a helper process
    (:mod:`bngp.workers`), this process fits the attacks that build on each other (the linear and
    whitened maps, fitted together, the first two sizes of their learning curve split with the
    helper; the Bayesian attacker, which starts from the linear map; the stacked attacker, which
    pools them all) while the helper fits and scores the others in turn (the first size of the
    linear curve overtakes those still waiting) and scores the stacked attacker's releases with
    each of them.  Every attack gets the same seed, knowledge and releases either way, so its
    scores are the same (up to rounding);
    an attack that cannot travel to the helper (it does not pickle), or whose fit fails there (a
    class the helper cannot import, a helper process that died; with a warning), is fitted here."""
    population = setting[0]
    local = [name for name, attack in instances.items() if helper is None or _builds_on_others(attack)]
    stacked = [name for name in local if isinstance(instances[name], StackedAttack)]
    done: dict[str, _Fitted] = {}
    pending: dict[str, HelperResult] = {}
    stacking_scores: dict[str, dict[str, np.ndarray]] = {name: {} for name in stacked}
    stacking_seconds = dict.fromkeys(stacked, 0.0)
    stacking: dict[str, ShadowData] = {}  # drawn once: scored in the helper, fitted on here

    def submit() -> None:
        todo = [name for name in instances if name not in local]
        if not todo:
            return
        stacking.update({name: instances[name].stacking_releases(knowledge, seeds[name]) for name in stacked})
        releases = [stacking[name].releases for name in stacked]
        for name in todo:
            attack = instances[name]
            try:
                pending[name] = helper.submit(_fit_and_score_remotely, attack, *setting, seeds[name], x, releases)
            except (pickle.PicklingError, TypeError, AttributeError):  # it does not travel: fitted here
                local.append(name)
                continue
            if progress:
                print(f"[evaluate] {name}: fitting and scoring in the helper process", file=sys.stderr, flush=True)

    def collect() -> None:
        for name, result in pending.items():
            try:
                attack, scores, seconds, extra = result.result()
            except Exception as exc:  # e.g. a class the helper cannot import, or the helper killed: fitted here
                reason = (str(exc).splitlines() or [""])[0]
                warnings.warn(f"the helper process could not fit `{name}` ({type(exc).__name__}: {reason}); fitting "
                              "it in this process", stacklevel=4)
                fit_here(name)
                continue
            for stack, (stack_scores, stack_seconds) in zip(stacked, extra):
                stacking_scores[stack][name] = stack_scores
                stacking_seconds[stack] += stack_seconds
            instances[name] = attack
            done[name] = (attack, scores, seconds)
            if progress:
                print(f"[evaluate] {name}: AUC {membership_metrics(scores, labels).auc:.4f} ({seconds:.1f} s in the "
                      "helper process)", file=sys.stderr, flush=True)
        pending.clear()

    def fit_here(name: str) -> None:
        attack = instances[name]
        known = None
        if isinstance(attack, StackedAttack):
            attack.use_fitted({other: instances[other] for other in done}, stacking_scores[name], stacking.get(name))
            known = {other: fitted[1] for other, fitted in done.items()}  # its bases' scores on these releases
        elif name == "linear" and isinstance(attack, LinearAttack) and "whitened" in instances and "whitened" not in done:
            attack.fit_together_with(instances["whitened"])  # one decomposition for both maps, on linear's draws
        linear = done.get("linear", (None,))[0]
        if isinstance(attack, BayesianAttack) and isinstance(linear, LinearAttack):
            attack.use_ridge_fit(linear.fit_, linear.learning_curve_)  # one converged ridge fit, not two
        if progress:
            print(f"[evaluate] {len(done) + 1}/{len(instances)} {name}: fitting and scoring", file=sys.stderr, flush=True)
        _, scores, seconds, _ = _fit_and_score(attack, knowledge, seeds[name], population.genotypes, x, known)
        done[name] = (attack, scores, seconds + stacking_seconds.get(name, 0.0))
        if progress:
            print(f"[evaluate] {name}: AUC {membership_metrics(scores, labels).auc:.4f} ({seconds:.1f} s)",
                  file=sys.stderr, flush=True)

    if helper is not None:
        submit()  # at once: the first size of the linear maps' curve will overtake what still waits
    for name in [name for name in local if name not in stacked]:  # with those that could not travel
        fit_here(name)
    collect()
    for name in stacked:  # last: they pool every other attack
        fit_here(name)
    return done


def _builds_on_others(attack: Attack) -> bool:
    """Whether the evaluation fits ``attack`` with other attacks' fits (the linear maps, the Bayesian
    attacker's warm start, the stacked attacker's pool): those stay in the evaluation's process."""
    return isinstance(attack, (LinearAttack, BayesianAttack, StackedAttack))


def _fit_and_score(
    attack: Attack,
    knowledge: AttackKnowledge,
    seed: int,
    genotypes: np.ndarray,
    x: np.ndarray,
    base_scores: dict[str, np.ndarray] | None = None,
    stacking_releases: tuple[np.ndarray, ...] = (),
) -> tuple[Attack, np.ndarray, float, list[tuple[np.ndarray, float]]]:
    """Fit ``attack`` and score ``genotypes`` on the releases ``x`` (a stacked attacker with the
    ``base_scores`` of its bases on them); also on each of ``stacking_releases`` (the stacked
    attackers' own releases), each with the seconds it took."""
    started = time.perf_counter()
    attack.fit(knowledge, seed=seed)
    if isinstance(attack, StackedAttack):  # its bases' scores on these releases are known already
        scores = attack.score(genotypes, x, base_scores=base_scores)
    else:
        scores = attack.score(genotypes, x)
    seconds = time.perf_counter() - started
    extra = []
    for releases in stacking_releases:
        started = time.perf_counter()
        extra.append((attack.score(genotypes, releases), time.perf_counter() - started))
    return attack, scores, seconds, extra


def _fit_and_score_remotely(
    attack: Attack,
    population: Population,
    prior: MembershipPrior,
    defense: Defense,
    n_members: int | None,
    seed: int,
    x: np.ndarray,
    stacking_releases: list[np.ndarray],
) -> tuple[Attack, np.ndarray, float, list[tuple[np.ndarray, float]]]:
    """:func:`_fit_and_score` in a helper process, from the knowledge the evaluation gives every attack."""
    knowledge = attack_knowledge(population, prior, defense, n_members)
    return _fit_and_score(attack, knowledge, seed, population.genotypes, x, stacking_releases=tuple(stacking_releases))


def _entry(attack: Attack, scores: np.ndarray, seconds: float, b: np.ndarray, prior: MembershipPrior) -> dict:
    """An attack's record in the evaluation (see the module docstring, step 4)."""
    metrics = membership_metrics(scores, b)
    orientation = int(getattr(attack, "orientation_", 1))
    entry = {
        **metrics.to_dict(),
        "knowledge": attack.knowledge_statement,
        "seconds": seconds,
        "orientation": orientation,
        "raw_auc": metrics.auc if orientation == 1 else 1.0 - metrics.auc,
    }
    if getattr(attack, "log_odds", False):
        entry["bgp_risk"] = bgp_risk(1.0 / (1.0 + np.exp(-scores)), b)
        entry["prior_entropy"] = float(np.mean(binary_entropy(prior.marginals)))
    details = attack.describe()
    for key in ("fit", "learning_curve", "pooling", "whole_release", "training", "training_curve", "weights", "release_view"):
        if key in details:
            entry[key] = details[key]
    note = getattr(attack, "orientation_note_", None)
    if note:
        entry["orientation_note"] = note
    return entry


def _attack_gap_notes(entries: dict[str, dict]) -> tuple[str, ...]:
    """A note (and a warning) when an analytic attack beats the Bayesian attacker: the Bayesian
    attacker approximates the posterior, the optimal attack (arXiv:2410.07414, Lemma 3), so a
    stronger analytic attack means it is under-trained; the privacy result is the strongest attack's."""
    analytic = [name for name in entries if name in ANALYTIC_ATTACKS]
    if "bayesian" not in entries or not analytic:
        return ()
    best = max(analytic, key=lambda name: entries[name]["auc"])
    gap = entries[best]["auc"] - entries["bayesian"]["auc"]
    if gap <= 0:
        return ()
    message = (
        f"attack gap: `{best}` (AUC {entries[best]['auc']:.3f}) beats the Bayesian attacker "
        f"(AUC {entries['bayesian']['auc']:.3f}) by {gap:.3f}; the privacy result is the strongest attack's"
    )
    warnings.warn(message, stacklevel=3)
    return (message,)
