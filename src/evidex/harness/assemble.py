"""How a job's result is put together from its outcomes, written once for every job.

Each job's items (tier assignments, claims, ranked passages) come out of validated outcomes;
two things happen to them in every job and are done here:

- :func:`stamped`: each item says where it came from. A whole outcome may come from the
  cache or the fallback, while a fallback keeps the valid items of the last reply as the
  judge's (:meth:`Outcome.source_of`).
- :func:`with_duplicates`: a passage that preflight merged into its twin takes the twin's
  item, marked ``duplicate_of``, right after it, so nothing given is lost.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

from pydantic import BaseModel

from evidex.harness.outcome import Outcome
from evidex.types import Source

__all__ = ["stamped", "with_duplicates"]

V = TypeVar("V", bound=BaseModel)


M = TypeVar("M", bound=BaseModel)


def stamped(
    outcomes: Sequence[Outcome[V]], items: Callable[[V], Iterable[M]], **update: Any
) -> list[M]:
    """Every item of the outcomes' values, in order, with its source and ``update`` set. An
    item is copied only where something changes: at high concurrency the copies were a tenth
    of a job's own CPU per passage."""
    out: list[M] = []
    for outcome in outcomes:
        for item in items(outcome.value):
            current: Source = getattr(item, "source")  # noqa: B009 (M is any item model)
            source = outcome.source_of(current)
            changes = dict(update)
            if source != current:
                changes["source"] = source
            out.append(item.model_copy(update=changes) if changes else item)
    return out


def with_duplicates(
    items: Sequence[M], duplicates: Mapping[str, str], *, key: str = "passage_id"
) -> list[M]:
    """``items`` with, right after each, a copy for every passage merged into it
    (``duplicates``: removed id → kept id), its id set to the removed one and ``duplicate_of``
    to the kept one."""
    twins: dict[str, list[str]] = {}
    for dup, original in duplicates.items():
        twins.setdefault(original, []).append(dup)
    out: list[M] = []
    for item in items:
        out.append(item)
        kept = getattr(item, key)
        out.extend(
            item.model_copy(update={key: dup, "duplicate_of": kept}) for dup in twins.get(kept, [])
        )
    return out
