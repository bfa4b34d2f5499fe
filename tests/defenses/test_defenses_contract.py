"""Contract kept by every ``--defense SPEC``: the DP mechanisms, ``none``, trained defenders
(``run:RUN_DIR``, plain and composed after a fixed Gaussian mechanism) and the DP mechanisms
matched to them (``matched-*:run=RUN_DIR``).

Each SPEC is parsed with :func:`bngp.defenses.parse_defense_spec` for the small population
(K = 40, |Q| = 120, n = 20), and its releases are drawn the one way they are drawn everywhere
(:func:`bngp.release.sampling.release_mechanism` of its ``composition`` and
:func:`bngp.release.sampling.sample_releases`).  The contract:

* releases have shape (B, composition * |Q|) and lie in [0, 1]; a defense that perturbs
  several copies refuses a single-copy mechanism;
* noise is replayed by a fixed torch generator seed and differs across seeds (``none`` releases
  the exact statistic);
* the unclipped noise of a DP mechanism has the mean |xi| of its law (closed forms below);
* ``describe()`` is strict JSON and carries the SPEC's name;
* a stated guarantee has the epsilon of the closed form for the mechanism's parameters, with
  the paper's sensitivities computed here (l1 |Q|/n, l2 sqrt(|Q|)/n, l-inf 1/n, hamming |Q|);
* bad SPECs raise typed one-line bngp errors.

Two tiny defenders are trained once per module with :class:`bngp.game.Game`.
"""

from __future__ import annotations

import json
import math
import pickle
from pathlib import Path

import numpy as np
import pytest
import torch
from scipy.stats import norm

from bngp.data.independent import simulate_independent
from bngp.data.priors import UniformSubsetPrior
from bngp.defenses import DefenseContext, available_defenses, parse_defense_spec
from bngp.errors import BNGPError, DataFormatError, InputError, MissingFileError, UnknownNameError
from bngp.game import Game, GameConfig
from bngp.release.sampling import release_mechanism, sample_releases
from bngp.rng import torch_generator

torch.set_num_threads(1)

N_MEMBERS = 20
#: releases drawn per check
BATCH = 64

#: every SPEC of the contract; {plain} / {composed} are the two trained run directories.
SPECS = [
    "none",
    "laplace:epsilon=5",
    "laplace:scale=0.05,sensitivity=2.5",
    "gaussian:epsilon=5,delta=1e-6",
    "gaussian:scale=0.05,delta=1e-5",
    "linf:epsilon=5",
    "rr:epsilon=2",
    "rr:epsilon=2,debias=false",
    "run:{plain}",
    "run:{composed}",
    "matched-laplace:run={plain}",
    "matched-gaussian:run={plain},delta=1e-5",
    "matched-gaussian:run={plain},delta=1e-5,space=population",
    "matched-linf:run={plain}",
    "matched-laplace:run={composed}",
    "budget-laplace:budget=0.5x",
    "budget-gaussian:budget=0.5x",
    "shrinkage:budget=0.5x,shrink=0.3",
    "shrinkage:budget=0.5x,shrink=0.3,noise=gaussian",
    "suppression:budget=0.5x",
    "data-independent",
    "linear-optimal:budget=0.5x",
    "time-sharing:budget=0.5x",
]
#: SPECs whose release is a function of the membership alone (no randomness).
DETERMINISTIC = ("none", "suppression:budget=0.5x", "data-independent")
#: the references at a utility budget (bngp.defenses.budget), whose guarantee is that of shrinkage plus noise.
BUDGET_SPECS = ("budget-laplace", "budget-gaussian", "shrinkage", "suppression", "linear-optimal", "time-sharing",
                "data-independent")


def _training_config(**overrides) -> GameConfig:
    """Four steps.  ``defender_zero_output=False``: with the default zero output layer (and
    shrinkage 1) a 4-step run keeps its step-0 state, the data-independent release f(theta),
    whose "noise" f(theta) - f(D) involves no randomness, so seeds could not be told apart."""
    settings = dict(steps=4, fresh_check_steps=0, eval_every=2, checkpoint_every=2, attacker_refit_every=2,
                    batch_size=8, eval_batch=16, refit_releases=64, seed=3, defender_zero_output=False)
    settings.update(overrides)
    return GameConfig.from_flat(settings)


@pytest.fixture(scope="module")
def runs(small_population, tmp_path_factory) -> dict[str, str]:
    """Two tiny trained defenders: ``plain`` and ``composed`` (after a fixed Gaussian of sigma 0.05)."""
    root = tmp_path_factory.mktemp("defense-contract-runs")
    prior = UniformSubsetPrior(small_population.n_individuals, N_MEMBERS)
    paths = {}
    for name, overrides in (("plain", {}), ("composed", {"fixed_gaussian_sigmas": (0.05,)})):
        Game(small_population, prior, _training_config(**overrides)).train(root / name, progress=False)
        paths[name] = str(root / name)
    return paths


