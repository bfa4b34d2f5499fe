"""The linear attackers of attacks.linear: ``linear`` (ridge, fitted to convergence) and ``whitened``
(the noise-covariance-aware linear discriminant).

Known answers: scikit-learn's Ridge at the attack's chosen penalty, fitted on the same simulated
releases (the attack draws its validation releases first, then its training releases, from
``shadow_sampler(knowledge, spawn_seeds(seed, 2)[0])``, see ``LinearAttack._fit``).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch
from sklearn.linear_model import Ridge

from bngp.attacks import BayesianAttack, LinearAttack, WhitenedAttack
from bngp.attacks.shadow import shadow_sampler
from bngp.metrics import release_aucs
from bngp.linear import RIDGE_PATH, SHADOW_FLOAT_BUDGET, default_shadow_releases, max_shadow_releases
from bngp.rng import spawn_seeds


def _mean_auc(scores: np.ndarray, memberships: np.ndarray) -> float:
    return float(release_aucs(scores, memberships).mean())


def test_linear_attack_is_sklearn_ridge_at_its_chosen_penalty(small_world) -> None:
    """With a fixed number of shadow releases the attack's score is sklearn's Ridge (intercept
    fitted, alpha = penalty * largest eigenvalue of X_c^T X_c) on the same 60 simulated releases,
    its intercept replaced by the known prior mean theta when the knowledge has it."""
    knowledge = small_world.knowledge(laplace_scale=0.05)
    attack = LinearAttack(n_shadow_releases=60, validation_releases=100).fit(knowledge, seed=4)
    sample = shadow_sampler(knowledge, spawn_seeds(4, 2)[0])
    sample(100)  # the validation releases come first
    train_x, train_b = (tensor.numpy() for tensor in sample(60))
    centred = train_x - train_x.mean(axis=0)
    scale = np.linalg.eigvalsh(centred.T @ centred).max()
    releases, _ = small_world.releases(5, seed=5, laplace_scale=0.05)
    reference = Ridge(alpha=attack.fit_.ridge * scale).fit(train_x, train_b).predict(releases)
    if knowledge.membership_prior is not None:
        reference = reference - train_b.mean(axis=0) + knowledge.membership_prior
    assert attack.orientation_ == 1
    scores = attack.score(small_world.population.genotypes, releases)
    np.testing.assert_allclose(scores, reference, rtol=1e-6, atol=1e-8)
    assert attack.fit_.releases == 60 and attack.fit_.criterion == "validation-auc"
    assert attack.learning_curve_.releases == (60,) and not attack.learning_curve_.converged


def test_linear_attack_detects_members(small_world) -> None:
    knowledge = small_world.knowledge(laplace_scale=0.02)
    attack = LinearAttack(n_shadow_releases=300, validation_releases=100).fit(knowledge, seed=0)
    releases, memberships = small_world.releases(10, seed=6, laplace_scale=0.02)
    assert _mean_auc(attack.score(small_world.population.genotypes, releases), memberships) > 0.9


def test_linear_attack_is_differentiable_release_by_release(small_world) -> None:
    """The score of release 0 has a gradient in release 0 only (the map is applied row by row)."""
    knowledge = small_world.knowledge(laplace_scale=0.05)
    attack = LinearAttack(n_shadow_releases=60, validation_releases=50).fit(knowledge, seed=1)
    releases, _ = small_world.releases(3, seed=5, laplace_scale=0.05)
    x = torch.tensor(releases, requires_grad=True)
    scores = attack.score_torch(torch.from_numpy(small_world.population.genotypes), x)
    expected = attack.score(small_world.population.genotypes, releases)
    np.testing.assert_allclose(scores.detach().numpy(), expected, atol=1e-10)
    scores[0, 0].backward()
    assert float(x.grad[1:].abs().sum()) == 0.0 and float(x.grad[0].abs().sum()) > 0.0
    np.testing.assert_allclose(x.grad[0].numpy(), attack.fit_.weights[:, 0].numpy(), rtol=1e-12)


def test_linear_attack_reports_its_learning_curve(small_world) -> None:
    """Converged by default: releases from default_shadow_releases(40, 300) = 600, doubled until the
    validation AUC gain falls below the tolerance or the cap (here 3000); describe() carries the
    curve and the fit of highest validation AUC.  Laplace 0.2 keeps the curve rising (measured
    0.909, 0.925, 0.935, 0.938 at 600, 1200, 2400 and the cap 3000 releases: the last gain 0.003
    over a third of a doubling is 0.009 per doubling, still rising, so not converged by
    :func:`bngp.metrics.levelled_off`); on 40 fresh releases the fit reads 0.930 against 0.888 for
    the first 600 releases alone."""
    knowledge = small_world.knowledge(laplace_scale=0.2)
    attack = LinearAttack(validation_releases=100, max_shadow_releases=3000).fit(knowledge, seed=0)
    record = attack.describe()
    curve = record["learning_curve"]
    assert curve == attack.learning_curve_.to_dict()
    assert curve["releases"] == [600, 1200, 2400, 3000]
    assert curve["releases"][0] == default_shadow_releases(40, 300)
    assert np.all(np.diff(curve["auc"])[:2] >= curve["tolerance"])
    assert not curve["converged"] and curve["auc"][-1] - curve["auc"][-2] < curve["tolerance"]
    assert record["fit"]["validation_auc"] == max(curve["auc"])
    assert record["fit"]["releases"] == curve["releases"][int(np.argmax(curve["auc"]))]
    assert record["fit"]["criterion"] == "validation-auc" and len(record["fit"]["path"]) == len(RIDGE_PATH)
    first = LinearAttack(n_shadow_releases=600, validation_releases=100).fit(knowledge, seed=0)
    assert first.fit_.score == curve["auc"][0]  # the same first 600 releases and validation set
    releases, memberships = small_world.releases(40, seed=8, laplace_scale=0.2)
    genotypes = small_world.population.genotypes
    converged_auc = _mean_auc(attack.score(genotypes, releases), memberships)
    assert converged_auc > _mean_auc(first.score(genotypes, releases), memberships)


def test_default_shadow_set_scales_with_the_released_outputs(wide_world) -> None:
    """A release shrunk towards the population mean plus small noise, x = t + 0.05 (f(D) - t) + e,
    still leaks to a ridge attacker fitted to convergence from 2|Q| shadow releases (the default),
    much less to one fitted on fewer releases than outputs (the default before it scaled with |Q|)."""
    population = wide_world.population
    target = population.genotypes.mean(axis=0)

    def shrunk(n_releases: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
        releases, memberships = wide_world.releases(n_releases, seed)
        noise = np.random.default_rng(seed + 99).normal(0.0, 0.01, releases.shape)
        return np.clip(target + 0.05 * (releases - target) + noise, 0.0, 1.0), memberships

    knowledge = replace(wide_world.knowledge(), noise_law=None, simulate=lambda n, seed: shrunk(n, 10_000 + seed))
    releases, memberships = shrunk(20, seed=1)
    strong = LinearAttack(validation_releases=200).fit(knowledge, seed=0)
    weak = LinearAttack(n_shadow_releases=400, validation_releases=200).fit(knowledge, seed=0)
    assert strong.learning_curve_.releases[0] == 1600
    assert _mean_auc(strong.score(population.genotypes, releases), memberships) > 0.93
    assert _mean_auc(weak.score(population.genotypes, releases), memberships) < 0.9


def test_shadow_release_sizes() -> None:
    """max(500, 2K, 2|Q|), capped at SHADOW_FLOAT_BUDGET = 2^27 floats; the cap of the learning
    curve is 64 max(K, |Q|) within the same budget, never below the start."""
    assert SHADOW_FLOAT_BUDGET == 2**27
    assert default_shadow_releases(40, 800) == 1600 and default_shadow_releases(800, 5000) == 10_000
    assert default_shadow_releases(10, 20) == 500
    assert default_shadow_releases(800, 25_000) == 2**27 // 25_000 == 5368
    assert max_shadow_releases(40, 800) == 51_200 and max_shadow_releases(200, 1000) == 64_000
    assert max_shadow_releases(800, 25_000) == 5368  # the budget binds: start == cap


def test_whitened_attack_beats_ridge_on_low_dimensional_noise(small_world) -> None:
    """Noise confined to a 5-dimensional random subspace at 1e4 times the scale of the membership
    signal, plus tiny isotropic noise: x = 0.5 + a (f(D) - t + U z + e), U orthonormal (|Q| x 5),
    z ~ N(0, 1e4^2), e ~ N(0, 0.001^2), a chosen so that releases stay in [0, 1] unclipped
    (linear attacks are invariant to the affine map).  Ridge must resolve a signal 1e-8 below the
    largest squared singular value; the whitened discriminant projects the subspace out.
    Measured at 60 shadow releases (attack seeds 0-3): whitened 0.992, 0.995, 0.996, 0.990;
    linear 0.884, 0.911, 0.920, 0.918 (seed 0 asserted, margin 0.05)."""
    population = small_world.population
    genotypes = population.genotypes.astype(np.float64)
    target = genotypes.mean(axis=0)
    outputs = genotypes.shape[1]
    basis = np.linalg.qr(np.random.default_rng(7).normal(size=(outputs, 5)))[0]
    spread = 1e4
    affine = 0.45 / (6 * spread * np.linalg.norm(basis, axis=1).max())  # 6 sd of every (U z)_j fit in [0, 1]

    def release(n_releases: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
        statistic, memberships = small_world.releases(n_releases, seed)
        rng = np.random.default_rng(seed + 1)
        raw = statistic - target + rng.normal(0.0, spread, (n_releases, 5)) @ basis.T
        raw += rng.normal(0.0, 0.001, statistic.shape)
        x = 0.5 + affine * raw
        assert np.all((x > 0) & (x < 1))
        return x, memberships

    knowledge = replace(small_world.knowledge(), noise_law=None, simulate=lambda n, seed: release(n, 10_000 + seed))
    releases, memberships = release(50, 1)
    linear = LinearAttack(n_shadow_releases=60, validation_releases=100).fit(knowledge, seed=0)
    whitened = WhitenedAttack(n_shadow_releases=60, validation_releases=100).fit(knowledge, seed=0)
    linear_auc = _mean_auc(linear.score(population.genotypes, releases), memberships)
    whitened_auc = _mean_auc(whitened.score(population.genotypes, releases), memberships)
    assert whitened_auc > 0.97
    assert whitened_auc > linear_auc + 0.05
    assert whitened.fit_.shrinkage is not None and linear.fit_.shrinkage is None


def test_linear_and_whitened_fitted_together_are_their_fits_on_the_linear_attacks_releases(small_world) -> None:
    """``linear.fit_together_with(whitened)`` (what ``evaluate`` does when both are asked for): the
    linear attack's fit is the one it makes alone (same releases, same curve, weights to 1e-9), the
    whitened attack gets the map fitted on the same releases with the same curve sizes, calibrates
    and scores with it, and is fitted alone again at its next fit.  Laplace 0.2: both curves still
    rise to the cap (measured: linear 0.915, 0.933, 0.940 and whitened 0.922, 0.939, 0.945 at 600,
    1200, 2400 releases; on 20 fresh releases 0.921 and 0.922)."""
    knowledge = small_world.knowledge(laplace_scale=0.2)
    options = {"validation_releases": 100, "max_shadow_releases": 2400}
    linear, whitened = LinearAttack(**options), WhitenedAttack(**options)
    linear.fit_together_with(whitened).fit(knowledge, seed=3)
    alone = LinearAttack(**options).fit(knowledge, seed=3)
    assert linear.learning_curve_.releases[: len(alone.learning_curve_.releases)] == alone.learning_curve_.releases
    np.testing.assert_allclose(linear.learning_curve_.auc[: len(alone.learning_curve_.auc)], alone.learning_curve_.auc,
                               atol=1e-12)
    assert linear.learning_curve_.releases == alone.learning_curve_.releases == (600, 1200, 2400)
    np.testing.assert_allclose(linear.fit_.weights.numpy(), alone.fit_.weights.numpy(), rtol=0,
                                   atol=1e-9 * float(alone.fit_.weights.abs().max()))
    handed = whitened._given[0]
    whitened.fit(knowledge, seed=4)
    assert whitened.fit_ is handed and whitened.learning_curve_.releases == linear.learning_curve_.releases
    releases, memberships = small_world.releases(20, seed=9, laplace_scale=0.2)
    assert _mean_auc(whitened.score(small_world.population.genotypes, releases), memberships) > 0.9
    whitened.fit(knowledge, seed=4)  # nothing handed over any more: its own releases and curve
    assert whitened.fit_ is not handed and whitened.learning_curve_.releases[0] == linear.learning_curve_.releases[0]


def test_fitting_together_needs_the_same_settings(small_world) -> None:
    """A whitened partner with other curve settings (or a linear attack with a fixed shadow set) is
    left to fit alone."""
    linear, whitened = LinearAttack(), WhitenedAttack(tolerance=0.01)
    assert linear.fit_together_with(whitened)._partner is None
    assert LinearAttack(n_shadow_releases=50).fit_together_with(WhitenedAttack())._partner is None
    assert LinearAttack().fit_together_with(LinearAttack())._partner is None
    assert LinearAttack().fit_together_with(WhitenedAttack())._partner is not None


def test_a_fit_of_the_coordinates_lifted_to_the_release_is_the_same_map(small_world) -> None:
    """ReleaseReading.lift: b_mean + (c(x) - c_mean) W_c with c(x) = V^T (w o (x - t)) equals the lifted fit's
    b_mean' + (x - t) diag(w) V W_c on every release (closed form: 1e-10), with and without attribute weights."""
    from bngp.data.geometry import PopulationSpace
    from bngp.linear import fit_ridge
    from bngp.reading import ReleaseReading

    population = small_world.population
    space = PopulationSpace.of(population, small_world.n_members)
    releases, memberships = small_world.releases(200, seed=3, laplace_scale=0.05)
    fresh, _ = small_world.releases(20, seed=4, laplace_scale=0.05)
    weights = (np.arange(population.n_attributes) % 3 > 0).astype(np.float64)
    for reading in (ReleaseReading(space), ReleaseReading(space, weights)):
        fit = fit_ridge(torch.as_tensor(reading(releases)), torch.as_tensor(memberships, dtype=torch.float64),
                        prior_mean=np.full(population.n_individuals, 0.25))
        lifted = reading.lift(fit)
        assert lifted.weights.shape == (population.n_attributes, population.n_individuals)
        expected = fit.predict(torch.as_tensor(reading(fresh))).numpy()
        np.testing.assert_allclose(lifted.predict(torch.as_tensor(fresh)).numpy(), expected, rtol=0, atol=1e-10)
        assert (lifted.ridge, lifted.path, lifted.releases) == (fit.ridge, fit.path, fit.releases)


