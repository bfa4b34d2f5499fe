"""experiments/benchmarks/game_phases.py end to end on tiny sizes: a plain and a composed size,
the projection, the FLOP accounting of the ridge refit and the report files."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "experiments" / "benchmarks"))

from game_phases import (  # noqa: E402
    MATMUL_BOUND, PAPER_SCALE, REFERENCE_KEYS, _add_flops, _game, _judge, _matmul_verdict, _record_a_round,
    _references_line, _refit_fit_flops, _size, _targets_lines, main, phase_draws, phase_flops, run_references, scaling)


def test_ridge_refit_flops_follow_the_side_the_fit_works_on():
    """Counted by hand, R rows, Q columns, K outputs, V validation draws, P penalties, r = min(R, Q):
    tall (R > Q, the tridiagonal form): syrk R Q^2, sytrd 4/3 Q^3, X^T B 2 R Q K, the reflectors
    applied to X^T B, X_v^T and the map 2 Q^2 (K + V + K); wide (R <= Q, the dual form): syrk Q R^2, eigh 4 R^3, U^T B 2 R r K, kernel
    2 V Q R, rotation 2 V R r, U (...) 2 R r K, map 2 Q R K; both: path P 2 V r K and the
    inversion head's features 2 R Q K."""
    R, Q, K, V, P = 10, 4, 3, 5, 7
    tall = R * Q**2 + 4 / 3 * Q**3 + 2 * R * Q * K + 2 * Q * Q * K + 2 * V * Q * Q + 2 * Q * Q * K
    assert _refit_fit_flops(R, Q, K, V, P) == tall + P * 2 * V * Q * K + 2 * R * Q * K
    R, Q = 4, 10
    wide = Q * R**2 + 4 * R**3 + 2 * R * R * K + 2 * V * Q * R + 2 * V * R * R + 2 * R * R * K + 2 * Q * R * K
    assert _refit_fit_flops(R, Q, K, V, P) == wide + P * 2 * V * R * K + 2 * R * Q * K


def test_the_matmul_verdict_names_the_lowest_matmul_bound_phase():
    """At the paper's scale (composed or not), met only when every matmul-bound phase reaches 0.5 of
    the run's matmul; the checkpoint, the fresh-attacker check and the selection (no matmul-bound
    work) do not take part.  Below it the fractions are reported without a verdict."""
    paper = {"individuals": PAPER_SCALE[0], "attributes": PAPER_SCALE[1]}
    phases = {name: {"fraction_of_matmul": 0.6} for name in MATMUL_BOUND}
    phases["checkpoint"] = {"seconds": 1.0}
    phases["selection"] = {"fraction_of_matmul": 0.2}
    assert "selection" not in MATMUL_BOUND
    assert _matmul_verdict({**paper, "phases": phases}).endswith("lowest refit: releases 0.60: **met**.")
    phases["defender step"] = {"fraction_of_matmul": 0.49}
    assert _matmul_verdict({**paper, "phases": phases}).endswith("lowest defender step 0.49: **NOT met**.")
    assert _matmul_verdict({**paper, "composition": 5, "phases": phases}).endswith("**NOT met**.")
    small = _matmul_verdict({"individuals": 200, "attributes": 1000, "phases": phases})
    assert small.endswith("lowest defender step 0.49: reported, not judged (the target is judged at the paper's "
                          "scale, K = 800, |Q| = 5000).")
    assert "met" not in small.replace("not judged", "")
    assert _matmul_verdict({"phases": {"checkpoint": {"seconds": 1.0}}}) == "Matmul-bound phases: none timed."


def _target_record(individuals: int, attributes: int, composition: int, seconds: float, lowest: float,
                   matmul: float = 100.0) -> dict:
    """A record of a default run as the benchmark writes it, with the few fields the targets read."""
    refs = dict.fromkeys(REFERENCE_KEYS, 1.0) | {"matmul_gflops_float32": matmul}
    phases = {name: {"fraction_of_matmul": 0.9, "seconds_per_call": 0.01 * (size + 1)}
              for size, name in enumerate(MATMUL_BOUND)}
    phases["defender step"]["fraction_of_matmul"] = lowest
    for phase in phases.values():
        phase["seconds_per_call"] *= individuals * attributes / 1e5
    return {"individuals": individuals, "attributes": attributes, "composition": composition, "full_default_run": True,
            "projected_default_seconds": seconds, "peak_memory_gib": 2.5, "phases": phases, **refs}


