"""The rerank strategies as stages of the rerank spec, and the assembly of their ranking.

Every strategy places the reranked head of the candidates; each judge call goes through the
job's :class:`~evidex.harness.job.JobRun`, so the judge's limit, the run's fan-out, progress and
the totals are the harness's.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from evidex.harness.assemble import with_duplicates
from evidex.harness.fanout import bounded_map
from evidex.harness.job import JobRun
from evidex.harness.runner import Outcome
from evidex.harness.staged import staged
from evidex.jobs._cascade import cascade_ranking
from evidex.jobs._rank_algos import next_window_start, tournament_top_k
from evidex.tasks.base import PromptTemplate
from evidex.tasks.rerank import (
    PAIR_TEMPLATE,
    RERANK_TEMPLATE,
    SCORE_TEMPLATE,
    PairBatch,
    PairStep,
    RankedPassage,
    RerankBatch,
    RerankBatchValue,
    RerankStep,
    ScoreBatch,
    ScoreBatchValue,
    ScoreStep,
    flag_event,
)
from evidex.types import Event, Passage, Source

__all__ = ["StrategyRun", "assemble", "flag", "template_of"]


@dataclass
class StrategyRun:
    """Where each reranked passage landed, and what the comparisons found."""

    run: JobRun
    query: str
    passages: list[Passage]
    placed: list[RankedPassage] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)
    comparisons: int = 0
    ties: int = 0
    template: PromptTemplate | None = None
    """The strategy step's prompt (the caller's own wording); None: the built-in one."""

    @property
    def sources(self) -> list[Source]:
        return [o.source for o in self.run.outcomes]

    def record(self, outcome: Outcome[Any]) -> None:
        if outcome.reason:
            self.reasons.append(outcome.reason)

    def verdict(self) -> tuple[Source, str | None]:
        if any(r.source == "fallback" for r in self.placed):
            return "fallback", self.reasons[-1] if self.reasons else None
        if self.sources and all(s == "cache" for s in self.sources):
            return "cache", None
        return "judge", None

    def place(self, value: RerankBatchValue, outcome: Outcome[Any]) -> list[RankedPassage]:
        """A batch's ranking (excluded passages last) stamped with the outcome's provenance."""
        out = [
            r.model_copy(update={"source": outcome.source, "reason": outcome.reason})
            for r in value.ranked_passages
        ]
        out += [
            RankedPassage(
                rank=0,
                passage_id=x.passage_id,
                justification=f"Excluded by the judge: {x.reason}",
                source=outcome.source,
                excluded=x.reason,
            )
            for x in value.excluded
        ]
        return out

    async def allpairs(self) -> None:
        batch = RerankBatch(self.query, tuple(self.passages), "allpairs")
        outcome = await self.run.call(RerankStep(self.template), batch)
        self.record(outcome)
        self.placed = self.place(outcome.value, outcome)
        self._progress(1, 1)

    async def listwise(self, window: int, step: int) -> None:
        """Windows from the bottom of the list to the top, each ranked by the allpairs step,
        so strong passages found low in the list can climb to the top. Each window is cut
        when it is sent, of the size the judge holds (:meth:`JobRun.sized`: smaller after
        windows it could not rank whole, back up to ``window`` as its rankings validate), and
        moves up by ``step`` scaled to it, so consecutive windows overlap as asked."""
        order: list[RankedPassage] = [
            RankedPassage(rank=0, passage_id=p.passage_id, justification="", source=None)
            for p in self.passages
        ]
        by_id = {p.passage_id: p for p in self.passages}
        ranker = RerankStep(self.template)
        sized = self.run.sized(ranker, window)
        start, index = len(order), 0
        while start > 0:
            size = sized.next()
            start = next_window_start(start, len(order), size, window, step)
            chunk = order[start : start + size]
            sized.sent(len(chunk))
            batch = RerankBatch(self.query, tuple(by_id[r.passage_id] for r in chunk), "listwise")
            outcome = await self.run.call(
                ranker, batch, batch_id=f"{self.run.ctx.run_id}-w{index:03d}"
            )
            sized.observe(outcome)
            self.record(outcome)
            order[start : start + len(chunk)] = self.place(outcome.value, outcome)
            index += 1
            left = -(-start // max(1, step * size // window))  # windows still to come
            self._progress(index, index + left)
        self.run.note_sizes(sized, len(order))
        self.placed = order

    async def pointwise(self, batch_size: int) -> None:
        async def score(on: JobRun, some: Sequence[Passage]) -> list[Outcome[ScoreBatchValue]]:
            def batch(chunk: Sequence[Passage]) -> ScoreBatch:
                return ScoreBatch(self.query, tuple(chunk))

            return await on.map_sized(ScoreStep(self.template), some, batch, batch_size)

        found = await staged(
            self.run, self.query, self.passages, score, ScoreStep(), send_failed=False
        )
        if found.staging is not None:
            self.placed, reasons, events = cascade_ranking(found, self.passages, batch_size)
            self.reasons += reasons
            self.events += events
            return
        outcomes = found.judged
        for outcome in outcomes:
            self.record(outcome)
        failed = [o for o in outcomes if o.source == "fallback"]
        if failed:  # scores from different batches are not comparable with pseudo-scores
            self.placed = [
                RankedPassage(
                    rank=0,
                    passage_id=p.passage_id,
                    justification="Fallback: scoring failed for part of the candidates; the "
                    "original retrieval order was kept and the query flagged for review.",
                    source="fallback",
                    reason=failed[0].reason,
                )
                for p in self.passages
            ]
            return
        position = {p.passage_id: i for i, p in enumerate(self.passages)}
        scored = [(s, o.source) for o in outcomes for s in o.value.scores]
        scored.sort(key=lambda pair: (-pair[0].relevance_score, position[pair[0].passage_id]))
        self.placed = [
            RankedPassage(
                rank=0,
                passage_id=s.passage_id,
                relevance_score=s.relevance_score,
                justification=s.justification,
                source=source,
            )
            for s, source in scored
        ]

    async def pairwise(self, top_k: int) -> None:
        """Comparisons asked in both orders; a pair whose answers disagree (or fail) is a tie,
        which the better retrieval rank wins. Concurrency is bounded by the run (its settings)
        and by the judge's own limit."""
        by_id = {p.passage_id: p for p in self.passages}
        position = {pid: i for i, pid in enumerate(by_id)}
        won: dict[str, str] = {}
        step = PairStep(self.template)
        numbers = itertools.count()
        expected = max(1, len(by_id) - 1 + (min(top_k, len(by_id)) - 1) * len(by_id).bit_length())

        async def ask(a: Passage, b: Passage) -> Outcome[Any]:
            batch_id = f"{self.run.ctx.run_id}-c{next(numbers):05d}"
            outcome = await self.run.call(step, PairBatch(self.query, a, b), batch_id=batch_id)
            self.record(outcome)
            return outcome

        async def better(x: str, y: str) -> str:
            self.comparisons += 1
            first, second = await bounded_map(
                [(x, y), (y, x)], 2, lambda _, pair: ask(by_id[pair[0]], by_id[pair[1]])
            )
            w1 = {"A": x, "B": y}.get(first.value.winner or "")
            w2 = {"A": y, "B": x}.get(second.value.winner or "")
            if w1 is not None and w1 == w2:
                winner, loser = w1, (y if w1 == x else x)
                won[winner] = f"Preferred to {loser} in both orders: {first.value.justification}"
            else:
                self.ties += 1
                winner, loser = (x, y) if position[x] < position[y] else (y, x)
                won[winner] = (
                    f"Tied with {loser} (the two orders disagreed or failed); the better "
                    "retrieval rank decided."
                )
            self._progress(self.comparisons, expected)
            return winner

        limit = self.run.harness.settings.max_concurrency
        top = await tournament_top_k(list(by_id), top_k, better, limit=limit)
        chosen = set(top)
        sources = set(self.sources) or {"judge"}
        source: Source = "cache" if sources == {"cache"} else "judge"
        if sources == {"fallback"}:
            source = "fallback"
            self.reasons.append("every comparison fell back")
        self.placed = [
            RankedPassage(
                rank=0,
                passage_id=pid,
                justification=won.get(pid, "The only candidate."),
                source=source,
                reason="every comparison fell back; retrieval order kept"
                if source == "fallback"
                else None,
            )
            for pid in top
        ]
        self.placed += [
            RankedPassage(
                rank=0,
                passage_id=p.passage_id,
                justification="Outside the top_k found by pairwise comparison; retrieval "
                "order kept.",
                source=None,
                reason="outside top_k",
            )
            for p in self.passages
            if p.passage_id not in chosen
        ]
        fell_back = sum(1 for s in self.sources if s == "fallback")
        if fell_back:
            self.events.append(
                Event(
                    kind="comparison_fallback",
                    detail=f"{fell_back} comparison call(s) never gave a valid answer and "
                    "counted as ties; each has a review item",
                    data={"count": fell_back},
                )
            )

    def _progress(self, done: int, total: int) -> None:
        self.run.progress(done, total)


