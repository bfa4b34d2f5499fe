"""``--defense SPEC`` parsing for the DP mechanisms, bad input, and the contract every DP
defense keeps (shape, dtype, seeded replay, guarantee and noise law as data)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch
from scipy.stats import norm

from bngp.data.population import Population
from bngp.errors import InputError, UnknownNameError
from bngp.release.mechanism import SummaryStatistics
from bngp.defenses import DefenseContext, available_defenses, defense_help, parse_defense_spec, registry

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def context() -> DefenseContext:
    rng = np.random.default_rng(0)
    genotypes = (rng.random((30, 40)) < 0.4).astype(np.uint8)
    return DefenseContext(Population(genotypes=genotypes, reference=genotypes[:5]), n_members=10)


def test_registered_names() -> None:
    assert {"laplace", "gaussian", "linf", "rr"} <= set(available_defenses())


def test_every_list_of_defenses_is_derived_from_the_one_table() -> None:
    """Adding a defense is one entry of DEFENSES: the parser, the help line and the name lists follow."""
    names = [entry.name for entry in registry.DEFENSES]
    assert available_defenses() == names and len(set(names)) == len(names)
    assert all(entry.family in registry.FAMILIES for entry in registry.DEFENSES)
    assert registry.DP_SPECS == ("laplace", "gaussian", "linf", "rr")
    assert registry.BUDGET_SPECS == ("budget-laplace", "budget-gaussian", "shrinkage", "suppression", "linear-optimal",
                            "time-sharing")
    assert defense_help().split(" | ") == [entry.spec for entry in registry.DEFENSES]
    assert all(entry.spec.split(":")[0] == entry.name for entry in registry.DEFENSES)
    assert registry.split_spec("run:some/dir") == ("run", {"dir": "some/dir"})  # the positional key of the run entry


@pytest.mark.parametrize(
    ("spec", "mechanism", "epsilon", "delta", "sensitivity", "norm", "law"),
    [
        ("laplace:epsilon=2", "laplace", 2.0, 0.0, 40 / 10, "l1", ("laplace", 2.0)),
        ("laplace:scale=0.5", "laplace", 8.0, 0.0, 4.0, "l1", ("laplace", 0.5)),
        ("laplace:epsilon=2,sensitivity=0.8", "laplace", 2.0, 0.0, 0.8, "l1", ("laplace", 0.4)),
        ("gaussian:epsilon=1,delta=1e-5", "gaussian", 1.0, 1e-5, math.sqrt(40) / 10, "l2", None),
        ("gaussian:scale=2,delta=1e-5", "gaussian", None, 1e-5, math.sqrt(40) / 10, "l2", ("gaussian", 2.0)),
        ("linf:epsilon=3", "linf-k-norm", 3.0, 0.0, 0.1, "linf", ("linf", 0.1 / 3)),
        ("linf:scale=0.05,sensitivity=0.1", "linf-k-norm", 2.0, 0.0, 0.1, "linf", ("linf", 0.05)),
        ("rr:epsilon=0.5", "randomized-response", 20.0, 0.0, 40.0, "hamming", None),
        (" rr : epsilon = 0.5 , debias = false ", "randomized-response", 20.0, 0.0, 40.0, "hamming", None),
    ],
)
def test_spec_builds_the_calibrated_guarantee(context, spec, mechanism, epsilon, delta, sensitivity, norm, law) -> None:
    defense = parse_defense_spec(spec, context)
    guarantee = defense.guarantee
    assert guarantee.mechanism == mechanism
    if epsilon is not None:
        assert guarantee.epsilon == pytest.approx(epsilon, rel=1e-12)
    assert guarantee.delta == delta
    assert guarantee.sensitivity == pytest.approx(sensitivity)
    assert guarantee.norm == norm
    if law is not None:
        assert (defense.noise_law.kind, defense.noise_law.scale) == (law[0], pytest.approx(law[1]))
    json.dumps(defense.describe())


def test_default_sensitivity_is_paper_and_population_options_are_smaller(context) -> None:
    paper = parse_defense_spec("laplace:epsilon=1", context).guarantee
    assert (paper.sensitivity, paper.neighbouring) == (4.0, "replace")
    replace = parse_defense_spec("laplace:epsilon=1,sensitivity=replace", context).guarantee
    add_remove = parse_defense_spec("laplace:epsilon=1,sensitivity=add-remove", context).guarantee
    assert replace.sensitivity == add_remove.sensitivity < paper.sensitivity
    assert add_remove.neighbouring == "add-remove"
    gaussian = parse_defense_spec("gaussian:epsilon=1,delta=1e-5,sampler=opendp", context)
    assert gaussian.sampler == "opendp"
    rr = parse_defense_spec("rr:epsilon=1,debias=no", context)
    assert rr.debias is False and rr.noise_law is None


@pytest.mark.parametrize(
    ("spec", "error", "message"),
    [
        ("laplace:epsilon=-1", InputError, "`epsilon` must be > 0, got -1."),
        ("laplace:epsilon=0", InputError, "`epsilon` must be > 0, got 0."),
        ("laplace:epsilon=nan", InputError, "`epsilon` must be > 0, got nan."),
        ("linf:epsilon=inf", InputError, "`epsilon` must be finite, got inf."),
        ("rr:epsilon=-2", InputError, "`epsilon` must be > 0, got -2."),
        ("laplace:scale=0", InputError, "`scale` must be > 0, got 0."),
        ("gaussian:epsilon=1,delta=1.3", InputError, "`delta` must be in (0, 1), got 1.3."),
        ("gaussian:epsilon=1,delta=0", InputError, "`delta` must be in (0, 1), got 0."),
        ("gaussian:epsilon=1,delta=1", InputError, "`delta` must be in (0, 1), got 1."),
        ("gaussian:epsilon=1", InputError, "defense `gaussian` needs `delta=...`."),
        ("laplace", InputError, "needs exactly one of `epsilon=...` or `scale=...`"),
        ("laplace:epsilon=1,scale=2", InputError, "needs exactly one of `epsilon=...` or `scale=...`"),
        ("laplace:epsilon=abc", InputError, "`epsilon` of defense `laplace` must be a number, got 'abc'."),
        ("laplace:epsilon", InputError, "malformed defense SPEC"),
        ("laplace:epsilon=1,,", InputError, "malformed defense SPEC"),
        ("laplace:epsilon=1,foo=2", InputError, "defense `laplace` does not take `foo`"),
        ("laplace:epsilon=1,sampler=numpy", InputError, "`sampler` must be one of torch, opendp, got 'numpy'."),
        ("laplace:epsilon=1,sensitivity=huge", InputError, "`sensitivity` must be one of paper, replace"),
        ("linf:epsilon=1,sampler=opendp", InputError, "not available for `linf`"),
        ("rr:epsilon=1,sensitivity=add-remove", InputError, "no add-remove sensitivity"),
        ("rr:epsilon=1,debias=maybe", InputError, "`debias` must be true or false, got 'maybe'."),
        ("exponential:epsilon=1", UnknownNameError, "unknown defense 'exponential'"),
        ("", InputError, "`--defense` must not be empty."),
    ],
)
def test_bad_specs_raise_one_line_input_errors(context, spec: str, error: type, message: str) -> None:
    with pytest.raises(error) as info:
        parse_defense_spec(spec, context)
    assert isinstance(info.value, InputError)
    assert message in str(info.value)
    assert "\n" not in str(info.value)


DP_SPECS = [
    "laplace:epsilon=5",
    "gaussian:epsilon=5,delta=1e-6",
    "linf:epsilon=5",
    "rr:epsilon=2",
    "rr:epsilon=2,debias=false",
]


#: (eps, delta, noise-law scale) of DP_SPECS for |Q| = 40, n = 10: Laplace scale = (|Q|/n) / eps,
#: l-inf scale = (1/n) / eps, randomized response eps = eps per bit x |Q| (the Gaussian's sigma
#: is checked against the Balle & Wang delta(eps) instead).
CONTRACT_GUARANTEES = {
    "laplace:epsilon=5": (5.0, 0.0, 4.0 / 5),
    "gaussian:epsilon=5,delta=1e-6": (5.0, 1e-6, None),
    "linf:epsilon=5": (5.0, 0.0, 0.1 / 5),
    "rr:epsilon=2": (80.0, 0.0, None),
    "rr:epsilon=2,debias=false": (80.0, 0.0, None),
}


@pytest.mark.parametrize("spec", DP_SPECS)
def test_contract(context, spec: str) -> None:
    defense = parse_defense_spec(spec, context)
    mechanism = SummaryStatistics(context.population.genotypes)
    b = torch.zeros((6, 30))
    b[:, :10] = 1
    b[3] = 0  # a row without members
    x_hat = mechanism.statistic(b)

    def noise(seed: int) -> torch.Tensor:
        return defense.noise(b, x_hat, torch.Generator().manual_seed(seed))

    xi = noise(0)
    assert xi.shape == x_hat.shape and xi.dtype == x_hat.dtype
    assert torch.isfinite(xi).all()
    assert torch.equal(xi, noise(0))
    assert not torch.equal(xi, noise(1))
    release = mechanism.release(b, xi)
    assert ((release >= 0) & (release <= 1)).all()
    guarantee = defense.guarantee
    epsilon, delta, scale = CONTRACT_GUARANTEES[spec]
    assert (guarantee.epsilon, guarantee.delta) == (pytest.approx(epsilon, rel=1e-12), delta)
    description = json.loads(json.dumps(defense.describe()))
    assert description["name"] == spec.split(":")[0]
    assert description["guarantee"]["mechanism"] == guarantee.mechanism
    if spec.startswith("rr"):
        assert defense.noise_law is None
    elif spec.startswith("gaussian"):  # sigma solves delta(eps) = delta (Balle & Wang 2018, Thm 8)
        mu = guarantee.sensitivity / defense.noise_law.scale
        assert norm.cdf(-5 / mu + mu / 2) - math.exp(5) * norm.cdf(-5 / mu - mu / 2) == pytest.approx(1e-6, rel=1e-4)
    else:
        assert defense.noise_law.scale == pytest.approx(scale, rel=1e-12)
    with pytest.raises(InputError):
        defense.noise(b, x_hat[0], torch.Generator())
