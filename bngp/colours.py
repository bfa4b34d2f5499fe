"""One colour per attack, per defense family and per plot role, the same in every plot.

Every plot of the package takes its colours from here, so that ``linear`` or ``laplace`` is drawn
in the same colour in a ROC plot, a learning-curve plot, a sweep frontier and a reproduction.
A name without a fixed colour gets one chosen by a hash of the name (the same in every process)
from :data:`SPARE_COLOURS`, a palette that shares no colour with the fixed ones.

>>> attack_colour("linear") == attack_colour("linear")
True
>>> method_colour("laplace:epsilon=1") == method_colour("laplace")
True
>>> attack_colour("an attack of my own") in SPARE_COLOURS
True
"""

from __future__ import annotations

import colorsys
import hashlib
from collections.abc import Callable, Iterable

__all__ = ["ATTACK_COLOURS", "METHOD_COLOURS", "ROLE_COLOURS", "SPARE_COLOURS", "attack_colour", "method_colour",
           "role", "role_colour", "family", "colour_map"]

#: every registered attack (``bngp.attacks.registry``).
ATTACK_COLOURS: dict[str, str] = {
    "lrt": "#1f77b4",
    "adaptive-lrt": "#17becf",
    "optimal-lrt": "#08306b",
    "score": "#ff7f0e",
    "homer": "#c49a00",
    "tree": "#8c564b",
    "svm": "#e377c2",
    "linear": "#2ca02c",
    "linear-box": "#1b5e20",
    "whitened": "#d62728",
    "reconstruction": "#9467bd",
    "reconstruction-l1": "#bcbd22",
    "bayesian": "#00695c",
    "per-individual": "#b5179e",
    "stacked": "#000000",
}

#: every registered defense and every family of a sweep or frontier; variants of one mechanism
#: share its hue (``budget-`` darker, ``matched-`` lighter).
METHOD_COLOURS: dict[str, str] = {
    "none": "#000000",
    "laplace": "#1f77b4",
    "budget-laplace": "#0b3d91",
    "matched-laplace": "#6baed6",
    "gaussian": "#ff7f0e",
    "budget-gaussian": "#a63603",
    "matched-gaussian": "#fdae6b",
    "linf": "#17becf",
    "matched-linf": "#0e7c86",
    "rr": "#bcbd22",
    "shrinkage": "#2ca02c",
    "suppression": "#8c564b",
    "linear-optimal": "#9467bd",
    "time-sharing": "#8a8a8a",
    "data-independent": "#4d4d4d",
    "bngp": "#d62728",
    "bngp-budget": "#e7298a",
}

#: aliases of :data:`METHOD_COLOURS` names: a trained run is a BNGP defender, f(theta) the
#: data-independent release.
_METHOD_ALIASES = {"run": "bngp", "trained": "bngp", "f(theta)": "data-independent"}

#: the fixed parts of a plot that are neither an attack nor a defense: audit curves (the leading
#: word of their label) and reference lines.
ROLE_COLOURS: dict[str, str] = {
    "chance": "#7f7f7f",
    "empirical": "#1f77b4",
    "claim": "#d62728",
    "certified": "#2ca02c",
    "gdp": "#9467bd",
    "fdp-one-run": "#ff7f0e",
    "guesses": "#8c564b",
    "error-rate": "#e377c2",
    "envelope": "#000000",
}

#: the palette of names without a fixed colour: muted hues, none equal to a fixed colour, in an
#: order where neighbours differ in hue by about half the circle and in brightness.
SPARE_COLOURS: tuple[str, ...] = tuple(
    "#{:02x}{:02x}{:02x}".format(*(round(255 * c) for c in colorsys.hsv_to_rgb(
        (index * 7 % 16) / 16, 0.6, 0.5 if index % 2 else 0.72)))
    for index in range(16)
)


def _slot(name: str) -> int:
    """The index in :data:`SPARE_COLOURS` of ``name``: a hash of it, stable across processes."""
    return int.from_bytes(hashlib.sha256(name.encode()).digest()[:4], "big") % len(SPARE_COLOURS)


def _hashed(name: str) -> str:
    """The colour of :data:`SPARE_COLOURS` chosen by a hash of ``name``."""
    return SPARE_COLOURS[_slot(name)]


def attack_colour(name: str) -> str:
    """The colour of the attack ``name``: fixed for a registered attack, else hashed."""
    return ATTACK_COLOURS.get(name) or _hashed(name)


def family(spec: str) -> str:
    """The defense family of a SPEC or label: ``laplace:epsilon=1`` -> ``laplace``,
    ``shrinkage laplace a=0.2`` -> ``shrinkage``, ``run:RUN`` -> ``bngp``."""
    name = spec.split(":", 1)[0].split(" ", 1)[0]
    return _METHOD_ALIASES.get(name, name)


def method_colour(spec: str) -> str:
    """The colour of a defense SPEC, name or label (its :func:`family`): fixed for a known family, else hashed."""
    return METHOD_COLOURS.get(family(spec)) or _hashed(family(spec))


def role(label: str) -> str:
    """The role of a plot label: its leading word (``"claim gaussian:mu=1"`` -> ``claim``,
    ``"gdp: mu_lb = 0.3"`` -> ``gdp``)."""
    return label.split(" ", 1)[0].rstrip(":")


def role_colour(label: str) -> str:
    """The colour of the :func:`role` of ``label``: fixed for a role of :data:`ROLE_COLOURS`, else hashed."""
    return ROLE_COLOURS.get(role(label)) or _hashed(label)


def _near(first: int, second: int) -> bool:
    """Whether two slots of :data:`SPARE_COLOURS` look alike: hues at most one step of sixteen
    apart, or two at the same brightness."""
    apart = abs(first * 7 % 16 - second * 7 % 16)
    return min(apart, 16 - apart) <= (2 if (first - second) % 2 == 0 else 1)


def colour_map(names: Iterable[str], colour: Callable[[str], str]) -> dict[str, str]:
    """The colours of the ``names`` drawn together in one plot: ``colour(name)`` (one of
    :func:`attack_colour`, :func:`method_colour`, :func:`role_colour`) for each name with a fixed
    colour; a name without one gets its hashed spare colour unless that looks like a spare colour
    already given in this plot, and then the next spare colour (in the palette's order) that looks
    like none of them, so that unrelated names stay apart while the palette allows.

    >>> colours = colour_map(["linear", "mine", "yours"], attack_colour)
    >>> colours["linear"] == attack_colour("linear"), len(set(colours.values()))
    (True, 3)
    """
    chosen: dict[str, str] = {}
    taken: list[int] = []
    for name in dict.fromkeys(names):
        chosen[name] = colour(name)
        if chosen[name] not in SPARE_COLOURS:
            continue
        slot = SPARE_COLOURS.index(chosen[name])
        candidates = [(slot + step) % len(SPARE_COLOURS) for step in range(len(SPARE_COLOURS))]
        slot = next((c for c in candidates if not any(_near(c, other) for other in taken)),
                    next((c for c in candidates if c not in taken), slot))
        taken.append(slot)
        chosen[name] = SPARE_COLOURS[slot]
    return chosen
