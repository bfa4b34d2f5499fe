"""A trained BNGP defender used as a defense (``--defense run:RUN_DIR``).

The defender G(b, r) of the BNGP game (arXiv:2410.07414, section 3) produces xi for each membership
vector with fresh randomness r ~ U[0, 1]^q; it is used in eval mode (batch-norm running
statistics), exactly as it is deployed.  G is loaded on the CPU (a defender trained on a GPU
loads on a machine without one); moved to a GPU (``defense.artifact.defender.to("cuda")``) it
runs there on the same randomness r, drawn from the caller's CPU Generator.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from .artifact import DEFENDER_FILE, DefenderArtifact, load_defender
from bngp.data.geometry import PopulationSpace
from bngp.errors import DataFormatError, MissingFileError
from bngp.run_dir import verify_run
from .base import Defense
from .network import composed_noise
from .context import DefenseContext
from .shaped import ShapedNoiseDefense
from .shrinkage import ShrinkNoiseDefense

__all__ = ["BASIS_TOLERANCE", "TrainedDefense", "load_run_defense", "run_factory"]

#: the largest |difference| between G's float32 row-space basis and the population's float64 one that still names
#: the same basis (float32 rounding of entries of magnitude at most 1).
BASIS_TOLERANCE = 1e-6


class TrainedDefense(Defense):
    """Noise from a trained defender network G(b, r)."""

    name = "run"

    def __init__(self, artifact: DefenderArtifact, source: str = "") -> None:
        self.artifact = artifact
        self.source = source

    @property
    def fixed_sigmas(self) -> tuple[float, ...]:
        """Standard deviations of the fixed Gaussian mechanisms composed before G (App. L.6)."""
        return tuple(float(s) for s in self.artifact.config.get("fixed_gaussian_sigmas", ()))

    @property
    def composition(self) -> int:
        """m + 1 copies of f(D): one per fixed Gaussian mechanism, then the learned one."""
        return len(self.fixed_sigmas) + 1

    @torch.no_grad()
    def noise(self, b: torch.Tensor, x_hat: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        defender = self.artifact.defender
        defender.eval()
        device = next(defender.parameters()).device
        r = defender.sample_r(b.shape[0], generator)
        xi = composed_noise(defender, self.fixed_sigmas, b.to(device), r.to(device), x_hat.to(device), generator)
        return xi.to(x_hat.device)

    @torch.no_grad()
    def closed_form(self, space: PopulationSpace | None = None) -> ShrinkNoiseDefense | None:
        """The shrinkage-plus-noise mechanism G releases when its network output is exactly zero, or None.

        With G's output layer (and linear skip) all zero, sigmoid(0) - 0.5 = 0 and G(b, r) is
        xi = a o (t - f(D)) + s o e (per attribute, law L), or in the candidates' row space
        xi = V (diag(1 - a) V^T (f(D) - t) + w o g) - (f(D) - t) (arXiv:2410.07414 section 3.3, the references at
        a budget): a :class:`~bngp.defenses.shrinkage.ShrinkNoiseDefense` or
        :class:`~bngp.defenses.shaped.ShapedNoiseDefense` with G's parameters, the same law up to the float32
        rounding of G's parameters.  None when G's network contributes, for a composed release, without
        shrinkage or full-rank noise, for a prior other than "N of K", or for noise in a row space that is not
        ``space``'s (G's float32 basis within :data:`BASIS_TOLERANCE` of ``space.basis``)."""
        defender = self.artifact.defender
        prior = self.artifact.prior
        if self.fixed_sigmas or defender.shrink_weight is None or defender.noise_scale is None \
                or prior.get("kind") != "uniform-subset":
            return None
        output = defender.net[-1]
        if bool(output.weight.any()) or bool(output.bias.any()) or (defender.skip is not None
                                                                    and bool(defender.skip.weight.any())):
            return None
        shrink = defender.shrink_weight.detach().double().cpu().numpy()
        scale = defender.noise_scale.detach().double().cpu().numpy()
        members = int(prior["members"])
        details = {"run": self.source}
        if defender.noise_basis is None:
            target = defender.shrink_target.detach().double().cpu().numpy()
            return ShrinkNoiseDefense(shrink, scale, target, defender.spec.noise_law, members, "trained", details,
                                      self.name)
        basis = defender.noise_basis.detach().double().cpu().numpy()
        if space is None or not space.holds_basis or space.basis.shape != basis.shape or space.n_members != members \
                or float(np.abs(space.basis - basis).max(initial=0.0)) > BASIS_TOLERANCE \
                or defender.spec.noise_law != "gaussian":
            return None
        return ShapedNoiseDefense(space, shrink, scale, members, "trained", details, self.name)

    def describe(self) -> dict:
        return {
            "name": self.name,
            "run": self.source,
            "kappa_mean": float(self.artifact.kappa.mean()) if self.artifact.kappa.size else 0.0,
            "objective": self.artifact.config.get("objective"),
            "guarantee": None,
        }


def load_run_defense(run_dir: str | Path, context: DefenseContext | None = None) -> TrainedDefense:
    """Load ``RUN_DIR/defender.pt`` of a complete run (:func:`bngp.run_dir.verify_run`); check it
    matches the context's population if given."""
    run_dir = Path(run_dir)
    path = run_dir / DEFENDER_FILE
    verify_run(run_dir)
    if not path.is_file():
        raise MissingFileError(f"no trained defender in {run_dir} (expected {DEFENDER_FILE}).")
    artifact = load_defender(path)
    if context is not None:
        artifact.check_population(context.population.genotypes)
        prior = artifact.prior
        if prior.get("kind") == "uniform-subset" and int(prior["members"]) != context.n_members:
            raise DataFormatError(
                f"the defender in {run_dir} was trained for {prior['members']} members, got --members {context.n_members}."
            )
    return TrainedDefense(artifact, str(run_dir))


def run_factory(params: dict[str, str], context: DefenseContext) -> Defense:
    """``run:RUN_DIR``: the trained defender of a run directory (:func:`load_run_defense`)."""
    if set(params) != {"dir"}:
        raise DataFormatError("defense `run` is written run:RUN_DIR.")
    return load_run_defense(params["dir"], context)