def test_the_targets_table_judges_each_target_on_its_own_size():
    """Every speed target gets a row: the default runs against their wall times, the paper-scale
    run's memory, the evaluations against 180 s, the matmul-bound phases at the paper's scale only
    (the small size's 0.3 is reported below the table, not judged), the exponents along both axes."""
    records = [_target_record(k, q, 1, 30.0, 0.3) for k, q in ((100, 1000), (200, 1000), (400, 1000), (200, 500),
                                                               (200, 2000))]
    paper = _target_record(800, 5000, 1, 620.0, 0.58, matmul=118.1)
    paper["evaluations"] = [{"defense": "run (the defender the run kept)", "releases": 50, "wall_seconds": 95.0},
                            {"defense": "laplace:epsilon=10", "releases": 50, "wall_seconds": 181.0}]
    paper["evaluation_references"] = {"matmul_gflops_float32": 121.0}
    composed = _target_record(800, 5000, 5, 1900.0, 0.64)
    records += [paper, composed]
    report = {"records": records, "scaling": scaling(records), "device": "cpu"}
    table = "\n".join(_targets_lines(report))
    rows = {line.split(" | ")[0].lstrip("| "): line for line in table.splitlines() if line.startswith("| ")}
    assert rows["default run, K x |Q| = 200 x 1000"].endswith("| 30 s | 100.0 | met |")
    assert rows["default run, K x |Q| = 800 x 5000"].endswith("| 620 s | 118.1 | met |")
    assert rows["its peak memory"].endswith("| 2.50 GiB | - | met |")
    assert rows["default run, K x |Q| = 800 x 5000, composition of 5"].endswith("| 1900 s | 100.0 | **NOT met** |")
    evaluations = [line for name, line in rows.items() if name.startswith("`bngp evaluate")]
    assert [line.rsplit(" | ", 1)[1] for line in evaluations] == ["met |", "**NOT met** |"]
    assert "| 121.0 |" in evaluations[0]
    matmul = [line for name, line in rows.items() if name.startswith("matmul-bound phases")]
    assert len(matmul) == 2  # the plain and the composed paper scale, not the five small sizes
    assert "lowest: defender step 0.58 | 118.1 | met |" in matmul[0] and matmul[1].endswith("0.64 | 100.0 | met |")
    assert rows["scaling exponents, >= 3 sizes along K and along |Q|"].endswith("| - | met |")
    assert "reported, not judged" in table and "200 x 1000: defender step 0.30" in table
    # a size not measured is said so, not passed
    partial = "\n".join(_targets_lines({"records": records[:1], "scaling": scaling(records[:1]), "device": "cpu"}))
    assert partial.count("not measured") == 6 and "| met |" not in partial
    # on a GPU the CPU's targets get no verdict
    gpu = "\n".join(_targets_lines({**report, "device": "cuda"}))
    assert "(a CPU target)" in gpu and "NOT met" not in gpu.split("matmul-bound")[0]


@pytest.mark.parametrize("composition, overrides", [
    (1, {"defender_skip": True, "attacker_steps": 3}),  # G's skip, fed b, forms no input gradient either
    (3, {"pool_copies": False}),  # the attacker reads the whole 3|Q|-wide release
])
def test_the_flop_model_counts_the_products_the_phases_dispatch(composition, overrides):
    """Known answer from the products themselves: every matrix product one round of the game
    dispatches (a refit, the updates, a held-out evaluation), recorded by phase, sums to
    phase_flops' count for each network phase (the plain and pooled sizes are checked end to end
    below); the ridge fit's LAPACK products are not torch's, so the fit is not compared."""
    from _products import product_flops

    from bngp.linear import default_shadow_releases

    game = _game(30, 60, composition, 0, 2, 0, overrides)
    game.training_step()
    recorded, calls = _record_a_round(game)
    assert calls["refit: releases"] == calls["defender step"] == calls["held-out evaluation"] == 1
    counted = phase_flops(game, game.config.attacker.refit_releases or default_shadow_releases(30, game.mechanism.n_outputs))
    for name in ("refit: releases", "selection", "attacker steps", "defender step", "held-out evaluation"):
        seen = sum(n * product_flops(product) for product, n in recorded[name].items()) / calls[name]
        assert seen == counted[name], name


