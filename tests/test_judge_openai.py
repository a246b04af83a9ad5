"""The ``openai:MODEL`` judge through its HTTP client and a real loopback server, running the real
tier job: one test per fault a model or a server can produce, and the harness promises around
each (re-ask wording, temperature-0 strict final attempt, explicit fallback with a review item,
every passage exactly once, one audit row per judge call, no leaked API key)."""

from __future__ import annotations

import asyncio
import datetime
import json
import logging
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import openai
import pytest

import evidex
from evidex.errors import ConfigError, EvidexError, JudgeUnavailable
from evidex.harness.runner import HarnessSettings
from evidex.judges import get_judge
from evidex.judges._openai import OpenAIJudge
from evidex.judging import JudgeRequest, Message, PassageText, Payload, TierPayload
from evidex.store import SqlStore
from evidex.tasks.base import PromptTemplate
from evidex.tasks.tier_reply import reply_schema, reply_tokens
from evidex.types import DEFAULT_TIERS, Passage
from tests.fake_openai_server import (
    Close,
    FakeOpenAIServer,
    Raw,
    Refuses,
    Reply,
    Status,
    closed_port,
    format_mode,
    serve,
    tier_reply_for,
)
from tests.scripted import tier_reply

pytestmark = pytest.mark.network

KEY = "sk-test-SECRET123"
QUERY = "how much vitamin D do adults need?"
FAST = HarnessSettings(backoff_s=0.0)
LADDER = HarnessSettings(backoff_s=0.0, split_batches=False, adapt_batch_size=False)
"""The spec's ladder alone: a failing batch is not split, nor the next batch made smaller
(tests/test_harness_split.py, tests/test_batch_sizing.py)."""
STRICT_REMINDER = PromptTemplate("x", "", "").strict.split("\n")[0]
JUDGE_STATUSES = ("ok", "invalid", "error")


# ---------------------------------------------------------------------- fixtures and helpers


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    with serve() as running:
        yield running


def make_judge(base_url: str, **options: Any) -> OpenAIJudge:
    judge = get_judge("openai:test-model", base_url=base_url, api_key=KEY, **options)
    assert isinstance(judge, OpenAIJudge)
    return judge


@pytest.fixture
def judge(server: FakeOpenAIServer) -> Iterator[OpenAIJudge]:
    built = make_judge(server.base_url)
    yield built
    asyncio.run(built.aclose())


def valid(passages: list[Passage], **overrides: Any) -> dict[str, Any]:
    """A reply that passes validation (snippet = the passage's first five words)."""
    payload = TierPayload("", PassageText.of(passages))
    request = JudgeRequest(job="tier", messages=(), schema={}, payload=payload)
    return tier_reply(request, **overrides)


def text_of(reply: dict[str, Any]) -> str:
    return json.dumps(reply)


def run_tier(
    judge: OpenAIJudge, store: SqlStore, passages: list[Passage], **kw: Any
) -> evidex.TierResult:
    kw.setdefault("settings", FAST)
    return evidex.tier(kw.pop("query", QUERY), passages, judge=judge, store=store, **kw)


def judge_rows(store: SqlStore, run_id: str) -> list[dict[str, Any]]:
    """Audit rows of judge calls (not of calls the open breaker refused before sending)."""
    return [
        row
        for row in store.audit_rows(run_id=run_id)
        if row["status"] in JUDGE_STATUSES
        and not any("circuit breaker open" in e for e in row["errors"])
    ]


def check_invariants(
    result: evidex.TierResult,
    passages: list[Passage],
    store: SqlStore,
    server: FakeOpenAIServer | None,
    *,
    calls_per_row: int = 1,
) -> None:
    """Every passage exactly once, in input order; one audit row per judge call."""
    assert [a.passage_id for a in result.classifications] == [p.passage_id for p in passages]
    if server is not None:
        assert server.unscripted == 0
        assert len(server.chat_requests) == calls_per_row * len(judge_rows(store, result.run_id))


