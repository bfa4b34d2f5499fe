"""Parsing ``--defense SPEC`` strings into defenses, and every defense, one entry each: the only place a
defense is added.

SPEC grammar: ``NAME`` or ``NAME:key=value,key=value`` (e.g. ``laplace:epsilon=1e5``), or
``run:RUN_DIR`` / ``matched-laplace:run=RUN_DIR`` (:func:`split_spec`).

An entry (:class:`DefenseEntry`) gives the SPEC name, the factory that builds the defense from
the SPEC's parameters and a :class:`~bngp.defenses.context.DefenseContext`, the SPEC's form
(for ``--help`` and the docs), its family and, for a ``NAME:VALUE`` SPEC, the key of the bare
value.  Derived from :data:`DEFENSES`: the names :func:`parse_defense_spec` knows
(:func:`available_defenses`), the ``--defense`` help line (:func:`defense_help`),
the DP mechanisms (:data:`DP_SPECS`) and the references at a utility budget (:data:`BUDGET_SPECS`).

Families: ``"none"`` (f(D) itself), ``"dp"`` (the DP mechanisms, :mod:`bngp.defenses.dp`),
``"trained"`` (a BNGP defender, arXiv:2410.07414 section 3), ``"matched"`` (a DP mechanism matched
in utility to a trained defender), ``"reference"`` (the references at a utility budget,
:mod:`bngp.defenses.budget`) and ``"data-independent"`` (the release f(theta), section 3.3).
"""

from __future__ import annotations

from dataclasses import dataclass

from bngp.errors import InputError, UnknownNameError
from .base import Defense, NoDefense
from .budget import data_independent_factory, spec_factory
from .context import DefenseContext, DefenseFactory
from .dp import LaplaceDefense, LinfKNormDefense
from .matched_run import matched_factory
from .specs import gaussian_factory, pure_factory, rr_factory
from .trained import run_factory

__all__ = ["BUDGET_SPECS", "DEFENSES", "DP_SPECS", "FAMILIES", "DefenseContext", "DefenseEntry", "available_defenses",
           "defense_help", "parse_defense_spec", "split_spec"]

#: the families of :class:`DefenseEntry` (module docstring).
FAMILIES = ("none", "dp", "trained", "matched", "reference", "data-independent")


@dataclass(frozen=True)
class DefenseEntry:
    """One defense of ``--defense SPEC``.

    Attributes:
        name: the SPEC name, before the ``:``.
        factory: builds the defense from the SPEC's parameters (values as strings) and the context.
        spec: the SPEC's short form for the help line, e.g. ``"laplace:epsilon=E"``.
        family: one of :data:`FAMILIES`.
        positional: for a ``NAME:VALUE`` SPEC, the parameter key of the bare value (``run:RUN_DIR``: ``dir``).
    """

    name: str
    factory: DefenseFactory
    spec: str
    family: str
    positional: str | None = None


def _no_defense(params: dict[str, str], context: DefenseContext) -> Defense:
    """``none``: the exact statistics f(D)."""
    if params:
        raise InputError("defense `none` takes no parameters.")
    return NoDefense()


#: every defense, in the order of ``--help`` and of the error listing the known names.
DEFENSES: tuple[DefenseEntry, ...] = (
    DefenseEntry("none", _no_defense, "none", "none"),
    DefenseEntry("laplace", pure_factory("laplace", LaplaceDefense, "l1", "torch|opendp"), "laplace:epsilon=E", "dp"),
    DefenseEntry("gaussian", gaussian_factory, "gaussian:epsilon=E,delta=D[,space=population]", "dp"),
    DefenseEntry("linf", pure_factory("linf", LinfKNormDefense, "linf", "torch"), "linf:epsilon=E", "dp"),
    DefenseEntry("rr", rr_factory, "rr:epsilon=E", "dp"),
    DefenseEntry("run", run_factory, "run:RUN_DIR", "trained", positional="dir"),
    DefenseEntry("matched-laplace", matched_factory("laplace"), "matched-laplace:run=RUN_DIR", "matched"),
    DefenseEntry("matched-gaussian", matched_factory("gaussian"), "matched-gaussian:run=RUN_DIR,delta=D[,space=population]",
                 "matched"),
    DefenseEntry("matched-linf", matched_factory("linf"), "matched-linf:run=RUN_DIR", "matched"),
    DefenseEntry("budget-laplace", spec_factory("budget-laplace", "laplace", ()), "budget-laplace:budget=U",
                 "reference"),
    DefenseEntry("budget-gaussian", spec_factory("budget-gaussian", "gaussian", ("space", "weighting")),
                 "budget-gaussian:budget=U[,space=population]",
                 "reference"),
    DefenseEntry("shrinkage", spec_factory("shrinkage", "shrinkage", ("shrink", "noise", "space", "weighting")),
                 "shrinkage:budget=U,shrink=A[,space=population]", "reference"),
    DefenseEntry("suppression", spec_factory("suppression", "suppression", ()), "suppression:budget=U", "reference"),
    DefenseEntry("linear-optimal", spec_factory("linear-optimal", "linear-optimal", ("noise", "space")),
                 "linear-optimal:budget=U[,space=population]", "reference"),
    DefenseEntry("time-sharing", spec_factory("time-sharing", "time-sharing", ()), "time-sharing:budget=U",
                 "reference"),
    DefenseEntry("data-independent", data_independent_factory, "data-independent", "data-independent"),
)

#: the SPEC names of the DP mechanisms.
DP_SPECS = tuple(entry.name for entry in DEFENSES if entry.family == "dp")
#: the defense SPECs of the references, each taking ``budget=U``.
BUDGET_SPECS = tuple(entry.name for entry in DEFENSES if entry.family == "reference")


def defense_help() -> str:
    """The ``--defense SPEC`` help line: every entry's short SPEC form."""
    return " | ".join(entry.spec for entry in DEFENSES)

#: the entries by name.
_BY_NAME = {entry.name: entry for entry in DEFENSES}


def available_defenses() -> list[str]:
    """The defense names, in the order of :data:`DEFENSES`."""
    return list(_BY_NAME)


def split_spec(spec: str) -> tuple[str, dict[str, str]]:
    """Split ``NAME:key=value,...`` into the name and a parameter dict (values as strings)."""
    spec = spec.strip()
    if not spec:
        raise InputError("`--defense` must not be empty.")
    name, _, rest = spec.partition(":")
    name = name.strip()
    params: dict[str, str] = {}
    if rest:
        positional = _BY_NAME[name].positional if name in _BY_NAME else None
        if positional is not None and "=" not in rest:
            return name, {positional: rest}
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
    if name not in _BY_NAME:
        raise UnknownNameError(f"unknown defense {name!r}; known: {', '.join(available_defenses())}.")
    return _BY_NAME[name].factory(params, context)
