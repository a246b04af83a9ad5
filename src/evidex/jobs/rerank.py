"""The rerank job end to end: preflight → cut to ``top_n`` → a strategy → merge → metrics.

``rerank()`` is the library call behind ``evidex rerank`` and ``POST /rerank``. Every strategy
returns the same :class:`RerankResult`: a complete ranking (ranks 1..n, each candidate once),
where the first ``top_n`` candidates in retrieval order were reranked and the rest keep their
retrieval order below them.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from evidex.errors import InputError
from evidex.harness.ports import StorePort
from evidex.harness.runner import Harness, HarnessSettings, Outcome, RunContext
from evidex.jobs._common import resolve_judge, resolve_store, run_sync
from evidex.jobs._rank_algos import kendall_tau_distance, tournament_top_k, window_starts
from evidex.jobs._scoring import Scorer, ScoringJudge
from evidex.judging import Judge
from evidex.preflight import prepare_passages
from evidex.tasks.base import PromptTemplate
from evidex.tasks.rerank import (
    PAIR_TEMPLATE,
    RERANK_TEMPLATE,
    SCORE_TEMPLATE,
    STRATEGIES,
    PairBatch,
    PairStep,
    RankedPassage,
    RerankBatch,
    RerankBatchValue,
    RerankStep,
    ScoreBatch,
    ScoreStep,
    flag_event,
)
from evidex.types import Event, Passage, Source, Usage

__all__ = ["RerankMetrics", "RerankResult", "arerank", "rerank"]

DEFAULT_TOP_K, DEFAULT_TOP_N = 10, 30
DEFAULT_WINDOW, DEFAULT_STEP = 20, 10
CHAT_SCORE_BATCH = 10
"""Passages per pointwise call for chat judges; scoring judges get every candidate at once."""


class RerankMetrics(BaseModel):
    """What the spec asks to log for every rerank call (also written as an audit-log note)."""

    query: str
    candidate_count: int
    reranked_count: int
    output_ranking: list[str]
    scores: dict[str, float | None]
    latency_ms: float
    judge_calls: int
    prompt_tokens: int
    completion_tokens: int
    inversion_rate: float = Field(
        description="normalised Kendall tau distance between the retrieval order and the "
        "output order of the reranked candidates (0 = unchanged, 1 = reversed)"
    )
    justification_flags: dict[str, str] = Field(
        default_factory=dict, description="heuristic: passage id → 'empty' or 'generic'"
    )
    truncation_events: int = 0
    comparisons: int | None = Field(default=None, description="pairwise: distinct pairs compared")
    ties: int | None = Field(default=None, description="pairwise: inconsistent or failed pairs")


class RerankResult(BaseModel):
    """One ranking for every strategy: each candidate once, ranks 1..n, with provenance.

    ``source`` is ``fallback`` when any part of the ranking fell back to retrieval order (the
    review queue then holds an item, see ``review_item_ids``), ``cache`` when every judgment
    came from the cache, else ``judge``. A passage's own ``source`` is None when no judge
    placed it (it was below the ``top_n`` cut, or outside the pairwise top-k).
    """

    query: str
    strategy: str
    top_k: int
    ranked_passages: list[RankedPassage]
    source: Source
    reason: str | None = None
    events: list[Event] = Field(default_factory=list)
    metrics: RerankMetrics
    review_item_ids: list[int] = Field(default_factory=list)
    judge_id: str
    prompt_version: str
    run_id: str
    usage: Usage = Field(default_factory=Usage)
    judge_calls: int = 0

    def top(self, k: int | None = None) -> list[RankedPassage]:
        """The first ``k`` (default ``top_k``) passages of the ranking."""
        return self.ranked_passages[: self.top_k if k is None else k]

    def ids(self) -> list[str]:
        return [r.passage_id for r in self.ranked_passages]

    def report(self, *, limit: int | None = None) -> dict[str, Any]:
        """The spec's output plus provenance, for JSON output; ``limit`` cuts the ranking."""
        data = self.model_dump(mode="json")
        if limit is not None:
            data["ranked_passages"] = data["ranked_passages"][:limit]
        return data