def test_draws_are_counted_from_the_settings():
    """By hand, K = 30, |Q| = 60, q = 30, m = 2 fixed Gaussian blocks, full-rank noise, batches of
    128, 2 attacker updates, 256 held-out draws, 500 + 500 refit releases: a release draws
    2 * 60 + 60 = 180 normals and 30 + 30 = 60 uniforms; the held-out batch only its fixed blocks."""
    draws = phase_draws(_game(30, 60, 3, 0, 2, 0, None), 500)
    assert draws == {"refit: releases": (180_000, 60_000), "attacker steps": (46_080, 15_360),
                     "defender step": (23_040, 7_680), "held-out evaluation": (30_720, 0.0)}


def test_a_phase_that_draws_is_judged_against_its_own_bound():
    """Bound = products at the matmul + normals / their rate + uniforms / theirs.  Releases: 1 s
    + 2 s + 0.05 s = 3.05 s, its products a third of it, run in 4 s: 0.7625 of it (0.25 of the
    matmul); attacker steps: 0.6 s + 0.0067 s + 0.005 s, products 0.98 of it, run in 1 s: 0.61 of
    it (0.6 of the matmul).  Each is judged against its bound, the lowest decides; only a phase
    whose draws take a tenth of its bound or more gets a line on them."""
    phases = {"refit: releases": {"seconds_per_call": 4.0}, "attacker steps": {"seconds_per_call": 1.0}}
    _add_flops(phases, {"refit: releases": 100e9, "attacker steps": 60e9}, 100e9, 50e9, None, 0.0,
               {"refit: releases": (300e6, 10e6), "attacker steps": (1e6, 1e6)}, (150e6, 200e6))
    releases, attacker = phases["refit: releases"], phases["attacker steps"]
    assert releases["bound_seconds"] == pytest.approx(3.05) and releases["fraction_of_bound"] == pytest.approx(0.7625)
    assert releases["products_share_of_bound"] == pytest.approx(1 / 3.05)
    assert attacker["products_share_of_bound"] == pytest.approx(0.6 / (0.6 + 1 / 150 + 0.005))
    assert attacker["fraction_of_bound"] == pytest.approx(0.6 + 1 / 150 + 0.005)
    rates = {"normals_per_second": 150e6, "uniforms_per_second": 200e6}
    verdict = _matmul_verdict({"individuals": 800, "attributes": 5000, "phases": phases, **rates})
    assert ("refit: releases 0.76 of its bound (0.25 of the matmul), attacker steps 0.61 of its bound (0.60 of the "
            "matmul); lowest attacker steps 0.61 of its bound (0.60 of the matmul): **met**.") in verdict
    assert "refit: releases: 300.0 M standard normals and 10.0 M uniforms a call" in verdict and "take 67% of its bound of 3.05 s" in verdict
    assert "attacker steps:" not in verdict
    releases["fraction_of_bound"] = 0.45
    assert "lowest refit: releases 0.45 of its bound (0.25 of the matmul): **NOT met**." in _matmul_verdict({"individuals": 800, "attributes": 5000, "phases": phases, **rates})


def _references(matmul32: float, normals: float) -> dict[str, float]:
    return {"matmul_gflops_float32": matmul32, "matmul_gflops_float64": matmul32 / 2, "matvec_gbytes_per_second": 10.0,
            "normals_per_second": normals, "uniforms_per_second": normals}


def test_the_run_references_are_the_medians_of_the_start_and_the_in_run_samples():
    """Per key, the median of the start-of-run value and the samples after the refits (three
    values 100, 80, 90 -> 90); a record without samples (made before they were taken) keeps its start."""
    record = {**_references(100.0, 200e6), "in_run_references": [_references(80.0, 150e6), _references(90.0, 300e6)]}
    assert run_references(record) == {**_references(90.0, 200e6), "matmul_gflops_float64": 45.0}
    del record["in_run_references"]
    assert run_references(record) == _references(100.0, 200e6)
    assert set(run_references(record)) == set(REFERENCE_KEYS)


