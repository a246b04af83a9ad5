"""The small parts of one judge exchange that the runner uses: where an attempt's time went,
the call under its timeout, reading a reply's JSON, and salvaging the valid items of the last
reply of a batch that falls back."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pydantic import BaseModel

from evidex._text import extract_json_object
from evidex.errors import AttemptRecord
from evidex.judging import JudgeReply
from evidex.tasks.base import ReplyInvalid, Salvageable, Salvaged, Step
from evidex.types import Usage

__all__ = ["Failed", "Timing", "parse_reply", "salvage", "within"]

B = TypeVar("B")
V = TypeVar("V", bound=BaseModel)


@dataclass
class Timing:
    """Where the time of one attempt went: waiting for the judge's slot, and the call."""

    queue_s: float = 0.0
    call_s: float | None = None

    @property
    def latency_ms(self) -> float | None:
        return None if self.call_s is None else self.call_s * 1000

    def detail(self, endpoint: str = "") -> dict[str, Any]:
        timing: dict[str, Any] = {"queue_ms": round(self.queue_s * 1000, 3)}
        return timing | ({"endpoint": endpoint} if endpoint else {})


@dataclass
class Failed:
    """A batch's attempts that gave no valid reply: what they were, what they cost, why the
    last one failed, and whether it was cut off at the token limit."""

    attempts: list[AttemptRecord] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    calls: int = 0
    reason: str = "no attempt was made"
    cut_off: bool = False


def salvage(step: Step[B, V], batch: B, raw: str | None, reason: str) -> Salvaged[B, V] | None:
    """The valid items of the last reply, for steps whose items are graded independently."""
    if raw is None or not isinstance(step, Salvageable):
        return None
    try:
        data = parse_reply(raw)
    except ReplyInvalid:
        return None
    salvaged: Salvaged[B, V] | None = step.salvage(batch, data, reason)
    return salvaged


async def within(timeout: float, call: Awaitable[JudgeReply]) -> JudgeReply:
    """``call`` under ``timeout`` seconds; on 3.11+ in the calling task (``asyncio.timeout``),
    where ``wait_for`` would start and schedule one more task for every judge call."""
    if sys.version_info >= (3, 11):
        async with asyncio.timeout(timeout):
            return await call
    return await asyncio.wait_for(call, timeout=timeout)


def parse_reply(text: str) -> Any:
    try:
        return extract_json_object(text)
    except ValueError as exc:
        raise ReplyInvalid([f"invalid JSON: {exc}"]) from exc