def check_fallback(
    result: evidex.TierResult, store: SqlStore, reason_part: str, failing: str | None = None
) -> None:
    """The whole batch fell back, or only the ``failing`` passage when the last reply graded
    the others validly (they keep the judge's grade)."""
    fell_back = [a for a in result.classifications if failing in (None, a.passage_id)]
    assert {a.source for a in fell_back} == {"fallback"}
    assert {a.tier for a in fell_back} == {DEFAULT_TIERS.fallback_tier}
    for a in fell_back:
        assert a.reason and reason_part in a.reason
    kept = [a for a in result.classifications if a not in fell_back]
    assert {a.source for a in kept} <= {"judge"} and len(kept) == len(result.classifications) - len(
        fell_back
    )
    assert len(result.review_item_ids) == 1
    item = store.get_review(result.review_item_ids[0])
    assert item["job"] == "tier" and item["status"] == "pending"
    assert item["passage_ids"] == [a.passage_id for a in fell_back]
    statuses = [r["status"] for r in store.audit_rows(run_id=result.run_id)]
    assert "fallback" in statuses and "review" in statuses


# ---------------------------------------------------------------------- what is sent


def test_sends_json_schema_response_format_and_reports_the_server_model(
    server: FakeOpenAIServer, judge: OpenAIJudge, store: SqlStore, passages: list[Passage]
) -> None:
    server.add(Reply(text_of(valid(passages))))
    result = run_tier(judge, store, passages)

    check_invariants(result, passages, store, server)
    (sent,) = server.chat_requests
    assert sent.headers["authorization"] == f"Bearer {KEY}"
    assert sent.body["model"] == "test-model"
    assert sent.body["temperature"] == FAST.temperature
    assert sent.body["max_tokens"] == reply_tokens(DEFAULT_TIERS, [p.passage_id for p in passages])
    assert [m["role"] for m in sent.messages] == ["system", "user"]
    fmt = sent.body["response_format"]
    assert fmt["type"] == "json_schema"
    assert fmt["json_schema"]["strict"] is False
    assert fmt["json_schema"]["name"] == "tier_reply"
    assert fmt["json_schema"]["schema"] == reply_schema(
        DEFAULT_TIERS, [p.passage_id for p in passages]
    )
    (row,) = judge_rows(store, result.run_id)
    assert row["model_version"] == server.reported_model
    assert judge.model_version == server.reported_model


def test_usage_tokens_land_in_the_audit_log(
    server: FakeOpenAIServer, judge: OpenAIJudge, store: SqlStore, passages: list[Passage]
) -> None:
    server.add(Reply("not json at all", prompt_tokens=300, completion_tokens=7))
    server.add(Reply(text_of(valid(passages)), prompt_tokens=321, completion_tokens=54))
    result = run_tier(judge, store, passages)

    check_invariants(result, passages, store, server)
    rows = judge_rows(store, result.run_id)
    assert [(r["status"], r["prompt_tokens"], r["completion_tokens"]) for r in rows] == [
        ("invalid", 300, 7),
        ("ok", 321, 54),
    ]
    assert (result.usage.prompt_tokens, result.usage.completion_tokens) == (621, 61)


