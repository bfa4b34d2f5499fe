"""The reference ranking with noise shaped to the population (bngp.references, bngp.defenses.shaped): the linear
attack in row-space coordinates reads what it reads on the whole release, shaped references join the ranking only
where K - 1 < |Q|, a defender holds a shaped start exactly and stays on its budget, the decision gives the row-space
Gaussian row with the threat model, and noise shaped to a panel other than the candidates leaks."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest
import torch

from bngp.cli import main
from bngp.data.geometry import THREAT_MODEL, PopulationSpace
from bngp.data.npz import save_population
from bngp.data.independent import simulate_independent
from bngp.data.population import Population
from bngp.data.priors import UniformSubsetPrior
from bngp.decision import decide_release
from bngp.defenses.budget import BudgetSetting, reference_at_budget, row_space_optimal_at_budget, shaped_at_budget
from bngp.defenses.shaped import ShapedNoiseDefense, direction_weights
from bngp.defenses.shrinkage import ShrinkNoiseDefense
from bngp.game import Game, GameConfig
from bngp.game.start import BudgetSurface
from bngp.reading import release_coordinates
from bngp.references import SHAPED_GAUSSIAN, SHAPED_OPTIMUM, linear_attack_score, rank_references
from bngp.rng import torch_generator

MEMBERS = 20


@pytest.fixture(scope="module")
def narrow():
    """K = 40 candidates, 40 reference, |Q| = 160 independent attributes (K - 1 < |Q|), N = 20."""
    population = simulate_independent(40, 40, 160, seed=21)
    return population, BudgetSetting.of(population, MEMBERS)


def _config(**overrides) -> GameConfig:
    settings = dict(steps=4, objective="utility-budget", budget=0.01, fresh_check_steps=0, eval_every=2,
                    checkpoint_every=2, attacker_refit_every=2, batch_size=8, eval_batch=16, refit_releases=64, seed=3)
    settings.update(overrides)
    return GameConfig.from_flat(settings)


@pytest.mark.parametrize("kind", ["shaped", "laplace", "suppression", "shrunk", "time-sharing"])
def test_coordinates_read_what_the_whole_release_reads(kind, narrow) -> None:
    """For noise in the row space and for isotropic noise the best linear map depends on x only through V^T (x - t)
    (bngp.data.geometry); a release with per-attribute shrinkage and no noise (suppression; ``shrunk``: a third of
    the attributes exact, a third suppressed, a third shrunk by 0.3) through V^T (x_E - t_E) on the attributes it
    releases; time-sharing (t or f(D), both on the affine hull) through V^T (x - t): the converged linear attack in
    coordinates reads the whole release's AUC within 0.01 (the same seed;
    the difference is the fits' own variation and the clipping)."""
    population, setting = narrow
    budget = setting.resolve("0.5x" if kind == "time-sharing" else "0.875x")  # at 7/8, f(D) in 1 release of 8
    if kind == "shaped":
        defense = shaped_at_budget(setting, budget, 0.4)
    elif kind == "shrunk":
        width = population.n_attributes
        defense = ShrinkNoiseDefense(np.tile([0.0, 1.0, 0.3], width // 3 + 1)[:width], np.zeros(width), setting.target,
                                     "laplace", MEMBERS)
    else:
        defense = reference_at_budget(kind, setting, budget)
    reading = release_coordinates(defense, population, MEMBERS)
    assert reading is not None and reading.width == setting.space.rank
    inside = linear_attack_score(defense, population, MEMBERS, 5)
    whole = linear_attack_score(defense, population, MEMBERS, 5, whole=True)
    assert inside.auc == pytest.approx(whole.auc, abs=0.01)
    assert inside.auc > 0.6  # the test reads a signal, not chance


def test_per_attribute_noise_is_read_whole(narrow) -> None:
    """The linear-decoder optimum and any per-attribute noise: each attribute is clipped at its own bounds, which
    the coordinates would not see, so they are read whole."""
    population, setting = narrow
    budget = setting.resolve("0.75x")
    assert release_coordinates(reference_at_budget("linear-optimal", setting, budget), population, MEMBERS) is None
    width = population.n_attributes
    noisy = ShrinkNoiseDefense(np.zeros(width), np.linspace(0.0, 0.05, width), setting.target, "gaussian", MEMBERS)
    assert release_coordinates(noisy, population, MEMBERS) is None


def test_shaped_references_join_the_ranking_only_below_full_rank(narrow, wide_population, wide_setting) -> None:
    """With K - 1 < |Q| the ranking holds Gaussian noise in the row space (flat and eigen, with each shrinkage);
    with K >= |Q| the row space is the whole space and it holds none."""
    population, setting = narrow
    ranking = rank_references(population, MEMBERS, "0.875x", seed=2, shrink_grid=(0.5,), setting=setting)
    labels = [score.label for score in ranking.scores]
    assert {SHAPED_GAUSSIAN, SHAPED_OPTIMUM, "gaussian population eigen", "shrinkage a=0.5 population flat",
            "shrinkage a=0.5 population eigen"} <= set(labels)
    isotropic = min(s.auc for s in ranking.scores if "population" not in s.label and s.label != "time-sharing")
    shaped = min(s.auc for s in ranking.scores if "population" in s.label)
    assert shaped < isotropic  # most of isotropic noise lies outside the 39-dimensional row space of 160
    wide = rank_references(wide_population, 30, "0.875x", seed=2, shrink_grid=(0.5,), setting=wide_setting)
    assert not any("population" in score.label for score in wide.scores)


def test_a_defender_holds_a_shaped_start_and_its_budget(narrow) -> None:
    """G started at a shaped reference releases t + (1 - a)(f(D) - t) + V (w o e) for the unit draws e of its
    randomness (float32: 1e-6); moved off its budget, the surface scales sigma back onto it (closed form, 1e-3), with the loss's derivatives in
    the factors of sigma and of alpha equal to their finite differences."""
    population, setting = narrow
    budget = setting.resolve("0.875x")
    reference = shaped_at_budget(setting, budget, 0.3, "eigen")
    prior = UniformSubsetPrior(population.n_individuals, MEMBERS)
    game = Game(population, prior, _config(budget=budget.value), start=reference)
    defender = game.defender.eval()
    assert defender.spec.row_space_rank == reference.space.rank
    generator = torch_generator(4)
    b = prior.sample_torch(32, generator)
    r = defender.sample_r(32, generator)
    assert r.shape[1] == defender.spec.noise_dim + reference.space.rank
    x_hat = game.mechanism.statistic(b)
    with torch.no_grad():
        xi = defender(b, r, x_hat).numpy()
    unit = r[:, defender.spec.noise_dim:].double().numpy()
    expected = reference.shrink * (reference.target - x_hat.double().numpy()) + (unit * reference.direction_scales) \
        @ reference.space.basis.T
    np.testing.assert_allclose(xi, expected, atol=1e-6)
    np.testing.assert_allclose(defender.marginal_noise_scales().numpy(), reference.scale, rtol=1e-5)
    surface = BudgetSurface.of(reference, population, prior, budget.value)
    with torch.no_grad():
        defender.noise_scale.mul_(1.7)
    surface.project(defender)
    shrink = defender.shrink_weight.detach().double().numpy()
    assert surface.loss(shrink, defender.noise_scale.detach().double().numpy()) == pytest.approx(budget.value, rel=1e-3)
    # the derivative in the noise's factor, per direction mapped to attributes: the central finite difference
    sigma = 1.3 * defender.noise_scale.detach().double().numpy()
    _, slope, by_shrink = surface.loss_and_slopes(shrink, sigma)
    finite = (surface.loss(shrink, (1 + 1e-5) * sigma) - surface.loss(shrink, (1 - 1e-5) * sigma)) / 2e-5
    assert slope > 0 and slope == pytest.approx(finite, rel=1e-6)
    finite = (surface.loss(shrink, sigma, 1 + 1e-5) - surface.loss(shrink, sigma, 1 - 1e-5)) / 2e-5
    assert by_shrink > 0 and by_shrink == pytest.approx(finite, rel=1e-6)


def test_a_defender_holds_the_row_space_optimum(narrow) -> None:
    """G started at the row-space optimum (one shrinkage a_i and scale w_i per direction) releases
    t + V diag(1 - a) V^T (f(D) - t) + V (w o e) (float32: 1e-6), and its budget surface reads the closed-form loss
    of the reference (its 256 draws against the reference's 2,000: within 1%)."""
    population, setting = narrow
    budget = setting.resolve("0.875x")
    reference = row_space_optimal_at_budget(setting, budget)
    assert not reference.uniform
    prior = UniformSubsetPrior(population.n_individuals, MEMBERS)
    game = Game(population, prior, _config(budget=budget.value), start=reference)
    defender = game.defender.eval()
    assert defender.shrink_weight.numel() == reference.space.rank
    generator = torch_generator(6)
    b = prior.sample_torch(32, generator)
    r = defender.sample_r(32, generator)
    x_hat = game.mechanism.statistic(b)
    with torch.no_grad():
        xi = defender(b, r, x_hat).numpy()
    unit = r[:, defender.spec.noise_dim:].double().numpy()
    expected = reference.signal_shift(x_hat.double().numpy()) + (unit * reference.direction_scales) @ reference.space.basis.T
    np.testing.assert_allclose(xi, expected, atol=1e-6)
    surface = BudgetSurface.of(reference, population, prior, budget.value)
    state = (defender.shrink_weight.detach().double().numpy(), defender.noise_scale.detach().double().numpy())
    assert surface.loss(*state) == pytest.approx(budget.value, rel=0.01)


def test_the_decision_gives_the_row_space_gaussian_and_the_threat_model(narrow, wide_population, wide_setting) -> None:
    """Below full rank the decision adds matched Gaussian noise in the row space, which reads no more than plain
    Gaussian noise at the same loss, and states the threat model; at full rank neither."""
    population, setting = narrow
    defense = reference_at_budget("laplace", setting, setting.resolve("0.75x"))
    loss = setting.measured_loss(defense)
    ranking = rank_references(population, MEMBERS, loss, seed=4, shrink_grid=(0.5,), setting=setting)
    decision = decide_release(population, MEMBERS, defense, seed=1, setting=setting, ranking=ranking, loss=loss)
    rows = {row.label: row for row in decision.rows}
    shaped = rows["Gaussian noise in the population's row space (matched)"]
    assert shaped.auc < rows["Gaussian noise (matched)"].auc
    assert decision.threat_model == THREAT_MODEL
    assert any(THREAT_MODEL in line for line in decision.markdown_lines())
    wide_defense = reference_at_budget("laplace", wide_setting, wide_setting.resolve("0.75x"))
    wide_loss = wide_setting.measured_loss(wide_defense)
    wide_ranking = rank_references(wide_population, 30, wide_loss, seed=4, shrink_grid=(0.5,), setting=wide_setting)
    wide = decide_release(wide_population, 30, wide_defense, seed=1, setting=wide_setting, ranking=wide_ranking,
                          loss=wide_loss)
    assert wide.threat_model is None
    assert not any("row space" in row.label for row in wide.rows)


class _ShapedElsewhere(ShapedNoiseDefense):
    """The mistake the threat model warns of: the signal released whole, t + (1 - a)(f(D) - t), and the noise
    V (w o g) in the row space of another panel."""

    def noise(self, b: torch.Tensor, x_hat: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        unit = torch.randn((x_hat.shape[0], self.space.rank), generator=generator, dtype=torch.float64)
        noise = (unit * torch.as_tensor(self.direction_scales)) @ torch.as_tensor(self.space.basis).T
        return noise + float(self.shrink[0]) * (torch.as_tensor(self.target) - x_hat.double())


def test_noise_shaped_to_the_reference_panel_leaks() -> None:
    """The threat model's warning: shaped to the reference panel's row space instead of the candidates', the
    members' variation outside the panel's span is released without noise, and the linear attack on the whole
    release reads AUC >= 0.99 at 7/8 of L0; shaped to the candidates, the same noise reads below 0.9."""
    population = simulate_independent(40, 40, 160, seed=33)
    setting = BudgetSetting.of(population, MEMBERS)
    budget = setting.resolve("0.875x")
    panel = Population(population.reference, population.reference)
    panel_space = replace(PopulationSpace.of(panel, MEMBERS), target=setting.space.target)
    shape = _ShapedElsewhere(panel_space, 0.5, direction_weights(panel_space, "flat"), MEMBERS)
    leaking = setting.scaled_to(shape.scaled, budget, budget.value)
    assert release_coordinates(leaking, population, MEMBERS) is None  # read whole, not in the panel's coordinates
    assert linear_attack_score(leaking, population, MEMBERS, 7).auc >= 0.99
    assert linear_attack_score(shaped_at_budget(setting, budget, 0.5), population, MEMBERS, 7).auc < 0.9


@pytest.fixture(scope="module")
def narrow_file(narrow, tmp_path_factory):
    path = tmp_path_factory.mktemp("narrow") / "pop.npz"
    save_population(narrow[0], path)
    return path


def test_cli_trains_from_a_shaped_start_and_evaluates_it(narrow_file, tmp_path, capsys) -> None:
    """K - 1 < |Q|: `bngp train --utility-budget` starts from the best reference, which is shaped to the row space
    here (isotropic noise wastes 121/160 of its variance); the run's defender holds row-space noise, meets the
    budget, is read back by `bngp evaluate --defense run:...`, and the decision states the threat model."""
    run = tmp_path / "run"
    code = main(["train", "--population", str(narrow_file), "--members", str(MEMBERS), "--utility-budget", "0.875x",
                 "--steps", "4", "--refit-every", "2", "--eval-every", "2", "--fresh-check-steps", "0", "--seed", "3",
                 "--quiet", "--out", str(run)])
    assert code == 0
    printed = json.loads(capsys.readouterr().out.split("\ndecision:")[0])
    summary = json.loads((run / "summary.json").read_text())
    assert "population" in summary["start"]["reference"] and summary["budget"]["met"]
    assert printed["start"]["reference"] == summary["start"]["reference"]
    decision = json.loads((run / "decision.json").read_text())
    assert decision["threat_model"] == THREAT_MODEL
    assert "Threat model" in (run / "decision.md").read_text()
    out = tmp_path / "eval.json"
    assert main(["evaluate", "--no-decision", "--population", str(narrow_file), "--members", str(MEMBERS), "--defense",
                 f"run:{run}", "--attacks", "linear", "--releases", "4", "--quiet", "--out", str(out)]) == 0
    assert json.loads(out.read_text())["budget"]["measured_loss"] == summary["budget"]["kept_state_value"]


@pytest.mark.parametrize("spec, message", [
    ("budget-laplace:budget=0.5x,space=population", "does not take `space`"),
    ("shrinkage:budget=0.5x,shrink=0.3,noise=laplace,space=population", "shapes Gaussian noise only"),
    ("budget-gaussian:budget=0.5x,weighting=eigen", "give it with `space=population`"),
    ("gaussian:epsilon=1,delta=1e-5,space=rows", "`space` must be attributes or population"),
    ("matched-laplace:run=RUN,space=population", "matches the Gaussian mechanism only"),
    ("matched-gaussian:run=RUN,delta=1e-5,space=rows", "`space` must be attributes or population"),
])
def test_cli_refuses_bad_shaped_specs_in_one_line(spec, message, narrow_file, tmp_path, capsys) -> None:
    """The matched SPECs are refused before their run is read (RUN need not exist)."""
    code = main(["evaluate", "--no-decision", "--population", str(narrow_file), "--members", str(MEMBERS), "--defense", spec,
                 "--attacks", "linear", "--quiet", "--out", str(tmp_path / "e.json")])
    error = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(error) == 1 and message in error[0]
    assert not (tmp_path / "e.json").exists()


def test_scores_standardised_within_each_release_see_through_per_release_offsets() -> None:
    """Scores s = b + e + c_r (e ~ N(0, 1/4) per individual, c_r ~ N(0, 100) per release): pooled over releases the
    offsets c_r bury the signal (AUC near 1/2), within each release they cancel; standardised within release the
    pooled AUC is the per-release one, Phi(1 / (0.5 sqrt 2)) = 0.921 (closed form for two normals one apart,
    sd 0.5; 200 x 100 scores: within 0.02)."""
    from bngp.metrics import auc
    from bngp.references import within_release

    rng = np.random.default_rng(0)
    labels = np.zeros((200, 100))
    for row in labels:
        row[rng.choice(100, 50, replace=False)] = 1.0
    scores = labels + 0.5 * rng.standard_normal(labels.shape) + 10.0 * rng.standard_normal((200, 1))
    assert auc(scores, labels) < 0.6
    assert auc(within_release(scores), labels) == pytest.approx(0.921, abs=0.02)
    assert np.all(within_release(np.ones((3, 4))) == 0.0)


def test_a_row_space_too_large_for_memory_leaves_the_shaped_references_out_and_says_so(narrow, monkeypatch) -> None:
    """Where the basis V would not fit in memory the ranking holds the isotropic references only, read whole, and
    its record says why the shaped ones are missing."""
    from bngp.errors import InsufficientMemoryError

    population, _ = narrow

    def refuse(self):
        raise InsufficientMemoryError("the population's row space needs about 9.0 GiB of memory")

    monkeypatch.setattr(BudgetSetting, "space", property(refuse))
    ranking = rank_references(population, MEMBERS, "0.875x", seed=2, shrink_grid=(0.5,),
                              setting=BudgetSetting.of(population, MEMBERS))
    assert not any("population" in score.label for score in ranking.scores)
    assert "row space needs" in ranking.to_dict()["skipped"]


@pytest.mark.parametrize("kind", ["shaped", "optimum", "laplace", "suppression"])
def test_coordinates_drawn_directly_are_those_of_the_whole_release(kind, narrow, monkeypatch) -> None:
    """ReleaseReading.draw gives V^T (x - t) of the very releases sample_releases draws from the same generator:
    noise shaped to the row space is drawn in the coordinates (c + V^T (clip(t + V c) - (t + V c)), the same unit
    draws), other releases are read by blocks in float32 (blocks of 7 rows here, so that several are formed): the
    same values up to float32 rounding (1e-6), with clipping at work on a tenth of a percent or more of the values."""
    import bngp.reading as reading_module
    from bngp.release.sampling import release_mechanism, sample_releases

    population, setting = narrow
    budget = setting.resolve("0.5x")
    defense = {"shaped": lambda: shaped_at_budget(setting, budget, 0.2, "eigen"),
               "optimum": lambda: row_space_optimal_at_budget(setting, budget),
               "laplace": lambda: reference_at_budget("laplace", setting, budget),
               "suppression": lambda: reference_at_budget("suppression", setting, budget)}[kind]()
    monkeypatch.setattr(reading_module, "_DRAW_BLOCK", 7)
    reading = release_coordinates(defense, population, MEMBERS, setting.space)
    assert reading is not None
    mechanism = release_mechanism(population.genotypes)
    b = UniformSubsetPrior(population.n_individuals, MEMBERS).sample_torch(40 if kind != "shaped" else 400,
                                                                           torch_generator(1))
    whole = sample_releases(mechanism, defense, b, torch_generator(5))
    drawn = reading.draw(mechanism, defense, b, torch_generator(5)).numpy()
    if kind != "suppression":
        assert np.mean((whole == 0) | (whole == 1)) > 1e-3
    np.testing.assert_allclose(drawn, reading(whole), atol=1e-6)


def test_a_trained_defender_at_its_start_is_read_as_its_start(narrow, wide_population, wide_setting) -> None:
    """A defender whose network output is zero releases a shrinkage-plus-noise mechanism
    (TrainedDefense.closed_form): at a shaped start and at a per-attribute one, the very reference it started from
    (same_release); not once its output layer moves, nor in another row space; a parameter moved by 1e-3 is another
    release."""
    population, setting = narrow
    budget = setting.resolve("0.875x")
    reference = row_space_optimal_at_budget(setting, budget)
    prior = UniformSubsetPrior(population.n_individuals, MEMBERS)
    game = Game(population, prior, _config(budget=budget.value), start=reference)
    delivered = game.players.delivered_defense()
    closed = delivered.closed_form(setting.space)
    assert isinstance(closed, ShapedNoiseDefense) and closed.same_release(reference)
    assert delivered.closed_form(None) is None
    other = PopulationSpace.of(simulate_independent(40, 40, 160, seed=22), MEMBERS)
    assert delivered.closed_form(other) is None
    moved = ShapedNoiseDefense(setting.space, reference.direction_shrink, reference.direction_scales * 1.001, MEMBERS)
    assert not moved.same_release(reference) and not reference.same_release(moved)
    with torch.no_grad():
        game.defender.net[-1].bias[0] = 1e-3
    assert delivered.closed_form(setting.space) is None

    wide = reference_at_budget("linear-optimal", wide_setting, wide_setting.resolve("0.5x"), law="laplace")
    wide_prior = UniformSubsetPrior(wide_population.n_individuals, 30)
    wide_game = Game(wide_population, wide_prior, _config(budget=wide_setting.resolve("0.5x").value, noise_law="laplace"),
                     start=wide)
    closed = wide_game.players.delivered_defense().closed_form()
    assert type(closed) is ShrinkNoiseDefense and closed.same_release(wide) and not closed.same_release(reference)


def test_a_shaped_defender_releases_only_in_the_row_space_and_is_refitted_there(narrow, monkeypatch, tmp_path) -> None:
    """Started at a shaped reference, G's network output is projected onto the row space
    (DefenderSpec.row_space_output): with a moved output layer its release before clipping, f(D) + xi, still lies
    on t + span(V) (float32: 1e-6), the spec survives the artifact, the in-game attacker reads the r row-space
    coordinates (its input, widths and head r wide), its refit fits the ridge map of those coordinates, and the
    coordinates the refit forms directly are those of the clipped release (float32: 2e-5); the defender's step forms
    the release and its coordinates with the values and gradients of G's forward read by H (float32)."""
    import bngp.game.selection as selection
    from bngp.defenses.artifact import load_defender, save_defender

    population, setting = narrow
    budget = setting.resolve("0.875x")
    reference = shaped_at_budget(setting, budget, 0.3)
    prior = UniformSubsetPrior(population.n_individuals, MEMBERS)
    game = Game(population, prior, _config(budget=budget.value), start=reference)
    defender = game.defender.eval()
    assert defender.spec.row_space_output
    with torch.no_grad():
        defender.net[-1].weight.normal_(0.0, 0.05)
        defender.net[-1].bias.normal_(0.0, 0.05)
    generator = torch_generator(7)
    b = prior.sample_torch(16, generator)
    r = defender.sample_r(16, generator)
    x_hat = game.mechanism.statistic(b)
    with torch.no_grad():
        raw = (x_hat.double() + defender(b, r, x_hat).double()).numpy() - reference.target
    basis = setting.space.basis
    assert np.abs(raw).max() > 1e-3
    np.testing.assert_allclose(raw - (raw @ basis) @ basis.T, 0.0, atol=1e-6)
    artifact = game.players.delivered_defense().artifact
    path = save_defender(tmp_path / "defender.pt", defender, artifact.fingerprint, artifact.prior, artifact.kappa,
                         artifact.config)
    assert load_defender(path).defender.spec.row_space_output
    widths = []
    original = selection.fit_ridge
    monkeypatch.setattr(selection, "fit_ridge", lambda x, *args, **kwargs: widths.append(x.shape[1]) or original(x, *args, **kwargs))
    game.refits.refit_attacker(score_defender=False)
    rank = setting.space.rank
    assert widths == [rank]
    spec = game.players.attacker_spec
    assert (spec.n_outputs, spec.release_width) == (rank, population.n_attributes)
    attacker = game.players.attacker.eval()
    assert attacker.head.weight.shape == (population.n_individuals, rank)
    releases = game.players.release(b, r)[0]
    coordinates = (releases - defender.shrink_target) @ defender.noise_basis
    with torch.no_grad():
        torch.testing.assert_close(game.players.attack(releases), attacker.head(coordinates) + attacker.net(coordinates))
    # the refits' coordinates, formed without the whole release, are those of the clipped release (float32)
    assert bool(((releases == 0) | (releases == 1)).any())  # clipping at work
    torch.testing.assert_close(game.players.attacker_coordinates(b, r), coordinates, atol=2e-5, rtol=1e-4)
    # the defender's step forms the release and its coordinates from three products with V: the same values and the
    # same gradients as the release of G's forward read by H (float32), with a network output that is not 0
    with torch.no_grad():
        last = defender.net[-1].weight
        last.copy_(0.05 * torch.randn(last.shape, generator=torch_generator(3)))
    weights = torch.randn(rank, generator=torch_generator(4))
    parameters = [defender.noise_scale, defender.shrink_weight, last]

    def gradients(read: torch.Tensor, x: torch.Tensor) -> list[torch.Tensor]:
        return list(torch.autograd.grad((read * weights).sum() + x.sum(), parameters))

    read, x, statistic = game.players.defender_release(b, r)
    whole = game.players.release(b, r)[0].float()
    assert bool(((whole == 0) | (whole == 1)).any()) and torch.equal(statistic, x_hat)
    torch.testing.assert_close(x, whole, atol=2e-5, rtol=1e-4)
    torch.testing.assert_close(read, (whole - defender.shrink_target) @ defender.noise_basis, atol=2e-5, rtol=1e-4)
    for fused, direct in zip(gradients(read, x), gradients((whole - defender.shrink_target) @ defender.noise_basis, whole)):
        assert bool(direct.abs().max() > 0)
        torch.testing.assert_close(fused, direct, atol=1e-4, rtol=1e-3)


def test_an_attacker_reading_coordinates_holds_a_map_of_the_whole_release() -> None:
    """Known answer: on releases x = t + V c of the affine hull, a map W x + beta of the whole release, set as the
    head of an attacker reading the coordinates, gives (W V) c + (beta + W t) = W x + beta (float32: 1e-4); the
    coordinates' width is checked."""
    from bngp.attacks.network import Attacker, AttackerSpec
    from bngp.errors import InputError

    generator = torch.Generator().manual_seed(3)
    width, rank, individuals = 50, 6, 9
    basis = torch.linalg.qr(torch.randn(width, rank, generator=generator))[0]
    target = torch.rand(width, generator=generator)
    attacker = Attacker(AttackerSpec(rank, individuals, release_width=width)).eval()
    with pytest.raises(InputError, match="row-space coordinates|reads"):
        attacker.read_coordinates(basis[:, :-1], target)
    attacker.read_coordinates(basis, target)
    weight, bias = torch.randn(individuals, width, generator=generator), torch.randn(individuals, generator=generator)
    attacker.set_linear_head(weight, bias)
    x = target + torch.randn(20, rank, generator=generator) @ basis.T
    with torch.no_grad():
        torch.testing.assert_close(attacker(x), x @ weight.T + bias, atol=1e-4, rtol=1e-4)
    with pytest.raises(InputError, match="coordinates"):
        AttackerSpec(width, individuals, release_width=width)


def test_the_population_inversion_head_in_coordinates_is_the_whole_one(narrow) -> None:
    """Known answer: on releases x = t + V c of the affine hull, the block-calibrated population inversion formed on
    the coordinates (reading = (V, t)) gives the logits the whole one gives on x (the same features, so the same
    calibration), to 1e-6."""
    from bngp.attacks.network import block_inversion_head

    population, setting = narrow
    space = setting.space
    generator = torch.Generator().manual_seed(5)
    prior = UniformSubsetPrior(population.n_individuals, MEMBERS)
    b = prior.sample_torch(300, generator).double()
    basis, target = torch.as_tensor(space.basis), torch.as_tensor(space.target)
    signal = (b - MEMBERS / population.n_individuals) @ torch.as_tensor(space.left * space.singular_values / MEMBERS)
    coordinates = signal + 0.02 * torch.randn(signal.shape, generator=generator, dtype=torch.float64)
    x = target + coordinates @ basis.T
    genotypes = np.asarray(population.genotypes, dtype=np.float64)
    theta = prior.marginals
    weight, bias = block_inversion_head(genotypes, MEMBERS, theta, x, b)
    weight_c, bias_c = block_inversion_head(genotypes, MEMBERS, theta, coordinates, b, (basis, target))
    assert weight_c.shape == (population.n_individuals, space.rank)
    torch.testing.assert_close(coordinates @ weight_c.T + bias_c, x @ weight.T + bias, atol=1e-6, rtol=1e-6)
