"""The harness: runs any task step against any judge, with the contract every job shares.

For one batch (:meth:`Harness.call`): cache lookup → judge call under a timeout and the judge's
circuit breaker → JSON extraction → the step's schema and semantic validation → on failure a
re-ask that carries the errors → a last attempt at temperature 0 with a stricter format reminder
→ for a step that grades items one by one (tier passages, audit claims), the valid items of the
last reply kept and the rest split in halves, each half asked again, down to one item
(:mod:`evidex.harness._split`; a reply cut off at its token limit is split at once) → for what
fails alone, the step's explicit fallback, marked ``source="fallback"`` with its reason, a
review-queue item, and an audit-log row. Every exchange emits an :class:`AuditRecord`.

For many batches (:meth:`Harness.map`): bounded concurrency, results in input order, progress.
For a whole job (:meth:`Harness.run`, :meth:`Harness.run_many`): see :mod:`evidex.harness.job`.
"""

from __future__ import annotations

import asyncio
import copy
import json
import random
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any, TypeVar

from pydantic import BaseModel

from evidex._text import cut_off as _cut_off
from evidex.errors import AttemptRecord, CircuitOpenError, InputError, JudgeUnavailable
from evidex.harness._exchange import Failed as _Failed
from evidex.harness._exchange import Timing as _Timing
from evidex.harness._exchange import parse_reply as _parse
from evidex.harness._exchange import within as _within
from evidex.harness._fallback import fall_back
from evidex.harness._split import divisible, plan_split
from evidex.harness.cache_keys import CacheKeys
from evidex.harness.collector import collector_tuned_for_runs
from evidex.harness.events import AuditRecord, Hooks
from evidex.harness.fanout import bounded_map
from evidex.harness.job import (
    JobSpec,
    Plan,
    Progress,
    run_many_planned,
    run_planned,
)
from evidex.harness.metrics import metrics
from evidex.harness.outcome import Outcome, RunContext
from evidex.harness.ports import ReviewRequest, StorePort
from evidex.harness.routing import merged_review
from evidex.harness.settings import HarnessSettings
from evidex.harness.sizing import HISTORY, BatchSizer, Signal, replayed, sizer_for
from evidex.harness.tracing import traced_call
from evidex.judging import Judge, JudgeReply, JudgeRequest, Message
from evidex.tasks.base import Divisible, ReplyInvalid, Step, StepRequest

__all__ = ["Harness", "HarnessSettings", "Outcome", "RunContext"]

B = TypeVar("B")
V = TypeVar("V", bound=BaseModel)
D = TypeVar("D")
Out = TypeVar("Out")


