"""A job is a spec that the harness runs.

A spec says three things about its job and nothing about how calls are made:

- :meth:`JobSpec.plan`: preflight one input into a :class:`Plan` (checks, duplicates, budget
  fitting with the judge's tokenizer); raises :class:`~evidex.errors.InputError` before any
  judge is called;
- :meth:`JobSpec.execute`: its stages, each a step over batches run through :class:`JobRun`
  (``run.map`` or ``run.call``), and how their outcomes merge into the job's result;
- :meth:`JobSpec.reviews` and :meth:`JobSpec.finish`: which review requests the result raises,
  and how the routed items are put on it.

:meth:`Harness.run` and :meth:`Harness.run_many` do the rest for every job: the run context,
the audit-log notes of preflight events, bounded fan-out, progress, writing review items, and
adding up calls and usage. The judge's in-flight limit, breaker, timeouts, retries and
fallbacks are the harness's per call (:mod:`evidex.harness.runner`), so a job never writes
its own concurrency loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from pydantic import BaseModel, Field

from evidex._screening import flagged_stretches
from evidex.harness.fanout import bounded_map, chunked_map
from evidex.harness.frontier_pool import FrontierPool, run_pooled
from evidex.harness.outcome import Outcome, RunContext
from evidex.harness.ports import ReviewRequest
from evidex.harness.sizing import BatchSizer, Sized
from evidex.harness.tracing import job_span
from evidex.pricing import estimate_cost
from evidex.types import Event, Passage, Source, Usage

if TYPE_CHECKING:
    from evidex.harness.runner import Harness
    from evidex.judging import Judge
    from evidex.tasks.base import Step

__all__ = [
    "JobResult",
    "JobRun",
    "JobSpec",
    "MergedIsResult",
    "Plan",
    "Progress",
    "Routed",
    "run_planned",
    "verdict",
    "with_passages",
]

Progress = Callable[[int, int], None]
"""``on_progress(done, total)``: called as a job (or a batch of jobs) advances."""

In = TypeVar("In")
In_contra = TypeVar("In_contra", contravariant=True)
D = TypeVar("D")
M = TypeVar("M")
Out = TypeVar("Out")
Out_co = TypeVar("Out_co", covariant=True)
B = TypeVar("B")
V = TypeVar("V", bound=BaseModel)
R = TypeVar("R", bound=BaseModel)
Item = TypeVar("Item")


class JobResult(BaseModel):
    """What every job's result says of how it was made: what happened to the input, which
    judge and prompt version judged it, the run id that ties its audit-log rows together,
    and what it cost."""

    events: list[Event] = Field(default_factory=list)
    judge_id: str
    prompt_version: str
    run_id: str
    usage: Usage = Field(default_factory=Usage)
    """Tokens over every attempt (re-asks and replies that failed validation included)."""
    judge_calls: int = 0
    """Requests sent to the judge, every attempt counted (cache hits send none)."""
    attempts: int = 0
    """Attempts over every exchange: the judge calls plus those an open circuit breaker
    refused before sending."""
    cost: float | None = None
    """``usage`` priced by the configured table (:mod:`evidex.pricing`), in its currency;
    ``None`` when the table does not name the judge (never a guessed price)."""


@dataclass(frozen=True)
class Plan(Generic[D]):
    """One preflighted input: what the audit log files it under, what preflight did, and the
    job's own prepared data."""

    query: str
    data: D
    risk: str = "low"
    events: tuple[Event, ...] = ()
    review_fallback: bool = True
    """Whether a fallback also opens a review item (classify at low risk: no)."""
    id: str | None = None


@dataclass(frozen=True)
class Routed:
    """A review request the result raised, and the queue item it became."""

    item_id: int
    request: ReviewRequest
    label: str | None = None


class JobSpec(Protocol[In_contra, D, M, Out_co]):
    """What a job tells the harness; see the module docstring."""

    @property
    def job(self) -> str: ...

    def plan(self, item: In_contra, judge: Judge) -> Plan[D]: ...

    async def execute(self, plan: Plan[D], run: JobRun) -> M:
        """The stages, merged: the result (or what it is made from) before routing."""
        ...

    def reviews(self, plan: Plan[D], merged: M, run: JobRun) -> Sequence[ReviewRequest]:
        """The review requests the merged result raises (the job's routing rules)."""
        ...

    def finish(self, plan: Plan[D], merged: M, run: JobRun, routed: Sequence[Routed]) -> Out_co:
        """The result, with its routed review items and the run's totals on it."""
        ...


