"""The judge-call half that the encoder judges (``local:minilm``, ``local:cross-encoder``) share.

They answer tier and rerank from the request's payload, never from the prose prompt: a score
per passage, mapped to a tier reply or ranked. What differs is how each scores and explains
(:meth:`PayloadJudge.tier_reply`, :meth:`PayloadJudge.pool_scores`); the checks of what they can
answer, the worker thread that keeps the event loop free while the model runs, and the reply's
shape are written once here.
"""

from __future__ import annotations

import abc
import asyncio
import json
from collections.abc import Sequence
from typing import Any, ClassVar

from evidex.errors import ConfigError
from evidex.judges._grades import PoolScore, rerank_reply, scores_reply
from evidex.judging import (
    Judge,
    JudgeReply,
    JudgeRequest,
    PassagesPayload,
    Payload,
    RankPayload,
    ScorePayload,
    TierPayload,
)
from evidex.types import Usage

__all__ = ["PayloadJudge"]


class PayloadJudge(Judge):
    """A judge that scores passages and answers tier, rerank and score-step payloads."""

    jobs: ClassVar[frozenset[str]] = frozenset({"tier", "rerank"})
    native_payloads: ClassVar[tuple[type[Payload], ...]] = (TierPayload, RankPayload, ScorePayload)
    """Payloads answered natively, the pointwise score step's included: scoring the whole pool
    in one call (not text by text) lets a judge see the candidates together."""
    is_heuristic = True

    @abc.abstractmethod
    def tier_reply(
        self, query: str, ids: list[str], texts: list[str], tiers: list[str]
    ) -> tuple[dict[str, Any], int]:
        """A tier reply for the passages, and the tokens read to make it."""

    @abc.abstractmethod
    def pool_scores(self, query: str, texts: Sequence[str]) -> tuple[list[PoolScore], int]:
        """Each passage's relevance score with its explanation, and the tokens read."""

    async def complete(self, request: JudgeRequest) -> JudgeReply:
        """Answer a tier or rerank request from its payload (the prose prompt is not read)."""
        if request.job not in self.jobs:
            raise ConfigError(f"{self.judge_id} cannot do the {request.job} job")
        return await asyncio.to_thread(self._answer, request)

    def _answer(self, request: JudgeRequest) -> JudgeReply:
        payload = request.payload
        if not isinstance(payload, PassagesPayload) or not isinstance(
            payload, self.native_payloads
        ):
            raise ConfigError(
                f"{self.judge_id} cannot answer a {type(payload).__name__} ({request.step} step)"
            )
        texts = [p.text for p in payload.passages]
        ids = [p.passage_id for p in payload.passages]
        reply: dict[str, Any]
        if isinstance(payload, TierPayload):
            tiers = [t.name for t in payload.tiers]
            reply, read = self.tier_reply(payload.query, ids, texts, tiers)
        else:
            pool, read = self.pool_scores(payload.query, texts)
            scored = isinstance(payload, ScorePayload)
            reply = scores_reply(ids, pool) if scored else rerank_reply(ids, pool)
        usage = Usage(prompt_tokens=read, completion_tokens=0)
        return JudgeReply(text=json.dumps(reply), usage=usage, model_version=self.model_version)
