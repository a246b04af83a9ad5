"""Records the harness emits, and the hook bus the audit log and metrics subscribe to.

Every judge exchange, cache hit, fallback, review routing and input note becomes one
:class:`AuditRecord`. Subscribers must not raise into the run: a failing subscriber is reported
through ``logging`` and the run goes on, except the audit log itself, which the store makes
fail loudly (an audit trail with holes is worse than a stopped run).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any, Literal

from pydantic import BaseModel, Field

__all__ = ["AuditRecord", "Hooks", "Status"]

logger = logging.getLogger("evidex.harness")

Status = Literal["ok", "invalid", "error", "split", "fallback", "cache", "note", "review"]


def _now() -> datetime:
    return datetime.now(timezone.utc)


class AuditRecord(BaseModel):
    """One row of the append-only audit log. Field names follow the specification."""

    time: datetime = Field(default_factory=_now)
    run_id: str
    job: str
    step: str = ""
    status: Status
    query_hash: str = ""
    batch_id: str = ""
    judge_id: str = ""
    model_version: str = ""
    prompt_version: str = ""
    attempt: int = 0
    temperature: float | None = None
    raw_output: str | None = None
    errors: list[str] = Field(default_factory=list)
    labels: Any = None
    latency_ms: float | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cache_key: str = ""
    detail: dict[str, Any] = Field(default_factory=dict)


Subscriber = Callable[[AuditRecord], None]


class Hooks:
    """A tiny synchronous event bus. ``critical`` subscribers propagate their errors."""

    def __init__(self) -> None:
        self._subscribers: list[tuple[Subscriber, bool]] = []

    def subscribe(self, fn: Subscriber, *, critical: bool = False) -> None:
        self._subscribers.append((fn, critical))

    def emit(self, record: AuditRecord) -> None:
        for fn, critical in self._subscribers:
            if critical:
                fn(record)
                continue
            try:
                fn(record)
            except Exception:  # a metrics hiccup must not lose a judgment
                logger.exception("hook %r failed on a %s record", fn, record.status)
