"""Limits belong to the judge: one in-flight limit per judge instance, shared by every job and
every service request in the process, with the time a call queues for a slot kept apart from
the call's own latency.

The contract: ``get_judge(spec, max_concurrency=N)`` (or ``judge.max_concurrency = N`` before
the first run) caps the calls that instance has in flight at once, whatever each run's
``HarnessSettings.max_concurrency`` says; an audit row of a judge call has ``latency_ms`` of the
call alone and ``detail["queue_ms"]``, the wait for a slot. Everything runs through the real
SDK against the loopback fake server, which counts the chat requests in flight.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest

from evidex.harness.runner import HarnessSettings
from evidex.jobs.rerank import arerank
from evidex.jobs.tier import atier
from evidex.judges import get_judge
from evidex.judging import Judge
from evidex.store import SqlStore
from evidex.types import Passage
from tests.fake_openai_server import (
    FakeOpenAIServer,
    Reply,
    score_reply_for,
    serve,
    tier_reply_for,
)
from tests.live_service import serve_app

pytestmark = pytest.mark.network

SPEC = "openai:limit-model"
QUERY = "how much vitamin D do adults need?"
JUDGE_STATUSES = ("ok", "invalid", "error")


def valid_reply(body: dict[str, Any]) -> str:
    """A valid tier or pointwise-rerank reply, whichever the request's schema asks for."""
    schema = ((body.get("response_format") or {}).get("json_schema") or {}).get("schema") or {}
    if "scores" in schema.get("properties", {}):
        return score_reply_for(body)
    return tier_reply_for(body)


@contextmanager
def fake_judge_server(delay_s: float) -> Iterator[FakeOpenAIServer]:
    # a listen queue for bursts: without a shared limit, hundreds of calls connect at once
    with serve(backlog=1024) as server:
        server.default = Reply(valid_reply, delay_s=delay_s)
        yield server


def texts(prefix: str, n: int) -> list[Passage]:
    """``n`` distinct passages (preflight would merge repeated texts)."""
    return [
        Passage(
            passage_id=f"{prefix}-p{i:02d}",
            text=f"Item {prefix}/{i}: adults need {400 + 10 * i} IU of vitamin D a day in winter.",
        )
        for i in range(n)
    ]


def judge_rows(store: SqlStore, run_id: str) -> list[dict[str, Any]]:
    return [r for r in store.audit_rows(run_id=run_id) if r["status"] in JUDGE_STATUSES]


async def close(judge: Judge) -> None:
    aclose = getattr(judge, "aclose", None)
    if aclose is not None:
        await aclose()


@contextmanager
def live_service(store: SqlStore, judge: Judge) -> Iterator[str]:
    """The service on a real uvicorn server on a free loopback port, in a thread."""
    from evidex.service import create_app

    with serve_app(
        create_app(store, judges={SPEC: judge}, allowed_judges={SPEC}), backlog=1024
    ) as base:
        yield base


def test_200_service_requests_never_exceed_the_judge_limit(store: SqlStore) -> None:
    pytest.importorskip("fastapi")
    n_requests, per_request, limit = 200, 15, 8
    bodies = [
        {
            "query": QUERY,
            "passages": [p.model_dump(mode="json") for p in texts(f"r{r:03d}", per_request)],
            "judge": SPEC,
        }
        for r in range(n_requests)
    ]

    async def post_all(base: str) -> list[httpx.Response]:
        limits = httpx.Limits(max_connections=n_requests, max_keepalive_connections=n_requests)
        async with httpx.AsyncClient(base_url=base, timeout=60, limits=limits) as client:
            return list(await asyncio.gather(*(client.post("/tier", json=b) for b in bodies)))

    with fake_judge_server(delay_s=0.03) as fake:
        judge = get_judge(SPEC, base_url=fake.base_url, max_concurrency=limit)
        with live_service(store, judge) as base:
            responses = asyncio.run(post_all(base))
        peak = fake.peak_in_flight
        chat_requests = len(fake.chat_requests)

    assert 1 < peak <= limit, f"peak in flight at the judge server: {peak}, limit {limit}"
    print(f"peak in flight at the judge server: {peak} (limit {limit})")
    assert [r.status_code for r in responses] == [200] * n_requests, next(
        r.text for r in responses if r.status_code != 200
    )
    for body, response in zip(bodies, responses, strict=True):
        got = response.json()["classifications"]
        assert [c["passage_id"] for c in got] == [p["passage_id"] for p in body["passages"]]
        assert not [c for c in got if c["source"] == "fallback"], got[0]["reason"]
    assert chat_requests == n_requests * 2  # 15 passages: a batch of 10 and one of 5 each