def test_server_rejecting_json_schema_gets_json_object_with_the_schema_and_it_is_remembered(
    server: FakeOpenAIServer, judge: OpenAIJudge, store: SqlStore, passages: list[Passage]
) -> None:
    server.add(
        Status(
            400, "response_format of type json_schema is not supported", param="response_format"
        ),
        Reply(text_of(valid(passages))),
    )
    first = run_tier(judge, store, passages)
    assert {a.source for a in first.classifications} == {"judge"}
    # one judge call, two HTTP requests: the rejected one and the same call as json_object
    check_invariants(first, passages, store, server, calls_per_row=2)
    rejected, retried = server.chat_requests
    assert rejected.body["response_format"]["type"] == "json_schema"
    schema = rejected.body["response_format"]["json_schema"]["schema"]
    assert retried.body["response_format"] == {"type": "json_object", "schema": schema}
    assert retried.messages == rejected.messages
    assert judge.structured_output == "json_object"
    (note,) = [r for r in store.audit_rows(run_id=first.run_id) if r["step"] == "judge.note"]
    assert "refused structured output json_schema (HTTP 400" in note["detail"]["detail"]
    assert note["detail"]["endpoint"] == server.base_url

    server.add(Reply(text_of(valid(passages))))
    second = run_tier(judge, store, passages, query="vitamin D dose for adults")
    assert {a.source for a in second.classifications} == {"judge"}
    assert server.chat_requests[-1].body["response_format"]["type"] == "json_object"
    assert len(server.chat_requests) == 3
    notes = [r for r in store.audit_rows(run_id=second.run_id) if r["step"] == "judge.note"]
    assert notes == []  # detected once


def test_server_answering_500_about_response_format_negotiates_once_per_endpoint(
    server: FakeOpenAIServer, judge: OpenAIJudge, store: SqlStore
) -> None:
    """llama-cpp-python's server: json_schema refused with HTTP 500 naming response_format,
    json_object with the schema accepted. Five batches at once: the refusal is detected and
    noted once, every later request goes out as json_object, and no passage falls back."""
    server.default = Refuses(frozenset({"json_schema"}), Reply(tier_reply_for))
    many = [Passage(passage_id=f"q{i}", text=f"Fact {i} about vitamin D.") for i in range(25)]
    result = run_tier(judge, store, many, batch_size=5)

    assert {a.source for a in result.classifications} == {"judge"}
    modes = [format_mode(r.body) for r in server.chat_requests]
    refused = modes.count("json_schema")
    # only the calls that chose their mode before the first refusal came back were sent as
    # json_schema (one of them may reach the server after another's json_object retry); each
    # batch then went out once as json_object with the schema
    assert 1 <= refused <= FAST.max_concurrency
    assert modes.count("json_object+schema") == 5 and len(modes) == refused + 5
    assert [r["status"] for r in judge_rows(store, result.run_id)] == ["ok"] * 5
    notes = [r for r in store.audit_rows(run_id=result.run_id) if r["step"] == "judge.note"]
    assert len(notes) == 1
    assert "refused structured output json_schema (HTTP 500" in notes[0]["detail"]["detail"]
    assert "json_object with the schema from now on" in notes[0]["detail"]["detail"]
    assert judge.structured_output == "json_object"


def test_server_refusing_json_schema_and_json_object_gets_the_prompt_alone(
    server: FakeOpenAIServer, judge: OpenAIJudge, store: SqlStore, passages: list[Passage]
) -> None:
    refused = frozenset({"json_schema", "json_object+schema", "json_object"})
    server.default = Refuses(refused, Reply(tier_reply_for))
    first = run_tier(judge, store, passages)
    second = run_tier(judge, store, passages, query="vitamin D dose for adults")

    for result in (first, second):
        assert {a.source for a in result.classifications} == {"judge"}
    modes = [format_mode(r.body) for r in server.chat_requests]
    assert modes == ["json_schema", "json_object+schema", "json_object", "none", "none"]
    assert judge.structured_output == "none"
    notes = [r for r in store.audit_rows(run_id=first.run_id) if r["step"] == "judge.note"]
    assert len(notes) == 3 and "the prompt alone from now on" in notes[-1]["detail"]["detail"]


def test_insisting_on_json_schema_against_a_500_refusal_is_a_config_error(
    server: FakeOpenAIServer, store: SqlStore, passages: list[Passage]
) -> None:
    judge = make_judge(server.base_url, structured_output="json_schema")
    server.default = Refuses(frozenset({"json_schema"}), Reply(tier_reply_for))
    with pytest.raises(ConfigError, match="structured_output='auto'"):
        run_tier(judge, store, passages)
    assert len(server.chat_requests) == 1


