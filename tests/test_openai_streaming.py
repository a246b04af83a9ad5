"""The ``openai:`` judge streams its replies and watches their progress instead of giving a call
one total time: a slow server that keeps writing is waited for, a stalled one is given up in the
idle time, a reply that never begins in the first-token time, and a request given up is
stopped on the server (its connection closed), so the retry does not queue behind it. Against
the loopback fake server, which streams as real servers do when asked; the deadlines'
arithmetic is checked on :class:`Pace` directly."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import evidex
from evidex.errors import JudgeUnavailable
from evidex.harness.runner import HarnessSettings
from evidex.judges import get_judge
from evidex.judges._openai import OpenAIJudge
from evidex.judges._openai._pace import FIRST_TOKEN_FACTOR, IDLE_FACTOR, WINDOW, Limits, Pace
from evidex.judging import JudgeReply, JudgeRequest, Message, Payload
from evidex.store import SqlStore
from evidex.types import Passage
from tests.fake_openai_server import FakeOpenAIServer, Refuses, Reply, serve, tier_reply_for

pytestmark = pytest.mark.network

QUERY = "how much vitamin D do adults need?"
FAST = HarnessSettings(backoff_s=0.0)
"""No whole-call limit of the harness's: the judge's own deadlines are the ones tested."""
REQUEST = JudgeRequest(
    job="tier", messages=(Message("user", "grade these"),), schema={}, payload=Payload()
)


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    with serve() as running:
        yield running


def make_judge(base_url: str, **options: Any) -> OpenAIJudge:
    judge = get_judge(
        "openai:test-model", base_url=base_url, api_key="sk-streaming-test", **options
    )
    assert isinstance(judge, OpenAIJudge)
    return judge


def ask(judge: OpenAIJudge, request: JudgeRequest = REQUEST) -> JudgeReply:
    async def once() -> JudgeReply:
        try:
            return await judge.complete(request)
        finally:
            await judge.aclose()

    return asyncio.run(once())


def run_tier(judge: OpenAIJudge, store: SqlStore, passages: list[Passage]) -> evidex.TierResult:
    try:
        return evidex.tier(QUERY, passages, judge=judge, store=store, settings=FAST)
    finally:
        asyncio.run(judge.aclose())


def soon(condition: Callable[[], bool], within_s: float = 5.0) -> bool:
    """Whether ``condition`` holds within ``within_s`` (a server notices a closed connection
    at its next write)."""
    end = time.monotonic() + within_s
    while not condition():
        if time.monotonic() > end:
            return False
        time.sleep(0.02)
    return True


def calls(store: SqlStore, run_id: str) -> list[dict[str, Any]]:
    return [r for r in store.audit_rows(run_id=run_id) if r["status"] in ("ok", "invalid", "error")]


def test_a_slow_server_that_keeps_streaming_is_not_abandoned(
    server: FakeOpenAIServer, store: SqlStore, passages: list[Passage]
) -> None:
    """The reply takes about three seconds, six times either deadline: it is never late,
    because its tokens keep coming."""
    server.default = Reply(tier_reply_for, delay_s=0.3, gap_s=0.15, chunk_chars=60)
    judge = make_judge(server.base_url, first_token_timeout_s=0.5, idle_timeout_s=0.5)
    assert judge.default_timeout_s is None  # and the harness sets no whole-call limit

    result = run_tier(judge, store, passages)

    assert {a.source for a in result.classifications} == {"judge"}
    [row] = calls(store, result.run_id)
    assert row["status"] == "ok" and row["latency_ms"] > 2000
    [stream] = server.streams
    assert stream.written == stream.planned > 15 and not stream.client_gone
    assert server.chat_requests[0].body["stream"] is True


def test_a_stalled_server_is_given_up_in_the_idle_time_and_pings_are_not_progress(
    server: FakeOpenAIServer, store: SqlStore, passages: list[Passage]
) -> None:
    """Three tokens, then 30 s of nothing but sse-starlette's ping comments: the call is given
    up half a second into the stall and the retry answers."""
    server.add(Reply(tier_reply_for, stall_after=3, stall_s=30.0, ping_s=0.05))
    server.default = Reply(tier_reply_for)
    judge = make_judge(server.base_url, idle_timeout_s=0.5)

    result = run_tier(judge, store, passages)

    assert {a.source for a in result.classifications} == {"judge"}
    stalled, answered = calls(store, result.run_id)
    assert stalled["status"] == "error" and answered["status"] == "ok"
    assert "stalled: no token for 0.5s" in stalled["errors"][0]
    assert stalled["latency_ms"] < 5000  # not the 30 s of the stall
    assert soon(lambda: server.streams[0].client_gone)  # noticed at a ping: it stopped


def test_a_reply_that_never_begins_is_given_up_in_the_first_token_time(
    server: FakeOpenAIServer,
) -> None:
    server.add(Reply("{}", delay_s=30.0, ping_s=0.05))
    judge = make_judge(server.base_url, first_token_timeout_s=0.4)
    began = time.monotonic()
    with pytest.raises(JudgeUnavailable, match=r"began no reply within 0\.4s"):
        ask(judge)
    assert time.monotonic() - began < 5


def test_a_request_given_up_stops_on_the_server_and_the_retry_does_not_queue_behind_it(
    store: SqlStore, passages: list[Passage]
) -> None:
    """A server that answers one request at a time (as llama.cpp's do) stalls on the first
    reply, which would then go on for 20 s more. The judge gives it up after 0.5 s of silence
    and closes its connection; the server stops writing it at its next token, and the retry
    is answered at once instead of after the abandoned reply."""
    with serve(serial=True) as server:
        slow = Reply(tier_reply_for, chunk_chars=2, gap_s=0.05, stall_after=4, stall_s=1.5)
        server.add(slow)
        server.default = Reply(tier_reply_for)
        judge = make_judge(server.base_url, idle_timeout_s=0.5)
        began = time.monotonic()
        result = run_tier(judge, store, passages)
        took = time.monotonic() - began
        abandoned, retried = server.streams

    assert {a.source for a in result.classifications} == {"judge"}
    assert abandoned.client_gone and abandoned.planned > 400
    assert abandoned.written < 20  # of over 400 tokens: it stopped right after the stall
    assert abandoned.ended_at is not None and retried.ended_at is not None
    assert retried.written == retried.planned and not retried.client_gone
    # the whole job took the stall and the retry, not the 20 s the abandoned reply had left
    assert took < abandoned.planned * slow.gap_s / 2


def test_usage_and_finish_reason_are_read_from_a_streamed_reply(
    server: FakeOpenAIServer,
) -> None:
    server.add(
        Reply(
            '{"classifications": [{"pass',
            finish_reason="length",
            prompt_tokens=321,
            completion_tokens=54,
            chunk_chars=3,
        )
    )
    judge = make_judge(server.base_url)
    reply = ask(judge)

    assert reply.text == '{"classifications": [{"pass'
    assert reply.truncated  # finish_reason: length, which the harness splits on
    assert (reply.usage.prompt_tokens, reply.usage.completion_tokens) == (321, 54)
    assert reply.model_version == server.reported_model
    sent = server.chat_requests[0].body
    assert sent["stream"] is True and sent["stream_options"] == {"include_usage": True}


def test_a_stream_without_usage_counts_its_chunks_and_estimates_the_prompt(
    server: FakeOpenAIServer,
) -> None:
    """llama-cpp-python's server streams no usage: each chunk is one token there."""
    server.add(Reply('{"a": "bcdefgh"}', chunk_chars=4, usage_in_stream=False))
    judge = make_judge(server.base_url)
    reply = ask(judge)

    assert reply.text == '{"a": "bcdefgh"}' and not reply.truncated
    assert reply.usage.completion_tokens == 4
    assert reply.usage.prompt_tokens == judge.count_tokens("grade these")


def test_a_streamed_reply_cut_off_at_its_token_limit_splits_the_batch(
    server: FakeOpenAIServer, store: SqlStore, passages: list[Passage]
) -> None:
    server.add(Reply('{"classifications": [', finish_reason="length"))
    server.default = Reply(tier_reply_for)
    result = run_tier(make_judge(server.base_url), store, passages)

    assert {a.source for a in result.classifications} == {"judge"}
    [split] = [e for e in result.events if e.kind == "batch_split"]
    assert split.data["cut_off"] is True
    assert len(server.streams) == 3  # the cut reply, then its two halves, each streamed


def test_structured_output_is_still_negotiated_on_streamed_calls(
    server: FakeOpenAIServer, store: SqlStore, passages: list[Passage]
) -> None:
    """The refusal comes before any event (HTTP 500, as llama-cpp-python answers json_schema):
    remembered, noted once, and the same call streamed again in the next mode."""
    server.default = Refuses(frozenset({"json_schema"}), Reply(tier_reply_for))
    result = run_tier(make_judge(server.base_url), store, passages)

    assert {a.source for a in result.classifications} == {"judge"}
    modes = [r.body["response_format"]["type"] for r in server.chat_requests]
    assert modes == ["json_schema", "json_object"]
    assert all(r.body["stream"] is True for r in server.chat_requests)
    assert len(server.streams) == 1
    notes = [r for r in store.audit_rows(run_id=result.run_id) if r["step"] == "judge.note"]
    assert len(notes) == 1 and "json_object" in json.dumps(notes[0]["detail"])


def test_a_stream_interrupted_for_another_request_is_sent_again_one_call_at_a_time(
    server: FakeOpenAIServer, store: SqlStore, passages: list[Passage]
) -> None:
    """llama-cpp-python's server ends a stream with [DONE] and no finish_reason when another
    request arrives: the endpoint is then sent one call at a time, and the interrupted call is
    sent again within the same attempt, never counted as a failed one."""
    server.add(Reply(tier_reply_for, interrupted=True, chunk_chars=50))
    server.default = Reply(tier_reply_for)
    judge = make_judge(server.base_url)
    result = run_tier(judge, store, passages)

    assert {a.source for a in result.classifications} == {"judge"}
    assert [r["status"] for r in calls(store, result.run_id)] == ["ok"]
    notes = [r for r in store.audit_rows(run_id=result.run_id) if r["step"] == "judge.note"]
    assert len(notes) == 1 and "one call at a time" in json.dumps(notes[0]["detail"])
    [endpoint] = judge.pool.endpoints
    assert endpoint.serial and endpoint.limit.limit == 1 and endpoint.max_limit == 1
    assert judge.gate is not None and judge.gate.limit.limit == 1


def test_the_wait_for_a_first_token_restarts_while_the_server_works_on_another_call() -> None:
    """Two calls to a server that answers one at a time: the second waits about 1.5 s, three
    times its first-token deadline, but each token of the first is progress of the server."""
    with serve(serial=True) as server:
        server.add(Reply('{"first": "' + "x" * 28 + '"}', chunk_chars=2, gap_s=0.08))
        server.add(Reply('{"second": true}'))
        judge = make_judge(server.base_url, first_token_timeout_s=0.5, idle_timeout_s=1.0)

        async def both() -> list[JudgeReply]:
            first = asyncio.ensure_future(judge.complete(REQUEST))
            await asyncio.sleep(0.1)  # the first is on the server before the second is sent
            try:
                return list(await asyncio.gather(first, judge.complete(REQUEST)))
            finally:
                await judge.aclose()

        began = time.monotonic()
        replies = asyncio.run(both())
        took = time.monotonic() - began
    assert [r.text for r in replies] == ['{"first": "' + "x" * 28 + '"}', '{"second": true}']
    assert took > 1.0  # the second really waited past its 0.5 s


def test_a_server_that_does_not_stream_is_read_whole_under_the_first_token_time(
    server: FakeOpenAIServer,
) -> None:
    """A server that ignores ``stream`` answers one JSON body: its first progress is the whole
    reply, so the first-token deadline bounds the whole call."""
    judge = make_judge(server.base_url, stream=False, first_token_timeout_s=0.4)
    server.add(Reply('{"ok": true}', prompt_tokens=11, completion_tokens=3))
    reply = ask(judge)
    assert reply.text == '{"ok": true}' and reply.usage.prompt_tokens == 11
    assert "stream" not in server.chat_requests[0].body
    server.add(Reply("{}", delay_s=5.0))
    judge = make_judge(server.base_url, stream=False, first_token_timeout_s=0.4)
    with pytest.raises(JudgeUnavailable, match=r"began no reply within 0\.4s"):
        ask(judge)


# ---------------------------------------------------------------------- the deadlines


LIMITS = Limits(first_token_s=900.0, idle_s=60.0, first_token_floor_s=30.0, idle_floor_s=10.0)


def test_deadlines_before_anything_was_measured_are_the_kind_s_ceilings() -> None:
    pace = Pace(LIMITS)
    d = pace.deadlines(10_000)
    assert (d.first_token_s, d.idle_s, d.total_s) == (900.0, 60.0, None)


def test_deadlines_follow_the_measured_replies_between_floor_and_ceiling() -> None:
    pace = Pace(LIMITS)
    pace.observe(50.0, 0.3, 10_000)  # 50 s to the first token, tokens at most 0.3 s apart
    d = pace.deadlines(10_000)
    assert d.first_token_s == FIRST_TOKEN_FACTOR * 50.0
    assert d.idle_s == 10.0  # 10 x 0.3 s is under the floor
    # a prompt twice as long may take twice as long to read
    assert pace.deadlines(20_000).first_token_s == FIRST_TOKEN_FACTOR * 100.0
    # a short one never gets less than the slowest first token measured
    assert pace.deadlines(100).first_token_s == FIRST_TOKEN_FACTOR * 50.0
    pace.observe(2.0, 2.5, 10_000)
    assert pace.deadlines(10_000).idle_s == IDLE_FACTOR * 2.5
    pace.observe(400.0, 30.0, 10_000)
    d = pace.deadlines(10_000)
    assert (d.first_token_s, d.idle_s) == (900.0, 60.0)  # capped at the ceilings


def test_a_fast_server_gets_the_floors_and_old_replies_are_forgotten() -> None:
    pace = Pace(LIMITS)
    pace.observe(300.0, 5.0, 1_000)
    for _ in range(WINDOW):
        pace.observe(0.5, 0.02, 1_000)
    d = pace.deadlines(1_000)
    assert (d.first_token_s, d.idle_s) == (30.0, 10.0)


def test_fixed_deadlines_and_a_whole_call_limit_win_over_measured_ones() -> None:
    pace = Pace(LIMITS, first_token_s=7.0, idle_s=3.0, total_s=5.0)
    pace.observe(50.0, 0.3, 10_000)
    d = pace.deadlines(10_000)
    assert (d.first_token_s, d.idle_s, d.total_s) == (5.0, 3.0, 5.0)
