"""The attack x defense evaluation harness (arXiv:2410.07414, section 5; App. L.9).

For one population, membership prior and defense:
1. draw R evaluation memberships b ~ sigma and their releases x = clip(f(D) + xi, 0, 1);
2. set every requested attack up with exactly the knowledge it is defined to have (shadow
   releases it simulates itself with seeds independent of the evaluation draws; the
   reference panel; the defense's noise law for the optimal LRT) - never the evaluation labels;
3. score all K individuals against every release: scores (R, K), labels b (R, K);
4. record per attack (:class:`bngp.evaluation_record.AttackResult`) the AUC mean and std over
   releases, TPR at FPR 10%/1%/0.1%, membership advantage, Bayes-weighted advantage, its
   knowledge statement, orientation (and the AUC of the raw statistic's direction, as the paper
   reports it), its own time, the BGP risk (held-out cross-entropy, nats per individual) of
   attacks that output posterior log-odds, the learning curve and regularisation path of attacks
   fitted to convergence, and the strongest attack (a defense is only as private as the
   strongest attack shows);
5. report the utility of the release next to the *data-independent* release t = f(theta),
   the statistic of the prior-mean membership, which does not depend on who is in the dataset
   (AUC exactly 0.5 against every attack): mean |x - f(D)| and mean |t - f(D)|, their ratio
   (the relative error), and the signal retention corr(x - t, f(D) - t) over releases and
   attributes (1 for the exact release, about 0 for a release that keeps nothing of the
   dataset's own signal).  A defense is only useful where it is closer to f(D) than t.

The attacks say what they need from each other (:class:`bngp.attacks.base.Attack`), and the
harness asks them, in the order they are given: an attack that ``pools_other_attacks`` (the
stacked attacker) is fitted last, on every other fitted attack and its scores; one with a
``warm_start_from`` attack fitted before it starts from that fit (the Bayesian attacker from the
``linear`` attack's converged ridge map); one whose ``fitted_together_with`` partner is still to
be fitted offers to fit both from one set of shadow releases (``linear`` and ``whitened`` on a
single release, :meth:`bngp.attacks.linear.LinearAttack.fit_together_with`: the time of both maps
is reported under ``linear``, and ``whitened`` only calibrates and scores).

The attacks that train a network train it on ``device`` (:mod:`bngp.device`); the releases, the
defense's noise and the closed-form attacks stay on the CPU, so the evaluation draws are the same
on every device.  The record says which device was used (``device``: ``"cpu"`` or ``"cuda:0"``).

With ``workers=2`` a helper process (:mod:`bngp.workers`) fits and scores the attacks that build on
no other one, and the first size of the linear maps' learning curve, while this process fits those
that do: the same seeds, knowledge and releases, so the same scores up to rounding.
"""

from __future__ import annotations

import pickle
import sys
import time
import warnings

import numpy as np
import torch

from bngp.attacks.base import Attack, AttackKnowledge, attack_knowledge
from bngp.attacks.composed import for_composition
from bngp.attacks.registry import attack_class, get_attack, parse_attack_names
from bngp.attacks.shadow import ShadowData
from bngp.attacks.training import AttackerTrainingConfig
from bngp.data.population import Population
from bngp.data.priors import MembershipPrior
from bngp.defenses.base import Defense
from bngp.device import DeviceName, resolve_device
from bngp.errors import InputError
from bngp.evaluation_record import AttackResult, EvaluationResult, attack_gap
from bngp.metrics import bgp_risk, binary_entropy, membership_metrics
from bngp.reading import CoordinateSimulator
from bngp.release.sampling import release_mechanism, sample_releases
from bngp.rng import SeedLike, resolve_seed, spawn_seeds, torch_generator
from bngp.workers import Helper, HelperResult, check_workers, open_helper

