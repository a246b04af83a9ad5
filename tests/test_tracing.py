"""OpenTelemetry spans of a job run, read back from the SDK's in-memory exporter: job → step
(one batch) → one span per attempt sent to the judge, nested across the run's asyncio tasks,
with the GenAI attributes, re-ask / retry / fallback / cache hit, and nothing breaking when no
SDK (or no ``opentelemetry-api`` at all) is there."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk.trace")

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

import evidex
from evidex.errors import JudgeUnavailable
from evidex.harness.runner import HarnessSettings
from evidex.judging import JudgeRequest
from evidex.pricing import Price
from evidex.store import SqlStore
from evidex.types import Passage
from tests.scripted import ScriptedJudge, tier_reply

ROOT = Path(__file__).resolve().parent.parent
FAST = HarnessSettings(backoff_s=0.0)
QUERY = "how much vitamin D do adults need?"


class _WhileTesting(SimpleSpanProcessor):
    """Exports only during a test that asked for spans: the global provider outlives it, and
    the rest of the session should neither pay for the export nor fill the memory."""

    active = False

    def on_end(self, span: ReadableSpan) -> None:
        if self.active:
            super().on_end(span)


_EXPORTER = InMemorySpanExporter()
_PROCESSOR = _WhileTesting(_EXPORTER)


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    """The global provider (an SDK one, set once per process) exporting into memory."""
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        provider = TracerProvider()
        trace.set_tracer_provider(provider)
    if not getattr(provider, "_evidex_test_exporter", False):
        provider.add_span_processor(_PROCESSOR)
        provider._evidex_test_exporter = True  # type: ignore[attr-defined]
    _EXPORTER.clear()
    _PROCESSOR.active = True
    yield _EXPORTER
    _PROCESSOR.active = False
    _EXPORTER.clear()


def _named(exporter: InMemorySpanExporter, prefix: str) -> list[ReadableSpan]:
    return [s for s in exporter.get_finished_spans() if s.name.startswith(prefix)]


def _parent(span: ReadableSpan) -> int | None:
    return None if span.parent is None else span.parent.span_id


def _id(span: ReadableSpan) -> int:
    assert span.context is not None
    return span.context.span_id


def _invented(request: JudgeRequest) -> dict[str, Any]:
    reply = tier_reply(request)
    reply["classifications"][0]["passage_id"] = "p999"
    return reply


def test_a_reask_nests_two_attempt_spans_under_the_step_under_the_job(
    spans: InMemorySpanExporter, store: SqlStore, passages: list[Passage]
) -> None:
    result = evidex.tier(
        QUERY, passages, judge=ScriptedJudge([_invented, tier_reply]), store=store, settings=FAST
    )
    [job] = _named(spans, "evidex.job")
    [step] = _named(spans, "evidex.step")
    calls = _named(spans, "chat ")
    assert job.name == "evidex.job tier" and step.name == "evidex.step tier"
    assert _parent(step) == _id(job)
    assert [_parent(c) for c in calls] == [_id(step), _id(step)]
    assert [c.name for c in calls] == ["chat scripted", "chat scripted"]

    first, second = (dict(c.attributes or {}) for c in calls)
    assert first["gen_ai.operation.name"] == "chat"
    assert first["gen_ai.system"] == "scripted"
    assert first["gen_ai.request.model"] == "scripted"
    assert first["gen_ai.response.model"] == "scripted-1"
    assert first["gen_ai.usage.input_tokens"] == 100
    assert first["gen_ai.usage.output_tokens"] == 20
    assert first["gen_ai.request.temperature"] == FAST.temperature
    assert (first["evidex.attempt"], first["evidex.status"]) == (1, "invalid")
    assert any("p999" in e for e in first["evidex.errors"])  # type: ignore[union-attr]
    assert (first["evidex.reask"], second["evidex.reask"]) == (False, True)
    assert (second["evidex.attempt"], second["evidex.status"]) == (2, "ok")
    assert all(c.kind == SpanKind.CLIENT for c in calls)
    assert calls[0].start_time <= calls[0].end_time <= calls[1].start_time  # type: ignore[operator]

    [reask] = [e for e in step.events if e.name == "evidex.reask"]
    assert reask.attributes is not None and reask.attributes["evidex.attempt"] == 2
    step_attrs = dict(step.attributes or {})
    assert step_attrs["evidex.job"] == "tier"
    assert step_attrs["evidex.step"] == "tier"
    assert step_attrs["evidex.batch_id"] == f"{result.run_id}-b000"
    assert step_attrs["evidex.prompt_version"] == result.prompt_version
    assert (step_attrs["evidex.status"], step_attrs["evidex.cache_hit"]) == ("judge", False)
    assert step_attrs["evidex.attempts"] == 2

    job_attrs = dict(job.attributes or {})
    assert job_attrs["evidex.run_id"] == result.run_id
    assert job_attrs["evidex.judge_id"] == "scripted"
    assert job_attrs["evidex.status"] == "judge"
    assert (job_attrs["evidex.judge_calls"], job_attrs["evidex.attempts"]) == (2, 2)
    assert job_attrs["gen_ai.usage.input_tokens"] == result.usage.prompt_tokens == 200
    assert job_attrs["gen_ai.usage.output_tokens"] == result.usage.completion_tokens == 40
    assert "evidex.cost" not in job_attrs  # no price for the judge: no cost, not a guess


def test_the_job_span_carries_the_cost_when_the_judge_is_priced(
    spans: InMemorySpanExporter, store: SqlStore, passages: list[Passage]
) -> None:
    settings = HarnessSettings(backoff_s=0.0, prices={"scripted": Price(input=1.0, output=2.0)})
    result = evidex.tier(
        QUERY, passages, judge=ScriptedJudge([tier_reply]), store=store, settings=settings
    )
    [job] = _named(spans, "evidex.job")
    assert result.cost == (100 * 1.0 + 20 * 2.0) / 1_000_000
    assert (job.attributes or {})["evidex.cost"] == result.cost


def test_a_fallback_is_an_event_and_the_steps_status(
    spans: InMemorySpanExporter, store: SqlStore, passages: list[Passage]
) -> None:
    evidex.tier(QUERY, passages, judge=ScriptedJudge([_invented] * 5), store=store, settings=FAST)
    [step] = _named(spans, "evidex.step")
    calls = _named(spans, "chat ")
    # the batch's three attempts, then its first passage (never graded) alone, twice
    assert [(c.attributes or {})["evidex.attempt"] for c in calls] == [1, 2, 3, 1, 2]
    # the last attempt of each ladder is the strict one at temperature 0
    temperatures = [(c.attributes or {})["gen_ai.request.temperature"] for c in calls]
    assert temperatures[2] == temperatures[4] == 0.0
    [split] = [e for e in step.events if e.name == "evidex.split"]
    assert split.attributes is not None and split.attributes["evidex.attempts"] == 3
    assert (split.attributes["evidex.parts"], split.attributes["evidex.kept"]) == (1, 6)
    [fallback] = [e for e in step.events if e.name == "evidex.fallback"]
    assert fallback.attributes is not None and fallback.attributes["evidex.attempts"] == 2
    assert fallback.attributes["evidex.review_item_id"] >= 1  # type: ignore[operator]
    attrs = dict(step.attributes or {})
    assert attrs["evidex.status"] == "fallback" and "evidex.reason" in attrs
    [job] = _named(spans, "evidex.job")
    assert (job.attributes or {})["evidex.status"] == "fallback"
    assert any(e.name == "evidex.review" for e in step.events)


def test_a_cache_hit_is_a_step_attribute_and_sends_no_attempt(
    spans: InMemorySpanExporter, store: SqlStore, passages: list[Passage]
) -> None:
    evidex.tier(QUERY, passages, judge=ScriptedJudge([tier_reply]), store=store, settings=FAST)
    spans.clear()
    result = evidex.tier(QUERY, passages, judge=ScriptedJudge(), store=store, settings=FAST)
    [step] = _named(spans, "evidex.step")
    assert (step.attributes or {})["evidex.cache_hit"] is True
    assert (step.attributes or {})["evidex.status"] == "cache"
    assert _named(spans, "chat ") == []
    assert (result.judge_calls, result.attempts, result.usage.prompt_tokens) == (0, 0, 0)


def test_an_unavailable_judge_is_an_error_span_and_the_next_attempt_a_retry(
    spans: InMemorySpanExporter, store: SqlStore, passages: list[Passage]
) -> None:
    judge = ScriptedJudge([JudgeUnavailable("connection reset"), tier_reply])
    evidex.tier(QUERY, passages, judge=judge, store=store, settings=FAST)
    failed, ok = _named(spans, "chat ")
    assert failed.status.status_code == StatusCode.ERROR
    assert (failed.attributes or {})["error.type"] == "JudgeUnavailable"
    assert (ok.attributes or {})["evidex.retry"] is True
    assert (ok.attributes or {})["evidex.reask"] is False


def test_concurrent_batches_and_inputs_nest_under_their_own_parents(
    spans: InMemorySpanExporter, store: SqlStore, passages: list[Passage]
) -> None:
    """Two inputs at once, each in batches of five run at once: every attempt span's parent is
    its own batch's step span, every step span's parent its own job span, and both jobs sit
    under the caller's span."""
    more = passages + [Passage(passage_id=f"x{i}", text=f"Filler text {i}.") for i in range(5)]
    judge = ScriptedJudge([tier_reply] * 6, delay_s=0.02)
    tracer = trace.get_tracer("caller")

    async def go() -> list[evidex.TierResult]:
        with tracer.start_as_current_span("pipeline"):
            return await evidex.atier_many(
                [
                    evidex.TierInput(query=QUERY, passages=more),
                    evidex.TierInput(query="what is rickets?", passages=more),
                ],
                judge=judge,
                store=store,
                settings=FAST,
                batch_size=5,
            )

    results = asyncio.run(go())
    [pipeline] = _named(spans, "pipeline")
    jobs = _named(spans, "evidex.job")
    steps = _named(spans, "evidex.step")
    calls = _named(spans, "chat ")
    assert len(jobs) == 2 and len(steps) == 6 and len(calls) == 6
    assert {_parent(j) for j in jobs} == {_id(pipeline)}
    assert {s.context.trace_id for s in [*jobs, *steps, *calls]} == {  # type: ignore[union-attr]
        pipeline.context.trace_id  # type: ignore[union-attr]
    }
    job_of_run = {(j.attributes or {})["evidex.run_id"]: _id(j) for j in jobs}
    assert set(job_of_run) == {r.run_id for r in results}
    step_of_batch = {}
    for step in steps:
        attrs = dict(step.attributes or {})
        assert _parent(step) == job_of_run[attrs["evidex.run_id"]]
        step_of_batch[attrs["evidex.batch_id"]] = _id(step)
    assert len(step_of_batch) == 6
    for call in calls:
        assert _parent(call) == step_of_batch[(call.attributes or {})["evidex.batch_id"]]


