"""A job's own step in ``evidex demo``, declared by its definition (``JobDefinition.demo``).

The demo's first steps are the pipeline every job builds on (rerank, tier, the selected
context); a job added later shows itself on that context without the demo naming it: its
definition gives a title, a default judge and how to check the cases of its part of the
bundled example (``steps.<job>`` in ``demo.json``), and the demo times, shows and reports
the cases like its own steps.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from evidex.judging import Judge
from evidex.types import Passage, Source

__all__ = ["DemoCase", "DemoInputs", "DemoPart"]


class DemoCase(BaseModel):
    """One checked case of a job's demo step, beside the example author's label."""

    case: str
    """What was checked (a question), as the table shows it."""
    expected: str
    judged: str
    agrees: bool
    detail: str
    """What the job made of it in a line (its decision and the reason)."""
    source: Source
    report: dict[str, Any]
    """The job's own JSON for the case (``report()`` of its result)."""


@dataclass(frozen=True)
class DemoInputs:
    """What the demo hands a job's step: the example's question, the context selected for
    generation (with the passages' titles) and the job's part of the example."""

    query: str
    context: Sequence[Passage]
    section: Mapping[str, Any]


@dataclass(frozen=True)
class DemoPart:
    """A job's step in the demo: ``run(inputs, judge, keywords)`` checks the cases with the
    job's library call (``keywords``: the store, hooks, settings and progress callback the
    demo runs every step with)."""

    title: str
    judge: str
    """The judge the step uses unless the demo is given one."""
    run: Callable[[DemoInputs, Judge, Mapping[str, Any]], list[DemoCase]]