def rerank(
    query: str,
    passages: Iterable[Passage | dict[str, Any]],
    *,
    strategy: str | None = None,
    top_k: int = DEFAULT_TOP_K,
    top_n: int = DEFAULT_TOP_N,
    judge: Judge | str | None = None,
    store: StorePort | str | None = None,
    window: int = DEFAULT_WINDOW,
    step: int = DEFAULT_STEP,
    settings: HarnessSettings | None = None,
    on_progress: Callable[[int, int], None] | None = None,
) -> RerankResult:
    """Rerank candidate passages for a query. See :func:`arerank`."""
    return run_sync(
        arerank(
            query,
            passages,
            strategy=strategy,
            top_k=top_k,
            top_n=top_n,
            judge=judge,
            store=store,
            window=window,
            step=step,
            settings=settings,
            on_progress=on_progress,
        )
    )


async def arerank(
    query: str,
    passages: Iterable[Passage | dict[str, Any]],
    *,
    strategy: str | None = None,
    top_k: int = DEFAULT_TOP_K,
    top_n: int = DEFAULT_TOP_N,
    judge: Judge | str | None = None,
    store: StorePort | str | None = None,
    window: int = DEFAULT_WINDOW,
    step: int = DEFAULT_STEP,
    settings: HarnessSettings | None = None,
    on_progress: Callable[[int, int], None] | None = None,
) -> RerankResult:
    """Rerank the first ``top_n`` candidates (in retrieval order) and keep the rest below.

    Retrieval order is the candidates' ``rank`` when every candidate has one, else the order
    given. Strategies: ``allpairs`` (one call ranks all, the spec's prompt), ``listwise``
    (windows of ``window`` passages slid up by ``step``), ``pairwise`` (two-passage
    comparisons in both orders, sorted by a tournament that finds the ``top_k`` with far fewer
    comparisons than all pairs) and ``pointwise`` (one score per passage; the natural strategy
    of scoring judges such as ``local:minilm``, and the default for them; other judges default
    to ``allpairs``). A ranking that never validates falls back to retrieval order with
    ``source="fallback"`` and a review item.
    """
    started = time.perf_counter()
    if not query or not query.strip():
        raise InputError("the query is empty")
    if top_k < 1 or top_n < 1:
        raise InputError(f"top_k and top_n must be at least 1, got top_k={top_k}, top_n={top_n}")
    if window < 2 or not 1 <= step < window:
        raise InputError(f"need window >= 2 and 1 <= step < window, got {window} and {step}")
    items = _candidates(passages)
    the_judge = resolve_judge(judge, "rerank")
    strategy = strategy or ("pointwise" if isinstance(the_judge, Scorer) else "allpairs")
    if strategy not in STRATEGIES:
        raise InputError(f"unknown strategy {strategy!r}; choose one of {', '.join(STRATEGIES)}")
    scoring = strategy == "pointwise" and isinstance(the_judge, Scorer)
    runner = ScoringJudge(the_judge) if scoring else None
    harness = Harness(runner or the_judge, resolve_store(store), settings=settings)
    ctx = RunContext(job="rerank", query=query)

    deduped = prepare_passages(_retrieval_order(items), count_tokens=the_judge.count_tokens)
    head, tail = deduped.passages[:top_n], deduped.passages[top_n:]
    events = list(deduped.events)
    if tail:
        events.append(_cut_event(len(deduped.passages), top_n, tail))
    per_call = {"allpairs": len(head), "listwise": min(window, len(head)), "pairwise": 2}.get(
        strategy, len(head) if runner else CHAT_SCORE_BATCH
    )
    fitted = prepare_passages(
        head,
        count_tokens=the_judge.count_tokens,
        max_passage_tokens=harness.judge.passage_token_limit(
            _overhead(harness, strategy), per_call
        ),
    )
    events += fitted.events
    for event in events:
        harness.note(ctx, event.kind, event.detail, passage_ids=event.passage_ids, **event.data)

    run = _Run(harness, ctx, query, fitted.passages, on_progress)
    if strategy == "pairwise":
        await run.pairwise(top_k)
    elif strategy == "listwise":
        await run.listwise(window, step)
    elif strategy == "pointwise":
        await run.pointwise(per_call)
    else:
        await run.allpairs()
    events += run.events
    for event in run.events:
        harness.note(ctx, event.kind, event.detail, passage_ids=event.passage_ids, **event.data)

    ranked = _assemble(run.placed, tail, deduped.duplicates, {p.passage_id: p for p in items})
    texts = {p.passage_id: p.text for p in fitted.passages}
    flags = _flag(ranked, texts, events, harness, ctx) if runner is None else {}
    source, reason = run.verdict()
    head_ids = [p.passage_id for p in fitted.passages]
    metrics = RerankMetrics(
        query=query,
        candidate_count=len(items),
        reranked_count=len(head_ids),
        output_ranking=[r.passage_id for r in ranked],
        scores={r.passage_id: r.relevance_score for r in ranked},
        latency_ms=(time.perf_counter() - started) * 1000,
        judge_calls=run.calls,
        prompt_tokens=run.usage.prompt_tokens,
        completion_tokens=run.usage.completion_tokens,
        inversion_rate=kendall_tau_distance(head_ids, [r.passage_id for r in ranked]),
        justification_flags=flags,
        truncation_events=sum(1 for e in events if e.kind == "truncated"),
        comparisons=run.comparisons if strategy == "pairwise" else None,
        ties=run.ties if strategy == "pairwise" else None,
    )
    harness.note(ctx, "rerank_metrics", f"rerank metrics ({strategy})", **metrics.model_dump())
    return RerankResult(
        query=query,
        strategy=strategy,
        top_k=top_k,
        ranked_passages=ranked,
        source=source,
        reason=reason,
        events=events,
        metrics=metrics,
        review_item_ids=run.review_ids,
        judge_id=the_judge.judge_id,
        prompt_version=run.prompt_version(strategy),
        run_id=ctx.run_id,
        usage=run.usage,
        judge_calls=run.calls,
    )


