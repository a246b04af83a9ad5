"""An ``openai:`` judge over several endpoints (a pool), against two or three real loopback
servers: routing to the least busy one, a dead endpoint's calls answered by another (no fallback,
no failed attempt in the audit log), ``Retry-After`` cooldowns, the adaptive limit, the forms of
configuration (option, environment, config file, CLI) and a cache key that does not depend on
which replicas serve the model."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

import evidex
from evidex.config import load_settings
from evidex.errors import CircuitOpenError, ConfigError, JudgeUnavailable
from evidex.harness.runner import HarnessSettings
from evidex.judges import get_judge
from evidex.judges._openai import OpenAIJudge
from evidex.judging import JudgeRequest, Message, PassageText, TierPayload
from evidex.store import SqlStore
from evidex.tasks.tier_reply import reply_schema
from evidex.types import DEFAULT_TIERS, Passage
from tests.fake_openai_server import (
    FakeOpenAIServer,
    Reply,
    Status,
    closed_port,
    serve,
    tier_reply_for,
)

pytestmark = pytest.mark.network

FAST = HarnessSettings(backoff_s=0.0, use_cache=False)
QUERY = "how much vitamin D do adults need?"


@pytest.fixture
def servers() -> Iterator[list[FakeOpenAIServer]]:
    with ExitStack() as stack:
        running = [stack.enter_context(serve(backlog=64)) for _ in range(3)]
        for server in running:
            server.default = Reply(tier_reply_for)
        yield running


def pool(*urls: str, **options: Any) -> OpenAIJudge:
    judge = get_judge("openai:pool-model", base_urls=list(urls), **options)
    assert isinstance(judge, OpenAIJudge)
    return judge


def many(n: int) -> list[Passage]:
    return [
        Passage(passage_id=f"d{i:03d}", text=f"Record {i}: adults need about {i} units of it.")
        for i in range(n)
    ]


def request_for(passages: list[Passage]) -> JudgeRequest:
    ids = [p.passage_id for p in passages]
    rows = json.dumps([{"passage_id": p.passage_id, "text": p.text} for p in passages])
    return JudgeRequest(
        job="tier",
        step="tier",
        messages=(Message("system", "grade"), Message("user", f"Passages:\n{rows}")),
        schema=reply_schema(DEFAULT_TIERS, ids),
        payload=TierPayload(QUERY, PassageText.of(passages)),
    )


def run_tier(
    judge: OpenAIJudge, store: SqlStore, passages: list[Passage], **kw: Any
) -> evidex.TierResult:
    kw.setdefault("settings", FAST)
    return evidex.tier(QUERY, passages, judge=judge, store=store, batch_size=10, **kw)


def rows(store: SqlStore, run_id: str, status: str) -> list[dict[str, Any]]:
    return [r for r in store.audit_rows(run_id=run_id) if r["status"] == status]


# ---------------------------------------------------------------------- routing


def test_a_call_goes_to_the_least_busy_endpoint(servers: list[FakeOpenAIServer]) -> None:
    slow, idle, _ = servers
    slow.add(Reply(tier_reply_for, delay_s=0.6))
    judge = pool(slow.base_url, idle.base_url)
    request = request_for(many(3))

    async def both() -> tuple[str, str]:
        first = asyncio.create_task(judge.complete(request))
        await asyncio.sleep(0.2)  # the first call is outstanding at `slow`
        states = {s["url"]: s["outstanding"] for s in judge.endpoint_states()}
        assert states == {slow.base_url: 1, idle.base_url: 0}
        second = await judge.complete(request)
        return (await first).endpoint, second.endpoint

    try:
        first, second = asyncio.run(both())
    finally:
        asyncio.run(judge.aclose())
    assert (first, second) == (slow.base_url, idle.base_url)
    assert (len(slow.chat_requests), len(idle.chat_requests)) == (1, 1)


def test_load_spreads_over_the_endpoints_and_the_audit_log_names_them(
    servers: list[FakeOpenAIServer], store: SqlStore
) -> None:
    for server in servers:
        server.default = Reply(tier_reply_for, delay_s=0.05)
    judge = pool(*(s.base_url for s in servers), endpoint_concurrency=2)
    assert judge.max_concurrency == 6  # the sum of the endpoints' limits
    passages = many(120)
    result = run_tier(
        judge,
        store,
        passages,
        settings=HarnessSettings(backoff_s=0, use_cache=False, max_concurrency=6),
    )

    assert [a.passage_id for a in result.classifications] == [p.passage_id for p in passages]
    assert {a.source for a in result.classifications} == {"judge"}
    counts = [len(s.chat_requests) for s in servers]
    assert sum(counts) == 12 and min(counts) >= 3, counts
    assert max(s.peak_in_flight for s in servers) <= 2
    endpoints = {r["detail"]["endpoint"] for r in rows(store, result.run_id, "ok")}
    assert endpoints == {s.base_url for s in servers}


# ---------------------------------------------------------------------- a dead endpoint


@pytest.mark.parametrize("concurrency", [1, 4])
@pytest.mark.parametrize("fault", ["closed-port", "503"])
def test_one_endpoint_down_every_passage_is_judged_by_the_other(
    fault: str, concurrency: int, servers: list[FakeOpenAIServer], store: SqlStore
) -> None:
    alive, sick, _ = servers
    if fault == "503":
        sick.default = Status(503, "overloaded")
        dead = sick.base_url
    else:
        dead = f"http://127.0.0.1:{closed_port()}/v1"
    judge = pool(dead, alive.base_url, endpoint_failures=2, endpoint_cooldown_s=600)
    passages = many(60)
    settings = HarnessSettings(backoff_s=0.0, use_cache=False, max_concurrency=concurrency)
    result = run_tier(judge, store, passages, settings=settings)

    assert [a.passage_id for a in result.classifications] == [p.passage_id for p in passages]
    assert {a.source for a in result.classifications} == {"judge"}  # 0 fallbacks
    assert rows(store, result.run_id, "error") == []  # 0 failed attempts
    assert len(rows(store, result.run_id, "ok")) == 6
    assert {r["detail"]["endpoint"] for r in rows(store, result.run_id, "ok")} == {alive.base_url}
    dead_state, alive_state = judge.endpoint_states()
    assert dead_state["breaker"] == "open"  # drained
    assert alive_state["answered"] == 6
    # One call at a time, the breaker opens on the second failure and no third call is sent.
    # With several in flight, calls sent before it opened may fail too, but never more than
    # the threshold plus the others in flight.
    sent_to_dead = dead_state["failed"]
    if concurrency == 1:
        assert sent_to_dead == 2
    else:
        assert 2 <= sent_to_dead <= 2 + concurrency - 1
    if fault == "503":
        assert len(sick.chat_requests) == sent_to_dead


def test_a_drained_endpoint_is_probed_back_by_one_trial_call(
    servers: list[FakeOpenAIServer],
) -> None:
    flaky, steady, _ = servers
    flaky.add(Status(502, "bad gateway"), Status(502, "bad gateway"))
    judge = pool(flaky.base_url, steady.base_url, endpoint_failures=2, endpoint_cooldown_s=30)
    now = [1000.0]
    judge.pool.clock = lambda: now[0]
    request = request_for(many(2))

    async def calls(n: int) -> list[str]:
        return [(await judge.complete(request)).endpoint for _ in range(n)]

    # two failures (each answered by `steady` instead) drain `flaky`; it then gets nothing
    assert asyncio.run(calls(4)) == [steady.base_url] * 4
    assert len(flaky.chat_requests) == 2
    assert judge.endpoint_states()[0]["breaker"] == "open"
    now[0] += 31  # half-open: one trial call, which succeeds and closes the breaker
    assert asyncio.run(calls(1)) == [flaky.base_url]
    assert judge.endpoint_states()[0]["breaker"] == "closed"
    asyncio.run(judge.aclose())


def test_every_endpoint_drained_fails_fast_and_every_endpoint_failing_is_one_error(
    servers: list[FakeOpenAIServer],
) -> None:
    a, b, _ = servers
    a.default = b.default = Status(500, "the model crashed")
    judge = pool(a.base_url, b.base_url, endpoint_failures=1, endpoint_cooldown_s=600)
    request = request_for(many(2))
    with pytest.raises(JudgeUnavailable, match="no endpoint of openai:pool-model could answer"):
        asyncio.run(judge.complete(request))
    assert (len(a.chat_requests), len(b.chat_requests)) == (1, 1)  # each tried once
    with pytest.raises(CircuitOpenError, match="drained after 1 failures"):
        asyncio.run(judge.complete(request))
    assert (len(a.chat_requests), len(b.chat_requests)) == (1, 1)  # nothing sent


# ---------------------------------------------------------------------- 429, Retry-After, limits


def test_retry_after_rests_the_endpoint_for_that_long(servers: list[FakeOpenAIServer]) -> None:
    limited, other, _ = servers
    limited.add(Status(429, "rate limit reached", headers={"Retry-After": "30"}))
    judge = pool(limited.base_url, other.base_url)
    now = [50.0]
    judge.pool.clock = lambda: now[0]
    request = request_for(many(2))

    async def call() -> str:
        return str((await judge.complete(request)).endpoint)

    assert asyncio.run(call()) == other.base_url  # the 429 was answered elsewhere
    now[0] += 29  # still resting: everything goes to the other endpoint
    assert [asyncio.run(call()) for _ in range(3)] == [other.base_url] * 3
    assert len(limited.chat_requests) == 1
    now[0] += 2  # rested: the idle endpoint is first again
    assert asyncio.run(call()) == limited.base_url
    assert judge.endpoint_states()[0]["breaker"] == "closed"  # a 429 is not a breakdown
    asyncio.run(judge.aclose())


def test_the_limit_halves_on_429_and_grows_back_on_successes(
    servers: list[FakeOpenAIServer],
) -> None:
    server = servers[0]
    judge = get_judge("openai:pool-model", base_url=server.base_url, endpoint_concurrency=8)
    assert isinstance(judge, OpenAIJudge)
    (endpoint,) = judge.pool.endpoints
    request = request_for(many(2))

    async def call() -> None:
        await judge.complete(request)

    server.add(Status(429, "slow down", headers={"Retry-After": "0"}))
    with pytest.raises(JudgeUnavailable, match="HTTP 429"):
        asyncio.run(call())
    assert endpoint.limit.limit == 4
    server.add(Status(429, "slow down"))
    with pytest.raises(JudgeUnavailable):
        asyncio.run(call())
    assert endpoint.limit.limit == 2
    limits = []
    for _ in range(2 + 3 + 4 + 5):  # one round of successes (as many as the limit) adds one
        asyncio.run(call())
        limits.append(endpoint.limit.limit)
    assert limits == [2, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 5, 6]
    for _ in range(40):
        asyncio.run(call())
    assert endpoint.limit.limit == 8  # never above its maximum
    asyncio.run(judge.aclose())


def test_429s_of_one_round_of_calls_cut_the_limit_once(servers: list[FakeOpenAIServer]) -> None:
    server = servers[0]
    server.default = Status(429, "slow down", headers={"Retry-After": "0"})
    judge = get_judge("openai:pool-model", base_url=server.base_url, endpoint_concurrency=8)
    assert isinstance(judge, OpenAIJudge)
    request = request_for(many(2))

    async def round_of(n: int) -> None:
        await asyncio.gather(*(judge.complete(request) for _ in range(n)), return_exceptions=True)

    asyncio.run(round_of(8))  # eight calls started together, eight 429s: one cut
    assert judge.pool.endpoints[0].limit.limit == 4
    asyncio.run(judge.aclose())


# ---------------------------------------------------------------------- configuration


def test_several_base_urls_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVIDEX_OPENAI_BASE_URL", "http://single:1/v1")
    monkeypatch.setenv("EVIDEX_OPENAI_BASE_URLS", "http://a:1/v1, http://b:2/v1/,")
    judge = get_judge("openai:m")
    assert isinstance(judge, OpenAIJudge)
    assert judge.base_urls == ("http://a:1/v1", "http://b:2/v1")
    monkeypatch.delenv("EVIDEX_OPENAI_BASE_URLS")
    judge = get_judge("openai:m")
    assert isinstance(judge, OpenAIJudge) and judge.base_urls == ("http://single:1/v1",)


def test_several_base_urls_from_the_config_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "config.toml"
    config.write_text('[openai]\nbase_urls = ["http://gpu1:8000/v1", "http://gpu2:8000/v1"]\n')
    monkeypatch.setenv("EVIDEX_CONFIG", str(config))
    judge = get_judge("openai:m")
    assert isinstance(judge, OpenAIJudge)
    assert judge.base_urls == ("http://gpu1:8000/v1", "http://gpu2:8000/v1")
    # the environment wins over the file, and names the servers as one setting
    monkeypatch.setenv("OPENAI_BASE_URL", "http://env:1/v1")
    assert load_settings().openai.urls() == ("http://env:1/v1",)
    # an option wins over both
    judge = get_judge("openai:m", base_url="http://option:1/v1")
    assert isinstance(judge, OpenAIJudge) and judge.base_urls == ("http://option:1/v1",)


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ('[openai]\nbase_url = "http://a:1/v1"\nbase_urls = ["http://b:1/v1"]\n', "not both"),
        ('[openai]\nbase_urlz = ["http://b:1/v1"]\n', "base_urlz"),
    ],
)
def test_config_file_openai_section_errors(
    text: str, words: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "config.toml"
    config.write_text(text)
    monkeypatch.setenv("EVIDEX_CONFIG", str(config))
    with pytest.raises(ConfigError, match=words):
        load_settings()


@pytest.mark.parametrize(
    ("options", "words"),
    [
        ({"base_url": "http://a:1/v1", "base_urls": ["http://b:1/v1"]}, "not both"),
        ({"base_urls": ["http://a:1/v1", "http://a:1/v1/"]}, "names a server twice"),
        ({"base_urls": ["http://a:1/v1", "ftp://b"]}, "not an http"),
        ({"base_urls": []}, "base_urls"),
    ],
)
def test_bad_endpoint_lists_are_config_errors(options: dict[str, Any], words: str) -> None:
    with pytest.raises(ConfigError, match=words):
        get_judge("openai:m", **options)


def test_cli_base_url_repeated_makes_a_pool(
    servers: list[FakeOpenAIServer], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from evidex.cli import main

    path = tmp_path / "in.jsonl"
    path.write_text("".join(json.dumps(p.model_dump()) + "\n" for p in many(40)))
    a, b, _ = servers
    argv = ["tier", "-q", QUERY, "-p", str(path), "-j", "openai:pool-model", "--db"]
    argv += [f"sqlite:///{tmp_path / 'cli.db'}", "--base-url", a.base_url, "--base-url"]
    dead = f"http://127.0.0.1:{closed_port()}/v1"
    code = main([*argv, dead, "--base-url", b.base_url])
    out = capsys.readouterr().out
    assert code == 0
    assert {c["source"] for c in json.loads(out)["classifications"]} == {"judge"}
    assert len(a.chat_requests) + len(b.chat_requests) == 4
    assert a.chat_requests and b.chat_requests


# ---------------------------------------------------------------------- the cache key


def test_fingerprint_and_cache_do_not_depend_on_the_endpoints(
    servers: list[FakeOpenAIServer], store: SqlStore
) -> None:
    a, b, c = servers
    forms = [
        get_judge("openai:pool-model", base_url=a.base_url),
        pool(a.base_url, b.base_url),
        pool(b.base_url, a.base_url),
        pool(c.base_url, b.base_url, a.base_url),
    ]
    assert len({json.dumps(dict(j.fingerprint()), sort_keys=True) for j in forms}) == 1
    passages = many(20)
    cached = HarnessSettings(backoff_s=0)
    first = run_tier(forms[0], store, passages, settings=cached)
    assert {a.source for a in first.classifications} == {"judge"}
    sent = sum(len(s.chat_requests) for s in servers)
    # a replica added (and the order changed): the cached judgments still serve
    again = run_tier(forms[3], store, passages, settings=cached)
    assert {a.source for a in again.classifications} == {"cache"}
    assert sum(len(s.chat_requests) for s in servers) == sent
    other = get_judge("openai:other-model", base_url=a.base_url)
    assert other.fingerprint() != forms[0].fingerprint() or other.judge_id != forms[0].judge_id