def test_the_linear_attacks_read_the_coordinates_where_they_lose_nothing() -> None:
    """Through the evaluation's knowledge (attack_knowledge with a CoordinateSimulator), ``linear`` and ``whitened``
    fit noise in the row space and isotropic noise in the row-space coordinates (K - 1 < |Q|) and per-attribute
    noise on the whole release; in coordinates their curve is the last doubling alone (maximum / 2, maximum), and
    they read what the whole-release fit reads, within 0.01 AUC on the same 100 fresh releases."""
    from bngp.attacks.base import attack_knowledge
    from bngp.data.independent import simulate_independent
    from bngp.defenses.budget import BudgetSetting, reference_at_budget, shaped_at_budget
    from bngp.evaluate import evaluate_defense
    from bngp.data.priors import UniformSubsetPrior
    import bngp.reading as references

    population = simulate_independent(40, 40, 160, seed=21)
    setting = BudgetSetting.of(population, 20)
    budget = setting.resolve("0.875x")
    prior = UniformSubsetPrior(40, 20)
    for defense, read in ((shaped_at_budget(setting, budget, 0.4), True),
                          (reference_at_budget("gaussian", setting, budget), True),
                          (reference_at_budget("linear-optimal", setting, budget), False)):
        linear, whitened = LinearAttack(), WhitenedAttack()
        knowledge = attack_knowledge(population, prior, defense, 20,
                                     references.CoordinateSimulator(population, prior, defense, 20))
        linear.fit_together_with(whitened).fit(knowledge, seed=2)
        whitened.fit(knowledge, seed=2)
        for attack in (linear, whitened):
            assert (attack.describe().get("reading") == f"row-space coordinates ({setting.space.rank} values)") is read
        maximum = max_shadow_releases(40, 160)
        if read:
            assert linear.learning_curve_.releases == ((maximum + 1) // 2, maximum)
            coordinates = evaluate_defense(population, prior, defense, "linear,whitened", releases=100, seed=5,
                                           n_members=20, progress=False)
            original = references.CoordinateSimulator.reading
            try:
                references.CoordinateSimulator.reading = property(lambda self: None)
                whole = evaluate_defense(population, prior, defense, "linear,whitened", releases=100, seed=5,
                                         n_members=20, progress=False)
            finally:
                references.CoordinateSimulator.reading = original
            for name in ("linear", "whitened"):
                assert coordinates.attacks[name].auc == pytest.approx(whole.attacks[name].auc, abs=0.01)
                assert coordinates.attacks[name].to_dict()["reading"] == linear.reading_
                assert "reading" not in whole.attacks[name].to_dict()


def test_the_bayesian_attacker_reads_the_coordinates_of_releases_on_the_hull() -> None:
    """Noise in the row space puts every release on t + span(V) up to clipping: the evaluation's Bayesian network
    reads the r coordinates (its input and head r wide, its record says so) and reads what the whole-release network
    reads, within 0.03 AUC on the same 100 fresh releases (a network trained 60 steps from the linear attack's map of
    the release, restricted to the hull; the difference is training noise); isotropic Laplace noise is not on the
    hull and is read whole.  Without a warm start it fits its own ridge map of the coordinates."""
    from bngp.attacks.base import attack_knowledge
    from bngp.attacks.training import AttackerTrainingConfig
    from bngp.data.independent import simulate_independent
    from bngp.defenses.budget import BudgetSetting, reference_at_budget, shaped_at_budget
    from bngp.evaluate import evaluate_defense
    from bngp.data.priors import UniformSubsetPrior
    import bngp.reading as reading

    population = simulate_independent(40, 40, 160, seed=21)
    setting = BudgetSetting.of(population, 20)
    budget = setting.resolve("0.875x")
    prior = UniformSubsetPrior(40, 20)
    config = AttackerTrainingConfig(steps=60, validate_every=20)
    shaped = shaped_at_budget(setting, budget, 0.4)
    for defense, on_hull in ((shaped, True), (reference_at_budget("laplace", setting, budget), False)):
        attack = BayesianAttack(config)
        attack.fit(attack_knowledge(population, prior, defense, 20, reading.CoordinateSimulator(population, prior, defense, 20)),
                   seed=2)
        spec = attack.attacker_.spec
        assert (spec.n_outputs, spec.release_width) == ((setting.space.rank, 160) if on_hull else (160, None))
        assert (attack.describe().get("reading") == f"row-space coordinates ({setting.space.rank} values)") is on_hull
    coordinates = evaluate_defense(population, prior, shaped, "linear,bayesian", releases=100, seed=5, n_members=20,
                                   progress=False, attacker=config)
    original = reading.CoordinateSimulator.reading
    try:
        reading.CoordinateSimulator.reading = property(lambda self: None)
        whole = evaluate_defense(population, prior, shaped, "linear,bayesian", releases=100, seed=5, n_members=20,
                                 progress=False, attacker=config)
    finally:
        reading.CoordinateSimulator.reading = original
    assert coordinates.attacks["bayesian"].auc == pytest.approx(whole.attacks["bayesian"].auc, abs=0.03)
    assert coordinates.attacks["bayesian"].auc > 0.6
    assert coordinates.attacks["bayesian"].to_dict()["reading"] == f"row-space coordinates ({setting.space.rank} values)"


def test_linear_box_decodes_a_release_exact_beyond_the_cubes_threshold() -> None:
    """Suppression at 3/4 of L0 on K = 40 x |Q| = 160 releases attributes spanning 30 of the 39 dimensions exactly:
    ``linear-box`` (the ridge map at its posterior's mode over memberships in [0, 1] summing to N; Donoho and
    Tanner's threshold of the cube is 1/2) ranks every member above every non-member on fresh releases, where the
    ridge map alone, fitted on the same shadow releases, does not."""
    from bngp.attacks import BoxLinearAttack
    from bngp.attacks.base import attack_knowledge
    from bngp.data.independent import simulate_independent
    from bngp.data.priors import UniformSubsetPrior
    from bngp.defenses.budget import BudgetSetting, reference_at_budget
    from bngp.metrics import auc

    population = simulate_independent(40, 40, 160, seed=21)
    setting = BudgetSetting.of(population, 20)
    defense = reference_at_budget("suppression", setting, setting.resolve("0.75x"))
    prior = UniformSubsetPrior(40, 20)
    knowledge = attack_knowledge(population, prior, defense, 20)
    options = {"n_shadow_releases": 400, "validation_releases": 200}
    boxed = BoxLinearAttack(**options).fit(knowledge, seed=5)
    linear = LinearAttack(**options).fit(knowledge, seed=spawn_seeds(5, 3)[0])
    releases, memberships = knowledge.simulate(100, 99)
    labels = memberships.ravel()
    box_auc = auc(boxed.score(population.genotypes, releases).ravel(), labels)
    linear_auc = auc(linear.score(population.genotypes, releases).ravel(), labels)
    assert box_auc == 1.0 and linear_auc < 0.999
    with pytest.raises(Exception, match="no differentiable"):
        boxed.score_torch(torch.as_tensor(population.genotypes), torch.as_tensor(releases[:1]))
