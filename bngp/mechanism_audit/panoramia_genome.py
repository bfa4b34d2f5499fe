"""PANORAMIA for genomic releases: generated non-members instead of retraining.

PANORAMIA (Kazmi, Lautraite, Akbari et al., "PANORAMIA: Privacy Auditing of Machine Learning
Models without Retraining", arXiv:2402.09477) audits one trained model with real members and
non-members produced by a generator.  Here the "model" is one release x = clip(f(D) + xi, 0, 1)
of the allele frequencies of a dataset D of n individuals drawn uniformly from the population.
Who is where (D, the audit pool, the generator's panel, the real non-members and both audits'
labels) is :mod:`bngp.mechanism_audit.panoramia_sets`; the baseline b(y) and the release-aware
MIA a(y, x) are :mod:`bngp.mechanism_audit.panoramia_classifiers`.  The generator G is a
haplotype-copying model (Li & Stephens 2003,
:class:`~bngp.mechanism_audit.haplotype_model.HaplotypeCopyingModel`) fitted on the panel.

A defense that perturbs c > 1 copies of f(D) (arXiv:2410.07414, App. L.6) releases c |Q|
outputs; only the attack's score s(y, x) reads the release, and it reads all of it (the attack
runs on the tiled attributes, :class:`bngp.attacks.composed.TiledAttack`).

Generated non-members: a measurement.  :func:`bngp.audit.panoramia_audit` turns the MIA's and
the baseline's scores on the generated audit into c_lb, {c+eps}_lb and
eps_tilde = max(0, {c+eps}_lb - c_lb) (arXiv:2402.09477, Prop. 1-2, Cor. 1-2; beta/2 per test,
Bonferroni over each score's thresholds).  eps_tilde is not a lower bound: if G's closeness c
(e^-c P_D <= P_G) equals c_lb, the release is not eps_tilde-DP (sec. 4.2).  The baseline is the
safeguard: a generator easy to tell from real individuals gives a large c_lb and leaves little
eps_tilde.

Real non-members: the companion lower bound.  The same MIA scores the companion audit;
``panoramia_audit(a, t, None)`` is the real-member/real-non-member case (c = 0 is known;
arXiv:2402.09477, Prop. 2 with c = 0): for the r points above a threshold, tp of them members,

    eps_lb = max_thresholds sup{eps : P[Bin(r, e^eps / (1 + e^eps)) >= tp] < beta / T}

with T the distinct thresholds, a lower bound on eps at confidence 1 - beta under replacement
(the one-run theorem with abstentions, Steinke, Nasr, Jagielski, arXiv:2305.08846, Thm. 3.1;
its validity for this design: :mod:`bngp.mechanism_audit.panoramia_sets`).

The design's ceiling.  Each number is computed again for a perfect MIA (score 1 for every member
of its audit set, 0 otherwise; :mod:`bngp.audit.ceiling`) with the same labels (and, for
eps_tilde, the same baseline scores).  With r members among the audit points and two
thresholds, the companion's ceiling is sup{eps : (e^eps / (1 + e^eps))^r < beta / 2}.  The
record's ``diagnostics.tradeoff`` is the empirical trade-off curve of the MIA scores behind the
reported number: descriptive, since the audit points of one release are not independent runs.

What is reported.  With a companion (R > 0), ``epsilon_lb`` is the companion's lower bound
(``is_lower_bound`` True, comparable with a claim stated at delta = 0 under replacement); with
``real_nonmembers=0`` it is eps_tilde, flagged as a measurement.  Both numbers are in the
record's ``panoramia`` summary with their meaning, and their full records under ``method``; each
is a statement at confidence 1 - beta.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from bngp.attacks.base import Attack, AttackKnowledge, attack_knowledge
from bngp.audit import PanoramiaResult, empirical_tradeoff, panoramia_audit, perfect_scores, roc_summary
from bngp.audit.inputs import check_confidence
from bngp.data.population import Population
from bngp.data.priors import UniformSubsetPrior
from bngp.defenses.base import Defense
from bngp.device import DeviceName, resolve_device
from bngp.errors import DataFormatError, InputError
from bngp.mechanism_audit.common import attack_record, check_scores, fit_attack
from bngp.mechanism_audit.haplotype_model import HaplotypeCopyingModel, compare_genotypes
from bngp.mechanism_audit.panoramia_classifiers import (
    fit_classifier,
    genotype_features,
    mia_log_odds,
    out_of_fold_log_odds,
)
from bngp.mechanism_audit.panoramia_sets import PanoramiaDesign, RealNonmembers, panoramia_design
from bngp.mechanism_audit.results import MechanismAuditResult, claimed_guarantee
from bngp.release.sampling import Mechanism, release_mechanism, sample_releases
from bngp.rng import torch_generator

if TYPE_CHECKING:
    import torch
    from sklearn.pipeline import Pipeline

__all__ = ["panoramia_mechanism_audit"]


def _attack_scores(attack: Attack, individuals: np.ndarray, release: np.ndarray) -> np.ndarray:
    """(n,) the fitted attack's membership scores of ``individuals`` on the one release."""
    try:
        scores = attack.score(individuals, release)
    except DataFormatError as exc:
        raise InputError(
            f"PANORAMIA scores generated individuals, which attack `{attack.name}` cannot ({exc}); "
            "use an attack computed from the release, e.g. score, lrt, homer or optimal-lrt."
        ) from exc
    return check_scores(attack.name, scores, (1, individuals.shape[0]))[0]


