"""The device of a run (bngp.device): resolution, what a run records, and that the draws and the
files do not depend on it.  The CUDA cases run only where CUDA is available."""

import json

import numpy as np
import pytest
import torch

from bngp.attacks.bayesian import BayesianAttack
from bngp.attacks.training import AttackerTrainingConfig
from bngp.data.priors import UniformSubsetPrior
from bngp.defenses.artifact import load_defender
from bngp.defenses.base import NoDefense
from bngp.defenses.trained import load_run_defense
from bngp.device import DEVICE_NAMES, resolve_device, subnormals_are_flushed, subnormals_flushed, to_cpu
from bngp.errors import InputError
from bngp.evaluate import evaluate_defense
from bngp.game import Game, GameConfig
from bngp.mechanism_audit import audit_mechanism

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
without_cuda = pytest.mark.skipif(torch.cuda.is_available(), reason="checks the machine without CUDA")

TINY = dict(steps=2, attacker_steps=1, batch_size=8, eval_every=1, eval_batch=16, checkpoint_every=1,
            fresh_check_steps=2, seed=5)


def _prior(population):
    return UniformSubsetPrior(population.n_individuals, 20)


def _game(population, device="cpu", **overrides):
    return Game(population, _prior(population), GameConfig.from_flat({**TINY, **overrides}), device=device)


def _numbers(summary):
    payload = summary.to_dict()
    payload.pop("timings")
    return payload


def test_names_resolve_to_torch_devices():
    assert DEVICE_NAMES == ("auto", "cpu", "cuda")
    assert resolve_device("cpu") == torch.device("cpu")
    assert resolve_device(torch.device("cpu")) == torch.device("cpu")
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert resolve_device("auto").type == expected


@pytest.mark.parametrize("name", ["gpu", "CUDA", "", None, 0, torch.device("meta")])
def test_unknown_names_are_one_line_input_errors(name):
    with pytest.raises(InputError, match="`device` must be one of auto, cpu, cuda") as caught:
        resolve_device(name)
    assert "\n" not in str(caught.value)


@without_cuda
def test_cuda_without_cuda_is_a_one_line_input_error(small_population):
    for name in ("cuda", torch.device("cuda"), torch.device("cuda", 0)):
        with pytest.raises(InputError, match="CUDA is not available") as caught:
            resolve_device(name)
        assert "\n" not in str(caught.value)
    with pytest.raises(InputError, match="CUDA is not available"):
        _game(small_population, device="cuda")
    with pytest.raises(InputError, match="CUDA is not available"):
        evaluate_defense(small_population, _prior(small_population), NoDefense(), ["score"], releases=2, device="cuda")
    with pytest.raises(InputError, match="CUDA is not available"):
        BayesianAttack(device="cuda")


def test_to_cpu_keeps_state_dict_types_and_metadata():
    state = torch.nn.BatchNorm1d(3).state_dict()
    moved = to_cpu({"state": state, "list": [torch.ones(2)], "pair": (1, torch.zeros(1)), "text": "x"})
    assert type(moved["state"]) is type(state) and moved["state"]._metadata == state._metadata
    assert all(moved["state"][k] is state[k] for k in state)  # on the CPU the tensors are the same objects
    assert isinstance(moved["pair"], tuple) and moved["text"] == "x"


def test_cpu_and_auto_train_exactly_as_the_default(small_population, tmp_path):
    """On a machine without CUDA, device="cpu" and "auto" are the default run, number for number;
    the run records its device in config.json and writes CPU tensors."""
    default = Game(small_population, _prior(small_population), GameConfig.from_flat(TINY)).train(tmp_path / "d", progress=False)
    names = ["cpu"] + ([] if torch.cuda.is_available() else ["auto"])
    for name in names:
        summary = _game(small_population, device=name).train(tmp_path / name, progress=False)
        assert _numbers(summary) == _numbers(default)
        assert json.loads((tmp_path / name / "config.json").read_text())["device"] == "cpu"
    checkpoint = torch.load(tmp_path / "cpu" / "checkpoint.pt", weights_only=True)
    assert all(v.device.type == "cpu" for v in checkpoint["defender"].values())
    assert json.loads((tmp_path / "d" / "config.json").read_text())["device"] == "cpu"


def test_evaluation_and_audit_record_their_device(small_population):
    prior = _prior(small_population)
    bayesian = BayesianAttack(AttackerTrainingConfig(steps=2, batch_size=8, shadow_releases=16, validation_draws=8))
    result = evaluate_defense(small_population, prior, NoDefense(), {"bayesian": bayesian}, releases=2, n_members=20,
                              device="cpu")
    assert result.device == "cpu" and result.to_dict()["device"] == "cpu"
    assert bayesian.device == torch.device("cpu")
    audit = audit_mechanism(small_population, NoDefense(), "score", mode="one-run", canaries=10, members=20)
    assert audit.device == "cpu" and audit.to_dict()["device"] == "cpu"


