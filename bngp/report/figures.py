"""Writing a matplotlib figure to a PNG file atomically."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bngp.io_utils import atomic_write

__all__ = ["save_png"]


def save_png(figure: Any, path: str | Path) -> Path:
    """Write ``figure`` to ``path`` as a PNG atomically and close it; a figure without a layout
    engine of its own (constrained layout, say) is laid out tightly first."""
    import matplotlib.pyplot as plt

    if figure.get_layout_engine() is None:
        figure.tight_layout()
    with atomic_write(path) as handle:
        figure.savefig(handle, format="png")
    plt.close(figure)
    return Path(path)
