"""The trained-defender artifact written into a run directory (``RUN_DIR/defender.pt``).

Contents (all loadable with ``torch.load(..., weights_only=True)``), CPU tensors whatever the
device the defender was trained on (so a GPU-trained defender loads on a CPU machine): the defender's
state dict, its architecture, the population fingerprint it was trained on, the membership
prior, the trade-off weights kappa and the training configuration.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from bngp.device import to_cpu
from bngp.errors import DataFormatError, InputError, TrainingError
from bngp.io_utils import atomic_write, load_torch_payload
from .network import Defender, DefenderSpec
from bngp.validation import check_readable_file

__all__ = ["DefenderArtifact", "population_fingerprint", "save_defender", "load_defender", "DEFENDER_FILE"]

DEFENDER_FILE = "defender.pt"


def population_fingerprint(genotypes: np.ndarray) -> str:
    """SHA-256 of the genotype matrix (shape + bytes): identifies the population trained on."""
    genotypes = np.ascontiguousarray(genotypes, dtype=np.uint8)
    digest = hashlib.sha256(str(genotypes.shape).encode())
    digest.update(genotypes.tobytes())
    return digest.hexdigest()


@dataclass(frozen=True, eq=False)
class DefenderArtifact:
    """A trained defender G with what is needed to use and describe it."""

    defender: Defender
    fingerprint: str
    prior: dict
    kappa: np.ndarray
    config: dict

    def check_population(self, genotypes: np.ndarray) -> None:
        """Raise if ``genotypes`` is not the population the defender was trained on."""
        if population_fingerprint(genotypes) != self.fingerprint:
            raise DataFormatError("the trained defender was trained on a different population (fingerprint mismatch).")


def save_defender(path: str | Path, defender: Defender, fingerprint: str, prior: dict, kappa: np.ndarray, config: dict) -> Path:
    """Write the artifact atomically, with CPU tensors."""
    payload = {
        "format": "bngp-defender-1",
        "state_dict": to_cpu(defender.state_dict()),
        "spec": defender.spec.to_dict(),
        "fingerprint": fingerprint,
        "prior": prior,
        "kappa": torch.as_tensor(np.asarray(kappa, dtype=np.float32)),
        "config": config,
    }
    with atomic_write(path) as handle:
        torch.save(payload, handle)
    return Path(path)


def _check_architecture(path: Path, spec: DefenderSpec, state: dict) -> None:
    """Refuse sizes that disagree with the stored weights before anything is allocated: each
    layer's weight shape in the file must be the one the spec would build."""
    h1, h2, h3 = spec.widths
    expected = {
        "net.0.weight": (h1, spec.n_individuals + spec.noise_dim),
        "net.3.weight": (h2, h1),
        "net.6.weight": (h3, h2),
        "net.7.weight": (spec.n_outputs, h3),
    }
    sizes = (spec.n_individuals, spec.n_outputs, spec.noise_dim, h1, h2, h3)
    if min(sizes) < 1 or not isinstance(state, dict):
        raise DataFormatError(f"{path}: the defender's architecture record is malformed.")
    for name, shape in expected.items():
        stored = state.get(name)
        if not isinstance(stored, torch.Tensor) or tuple(stored.shape) != shape:
            raise DataFormatError(f"{path}: the defender's architecture record does not match its weights ({name}).")


def load_defender(path: str | Path) -> DefenderArtifact:
    """Load a defender artifact safely (``weights_only=True``); the defender is in eval mode."""
    path = check_readable_file("defender", path)
    payload = load_torch_payload(path, "bngp-defender-1", DataFormatError, "bngp defender checkpoint")
    try:
        spec_data = dict(payload["spec"])
        spec = DefenderSpec(
            n_individuals=int(spec_data["n_individuals"]),
            n_outputs=int(spec_data["n_outputs"]),
            noise_dim=int(spec_data["noise_dim"]),
            widths=tuple(int(w) for w in spec_data["widths"]),
            skip=bool(spec_data.get("skip", False)),
            shrink=bool(spec_data.get("shrink", False)),
            full_rank_noise=bool(spec_data.get("full_rank_noise", False)),
            noise_law=str(spec_data.get("noise_law", "gaussian")),
            row_space_rank=int(spec_data.get("row_space_rank", 0)),
            row_space_output=bool(spec_data.get("row_space_output", False)),
        )
    except (KeyError, TypeError, ValueError, InputError):
        raise DataFormatError(f"{path}: the defender's architecture record is malformed.") from None
    _check_architecture(path, spec, payload["state_dict"])
    defender = Defender(spec)
    try:
        defender.load_state_dict(payload["state_dict"])
    except RuntimeError as exc:
        raise TrainingError(f"{path}: defender weights do not match its architecture.") from exc
    defender.eval()
    return DefenderArtifact(
        defender=defender,
        fingerprint=str(payload["fingerprint"]),
        prior=dict(payload["prior"]),
        kappa=payload["kappa"].numpy().astype(np.float64),
        config=dict(payload["config"]),
    )
