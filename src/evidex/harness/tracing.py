"""OpenTelemetry spans for every job run, written once where a job runs.

Three levels, nested across the run's asyncio tasks (a span is the current one in the task
that runs its part, and each batch's task starts from the job's context)::

    evidex.job tier                  one job input (run_planned): job, run id, risk, totals
    └── evidex.step tier             one batch of one step (Harness.call): batch id, prompt
        │                            version, status (judge/cache/fallback), cache hit
        ├── chat gpt-4o-mini         one attempt sent to the judge (GenAI conventions:
        └── chat gpt-4o-mini         gen_ai.*), re-ask and retry as attributes ("score
                                     minilm" for a scoring model)

Re-asks, fallbacks, an open circuit breaker, input notes and review routing are events on the
span that was current. The attempt spans come from the harness's :class:`AuditRecord` stream
(the hook bus the audit log and metrics read), so the runner needs no tracing code inside its
attempt loop; each one ends when its record is emitted and starts ``latency_ms`` earlier.

The tracer is OpenTelemetry's global one (``trace.get_tracer("evidex", __version__)``), as a
library's should be: with no SDK configured every span is a no-op, and without
``opentelemetry-api`` (the ``otel`` extra) nothing is imported or recorded at all.
"""

from __future__ import annotations

import contextlib
import functools
import weakref
from collections.abc import Awaitable, Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar, cast

from evidex._version import __version__
from evidex.harness.events import AuditRecord, Hooks
from evidex.harness.outcome import Outcome, RunContext

if TYPE_CHECKING:
    from opentelemetry.trace import Span, Tracer

    from evidex.harness.job import JobRun, Plan
    from evidex.harness.runner import Harness
    from evidex.tasks.base import Step

__all__ = ["OPERATION", "SCORE", "job_span", "model_of", "traced_call"]

OPERATION = "chat"
"""``gen_ai.operation.name`` of an attempt sent to a chat model (``openai:``, ``local:qwen``)."""
SCORE = "score"
"""... and of one answered natively by a scoring model (``local:minilm``: an encoder that
reads the typed payload, not chat messages; not a GenAI well-known value, so named plainly)."""

F = TypeVar("F", bound=Callable[..., Awaitable[Any]])

_UNSET: Any = object()
_trace_api: Any = _UNSET
"""``opentelemetry.trace``, imported on first use; None without the ``otel`` extra."""
_tracer: Any = None
_watched: weakref.WeakSet[Hooks] = weakref.WeakSet()


@dataclass
class _Batch:
    """What the attempt spans of one batch need to know of the attempts before them."""

    span: Span
    judge_id: str
    operation: str
    last_status: str = ""
    last_errors: list[str] = field(default_factory=list)


_BATCH: ContextVar[_Batch | None] = ContextVar("evidex_batch_span", default=None)
_RUN_TRACER: ContextVar[Any] = ContextVar("evidex_run_tracer", default=_UNSET)
"""The tracer :func:`job_span` found for the job input that is running (None: no SDK)."""


def _get_tracer() -> Tracer | None:
    """The global tracer, or None when ``opentelemetry-api`` is not installed (looked up
    once: a missing extra costs one failed import per process) or no SDK is configured yet.

    Without an SDK the global provider is the API's proxy and every span a no-op; starting
    and entering them anyway cost a twentieth of a judge call's CPU at high concurrency. The
    provider is asked once per job input (:func:`job_span`) and its answer holds for the
    input's steps, so an SDK configured later is used from the next input on."""
    global _tracer, _trace_api
    if _trace_api is _UNSET:
        try:
            from opentelemetry import trace
        except ImportError:
            _trace_api = None
        else:
            _trace_api = trace
            _tracer = trace.get_tracer("evidex", __version__)
    if _trace_api is None or isinstance(
        _trace_api.get_tracer_provider(), _trace_api.ProxyTracerProvider
    ):
        return None
    return cast("Tracer", _tracer)


def _watch(hooks: Hooks) -> None:
    """Subscribe the attempt spans to a hook bus, once per bus."""
    if hooks not in _watched:
        _watched.add(hooks)
        hooks.subscribe(_observe)


def model_of(judge_id: str) -> tuple[str, str]:
    """``gen_ai.system`` and ``gen_ai.request.model`` of a judge spec: ``openai:gpt-4o-mini``
    → ``("openai", "gpt-4o-mini")``; a spec without a prefix is its own system and model."""
    system, _, model = judge_id.partition("?")[0].partition(":")
    return system, model or system