class MergedIsResult:
    """A spec whose merged stages already are its result: finishing only puts the routed
    review items and the run's totals on it."""

    def finish(self, plan: Plan[Any], merged: R, run: JobRun, routed: Sequence[Routed]) -> R:
        return merged.model_copy(update=run.totals(routed))


@dataclass
class JobRun:
    """One job invocation in progress: every call goes through here, so fan-out, progress and
    the totals (calls, usage, fallbacks' review items) are kept in one place."""

    harness: Harness
    ctx: RunContext
    on_progress: Progress | None = None
    outcomes: list[Outcome[Any]] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    """Events raised while the job ran (warnings of replies, ...), already in the audit log."""
    stages: list[JobRun] = field(default_factory=list)
    """Runs of this job over other judges (a cascade's stages, see :meth:`stage`)."""
    _amended: ReviewRequest | None = field(default=None, repr=False)
    """The fallback item as the whole job completed it, until it is written."""

    @property
    def judge(self) -> Judge:
        return self.harness.judge

    def stage(self, judge: Judge) -> JobRun:
        """A run of this job over another judge, for a cascade's stage: the same context,
        store, settings and hooks (its audit rows name its judge), its calls counted in this
        run's totals and its cost at its own judge's price."""
        run = JobRun(self.harness.for_judge(judge), self.ctx, self.on_progress)
        self.stages.append(run)
        return run

    def _every(self) -> list[Outcome[Any]]:
        return [*self.outcomes, *(o for s in self.stages for o in s._every())]

    def note(self, event: Event) -> None:
        """Keep an event for the result and write it to the audit log."""
        self.events.append(event)
        self.log(event)

    def log(self, event: Event) -> None:
        """Write an event to the audit log only (preflight events are on the plan already)."""
        self.harness.note(
            self.ctx, event.kind, event.detail, passage_ids=event.passage_ids, **event.data
        )

    def review(self, request: ReviewRequest) -> int:
        return self.harness.review(self.ctx, request)

    def review_request(
        self,
        reason: str,
        payload: BaseModel | dict[str, Any],
        passage_ids: Sequence[str] = (),
        *,
        passages: Sequence[Passage] = (),
    ) -> ReviewRequest:
        """A review request of this run (job, run id and risk filled in). ``payload``: the
        job's typed review payload (the fields it was given are stored); ``passages``: the
        passages the reviewer reads, stored in full in the payload (see
        :func:`with_passages`)."""
        return ReviewRequest(
            job=self.ctx.job,
            reason=reason,
            run_id=self.ctx.run_id,
            risk=self.ctx.risk,
            passage_ids=list(passage_ids),
            payload=with_passages(_stored(payload), passages, passage_ids, self.ctx.flagged),
        )

    def amend_fallback_review(self, payload: BaseModel | dict[str, Any]) -> None:
        """Complete the input's fallback item with what only the whole job knows (audit: the
        answer text and every claim graded as the result grades it); its fields replace the
        item's. Nothing happens when no fallback opened an item."""
        held = self.ctx.fallback_review
        if held is None:
            return
        _, request = held
        update = {**request.payload, **_stored(payload)}
        self._amended = request.model_copy(update={"payload": update})

    def write_amended_fallback(self) -> None:
        """Store what :meth:`amend_fallback_review` completed (from a worker thread: the item
        holds passages, answer and claims)."""
        if self._amended is not None:
            self.harness.amend_review(self.ctx, self._amended)
            self._amended = None

    def provenance(self, prompt_version: str) -> dict[str, Any]:
        """Who judged a result: the judge, the prompt version and this run's id."""
        return {
            "judge_id": self.judge.judge_id,
            "prompt_version": prompt_version,
            "run_id": self.ctx.run_id,
        }

    def totals(self, routed: Sequence[Routed] = ()) -> dict[str, Any]:
        """The run's totals for a result: its review items (fallbacks' and routed), and what
        the run spent (:meth:`spend`)."""
        return {
            "review_item_ids": self.fallback_review_ids + [r.item_id for r in routed],
            **self.spend(),
        }

    def spend(self) -> dict[str, Any]:
        """Calls, attempts and usage over every attempt, and their estimated cost."""
        return {
            "usage": self.usage,
            "judge_calls": self.calls,
            "attempts": self.attempts,
            "cost": self.cost,
        }

    async def call(self, step: Step[B, V], batch: B, *, batch_id: str | None = None) -> Outcome[V]:
        """One validated exchange (see :meth:`Harness.call`), counted in the run's totals."""
        outcome = await self.harness.call(step, batch, self.ctx, batch_id=batch_id)
        self._keep([outcome])
        return outcome

    async def map(
        self, step: Step[B, V], batches: Sequence[B], *, progress: bool = True
    ) -> list[Outcome[V]]:
        """Every batch through the step, outcomes in input order (see :meth:`Harness.map`)."""
        outcomes = await self.harness.map(
            step, batches, self.ctx, on_progress=self.on_progress if progress else None
        )
        self._keep(outcomes)
        return outcomes

    async def map_sized(
        self,
        step: Step[B, V],
        items: Sequence[Item],
        make: Callable[[Sequence[Item]], B],
        ceiling: int,
        *,
        progress: bool = True,
    ) -> list[Outcome[V]]:
        """Batches of ``items`` (``make`` builds one from a slice) cut as they are sent, each of
        the size this judge holds now for the step (:mod:`evidex.harness.sizing`), never more
        than ``ceiling``; outcomes in input order, each telling the size how its replies went.
        A run whose batches were smaller than asked says so in an event."""
        sized = self.sized(step, ceiling)

        async def one(index: int, chunk: Sequence[Item]) -> Outcome[V]:
            sized.sent(len(chunk))
            batch_id = f"{self.ctx.run_id}-b{index:03d}"
            outcome = await self.harness.call(step, make(chunk), self.ctx, batch_id=batch_id)
            sized.observe(outcome)
            return outcome

        outcomes = await chunked_map(
            items,
            self.harness.settings.max_concurrency,
            sized.next,
            one,
            self.on_progress if progress else None,
        )
        self._keep(outcomes)
        self.note_sizes(sized, len(items))
        return outcomes

    def sized(self, step: Step[Any, Any], ceiling: int) -> Sized:
        """The batch sizes this judge holds for ``step`` in this run, for a stage that cuts its
        own batches one after another (rerank's listwise windows): ask :meth:`Sized.next`
        before each, :meth:`Sized.sent` and :meth:`Sized.observe` after, then
        :meth:`note_sizes`."""
        adapt = self.harness.settings.adapt_batch_size
        sizer = self.harness.sizer(step, ceiling) if adapt else BatchSizer()
        return Sized(sizer, ceiling, adapt)

    def note_sizes(self, sized: Sized, items: int) -> None:
        """Note on the result (and in the audit log) that batches were smaller than asked."""
        event = sized.event(self.judge.judge_id, items)
        if event is not None:
            self.note(event)

    def _keep(self, outcomes: Sequence[Outcome[Any]]) -> None:
        """Count the outcomes in the run's totals, and keep the events the harness put on them
        (a batch split) for the result: the audit log has them already."""
        self.outcomes.extend(outcomes)
        for outcome in outcomes:
            self.events.extend(outcome.events)

    def note_warnings(self, outcomes: Sequence[Outcome[Any]]) -> None:
        """Keep and log the warnings the replies' values carry (a reply's passages that looked
        like instructions, ...), so every job forwards them the same way."""
        for outcome in outcomes:
            for warning in getattr(outcome.value, "warnings", ()):
                self.note(warning)

    def progress(self, done: int, total: int) -> None:
        if self.on_progress is not None:
            self.on_progress(min(done, total), total)

    @property
    def usage(self) -> Usage:
        """Tokens over every attempt, the stages' included."""
        total = self._own_usage()
        for stage in self.stages:
            total = total + stage.usage
        return total

    def _own_usage(self) -> Usage:
        """Tokens of this run's own attempts: what its judge's price applies to."""
        total = Usage()
        for outcome in self.outcomes:
            total = total + outcome.usage
        return total

    @property
    def calls(self) -> int:
        return sum(o.judge_calls for o in self._every())

    @property
    def attempts(self) -> int:
        return sum(len(o.attempts) for o in self._every())

    @property
    def cost(self) -> float | None:
        """The run's usage at the configured price of its judge, plus each stage's at its
        own judge's price; ``None`` when no judge of the run is priced."""
        own = self._own_usage()
        priced = [estimate_cost(self.harness.settings.prices, self.judge.judge_id, own)]
        priced += [s.cost for s in self.stages]
        known = [c for c in priced if c is not None]
        return sum(known) if known else None

    @property
    def fallback_review_ids(self) -> list[int]:
        """The review items the run's fallbacks opened: one per input, however many of its
        steps fell back."""
        found = [o.review_item_id for o in self._every() if o.review_item_id is not None]
        return list(dict.fromkeys(found))

    @property
    def fallbacks(self) -> list[Outcome[Any]]:
        return [o for o in self._every() if o.source == "fallback"]

    @property
    def source(self) -> Source:
        """Where the run's result came from so far (see :func:`verdict`)."""
        return verdict(self._every())


