"""Report pictures and tables: a confusion matrix as a PNG (matplotlib, optional) and always
as a Markdown table, so a report is complete without the plotting library."""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt

__all__ = ["confusion_markdown", "confusion_png", "has_matplotlib"]


def has_matplotlib() -> bool:
    return importlib.util.find_spec("matplotlib") is not None


def confusion_png(
    matrix: npt.NDArray[np.int64], labels: Sequence[str], path: Path, title: str
) -> bool:
    """Draw the matrix (rows gold, columns predicted) with counts in the cells.

    Returns False, writing nothing, when matplotlib is not installed; the caller then relies
    on :func:`confusion_markdown`.
    """
    if not has_matplotlib():
        return False
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    n = len(labels)
    fig, ax = plt.subplots(figsize=(1.6 + 1.3 * n, 1.2 + 1.1 * n), dpi=110)
    try:
        ax.imshow(matrix, cmap="Blues")
        ax.set_xticks(range(n), labels=list(labels), rotation=30, ha="right")
        ax.set_yticks(range(n), labels=list(labels))
        ax.set_xlabel("judge")
        ax.set_ylabel("golden label")
        ax.set_title(title)
        peak = matrix.max() if matrix.size else 0
        for i in range(n):
            for j in range(n):
                color = "white" if peak and matrix[i, j] > peak / 2 else "black"
                ax.text(j, i, str(int(matrix[i, j])), ha="center", va="center", color=color)
        fig.tight_layout()
        fig.savefig(path)
    finally:
        plt.close(fig)
    return True


def confusion_markdown(matrix: npt.NDArray[np.int64], labels: Sequence[str]) -> str:
    """The matrix as a Markdown table: golden labels down, the judge's across."""
    head = "| golden ↓ / judge → | " + " | ".join(labels) + " | total |"
    rule = "|---|" + "---:|" * (len(labels) + 1)
    rows = [
        f"| {label} | "
        + " | ".join(str(int(v)) for v in matrix[i])
        + f" | {int(matrix[i].sum())} |"
        for i, label in enumerate(labels)
    ]
    totals = " | ".join(str(int(v)) for v in matrix.sum(axis=0))
    return "\n".join([head, rule, *rows, f"| total | {totals} | {int(matrix.sum())} |"])
