"""Parsing ``--defense SPEC`` strings into defenses.

SPEC grammar: ``NAME`` or ``NAME:key=value,key=value`` (e.g. ``laplace:epsilon=1e5``), or
``run:RUN_DIR`` / ``matched-laplace:run=RUN_DIR``.  A plug-in registers a factory that takes
the parsed parameters and a :class:`DefenseContext` (the population and dataset size the
defense will be applied to).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from bngp.data.population import Population
from bngp.errors import InputError, UnknownNameError
from .base import Defense, NoDefense

__all__ = ["DefenseContext", "register_defense", "parse_defense_spec", "available_defenses", "split_spec", "float_param"]


@dataclass(frozen=True, eq=False)
class DefenseContext:
    """What a defense factory may need: the population and the number of members n."""

    population: Population
    n_members: int


DefenseFactory = Callable[[dict[str, str], DefenseContext], Defense]
_REGISTRY: dict[str, DefenseFactory] = {}
#: names whose SPEC is ``name:VALUE`` with a single positional value (stored under this key).
_POSITIONAL_KEY: dict[str, str] = {}


def register_defense(name: str, *, positional: str | None = None) -> Callable[[DefenseFactory], DefenseFactory]:
    """Register a defense factory under ``name``; ``positional`` names a bare ``name:VALUE`` parameter."""

    def decorator(factory: DefenseFactory) -> DefenseFactory:
        _REGISTRY[name] = factory
        if positional is not None:
            _POSITIONAL_KEY[name] = positional
        return factory

    return decorator


def available_defenses() -> list[str]:
    """Registered defense names."""
    return list(_REGISTRY)


def split_spec(spec: str) -> tuple[str, dict[str, str]]:
    """Split ``NAME:key=value,...`` into the name and a parameter dict (values as strings)."""
    spec = spec.strip()
    if not spec:
        raise InputError("`--defense` must not be empty.")
    name, _, rest = spec.partition(":")
    name = name.strip()
    params: dict[str, str] = {}
    if rest:
        if name in _POSITIONAL_KEY and "=" not in rest:
            return name, {_POSITIONAL_KEY[name]: rest}
        for item in rest.split(","):
            key, sep, value = item.partition("=")
            if not sep or not key.strip() or not value.strip():
                raise InputError(f"malformed defense SPEC {spec!r}: expected NAME:key=value[,key=value].")
            if key.strip() in params:
                raise InputError(f"malformed defense SPEC {spec!r}: `{key.strip()}` is given twice.")
            params[key.strip()] = value.strip()
    return name, params


def parse_defense_spec(spec: str, context: DefenseContext) -> Defense:
    """Build the defense described by ``spec`` for ``context``."""
    name, params = split_spec(spec)
    if name not in _REGISTRY:
        raise UnknownNameError(f"unknown defense {name!r}; known: {', '.join(available_defenses())}.")
    return _REGISTRY[name](params, context)


def float_param(params: dict[str, str], key: str, spec_name: str) -> float:
    """Read a required float parameter ``key`` of a SPEC."""
    if key not in params:
        raise InputError(f"defense `{spec_name}` needs `{key}=...`.")
    try:
        return float(params[key])
    except ValueError as exc:
        raise InputError(f"`{key}` of defense `{spec_name}` must be a number, got {params[key]!r}.") from exc


@register_defense("none")
def _no_defense(params: dict[str, str], context: DefenseContext) -> Defense:
    if params:
        raise InputError("defense `none` takes no parameters.")
    return NoDefense()
