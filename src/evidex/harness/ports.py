"""What the harness needs from storage, as protocols; ``evidex.store`` implements them.

Keeping these here lets the harness stay free of any database driver, and lets tests pass a
real SQLite store or anything else with the same methods.
"""

from __future__ import annotations

from typing import Any, Protocol

from pydantic import BaseModel, Field

from evidex.harness.events import AuditRecord

__all__ = ["ReviewRequest", "StorePort"]


class ReviewRequest(BaseModel):
    """An item for the human review queue. ``reason`` says why it is there, in words."""

    job: str
    reason: str
    run_id: str
    risk: str = "low"
    batch_id: str = ""
    passage_ids: list[str] = Field(default_factory=list)
    payload: dict[str, Any] = Field(default_factory=dict)


class StorePort(Protocol):
    def append_audit(self, record: AuditRecord) -> None: ...

    def flush(self) -> None:
        """Make every appended audit row durable (the harness calls it before a job returns)."""
        ...

    def batch_outcomes(
        self, judge_id: str, step: str, prompt_version: str, last: int
    ) -> list[dict[str, Any]]:
        """The newest rows ending a batch of this judge, step and prompt version, oldest first
        (``batch_id``, ``status``, ``attempt``)."""
        ...

    def cache_get(self, key: str) -> dict[str, Any] | None: ...

    def cache_put(self, key: str, job: str, value: dict[str, Any]) -> None:
        """Store a reply's value; may be queued (the harness calls it on the event loop) as
        long as :meth:`flush` makes it durable and :meth:`cache_get` finds it meanwhile."""
        ...

    def add_review(self, request: ReviewRequest) -> int: ...

    def update_review(self, item_id: int, request: ReviewRequest) -> None:
        """Replace a pending item's passage ids and payload (a further step of the same input
        fell back, or the job completed what its fallback item holds); a resolved item is left
        as the reviewer saw it."""
        ...
