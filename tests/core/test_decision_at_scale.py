"""The release decision where the row space's basis is not held (beacon widths): the geometry applied through the
candidates reads what the held basis reads, the calibration holds a bounded number of statistics, the references
read whole are left out where they would not fit (and the record says so), and the memory check of the decision
counts the row-space coordinates, not |Q| values, where the release is read in them."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch

import bngp.data.geometry as geometry
import bngp.reading as reading_module
import bngp.references as references
from bngp.data.independent import simulate_independent
from bngp.data.priors import UniformSubsetPrior
from bngp.decision import check_decision_memory, decide_release
from bngp.defenses.budget import CALIBRATION_DRAWS, BudgetSetting, calibration_draws, reference_at_budget, \
    shaped_at_budget
from bngp.defenses.shrinkage import ShrinkNoiseDefense
from bngp.errors import InsufficientMemoryError
from bngp.linear import box_bytes
from bngp.reading import draw_bytes, reads_in_coordinates, release_coordinates
from bngp.references import SHAPED_GAUSSIAN, SHAPED_OPTIMUM, linear_attack_bytes, linear_attack_score, \
    rank_references
from bngp.release.sampling import release_mechanism, sample_releases
from bngp.rng import torch_generator

MEMBERS = 20


@pytest.fixture(scope="module")
def narrow():
    """K = 40 candidates, |Q| = 160 (K - 1 < |Q|), N = 20, packed: a setting whose space holds its basis and one
    whose space applies it through the candidates."""
    population = simulate_independent(40, 40, 160, seed=21).to_packed()
    held = BudgetSetting.of(population, MEMBERS)
    applied = BudgetSetting.of(population, MEMBERS)
    object.__setattr__(applied, "_space", geometry.PopulationSpace.of(population, MEMBERS, hold_basis=False))
    assert held.space.holds_basis and not applied.space.holds_basis
    return population, held, applied


@pytest.mark.parametrize("kind", ["shaped", "laplace", "suppression"])
def test_coordinates_drawn_through_the_candidates_are_those_of_the_whole_release(kind, narrow, monkeypatch) -> None:
    """ReleaseReading.draw with a basis applied through the candidates gives V^T (x - t) of the very releases
    sample_releases draws from the same generator, in blocks of 3 releases (``_DRAW_VALUES`` = 3 |Q|): float32
    rounding (1e-5), with clipping at work."""
    population, _, setting = narrow
    budget = setting.resolve("0.5x")
    defense = {"shaped": lambda: shaped_at_budget(setting, budget, 0.2, "eigen"),
               "laplace": lambda: reference_at_budget("laplace", setting, budget),
               "suppression": lambda: reference_at_budget("suppression", setting, budget)}[kind]()
    monkeypatch.setattr(reading_module, "_DRAW_VALUES", 3 * population.n_attributes)
    reading = release_coordinates(defense, population, MEMBERS, setting.space)
    assert reading is not None and not reading.space.holds_basis
    mechanism = release_mechanism(population.genotypes)
    b = UniformSubsetPrior(population.n_individuals, MEMBERS).sample_torch(40, torch_generator(1))
    whole = sample_releases(mechanism, defense, b, torch_generator(5))
    drawn = reading.draw(mechanism, defense, b, torch_generator(5)).numpy()
    if kind != "suppression":
        assert np.mean((whole == 0) | (whole == 1)) > 1e-3
    np.testing.assert_allclose(drawn, reading(whole), atol=1e-5)


def test_a_shaped_mechanism_through_the_candidates_releases_what_the_held_basis_releases(narrow) -> None:
    """The same shaped mechanism on the two spaces: the same marginal scales, calibration, releases (same
    generator) and guarantee, to rounding."""
    population, held, applied = narrow
    one = shaped_at_budget(held, held.resolve("0.75x"), 0.3, "eigen")
    other = shaped_at_budget(applied, applied.resolve("0.75x"), 0.3, "eigen")
    np.testing.assert_allclose(other.scale, one.scale, rtol=1e-10)
    assert other.direction_scales == pytest.approx(one.direction_scales, rel=1e-9)
    mechanism = release_mechanism(population.genotypes)
    b = UniformSubsetPrior(population.n_individuals, MEMBERS).sample_torch(16, torch_generator(2))
    np.testing.assert_allclose(sample_releases(mechanism, other, b, torch_generator(4)),
                               sample_releases(mechanism, one, b, torch_generator(4)), atol=1e-6)
    assert other.guarantee.epsilon == pytest.approx(one.guarantee.epsilon, rel=1e-9)


def test_the_linear_attack_through_the_candidates_reads_what_the_held_basis_reads(narrow) -> None:
    """Same seed, same releases: the converged linear attack's AUC on either space, within 0.002 (float32
    rounding of the coordinates moves the fitted penalty's path only)."""
    population, held, applied = narrow
    for kind in ("laplace", "shaped"):
        build = (lambda s: reference_at_budget("laplace", s, s.resolve("0.875x"))) if kind == "laplace" else \
            (lambda s: shaped_at_budget(s, s.resolve("0.875x"), 0.0))
        one = linear_attack_score(build(held), population, MEMBERS, 5, space=held.space)
        other = linear_attack_score(build(applied), population, MEMBERS, 5, space=applied.space)
        assert other.auc == pytest.approx(one.auc, abs=0.002) and one.auc > 0.6


