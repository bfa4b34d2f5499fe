"""A trained BNGP defender used as a defense (``--defense run:RUN_DIR``).

The defender G(b, r) of the BNGP game (arXiv:2410.07414, section 3) produces xi for each membership
vector with fresh randomness r ~ U[0, 1]^q; it is used in eval mode (batch-norm running
statistics), exactly as it is deployed.  G is loaded on the CPU (a defender trained on a GPU
loads on a machine without one); moved to a GPU (``defense.artifact.defender.to("cuda")``) it
runs there on the same randomness r, drawn from the caller's CPU Generator.
"""

from __future__ import annotations

from pathlib import Path

import torch

from .artifact import DEFENDER_FILE, DefenderArtifact, load_defender
from bngp.errors import DataFormatError, MissingFileError
from bngp.run_dir import verify_run
from .base import Defense
from .network import composed_noise
from .context import DefenseContext

__all__ = ["TrainedDefense", "load_run_defense", "run_factory"]


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
