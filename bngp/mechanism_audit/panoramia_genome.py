"""PANORAMIA for genomic releases: generated non-members instead of retraining.

PANORAMIA (Kazmi, Lautraite, Akbari et al., "PANORAMIA: Privacy Auditing of Machine Learning
Models without Retraining", arXiv:2402.09477) audits one trained model with real members and
non-members produced by a generator.  Here the "model" is one release x = clip(f(D) + xi, 0, 1)
of the allele frequencies of a dataset D of n individuals drawn uniformly from the population
(the prior the defenses are built for), and:

* split: the K - n population individuals outside D are split by a seeded draw (the
  ``companion`` stream of :func:`~bngp.mechanism_audit.common.audit_seeds`) into the generator's
  panel and R real non-members o_1..o_R (``real_nonmembers``; default
  min(m, floor((K - n) / 2), K - n - :data:`MIN_GENERATOR_PANEL`), 0 disables the companion);
* generator G: a haplotype-copying model (Li & Stephens 2003,
  :class:`~bngp.mechanism_audit.haplotype_model.HaplotypeCopyingModel`) fitted on the panel.  The
  panel is never audited, and a generator fitted on members would make mosaics of members,
  which correlate with x exactly as members do (every tracing statistic is a sum over SNVs), so
  G must not see D;
* members: D is shuffled; m members a_1..a_m form the audit pool, the other n - m train the
  classifiers;
* audit set: m points, point i is a real member (s_i = 1, the next audit-pool member) with
  probability 1/2, independently, else a fresh draw of G;
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

Generated non-members: a measurement.  :func:`bngp.audit.panoramia_audit` turns the two score
vectors on the audit set into c_lb, {c+eps}_lb and eps_tilde = max(0, {c+eps}_lb - c_lb)
(arXiv:2402.09477, Prop. 1-2, Cor. 1-2; beta/2 per test, Bonferroni over each score's
thresholds).  eps_tilde is a measurement, not a lower bound: if G's closeness c
(e^-c P_D <= P_G) equals c_lb, the release is not eps_tilde-DP.  The baseline is the safeguard:
a generator easy to tell from real individuals gives a large c_lb and leaves little eps_tilde.

Real non-members: the companion lower bound.  The same MIA a(., x) scores a
second audit set of R points: point i is the audit-pool member a_i (t_i = 1) or the real
non-member o_i (t_i = 0), t_i a fair coin of the ``companion`` stream; the individual of the
pair that is not audited stays where it is (a_i in D, o_i outside), so D is untouched.
``panoramia_audit(a, t, None)`` is PANORAMIA's real-member/real-non-member case (c = 0 is
known; arXiv:2402.09477, Prop. 2 with c = 0): for the r points above a threshold, tp of them
members,

    eps_lb = max_thresholds sup{eps : P[Bin(r, e^eps / (1 + e^eps)) >= tp] < beta / T}

with T the distinct thresholds, a lower bound on eps at confidence 1 - beta.  Why it is valid
here:

* exchangeability.  D is n of K uniformly, the audit pool a uniformly ordered draw from D, the
  pool (o_1..o_R) a uniformly ordered draw from the outside individuals and the panel the rest
  of them.  Every such configuration has the same probability, and swapping a_i with o_i maps
  one to another, so given the unordered pairs {a_i, o_i}, the rest of D (training members and
  audit-pool members a_{R+1}..a_m) and the panel (the outside individuals not in a pair, a
  function of those), which individual of each pair is in D is a fair coin, independently over
  pairs.  D uniform is what makes a member and an outside individual exchangeable before D is
  drawn; the split must be independent of the individuals' genotypes (it is: a seeded
  permutation).
* one fair coin per audit point, independent of what the MIA saw.  The audited individual y_i
  is picked from its pair by t_i, so given y_i, s_i = 1{y_i in D} is a fair coin, independent
  over i and of everything the MIA was fitted on: training members and panel (conditioned
  on), the attack's knowledge (population, reference panel, prior; never D), the seeds of the
  other streams.  The MIA never trains on an audit point of either audit; the generated audit's
  draws (its labels and generated points) do not enter the MIA either, so the two audits can
  share the audit pool and each keeps all m members.
* one replacement per coin.  Flipping s_i swaps y_i with its unaudited partner: two datasets of
  n that differ by one replacement.  If the release is eps-DP under replacement, the guesses
  "member" for the r highest MIA scores have tp dominated by Bin(r, e^eps / (1 + e^eps)) (the
  one-run theorem with abstentions, Steinke, Nasr, Jagielski 2023, arXiv:2305.08846,
  Thm. 3.1, which needs no more than this per-coin indistinguishability), and the thresholds
  are a function of the scores, covered by Bonferroni.
* why the split.  The panel must be disjoint from the real non-members: G would copy o_i, the
  MIA is trained to call G's output non-members, and which individual of a pair is outside
  would leak through the MIA (the panel would no longer be a function of the conditioning
  above).  The audit pool's members likewise never train anything.

The design's ceiling.  Each number is computed again for a perfect MIA (score 1 for every member of
its audit set, 0 otherwise; :mod:`bngp.audit.ceiling`) with the same labels (and, for eps_tilde,
the same baseline scores): ``epsilon_ceiling`` of the reported number, and ``epsilon_ceiling`` /
``epsilon_tilde_ceiling`` in the ``panoramia`` summary.  With r members among the audit points and
two thresholds, the companion's ceiling is sup{eps : (e^eps / (1 + e^eps))^r < beta / 2}.  The
record's ``diagnostics.tradeoff`` is the empirical trade-off curve of the MIA scores behind the
reported number: descriptive, since the audit points of one release are not independent runs.

What is reported.  With a companion (R > 0), ``epsilon_lb`` is the companion's lower bound
(``is_lower_bound`` True, comparable with a claim stated at delta = 0 under replacement); with
``real_nonmembers=0`` it is eps_tilde, flagged as a measurement.  A number labelled a lower
bound must be one, and eps_tilde is not: it assumes c = c_lb.  Both numbers are in the record's
``panoramia`` summary with their meaning, and their full records under ``method``.  The two are
separate statements, each at confidence 1 - beta.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegressionCV
from sklearn.model_selection import cross_val_predict
from sklearn.pipeline import Pipeline, make_pipeline
from sklearn.preprocessing import StandardScaler

from bngp.attacks.base import Attack
from bngp.audit import PanoramiaResult, empirical_tradeoff, panoramia_audit, perfect_scores, roc_summary
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

__all__ = [
    "MIN_GENERATOR_PANEL",
    "MIN_TRAINING_MEMBERS",
    "PanoramiaDesign",
    "genotype_features",
    "panoramia_design",
    "panoramia_mechanism_audit",
]

#: members kept out of the audit set to train the classifiers (at least).
MIN_TRAINING_MEMBERS = 10
#: individuals outside the dataset the generator keeps when some become real non-members (at least).
MIN_GENERATOR_PANEL = 10
#: inverse L2 strengths tried by the classifiers' 3-fold cross-validation.
_CS = (0.01, 0.1, 1.0)

RealNonmembers = int | Literal["auto"] | None


def genotype_features(genotypes: np.ndarray) -> np.ndarray:
    """phi(y) = [y_1..y_Q, 1{y_1 = y_2}..1{y_{Q-1} = y_Q}] as float32, shape (n, 2Q - 1).

    ``genotypes`` are individuals (n, |Q|), never releases: for a composed release of c |Q|
    outputs the features stay those of the |Q| attributes (module docstring).
    """
    values = check_binary_matrix("genotypes", genotypes)
    agreement = values[:, 1:] == values[:, :-1]
    return np.concatenate([values, agreement], axis=1).astype(np.float32)


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

    companion_rng = np.random.default_rng(seeds["companion"])
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


def _classifier() -> Pipeline:
    """Standardised features, L2 logistic regression with C chosen by 3-fold cross-validation."""
    return make_pipeline(StandardScaler(), LogisticRegressionCV(Cs=list(_CS), cv=3, scoring="roc_auc", max_iter=2000))


def _fit(features_train: np.ndarray, labels: np.ndarray) -> Pipeline:
    """A classifier fitted on the training split."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        warnings.simplefilter("ignore", FutureWarning)
        return _classifier().fit(features_train, labels)


