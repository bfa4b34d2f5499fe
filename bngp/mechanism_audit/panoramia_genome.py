"""PANORAMIA for genomic releases: generated non-members instead of retraining.

PANORAMIA (Kazmi, Lautraite, Akbari et al., "PANORAMIA: Privacy Auditing of Machine Learning
Models without Retraining", arXiv:2402.09477) audits one trained model with real members and
non-members produced by a generator.  Here the "model" is one release x = clip(f(D) + xi, 0, 1)
of the allele frequencies of a dataset D of n individuals drawn uniformly from the population
(the prior the defenses are built for), and:

* generator G: a haplotype-copying model (Li & Stephens 2003,
  :class:`~bngp.mechanism_audit.haplotype_model.HaplotypeCopyingModel`) fitted on the K - n population
  individuals outside D.  They are never audited, and a generator fitted on members would make
  mosaics of members, which correlate with x exactly as members do (every tracing statistic is
  a sum over SNVs), so G must not see D;
* members: D is shuffled; m members form the audit pool, the other n - m train the classifiers;
* audit set: m points, point i is a real member (s_i = 1) with probability 1/2, independently,
  else a fresh draw of G;
* baseline b(y): logistic regression on genotype features phi(y) = [y_j, 1{y_j = y_{j+1}}]
  (carrier status and adjacent-pair agreement, which carries the LD structure), trained on
  the n - m training members against as many generated individuals; it never sees x;
* MIA a(y, x): a logistic regression on [b(y), s(y, x)], the baseline's log-odds (out-of-fold
  on the training split, so that no training point is scored by a model that saw it) and s the
  chosen attack's membership score of y on the release (the attack fitted only on its own
  knowledge and shadow simulations).  Stacking keeps the MIA as informed as the baseline
  while leaving it two coefficients to learn from the few training members.

A defense that perturbs c > 1 copies of f(D) (arXiv:2410.07414, App. L.6) releases c |Q|
outputs; only s(y, x) reads the release, and it reads all of it (the attack runs on the tiled
attributes, :class:`bngp.attacks.composed.TiledAttack`).  phi(y) is a function of the
individual's own |Q| attributes, never of the release, so its width is 2|Q| - 1 whatever c.

:func:`bngp.audit.panoramia_audit` turns the two score vectors on the audit set into c_lb,
{c+eps}_lb and eps_tilde = max(0, {c+eps}_lb - c_lb) (arXiv:2402.09477, Prop. 1-2, Cor. 1-2; beta/2
per test, Bonferroni over each score's thresholds).  eps_tilde is a measurement, not a
lower bound: if G's closeness c (e^-c P_D <= P_G) equals c_lb, the release is not
eps_tilde-DP.  The baseline is the safeguard: a generator easy to tell from real individuals
gives a large c_lb and leaves little eps_tilde.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any

import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegressionCV
from sklearn.model_selection import cross_val_predict
from sklearn.pipeline import Pipeline, make_pipeline
from sklearn.preprocessing import StandardScaler

from bngp.attacks.base import Attack
from bngp.audit import panoramia_audit, roc_summary
from bngp.audit.inputs import check_confidence
from bngp.mechanism_audit.common import attack_record, audit_seeds, check_scores, fit_attack
from bngp.mechanism_audit.haplotype_model import HaplotypeCopyingModel, compare_genotypes
from bngp.mechanism_audit.results import MechanismAuditResult, claimed_guarantee
from bngp.data.population import Population
from bngp.data.priors import UniformSubsetPrior
from bngp.device import DeviceName, resolve_device
from bngp.errors import DataFormatError, InputError
from bngp.attacks.base import attack_knowledge
from bngp.rng import torch_generator
from bngp.validation import check_binary_matrix, check_positive_int
from bngp.defenses.base import Defense
from bngp.release.sampling import release_mechanism, sample_releases

if TYPE_CHECKING:
    import torch

__all__ = ["MIN_TRAINING_MEMBERS", "genotype_features", "panoramia_mechanism_audit"]

#: members kept out of the audit set to train the classifiers (at least).
MIN_TRAINING_MEMBERS = 10
#: inverse L2 strengths tried by the classifiers' 3-fold cross-validation.
_CS = (0.01, 0.1, 1.0)


def genotype_features(genotypes: np.ndarray) -> np.ndarray:
    """phi(y) = [y_1..y_Q, 1{y_1 = y_2}..1{y_{Q-1} = y_Q}] as float32, shape (n, 2Q - 1).

    ``genotypes`` are individuals (n, |Q|), never releases: for a composed release of c |Q|
    outputs the features stay those of the |Q| attributes (module docstring).
    """
    values = check_binary_matrix("genotypes", genotypes)
    agreement = values[:, 1:] == values[:, :-1]
    return np.concatenate([values, agreement], axis=1).astype(np.float32)


def _classifier() -> Pipeline:
    """Standardised features, L2 logistic regression with C chosen by 3-fold cross-validation."""
    return make_pipeline(StandardScaler(), LogisticRegressionCV(Cs=list(_CS), cv=3, scoring="roc_auc", max_iter=2000))


def _fit_predict(features_train: np.ndarray, labels: np.ndarray, features_audit: np.ndarray) -> np.ndarray:
    """Fit a classifier on the training split; its log-odds on the audit set."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        warnings.simplefilter("ignore", FutureWarning)
        return _classifier().fit(features_train, labels).decision_function(features_audit).astype(np.float64)