# ---------------------------------------------------------------------------- assembly


def template_of(strategy: str) -> PromptTemplate:
    """The prompt a strategy's judge calls use (listwise reuses the allpairs prompt)."""
    return {"pairwise": PAIR_TEMPLATE, "pointwise": SCORE_TEMPLATE}.get(strategy, RERANK_TEMPLATE)


def assemble(
    placed: Sequence[RankedPassage],
    tail: Sequence[Passage],
    duplicates: dict[str, str],
    originals: dict[str, Passage],
) -> list[RankedPassage]:
    """Reranked passages, then the cut ones, each duplicate right after its twin; ranks 1..n."""
    ordered = list(placed) + [
        RankedPassage(
            rank=0,
            passage_id=p.passage_id,
            relevance_score=None,
            justification="Not reranked: below the top_n cut; retrieval order kept.",
            source=None,
            reason="below top_n",
        )
        for p in tail
    ]
    out = with_duplicates(ordered, duplicates)
    if {r.passage_id for r in out} != set(originals):  # a bug here would lose passages
        raise RuntimeError("rerank lost or invented passages while assembling the ranking")
    return [r.model_copy(update={"rank": i}) for i, r in enumerate(out, 1)]


def flag(
    ranked: Sequence[RankedPassage], texts: dict[str, str], events: list[Event], run: JobRun
) -> dict[str, str]:
    """Justification quality flags (heuristic) of every judged passage in the final ranking."""
    already = {pid for e in events if e.kind == "justification_flag" for pid in e.passage_ids}
    flags: dict[str, str] = {}
    for r in ranked:
        if r.source not in ("judge", "cache") or r.duplicate_of or r.passage_id not in texts:
            continue
        event = flag_event(r.passage_id, r.justification, texts[r.passage_id])
        if event is None:
            continue
        flags[r.passage_id] = str(event.data["flag"])
        if r.passage_id not in already:
            events.append(event)
            run.log(event)
    return flags