def _run_python(*parts: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", "\n".join(textwrap.dedent(p) for p in parts)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


SCRIPT = """
    import os, tempfile
    import evidex
    from evidex.harness.runner import HarnessSettings
    from evidex.types import Passage
    from tests.scripted import ScriptedJudge, tier_reply

    db = "sqlite:///" + os.path.join(tempfile.mkdtemp(), "e.db")
    result = evidex.tier("q?", [Passage(passage_id="p1", text="Vitamin D is made in skin.")],
                         judge=ScriptedJudge([tier_reply]), store=db,
                         settings=HarnessSettings(backoff_s=0.0))
    print(result.judge_calls, result.classifications[0].source)
"""


def test_without_an_sdk_spans_are_no_ops_and_the_job_runs() -> None:
    done = _run_python(
        """
        from opentelemetry import trace
        assert not trace.get_current_span().is_recording()
        """,
        SCRIPT,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["1", "judge"]


def test_spans_start_once_an_sdk_is_configured_after_a_first_run() -> None:
    """No SDK: no span is started at all (not even a no-op one); an SDK set afterwards gets
    the spans of the next run."""
    done = _run_python(
        SCRIPT,
        """
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
        from evidex.harness import tracing
        assert tracing._get_tracer() is None
        exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        trace.set_tracer_provider(provider)
        assert tracing._get_tracer() is not None
        """,
        SCRIPT,
        """
        print(sorted({s.name.split()[0] for s in exporter.get_finished_spans()}))
        """,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[:2] == ["1 judge", "1 judge"]
    assert lines[2] == "['chat', 'evidex.job', 'evidex.step']"


def test_without_opentelemetry_installed_nothing_is_imported_and_the_job_runs() -> None:
    done = _run_python(
        """
        import sys
        sys.modules["opentelemetry"] = None  # as if the otel extra were not installed
        """,
        SCRIPT,
        """
        from evidex.harness import tracing
        assert tracing._get_tracer() is None
        assert not any(name.startswith("opentelemetry.") for name in sys.modules)
        """,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["1", "judge"]


def test_a_preflight_note_is_an_event_of_the_job_span(
    spans: InMemorySpanExporter, store: SqlStore, passages: list[Passage]
) -> None:
    twin = Passage(passage_id="twin", text=passages[0].text)
    evidex.tier(
        QUERY, [*passages, twin], judge=ScriptedJudge([tier_reply]), store=store, settings=FAST
    )
    [job] = _named(spans, "evidex.job")
    kinds = [(e.attributes or {}).get("evidex.kind") for e in job.events if e.name == "evidex.note"]
    assert "duplicates_removed" in kinds
