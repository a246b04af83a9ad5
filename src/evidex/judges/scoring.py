"""Scoring judges: the capability the ``pointwise`` rerank strategy looks for.

A judge that can score is any judge with ``score(query, texts) -> list[float]`` (the embedded
encoder judge ``local:minilm`` is one). :class:`ScoringJudge` puts such a judge behind the
ordinary judge interface for the score step, so its calls get the harness's timeout, circuit
breaker, cache, audit rows and fallback like every other judge call.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar, Protocol, runtime_checkable

from evidex.judges._window import BorrowedWindow
from evidex.judging import Judge, JudgeReply, JudgeRequest, PassagesPayload

__all__ = ["Scorer", "ScoringJudge"]


@runtime_checkable
class Scorer(Protocol):
    """A judge that rates each text's relevance to a query; higher means more relevant."""

    def score(self, query: str, texts: Sequence[str]) -> list[float]: ...


class ScoringJudge(BorrowedWindow):
    """Answers score-step requests by calling the wrapped judge's ``score`` in a worker thread.

    The reply uses the score step's schema, so it is validated like a chat judge's reply. Its
    identity (id, fingerprint, model version, tokenizer) is the wrapped judge's, so the cache
    key is the same as if the wrapped judge had answered itself.
    """

    jobs: ClassVar[frozenset[str]] = frozenset({"rerank"})
    is_heuristic = True

    def __init__(self, inner: Judge) -> None:
        if not isinstance(inner, Scorer):
            raise TypeError(f"{inner!r} has no score(query, texts) method")
        super().__init__(inner.judge_id)
        self.inner = inner
        self._score: Callable[[str, Sequence[str]], list[float]] = inner.score
        self.context_window = inner.context_window

    async def complete(self, request: JudgeRequest) -> JudgeReply:
        payload = request.payload
        if isinstance(payload, getattr(self.inner, "native_payloads", ())):
            # the judge answers the score step from the payload itself: it scores the whole
            # pool at once (local:minilm fused with BM25) and explains each score
            return await self.inner.complete(request)
        if not isinstance(payload, PassagesPayload):
            raise TypeError(f"{self.judge_id} scores passages, not a {type(payload).__name__}")
        passages = payload.passages
        scores = await asyncio.to_thread(self._score, payload.query, [p.text for p in passages])
        if len(scores) != len(passages):
            # a broken scorer is a programming error in the backend, not a judge opinion
            raise RuntimeError(
                f"{self.judge_id} returned {len(scores)} scores for {len(passages)} passages"
            )
        entries = [
            {
                "passage_id": p.passage_id,
                "relevance_score": float(s),
                "justification": f"{self.judge_id} relevance score {float(s):.3f} "
                "(encoder similarity of query and passage, not a reading)",
            }
            for p, s in zip(passages, scores, strict=True)
        ]
        return JudgeReply(text=json.dumps({"scores": entries}), model_version=self.model_version)

    def fingerprint(self) -> Mapping[str, Any]:
        return self.inner.fingerprint()

    @property
    def model_version(self) -> str:
        return self.inner.model_version

    @property
    def window_judge(self) -> Judge:
        return self.inner
