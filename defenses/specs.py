"""The ``--defense SPEC`` factories of the DP mechanisms (``laplace:eps=1``, ``gaussian:...``,
``linf:...``, ``rr:...``), listed in :data:`bngp.defenses.registry.DEFENSES`."""

from __future__ import annotations

from bngp.errors import InputError
from bngp.validation import check_delta, check_epsilon
from .base import Defense
from .dp import DEFAULT_SAMPLER, check_sampler, GaussianDefense, LaplaceDefense, LinfKNormDefense, RandomizedResponseDefense
from .context import DefenseContext, DefenseFactory, float_param
from .sensitivity import DEFAULT_SENSITIVITY, Sensitivity, resolve_sensitivity

__all__ = ["gaussian_factory", "pure_factory", "rr_factory"]


def _check_keys(params: dict[str, str], allowed: tuple[str, ...], name: str) -> None:
    unknown = [key for key in params if key not in allowed]
    if unknown:
        raise InputError(f"defense `{name}` does not take `{unknown[0]}`; allowed: {', '.join(allowed)}.")


def _optional(params: dict[str, str], key: str, name: str) -> float | None:
    return float_param(params, key, name) if key in params else None


def _epsilon_or_scale(params: dict[str, str], name: str) -> tuple[float | None, float | None]:
    epsilon = _optional(params, "epsilon", name)
    scale = _optional(params, "scale", name)
    if (epsilon is None) == (scale is None):
        raise InputError(f"defense `{name}` needs exactly one of `epsilon=...` or `scale=...`.")
    if epsilon is not None:
        check_epsilon(epsilon)
    if scale is not None:
        check_epsilon(scale, "scale")
    return epsilon, scale


def _in_space(defense: Defense, params: dict[str, str], context: DefenseContext) -> Defense:
    """``defense`` as it is (``space=attributes``, the default), or projected onto the candidates' row space
    (``space=population``: :class:`~bngp.defenses.shaped.ProjectedDefense`, the same guarantee)."""
    space = params.get("space", "attributes")
    if space == "attributes":
        return defense
    if space != "population":
        raise InputError(f"`space` must be attributes or population, got {space!r}.")
    from bngp.data.geometry import PopulationSpace
    from .shaped import ProjectedDefense

    return ProjectedDefense(defense, PopulationSpace.of(context.population, context.n_members))


def _sampler(params: dict[str, str]) -> str:
    return check_sampler(params.get("sampler", DEFAULT_SAMPLER))


def _sensitivity(params: dict[str, str], norm: str, context: DefenseContext) -> Sensitivity:
    text = params.get("sensitivity", DEFAULT_SENSITIVITY)
    return resolve_sensitivity(text, norm, context.population, context.n_members)


def pure_factory(name: str, defense: type[LaplaceDefense] | type[LinfKNormDefense], norm: str,
                 samplers: str) -> DefenseFactory:
    """The SPEC factory of a pure eps-DP additive mechanism calibrated in the ``norm`` sensitivity:
    ``NAME:epsilon=E|scale=B[,sensitivity=S][,sampler=SAMPLERS]``."""

    def build(params: dict[str, str], context: DefenseContext) -> Defense:
        _check_keys(params, ("epsilon", "scale", "sensitivity", "sampler", "space"), name)
        epsilon, scale = _epsilon_or_scale(params, name)
        sampler = _sampler(params)
        sensitivity = _sensitivity(params, norm, context)
        if epsilon is not None:
            return _in_space(defense.from_epsilon(epsilon, sensitivity, sampler=sampler), params, context)
        return _in_space(defense(scale, sensitivity, sampler=sampler), params, context)

    build.__doc__ = f"``{name}:epsilon=E|scale=B[,sensitivity=S][,sampler={samplers}][,space=population]``."
    return build


def gaussian_factory(params: dict[str, str], context: DefenseContext) -> Defense:
    """``gaussian:epsilon=E|scale=S,delta=D[,sensitivity=S][,sampler=torch|opendp][,space=population]``."""
    _check_keys(params, ("epsilon", "delta", "scale", "sensitivity", "sampler", "space"), "gaussian")
    epsilon, scale = _epsilon_or_scale(params, "gaussian")
    delta = check_delta(float_param(params, "delta", "gaussian"), allow_zero=False)
    sampler = _sampler(params)
    sensitivity = _sensitivity(params, "l2", context)
    if epsilon is not None:
        return _in_space(GaussianDefense.from_epsilon(epsilon, delta, sensitivity, sampler=sampler), params, context)
    return _in_space(GaussianDefense(scale, sensitivity, delta=delta, sampler=sampler), params, context)


def _bool_param(params: dict[str, str], key: str, default: bool) -> bool:
    text = params.get(key)
    if text is None:
        return default
    if text.lower() in ("true", "1", "yes"):
        return True
    if text.lower() in ("false", "0", "no"):
        return False
    raise InputError(f"`{key}` must be true or false, got {text!r}.")


def rr_factory(params: dict[str, str], context: DefenseContext) -> Defense:
    """``rr:epsilon=E[,sensitivity=paper|replace|L][,debias=true|false][,sampler=torch|opendp]``."""
    _check_keys(params, ("epsilon", "sensitivity", "debias", "sampler"), "rr")
    epsilon = check_epsilon(float_param(params, "epsilon", "rr"))
    sampler = _sampler(params)
    sensitivity = _sensitivity(params, "hamming", context)
    debias = _bool_param(params, "debias", True)
    return RandomizedResponseDefense(
        epsilon, context.population.genotypes, sensitivity, debias=debias, sampler=sampler
    )