@needs_cuda
def test_a_cuda_run_draws_what_the_cpu_run_draws_and_its_defender_loads_on_the_cpu(small_population, tmp_path):
    cpu, cuda = _game(small_population, "cpu"), _game(small_population, "cuda")
    assert cuda.device.type == "cuda" and next(cuda.defender.parameters()).device.type == "cuda"
    assert torch.equal(cuda.players.eval_b.cpu(), cpu.players.eval_b) and torch.equal(cuda.players.eval_r.cpu(), cpu.players.eval_r)
    b_cpu, r_cpu = cpu.players.draw(8)
    b_cuda, r_cuda = cuda.players.draw(8)
    assert b_cuda.device.type == "cuda" and torch.equal(b_cuda.cpu(), b_cpu) and torch.equal(r_cuda.cpu(), r_cpu)
    cuda.generator.set_state(cpu.generator.get_state())  # train both from the same stream position
    summaries = {name: game.train(tmp_path / name, progress=False) for name, game in (("cpu", cpu), ("cuda", cuda))}
    assert [row["step"] for row in summaries["cuda"].history] == [row["step"] for row in summaries["cpu"].history]
    for row_cpu, row_cuda in zip(summaries["cpu"].history, summaries["cuda"].history):
        assert row_cuda["heldout_utility_loss"] == pytest.approx(row_cpu["heldout_utility_loss"], rel=1e-2, abs=1e-3)
    assert json.loads((tmp_path / "cuda" / "config.json").read_text())["device"] == str(cuda.device)
    artifact = load_defender(tmp_path / "cuda" / "defender.pt")
    assert all(p.device.type == "cpu" for p in artifact.defender.parameters())
    checkpoint = torch.load(tmp_path / "cuda" / "checkpoint.pt", weights_only=True)
    assert all(v.device.type == "cpu" for v in checkpoint["defender"].values())
    # the trained defense releases on the CPU, and the Bayesian attacker trains on the GPU
    defense = load_run_defense(tmp_path / "cuda")
    settings = AttackerTrainingConfig(steps=2, batch_size=8, shadow_releases=16, validation_draws=8)
    bayesian = BayesianAttack(settings)
    on_gpu = evaluate_defense(small_population, _prior(small_population), defense, {"bayesian": bayesian},
                              releases=2, n_members=20, device="cuda")
    on_cpu = evaluate_defense(small_population, _prior(small_population), defense, {"bayesian": BayesianAttack(settings)},
                              releases=2, n_members=20, device="cpu")
    assert on_gpu.device.startswith("cuda") and np.array_equal(on_gpu.labels, on_cpu.labels)
    assert on_gpu.scores["bayesian"].shape == on_cpu.scores["bayesian"].shape
    assert next(bayesian.attacker_.parameters()).device.type == "cuda"


@needs_cuda
def test_a_cuda_run_resumes_from_its_checkpoint_on_the_cpu(small_population, tmp_path):
    _game(small_population, "cuda", steps=1).train(tmp_path / "run", progress=False)
    summary = _game(small_population, "cpu", steps=2).train(tmp_path / "run", resume=True, progress=False)
    assert summary.steps == 2
    assert json.loads((tmp_path / "run" / "config.json").read_text())["device"] == "cpu"


@pytest.mark.skipif(not torch.set_flush_denormal(False), reason="this CPU cannot flush subnormal floats")
def test_subnormals_are_flushed_inside_the_block_and_the_mode_restored_after():
    """Known answer: 2^-140, a float32 subnormal, times 1 is itself outside the block and 0 inside
    it; a block nested in another leaves the mode on; the mode comes back after an exception and
    after a block entered with it already on (the caller's setting kept)."""
    tiny = torch.tensor([2.0**-140])
    assert tiny.mul(1.0)[0] == 2.0**-140 and not subnormals_are_flushed()
    with subnormals_flushed():
        assert tiny.mul(1.0)[0] == 0 and torch.tensor([2.0**-140], dtype=torch.float64).mul(2.0**-900)[0] == 0
        with subnormals_flushed():
            pass
        assert subnormals_are_flushed()
    assert not subnormals_are_flushed()
    with pytest.raises(RuntimeError):
        with subnormals_flushed():
            raise RuntimeError("inside")
    assert not subnormals_are_flushed()
    torch.set_flush_denormal(True)
    try:
        with subnormals_flushed():
            pass
        assert subnormals_are_flushed()
    finally:
        torch.set_flush_denormal(False)