def test_phases_are_judged_against_the_in_run_medians_and_the_start_is_kept_beside():
    """A host that slowed down after the start: 55 GFLOP/s is 0.44 of the start's 125 GFLOP/s
    (NOT met) but 0.55 of the run's median 100 (met); both are reported."""
    game = _game(30, 60, 1, 0, 2, 0, None)
    record = {**_references(125.0, 200e6), "in_run_references": [_references(100.0, 200e6), _references(90.0, 200e6)],
              "in_run_sampling_seconds": 12.0, "refit_rows": 500,
              "phases": {"attacker steps": {"seconds_per_call": 1.0}, "held-out evaluation": {"seconds_per_call": 1.0}}}
    _judge(record, game)
    evaluation = record["phases"]["held-out evaluation"]
    evaluation["seconds_per_call"] = evaluation["gflop_per_call"] / 55.0  # 55 GFLOP/s
    _judge(record, game)
    assert evaluation["fraction_of_matmul"] == pytest.approx(0.55)
    assert evaluation["at_start"] == {"fraction_of_matmul": pytest.approx(0.44)}
    steps = record["phases"]["attacker steps"]
    assert steps["fraction_of_bound"] > steps["fraction_of_matmul"] and set(steps["at_start"]) == {
        "fraction_of_matmul", "fraction_of_bound"}
    steps["fraction_of_bound"], steps["at_start"]["fraction_of_bound"] = 0.9, 0.8
    verdict = _matmul_verdict({**record, "individuals": PAPER_SCALE[0], "attributes": PAPER_SCALE[1]})  # judged there
    assert "target >= 0.5 of the run's references (the medians above)" in verdict
    assert "lowest held-out evaluation 0.55: **met**." in verdict
    assert "Against the start-of-run references alone: lowest held-out evaluation 0.44: NOT met." in verdict
    line = _references_line(record)
    assert line.startswith("matmul 125.0 GFLOP/s (float32), 62.5 (float64) at the start; judged against the medians")
    assert "of the start and 2 samples after the refits: matmul 100.0 (90.0-125.0) and 50.0 (45.0-62.5)" in line
    assert "(sampling 12 s, in no phase)" in line


def test_sizes_parse_with_an_optional_composition():
    assert _size("800x5000") == (800, 5000, 1)
    assert _size("800x5000x5") == (800, 5000, 5)
    for bad in ("800", "800x0", "1x2x3x4"):
        with pytest.raises(SystemExit):
            _size(bad)


def test_a_bad_size_is_one_line_and_exit_code_2_before_any_training(tmp_path, capsys):
    for option in ("--sizes", "--evaluate"):
        with pytest.raises(SystemExit) as exit_info:
            main([option, "80x", "--out", str(tmp_path / "out")])
        assert exit_info.value.code == 2
        assert capsys.readouterr().err == "game_phases: a size is KxQ or KxQxM with positive integers, got '80x'\n"
        assert not (tmp_path / "out").exists()


