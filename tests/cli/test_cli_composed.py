"""``bngp audit-mechanism`` on a defender trained after fixed Gaussian mechanisms (arXiv:2410.07414,
App. L.6), and on the DP mechanisms matched to it: the release of c = m + 1 copies of f(D) is
audited whole, from the CLI and the API."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from bngp.attacks.bayesian import BayesianAttack
from bngp.attacks.registry import get_attack
from bngp.attacks.training import AttackerTrainingConfig
from bngp.cli import main
from bngp.data.priors import UniformSubsetPrior
from bngp.defenses.registry import DefenseContext, parse_defense_spec
from bngp.defenses.trained import load_run_defense
from bngp.game import Game, GameConfig
from bngp.mechanism_audit import audit_mechanism
from bngp.attacks.composed import TiledAttack
from bngp.mechanism_audit.common import fit_attack

MEMBERS = 20


@pytest.fixture(scope="module")
def composed_run(small_population, tmp_path_factory):
    """A tiny defender trained after one fixed Gaussian mechanism (4 steps, about 3 s)."""
    run_dir = tmp_path_factory.mktemp("composed_cli") / "run"
    config = GameConfig.from_flat(dict(steps=4, fixed_gaussian_sigmas=(0.05,), fresh_check_steps=0, eval_every=2, checkpoint_every=2,
                                        attacker_refit_every=2, batch_size=8, eval_batch=16, refit_releases=64, seed=0))
    Game(small_population, UniformSubsetPrior(small_population.n_individuals, MEMBERS), config).train(
        run_dir, progress=False)
    return run_dir


def _run(capsys, *argv):
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _audit(capsys, population_file, out, defense, mode, *extra):
    return _run(capsys, "audit-mechanism", "--population", population_file, "--members", MEMBERS, "--defense", defense,
                "--mode", mode, "--attack", "score", "--seed", 3, "--quiet", "--out", out, *extra)


@pytest.mark.parametrize(
    ("mode", "extra"),
    [("one-run", ("--canaries", 10)), ("many-run", ("--canaries", 6, "--runs", 20)), ("panoramia", ("--canaries", 8))],
)
def test_audit_mechanism_on_a_composed_run(composed_run, small_population_file, small_population, tmp_path, capsys,
                                           mode, extra):
    out = tmp_path / "AUDIT.json"
    code, stdout, err = _audit(capsys, small_population_file, out, f"run:{composed_run}", mode, *extra)
    assert code == 0, err
    assert "epsilon_lb = " in stdout and "no claimed guarantee" in stdout
    payload = json.loads(out.read_text())
    assert payload["mode"] == mode and np.isfinite(payload["epsilon_lb"])
    assert payload["claimed_epsilon"] is None and payload["claimed_guarantee"] is None
    assert payload["bound_exceeds_claim"] is None
    assert payload["design"]["composition"] == 2
    assert payload["design"]["release_outputs"] == 2 * small_population.n_attributes
    assert payload["design"]["attributes"] == small_population.n_attributes
    assert payload["defense"]["name"] == "run" and payload["defense"]["spec"] == f"run:{composed_run}"
    assert payload["attack"]["name"] == "score" and "tiled" in payload["attack"]["release_view"]


@pytest.mark.parametrize(("kind", "extra_spec"), [("laplace", ""), ("gaussian", ",delta=1e-5"), ("linf", "")])
def test_audit_mechanism_on_the_matched_defense(composed_run, small_population_file, small_population, tmp_path, capsys,
                                                kind, extra_spec):
    out = tmp_path / "AUDIT.json"
    spec = f"matched-{kind}:run={composed_run}{extra_spec}"
    code, stdout, err = _audit(capsys, small_population_file, out, spec, "one-run", "--canaries", 10)
    assert code == 0, err
    payload = json.loads(out.read_text())
    q, n = small_population.n_attributes, MEMBERS
    matched = payload["defense"]["matched"]
    assert payload["defense"]["name"] == f"matched-{kind}" and payload["defense"]["composition"] == 2
    assert matched["composition"] == 2 and len(matched["block_utility_losses"]) == 2
    claim = payload["claimed_guarantee"]
    released = {"laplace": 2 * q / n, "gaussian": math.sqrt(2 * q) / n, "linf": 1 / n}[kind]
    assert claim["sensitivity"] == pytest.approx(released, rel=1e-12) and claim["composition"] == 2
    assert payload["claimed_epsilon"] == pytest.approx(matched["epsilon"], rel=1e-15)
    if kind != "gaussian":
        assert payload["claimed_epsilon"] == pytest.approx(released / matched["scale"], rel=1e-12)
    assert payload["claimed_delta"] == (1e-5 if kind == "gaussian" else 0.0)
    assert payload["is_lower_bound"] is True and payload["bound_exceeds_claim"] is False
    assert payload["design"]["composition"] == 2 and payload["design"]["release_outputs"] == 2 * q


def test_release_of_the_matched_defense_has_every_copy(composed_run, small_population_file, small_population, tmp_path,
                                                  capsys):
    ids = tmp_path / "ids.txt"
    ids.write_text("\n".join(str(i) for i in small_population.ids[:MEMBERS]) + "\n")
    code, _, err = _run(capsys, "release", "--population", small_population_file,
                        "--defense", f"matched-laplace:run={composed_run}", "--members-file", ids, "--seed", 0,
                        "--out", tmp_path / "release.npz")
    assert code == 0, err
    with np.load(tmp_path / "release.npz") as data:
        assert data["release"].shape[-1] == 2 * small_population.n_attributes


def test_api_audit_tiles_release_readers_and_leaves_the_bayesian_attacker_whole(composed_run, small_population):
    context = DefenseContext(small_population, MEMBERS)
    trained = load_run_defense(composed_run, context)
    result = audit_mechanism(small_population, trained, "lrt", mode="one-run", canaries=10, members=MEMBERS, seed=1)
    assert result.design["composition"] == 2 and result.claimed is None
    assert "release_view" in result.attack
    matched = parse_defense_spec(f"matched-laplace:run={composed_run}", context)
    result = audit_mechanism(small_population, matched, "optimal-lrt", mode="one-run", canaries=10, members=MEMBERS)
    assert result.claimed["sensitivity"] == pytest.approx(2 * small_population.n_attributes / MEMBERS)
    assert result.exceeds_claim is False
    from bngp.attacks.base import attack_knowledge

    prior = UniformSubsetPrior(small_population.n_individuals, MEMBERS)
    knowledge = attack_knowledge(small_population, prior, trained, MEMBERS)
    assert knowledge.composition == 2
    bayesian = BayesianAttack(AttackerTrainingConfig(steps=0, shadow_releases=16, validation_draws=8))
    assert fit_attack(bayesian, knowledge, 0) is bayesian
    tiled = fit_attack(get_attack("score"), knowledge, 0)
    assert isinstance(tiled, TiledAttack) and tiled.inner.n_attributes_ == 2 * small_population.n_attributes
    releases, _ = knowledge.simulate(2, 5)
    assert tiled.score(small_population.genotypes[:4], releases).shape == (2, 4)
    assert bayesian.score(small_population.genotypes[:4], releases).shape == (2, 4)


def test_evaluate_on_a_composed_run_and_its_matched_defense(composed_run, small_population_file, small_population,
                                                           tmp_path, capsys):
    """``bngp evaluate`` reads the 2|Q|-wide release with every attack: the analytic ones on the tiled
    view, the stacked attacker on their scores."""
    for index, spec in enumerate((f"run:{composed_run}", f"matched-laplace:run={composed_run}")):
        out = tmp_path / f"EVAL{index}.json"
        code, _, err = _run(capsys, "evaluate", "--no-decision", "--population", small_population_file, "--members", MEMBERS,
                            "--defense", spec, "--attacks", "score,linear,stacked", "--releases", 12, "--seed", 1,
                            "--quiet", "--out", out)
        assert code == 0, err
        payload = json.loads(out.read_text())
        assert set(payload["attacks"]) == {"score", "linear", "stacked"}
        assert "tiled" in payload["attacks"]["score"]["release_view"]
        assert "release_view" not in payload["attacks"]["stacked"]
        # the stacked attacker pools the others: never below the weaker of them by more than noise
        assert payload["attacks"]["stacked"]["auc"] >= min(payload["attacks"][a]["auc"] for a in ("score", "linear")) - 0.05