@pytest.fixture(scope="module")
def context(small_population) -> DefenseContext:
    return DefenseContext(small_population, N_MEMBERS)


@pytest.fixture(scope="module")
def memberships(small_population) -> np.ndarray:
    return UniformSubsetPrior(small_population.n_individuals, N_MEMBERS).sample(BATCH, np.random.default_rng(17))


def _spec(template: str, runs: dict[str, str]) -> str:
    return template.format(**runs)


def _name(template: str) -> str:
    return template.split(":")[0]


def _releases(defense, genotypes: np.ndarray, b: np.ndarray, seed: int) -> np.ndarray:
    return sample_releases(release_mechanism(genotypes, defense.composition), defense, b, torch_generator(seed))


def test_every_registered_defense_is_covered() -> None:
    assert set(available_defenses()) <= {_name(template) for template in SPECS}


@pytest.mark.parametrize("template", SPECS)
def test_releases_shape_range_and_seeded_noise(template, runs, context, memberships, small_population) -> None:
    defense = parse_defense_spec(_spec(template, runs), context)
    genotypes = small_population.genotypes
    n_snvs = small_population.n_attributes
    expected_composition = 2 if "{composed}" in template else 1
    assert defense.composition == expected_composition
    releases = _releases(defense, genotypes, memberships, seed=5)
    assert releases.shape == (BATCH, defense.composition * n_snvs) and releases.dtype == np.float64
    assert np.all((releases >= 0) & (releases <= 1))
    np.testing.assert_array_equal(_releases(defense, genotypes, memberships, seed=5), releases)
    exact = np.tile(memberships @ genotypes / N_MEMBERS, defense.composition)
    if template in DETERMINISTIC:
        if template == "none":
            np.testing.assert_allclose(releases, exact, rtol=0, atol=1e-6)
        np.testing.assert_array_equal(_releases(defense, genotypes, memberships, seed=6), releases)
    else:
        assert not np.array_equal(_releases(defense, genotypes, memberships, seed=6), releases)
        assert np.abs(releases - exact).mean() > 1e-4  # noise is actually added
    if defense.composition > 1:
        with pytest.raises(InputError, match="copies of the statistic"):
            sample_releases(release_mechanism(genotypes, 1), defense, memberships, torch_generator(5))


@pytest.mark.parametrize("template", SPECS)
def test_a_defense_travels_to_another_process(template, runs, context, memberships, small_population) -> None:
    """A defense pickles to one that releases the same values from the same seed: the evaluation's
    helper process (bngp.workers) rebuilds every attack's knowledge from it."""
    defense = parse_defense_spec(_spec(template, runs), context)
    copy = pickle.loads(pickle.dumps(defense))
    genotypes = small_population.genotypes
    np.testing.assert_array_equal(_releases(copy, genotypes, memberships, seed=5),
                                  _releases(defense, genotypes, memberships, seed=5))


def _mean_abs_noise(kind: str, scale: float, n_outputs: int) -> float:
    """E|xi_j| of the DP noise laws: Laplace b, Gaussian sigma sqrt(2/pi), l-inf K-norm (d + 1) a / 2."""
    if kind == "laplace":
        return scale
    if kind == "gaussian":
        return scale * math.sqrt(2 / math.pi)
    assert kind == "linf"
    return (n_outputs + 1) * scale / 2


@pytest.mark.parametrize("template", [t for t in SPECS if t.split(":")[0].removeprefix("matched-") in
                                      ("laplace", "gaussian", "linf") and "space=population" not in t])
def test_dp_noise_has_the_mean_absolute_value_of_its_law(template, runs, context, memberships, small_population) -> None:
    """BATCH x |Q| = 7680 draws.  Standard error of the mean |xi| relative to it: Laplace 1.1%
    (sd |xi| = b), Gaussian 0.9% (sd/mean 0.76), l-inf 1.1% (the BATCH radii Gamma(d + 1, a)
    dominate: 1/sqrt(d + 1) per row); the tolerance of 5% is above 4 standard errors.
    Measured ratios (seed 8): 0.981, 1.006, 0.975; composed matched Laplace 0.993."""
    defense = parse_defense_spec(_spec(template, runs), context)
    law = defense.noise_law
    assert law is not None and law.kind == _name(template).removeprefix("matched-")
    mechanism = release_mechanism(small_population.genotypes, defense.composition)
    b = torch.as_tensor(memberships)
    xi = defense.noise(b, mechanism.statistic(b).double(), torch_generator(8)).numpy()
    expected = _mean_abs_noise(law.kind, law.scale, xi.shape[1])
    assert np.abs(xi).mean() == pytest.approx(expected, rel=0.05)