def test_a_plain_and_a_composed_size_are_measured_and_projected(tmp_path):
    assert main(["--sizes", "30x60,30x60x3", "--steps", "2", "--fresh-check-steps", "2", "--evaluate", "30x60",
                 "--out", str(tmp_path)]) == 0
    report = json.loads((tmp_path / "game_phases.json").read_text())
    plain, composed = report["records"]
    # the plain size's kept defender and the fixed defense, attacked by `bngp evaluate --attacks all`
    # after the run, whose peak memory was read before them; the composed size was not evaluated
    assert "evaluations" not in composed
    kept, fixed = plain["evaluations"]
    assert (kept["defense"], fixed["defense"]) == ("run (the defender the run kept)", "laplace:epsilon=10")
    for entry in (kept, fixed):
        assert entry["releases"] == 50 and entry["workers"] == 1
        assert {"linear", "bayesian", "stacked", "per-individual"} <= set(entry["attacks"])
        assert sum(attack["seconds"] for attack in entry["attacks"].values()) <= entry["wall_seconds"]
        assert entry["peak_memory_gib"] >= plain["peak_memory_gib"]
    assert plain["evaluation_references"]["matmul_gflops_float32"] > 0
    assert (plain["composition"], composed["composition"]) == (1, 3)
    assert plain["fixed_gaussian_sigmas"] == [] and plain["dp_epsilon"] is None
    assert len(composed["fixed_gaussian_sigmas"]) == 2 and composed["dp_epsilon"] == pytest.approx(0.9)
    for record in report["records"]:
        # the projection is seconds per call x the calls of a default (1,500-step) run, summed
        assert record["projected_default_seconds"] == pytest.approx(
            sum(phase["seconds_per_call"] * phase["default_calls"] for phase in record["phases"].values()))
        assert record["phases"]["attacker steps"]["default_calls"] == 1500
        assert record["phases"]["refit: fit"]["gflop_per_call"] > 0 and record["matmul_gflops_float32"] > 0
        assert record["device"] == "cpu" and record["peak_device_memory_gib"] == 0.0
        assert record["normals_per_second"] > 1e6 and record["phases"]["refit: releases"]["bound_seconds"] > 0
        # the references were sampled again after the refit of step 0 (and any final scoring), and
        # the phases are judged against the medians
        assert record["in_run_references"] and record["in_run_sampling_seconds"] > 0
        assert set(record["in_run_references"][0]) == set(REFERENCE_KEYS)
        refs = run_references(record)
        fit = record["phases"]["refit: fit"]
        assert fit["fraction_of_matmul"] == pytest.approx(fit["gflops"] / refs["matmul_gflops_float64"])
        assert "at_start" in fit
    for record in report["records"]:
        # one more round's products, recorded and replayed alone: the FLOP model counts exactly the
        # products the network phases dispatch
        for name in ("refit: releases", "selection", "attacker steps", "defender step", "held-out evaluation"):
            phase = record["phases"][name]
            assert phase["products_alone"]["products_gflop_per_call"] == pytest.approx(phase["gflop_per_call"], rel=1e-12)
            assert phase["products_alone"]["products_seconds_per_call"] > 0
        steps = record["phases"]["attacker steps"]["products_alone"]
        assert steps["share_of_phase"] == pytest.approx(
            steps["products_seconds_per_call"] / record["phases"]["attacker steps"]["seconds_per_call"])
    # a composed release draws three times the normals for the same products: its draws weigh more
    assert (composed["phases"]["refit: releases"]["products_share_of_bound"]
            < plain["phases"]["refit: releases"]["products_share_of_bound"])
    markdown = (tmp_path / "game_phases.md").read_text()
    assert "composition of 3 (Table 5: 2 fixed Gaussian mechanisms" in markdown
    assert markdown.count("Matmul-bound phases (target >= 0.5") == 2
    assert markdown.count("| phase | products / call | GFLOP seen / call | GFLOP counted |") == 2
    assert markdown.count("| run (the defender the run kept) |") == 1 and "| laplace:epsilon=10 |" in markdown
    assert markdown.index("## Targets") < markdown.index("## K = 30")
    # --recount rebuilds the games and recomputes the FLOP columns from the saved seconds
    saved = {name: dict(phase) for name, phase in plain["phases"].items()}
    assert main(["--recount", str(tmp_path / "game_phases.json"), "--out", str(tmp_path / "recount")]) == 0
    recounted = json.loads((tmp_path / "recount" / "game_phases.json").read_text())["records"][0]["phases"]
    for name, phase in saved.items():
        assert recounted[name]["seconds_per_call"] == phase["seconds_per_call"]
        if "gflops" in phase:
            assert recounted[name]["gflop_per_call"] == pytest.approx(phase["gflop_per_call"])


def test_the_default_run_itself_is_measured_with_its_own_calls(tmp_path):
    """--full trains the default budget (here stopped early by a selection patience of 1) and
    reports the calls the run made, not a projection to 1,500 steps."""
    assert main(["--sizes", "30x60", "--full", "--fresh-check-steps", "2", "--set", "selection_patience=1",
                 "--out", str(tmp_path)]) == 0
    record = json.loads((tmp_path / "game_phases.json").read_text())["records"][0]
    assert record["full_default_run"] and record["early_stop"]["step"] == record["steps"] < 1500
    assert record["phases"]["attacker steps"]["default_calls"] == record["phases"]["attacker steps"]["calls"] == record["steps"]
    assert record["projected_default_seconds"] == pytest.approx(sum(p["seconds"] for p in record["phases"].values()))
    assert "stopped by the selection patience 1 of a 1500-step budget" in (tmp_path / "game_phases.md").read_text()
