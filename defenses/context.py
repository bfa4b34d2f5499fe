"""What a ``--defense SPEC`` factory is given: the population, the dataset size and the SPEC's parameters.

A factory (:data:`DefenseFactory`) takes the SPEC's parameters (``key=value`` pairs, values as
strings) and a :class:`DefenseContext` and returns the defense; the factories are listed in
:data:`bngp.defenses.registry.DEFENSES`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from bngp.data.population import Population
from bngp.errors import InputError
from .base import Defense

__all__ = ["DefenseContext", "DefenseFactory", "float_param"]


@dataclass(frozen=True, eq=False)
class DefenseContext:
    """What a defense factory may need: the population and the number of members n."""

    population: Population
    n_members: int


DefenseFactory = Callable[[dict[str, str], DefenseContext], Defense]


def float_param(params: dict[str, str], key: str, spec_name: str) -> float:
    """Read a required float parameter ``key`` of a SPEC."""
    if key not in params:
        raise InputError(f"defense `{spec_name}` needs `{key}=...`.")
    try:
        return float(params[key])
    except ValueError as exc:
        raise InputError(f"`{key}` of defense `{spec_name}` must be a number, got {params[key]!r}.") from exc