def _stored(payload: BaseModel | dict[str, Any]) -> dict[str, Any]:
    """A payload as the queue stores it: a model's fields that were given, as JSON."""
    if isinstance(payload, BaseModel):
        return payload.model_dump(mode="json", exclude_unset=True)
    return payload


def with_passages(
    payload: dict[str, Any],
    passages: Sequence[Passage],
    passage_ids: Sequence[str] = (),
    flagged: Mapping[str, Sequence[Mapping[str, object]]] | None = None,
) -> dict[str, Any]:
    """``payload`` with the review item's passages in full under ``"passages"`` (id, text,
    title, url), so a reviewer reads what the judge read; those of ``passage_ids`` only, when
    given. ``flagged``: what the screen cut from each passage (``"flagged"`` on the passages
    it names), so the reviewer also reads what the judge was not shown. A payload that already
    has them is returned as it is."""
    if "passages" in payload or not passages:
        return payload
    wanted = set(passage_ids)
    shown = [p for p in passages if not wanted or p.passage_id in wanted]
    flagged = flagged or {}
    return {
        **payload,
        "passages": [
            {
                "passage_id": p.passage_id,
                "text": p.text,
                "title": p.title,
                "url": p.url,
                **({"flagged": list(flagged[p.passage_id])} if p.passage_id in flagged else {}),
            }
            for p in shown
        ],
    }


