"""DP mechanisms matched to a trained defender's utility loss (arXiv:2410.07414, Fig. 2f, App. L.3).

``matched-laplace:run=RUN_DIR`` (also ``matched-gaussian:run=RUN_DIR,delta=D`` and
``matched-linf:run=RUN_DIR``) measures the trained defender's realised utility loss
U = mean_b sum_j w_j |clip(x_hat_j + xi_j, 0, 1) - x_hat_j| (w_j = kappa_j / sum kappa, uniform
for scalar kappa) over ``draws`` membership draws from its prior, then calibrates the DP
mechanism to the same realised (clipped) loss on the same statistics x_hat, and reports the
implied eps under the chosen sensitivity (default: the paper's |Q|/n convention).

Composed runs (App. L.6).  A defender trained after m fixed Gaussian mechanisms releases
c = m + 1 copies of f(D), x = [f(D) + N(0, s_1^2), ..., f(D) + N(0, s_m^2), f(D) + G(b, r)]
(its ``composition``, c |Q| outputs).  The matched mechanism releases the same c |Q| outputs
(:attr:`MatchedDefense.composition` = c) with i.i.d. noise of one scale on all of them; U is
measured over all c |Q| columns, attribute j weighing kappa_j / (c sum_l kappa_l) in every copy
(:func:`bngp.defenses.matched.release_weights`; the plain mean over the release for scalar
kappa).  Its guarantee is that of one mechanism on the concatenated statistic
F(D) = [f(D), ..., f(D)], whose sensitivity is c Delta_1 in l1, sqrt(c) Delta_2 in l2 and
Delta_inf in l-inf (:func:`bngp.defenses.sensitivity.composed_sensitivity`; the ``sensitivity=``
of the SPEC is that of one copy f(D)).  For c = 1 all of this is the uncomposed match.

``matched-gaussian:run=RUN_DIR,delta=D,space=population`` projects the matched Gaussian onto the candidates'
row space (:class:`bngp.defenses.shaped.ProjectedDefense`): the same eps for the same sigma by
post-processing, so at the run's loss a larger sigma and a smaller eps (``docs/design/population_space.md``).
It uses only the candidates of the population file, never the members' rows.
"""

from __future__ import annotations

import numpy as np
import torch

from bngp.data.geometry import PopulationSpace
from bngp.data.priors import prior_from_description
from bngp.errors import InputError
from bngp.release.composition import copy_blocks
from bngp.release.sampling import release_mechanism
from bngp.rng import SeedLike, resolve_seed, torch_generator
from bngp.validation import check_positive_int
from .base import Defense
from .matched import match_utility, release_weights, utility_loss
from .context import DefenseContext, DefenseFactory, float_param
from .sensitivity import resolve_sensitivity
from .trained import load_run_defense

__all__ = ["matched_factory", "matched_to_run", "MatchedDefense"]

_NORMS = {"laplace": "l1", "gaussian": "l2", "linf": "linf"}


