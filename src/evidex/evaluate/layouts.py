"""Data set folder layouts: the files that identify one, and how its golden records are read.

Each job's evaluator lists the layouts it reads (its ``layouts``: a :class:`Layout` each, with
the reader of :mod:`.datasets` it calls); :func:`layout_job` and
:func:`~evidex.evaluate.datasets.load_layout` ask the evaluators of the registered jobs, so no
table here names a job. Apart from :mod:`.datasets` (which reads the folders) and
:mod:`.golden` (which reads golden files), so that both can tell a folder's job without
importing each other.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["Layout", "job_layouts", "layout_job"]  # and LAYOUTS, derived on first use


@dataclass(frozen=True)
class Layout:
    """One data set's folder layout: its ``name`` (as an error message names it), the
    ``files`` (relative to the folder) that identify it, and ``read(root, extra)``, its golden
    records (``extra``: the evaluation's job-specific options). ``detect``: whether a folder
    with these files is taken for this job when no job is named (a TREC DL folder serves rerank
    and tier, and is rerank's unless tier is named)."""

    name: str
    files: tuple[str, ...]
    read: Callable[[Path, Mapping[str, Any]], list[Any]]
    detect: bool = True

    def holds(self, root: Path) -> bool:
        """Whether ``root`` has every file of this layout."""
        return all((root / f).is_file() for f in self.files)

    def describe(self) -> str:
        return f"{', '.join(self.files)} ({self.name})"


def job_layouts() -> dict[str, tuple[Layout, ...]]:
    """The data set layouts each registered job's evaluator reads, by job."""
    from evidex.evaluate.registry import get_evaluator
    from evidex.jobs import definitions

    found = {}
    for spec in definitions():
        if spec.evaluation is not None:
            layouts = tuple(getattr(get_evaluator(spec.name), "layouts", ()))
            if layouts:
                found[spec.name] = layouts
    return found


def layout_job(root: str | Path) -> str | None:
    """The job whose data set layout the folder ``root`` has, or None. The layout with the
    most identifying files is tried first, so a folder is taken for the most specific data
    set it holds. A TREC DL folder also serves tier; name the job to get that."""
    root = Path(root)
    candidates = [
        (layout, job)
        for job, layouts in job_layouts().items()
        for layout in layouts
        if layout.detect
    ]
    candidates.sort(key=lambda c: -len(c[0].files))
    return next((job for layout, job in candidates if layout.holds(root)), None)


def __getattr__(name: str) -> Any:
    # LAYOUTS (job → files identifying the data set a folder is taken for) is derived from the
    # evaluators when first asked for; building it at import would import every evaluator
    if name == "LAYOUTS":
        return {
            job: layout.files
            for job, layouts in job_layouts().items()
            for layout in layouts
            if layout.detect
        }
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