def _log_odds(classifier: Pipeline, features: np.ndarray) -> np.ndarray:
    return classifier.decision_function(features).astype(np.float64)


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


_GENERATED_MEANING = (
    "measurement, not a lower bound: eps_tilde = {c+eps}_lb - c_lb with generated non-members; if the "
    "generator's closeness c equals c_lb, the release is not eps_tilde-DP (arXiv:2402.09477 sec. 4.2)"
)
_REAL_MEANING = (
    "lower bound on eps (datasets of n, one replacement) with real held-out non-members (c = 0, "
    "arXiv:2402.09477 Prop. 2; arXiv:2305.08846 Thm. 3.1), valid at the stated confidence"
)


def _summary(generated: PanoramiaResult, companion: PanoramiaResult | None, design: PanoramiaDesign,
             ceilings: tuple[float, float | None]) -> dict[str, Any]:
    """The two numbers of the audit with their meaning (``MechanismAuditResult.panoramia``);
    ``ceilings`` are those of the generated and the companion audit (module docstring)."""
    n_generated = int((~design.labels).sum())
    summary: dict[str, Any] = {
        "reported_as_epsilon_lb": "generated_nonmembers" if companion is None else "real_nonmembers",
        "real_nonmembers": None,
        "generated_nonmembers": {
            "epsilon_tilde": generated.epsilon_lb,
            "epsilon_tilde_ceiling": ceilings[0],
            "is_lower_bound": False,
            "meaning": _GENERATED_MEANING,
            "c_lb": generated.c_lb,
            "c_plus_epsilon_lb": generated.c_plus_epsilon_lb,
            "audit_size": design.labels.size,
            "members": design.labels.size - n_generated,
            "nonmembers": n_generated,
        },
    }
    if companion is not None:
        n_members = int(design.companion_labels.sum())
        summary["real_nonmembers"] = {
            "epsilon_lb": companion.epsilon_lb,
            "epsilon_ceiling": ceilings[1],
            "is_lower_bound": True,
            "meaning": _REAL_MEANING,
            "audit_size": design.companion_labels.size,
            "members": n_members,
            "nonmembers": design.companion_labels.size - n_members,
        }
    return summary


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
            the generator and audited as real non-members: 2 <= R <= m and
            R <= K - n - :data:`MIN_GENERATOR_PANEL`; 0 or None: no companion; "auto" (default):
            min(m, floor((K - n) / 2), K - n - 10), none if below 2.
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
    if generator is None:
        generator = HaplotypeCopyingModel()
    elif not isinstance(generator, HaplotypeCopyingModel):
        raise InputError(f"`generator` must be a HaplotypeCopyingModel, got {type(generator).__name__}.")
    design = panoramia_design(
        population.n_individuals, members, audit_size, real_nonmembers=real_nonmembers, seed=seed
    )
    seeds, m, labels = design.seeds, design.labels.size, design.labels
    n_real, n_companion = int(labels.sum()), design.real_nonmembers.size
    genotypes = population.genotypes
    training_members = design.training_members

    generator_rng = np.random.default_rng(seeds["generator"])
    generator.fit(genotypes[design.generator_panel], seed=generator_rng)
    synthetic_training = generator.sample(training_members.size, seed=generator_rng)
    audit_points = np.empty((m, population.n_attributes), dtype=np.uint8)
    audit_points[labels] = genotypes[design.audit_pool[:n_real]]
    audit_points[~labels] = generator.sample(m - n_real, seed=generator_rng)
    training = np.concatenate([genotypes[training_members], synthetic_training])
    training_labels = np.repeat([1, 0], training_members.size)

    prior = UniformSubsetPrior(population.n_individuals, members)
    mechanism = release_mechanism(genotypes, defense.composition)
    b = design.membership[None, :].astype(np.float32)
    release = sample_releases(mechanism, defense, b, torch_generator(seeds["release"]))
    knowledge = attack_knowledge(population, prior, defense, members)
    fitted = fit_attack(attack, knowledge, seeds["attack"], progress, device)
    training_scores = _attack_scores(fitted, training, release)
    # Each audit set is scored on its own: an attack may not treat a batch row by row, and the
    # companion's scores must not depend on the generated audit's points (which are members).
    audit_scores = _attack_scores(fitted, audit_points, release)

    phi_training = genotype_features(training)
    baseline = _fit(phi_training, training_labels)
    mia = _fit(np.stack([_out_of_fold(phi_training, training_labels), training_scores], axis=1), training_labels)
    baseline_scores = _log_odds(baseline, genotype_features(audit_points))
    mia_scores = _log_odds(mia, np.stack([baseline_scores, audit_scores], axis=1))
    result = panoramia_audit(mia_scores, labels, baseline_scores, confidence=confidence)
    generated_ceiling = panoramia_audit(perfect_scores(labels), labels, baseline_scores,
                                        confidence=confidence).epsilon_lb
    companion, companion_ceiling = None, None
    reported_scores, reported_labels = mia_scores, labels
    if n_companion:
        companion_labels = design.companion_labels
        companion_points = genotypes[design.companion_points]
        companion_attack = _attack_scores(fitted, companion_points, release)
        companion_baseline = _log_odds(baseline, genotype_features(companion_points))
        companion_mia = _log_odds(mia, np.stack([companion_baseline, companion_attack], axis=1))
        companion = panoramia_audit(companion_mia, companion_labels, None, confidence=confidence)
        companion_ceiling = panoramia_audit(perfect_scores(companion_labels), companion_labels, None,
                                            confidence=confidence).epsilon_lb
        reported_scores, reported_labels = companion_mia, companion_labels

    diagnostics: dict[str, Any] = {
        "baseline_auc": roc_summary(baseline_scores, labels).auc,
        "mia_auc": roc_summary(mia_scores, labels).auc,
        "attack_score_auc": roc_summary(audit_scores, labels).auc,
        "generator": generator.describe(),
        "generator_vs_training_members": compare_genotypes(genotypes[training_members], synthetic_training).to_dict(),
        "real_nonmembers": None,
    }
    if companion is not None:
        diagnostics["real_nonmembers"] = {
            # both classes are real: a baseline AUC far from 0.5 would flag a bad split
            "baseline_auc": roc_summary(companion_baseline, companion_labels).auc,
            "mia_auc": roc_summary(companion_mia, companion_labels).auc,
            "attack_score_auc": roc_summary(companion_attack, companion_labels).auc,
        }
    which = "real members and real non-members" if companion is not None else "real members and generated non-members"
    diagnostics["tradeoff"] = {
        "scores": f"the MIA scores of the {reported_labels.size} audit points ({which}) of the one release",
        "is_test": False,
        **empirical_tradeoff(reported_scores, reported_labels, confidence=confidence).to_dict(),
    }
    n_outside = design.generator_panel.size + n_companion
    n_companion_members = int(design.companion_labels.sum())
    design_record = {
        "individuals": population.n_individuals,
        "attributes": population.n_attributes,
        "composition": defense.composition,
        "release_outputs": mechanism.n_outputs,
        "members": members,
        "dataset": f"{members} of {population.n_individuals} individuals uniformly (one release)",
        "audit_size": m,
        "audit_real_members": n_real,
        "audit_generated": m - n_real,
        "member_probability": 0.5,
        "classifier_training": (
            f"{training_members.size} members outside the audit set against {training_members.size} generated "
            "individuals"
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
    shadow = (
        "shadow releases (if the attack simulates any) are datasets of the same size drawn uniformly from the "
        "population, with seeds independent of the audited release"
    )
    if companion is None:
        reported, interpretation = result, result.interpretation
    else:
        reported = companion
        interpretation = (
            f"{_REAL_MEANING} (from {n_companion - n_companion_members} real non-members and "
            f"{n_companion_members} members); the generated-non-member eps_tilde = {result.epsilon_lb:.4g} is a "
            "measurement, not a lower bound (panoramia.generated_nonmembers)"
        )
    return MechanismAuditResult(
        mode="panoramia",
        epsilon_lb=reported.epsilon_lb,
        epsilon_ceiling=generated_ceiling if companion is None else companion_ceiling,
        is_lower_bound=reported.is_lower_bound,
        interpretation=interpretation,
        confidence=confidence,
        delta=result.delta,
        claimed=claimed_guarantee(defense),
        defense=defense.describe(),
        attack=attack_record(fitted, knowledge, seeds["attack"], shadow),
        design=design_record,
        method={
            "name": "panoramia (kazmi et al.)",
            "panoramia": result.to_dict(),
            "real_nonmembers": None if companion is None else companion.to_dict(),
        },
        diagnostics=diagnostics,
        seed=design.seed,
        seeds=seeds,
        device=str(device),
        panoramia=_summary(result, companion, design, (generated_ceiling, companion_ceiling)),
    )