__all__ = ["evaluate_defense", "utility_record"]


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
        attacker: the training settings of the attacks named in ``attacks`` that train a network
            with them (``trained_by_config``: the Bayesian attacker; default
            :class:`bngp.attacks.training.AttackerTrainingConfig`'s); an instance given in
            ``attacks`` keeps its own.
        workers: 1, every attack fitted in this process one after the other; 2, with a helper
            process (:mod:`bngp.workers`) that fits the attacks that build on no other one while
            this one fits those that do (the same scores up to rounding).  ``seconds`` stays each
            attack's own time, so with 2 they add up to more than the wall time.
    """
    check_workers(workers)
    seed = resolve_seed(seed)
    device = resolve_device(device)
    if releases < 2:
        raise InputError(f"`releases` must be >= 2, got {releases}.")
    mechanism = release_mechanism(population.genotypes, defense.composition)
    knowledge = attack_knowledge(population, prior, defense, n_members,
                                 CoordinateSimulator(population, prior, defense, n_members))
    if isinstance(attacks, str):
        attacks = parse_attack_names(attacks, knowledge)
    eval_seed, *attack_seeds = spawn_seeds(seed, 1 + len(attacks))
    b = prior.sample(releases, np.random.default_rng(eval_seed))
    x = sample_releases(mechanism, defense, b, torch_generator(eval_seed))
    x_hat = mechanism.statistic(torch.as_tensor(b)).double().numpy()
    deviation = np.abs(x - x_hat)
    data_independent = mechanism.statistic(torch.as_tensor(prior.marginals, dtype=torch.float32)[None]).double().numpy()[0]
    instances = _instances(attacks, attacker, knowledge, device)
    described = _described(defense, kappa, deviation)
    seeds = dict(zip(instances, attack_seeds))
    with open_helper(workers, torch.get_num_threads(), preload=(__name__,)) as helper:
        fitted = _Fitting(instances, seeds, knowledge, (population, prior, defense, n_members), x, b, helper,
                          progress).run()
    results = {name: _attack_result(*fitted[name], b, prior) for name in instances}  # the attacks' order
    return EvaluationResult(
        defense=described,
        utility_loss=float(deviation.mean()),
        labels=b.astype(np.int8),
        scores={name: fitted[name][1] for name in instances},
        attacks=results,
        seed=seed,
        releases=releases,
        utility=utility_record(x, x_hat, data_independent),
        notes=_attack_gap_notes(results),
        device=str(device),
        workers=workers,
    )


def _instances(attacks: list[str] | dict[str, Attack], attacker: AttackerTrainingConfig | None,
               knowledge: AttackKnowledge, device: torch.device) -> dict[str, Attack]:
    """The attacks to fit, by name, on the release's view (:func:`bngp.attacks.composed.for_composition`)
    and ``device``, those that pool the others last; named ones are built with ``attacker`` settings
    where they train a network with them."""
    if not isinstance(attacks, dict):
        attacks = {name: get_attack(name, **({"config": attacker} if attack_class(name).trained_by_config else {}))
                   for name in attacks}
    instances = {name: for_composition(attack, knowledge.composition).set_device(device)
                 for name, attack in attacks.items()}
    return dict(sorted(instances.items(), key=lambda item: item[1].pools_other_attacks))


def _described(defense: Defense, kappa: np.ndarray | None, deviation: np.ndarray) -> dict:
    """``defense.describe()``, with the kappa-weighted utility loss of ``deviation`` |x - f(D)| when
    ``kappa`` is given (kappa_j of one copy of f(D) applies to every copy of a composed release)."""
    described = defense.describe()
    if kappa is not None:
        weights = np.asarray(kappa, dtype=np.float64)
        if weights.size != deviation.shape[1]:
            weights = np.tile(weights, defense.composition)
        described["weighted_utility_loss"] = float((deviation * weights).mean())
    return described


_Fitted = tuple[Attack, np.ndarray, float]  # the fitted attack, its scores (R, K), seconds of fit and scoring


class _Fitting:
    """Fit every attack with its seed and score the evaluation releases ``x`` (memberships ``labels``).

    Alone (no ``helper``) in the attacks' order, those that pool the others last.  With a helper
    process (:mod:`bngp.workers`), this process fits the attacks that build on others
    (:attr:`bngp.attacks.base.Attack.builds_on_others`: the linear and whitened maps, fitted
    together, the first two sizes of their learning curve split with the helper; the Bayesian
    attacker, which starts from the linear map; the stacked attacker, which pools them all) while
    the helper fits and scores the others in turn (the first size of the linear curve overtakes
    those still waiting) and scores the pooling attackers' releases with each of them.  Every
    attack gets the same seed, knowledge and releases either way, so its scores are the same (up
    to rounding); an attack that cannot travel to the helper (it does not pickle), or whose fit
    fails there (a class the helper cannot import, a helper process that died; with a warning),
    is fitted here."""

    def __init__(self, instances: dict[str, Attack], seeds: dict[str, int], knowledge: AttackKnowledge,
                 setting: tuple[Population, MembershipPrior, Defense, int | None], x: np.ndarray, labels: np.ndarray,
                 helper: Helper | None, progress: bool) -> None:
        self.instances, self.seeds, self.knowledge, self.setting = instances, seeds, knowledge, setting
        self.x, self.labels, self.helper, self.progress = x, labels, helper, progress
        self.local = [name for name, attack in instances.items() if helper is None or attack.builds_on_others]
        self.pooling = [name for name in self.local if instances[name].pools_other_attacks]
        self.done: dict[str, _Fitted] = {}
        self.pending: dict[str, HelperResult] = {}
        self.pooled_scores: dict[str, dict[str, np.ndarray]] = {name: {} for name in self.pooling}
        self.pooled_seconds = dict.fromkeys(self.pooling, 0.0)
        self.stacking: dict[str, ShadowData] = {}  # drawn once: scored in the helper, fitted on here

    def run(self) -> dict[str, _Fitted]:
        """Every attack fitted and scored, by name."""
        if self.helper is not None:
            self.submit()  # at once: the first size of the linear maps' curve will overtake what still waits
        for name in [name for name in self.local if name not in self.pooling]:  # with those that could not travel
            self.fit_here(name)
        self.collect()
        for name in self.pooling:  # last: they pool every other attack
            self.fit_here(name)
        return self.done

    def _say(self, line: str) -> None:
        if self.progress:
            print(f"[evaluate] {line}", file=sys.stderr, flush=True)

    def submit(self) -> None:
        """Hand the attacks that build on no other one to the helper, with the pooling attackers'
        releases to score."""
        todo = [name for name in self.instances if name not in self.local]
        if not todo:
            return
        self.stacking.update({name: self.instances[name].stacking_releases(self.knowledge, self.seeds[name])
                              for name in self.pooling})
        releases = [self.stacking[name].releases for name in self.pooling]
        for name in todo:
            try:
                self.pending[name] = self.helper.submit(_fit_and_score_remotely, self.instances[name], *self.setting,
                                                        self.seeds[name], self.x, releases)
            except (pickle.PicklingError, TypeError, AttributeError):  # it does not travel: fitted here
                self.local.append(name)
                continue
            self._say(f"{name}: fitting and scoring in the helper process")

    def collect(self) -> None:
        """The helper's fits, scores and pooling scores (a fit that failed there is made here)."""
        for name, result in self.pending.items():
            try:
                attack, scores, seconds, extra = result.result()
            except Exception as exc:  # e.g. a class the helper cannot import, or the helper killed: fitted here
                reason = (str(exc).splitlines() or [""])[0]
                warnings.warn(f"the helper process could not fit `{name}` ({type(exc).__name__}: {reason}); fitting "
                              "it in this process", stacklevel=4)
                self.fit_here(name)
                continue
            for pool, (pool_scores, pool_seconds) in zip(self.pooling, extra):
                self.pooled_scores[pool][name] = pool_scores
                self.pooled_seconds[pool] += pool_seconds
            self.instances[name] = attack
            self.done[name] = (attack, scores, seconds)
            self._say(f"{name}: AUC {membership_metrics(scores, self.labels).auc:.4f} ({seconds:.1f} s in the helper "
                      "process)")
        self.pending.clear()

    def fit_here(self, name: str) -> None:
        """Fit and score ``name`` in this process, with what it needs from the attacks fitted so far."""
        attack = self.instances[name]
        known = None
        if attack.pools_other_attacks:
            attack.use_fitted({other: self.instances[other] for other in self.done}, self.pooled_scores[name],
                              self.stacking.get(name))
            known = {other: fitted[1] for other, fitted in self.done.items()}  # its bases' scores on these releases
        partner = attack.fitted_together_with
        if partner in self.instances and partner not in self.done:
            attack.fit_together_with(self.instances[partner])
        if attack.warm_start_from in self.done:
            attack.start_from(self.done[attack.warm_start_from][0])
        self._say(f"{len(self.done) + 1}/{len(self.instances)} {name}: fitting and scoring")
        _, scores, seconds, _ = _fit_and_score(attack, self.knowledge, self.seeds[name], self.setting[0].genotypes,
                                               self.x, known)
        self.done[name] = (attack, scores, seconds + self.pooled_seconds.get(name, 0.0))
        self._say(f"{name}: AUC {membership_metrics(scores, self.labels).auc:.4f} ({seconds:.1f} s)")


def _fit_and_score(
    attack: Attack,
    knowledge: AttackKnowledge,
    seed: int,
    genotypes: np.ndarray,
    x: np.ndarray,
    base_scores: dict[str, np.ndarray] | None = None,
    stacking_releases: tuple[np.ndarray, ...] = (),
) -> tuple[Attack, np.ndarray, float, list[tuple[np.ndarray, float]]]:
    """Fit ``attack`` and score ``genotypes`` on the releases ``x`` (an attack that pools others with
    the ``base_scores`` of its bases on them); also on each of ``stacking_releases`` (the pooling
    attackers' own releases), each with the seconds it took."""
    started = time.perf_counter()
    attack.fit(knowledge, seed=seed)
    if attack.pools_other_attacks:  # its bases' scores on these releases are known already
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
    knowledge = attack_knowledge(population, prior, defense, n_members,
                                 CoordinateSimulator(population, prior, defense, n_members))
    return _fit_and_score(attack, knowledge, seed, population.genotypes, x, stacking_releases=tuple(stacking_releases))


#: the parts of ``Attack.describe()`` an attack's record carries where the attack has them.
_DESCRIBED = ("fit", "learning_curve", "pooling", "whole_release", "training", "training_curve", "weights",
              "release_view", "reading")


def _attack_result(attack: Attack, scores: np.ndarray, seconds: float, b: np.ndarray,
                   prior: MembershipPrior) -> AttackResult:
    """An attack's record in the evaluation (see the module docstring, step 4)."""
    metrics = membership_metrics(scores, b)
    orientation = int(getattr(attack, "orientation_", 1))
    risk = {}
    if getattr(attack, "log_odds", False):
        risk = {"bgp_risk": bgp_risk(1.0 / (1.0 + np.exp(-scores)), b),
                "prior_entropy": float(np.mean(binary_entropy(prior.marginals)))}
    details = attack.describe()
    return AttackResult(
        **metrics.to_dict(), knowledge=attack.knowledge_statement, seconds=seconds, orientation=orientation,
        raw_auc=metrics.auc if orientation == 1 else 1.0 - metrics.auc, **risk,
        **{key: details[key] for key in _DESCRIBED if key in details},
        orientation_note=getattr(attack, "orientation_note_", None) or None,
    )


def _attack_gap_notes(results: dict[str, AttackResult]) -> tuple[str, ...]:
    """A note (and a warning) when an analytic attack beats the Bayesian attacker
    (:func:`bngp.evaluation_record.attack_gap`); the privacy result is the strongest attack's."""
    gap = attack_gap(results)
    if gap is None or gap[1] <= 0:
        return ()
    best, difference = gap
    message = (
        f"attack gap: `{best}` (AUC {results[best].auc:.3f}) beats the Bayesian attacker "
        f"(AUC {results['bayesian'].auc:.3f}) by {difference:.3f}; the privacy result is the strongest attack's"
    )
    warnings.warn(message, stacklevel=3)
    return (message,)
