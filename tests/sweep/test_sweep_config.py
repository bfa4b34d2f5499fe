"""Sweep configs are validated completely before any work: InputError from the API, one line
and exit code 2 from the CLI, each naming the problem."""

from __future__ import annotations

import re

import pytest

from bngp.errors import InputError
from bngp.sweep import load_sweep_config, run_sweep
from sweep_helpers import assert_cli_refuses, bad_config, small_config

#: (changes to the small config, a fragment of the error); None removes the key.
BAD_CONFIGS = [
    ({"kapa": [1.0]}, "unknown sweep setting `kapa`"),
    ({"datasets": None}, "`datasets` is required"),
    ({"datasets": [{"path": "missing.npz", "members": 10}]}, "no population file"),
    ({"datasets": [{"path": ".", "members": 10}]}, "is a directory, not a population file"),
    ({"datasets": [{"path": "pop.npz"}]}, "`datasets[0].members` is required"),
    ({"defenses": ["bngp", "lapalce"]}, "unknown defense family 'lapalce'"),
    ({"defenses": ["bngp", "laplace:epsilon=1"]}, "`epsilon` is set by the `eps` axis"),
    ({"kappa": [-1.0]}, "`kappa[0]` must be a number in [0"),
    ({"kappa": []}, "`kappa` must list at least one value"),
    ({"defenses": ["laplace"]}, "`kappa` is given but no defense uses it"),
    ({"eps": [0.0]}, "`eps[0]` must be a number > 0"),
    ({"seeds": [0, 0]}, "`seeds` lists 0 twice"),
    ({"seeds": [-1]}, "`seeds[0]` must be an integer >= 0"),
    ({"attacks": ["lrt", "lrtt"]}, "unknown attack 'lrtt'"),
    ({"releases": 1}, "`releases` must be an integer >= 2"),
    ({"retries": -1}, "`retries` must be an integer >= 0"),
    ({"attacker_patience": 0}, "`attacker_patience` must be an integer >= 1 or null"),
    ({"attacker_patience": "4"}, "`attacker_patience` must be an integer >= 1 or null"),
    ({"game": {"stepz": 10}}, "`game.stepz` is not a GameConfig setting"),
    ({"game": {"kappa": 1.0}}, "`game.kappa` is set by the sweep"),
    ({"game": {"steps": "10"}}, "`game.steps` must be of type int"),
    ({"game": {"steps": 0}}, "`game`: `steps` must be >= 1"),
    # found when the data are read, still before any cell runs
    ({"datasets": [{"path": "pop.npz", "members": 20}]}, "`members` must be between 1 and K - 1 = 19"),
    ({"defenses": ["bngp", "gaussian"]}, "needs `delta=...`"),
]



@pytest.mark.parametrize("changes, fragment", BAD_CONFIGS, ids=[fragment for _, fragment in BAD_CONFIGS])
def test_bad_config_is_an_input_error_before_any_work(changes, fragment, sweep_population, tmp_path):
    path = bad_config(tmp_path, sweep_population, changes)
    with pytest.raises(InputError) as caught:
        run_sweep(path, tmp_path / "out", progress=False)
    message = str(caught.value)
    assert fragment in message and "\n" not in message and str(path) in message
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("changes, fragment", BAD_CONFIGS[::4], ids=[fragment for _, fragment in BAD_CONFIGS[::4]])
def test_cli_bad_config_is_one_line_and_exit_2(changes, fragment, sweep_population, tmp_path, capsys):
    path = bad_config(tmp_path, sweep_population, changes)
    assert_cli_refuses(path, tmp_path / "out", capsys, fragment)


@pytest.mark.parametrize("name, text, fragment", [
    ("sweep.toml", "defenses = [\n", "not valid TOML"),
    ("sweep.json", "{\"defenses\": ", "not valid JSON"),
    ("sweep.yaml", "defenses: [bngp]\n", "must be a .json or .toml file"),
    ("sweep.json", "[1, 2]", "must be a table of settings"),
])
def test_unreadable_config_files(name, text, fragment, tmp_path):
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(InputError, match=re.escape(f"{path}: ") + ".*" + re.escape(fragment)):
        load_sweep_config(path)


def test_toml_config_and_relative_paths(sweep_population, tmp_path, monkeypatch):
    """A TOML config's relative dataset path is read against the config's folder, not the
    current directory; a single value stands for a one-element list."""
    folder = tmp_path / "configs"
    folder.mkdir()
    (folder / "pop.npz").write_bytes(sweep_population.read_bytes())
    path = folder / "sweep.toml"
    path.write_text('defenses = ["gaussian:delta=1e-5", "bngp"]\neps = 2\nkappa = [1, 2.5]\nattacks = "lrt,score"\n'
                    '[[datasets]]\npath = "pop.npz"\nmembers = 10\nname = "tiny"\n'
                    '[game]\nsteps = 5\nfixed_gaussian_sigmas = [0.1]\n')
    monkeypatch.chdir(tmp_path)
    config = load_sweep_config(path)
    assert config.datasets[0].path == folder / "pop.npz" and config.datasets[0].name == "tiny"
    assert config.eps == (2.0,) and config.kappa == (1.0, 2.5) and config.attacks == ("lrt", "score")
    assert config.seeds == (0,) and config.retries == 2
    game = config.game_config(2.5, 7)
    assert (game.steps, game.objective.kappa, game.seed, game.defender.fixed_gaussian_sigmas) == (5, 2.5, 7, (0.1,))