_GENERATED_MEANING = (
    "measurement, not a lower bound: eps_tilde = {c+eps}_lb - c_lb with generated non-members; if the "
    "generator's closeness c equals c_lb, the release is not eps_tilde-DP (arXiv:2402.09477 sec. 4.2)"
)
_REAL_MEANING = (
    "lower bound on eps (datasets of n, one replacement) with real held-out non-members (c = 0, "
    "arXiv:2402.09477 Prop. 2; arXiv:2305.08846 Thm. 3.1), valid at the stated confidence"
)


@dataclass(frozen=True)
class _AuditSet:
    """One audit set's labels (True = member), scores and statement.

    Attributes:
        labels: (size,) membership of the audit points.
        baseline_scores: b(y) of the points.
        attack_scores: s(y, x), the attack's scores on the release.
        mia_scores: a(y, x), the MIA's log-odds.
        result: :func:`bngp.audit.panoramia_audit` of the MIA scores.
        ceiling: the same statement's eps for a perfect MIA.
    """

    labels: np.ndarray
    baseline_scores: np.ndarray
    attack_scores: np.ndarray
    mia_scores: np.ndarray
    result: PanoramiaResult
    ceiling: float


def _check_generator(generator: HaplotypeCopyingModel | None) -> HaplotypeCopyingModel:
    """``generator``, or a default :class:`HaplotypeCopyingModel` for None."""
    if generator is None:
        return HaplotypeCopyingModel()
    if not isinstance(generator, HaplotypeCopyingModel):
        raise InputError(f"`generator` must be a HaplotypeCopyingModel, got {type(generator).__name__}.")
    return generator


def _generator_points(population: Population, design: PanoramiaDesign,
                      generator: HaplotypeCopyingModel) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Fit G on the panel and draw from it (``seeds.generator``): returns the classifiers' training
    individuals (training members, then as many generated), the generated ones, and the generated
    audit's points (the next audit-pool member where ``design.labels``, else a draw of G)."""
    genotypes, labels = population.genotypes, design.labels
    n_real = int(labels.sum())
    generator_rng = np.random.default_rng(design.seeds["generator"])
    generator.fit(genotypes[design.generator_panel], seed=generator_rng)
    synthetic_training = generator.sample(design.training_members.size, seed=generator_rng)
    audit_points = np.empty((labels.size, population.n_attributes), dtype=np.uint8)
    audit_points[labels] = genotypes[design.audit_pool[:n_real]]
    audit_points[~labels] = generator.sample(labels.size - n_real, seed=generator_rng)
    training = np.concatenate([genotypes[design.training_members], synthetic_training])
    return training, synthetic_training, audit_points


