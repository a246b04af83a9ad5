"""Report pictures and tables: a confusion matrix as a PNG (matplotlib, optional) and always
as a Markdown table, so a report is complete without the plotting library; and the few
formatting rules every report shares (undefined figures, intervals, excerpts)."""

from __future__ import annotations

import importlib.util
import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from evidex._text import normalize_ws

__all__ = [
    "confusion_markdown",
    "confusion_png",
    "confusion_section",
    "excerpt",
    "fmt_counts",
    "fmt_interval",
    "fmt_value",
    "has_matplotlib",
    "measure_table",
    "worst_section",
]


def has_matplotlib() -> bool:
    return importlib.util.find_spec("matplotlib") is not None


def confusion_png(
    matrix: npt.NDArray[np.int64], labels: Sequence[str], path: Path, title: str
) -> bool:
    """Draw the matrix (rows gold, columns predicted) twice, side by side: the counts, and each
    golden row as shares of that row (what the judge does with the items of one label, which
    the counts hide when the labels are unbalanced; a row with no items shows ``–``).

    Returns False, writing nothing, when matplotlib is not installed; the caller then relies
    on :func:`confusion_markdown`.
    """
    if not has_matplotlib():
        return False
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    n = len(labels)
    totals = matrix.sum(axis=1, keepdims=True)
    shares = np.divide(matrix, totals, out=np.zeros(matrix.shape), where=totals > 0)
    size = (2 * (1.6 + 1.3 * n), 1.2 + 1.1 * n)
    fig, (left, right) = plt.subplots(1, 2, figsize=size, dpi=110)
    try:
        peak = float(matrix.max()) if matrix.size else 0.0
        _draw(left, matrix, labels, f"{title}: counts", peak, lambda i, j: str(int(matrix[i, j])))

        def share(i: int, j: int) -> str:
            return f"{shares[i, j]:.2f}" if totals[i, 0] else "–"

        _draw(right, shares, labels, "share of each golden row", 1.0, share)
        fig.tight_layout()
        fig.savefig(path)
    finally:
        plt.close(fig)
    return True


def _draw(
    ax: Any,
    values: npt.NDArray[Any],
    labels: Sequence[str],
    title: str,
    peak: float,
    cell: Callable[[int, int], str],
) -> None:
    n = len(labels)
    ax.imshow(values, cmap="Blues", vmin=0, vmax=peak or 1)
    ax.set_xticks(range(n), labels=list(labels), rotation=30, ha="right")
    ax.set_yticks(range(n), labels=list(labels))
    ax.set_xlabel("judge")
    ax.set_ylabel("golden label")
    ax.set_title(title)
    for i in range(n):
        for j in range(n):
            color = "white" if peak and values[i, j] > peak / 2 else "black"
            ax.text(j, i, cell(i, j), ha="center", va="center", color=color)


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


def confusion_section(
    matrix: npt.NDArray[np.int64], labels: Sequence[str], out_dir: Path, title: str
) -> list[str]:
    """Markdown lines of a confusion matrix: the picture ``confusion.png`` when it could be
    drawn, then the table."""
    lines = []
    if confusion_png(matrix, labels, out_dir / "confusion.png", title):
        lines += ["![confusion matrix](confusion.png)", ""]
    return [*lines, confusion_markdown(matrix, labels)]


def fmt_value(value: Any, undefined: str = "undefined") -> str:
    """A figure for a report: floats with three decimals, ``None``/``nan`` as ``undefined``."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return undefined
    return f"{value:.3f}" if isinstance(value, float) else str(value)


def fmt_interval(interval: Mapping[str, Any] | None) -> str:
    """``low–high`` of a bootstrap interval from a report, or ``undefined``."""
    if not interval:
        return "undefined"
    low, high = interval.get("low"), interval.get("high")
    if low is None or high is None or math.isnan(low) or math.isnan(high):
        return "undefined"
    return f"{low:.3f}–{high:.3f}"


def excerpt(text: str, limit: int = 300) -> str:
    """``text`` on one line, cut to ``limit`` characters with an ellipsis."""
    flat = normalize_ws(text)
    return flat[:limit] + ("..." if len(flat) > limit else "")


def fmt_counts(counts: Mapping[str, int]) -> str:
    """``a 3, b 1`` (``none`` when empty): a distribution on one line."""
    return ", ".join(f"{k} {v}" for k, v in counts.items()) or "none"


def measure_table(metrics: Mapping[str, Any]) -> list[str]:
    """Every figure of a report, one row each, as the markdown reports list them."""
    return [
        "| measure | value |",
        "|---|---:|",
        *(f"| `{k}` | {fmt_value(v)} |" for k, v in metrics.items()),
    ]


def agreement_sections(
    report: Mapping[str, Any],
    out_dir: Path,
    title: str,
    none: str,
    line: Callable[[Mapping[str, Any]], str],
) -> list[str]:
    """The tail every labelled report shares: per-label recall, precision and F1, the
    confusion matrix (``title`` heads its picture), then the worst disagreements."""
    lines = ["", "## Per-label agreement", "", "| label | golden | recall | precision | F1 |"]
    lines.append("|---|---:|---:|---:|---:|")
    for label, v in report["per_label"].items():
        lines.append(
            f"| {label} | {v['support']} | {fmt_value(v['recall'])} | "
            f"{fmt_value(v['precision'])} | {fmt_value(v['f1'])} |"
        )
    matrix = np.array(report["confusion"]["matrix"], dtype=np.int64)
    lines += ["", "## Confusion matrix", ""]
    lines += confusion_section(matrix, report["confusion"]["labels"], out_dir, title)
    return lines + worst_section(report["worst"], none, line)


def worst_section(
    worst: Sequence[Mapping[str, Any]], none: str, line: Callable[[Mapping[str, Any]], str]
) -> list[str]:
    """The "Worst disagreements" section of a report: ``line`` of each one, or ``none``."""
    return ["", "## Worst disagreements", "", *([line(w) for w in worst] or [none])]