def test_explicit_json_schema_mode_rejected_is_a_config_error_without_retries(
    server: FakeOpenAIServer, store: SqlStore, passages: list[Passage]
) -> None:
    judge = make_judge(server.base_url, structured_output="json_schema")
    server.add(Status(400, "response_format is not supported by this server"))
    with pytest.raises(ConfigError, match="structured_output='auto'"):
        run_tier(judge, store, passages)
    assert len(server.chat_requests) == 1


def test_prompt_only_mode_sends_no_response_format(
    server: FakeOpenAIServer, store: SqlStore, passages: list[Passage]
) -> None:
    judge = make_judge(server.base_url, structured_output="none")
    server.add(Reply(text_of(valid(passages))))
    result = run_tier(judge, store, passages)
    check_invariants(result, passages, store, server)
    assert "response_format" not in server.chat_requests[0].body


# ---------------------------------------------------------------------- chatty but valid output


@pytest.mark.parametrize(
    "wrap",
    [
        pytest.param(lambda js: f"Sure! Here are the grades:\n{js}\nLet me know.", id="prose"),
        pytest.param(lambda js: f"```json\n{js}\n```", id="code-fence"),
    ],
)
def test_prose_or_fences_around_the_json_are_accepted_without_a_reask(
    wrap: Callable[[str], str],
    server: FakeOpenAIServer,
    judge: OpenAIJudge,
    store: SqlStore,
    passages: list[Passage],
) -> None:
    server.add(Reply(wrap(text_of(valid(passages)))))
    result = run_tier(judge, store, passages)

    check_invariants(result, passages, store, server)
    assert {a.source for a in result.classifications} == {"judge"}
    assert len(server.chat_requests) == 1


# ---------------------------------------------------------------------- invalid output


