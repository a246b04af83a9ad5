"""What one job invocation is, and what one validated exchange of it gave."""

from __future__ import annotations

import asyncio
import functools
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Generic, TypeVar

from pydantic import BaseModel

from evidex._text import sha256_hex
from evidex.errors import AttemptRecord
from evidex.harness.ports import ReviewRequest
from evidex.types import Event, Source, Usage

if TYPE_CHECKING:
    from evidex.harness.frontier_pool import FrontierPool

__all__ = ["Outcome", "RunContext"]

V = TypeVar("V", bound=BaseModel)


@dataclass
class RunContext:
    """One job invocation: ties its audit rows and review items together."""

    job: str
    query: str
    risk: str = "low"
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex[:12])
    review_fallback: bool = True
    """Whether a fallback also opens a review item. A job's spec may say a fallback is a final
    answer at some risk level (classify at low risk); it is still marked and audit-logged."""
    fallback_review: tuple[int, ReviewRequest] | None = None
    """The review item this input's fallbacks opened, and what it holds: every further step
    that falls back adds its attempts to it, so one input is one item per reason."""
    review_lock: asyncio.Lock = field(default_factory=asyncio.Lock, repr=False, compare=False)
    """Held while the fallback item is opened or rewritten (in a worker thread)."""
    flagged: dict[str, list[dict[str, object]]] = field(default_factory=dict, repr=False)
    """What preflight's screen flagged in each passage (see
    :func:`evidex._screening.flagged_stretches`): every review item of the run shows it."""
    frontier_pool: tuple[FrontierPool, int] | None = field(default=None, repr=False, compare=False)
    """The frontier pool this input shares with the others of its run, and its key there
    (None: a cascade's frontier rule routes this input alone)."""

    @functools.cached_property
    def query_hash(self) -> str:
        """Computed once per run: every call's audit row carries it."""
        return sha256_hex(self.query)[:16]


@dataclass
class Outcome(Generic[V]):
    """A validated value for one batch, with where it came from and what it cost."""

    value: V
    source: Source
    batch_id: str
    reason: str | None = None
    attempts: tuple[AttemptRecord, ...] = ()
    usage: Usage = field(default_factory=Usage)
    review_item_id: int | None = None
    judge_calls: int = 0
    kept: tuple[str, ...] = ()
    """For a fallback: the items kept from the judge's last reply (see
    :class:`~evidex.tasks.base.Salvaged`); empty when the whole batch took the fallback."""
    events: tuple[Event, ...] = ()
    """What the harness did to the batch that its result should say (a split), already in the
    audit log."""

    def source_of(self, item_source: Source) -> Source:
        """Where one item of the value came from. A fallback outcome may keep the valid items
        of the last reply (see :class:`~evidex.tasks.base.Salvaged`): those stay the judge's."""
        return item_source if self.source == "fallback" else self.source
