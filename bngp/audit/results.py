"""Result records shared by every audit.

Every audit returns a frozen dataclass that says how the number was obtained: the method,
the confidence 1 - beta, the delta the bound is stated at, how many thresholds (or guess
configurations) were looked at and which union bound covers that search.  ``to_dict`` gives
a JSON-ready view (numpy scalars and arrays become Python numbers and lists).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["AuditResult", "to_jsonable"]


def to_jsonable(value: Any) -> Any:
    """Convert numpy values, tuples and nested containers into plain JSON types.

    Non-finite floats become the strings ``"inf"``, ``"-inf"`` and ``"nan"`` so that the JSON
    stays standard.
    """
    if isinstance(value, dict):
        return {str(key): to_jsonable(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_jsonable(item) for item in value]
    if isinstance(value, np.ndarray):
        return [to_jsonable(item) for item in value.tolist()]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    return value


@dataclass(frozen=True)
class AuditResult:
    """Fields every audit result records.

    Attributes:
        method: short name of the estimator, e.g. ``"many-run clopper-pearson"``.
        confidence: 1 - beta, the probability that the bound is valid (``None`` for point
            estimates such as an empirical AUC).
        delta: the delta of (eps, delta)-DP the bound refers to (0 for pure DP).
        thresholds_examined: number of score thresholds or guess configurations looked at.
        union_bound: how the search over thresholds is paid for, e.g.
            ``"bonferroni over 5000 FP levels and 5000 FN levels"`` or ``"none"``.
    """

    method: str
    confidence: float | None
    delta: float
    thresholds_examined: int
    union_bound: str

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dictionary of every field."""
        return {field.name: to_jsonable(getattr(self, field.name)) for field in dataclasses.fields(self)}