def _release_and_attack(population: Population, defense: Defense, attack: str | Attack, design: PanoramiaDesign,
                        members: int, progress: bool,
                        device: torch.device) -> tuple[Mechanism, np.ndarray, AttackKnowledge, Attack]:
    """Draw the one release of D (``seeds.release``) and fit the attack on its knowledge (``seeds.attack``):
    returns (mechanism, release, knowledge, fitted attack)."""
    prior = UniformSubsetPrior(population.n_individuals, members)
    mechanism = release_mechanism(population.genotypes, defense.composition)
    b = design.membership[None, :].astype(np.float32)
    release = sample_releases(mechanism, defense, b, torch_generator(design.seeds["release"]))
    knowledge = attack_knowledge(population, prior, defense, members)
    return mechanism, release, knowledge, fit_attack(attack, knowledge, design.seeds["attack"], progress, device)


def _fit_classifiers(training: np.ndarray, training_labels: np.ndarray,
                     training_scores: np.ndarray) -> tuple[Pipeline, Pipeline]:
    """(baseline, MIA) fitted on the training split; the MIA on the baseline's out-of-fold log-odds
    and the attack's scores."""
    phi_training = genotype_features(training)
    baseline = fit_classifier(phi_training, training_labels)
    stacked = np.stack([out_of_fold_log_odds(phi_training, training_labels), training_scores], axis=1)
    return baseline, fit_classifier(stacked, training_labels)


def _audit_set(classifiers: tuple[Pipeline, Pipeline], points: np.ndarray, labels: np.ndarray, attack_scores: np.ndarray,
               confidence: float, *, generated: bool) -> _AuditSet:
    """Score an audit set and state its bound: eps_tilde with the baseline's scores as the
    generated non-members' reference (``generated``), else the c = 0 lower bound."""
    baseline_scores, mia_scores = mia_log_odds(*classifiers, points, attack_scores)
    reference = baseline_scores if generated else None
    result = panoramia_audit(mia_scores, labels, reference, confidence=confidence)
    ceiling = panoramia_audit(perfect_scores(labels), labels, reference, confidence=confidence).epsilon_lb
    return _AuditSet(labels, baseline_scores, attack_scores, mia_scores, result, ceiling)


def _audit_sets(fitted: Attack, release: np.ndarray, genotypes: np.ndarray, design: PanoramiaDesign,
                points: tuple[np.ndarray, np.ndarray], confidence: float) -> tuple[_AuditSet, _AuditSet | None]:
    """Score the classifiers' training individuals and the audit points with the attack, fit the
    baseline and the MIA, and state both audits: (generated, companion or None).  ``points`` =
    (training individuals, generated audit's points) of :func:`_generator_points`."""
    training, audit_points = points
    training_labels = np.repeat([1, 0], design.training_members.size)
    training_scores = _attack_scores(fitted, training, release)
    # Each audit set is scored on its own: an attack may not treat a batch row by row, and the
    # companion's scores must not depend on the generated audit's points (which are members).
    audit_scores = _attack_scores(fitted, audit_points, release)
    classifiers = _fit_classifiers(training, training_labels, training_scores)
    generated = _audit_set(classifiers, audit_points, design.labels, audit_scores, confidence, generated=True)
    if not design.real_nonmembers.size:
        return generated, None
    companion_points = genotypes[design.companion_points]
    companion = _audit_set(classifiers, companion_points, design.companion_labels,
                           _attack_scores(fitted, companion_points, release), confidence, generated=False)
    return generated, companion


def _summary(generated: _AuditSet, companion: _AuditSet | None, design: PanoramiaDesign) -> dict[str, Any]:
    """The two numbers of the audit with their meaning (``MechanismAuditResult.panoramia``)."""
    n_generated = int((~design.labels).sum())
    summary: dict[str, Any] = {
        "reported_as_epsilon_lb": "generated_nonmembers" if companion is None else "real_nonmembers",
        "real_nonmembers": None,
        "generated_nonmembers": {
            "epsilon_tilde": generated.result.epsilon_lb,
            "epsilon_tilde_ceiling": generated.ceiling,
            "is_lower_bound": False,
            "meaning": _GENERATED_MEANING,
            "c_lb": generated.result.c_lb,
            "c_plus_epsilon_lb": generated.result.c_plus_epsilon_lb,
            "audit_size": design.labels.size,
            "members": design.labels.size - n_generated,
            "nonmembers": n_generated,
        },
    }
    if companion is not None:
        n_members = int(design.companion_labels.sum())
        summary["real_nonmembers"] = {
            "epsilon_lb": companion.result.epsilon_lb,
            "epsilon_ceiling": companion.ceiling,
            "is_lower_bound": True,
            "meaning": _REAL_MEANING,
            "audit_size": design.companion_labels.size,
            "members": n_members,
            "nonmembers": design.companion_labels.size - n_members,
        }
    return summary