# ---------------------------------------------------------------------------- strategies


@dataclass
class _Run:
    """The state of one strategy run: what each outcome cost and where each passage landed."""

    harness: Harness
    ctx: RunContext
    query: str
    passages: list[Passage]
    on_progress: Callable[[int, int], None] | None = None
    placed: list[RankedPassage] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    review_ids: list[int] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    calls: int = 0
    sources: list[Source] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)
    comparisons: int = 0
    ties: int = 0

    def record(self, outcome: Outcome[Any]) -> None:
        self.usage = self.usage + outcome.usage
        self.calls += outcome.judge_calls
        self.sources.append(outcome.source)
        if outcome.review_item_id is not None:
            self.review_ids.append(outcome.review_item_id)
        if outcome.reason:
            self.reasons.append(outcome.reason)

    def verdict(self) -> tuple[Source, str | None]:
        if any(r.source == "fallback" for r in self.placed):
            return "fallback", self.reasons[-1] if self.reasons else None
        if self.sources and all(s == "cache" for s in self.sources):
            return "cache", None
        return "judge", None

    def prompt_version(self, strategy: str) -> str:
        return _template(strategy).version

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
        outcome = await self.harness.call(RerankStep(), batch, self.ctx)
        self.record(outcome)
        self.placed = self.place(outcome.value, outcome)
        self._progress(1, 1)

    async def listwise(self, window: int, step: int) -> None:
        """Windows from the bottom of the list to the top, each ranked by the allpairs step,
        so strong passages found low in the list can climb to the top."""
        order: list[RankedPassage] = [
            RankedPassage(rank=0, passage_id=p.passage_id, justification="", source=None)
            for p in self.passages
        ]
        by_id = {p.passage_id: p for p in self.passages}
        starts = window_starts(len(order), window, step)
        for index, start in enumerate(starts):
            chunk = order[start : start + window]
            batch = RerankBatch(self.query, tuple(by_id[r.passage_id] for r in chunk), "listwise")
            outcome = await self.harness.call(
                RerankStep(), batch, self.ctx, batch_id=f"{self.ctx.run_id}-w{index:03d}"
            )
            self.record(outcome)
            order[start : start + window] = self.place(outcome.value, outcome)
            self._progress(index + 1, len(starts))
        self.placed = order

    async def pointwise(self, batch_size: int) -> None:
        batches = [
            ScoreBatch(self.query, tuple(self.passages[i : i + batch_size]))
            for i in range(0, len(self.passages), batch_size)
        ]
        outcomes = await self.harness.map(
            ScoreStep(), batches, self.ctx, on_progress=self.on_progress
        )
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
        which the better retrieval rank wins. Concurrency is bounded by the harness settings."""
        by_id = {p.passage_id: p for p in self.passages}
        position = {pid: i for i, pid in enumerate(by_id)}
        semaphore = asyncio.Semaphore(max(1, self.harness.settings.max_concurrency))
        won: dict[str, str] = {}
        step = PairStep()
        numbers = itertools.count()
        expected = max(1, len(by_id) - 1 + (min(top_k, len(by_id)) - 1) * len(by_id).bit_length())

        async def ask(a: Passage, b: Passage) -> Outcome[Any]:
            batch_id = f"{self.ctx.run_id}-c{next(numbers):05d}"
            async with semaphore:
                outcome = await self.harness.call(
                    step, PairBatch(self.query, a, b), self.ctx, batch_id=batch_id
                )
            self.record(outcome)
            return outcome

        async def better(x: str, y: str) -> str:
            self.comparisons += 1
            first, second = await asyncio.gather(ask(by_id[x], by_id[y]), ask(by_id[y], by_id[x]))
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

        top = await tournament_top_k(list(by_id), top_k, better)
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
        if self.on_progress is not None:
            self.on_progress(min(done, total), total)


# ---------------------------------------------------------------------------- helpers


def _candidates(passages: Iterable[Passage | dict[str, Any]]) -> list[Passage]:
    """Typed candidates; a malformed one is an input error that says which and why."""
    items = []
    for number, p in enumerate(passages, 1):
        try:
            items.append(p if isinstance(p, Passage) else Passage.model_validate(p))
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(map(str, e['loc'])) or 'candidate'}: {e['msg']}" for e in exc.errors()
            )
            raise InputError(f"candidate {number} is not a valid passage: {problems}") from exc
    return items


def _template(strategy: str) -> PromptTemplate:
    """The prompt a strategy's judge calls use (listwise reuses the allpairs prompt)."""
    return {"pairwise": PAIR_TEMPLATE, "pointwise": SCORE_TEMPLATE}.get(strategy, RERANK_TEMPLATE)