def _out_of_fold(features: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """3-fold out-of-fold log-odds on the training split (no point scored by a model that saw it)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        warnings.simplefilter("ignore", FutureWarning)
        scores = cross_val_predict(_classifier(), features, labels, cv=3, method="decision_function")
    return scores.astype(np.float64)


def _attack_scores(attack: Attack, individuals: np.ndarray, release: np.ndarray) -> np.ndarray:
    try:
        scores = attack.score(individuals, release)
    except DataFormatError as exc:
        raise InputError(
            f"PANORAMIA scores generated individuals, which attack `{attack.name}` cannot ({exc}); "
            "use an attack computed from the release, e.g. score, lrt, homer or optimal-lrt."
        ) from exc
    return check_scores(attack.name, scores, (1, individuals.shape[0]))[0]


def panoramia_mechanism_audit(
    population: Population,
    defense: Defense,
    attack: str | Attack,
    *,
    audit_size: int,
    members: int,
    confidence: float = 0.95,
    generator: HaplotypeCopyingModel | None = None,
    seed: int | None = 0,
    progress: bool = False,
    device: DeviceName | torch.device = "cpu",
) -> MechanismAuditResult:
    """PANORAMIA measurement of one release of ``defense`` (module docstring).

    Args:
        population: the K individuals and the reference panel.
        defense: the noise law under audit (built for ``members`` members).
        attack: registry name or an unfitted attack; must score arbitrary genotypes.
        audit_size: m >= 2 audit points (``--canaries``), at most ``members`` - 10.
        members: n, the dataset size (n of K uniformly).
        confidence: 1 - beta of the joint statement (beta/2 per test).
        generator: an unfitted :class:`HaplotypeCopyingModel` (default settings if None).
        seed: the audit seed; every random stream is derived from it.
        progress: a line on stderr when the releases are drawn and the attack is being fitted.
        device: where an attack that trains a network trains (:mod:`bngp.device`); the releases,
            the generator and the classifiers stay on the CPU.
    """
    device = resolve_device(device)
    m = check_positive_int("canaries", audit_size, minimum=2)
    n_individuals = population.n_individuals
    members = check_positive_int("members", members, maximum=n_individuals - 2)
    if m > members - MIN_TRAINING_MEMBERS:
        raise InputError(
            f"`canaries` must be <= members - {MIN_TRAINING_MEMBERS} = {members - MIN_TRAINING_MEMBERS} "
            f"(PANORAMIA keeps at least {MIN_TRAINING_MEMBERS} members to train its classifiers), got {m}."
        )
    confidence = check_confidence(confidence)
    if generator is None:
        generator = HaplotypeCopyingModel()
    elif not isinstance(generator, HaplotypeCopyingModel):
        raise InputError(f"`generator` must be a HaplotypeCopyingModel, got {type(generator).__name__}.")
    seed, seeds = audit_seeds(seed)
    genotypes = population.genotypes

    design_rng = np.random.default_rng(seeds["design"])
    prior = UniformSubsetPrior(n_individuals, members)
    b = prior.sample(1, design_rng)
    member_index = design_rng.permutation(np.flatnonzero(b[0]))
    outside = np.flatnonzero(b[0] == 0)
    audit_pool, training_members = member_index[:m], member_index[m:]
    labels = design_rng.random(m) < 0.5
    n_real = int(labels.sum())
    if n_real in (0, m):
        state = "real members" if n_real else "generated"
        raise DataFormatError(
            f"all {m} audit points were {state} (probability 2^(1-m)); use more canaries or another seed."
        )

    generator_rng = np.random.default_rng(seeds["generator"])
    generator.fit(genotypes[outside], seed=generator_rng)
    synthetic_training = generator.sample(training_members.size, seed=generator_rng)
    audit_points = np.empty((m, population.n_attributes), dtype=np.uint8)
    audit_points[labels] = genotypes[audit_pool[:n_real]]
    audit_points[~labels] = generator.sample(m - n_real, seed=generator_rng)
    training = np.concatenate([genotypes[training_members], synthetic_training])
    training_labels = np.repeat([1, 0], training_members.size)

    mechanism = release_mechanism(genotypes, defense.composition)
    release = sample_releases(mechanism, defense, b, torch_generator(seeds["release"]))
    knowledge = attack_knowledge(population, prior, defense, members)
    fitted = fit_attack(attack, knowledge, seeds["attack"], progress, device)
    training_scores = _attack_scores(fitted, training, release)
    audit_scores = _attack_scores(fitted, audit_points, release)

    phi_training = genotype_features(training)
    baseline_scores = _fit_predict(phi_training, training_labels, genotype_features(audit_points))
    mia_scores = _fit_predict(
        np.stack([_out_of_fold(phi_training, training_labels), training_scores], axis=1),
        training_labels,
        np.stack([baseline_scores, audit_scores], axis=1),
    )
    result = panoramia_audit(mia_scores, labels, baseline_scores, confidence=confidence)

    diagnostics: dict[str, Any] = {
        "baseline_auc": roc_summary(baseline_scores, labels).auc,
        "mia_auc": roc_summary(mia_scores, labels).auc,
        "attack_score_auc": roc_summary(audit_scores, labels).auc,
        "generator": generator.describe(),
        "generator_vs_training_members": compare_genotypes(genotypes[training_members], synthetic_training).to_dict(),
    }
    design = {
        "individuals": n_individuals,
        "attributes": population.n_attributes,
        "composition": defense.composition,
        "release_outputs": mechanism.n_outputs,
        "members": members,
        "dataset": f"{members} of {n_individuals} individuals uniformly (one release)",
        "audit_size": m,
        "audit_real_members": n_real,
        "audit_generated": m - n_real,
        "member_probability": 0.5,
        "classifier_training": (
            f"{training_members.size} members outside the audit set against {training_members.size} generated "
            "individuals"
        ),
        "generator_panel": f"the {outside.size} population individuals outside the dataset (never audited)",
        "baseline_features": "carrier status and adjacent-pair agreement (no access to the release)",
        "mia_features": (
            "the baseline's log-odds (out-of-fold on the training split) and the attack's score on the release"
        ),
        "neighbouring": "replace",
    }
    shadow = (
        "shadow releases (if the attack simulates any) are datasets of the same size drawn uniformly from the "
        "population, with seeds independent of the audited release"
    )
    return MechanismAuditResult(
        mode="panoramia",
        epsilon_lb=result.epsilon_lb,
        is_lower_bound=result.is_lower_bound,
        interpretation=result.interpretation,
        confidence=confidence,
        delta=result.delta,
        claimed=claimed_guarantee(defense),
        defense=defense.describe(),
        attack=attack_record(fitted, knowledge, seeds["attack"], shadow),
        design=design,
        method={"name": "panoramia (kazmi et al.)", "panoramia": result.to_dict()},
        diagnostics=diagnostics,
        seed=seed,
        seeds=seeds,
        device=str(device),
    )
