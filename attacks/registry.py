"""Registry mapping attack names (as used on the command line) to attack classes.

``all`` expands to every registered attack, or, given the attacker's knowledge, to every
attack whose ``requires`` is satisfied by it (:func:`applicable_attacks`).
"""

from __future__ import annotations

from collections.abc import Callable

from .base import Attack, AttackKnowledge
from bngp.errors import UnknownNameError

__all__ = [
    "register_attack",
    "get_attack",
    "available_attacks",
    "applicable_attacks",
    "attack_requirements",
    "attack_class",
    "parse_attack_names",
]

_REGISTRY: dict[str, type[Attack]] = {}


def register_attack(name: str) -> Callable[[type[Attack]], type[Attack]]:
    """Class decorator registering an attack under ``name``."""

    def decorator(cls: type[Attack]) -> type[Attack]:
        _REGISTRY[name] = cls
        cls.name = name
        return cls

    return decorator


def available_attacks() -> list[str]:
    """Registered attack names in registration order."""
    return list(_REGISTRY)


def attack_class(name: str) -> type[Attack]:
    """The class registered as ``name`` (its declarations: ``requires``, ``trained_by_config``, ...)."""
    if name not in _REGISTRY:
        raise UnknownNameError(f"unknown attack {name!r}; known: {', '.join(available_attacks())}.")
    return _REGISTRY[name]


def attack_requirements(name: str) -> frozenset[str]:
    """The knowledge fields the attack registered as ``name`` requires."""
    return frozenset(getattr(attack_class(name), "requires", frozenset()))


def applicable_attacks(knowledge: AttackKnowledge) -> list[str]:
    """Registered attacks whose ``requires`` are all available in ``knowledge`` (registration order)."""
    available = knowledge.available()
    return [name for name in _REGISTRY if attack_requirements(name) <= available]


def get_attack(name: str, **options: object) -> Attack:
    """Instantiate the attack registered as ``name``."""
    return attack_class(name)(**options)


def parse_attack_names(text: str, knowledge: AttackKnowledge | None = None) -> list[str]:
    """Parse a comma-separated list of attack names.

    ``all`` expands to :func:`applicable_attacks` of ``knowledge`` when it is given, else to
    every registered attack.  Explicitly named attacks are kept even when not applicable
    (fitting them then reports the missing knowledge).
    """
    names = [part.strip() for part in text.split(",") if part.strip()]
    if not names:
        raise UnknownNameError("`--attacks` must name at least one attack.")
    everything = available_attacks() if knowledge is None else applicable_attacks(knowledge)
    expanded: list[str] = []
    for name in names:
        for item in everything if name == "all" else [name]:
            if item not in _REGISTRY:
                raise UnknownNameError(f"unknown attack {item!r}; known: {', '.join(available_attacks())}, all.")
            if item not in expanded:
                expanded.append(item)
    return expanded
