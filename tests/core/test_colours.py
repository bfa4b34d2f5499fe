"""One colour per attack, per defense family and per plot role (bngp.colours), the same in every plot."""

from __future__ import annotations

import subprocess
import sys

import pytest

from bngp.attacks.registry import available_attacks
from bngp.colours import (ATTACK_COLOURS, METHOD_COLOURS, ROLE_COLOURS, SPARE_COLOURS, attack_colour, colour_map,
                          family, method_colour, role_colour)
from bngp.defenses.budget import REFERENCE_KINDS
from bngp.defenses.registry import BUDGET_SPECS, available_defenses
from bngp.sweep.config import BNGP_FAMILY, BUDGET_FAMILY

FIXED = set(ATTACK_COLOURS.values()) | set(METHOD_COLOURS.values()) | set(ROLE_COLOURS.values())


def test_every_registered_attack_has_its_own_fixed_colour() -> None:
    assert set(available_attacks()) <= set(ATTACK_COLOURS)
    assert len(set(ATTACK_COLOURS.values())) == len(ATTACK_COLOURS)


def test_every_defense_and_family_has_its_own_fixed_colour() -> None:
    names = {*available_defenses(), *BUDGET_SPECS, *REFERENCE_KINDS, BNGP_FAMILY, BUDGET_FAMILY, "data-independent"}
    assert {family(name) for name in names} <= set(METHOD_COLOURS)
    assert len(set(METHOD_COLOURS.values())) == len(METHOD_COLOURS)
    assert len(set(ROLE_COLOURS.values())) == len(ROLE_COLOURS)


@pytest.mark.parametrize(("spec", "name"), [("laplace:epsilon=1", "laplace"), ("gaussian:delta=1e-5", "gaussian"),
                                            ("shrinkage laplace a=0.2", "shrinkage"), ("run:RUN", "bngp"),
                                            ("f(theta)", "data-independent"), ("bngp-budget:budget=0.5x", "bngp-budget")])
def test_a_spec_or_label_takes_its_family_colour(spec: str, name: str) -> None:
    assert family(spec) == name and method_colour(spec) == METHOD_COLOURS[name]


def test_audit_roles_are_read_from_the_leading_word() -> None:
    assert role_colour("claim gaussian:mu=1") == ROLE_COLOURS["claim"]
    assert role_colour("certified by many-run: (eps = 0.4, delta = 1e-05)-DP curve") == ROLE_COLOURS["certified"]
    assert role_colour("gdp: mu_lb = 0.700 Gaussian curve") == ROLE_COLOURS["gdp"]
    assert role_colour("error-rate upper limit (0.360, same)") == ROLE_COLOURS["error-rate"]


def test_an_unknown_name_gets_a_spare_colour_that_is_the_same_in_another_process() -> None:
    assert not FIXED & set(SPARE_COLOURS) and len(set(SPARE_COLOURS)) == len(SPARE_COLOURS)
    names = ["my-attack", "run-kappa-1.5 / linear", "experimental"]
    here = [attack_colour(name) for name in names]
    assert all(colour in SPARE_COLOURS for colour in here)
    there = subprocess.run([sys.executable, "-c", f"from bngp.colours import attack_colour; "
                            f"print(*[attack_colour(n) for n in {names!r}])"],
                           capture_output=True, text=True, check=True).stdout.split()
    assert there == here


def test_a_colour_map_keeps_fixed_colours_and_keeps_unknown_names_apart() -> None:
    unknown = [f"attack-{index}" for index in range(12)]
    colours = colour_map(["linear", *unknown, "laplace"], attack_colour)
    assert colours["linear"] == ATTACK_COLOURS["linear"]
    assert len({colours[name] for name in unknown}) == len(unknown)
    assert colour_map(["gaussian:delta=1e-5", "gaussian:delta=1e-8"], method_colour) == {
        "gaussian:delta=1e-5": METHOD_COLOURS["gaussian"], "gaussian:delta=1e-8": METHOD_COLOURS["gaussian"]}