class Harness:
    """Runs steps for one judge. Cheap to build: the judge's in-flight limit and breaker live
    on the judge instance (:meth:`Judge.open_gate`), so every harness over it shares them."""

    def __init__(
        self,
        judge: Judge,
        store: StorePort,
        *,
        settings: HarnessSettings | None = None,
        hooks: Hooks | None = None,
    ) -> None:
        self.judge = judge
        self.store = store
        self.settings = settings or HarnessSettings.from_config()
        self.hooks = hooks or Hooks()
        self.hooks.subscribe(store.append_audit, critical=True)
        self.hooks.subscribe(metrics().observe)
        self.gate = judge.open_gate(
            default_limit=self.settings.max_concurrency,
            breaker_threshold=self.settings.breaker_threshold,
            breaker_cooldown_s=self.settings.breaker_cooldown_s,
        )
        self.breaker = self.gate.breaker
        self._keys = CacheKeys(judge)

    def for_judge(self, judge: Judge) -> Harness:
        """This harness over another judge (a cascade's stage): same store, settings, hooks."""
        twin = copy.copy(self)
        twin.judge = judge
        twin._keys = CacheKeys(judge)
        twin.gate = judge.open_gate(
            default_limit=self.settings.max_concurrency,
            breaker_threshold=self.settings.breaker_threshold,
            breaker_cooldown_s=self.settings.breaker_cooldown_s,
        )
        twin.breaker = twin.gate.breaker
        return twin

    # ------------------------------------------------------------------ public API

    async def run(
        self, spec: JobSpec[Any, D, Any, Out], item: Any, *, on_progress: Progress | None = None
    ) -> Out:
        """Run one input of a job: plan (preflight), stages, merge, review routing. Planning is
        CPU work as large as the input, so it runs in a worker thread: a service's event loop
        keeps answering while a large request is planned."""
        with collector_tuned_for_runs(self.settings.tune_gc):
            plan = await asyncio.to_thread(spec.plan, item, self.judge)
            return await run_planned(self, spec, plan, on_progress)

    async def run_many(
        self,
        spec: JobSpec[Any, D, Any, Out],
        items: Iterable[Any],
        *,
        on_progress: Progress | None = None,
    ) -> list[Out]:
        """Run many inputs of a job; results in input order. Every input is planned before the
        first judge call (in a worker thread, as :meth:`run` does), so bad input anywhere stops
        the batch early, naming the input."""
        with collector_tuned_for_runs(self.settings.tune_gc):
            plans = await asyncio.to_thread(self._plan_all, spec, items)
            if not plans:
                raise InputError(f"no inputs given to the {spec.job} job")
            return await run_many_planned(self, spec, plans, on_progress)

    def _plan_all(self, spec: JobSpec[Any, D, Any, Out], items: Iterable[Any]) -> list[Plan[D]]:
        plans: list[Plan[D]] = []
        for index, item in enumerate(items, 1):
            try:
                plans.append(spec.plan(item, self.judge))
            except InputError as exc:
                if exc.where is not None:
                    raise
                raise InputError(str(exc), where=f"input {index}") from exc
        return plans

    def sizer(self, step: Step[Any, Any], ceiling: int) -> BatchSizer:
        """The batch size this judge holds for ``step`` (:mod:`evidex.harness.sizing`), seeded
        from the audit log on first use in the process."""
        version = step.template.version

        def history() -> list[Signal]:
            rows = self.store.batch_outcomes(self.judge.judge_id, step.name, version, HISTORY)
            return replayed(rows)

        return sizer_for(self.judge, step.name, version, history, ceiling)

    def cache_key(self, step: Step[B, V], batch: B) -> str:
        return self._keys.of(step, batch)

    def note(self, ctx: RunContext, kind: str, detail: str, **data: Any) -> None:
        """Record an input event (duplicate removed, truncation...) in the audit log."""
        self.hooks.emit(
            AuditRecord(
                run_id=ctx.run_id,
                job=ctx.job,
                step=kind,
                status="note",
                query_hash=ctx.query_hash,
                judge_id=self.judge.judge_id,
                detail={"detail": detail, **data},
            )
        )

    def review(self, ctx: RunContext, request: ReviewRequest) -> int:
        """Put an item in the review queue and log that it was routed there."""
        item_id = self.store.add_review(request)
        self.hooks.emit(
            AuditRecord(
                run_id=ctx.run_id,
                job=ctx.job,
                step="review",
                status="review",
                query_hash=ctx.query_hash,
                batch_id=request.batch_id,
                judge_id=self.judge.judge_id,
                detail={"review_item_id": item_id, "reason": request.reason},
            )
        )
        return item_id

    async def fallback_review(self, ctx: RunContext, request: ReviewRequest) -> int | None:
        """The review item of a fallback: the input's one fallback item, opened by its first
        step that fell back and holding the attempts of each one after it (audit's extraction
        and grading, rerank's stages, tier's batches), so one input is one item per reason.
        None when the spec says this input's fallback is final (classify at low risk).

        The item is written through at each fallback, so a crash loses none of it, and off the
        event loop: it holds the passages the reviewer reads, and a thousand-passage input that
        falls back batch after batch rewrites it a hundred times. The input's lock keeps its
        batches from opening two items or writing an older state over a newer one."""
        if not ctx.review_fallback:
            return None
        async with ctx.review_lock:
            return await asyncio.to_thread(self._record_fallback, ctx, request)

    def _record_fallback(self, ctx: RunContext, request: ReviewRequest) -> int:
        if ctx.fallback_review is None:
            item_id = self.review(ctx, request)
            ctx.fallback_review = (item_id, request)
            return item_id
        return self.amend_review(ctx, merged_review(ctx.fallback_review[1], request))

    def amend_review(self, ctx: RunContext, request: ReviewRequest) -> int:
        """Replace what the input's fallback item holds (see :meth:`fallback_review`). The
        audit log already has the row of each fallback that names the item."""
        if ctx.fallback_review is None:
            raise RuntimeError("no fallback review item to amend in this run")
        item_id, _ = ctx.fallback_review
        self.store.update_review(item_id, request)
        ctx.fallback_review = (item_id, request)
        return item_id

    async def map(
        self,
        step: Step[B, V],
        batches: Sequence[B],
        ctx: RunContext,
        *,
        on_progress: Callable[[int, int], None] | None = None,
    ) -> list[Outcome[V]]:
        """Run every batch, at most ``settings.max_concurrency`` of this run at once (and never
        more than the judge's own limit, shared with every other run on it); outcomes come back
        in input order."""

        def one(index: int, batch: B) -> Awaitable[Outcome[V]]:
            return self.call(step, batch, ctx, batch_id=f"{ctx.run_id}-b{index:03d}")

        return await bounded_map(batches, self.settings.max_concurrency, one, on_progress)

    @traced_call
    async def call(
        self, step: Step[B, V], batch: B, ctx: RunContext, *, batch_id: str | None = None
    ) -> Outcome[V]:
        """One validated exchange: cache, attempts with re-asks, splitting a batch the judge
        cannot answer whole, then the explicit fallback."""
        return await self._call(step, batch, ctx, batch_id or f"{ctx.run_id}-b000")

    async def _call(
        self,
        step: Step[B, V],
        batch: B,
        ctx: RunContext,
        batch_id: str,
        ladder: int | None = None,
        spent: int = 0,
    ) -> Outcome[V]:
        """:meth:`call` for a batch or a split part of one: ``ladder`` attempts (the step's
        own when None), ``spent`` the attempts its items already took in the batches above."""
        base = self._row_base(step, ctx, batch_id)
        key = self.cache_key(step, batch)
        if self.settings.use_cache:
            cached = self.store.cache_get(key)
            if cached is not None:
                value = step.value_type.model_validate(cached)
                self.hooks.emit(
                    AuditRecord(**base, status="cache", cache_key=key, labels=step.labels(value))
                )
                return Outcome(value=value, source="cache", batch_id=batch_id)
        tried = await self._attempts(step, batch, ctx, base, key, ladder or step.max_attempts)
        if isinstance(tried, Outcome):
            return tried
        split = await self._split(step, batch, ctx, base, tried, spent)
        if split is not None:
            return split
        return await fall_back(self, step, batch, ctx, base, key, tried)

    async def _attempts(
        self,
        step: Step[B, V],
        batch: B,
        ctx: RunContext,
        base: dict[str, Any],
        key: str,
        ladder: int,
    ) -> Outcome[V] | _Failed:
        """Up to ``ladder`` attempts: the request, a re-ask carrying the errors, the last at
        temperature 0 with the strict reminder. A reply cut off at its token limit ends the
        ladder at once when the batch can be split (the same long reply would be cut again)."""
        batch_id = base["batch_id"]
        request = step.request(batch)
        failed = _Failed()
        messages = request.messages
        can_split = divisible(self.settings, step, batch)
        # the batch's size, for a step of items graded one by one (the metrics' batch size)
        items = {"items": len(step.item_ids(batch))} if isinstance(step, Divisible) else {}
        for attempt in range(1, ladder + 1):
            final = attempt == ladder and attempt > 1
            temperature = 0.0 if final else self.settings.temperature
            attempts = failed.attempts
            if attempts and attempts[-1].raw_output is not None:
                messages = self._reask(step, request, attempts[-1], final=final)
            elif final:
                messages = self._strict(step, request, request.messages)
            judge_request = JudgeRequest(
                job=step.job,
                step=step.name,
                messages=messages,
                schema=request.schema,
                payload=request.payload,
                temperature=temperature,
                max_tokens=request.max_tokens,
                attempt=attempt,
            )
            timing = _Timing()
            try:
                failed.calls += 1
                reply = await self._send(judge_request, timing)
            except JudgeUnavailable as exc:
                # an open breaker refused the call before sending: no call, no waiting more
                refused = isinstance(exc, CircuitOpenError)
                if refused:
                    failed.calls -= 1
                failed.reason = f"judge unavailable: {exc}"
                attempts.append(
                    AttemptRecord(attempt=attempt, raw_output=None, errors=(failed.reason,))
                )
                self.hooks.emit(
                    AuditRecord(
                        **base,
                        status="error",
                        attempt=attempt,
                        temperature=None if refused else temperature,
                        errors=[failed.reason],
                        latency_ms=timing.latency_ms,
                        cache_key=key,
                        detail=timing.detail(),
                    )
                )
                if refused:
                    break
                if attempt < ladder:
                    await asyncio.sleep(self._wait_before_retry(attempt, exc))
                continue

            failed.usage = failed.usage + reply.usage
            for text in reply.notes:
                self.note(ctx, "judge.note", text, batch_id=batch_id, endpoint=reply.endpoint)
            row = dict(
                base,
                attempt=attempt,
                temperature=temperature,
                raw_output=reply.text,
                latency_ms=timing.latency_ms,
                detail=timing.detail(reply.endpoint) | items,
                prompt_tokens=reply.usage.prompt_tokens,
                completion_tokens=reply.usage.completion_tokens,
                model_version=reply.model_version or base["model_version"],
                cache_key=key,
            )
            try:
                value = step.validate(batch, _parse(reply.text))
            except ReplyInvalid as exc:
                failed.reason = "reply failed validation: " + "; ".join(exc.errors)
                failed.cut_off = reply.truncated or _cut_off(reply.text)
                attempts.append(
                    AttemptRecord(
                        attempt=attempt,
                        raw_output=reply.text,
                        errors=exc.errors,
                        prompt_tokens=reply.usage.prompt_tokens,
                        completion_tokens=reply.usage.completion_tokens,
                    )
                )
                self.hooks.emit(AuditRecord(**row, status="invalid", errors=list(exc.errors)))
                if failed.cut_off and can_split:
                    break
                continue

            attempts.append(AttemptRecord(attempt=attempt, raw_output=reply.text))
            self.hooks.emit(AuditRecord(**row, status="ok", labels=step.labels(value)))
            if self.settings.use_cache:
                # queued: committed with the run's audit rows by the flush before it returns
                self.store.cache_put(key, step.job, value.model_dump(mode="json"))
            return Outcome(
                value=value,
                source="judge",
                batch_id=batch_id,
                attempts=tuple(attempts),
                usage=failed.usage,
                judge_calls=failed.calls,
            )
        return failed

    async def _split(
        self,
        step: Step[B, V],
        batch: B,
        ctx: RunContext,
        base: dict[str, Any],
        failed: _Failed,
        spent: int,
    ) -> Outcome[V] | None:
        """Ask the items of a failed batch again in smaller parts (:mod:`evidex.harness._split`),
        each part through :meth:`_call`, so that a part failing in turn is split again."""
        split = plan_split(self.settings, step, batch, failed, spent)
        if split is None:
            return None
        batch_id = base["batch_id"]
        self.hooks.emit(
            AuditRecord(
                **base,
                status="split",
                attempt=len(failed.attempts),
                errors=[failed.reason],
                detail=split.detail(),
            )
        )
        # one part after the other: a judge that could not answer the batch is not sent its
        # halves at once, and the items that fall back reach the review item in input order
        outcomes = []
        for n, (part, ladder) in enumerate(zip(split.parts, split.ladders, strict=True), 1):
            outcomes.append(
                await self._call(step, part, ctx, f"{batch_id}.{n}", ladder, split.spent)
            )
        return split.joined(batch_id, outcomes)

    # ------------------------------------------------------------------ internals

    def _row_base(self, step: Step[Any, Any], ctx: RunContext, batch_id: str) -> dict[str, Any]:
        return {
            "run_id": ctx.run_id,
            "job": step.job,
            "step": step.name,
            "query_hash": ctx.query_hash,
            "batch_id": batch_id,
            "judge_id": self.judge.judge_id,
            "model_version": self.judge.model_version,
            "prompt_version": step.template.version,
        }

    def _wait_before_retry(self, attempt: int, exc: JudgeUnavailable) -> float:
        """Exponential backoff with jitter (between half and all of it, so runs that failed
        together do not retry together), or what the server asked for (``Retry-After``)."""
        backoff: float = self.settings.backoff_s * 2.0 ** (attempt - 1)
        if exc.retry_after_s is None:
            return backoff * (0.5 + random.random() / 2)
        return max(backoff, min(exc.retry_after_s, self.settings.max_retry_after_s))

    async def _send(self, request: JudgeRequest, timing: _Timing) -> JudgeReply:
        """One call through the judge's gate: wait for an in-flight slot (timed apart), then
        the breaker, then the call under its timeout (the wait does not count against it)."""
        async with self.gate.slot() as waited:
            timing.queue_s = waited
            if not self.breaker.allow():
                raise CircuitOpenError(
                    f"circuit breaker open for {self.judge.judge_id} after "
                    f"{self.breaker.failures} consecutive failures"
                )
            # None: the judge watches each call's progress itself (a streamed reply)
            timeout = self.settings.timeout_s or self.judge.default_timeout_s
            started = time.perf_counter()
            try:
                call = self.judge.complete(request)
                reply = await (call if timeout is None else _within(timeout, call))
            except asyncio.TimeoutError as exc:
                self.breaker.record_failure()
                raise JudgeUnavailable(
                    f"{self.judge.judge_id} did not answer within {timeout:g}s"
                ) from exc
            except JudgeUnavailable:
                self.breaker.record_failure()
                raise
            finally:
                timing.call_s = time.perf_counter() - started
            self.breaker.record_success()
            return reply

    def _reask(
        self, step: Step[Any, Any], request: StepRequest, last: AttemptRecord, *, final: bool
    ) -> tuple[Message, ...]:
        errors = "\n".join(f"- {e}" for e in last.errors)
        note = step.template.reask.replace("[ERRORS]", errors)
        messages = (
            *request.messages,
            Message("assistant", last.raw_output or ""),
            Message("user", note),
        )
        return self._strict(step, request, messages) if final else messages

    @staticmethod
    def _strict(
        step: Step[Any, Any], request: StepRequest, messages: tuple[Message, ...]
    ) -> tuple[Message, ...]:
        reminder = step.template.strict.replace("[SCHEMA]", json.dumps(request.schema))
        return (*messages, Message("user", reminder))
