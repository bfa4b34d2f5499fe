"""Tracing attacks against released means.

- ``score`` -- Dwork, Smith, Steinke, Ullman, Vadhan (2015), "Robust traceability from trace
  amounts": score(y, x) = <y - p_bar, x - p_bar>; needs only that x approximates the true
  marginals in L1.
- ``homer`` -- Homer et al. (2008): D(y) = sum_j (|y_j - p_bar_j| - |y_j - x_j|); higher =
  closer to the released mixture than to the reference = member.

Both know p_bar and n but not the defense; their direction and threshold (false-positive
rate alpha) come from no-defense shadow releases of synthetic individuals drawn from p_bar.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np
import torch

from .registry import register_attack
from .shadow import ReferenceShadowAttack
from .statistics import dwork_score_torch, homer_torch

__all__ = ["ScoreAttack", "HomerAttack"]


@register_attack("score")
class ScoreAttack(ReferenceShadowAttack):
    """Score-based tracing attack: score(y, x) = <y - p_bar, x - p_bar> (Dwork et al. 2015).

    Args:
        alpha: target false-positive rate of the threshold on the shadow releases.
        n_shadow_releases: number of synthetic no-defense shadow releases.
    """

    knowledge_statement: ClassVar[str] = (
        "Knows the reference frequencies p_bar and the dataset size n, not the defense; the direction of "
        "<y - p_bar, x - p_bar> and its threshold (false-positive rate alpha) are set on no-defense shadow "
        "releases of synthetic individuals drawn from p_bar."
    )

    def _raw_torch(self, targets: torch.Tensor | np.ndarray, releases: torch.Tensor) -> torch.Tensor:
        return dwork_score_torch(targets, releases, self.reference_frequencies_)


@register_attack("homer")
class HomerAttack(ReferenceShadowAttack):
    """Homer et al. (2008) distance statistic D(y) = sum_j (|y_j - p_bar_j| - |y_j - x_j|).

    Args:
        alpha: target false-positive rate of the threshold on the shadow releases.
        n_shadow_releases: number of synthetic no-defense shadow releases.
    """

    knowledge_statement: ClassVar[str] = (
        "Knows the reference frequencies p_bar and the dataset size n, not the defense; the direction of "
        "D(y) = sum_j (|y_j - p_bar_j| - |y_j - x_j|) and its threshold (false-positive rate alpha) are set on "
        "no-defense shadow releases of synthetic individuals drawn from p_bar."
    )

    def _raw_torch(self, targets: torch.Tensor | np.ndarray, releases: torch.Tensor) -> torch.Tensor:
        return homer_torch(targets, releases, self.reference_frequencies_)