@contextlib.contextmanager
def job_span(run: JobRun, plan: Plan[Any]) -> Iterator[None]:
    """The span of one job input, current while it runs; its totals are set on exit."""
    tracer = _get_tracer()
    token = _RUN_TRACER.set(tracer)
    try:
        if tracer is None:
            yield
        else:
            with _job_span(tracer, run, plan):
                yield
    finally:
        _RUN_TRACER.reset(token)


@contextlib.contextmanager
def _job_span(tracer: Tracer, run: JobRun, plan: Plan[Any]) -> Iterator[None]:
    ctx, judge_id = run.ctx, run.judge.judge_id
    system, model = model_of(judge_id)
    attributes: dict[str, Any] = {
        "evidex.job": ctx.job,
        "evidex.run_id": ctx.run_id,
        "evidex.risk": ctx.risk,
        "evidex.query_hash": ctx.query_hash,
        "evidex.judge_id": judge_id,
        "gen_ai.system": system,
        "gen_ai.request.model": model,
    }
    if plan.id is not None:
        attributes["evidex.input_id"] = plan.id
    _watch(run.harness.hooks)
    with tracer.start_as_current_span(f"evidex.job {ctx.job}", attributes=attributes) as span:
        yield
        if span.is_recording():
            _set_totals(span, run)


def _set_totals(span: Span, run: JobRun) -> None:
    usage = run.usage
    span.set_attributes(
        {
            "evidex.status": run.source,
            "evidex.batches": len(run.outcomes),
            "evidex.judge_calls": run.calls,
            "evidex.attempts": run.attempts,
            "evidex.fallbacks": len(run.fallbacks),
            "gen_ai.usage.input_tokens": usage.prompt_tokens,
            "gen_ai.usage.output_tokens": usage.completion_tokens,
        }
    )
    cost = run.cost
    if cost is not None:
        span.set_attribute("evidex.cost", cost)


def traced_call(fn: F) -> F:
    """Wrap :meth:`Harness.call` in the span of its batch (see the module docstring). Without
    a tracer the call is returned as it is: no span, and no coroutine frame of ours that every
    resumption of the call would pass through."""

    @functools.wraps(fn)
    def call(
        harness: Harness,
        step: Step[Any, Any],
        batch: Any,
        ctx: RunContext,
        *,
        batch_id: str | None = None,
    ) -> Awaitable[Outcome[Any]]:
        tracer = _RUN_TRACER.get()
        if tracer is _UNSET:  # called outside a job input (a test, a direct caller)
            tracer = _get_tracer()
        if tracer is None:
            return cast("Awaitable[Outcome[Any]]", fn(harness, step, batch, ctx, batch_id=batch_id))
        return _traced(tracer, fn, harness, step, batch, ctx, batch_id)

    return cast(F, call)


async def _traced(
    tracer: Tracer,
    fn: Callable[..., Awaitable[Any]],
    harness: Harness,
    step: Step[Any, Any],
    batch: Any,
    ctx: RunContext,
    batch_id: str | None,
) -> Outcome[Any]:
    batch_id = batch_id or f"{ctx.run_id}-b000"  # the runner's default, named for the span
    judge_id = harness.judge.judge_id
    attributes = {
        "evidex.job": step.job,
        "evidex.step": step.name,
        "evidex.batch_id": batch_id,
        "evidex.run_id": ctx.run_id,
        "evidex.prompt_version": step.template.version,
        "evidex.judge_id": judge_id,
        "gen_ai.request.model": model_of(judge_id)[1],
    }
    _watch(harness.hooks)
    with tracer.start_as_current_span(f"evidex.step {step.name}", attributes=attributes) as span:
        operation = SCORE if getattr(harness.judge, "native_payloads", ()) else OPERATION
        token = _BATCH.set(_Batch(span, judge_id, operation) if span.is_recording() else None)
        try:
            outcome = cast("Outcome[Any]", await fn(harness, step, batch, ctx, batch_id=batch_id))
        finally:
            _BATCH.reset(token)
        if span.is_recording():
            _set_outcome(span, outcome)
        return outcome


def _set_outcome(span: Span, outcome: Outcome[Any]) -> None:
    span.set_attributes(
        {
            "evidex.status": outcome.source,
            "evidex.cache_hit": outcome.source == "cache",
            "evidex.attempts": len(outcome.attempts),
            "evidex.judge_calls": outcome.judge_calls,
            "gen_ai.usage.input_tokens": outcome.usage.prompt_tokens,
            "gen_ai.usage.output_tokens": outcome.usage.completion_tokens,
        }
    )
    if outcome.reason is not None:
        span.set_attribute("evidex.reason", outcome.reason)
    if outcome.review_item_id is not None:
        span.set_attribute("evidex.review_item_id", outcome.review_item_id)