def _retrieval_order(items: Sequence[Passage]) -> list[Passage]:
    """By ``rank`` when every candidate has one (stable), else as given."""
    if items and all(p.rank is not None for p in items):
        return sorted(items, key=lambda p: p.rank or 0)
    return list(items)


def _overhead(harness: Harness, strategy: str) -> int:
    """Tokens of the fixed prompt part of one call of ``strategy`` (no passages)."""
    template = _template(strategy)
    return harness.judge.count_tokens(template.system + template.user)


def _cut_event(count: int, top_n: int, tail: Sequence[Passage]) -> Event:
    return Event(
        kind="truncated",
        detail=f"{count} candidates exceed top_n={top_n}; the first {top_n} in retrieval order "
        f"were reranked and the other {len(tail)} keep their retrieval order below them",
        passage_ids=[p.passage_id for p in tail],
        data={"cause": "top_n", "top_n": top_n, "candidates": count},
    )


def _assemble(
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
    twins: dict[str, list[str]] = {}
    for dup, original in duplicates.items():
        twins.setdefault(original, []).append(dup)
    out: list[RankedPassage] = []
    for r in ordered:
        out.append(r)
        for dup in twins.get(r.passage_id, []):
            out.append(r.model_copy(update={"passage_id": dup, "duplicate_of": r.passage_id}))
    if {r.passage_id for r in out} != set(originals):  # a bug here would lose passages
        raise RuntimeError("rerank lost or invented passages while assembling the ranking")
    return [r.model_copy(update={"rank": i}) for i, r in enumerate(out, 1)]


def _flag(
    ranked: Sequence[RankedPassage],
    texts: dict[str, str],
    events: list[Event],
    harness: Harness,
    ctx: RunContext,
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
            harness.note(ctx, event.kind, event.detail, passage_ids=event.passage_ids)
    return flags