def _balle_wang_delta(epsilon: float, mu: float) -> float:
    """delta(eps) of the Gaussian mechanism with mu = sensitivity / sigma (Balle & Wang 2018, Thm 8)."""
    return norm.cdf(-epsilon / mu + mu / 2) - math.exp(epsilon) * norm.cdf(-epsilon / mu - mu / 2)


@pytest.mark.parametrize("template", SPECS)
def test_describe_and_closed_form_guarantee(template, runs, context, small_population) -> None:
    defense = parse_defense_spec(_spec(template, runs), context)
    description = json.loads(json.dumps(defense.describe(), allow_nan=False))
    name = _name(template)
    assert description["name"] == name
    n_snvs = small_population.n_attributes
    copies = defense.composition
    guarantee = defense.guarantee
    if name in ("none", "run", "time-sharing"):
        assert guarantee is None and description["guarantee"] is None
        return
    if name in BUDGET_SPECS:  # shrinkage a and scales s: eps = sum_j (1 - a_j) / (N s_j) (Laplace), mu-GDP (Gaussian)
        kept, scale = 1 - defense.shrink, defense.scale
        if np.any((kept > 0) & (scale == 0)):  # an attribute released exactly: no guarantee
            assert guarantee is None and description["guarantee"] is None
            return
        assert description["guarantee"] == guarantee.to_dict()
        ratio = kept[kept > 0] / (N_MEMBERS * scale[kept > 0])  # a suppressed attribute (a_j = 1) costs nothing
        if defense.law == "laplace":
            assert guarantee.epsilon == pytest.approx(float(np.sum(ratio)), rel=1e-12)
        else:
            mu = math.sqrt(float(np.sum(ratio**2)))
            assert guarantee.gdp_mu == pytest.approx(mu, rel=1e-12)
            assert _balle_wang_delta(guarantee.epsilon, mu) == pytest.approx(guarantee.delta, rel=1e-4)
        return
    assert description["guarantee"] == guarantee.to_dict()
    kind = name.removeprefix("matched-")
    parameters = description["parameters"]
    if kind == "laplace":
        sensitivity = 2.5 if "sensitivity=2.5" in template else copies * n_snvs / N_MEMBERS
        assert guarantee.sensitivity == pytest.approx(sensitivity, rel=1e-12) and guarantee.norm == "l1"
        assert guarantee.epsilon == pytest.approx(sensitivity / parameters["scale"], rel=1e-12)
        if "epsilon=5" in template:
            assert guarantee.epsilon == pytest.approx(5.0, rel=1e-12)
    elif kind == "gaussian":
        sensitivity = math.sqrt(copies * n_snvs) / N_MEMBERS
        mu = sensitivity / parameters["sigma"]
        assert guarantee.sensitivity == pytest.approx(sensitivity, rel=1e-12) and guarantee.norm == "l2"
        assert guarantee.gdp_mu == pytest.approx(mu, rel=1e-12)
        assert _balle_wang_delta(guarantee.epsilon, mu) == pytest.approx(guarantee.delta, rel=1e-4)
        if "epsilon=5" in template:
            assert (guarantee.epsilon, guarantee.delta) == (pytest.approx(5.0, rel=1e-12), 1e-6)
    elif kind == "linf":
        sensitivity = 1 / N_MEMBERS
        assert guarantee.sensitivity == pytest.approx(sensitivity, rel=1e-12) and guarantee.norm == "linf"
        assert guarantee.epsilon == pytest.approx(sensitivity / parameters["scale"], rel=1e-12)
    else:
        assert kind == "rr"
        assert parameters["flip_probability"] == pytest.approx(1 / (1 + math.exp(2.0)), rel=1e-12)
        assert guarantee.sensitivity == n_snvs and guarantee.norm == "hamming"
        assert guarantee.epsilon == pytest.approx(2.0 * n_snvs, rel=1e-12)
    if name.startswith("matched-"):
        record = description["matched"]
        assert record["run"] == _spec(template, runs).split("run=")[1].split(",")[0]
        assert record["epsilon"] == pytest.approx(guarantee.epsilon, rel=1e-12)
        assert record["scale"] == pytest.approx(parameters.get("scale", parameters.get("sigma")), rel=1e-12)


