"""Splitting a batch the judge cannot answer whole (a small model leaving passages out or
grading one twice, a reply cut off at its token limit): the valid items of its last reply are
kept, the rest is halved and each half asked again, down to one item; only an item that fails
alone takes the fallback. This module decides the split and joins the parts' outcomes; the
runner asks the parts (:meth:`~evidex.harness.runner.Harness.call`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from pydantic import BaseModel

from evidex.harness._exchange import Failed, salvage
from evidex.harness.outcome import Outcome
from evidex.harness.settings import HarnessSettings
from evidex.tasks.base import Divisible, Salvaged, Step
from evidex.types import Event, Usage

__all__ = ["Split", "divisible", "plan_split"]

B = TypeVar("B")
V = TypeVar("V", bound=BaseModel)


def divisible(settings: HarnessSettings, step: Step[B, V], batch: B) -> bool:
    """Whether a failing ``batch`` is split rather than taking the fallback as it is."""
    return settings.split_batches and isinstance(step, Divisible) and len(step.item_ids(batch)) > 1


def part_ladder(settings: HarnessSettings, size: int, spent: int) -> int:
    """Attempts for a split part: one for a part of several items (a failing part is split
    again, which is the retry that helps a judge that cannot hold the batch), two for an item
    alone (the re-ask with its errors, at temperature 0); never past ``max_item_attempts``."""
    return min(1 if size > 1 else 2, settings.max_item_attempts - spent)


@dataclass(frozen=True)
class Split(Generic[B, V]):
    """How a failed batch is asked again: its parts, each part's attempts, the items its last
    reply graded validly, and the event that says so."""

    step: Divisible[B, V]
    batch: B
    failed: Failed
    parts: tuple[B, ...]
    ladders: tuple[int, ...]
    salvaged: Salvaged[B, V] | None
    spent: int
    """Attempts the parts' items took so far, this batch's included."""

    @property
    def kept(self) -> list[str]:
        return [] if self.salvaged is None else list(self.salvaged.kept)

    def detail(self) -> dict[str, Any]:
        """The audit row's detail: the parts' item ids, what was kept, why."""
        return {
            "parts": [list(self.step.item_ids(p)) for p in self.parts],
            "kept": self.kept,
            "cut_off": self.failed.cut_off,
        }

    def event(self, batch_id: str) -> Event:
        detail = self.detail()
        sizes = ", ".join(str(len(ids)) for ids in detail["parts"])
        why = "cut off at its token limit" if self.failed.cut_off else self.failed.reason
        kept = f"; kept {len(self.kept)} valid item(s) of its last reply" if self.kept else ""
        return Event(
            kind="batch_split",
            detail=(
                f"batch {batch_id} of {len(self.step.item_ids(self.batch))} item(s) was asked "
                f"again as {len(self.parts)} part(s) of {sizes} after "
                f"{len(self.failed.attempts)} attempt(s) ({why}){kept}"
            ),
            data={"batch_id": batch_id, **detail},
        )

    def joined(self, batch_id: str, outcomes: Sequence[Outcome[V]]) -> Outcome[V]:
        """One outcome for the batch: each item's grade from the part that graded it (or the
        kept reply), every attempt and call counted, a fallback when any part fell back."""
        values = ([] if self.salvaged is None else [self.salvaged.value]) + [
            o.value for o in outcomes
        ]
        judged = [
            i
            for part, o in zip(self.parts, outcomes, strict=True)
            for i in (o.kept if o.source == "fallback" else self.step.item_ids(part))
        ]
        fell_back = [o for o in outcomes if o.source == "fallback"]
        return Outcome(
            value=self.step.joined(self.batch, values),
            source="fallback" if fell_back else "judge",
            batch_id=batch_id,
            reason="; ".join(o.reason for o in fell_back if o.reason) or None,
            attempts=(*self.failed.attempts, *(a for o in outcomes for a in o.attempts)),
            usage=sum((o.usage for o in outcomes), Usage()) + self.failed.usage,
            review_item_id=next((o.review_item_id for o in fell_back if o.review_item_id), None),
            judge_calls=self.failed.calls + sum(o.judge_calls for o in outcomes),
            kept=(*self.kept, *judged),
            events=(self.event(batch_id), *(e for o in outcomes for e in o.events)),
        )


def plan_split(
    settings: HarnessSettings, step: Step[B, V], batch: B, failed: Failed, spent: int
) -> Split[B, V] | None:
    """The split of a failed batch; None when there is nothing to split: splitting is off,
    the step's items are not graded one by one, the last attempt got no reply at all (a judge
    that does not answer is not asked more often), the batch was one item that failed alone,
    or its items spent their attempts (:func:`part_ladder`)."""
    if (
        not settings.split_batches
        or not isinstance(step, Divisible)
        or not failed.attempts
        or failed.attempts[-1].raw_output is None
    ):
        return None
    spent += len(failed.attempts)
    salvaged = salvage(step, batch, failed.attempts[-1].raw_output, failed.reason)
    rest = batch if salvaged is None else salvaged.left
    left = step.item_ids(rest)
    if len(left) > 1:
        parts: tuple[B, ...] = step.halves(rest)
    elif salvaged is not None and left:
        parts = (rest,)
    else:
        return None
    ladders = tuple(part_ladder(settings, len(step.item_ids(p)), spent) for p in parts)
    if min(ladders) < 1:
        return None
    return Split(step, batch, failed, parts, ladders, salvaged, spent)
