"""Registry mapping attack names (as used on the command line) to attack classes."""

from __future__ import annotations

from collections.abc import Callable

from attacks.base import Attack
from bngp.errors import UnknownNameError

__all__ = ["register_attack", "get_attack", "available_attacks", "parse_attack_names"]

_REGISTRY: dict[str, Callable[..., Attack]] = {}


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


def get_attack(name: str, **options: object) -> Attack:
    """Instantiate the attack registered as ``name``."""
    if name not in _REGISTRY:
        raise UnknownNameError(f"unknown attack {name!r}; known: {', '.join(available_attacks())}.")
    return _REGISTRY[name](**options)


def parse_attack_names(text: str) -> list[str]:
    """Parse a comma-separated list of attack names; ``all`` expands to every registered attack."""
    names = [part.strip() for part in text.split(",") if part.strip()]
    if not names:
        raise UnknownNameError("`--attacks` must name at least one attack.")
    expanded: list[str] = []
    for name in names:
        for item in available_attacks() if name == "all" else [name]:
            if item not in _REGISTRY:
                raise UnknownNameError(f"unknown attack {item!r}; known: {', '.join(available_attacks())}, all.")
            if item not in expanded:
                expanded.append(item)
    return expanded