@pytest.mark.parametrize("run", ["plain", "composed"])
def test_matched_laplace_realises_the_runs_utility_loss(run, runs, context, small_population) -> None:
    """The matched mechanism's realised mean |release - f(D)| per output equals the trained
    defender's (the match's target), up to Monte Carlo error: 5% over 64 fresh releases."""
    template = f"matched-laplace:run={{{run}}}"
    matched = parse_defense_spec(_spec(template, runs), context)
    trained = parse_defense_spec(f"run:{runs[run]}", context)
    assert matched.composition == trained.composition
    genotypes = small_population.genotypes
    b = UniformSubsetPrior(genotypes.shape[0], N_MEMBERS).sample(BATCH, np.random.default_rng(23))
    exact = np.tile(b @ genotypes / N_MEMBERS, trained.composition)
    trained_loss = np.abs(_releases(trained, genotypes, b, seed=1) - exact).mean()
    matched_loss = np.abs(_releases(matched, genotypes, b, seed=2) - exact).mean()
    target = matched.describe()["matched"]["target_utility_loss"]
    assert trained_loss == pytest.approx(target, rel=0.05)
    assert matched_loss == pytest.approx(target, rel=0.05)


BAD_SPECS = [
    ("none:foo=1", InputError, "defense `none` takes no parameters."),
    ("NONE", UnknownNameError, "unknown defense 'NONE'; known: none,"),
    (":epsilon=1", UnknownNameError, "unknown defense ''"),
    ("laplace:epsilon=1,epsilon=2", InputError, "`epsilon` is given twice"),
    ("laplace:epsilon=1e400", InputError, "`epsilon` must be finite, got inf."),
    ("laplace:epsilon=1,sensitivity=0", InputError, "`sensitivity` must be a finite number > 0, got 0."),
    ("gaussian:scale=0.1,delta=1e-5,sensitivity=nan", InputError, "`sensitivity` must be a finite number > 0"),
    ("rr:epsilon=1,debias=", InputError, "malformed defense SPEC"),
    ("run:", DataFormatError, "defense `run` is written run:RUN_DIR."),
    ("run:dir={plain},extra=1", DataFormatError, "defense `run` is written run:RUN_DIR."),
    ("run:{plain}/no-such-dir", MissingFileError, "run directory not found"),
    ("run:{root}", DataFormatError, "is not a complete bngp run"),
    ("matched-laplace", InputError, "defense `matched-laplace` needs `run=RUN_DIR`."),
    ("matched-laplace:{plain}", InputError, "malformed defense SPEC"),
    ("matched-laplace:run={plain},foo=1", InputError, "defense `matched-laplace` does not take `foo`."),
    ("matched-linf:run={plain},delta=1e-5", InputError, "defense `matched-linf` does not take `delta`."),
    ("matched-gaussian:run={plain}", InputError, "defense `matched-gaussian` needs `delta=...`."),
    ("matched-gaussian:run={plain},delta=2", InputError, "`delta` must be in (0, 1), got 2."),
    ("matched-laplace:run={plain},space=population", InputError,
     "`space=population` matches the Gaussian mechanism only, not `laplace`"),
    ("matched-gaussian:run={plain},delta=1e-5,space=panel", InputError, "`space` must be attributes or population"),
    ("matched-gaussian:run={composed},delta=1e-5,space=population", InputError,
     "`space=population` matches a mechanism on one copy only."),
    ("matched-laplace:run={plain},draws=abc", InputError, "`draws` of defense `matched-laplace` must be a whole number"),
    ("matched-laplace:run={plain},sensitivity=huge", InputError, "`sensitivity` must be one of paper, replace"),
    ("matched-laplace:run={plain},run={plain}", InputError, "`run` is given twice"),
    ("matched-laplace:run=/no/such/run", MissingFileError, "run directory not found"),
    ("matched-laplace:run={plain},draws=-3", InputError, "draws"),
    ("matched-laplace:run={plain},draws=0", InputError, "draws"),
    ("matched-laplace:run={plain},draws=2.7", InputError, "draws"),
]


@pytest.mark.parametrize(("template", "error", "message"), BAD_SPECS)
def test_bad_specs_raise_typed_one_line_errors(template, error, message, runs, context) -> None:
    root = str(Path(runs["plain"]).parent)
    spec = template.format(root=root, **runs)
    with pytest.raises(BNGPError) as info:
        parse_defense_spec(spec, context)
    assert isinstance(info.value, error), f"{type(info.value).__name__}: {info.value}"
    assert message in str(info.value) and "\n" not in str(info.value)


@pytest.mark.parametrize("template", ["run:{plain}", "matched-laplace:run={plain}"])
def test_trained_defenses_check_the_context(template, runs, small_population) -> None:
    """A run trained for n = 20 on this population refuses another n or another population."""
    spec = _spec(template, runs)
    with pytest.raises(DataFormatError, match="trained for 20 members, got --members 10"):
        parse_defense_spec(spec, DefenseContext(small_population, 10))
    other = simulate_independent(small_population.genotypes.shape[0], 10, small_population.genotypes.shape[1], seed=99)
    with pytest.raises(DataFormatError, match="different population"):
        parse_defense_spec(spec, DefenseContext(other, N_MEMBERS))