def verdict(outcomes: Sequence[Outcome[Any]]) -> Source:
    """Where a whole result came from: ``fallback`` if any part fell back, ``cache`` when every
    judgment was cached, else ``judge``."""
    if any(o.source == "fallback" for o in outcomes):
        return "fallback"
    if outcomes and all(o.source == "cache" for o in outcomes):
        return "cache"
    return "judge"


async def run_planned(
    harness: Harness,
    spec: JobSpec[Any, D, Any, Out],
    plan: Plan[D],
    on_progress: Progress | None,
    pool: tuple[FrontierPool, int] | None = None,
) -> Out:
    """Execute one planned input: context, notes, stages, routing, totals."""
    ctx = RunContext(
        job=spec.job,
        query=plan.query,
        risk=plan.risk,
        review_fallback=plan.review_fallback,
        frontier_pool=pool,
        flagged=flagged_stretches(plan.events),
    )
    run = JobRun(harness, ctx, on_progress)
    with job_span(run, plan):
        for event in plan.events:
            run.log(event)
        merged = await spec.execute(plan, run)
        requests = spec.reviews(plan, merged, run)
        # review items hold the passages a reviewer reads: written off the event loop
        routed = await asyncio.to_thread(_route_reviews, run, requests)
        result = spec.finish(plan, merged, run, routed)
        # the rows of a returned result are committed: a crash after this loses none of them
        await asyncio.to_thread(harness.store.flush)
    return result


def _route_reviews(run: JobRun, requests: Sequence[ReviewRequest]) -> list[Routed]:
    """Write a run's amended fallback item and its routed review items, in that order."""
    run.write_amended_fallback()
    return [Routed(run.review(r), r, r.payload.get("label")) for r in requests]


async def run_many_planned(
    harness: Harness,
    spec: JobSpec[Any, D, Any, Out],
    plans: Sequence[Plan[D]],
    on_progress: Progress | None,
) -> list[Out]:
    """Execute many planned inputs, at most ``settings.max_concurrency`` at once; results in
    input order, progress counted in inputs. Under a cascade's frontier rule, for a job that
    shares it (:attr:`pools_frontier`), the inputs run together share one budget
    (:func:`~evidex.harness.frontier_pool.run_pooled`)."""
    limit = harness.settings.max_concurrency
    staging = harness.judge.staging() if getattr(spec, "pools_frontier", False) else None
    rule = staging.frontier() if staging is not None else None
    if rule is not None:
        return await run_pooled(
            plans, on_progress, rule, max(1, limit), partial(run_planned, harness, spec)
        )

    def one(_: int, plan: Plan[D]) -> Awaitable[Out]:
        return run_planned(harness, spec, plan, None)

    return await bounded_map(plans, limit, one, on_progress)