def test_the_ranking_without_a_held_basis_leaves_out_the_row_space_optimum_and_says_so(narrow) -> None:
    population, held, applied = narrow
    one = rank_references(population, MEMBERS, "0.875x", seed=2, shrink_grid=(0.5,), setting=held)
    other = rank_references(population, MEMBERS, "0.875x", seed=2, shrink_grid=(0.5,), setting=applied)
    labels = {score.label for score in other.scores}
    assert SHAPED_OPTIMUM in {score.label for score in one.scores} and SHAPED_OPTIMUM not in labels
    assert SHAPED_GAUSSIAN in labels and "gaussian population eigen" in labels
    assert f"no {SHAPED_OPTIMUM}" in other.to_dict()["skipped"] and "skipped" not in one.to_dict()
    scores = {score.label: score.auc for score in one.scores}
    for score in other.scores:
        assert score.auc == pytest.approx(scores[score.label], abs=0.01), score.label


def test_references_read_whole_are_left_out_where_they_would_not_fit(narrow, monkeypatch) -> None:
    """With the whole release's linear attack refused and the coordinates' admitted, the ranking holds no
    per-attribute linear-decoder optimum and says why; the decision still reads a Laplace release and its matched
    rows in coordinates."""
    population, held, _ = narrow
    estimate = references.linear_attack_bytes
    monkeypatch.setattr(references, "linear_attack_bytes",
                        lambda population, composition=1, test_releases=references.TEST_RELEASES, coordinates=False:
                        estimate(population, composition, test_releases, True) if coordinates else 2**60)
    ranking = rank_references(population, MEMBERS, "0.875x", seed=2, shrink_grid=(0.5,), setting=held)
    labels = {score.label for score in ranking.scores}
    assert "linear-optimal laplace" not in labels and SHAPED_OPTIMUM in labels
    assert "no per-attribute linear-optimal reference" in ranking.to_dict()["skipped"]
    defense = reference_at_budget("laplace", held, held.resolve("0.8x"))
    decision = decide_release(population, MEMBERS, defense, seed=1, setting=held)
    assert [row.label for row in decision.rows][:3] == ["this release", "Laplace noise (matched)",
                                                        "Gaussian noise (matched)"]
    assert "no per-attribute linear-optimal reference" in decision.left_out
    assert any("references left out: no per-attribute" in line for line in decision.summary_lines())
    assert any(line.startswith("References left out: no per-attribute") for line in decision.markdown_lines())
    with pytest.raises(InsufficientMemoryError):
        linear_attack_score(reference_at_budget("linear-optimal", held, held.resolve("0.8x")), population, MEMBERS, 1)


def test_the_calibration_holds_at_most_its_values() -> None:
    """2,000 memberships up to 16,777 attributes (2^25 values), then 2^25 // |Q|, at least 16."""
    assert calibration_draws(5000) == CALIBRATION_DRAWS == 2000
    assert calibration_draws(100_000) == 335 and calibration_draws(1_000_000) == 33
    assert calibration_draws(10**8) == 16
    population = simulate_independent(30, 10, 40_000, seed=1)
    setting = BudgetSetting.of(population, 15)
    assert setting.statistics.shape == (838, 40_000) and setting.memberships.shape == (838, 30)