class MatchedDefense(Defense):
    """A DP defense calibrated to a trained defender, carrying the record of the match.

    It perturbs as many copies of f(D) as the inner defense (``composition``: that of the
    trained run it was matched to), and states the inner defense's guarantee.
    """

    def __init__(self, name: str, inner: Defense, record: dict) -> None:
        self.name = name
        self.inner = inner
        self.record = record
        self.composition = int(getattr(inner, "composition", 1))

    def noise(self, b: torch.Tensor, x_hat: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        return self.inner.noise(b, x_hat, generator)

    @property
    def guarantee(self):
        return self.inner.guarantee

    @property
    def noise_law(self):
        return self.inner.noise_law

    def describe(self) -> dict:
        description = {**self.inner.describe(), "name": self.name, "matched": self.record}
        if self.composition != 1:
            description["composition"] = self.composition
        return description


def matched_to_run(
    kind: str,
    run_dir: str,
    context: DefenseContext,
    *,
    delta: float | None = None,
    sensitivity: str = "paper",
    draws: int = 200,
    seed: SeedLike = 0,
    space: str = "attributes",
) -> tuple[Defense, dict]:
    """Return the matched DP defense and a record of the match (target loss, scale, eps).

    The defense (:meth:`bngp.defenses.matched.MatchedCalibration.defense`) releases what the
    run releases: its ``composition`` is the run's (module docstring).  The record has
    ``target_utility_loss`` (U over the whole release) and the calibration
    (:meth:`~bngp.defenses.matched.MatchedCalibration.to_dict`); for a composed run also
    ``composition``, ``copy_sensitivity`` (that of one copy f(D)), ``block_utility_losses`` (U of
    each copy of f(D) with the kappa weights, the learned block last) and ``weights``.

    Args:
        kind: "laplace", "gaussian" or "linf".
        run_dir: a complete training run.
        context: the population and dataset size the defense is built for.
        delta: the Gaussian's delta (required for "gaussian" only).
        sensitivity: ``paper``, ``replace``, ``add-remove`` or a number: the sensitivity of one
            copy f(D) (composed to that of the release).
        draws: membership draws from the run's prior on which U is measured.
        seed: seed of the draws and of the defender's noise (an int, None or a Generator,
            :func:`bngp.rng.resolve_seed`).
        space: ``attributes`` (i.i.d. noise on every attribute) or ``population``: the Gaussian mechanism
            projected onto the candidates' row space (:class:`bngp.defenses.shaped.ProjectedDefense`, the same
            guarantee; Gaussian only, uncomposed runs only), calibrated to the same clipped loss.
    """
    if kind not in _NORMS:
        raise InputError(f"`kind` must be one of {', '.join(_NORMS)}, got {kind!r}.")
    if space not in ("attributes", "population"):
        raise InputError(f"`space` must be attributes or population, got {space!r}.")
    if space == "population" and kind != "gaussian":
        raise InputError(f"`space=population` matches the Gaussian mechanism only, not `{kind}`: projected {kind} "
                         "noise has no closed-form loss.")
    draws = check_positive_int("draws", draws, minimum=2)
    seed = resolve_seed(seed)
    trained = load_run_defense(run_dir, context)
    composition = trained.composition
    if space == "population" and composition != 1:
        raise InputError(f"the run in {run_dir} releases {composition} copies of f(D); `space=population` matches "
                         "a mechanism on one copy only.")
    geometry = PopulationSpace.of(context.population, context.n_members) if space == "population" else None
    prior = prior_from_description(trained.artifact.prior)
    mechanism = release_mechanism(context.population.genotypes, composition)
    b = torch.as_tensor(prior.sample(draws, np.random.default_rng(seed)))
    with torch.no_grad():
        x_hat = mechanism.statistic(b)
        x = mechanism.release(b, trained.noise(b, x_hat, torch_generator(seed)), x_hat)
    kappa = trained.artifact.kappa
    kappa = None if np.allclose(kappa, kappa[0]) else kappa
    deviation = (x - x_hat).double().numpy()
    n_attributes = context.population.n_attributes
    if composition == 1:
        target = utility_loss(deviation, kappa)
    else:
        target = utility_loss(deviation, release_weights(kappa, n_attributes, composition))
    if target <= 0:
        raise InputError(f"the defender in {run_dir} adds no noise; nothing to match.")
    sens = resolve_sensitivity(sensitivity, _NORMS[kind], context.population, context.n_members)
    calibration = match_utility(
        kind, target, sens, delta=delta, x_hat=x_hat.double().numpy(), kappa=kappa, composition=composition,
        space=geometry,
    )
    record = {"run": run_dir, "target_utility_loss": target, "draws": draws}
    if composition != 1:
        blocks = copy_blocks(deviation, composition)
        record["block_utility_losses"] = [utility_loss(blocks[:, i], kappa) for i in range(composition)]
        record["weights"] = "uniform" if kappa is None else "kappa_j / (composition sum_l kappa_l) in every copy"
    record.update(calibration.to_dict())
    return calibration.defense(), record


def _draws(text: str, kind: str) -> int:
    """The SPEC's ``draws=`` as a whole number >= 2 (a typed error naming it otherwise)."""
    try:
        value = int(text)
    except ValueError:
        raise InputError(f"`draws` of defense `matched-{kind}` must be a whole number, got {text!r}.") from None
    return check_positive_int("draws", value, minimum=2)


def matched_factory(kind: str) -> DefenseFactory:
    """The SPEC factory of ``matched-KIND:run=RUN_DIR[,sensitivity=S][,draws=N]`` (gaussian:
    ``,delta=D[,space=population]``)."""
    def build(params: dict[str, str], context: DefenseContext) -> Defense:
        allowed = {"run", "sensitivity", "draws", "space"}  # space: refused below for laplace and linf
        allowed |= {"delta"} if kind == "gaussian" else set()
        unknown = set(params) - allowed
        if unknown:
            raise InputError(f"defense `matched-{kind}` does not take `{sorted(unknown)[0]}`.")
        if "run" not in params:
            raise InputError(f"defense `matched-{kind}` needs `run=RUN_DIR`.")
        delta = float_param(params, "delta", f"matched-{kind}") if kind == "gaussian" else None
        draws = _draws(params["draws"], kind) if "draws" in params else 200
        defense, record = matched_to_run(kind, params["run"], context, delta=delta,
                                         sensitivity=params.get("sensitivity", "paper"), draws=draws,
                                         space=params.get("space", "attributes"))
        return MatchedDefense(f"matched-{kind}", defense, record)

    return build
