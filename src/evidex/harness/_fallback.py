"""The explicit fallback of a batch that no reply validated, as the spec asks: marked
``source="fallback"`` with its reason, the valid items of the last reply kept, a review item
holding every attempt and the passages the reviewer reads, and an audit-log row."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel

from evidex.harness._exchange import Failed, salvage
from evidex.harness.events import AuditRecord
from evidex.harness.job import with_passages
from evidex.harness.outcome import Outcome, RunContext
from evidex.harness.ports import ReviewRequest
from evidex.harness.routing import batch_passages, batch_vocabulary
from evidex.tasks.base import Step

if TYPE_CHECKING:
    from evidex.harness.runner import Harness

__all__ = ["fall_back"]

B = TypeVar("B")
V = TypeVar("V", bound=BaseModel)


async def fall_back(
    harness: Harness,
    step: Step[B, V],
    batch: B,
    ctx: RunContext,
    base: dict[str, Any],
    key: str,
    failed: Failed,
) -> Outcome[V]:
    """The explicit fallback of a batch whose attempts (and parts) gave no valid reply: the
    step's fallback value, keeping the valid items of the last reply, a review item (the
    input's one item, see :meth:`Harness.fallback_review`) and an audit row."""
    attempts, reason = failed.attempts, failed.reason
    last_raw = next((a.raw_output for a in reversed(attempts) if a.raw_output), None)
    salvaged = salvage(step, batch, last_raw, reason)
    kept: tuple[str, ...] = ()
    if salvaged is None:
        value, info = step.fallback(batch, reason), step.describe(batch)
    else:
        value, info, kept = salvaged.value, step.describe(salvaged.left), salvaged.kept
        reason = f"{reason}; kept the valid part of the last reply ({len(kept)} item(s))"
    item_id = await harness.fallback_review(
        ctx,
        ReviewRequest(
            job=step.job,
            reason=f"fallback after {len(attempts)} attempt(s): {reason}",
            run_id=ctx.run_id,
            risk=ctx.risk,
            batch_id=base["batch_id"],
            passage_ids=list(info.passage_ids),
            payload=with_passages(
                {
                    "query": info.query,
                    "step": step.name,
                    "errors": [list(a.errors) for a in attempts],
                    "last_raw_output": last_raw,
                    "fallback": value.model_dump(mode="json"),
                    "steps": [
                        {
                            "step": step.name,
                            "batch_id": base["batch_id"],
                            "reason": reason,
                            "errors": [list(a.errors) for a in attempts],
                            "last_raw_output": last_raw,
                            "passage_ids": list(info.passage_ids),
                            "fallback": value.model_dump(mode="json"),
                        }
                    ],
                    **batch_vocabulary(batch),
                    **dict(info.extra),
                },
                batch_passages(batch),
                info.passage_ids,
                ctx.flagged,
            ),
        ),
    )
    harness.hooks.emit(
        AuditRecord(
            **base,
            status="fallback",
            attempt=len(attempts),
            errors=[reason],
            labels=step.labels(value),
            cache_key=key,
            detail={"review_item_id": item_id, "kept": list(kept)},
        )
    )
    return Outcome(
        value=value,
        source="fallback",
        batch_id=base["batch_id"],
        reason=reason,
        attempts=tuple(attempts),
        usage=failed.usage,
        review_item_id=item_id,
        judge_calls=failed.calls,
        kept=kept,
    )