def test_two_jobs_on_one_judge_share_its_limit(store: SqlStore) -> None:
    limit = 4
    settings = HarnessSettings(max_concurrency=16, use_cache=False, backoff_s=0.0)
    tier_passages, rerank_passages = texts("t", 80), texts("k", 80)

    async def both(base_url: str) -> tuple[Any, Any]:
        judge = get_judge(SPEC, base_url=base_url)
        judge.max_concurrency = limit
        try:
            return await asyncio.gather(
                atier(QUERY, tier_passages, judge=judge, store=store, settings=settings),
                arerank(
                    QUERY,
                    rerank_passages,
                    strategy="pointwise",
                    top_n=len(rerank_passages),
                    judge=judge,
                    store=store,
                    settings=settings,
                ),
            )
        finally:
            await close(judge)

    with fake_judge_server(delay_s=0.05) as fake:
        tiered, reranked = asyncio.run(both(fake.base_url))
        peak = fake.peak_in_flight

    assert {a.source for a in tiered.classifications} == {"judge"}
    assert [a.passage_id for a in tiered.classifications] == [p.passage_id for p in tier_passages]
    assert {r.source for r in reranked.ranked_passages} == {"judge"}
    assert sorted(r.passage_id for r in reranked.ranked_passages) == sorted(
        p.passage_id for p in rerank_passages
    )
    assert tiered.judge_calls == 8 and reranked.judge_calls == 8
    assert 1 < peak <= limit, f"peak in flight at the judge server: {peak}, limit {limit}"
    print(f"peak in flight at the judge server: {peak} (limit {limit})")


def test_queue_wait_is_recorded_apart_from_the_call_latency(store: SqlStore) -> None:
    """Four runs of two batches on a judge that takes two calls at a time: six calls queue
    (for 1, 2 or 3 server delays); each row's ``latency_ms`` is still about one delay."""
    delay_s, limit, runs = 0.2, 2, 4
    settings = HarnessSettings(max_concurrency=16, use_cache=False, backoff_s=0.0)

    async def run_all(base_url: str) -> list[Any]:
        judge = get_judge(SPEC, base_url=base_url, max_concurrency=limit)
        try:
            return list(
                await asyncio.gather(
                    *(
                        atier(
                            QUERY, texts(f"q{i}", 20), judge=judge, store=store, settings=settings
                        )
                        for i in range(runs)
                    )
                )
            )
        finally:
            await close(judge)

    with fake_judge_server(delay_s=delay_s) as fake:
        results = asyncio.run(run_all(fake.base_url))
        peak = fake.peak_in_flight

    rows = [row for result in results for row in judge_rows(store, result.run_id)]
    assert [row["status"] for row in rows] == ["ok"] * (2 * runs)
    delay_ms = 1000 * delay_s
    latencies = sorted(round(row["latency_ms"]) for row in rows)
    # a call that queued for a slot and counted the wait as latency would show 2+ delays
    assert all(0.9 * delay_ms <= ms < 1.9 * delay_ms for ms in latencies), (
        f"latency_ms of the judge calls {latencies}: should be the server's {delay_ms:g} ms, "
        "not the wait for a slot as well"
    )
    waits = [row["detail"].get("queue_ms") for row in rows]
    assert all(isinstance(ms, int | float) and ms >= 0 for ms in waits), (
        f'detail["queue_ms"] of the judge calls: {waits}; details: {rows[0]["detail"]}'
    )
    # two calls start at once, the other six wait one, two or three delays for a slot
    assert sum(ms >= 0.75 * delay_ms for ms in waits) >= 2 * runs - limit, sorted(waits)
    assert peak <= limit, f"peak in flight at the judge server: {peak}, limit {limit}"