def _observe(record: AuditRecord) -> None:
    """Turn one audit record into an attempt span or an event on the current span."""
    batch = _BATCH.get()
    if record.status in ("ok", "invalid", "error") and record.attempt and batch is not None:
        if record.latency_ms is None:  # refused by an open breaker: nothing was sent
            batch.span.add_event(
                "evidex.circuit_open", {"evidex.attempt": record.attempt, **_errors(record)}
            )
        else:
            _attempt_span(batch, record)
        batch.last_status, batch.last_errors = record.status, list(record.errors)
        return
    from opentelemetry import trace

    span = batch.span if batch is not None else trace.get_current_span()
    if not span.is_recording():
        return
    if record.status == "fallback":
        span.add_event(
            "evidex.fallback",
            {
                "evidex.attempts": record.attempt,
                "evidex.kept": len(record.detail.get("kept") or ()),
                **_review_item(record),
                **_errors(record),
            },
        )
    elif record.status == "split":
        span.add_event(
            "evidex.split",
            {
                "evidex.attempts": record.attempt,
                "evidex.parts": len(record.detail.get("parts") or ()),
                "evidex.kept": len(record.detail.get("kept") or ()),
                **_errors(record),
            },
        )
    elif record.status == "note":
        span.add_event(
            "evidex.note",
            {"evidex.kind": record.step, "evidex.detail": str(record.detail.get("detail", ""))},
        )
    elif record.status == "review":
        span.add_event(
            "evidex.review",
            {"evidex.reason": str(record.detail.get("reason", "")), **_review_item(record)},
        )


def _attempt_span(batch: _Batch, record: AuditRecord) -> None:
    from opentelemetry import trace

    tracer = _get_tracer()
    if tracer is None:  # pragma: no cover - a batch span exists only when the tracer does
        return
    system, model = model_of(batch.judge_id)
    end = int(record.time.timestamp() * 1e9)
    start = end - int((record.latency_ms or 0.0) * 1e6)
    reask = batch.last_status == "invalid"
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": batch.operation,
        "gen_ai.system": system,
        "gen_ai.provider.name": system,
        "gen_ai.request.model": model,
        "gen_ai.usage.input_tokens": record.prompt_tokens,
        "gen_ai.usage.output_tokens": record.completion_tokens,
        "evidex.job": record.job,
        "evidex.step": record.step,
        "evidex.batch_id": record.batch_id,
        "evidex.prompt_version": record.prompt_version,
        "evidex.attempt": record.attempt,
        "evidex.status": record.status,
        "evidex.reask": reask,
        "evidex.retry": record.attempt > 1 and not reask,
    }
    if record.temperature is not None:
        attributes["gen_ai.request.temperature"] = record.temperature
    if record.model_version:
        attributes["gen_ai.response.model"] = record.model_version
    if "queue_ms" in record.detail:
        attributes["evidex.queue_ms"] = record.detail["queue_ms"]
    if record.detail.get("endpoint"):
        attributes["evidex.endpoint"] = str(record.detail["endpoint"])
    if record.errors:
        attributes["evidex.errors"] = list(record.errors)
    if reask:
        batch.span.add_event(
            "evidex.reask",
            {"evidex.attempt": record.attempt, "evidex.errors": batch.last_errors},
            timestamp=start,
        )
    span = tracer.start_span(
        f"{batch.operation} {model}",
        context=trace.set_span_in_context(batch.span),
        kind=trace.SpanKind.CLIENT,
        attributes=attributes,
        start_time=start,
    )
    if record.status == "error":
        span.set_attribute("error.type", "JudgeUnavailable")
        reason = record.errors[0][:200] if record.errors else "judge unavailable"
        span.set_status(trace.Status(trace.StatusCode.ERROR, reason))
    span.end(end_time=end)


def _errors(record: AuditRecord) -> dict[str, Any]:
    return {"evidex.errors": list(record.errors)} if record.errors else {}


def _review_item(record: AuditRecord) -> dict[str, Any]:
    """The review item a record opened, when it opened one (a fallback at low risk in
    classify is a final answer and opens none)."""
    item_id = record.detail.get("review_item_id")
    return {} if item_id is None else {"evidex.review_item_id": int(item_id)}
