"""The scripted judge: a queue of canned replies. A test double; it never ships in the package."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterable, Sequence
from typing import Any, ClassVar

from evidex.errors import JudgeUnavailable
from evidex.judging import Judge, JudgeReply, JudgeRequest
from evidex.types import Usage

Reply = str | dict[str, Any] | Exception | Callable[[JudgeRequest], Any]


class ScriptedJudge(Judge):
    """Answers each request with the next scripted reply and records every request it saw.

    A reply may be raw text (to test malformed output), a dict (sent as JSON), an exception
    (raised: ``JudgeUnavailable`` for transport faults), or a callable of the request.
    """

    jobs: ClassVar[frozenset[str]] = frozenset({"tier", "rerank", "classify", "audit"})
    reads_prompts: ClassVar[bool] = True

    def __init__(self, replies: Iterable[Reply] = (), *, delay_s: float = 0.0) -> None:
        super().__init__("scripted")
        self.replies: list[Reply] = list(replies)
        self.requests: list[JudgeRequest] = []
        self.delay_s = delay_s

    async def complete(self, request: JudgeRequest) -> JudgeReply:
        self.requests.append(request)
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        if not self.replies:
            raise JudgeUnavailable("scripted judge has no replies left")
        reply = self.replies.pop(0)
        if callable(reply) and not isinstance(reply, Exception):
            reply = reply(request)
        if isinstance(reply, Exception):
            raise reply
        text = reply if isinstance(reply, str) else json.dumps(reply)
        return JudgeReply(
            text=text,
            usage=Usage(prompt_tokens=100, completion_tokens=20),
            model_version="scripted-1",
        )


def tier_reply(
    request: JudgeRequest, tier: str = "directly-supporting", **overrides: Any
) -> dict[str, Any]:
    """A valid tier reply for whatever batch the request carries (snippet = first 5 words)."""
    items = []
    for p in request.payload.passages:  # type: ignore[attr-defined]
        entry = {
            "passage_id": p.passage_id,
            "tier": tier,
            "justification": f"It says {' '.join(p.text.split()[:5])}.",
            "key_evidence_snippet": " ".join(p.text.split()[:5]),
        }
        entry.update(overrides.get(p.passage_id, {}))
        items.append(entry)
    return {"classifications": items}


def rank_reply(
    order: Sequence[str] | None = None, **overrides: dict[str, Any]
) -> Callable[[JudgeRequest], dict[str, Any]]:
    """A valid ranking reply for whatever passages the request carries: ``order`` first (when
    given, restricted to the request's ids), then the others reversed; justifications quote
    the passage's first words."""

    def reply(request: JudgeRequest) -> dict[str, Any]:
        texts = {p.passage_id: p.text for p in request.payload.passages}  # type: ignore[attr-defined]
        ids = [i for i in (order or []) if i in texts]
        ids += [i for i in reversed(list(texts)) if i not in ids]
        entries = []
        for rank, pid in enumerate(ids, 1):
            entry = {
                "rank": rank,
                "passage_id": pid,
                "relevance_score": round(1 - rank / 100, 2),
                "justification": f"It says {' '.join(texts[pid].split()[:5])}.",
            }
            entry.update(overrides.get(pid, {}))
            entries.append(entry)
        return {"ranked_passages": entries}

    return reply