def _truncated(passages: list[Passage]) -> str:
    full = text_of(valid(passages))
    return full[: len(full) // 2]


def _drop(pid: str) -> Callable[[list[Passage]], str]:
    def bad(passages: list[Passage]) -> str:
        reply = valid(passages)
        reply["classifications"] = [c for c in reply["classifications"] if c["passage_id"] != pid]
        return text_of(reply)

    return bad


def _repeat(pid: str) -> Callable[[list[Passage]], str]:
    def bad(passages: list[Passage]) -> str:
        reply = valid(passages)
        reply["classifications"] += [c for c in reply["classifications"] if c["passage_id"] == pid]
        return text_of(reply)

    return bad


def _invent(passages: list[Passage]) -> str:
    reply = valid(passages)
    reply["classifications"].append(
        {
            "passage_id": "p99",
            "tier": "irrelevant",
            "justification": "It is about something else.",
            "key_evidence_snippet": None,
        }
    )
    return text_of(reply)


def _override(**fields: Any) -> Callable[[list[Passage]], str]:
    def bad(passages: list[Passage]) -> str:
        return text_of(valid(passages, p1=fields))

    return bad


INVALID = [
    pytest.param(_truncated, "truncated or malformed", None, id="truncated-json"),
    pytest.param(_drop("p3"), "passage_id 'p3' is missing", "p3", id="missing-id"),
    pytest.param(_repeat("p2"), "passage_id 'p2' appears 2 times", "p2", id="duplicated-id"),
    pytest.param(_invent, "passage_id 'p99' is not in this batch", None, id="invented-id"),
    pytest.param(
        _override(tier="highly-relevant"),
        "tier 'highly-relevant' is not one of",
        "p1",
        id="wrong-tier",
    ),
    pytest.param(
        _override(key_evidence_snippet="Vitamin D is made on the moon"),
        "is not verbatim in the passage",
        "p1",
        id="snippet-not-in-passage",
    ),
    pytest.param(
        _override(justification="  "), "justification is empty", "p1", id="empty-justification"
    ),
]


@pytest.mark.parametrize(("bad", "error", "failing"), INVALID)
def test_invalid_reply_is_reasked_with_the_error_then_strict_at_temperature_zero(
    bad: Callable[[list[Passage]], str],
    error: str,
    failing: str | None,
    server: FakeOpenAIServer,
    judge: OpenAIJudge,
    store: SqlStore,
    passages: list[Passage],
) -> None:
    server.add(Reply(bad(passages)), Reply(bad(passages)), Reply(text_of(valid(passages))))
    result = run_tier(judge, store, passages, settings=LADDER)

    check_invariants(result, passages, store, server)
    assert {a.source for a in result.classifications} == {"judge"}
    assert result.review_item_ids == []
    first, reask, final = server.chat_requests
    assert error not in first.text
    # the re-ask shows the model its own answer and what was wrong with it
    assert error in reask.messages[-1]["content"]
    assert reask.messages[-2] == {"role": "assistant", "content": bad(passages)}
    assert reask.messages[: len(first.messages)] == first.messages
    assert reask.body["temperature"] == FAST.temperature
    # the last attempt: temperature 0 and the strict format reminder
    assert final.body["temperature"] == 0
    assert error in final.text
    assert final.messages[-1]["content"].startswith(STRICT_REMINDER)
    statuses = [r["status"] for r in judge_rows(store, result.run_id)]
    assert statuses == ["invalid", "invalid", "ok"]


@pytest.mark.parametrize(("bad", "error", "failing"), INVALID)
def test_invalid_reply_every_time_falls_back_with_a_review_item(
    bad: Callable[[list[Passage]], str],
    error: str,
    failing: str | None,
    server: FakeOpenAIServer,
    judge: OpenAIJudge,
    store: SqlStore,
    passages: list[Passage],
) -> None:
    server.add(Reply(bad(passages)), Reply(bad(passages)), Reply(bad(passages)))
    result = run_tier(judge, store, passages, settings=LADDER)

    check_invariants(result, passages, store, server)
    check_fallback(result, store, error, failing)
    assert [r["status"] for r in judge_rows(store, result.run_id)] == ["invalid"] * 3
    assert server.chat_requests[-1].body["temperature"] == 0


# ---------------------------------------------------------------------- transport faults


def test_rate_limit_429_is_retried_and_then_succeeds(
    server: FakeOpenAIServer, judge: OpenAIJudge, store: SqlStore, passages: list[Passage]
) -> None:
    server.add(
        Status(429, "rate limit reached", headers={"Retry-After": "0"}),
        Reply(text_of(valid(passages))),
    )
    result = run_tier(judge, store, passages)

    check_invariants(result, passages, store, server)
    assert {a.source for a in result.classifications} == {"judge"}
    error, ok = judge_rows(store, result.run_id)
    assert (error["status"], ok["status"]) == ("error", "ok")
    assert "HTTP 429, retry after 0s" in error["errors"][0]
    # nothing to correct after a transport fault: the same prompt again, no re-ask
    first, second = server.chat_requests
    assert second.messages == first.messages


def test_retry_after_sets_the_wait_before_the_next_attempt(
    server: FakeOpenAIServer,
    judge: OpenAIJudge,
    store: SqlStore,
    passages: list[Passage],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    waits: list[float] = []

    async def record(seconds: float) -> None:
        waits.append(seconds)

    monkeypatch.setattr("evidex.harness.runner.asyncio.sleep", record)
    server.add(
        Status(429, "rate limit reached", headers={"Retry-After": "7"}),
        Status(503, "busy", headers={"Retry-After": "3600"}),
        Reply(text_of(valid(passages))),
    )
    result = run_tier(judge, store, passages)

    assert {a.source for a in result.classifications} == {"judge"}
    # the server's wait, not the short backoff; an hour is capped at max_retry_after_s
    assert waits == [7.0, HarnessSettings().max_retry_after_s]


@pytest.mark.parametrize(
    ("header", "expected"),
    [("12", 12.0), ("0.5", 0.5), ("-3", 0.0), ("soon", None), (None, None)],
)
def test_retry_after_header_forms(header: str | None, expected: float | None) -> None:
    from evidex.judges._openai import _retry_after_seconds

    assert _retry_after_seconds(header) == expected


def test_retry_after_as_an_http_date() -> None:
    from email.utils import format_datetime

    from evidex.judges._openai import _retry_after_seconds

    later = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=30)
    seconds = _retry_after_seconds(format_datetime(later, usegmt=True))
    assert seconds is not None and 25 <= seconds <= 30


def test_server_error_500_every_time_falls_back(
    server: FakeOpenAIServer, judge: OpenAIJudge, store: SqlStore, passages: list[Passage]
) -> None:
    server.add(*[Status(500, "the model crashed")] * 3)
    result = run_tier(judge, store, passages)

    check_invariants(result, passages, store, server)
    check_fallback(result, store, "HTTP 500")
    assert [r["status"] for r in judge_rows(store, result.run_id)] == ["error"] * 3


def test_dropped_connection_is_retried(
    server: FakeOpenAIServer, judge: OpenAIJudge, store: SqlStore, passages: list[Passage]
) -> None:
    server.add(Close(), Reply(text_of(valid(passages))))
    result = run_tier(judge, store, passages)

    check_invariants(result, passages, store, server)
    assert {a.source for a in result.classifications} == {"judge"}
    error, _ = judge_rows(store, result.run_id)
    assert "cannot reach openai:test-model" in error["errors"][0]


def test_server_slower_than_the_harness_timeout_falls_back(
    server: FakeOpenAIServer, judge: OpenAIJudge, store: SqlStore, passages: list[Passage]
) -> None:
    # The timeout covers connecting too: long enough that a loaded machine still sends
    # every attempt, so each audit row matches a request the server saw.
    server.add(*[Reply(text_of(valid(passages)), delay_s=5.0)] * 3)
    result = run_tier(judge, store, passages, settings=HarnessSettings(timeout_s=1.0, backoff_s=0))

    check_invariants(result, passages, store, server)
    check_fallback(result, store, "did not answer within 1s")


def test_server_slower_than_the_client_timeout_falls_back(
    server: FakeOpenAIServer, store: SqlStore, passages: list[Passage]
) -> None:
    judge = make_judge(server.base_url, timeout_s=1.0)
    server.add(*[Reply(text_of(valid(passages)), delay_s=5.0)] * 3)
    result = run_tier(judge, store, passages)

    check_invariants(result, passages, store, server)
    check_fallback(result, store, "did not answer within 1s")


def test_unreachable_server_falls_back(store: SqlStore, passages: list[Passage]) -> None:
    judge = make_judge(f"http://127.0.0.1:{closed_port()}/v1")
    result = run_tier(judge, store, passages)

    check_invariants(result, passages, store, None)
    check_fallback(result, store, "cannot reach openai:test-model")
    rows = judge_rows(store, result.run_id)
    assert [r["status"] for r in rows] == ["error"] * 3


def test_circuit_breaker_opens_then_fails_fast_without_calling_the_server(
    server: FakeOpenAIServer, judge: OpenAIJudge, store: SqlStore, passages: list[Passage]
) -> None:
    settings = HarnessSettings(backoff_s=0, breaker_threshold=2, breaker_cooldown_s=600)
    server.add(Status(503, "overloaded"), Status(503, "overloaded"))
    first = run_tier(judge, store, passages, settings=settings)

    check_invariants(first, passages, store, server)
    check_fallback(first, store, "circuit breaker open")
    assert len(server.chat_requests) == 2

    second = run_tier(judge, store, passages, settings=settings, query="vitamin D for adults")
    check_fallback(second, store, "circuit breaker open")
    assert len(server.chat_requests) == 2  # the open breaker sent nothing
    assert judge_rows(store, second.run_id) == []


def test_several_batches_each_keep_their_passages(
    server: FakeOpenAIServer, judge: OpenAIJudge, store: SqlStore
) -> None:
    many = [Passage(passage_id=f"q{i}", text=f"Fact {i} about vitamin D.") for i in range(12)]
    by_id = {p.passage_id: p for p in many}

    def answer(body: dict[str, Any]) -> str:
        schema = body["response_format"]["json_schema"]["schema"]
        ids = schema["properties"]["classifications"]["items"]["properties"]["passage_id"]["enum"]
        return text_of(valid([by_id[i] for i in ids]))

    server.add(Reply("{}"), *[Reply(answer)] * 2)  # the first batch to ask is re-asked once
    result = run_tier(judge, store, many, batch_size=6)

    check_invariants(result, many, store, server)
    assert {a.source for a in result.classifications} == {"judge"}


# ---------------------------------------------------------------------- usage errors


@pytest.mark.parametrize(
    ("status", "words"),
    [(401, "refused the credentials"), (403, "refused the credentials"), (404, "no model")],
)
def test_bad_key_or_unknown_model_is_a_config_error_without_retries(
    status: int,
    words: str,
    server: FakeOpenAIServer,
    judge: OpenAIJudge,
    store: SqlStore,
    passages: list[Passage],
) -> None:
    server.add(Status(status, "nope"))
    with pytest.raises(ConfigError, match=words):
        run_tier(judge, store, passages)
    assert len(server.chat_requests) == 1


# ---------------------------------------------------------------------- no vendor error escapes

FAULTS = [
    pytest.param(Status(400, "bad request"), ConfigError, id="400"),
    pytest.param(Status(401, "bad key"), ConfigError, id="401"),
    pytest.param(Status(403, "forbidden"), ConfigError, id="403"),
    pytest.param(Status(404, "no such model"), ConfigError, id="404"),
    pytest.param(Status(408, "request timeout"), JudgeUnavailable, id="408"),
    pytest.param(Status(409, "conflict"), JudgeUnavailable, id="409"),
    pytest.param(Status(413, "too large"), ConfigError, id="413"),
    pytest.param(Status(422, "unprocessable"), ConfigError, id="422"),
    pytest.param(Status(429, "slow down"), JudgeUnavailable, id="429"),
    pytest.param(Status(500, "boom"), JudgeUnavailable, id="500"),
    pytest.param(Status(503, "overloaded"), JudgeUnavailable, id="503"),
    pytest.param(Close(), JudgeUnavailable, id="connection-closed"),
    pytest.param(Raw("this is not json"), JudgeUnavailable, id="200-not-json"),
    pytest.param(Raw('{"unexpected": true}'), JudgeUnavailable, id="200-not-a-completion"),
    pytest.param(
        Raw("<html>bad gateway</html>", 502, "text/html"), JudgeUnavailable, id="502-html"
    ),
]


@pytest.mark.parametrize(("behaviour", "expected"), FAULTS)
def test_every_server_fault_becomes_an_evidex_error(
    behaviour: Any, expected: type[EvidexError], server: FakeOpenAIServer
) -> None:
    judge = make_judge(server.base_url, structured_output="none")
    server.add(behaviour)
    request = JudgeRequest(
        job="tier", messages=(Message("user", "grade"),), schema={}, payload=Payload()
    )
    with pytest.raises(EvidexError) as caught:  # a transport's own exception would escape here
        asyncio.run(judge.complete(request))
    assert type(caught.value) is expected
    assert caught.value.__cause__ is not None  # raised from the transport's error, not instead


def test_client_timeout_and_unreachable_server_become_judge_unavailable(
    server: FakeOpenAIServer,
) -> None:
    request = JudgeRequest(
        job="tier", messages=(Message("user", "grade"),), schema={}, payload=Payload()
    )
    slow = make_judge(server.base_url, timeout_s=0.2)
    server.add(Reply("{}", delay_s=3.0))
    with pytest.raises(JudgeUnavailable, match=r"did not answer within 0\.2s"):
        asyncio.run(slow.complete(request))
    gone = make_judge(f"http://127.0.0.1:{closed_port()}/v1")
    with pytest.raises(JudgeUnavailable, match="cannot reach"):
        asyncio.run(gone.complete(request))


def test_fake_server_lists_its_model() -> None:
    with serve() as running:
        client = openai.OpenAI(api_key="unused", base_url=running.base_url, max_retries=0)
        try:
            models = [m.id for m in client.models.list()]
        finally:
            client.close()
    assert models == [FakeOpenAIServer.reported_model]


# ---------------------------------------------------------------------- secrets


def test_api_key_never_leaks(
    server: FakeOpenAIServer,
    store: SqlStore,
    passages: list[Passage],
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    judge = make_judge(server.base_url, headers={"X-Team": "retrieval"})
    # a server that echoes the credentials it got, in a retryable and in a fatal error
    server.add(Status(500, "upstream failed for {auth}"), Reply(text_of(valid(passages))))
    result = run_tier(judge, store, passages)
    server.add(Status(401, "Incorrect API key provided: {auth}"))
    with pytest.raises(ConfigError) as caught:
        run_tier(judge, store, passages, query="vitamin D dose for the elderly")

    assert all(r.headers["authorization"] == f"Bearer {KEY}" for r in server.chat_requests)
    error_row = judge_rows(store, result.run_id)[0]
    assert "upstream failed for Bearer ***" in error_row["errors"][0]  # echoed, then scrubbed
    texts = {
        "judge_id": judge.judge_id,
        "repr": repr(judge) + repr(judge.options),
        "fingerprint": json.dumps(dict(judge.fingerprint())),
        "error": str(caught.value),
        "traceback": "".join(traceback.format_exception(caught.value)),
        "log": caplog.text,
        "result": result.model_dump_json(),
    }
    for where, text in texts.items():
        assert KEY not in text, where
    store.close()
    db_files = list(tmp_path.glob("evidex.db*"))
    assert db_files
    for path in db_files:
        assert KEY.encode() not in path.read_bytes(), path.name


def test_a_server_on_this_machine_gets_the_deadlines_of_a_local_model() -> None:
    """A model served on this machine answers at CPU speed: reading ten passages takes minutes
    on two cores, so before anything was measured its first token may take 15 minutes, not the
    minute an API gets. Neither has a whole-call limit unless one is set, which the harness
    then doubles (room for a second endpoint of a pool)."""
    local = get_judge("openai:m", base_url="http://127.0.0.1:8080/v1", api_key=KEY)
    named = get_judge("openai:m", base_urls=["http://localhost:1/v1", "http://[::1]:2/v1"])
    remote = get_judge("openai:m", base_url="https://api.example.com/v1", api_key=KEY)
    mixed = get_judge(
        "openai:m", base_urls=["http://127.0.0.1:1/v1", "https://api.example.com/v1"], api_key=KEY
    )
    chosen = get_judge("openai:m", base_url="http://127.0.0.1:1/v1", api_key=KEY, timeout_s=5)
    judges = [local, named, remote, mixed, chosen]
    firsts = [j.pool.endpoints[0].pace.deadlines(1000) for j in judges]  # type: ignore[attr-defined]
    assert [(d.first_token_s, d.idle_s, d.total_s) for d in firsts] == [
        (900, 60, None),
        (900, 60, None),
        (60, 60, None),
        (60, 60, None),
        (5, 60, 5),
    ]
    assert [j.default_timeout_s for j in judges] == [None, None, None, None, 10]