def test_the_decision_at_beacon_width_is_checked_in_coordinates(monkeypatch) -> None:
    """2,500 candidates x 10^6 attributes with 4 GiB available: a Laplace release (read in the 2,499 coordinates)
    passes the decision's memory check, a per-attribute release (read whole, 136 GiB) is refused in one line."""
    beacon = SimpleNamespace(n_individuals=2500, n_attributes=10**6)
    monkeypatch.setattr("bngp.memory.available_memory", lambda: 4 * 2**30)
    width = beacon.n_attributes
    laplace = ShrinkNoiseDefense(np.zeros(width), np.full(width, 0.01), np.full(width, 0.1), "laplace", 1250)
    per_attribute = ShrinkNoiseDefense(np.zeros(width), np.linspace(0.0, 0.01, width), np.full(width, 0.1), "laplace",
                                       1250)
    assert reads_in_coordinates(laplace, beacon) and not reads_in_coordinates(per_attribute, beacon)
    needed = linear_attack_bytes(beacon, coordinates=True)
    # 4 releases at a time (128 MiB) and blocks of 4,096 attributes of up to 1,000 releases (98 MB), then the fit
    # on 2,499 coordinates (0.37 GiB) and the box decoding of 500 test releases (0.27 GiB): 0.87 GiB, where the
    # whole release's reading needs 136 GiB
    assert draw_bytes(width, 2500, 500, held=False) == 32 * 4 * width + 24 * 500 * 4096 + 8 * 500 * 2500
    assert draw_bytes(width, 2500, 500) == 32 * 33 * width
    assert box_bytes(2500, 500) == 36 * 2500**2 + 48 * 500 * 2500
    assert 0.8 * 2**30 < needed < 0.9 * 2**30
    check_decision_memory(beacon, 1, laplace)
    with pytest.raises(InsufficientMemoryError, match=r"^the converged linear attack at 2,500 individuals x "
                                                      r"1,000,000 released values needs about 13\d\.\d GiB"):
        check_decision_memory(beacon, 1, per_attribute)


def test_the_closed_form_over_levels_in_chunks_is_the_same_mean(narrow, monkeypatch) -> None:
    """StatisticLevels.mean_of in chunks of 7 levels: the same loss and slope as in one pass (sums in another
    order: 1e-12 relative) and as the mean over the rows themselves."""
    import bngp.defenses.shrinkage as shrinkage

    _, setting, _ = narrow
    defense = reference_at_budget("shrinkage", setting, setting.resolve("0.6x"), shrink=0.3)
    whole = defense.expected_loss_and_slope(setting.levels)
    rows = defense.expected_loss_and_slope(setting.statistics)
    monkeypatch.setattr(shrinkage, "LEVEL_CHUNK", 7)
    assert setting.levels.values.size > 70
    chunked = defense.expected_loss_and_slope(setting.levels)
    assert chunked == pytest.approx(whole, rel=1e-12) and chunked == pytest.approx(rows, rel=1e-12)
    assert defense.expected_loss(setting.levels) == pytest.approx(whole[0], rel=1e-12)


def test_releases_read_by_blocks_of_attributes_have_the_whole_releases_law(narrow, monkeypatch) -> None:
    """With blocks of 64 of the 160 attributes, ReleaseReading.draw forms each block's release with that block's
    noise (another order of the draws): over 3,000 releases of the same memberships the coordinates' means and
    standard deviations match those of whole releases read afterwards (within 5 standard errors for the means and
    6% for the deviations), for shrinkage plus Laplace noise and for time-sharing (drawn in coordinates)."""
    population, _, setting = narrow
    monkeypatch.setattr(geometry, "_BLOCK", 64)
    mechanism = release_mechanism(population.genotypes)
    b = UniformSubsetPrior(population.n_individuals, MEMBERS).sample_torch(1, torch_generator(1)).repeat(3000, 1)
    for kind in ("shrinkage", "time-sharing"):
        defense = reference_at_budget(kind, setting, setting.resolve("0.5x"),
                                      **({"shrink": 0.3} if kind == "shrinkage" else {}))
        reading = release_coordinates(defense, population, MEMBERS, setting.space)
        drawn = reading.draw(mechanism, defense, b, torch_generator(7)).numpy()
        whole = reading(sample_releases(mechanism, defense, b, torch_generator(8)))
        spread = whole.std(axis=0)
        assert np.all(np.abs(drawn.mean(axis=0) - whole.mean(axis=0)) <= 5 * spread * np.sqrt(2 / 3000) + 1e-9), kind
        np.testing.assert_allclose(drawn.std(axis=0), spread, rtol=0.06, atol=1e-9)