def test_toml_config_says_none_for_all_steps(sweep_population, tmp_path):
    """TOML has no null: "none" (any case) turns the Bayesian attacker's and the fresh-attacker
    check's early stopping off; for a setting that cannot be unset it is refused."""
    path = tmp_path / "sweep.toml"
    body = (f'defenses = ["bngp"]\nkappa = 1\nattacker_patience = "none"\n[[datasets]]\npath = "{sweep_population}"\n'
            'members = 10\n[game]\nsteps = 5\nfresh_check_patience = "None"\n')
    path.write_text(body)
    config = load_sweep_config(path)
    assert config.attacker_patience is None and config.game_config(1.0, 0).fresh_check.patience is None
    path.write_text(body.replace('steps = 5', 'steps = "none"'))
    with pytest.raises(InputError, match="game.steps"):
        load_sweep_config(path)


@pytest.mark.parametrize("options, fragment", [
    ({"backend": "dask"}, "`backend` must be one of local, ray"),
    ({"address": "127.0.0.1:6379"}, "apply to the ray backend only"),
    ({"backend": "ray", "workers": 0}, "`workers` must be an integer >= 1"),
])
def test_bad_backend_options(options, fragment, sweep_population, tmp_path):
    with pytest.raises(InputError, match=re.escape(fragment)):
        run_sweep(small_config(sweep_population), tmp_path / "out", progress=False, **options)
    assert not (tmp_path / "out").exists()


def test_attacker_patience_enters_a_cells_key_only_when_on(sweep_population, monkeypatch):
    """A sweep evaluates with the Bayesian attacker's default early stopping unless its config says
    ``attacker_patience: null``.  The key of a cell evaluated with all the attacker's steps is the
    one that cell had before early stopping existed, so stored cells stay valid; the known key
    below was computed by the code of commit c47ec36.  The setting reaches the evaluation."""
    from bngp.attacks.training import AttackerTrainingConfig
    from bngp.sweep import execute
    from bngp.sweep.cells import plan_cells
    from bngp.sweep.config import SweepConfig
    from bngp.sweep.runner import load_datasets

    def keys(**changes):
        data = small_config(sweep_population, defenses=["laplace"], **changes)
        del data["kappa"], data["game"]
        config = SweepConfig.from_dict(data)
        return config, plan_cells(config, load_datasets(config))

    full, (cell,) = keys(attacker_patience=None)
    default, (default_cell,) = keys()
    assert cell.key == "7f8455f8d1e4b56e9714" and cell.attacker_patience is None
    assert default.attacker_patience == AttackerTrainingConfig.patience == default_cell.attacker_patience
    assert default_cell.key not in {cell.key, keys(attacker_patience=2)[1][0].key}
    assert full.to_dict()["attacker_patience"] is None and cell.describe()["attacker_patience"] is None
    seen = []
    monkeypatch.setattr(execute, "evaluate_defense", lambda *args, **kwargs: seen.append(kwargs["attacker"]) or 1 / 0)
    for planned in (cell, default_cell):
        with pytest.raises(ZeroDivisionError):
            execute._compute(planned, load_datasets(full)[planned.dataset.name].population)
    assert [config.patience for config in seen] == [None, AttackerTrainingConfig.patience]


def test_a_bngp_cell_that_keeps_every_fresh_check_step_keeps_its_key(sweep_population):
    """``fresh_check_patience: null`` and ``selection_patience: null`` in the game table (all the
    fresh attacker's steps and all the game's, the only behaviour before the settings existed) give
    a BNGP cell the key it had then, computed by the code of commit 2df070d, with that time's
    batches of 64 (``batch_size: 64``; the default is 128 since 2026-11-27); the default early
    stopping gives another, and so do batches of 128."""
    from bngp.sweep.cells import plan_cells
    from bngp.sweep.config import SweepConfig
    from bngp.sweep.runner import load_datasets

    def key(**game):
        data = small_config(sweep_population, defenses=["bngp"], kappa=[0.5])
        del data["eps"]
        data["game"].update(game)
        config = SweepConfig.from_dict(data)
        (cell,) = plan_cells(config, load_datasets(config))
        return cell.key

    old = {"fresh_check_patience": None, "selection_patience": None, "batch_size": 64}
    assert key(**old) == "0f89a54f18471487c2c9"
    assert key(**{**old, "batch_size": 128}) != "0f89a54f18471487c2c9"  # the batch size is in the key
    assert key() != "0f89a54f18471487c2c9" and key() != key(fresh_check_patience=2)
    assert key(fresh_check_patience=None, batch_size=64) != "0f89a54f18471487c2c9"  # the game's early stopping is in the key