def _auc_diagnostics(audit: _AuditSet) -> dict[str, float]:
    return {
        "baseline_auc": roc_summary(audit.baseline_scores, audit.labels).auc,
        "mia_auc": roc_summary(audit.mia_scores, audit.labels).auc,
        "attack_score_auc": roc_summary(audit.attack_scores, audit.labels).auc,
    }


def _diagnostics(generated: _AuditSet, companion: _AuditSet | None, generator: HaplotypeCopyingModel,
                 generator_check: dict[str, Any], confidence: float) -> dict[str, Any]:
    """AUCs of the baseline, MIA and attack on each audit set (on the companion, both classes are
    real: a baseline AUC far from 0.5 would flag a bad split), the generator, and the trade-off
    curve of the reported MIA scores."""
    diagnostics: dict[str, Any] = {
        **_auc_diagnostics(generated),
        "generator": generator.describe(),
        "generator_vs_training_members": generator_check,
        "real_nonmembers": None if companion is None else _auc_diagnostics(companion),
    }
    reported = generated if companion is None else companion
    which = "real members and real non-members" if companion is not None else "real members and generated non-members"
    diagnostics["tradeoff"] = {
        "scores": f"the MIA scores of the {reported.labels.size} audit points ({which}) of the one release",
        "is_test": False,
        **empirical_tradeoff(reported.mia_scores, reported.labels, confidence=confidence).to_dict(),
    }
    return diagnostics


def _design_record(population: Population, defense: Defense, release_outputs: int, members: int,
                   design: PanoramiaDesign) -> dict[str, Any]:
    """The ``design`` of the record: sizes, who trains, who is audited, how the outside is split."""
    m, n_real, n_training = design.labels.size, int(design.labels.sum()), design.training_members.size
    n_companion = design.real_nonmembers.size
    n_outside = design.generator_panel.size + n_companion
    n_companion_members = int(design.companion_labels.sum())
    return {
        "individuals": population.n_individuals,
        "attributes": population.n_attributes,
        "composition": defense.composition,
        "release_outputs": release_outputs,
        "members": members,
        "dataset": f"{members} of {population.n_individuals} individuals uniformly (one release)",
        "audit_size": m,
        "audit_real_members": n_real,
        "audit_generated": m - n_real,
        "member_probability": 0.5,
        "classifier_training": (
            f"{n_training} members outside the audit set against {n_training} generated individuals"
        ),
        "generator_panel": (
            f"{design.generator_panel.size} of the {n_outside} population individuals outside the dataset "
            "(never audited)"
        ),
        "outside_split": {
            "outside": n_outside,
            "generator_panel": design.generator_panel.size,
            "real_nonmembers": n_companion,
            "drawn_by": "a seeded permutation of the individuals outside the dataset (seeds.companion)",
        },
        "companion_audit_size": n_companion,
        "companion_real_members": n_companion_members,
        "companion_real_nonmembers": n_companion - n_companion_members,
        "companion_design": (
            f"point i is audit-pool member i or real non-member i by a fair coin (seeds.companion), i < {n_companion}; "
            "the unaudited one stays in (member) or out (non-member) of the dataset"
            if n_companion else "none (real_nonmembers = 0)"
        ),
        "baseline_features": "carrier status and adjacent-pair agreement (no access to the release)",
        "mia_features": (
            "the baseline's log-odds (out-of-fold on the training split) and the attack's score on the release"
        ),
        "neighbouring": "replace",
    }


_SHADOW = (
    "shadow releases (if the attack simulates any) are datasets of the same size drawn uniformly from the "
    "population, with seeds independent of the audited release"
)


def _interpretation(generated: _AuditSet, companion: _AuditSet | None, design: PanoramiaDesign) -> str:
    if companion is None:
        return generated.result.interpretation
    n_members = int(design.companion_labels.sum())
    return (
        f"{_REAL_MEANING} (from {design.real_nonmembers.size - n_members} real non-members and "
        f"{n_members} members); the generated-non-member eps_tilde = {generated.result.epsilon_lb:.4g} is a "
        "measurement, not a lower bound (panoramia.generated_nonmembers)"
    )


def panoramia_mechanism_audit(
    population: Population,
    defense: Defense,
    attack: str | Attack,
    *,
    audit_size: int,
    members: int,
    real_nonmembers: RealNonmembers = "auto",
    confidence: float = 0.95,
    generator: HaplotypeCopyingModel | None = None,
    seed: int | None = 0,
    progress: bool = False,
    device: DeviceName | torch.device = "cpu",
) -> MechanismAuditResult:
    """PANORAMIA measurement of one release of ``defense``, with its real-non-member companion
    lower bound (module docstring).

    ``epsilon_lb`` of the result is the companion's lower bound (``is_lower_bound`` True) when
    there are real non-members, else the generated-non-member measurement eps_tilde
    (``is_lower_bound`` False); ``result.panoramia`` holds both numbers with their meaning.

    Args:
        population: the K individuals and the reference panel.
        defense: the noise law under audit (built for ``members`` members).
        attack: registry name or an unfitted attack; must score arbitrary genotypes.
        audit_size: m >= 2 audit points (``--canaries``), at most ``members`` - 10.
        members: n, the dataset size (n of K uniformly).
        real_nonmembers: R (``--real-nonmembers``), individuals outside the dataset held out from
            the generator and audited as real non-members; 0 or None: no companion; "auto"
            (default): :func:`~bngp.mechanism_audit.panoramia_sets.panoramia_design`.
        confidence: 1 - beta of each statement (generated: beta/2 per test; companion: beta).
        generator: an unfitted :class:`HaplotypeCopyingModel` (default settings if None).
        seed: the audit seed; every random stream is derived from it.
        progress: a line on stderr when the releases are drawn and the attack is being fitted.
        device: where an attack that trains a network trains (:mod:`bngp.device`); the releases,
            the generator and the classifiers stay on the CPU.

    Example:
        >>> from bngp.data.independent import simulate_independent
        >>> from bngp.defenses.base import NoDefense
        >>> population = simulate_independent(200, 100, 400, seed=4)
        >>> result = panoramia_mechanism_audit(population, NoDefense(), "score", audit_size=30, members=50)
        >>> result.is_lower_bound, result.panoramia["real_nonmembers"]["audit_size"]
        (True, 30)
    """
    device = resolve_device(device)
    confidence = check_confidence(confidence)
    generator = _check_generator(generator)
    design = panoramia_design(population.n_individuals, members, audit_size, real_nonmembers=real_nonmembers, seed=seed)
    seeds, genotypes = design.seeds, population.genotypes
    training, synthetic_training, audit_points = _generator_points(population, design, generator)
    mechanism, release, knowledge, fitted = _release_and_attack(population, defense, attack, design, members,
                                                                progress, device)
    generated, companion = _audit_sets(fitted, release, genotypes, design, (training, audit_points), confidence)
    generator_check = compare_genotypes(genotypes[design.training_members], synthetic_training).to_dict()
    reported = generated if companion is None else companion
    return MechanismAuditResult(
        mode="panoramia",
        epsilon_lb=reported.result.epsilon_lb,
        epsilon_ceiling=reported.ceiling,
        is_lower_bound=reported.result.is_lower_bound,
        interpretation=_interpretation(generated, companion, design),
        confidence=confidence,
        delta=generated.result.delta,
        claimed=claimed_guarantee(defense),
        defense=defense.describe(),
        attack=attack_record(fitted, knowledge, seeds["attack"], _SHADOW),
        design=_design_record(population, defense, mechanism.n_outputs, members, design),
        method={
            "name": "panoramia (kazmi et al.)",
            "panoramia": generated.result.to_dict(),
            "real_nonmembers": None if companion is None else companion.result.to_dict(),
        },
        diagnostics=_diagnostics(generated, companion, generator, generator_check, confidence),
        seed=design.seed,
        seeds=seeds,
        device=str(device),
        panoramia=_summary(generated, companion, design),
    )
