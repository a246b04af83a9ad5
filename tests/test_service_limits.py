"""The service against bad and huge input: a body over the limit is refused before it is parsed
(413), too many passages or too long a text is a 422 naming the field that never echoes the
input, text that is not valid Unicode is a 422, planning a large request leaves /healthz
answering, and every response has a typed schema in /openapi.json."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from evidex.errors import ConfigError
from evidex.preflight import InputLimits
from evidex.store import SqlStore
from tests.live_service import serve_app
from tests.scripted import ScriptedJudge, tier_reply

pytest.importorskip("fastapi")
from fastapi.testclient import TestClient

from evidex.service import create_app
from evidex.service.guards import BodyLimit

PASSAGES = [
    {"passage_id": "a", "text": "Most adults need 600 IU of vitamin D a day."},
    {"passage_id": "b", "text": "The D-Day landings took place in June 1944."},
]


def _client(store: SqlStore, judge: ScriptedJudge | None = None, **options: Any) -> TestClient:
    judge = judge or ScriptedJudge()
    app = create_app(
        store, judges={"scripted": judge}, auth="off", allowed_hosts=["testserver"], **options
    )
    return TestClient(app)


def _tier(query: Any = "vitamin D", passages: Any = PASSAGES, **extra: Any) -> dict[str, Any]:
    return {"query": query, "passages": passages, "judge": "scripted", **extra}


# --------------------------------------------------------------------------- 413 before parsing


class _Recorder:
    """An ASGI app that reads its whole body, as a framework parsing JSON does."""

    def __init__(self) -> None:
        self.reads = 0
        self.completed = False

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        while True:
            message = await receive()
            self.reads += 1
            if message["type"] == "http.disconnect":
                break
            if not message.get("more_body"):
                self.completed = True
                break
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"parsed"})


def _drive(
    chunks: list[bytes], headers: list[tuple[bytes, bytes]], limit: int
) -> tuple[int, bytes, int, _Recorder]:
    """Send ``chunks`` through the middleware; the status and body it answers, how many chunks
    the client was asked for, and the app behind it."""
    inner = _Recorder()
    asked = 0
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        nonlocal asked
        asked += 1
        index = asked - 1
        return {"type": "http.request", "body": chunks[index], "more_body": index < len(chunks) - 1}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {"type": "http", "method": "POST", "path": "/tier", "headers": headers}
    asyncio.run(BodyLimit(inner, max_bytes=limit)(scope, receive, send))
    status = next(m["status"] for m in sent if m["type"] == "http.response.start")
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return status, body, asked, inner


def test_a_declared_length_over_the_limit_is_413_before_a_byte_is_read() -> None:
    status, body, asked, inner = _drive(
        [b"x" * 10], [(b"content-length", str(10**12).encode())], limit=1000
    )
    assert status == 413 and asked == 0 and inner.reads == 0
    assert json.loads(body)["error"] == "RequestTooLarge"


def test_a_chunked_body_is_cut_off_as_soon_as_it_passes_the_limit() -> None:
    chunks = [b"x" * 400] * 50  # 20 kB in chunks, no Content-Length
    status, body, asked, inner = _drive(chunks, [(b"transfer-encoding", b"chunked")], limit=1000)
    assert status == 413 and b"1000 bytes" in body
    assert asked == 3  # 1200 bytes: the third chunk crossed the limit, nothing more was read
    assert not inner.completed  # the app never had a whole body to parse


def test_a_body_within_the_limit_passes_untouched() -> None:
    status, body, asked, inner = _drive([b"{}"], [(b"content-length", b"2")], limit=1000)
    assert (status, body, asked, inner.completed) == (200, b"parsed", 1, True)


def test_the_app_refuses_a_large_body_without_running_the_job(store: SqlStore) -> None:
    judge = ScriptedJudge([tier_reply])
    client = _client(store, judge, max_body_bytes=2000)
    big = [{"passage_id": f"p{i}", "text": "vitamin D " * 20} for i in range(20)]
    response = client.post("/tier", json=_tier(passages=big))
    assert response.status_code == 413
    assert judge.requests == []
    assert response.headers["x-content-type-options"] == "nosniff"  # still behind the headers
    assert client.post("/tier", json=_tier()).status_code == 200


def test_the_body_limit_comes_from_the_environment(
    store: SqlStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EVIDEX_MAX_BODY_MB", "0.001")  # 1048 bytes
    client = _client(store, ScriptedJudge([tier_reply]))
    assert client.post("/tier", content=b"{" + b" " * 1100 + b"}").status_code == 413
    monkeypatch.setenv("EVIDEX_MAX_BODY_MB", "lots")
    with pytest.raises(ConfigError, match="EVIDEX_MAX_BODY_MB"):
        _client(store)


def _raw_exchange(url: str, head: bytes, chunks: list[bytes]) -> tuple[bytes, int]:
    """Send a request head and body chunks over a socket until the server answers; the status
    line and how many chunks went out before it did."""
    parts = urlsplit(url)
    with socket.create_connection((parts.hostname, parts.port), timeout=10) as sock:
        sock.sendall(head)
        sent = 0
        sock.settimeout(0.05)
        for chunk in chunks:
            try:
                answer = sock.recv(4096)
            except TimeoutError:
                answer = b""
            if answer:
                return answer.split(b"\r\n", 1)[0], sent
            try:
                sock.sendall(chunk)
            except OSError:
                break  # the server closed on us: its answer is waiting
            sent += 1
        sock.settimeout(10)
        return sock.recv(4096).split(b"\r\n", 1)[0], sent


@pytest.mark.network
def test_a_real_server_refuses_huge_and_endless_bodies(store: SqlStore) -> None:
    app = create_app(store, judges={"scripted": ScriptedJudge()}, auth="off")
    with serve_app(app) as url:
        head = (
            b"POST /tier HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Content-Length: 10000000000\r\n\r\n"
        )
        status, sent = _raw_exchange(url, head, [b"x" * 65536] * 10)
        assert status == b"HTTP/1.1 413 Request Entity Too Large" and sent == 0
        head = (
            b"POST /tier HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n"
        )
        chunk = b"10000\r\n" + b" " * 0x10000 + b"\r\n"  # 64 KiB a chunk, 100 MiB in all
        status, sent = _raw_exchange(url, head, [chunk] * 1600)
        assert status.startswith(b"HTTP/1.1 413")
        assert sent < 200  # answered near 4 MiB, long before the client was done
        assert httpx.get(f"{url}/healthz").status_code == 200


# --------------------------------------------------------------------------- 422, no echo


def test_too_many_passages_is_422_naming_the_field(store: SqlStore) -> None:
    client = _client(store, limits=InputLimits(max_passages=3))
    many = [{"passage_id": f"p{i}", "text": f"passage {i}"} for i in range(4)]
    response = client.post("/tier", json=_tier(passages=many))
    assert response.status_code == 422
    assert response.json() == {
        "error": "RequestValidationError",
        "detail": [{"loc": ["body", "passages"], "msg": "at most 3 passages", "type": "too_long"}],
    }


@pytest.mark.parametrize(
    ("path", "body", "loc"),
    [
        ("/tier", _tier(passages=[PASSAGES[0], {"id": "b", "text": "y" * 61}]), [1, "text"]),
        ("/tier", _tier(query="q" * 61), ["query"]),
        ("/rerank", _tier(query="q" * 61), ["query"]),
        ("/audit", {"answer": "a" * 61, "passages": [], "judge": "scripted"}, ["answer"]),
        (
            "/classify",
            {
                "input": "i" * 61,
                "passages": PASSAGES,
                "labels": [{"name": "x", "description": "an x"}],
                "judge": "scripted",
            },
            ["input"],
        ),
    ],
    ids=["passage-text", "tier-query", "rerank-query", "answer", "input"],
)
def test_too_long_a_text_is_422_naming_it_without_echoing_it(
    store: SqlStore, path: str, body: dict[str, Any], loc: list[Any]
) -> None:
    client = _client(store, limits=InputLimits(max_text_chars=60))
    response = client.post(path, json=body)
    assert response.status_code == 422, response.text
    [error] = response.json()["detail"]
    expected = ["body", "passages", *loc] if loc[0] == 1 else ["body", *loc]
    assert error == {
        "loc": expected,
        "msg": "at most 60 characters (got 61)",
        "type": "string_too_long",
    }
    assert "q" * 61 not in response.text and "y" * 61 not in response.text


def test_a_malformed_body_is_422_without_its_input(store: SqlStore) -> None:
    client = _client(store)
    huge = "x" * 1_000_000
    response = client.post("/tier", json={"query": "q", "passages": huge, "judge": "scripted"})
    assert response.status_code == 422
    assert len(response.content) < 1000  # the megabyte stays on the client's side
    body = response.json()
    assert body["error"] == "RequestValidationError"
    assert body["detail"] == [
        {"loc": ["body", "passages"], "msg": "Input should be a valid list", "type": "list_type"}
    ]
    response = client.post(
        "/tier", content=b'{"query": ', headers={"content-type": "application/json"}
    )
    assert response.status_code == 422 and response.json()["detail"][0]["type"] == "json_invalid"


def test_the_default_limits_allow_a_thousand_passages_and_no_more(store: SqlStore) -> None:
    client = _client(store)
    many = [{"passage_id": f"p{i}", "text": "t"} for i in range(1001)]
    response = client.post("/tier", json=_tier(passages=many))
    assert response.status_code == 422
    assert response.json()["detail"][0]["msg"] == "at most 1000 passages"


# --------------------------------------------------------------------------- not Unicode


def _raw_json(client: TestClient, path: str, text: str) -> httpx.Response:
    return client.post(path, content=text.encode(), headers={"content-type": "application/json"})


@pytest.mark.parametrize(
    ("path", "raw", "loc"),
    [
        (
            "/tier",
            '{"query": "\\ud800", "passages": [{"id": "a", "text": "x"}], "judge": "scripted"}',
            ["query"],
        ),
        (
            "/tier",
            '{"query": "q", "passages": [{"id": "a", "text": "x\\udfff"}], "judge": "scripted"}',
            ["passages", 0, "text"],
        ),
        (
            "/classify",
            '{"input": "i", "passages": [{"id": "a", "text": "x"}], '
            '"labels": [{"name": "\\ud83d", "description": "d"}], "judge": "scripted"}',
            ["labels"],
        ),
        (
            "/audit",
            '{"answer": "a", "passages": [], "question": "\\udc80?", "judge": "scripted"}',
            ["question"],
        ),
        ("/review/claim", '{"reviewer": "\\ud800"}', ["reviewer"]),
        ("/keys", '{"role": "client", "name": "\\ud800"}', ["name"]),
    ],
    ids=["query", "passage", "label", "question", "reviewer", "key-name"],
)
def test_a_lone_surrogate_is_422_naming_the_field(
    store: SqlStore, path: str, raw: str, loc: list[Any]
) -> None:
    response = _raw_json(_client(store), path, raw)
    assert response.status_code == 422, response.text
    [error] = response.json()["detail"]
    assert error["loc"] == ["body", *loc]
    # the taxonomy is parsed with the request: pydantic names the bad text first
    assert (
        "lone surrogate" in error["msg"] or "unable to parse raw data as a unicode" in error["msg"]
    )


def test_a_lone_surrogate_in_a_resolve_is_422(store: SqlStore) -> None:
    client = _client(store, ScriptedJudge(["nope"] * 3))
    [item_id] = client.post("/tier", json=_tier()).json()["review_item_ids"]
    raw = '{"decision": "irrelevant", "note": "\\ud800"}'
    response = _raw_json(client, f"/review/{item_id}/resolve", raw)
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"] == ["body", "note"]
    assert client.get(f"/review/{item_id}").json()["status"] == "pending"


def test_a_body_that_is_not_utf8_is_422(store: SqlStore) -> None:
    client = _client(store)
    raw = b'{"query": "caf\xe9", "passages": [{"id": "a", "text": "x"}], "judge": "scripted"}'
    response = client.post("/tier", content=raw, headers={"content-type": "application/json"})
    assert response.status_code == 422
    assert response.json()["detail"] == [
        {"loc": ["body"], "msg": "not UTF-8 text (byte 14)", "type": "unicode_decode"}
    ]


# --------------------------------------------------------------------------- the event loop


class SlowCountJudge(ScriptedJudge):
    """Counting tokens takes a millisecond: planning a thousand passages takes a second."""

    def count_tokens(self, text: str) -> int:
        time.sleep(0.001)
        return super().count_tokens(text)


@pytest.mark.network
def test_healthz_answers_while_a_large_request_is_planned(store: SqlStore) -> None:
    # the judge answers after a little I/O, as a real one does: the loop is free while it waits
    judge = SlowCountJudge([tier_reply] * 200, delay_s=0.002)
    app = create_app(store, judges={"scripted": judge}, auth="off")
    passages = [{"passage_id": f"p{i}", "text": f"{i} vitamin D " * 20} for i in range(1000)]
    body = _tier(passages=passages, batch_size=10)
    latencies: list[float] = []
    with serve_app(app) as url:
        done = threading.Event()
        outcome: dict[str, Any] = {}

        def post() -> None:
            started = time.perf_counter()
            outcome["status"] = httpx.post(f"{url}/tier", json=body, timeout=120).status_code
            outcome["seconds"] = time.perf_counter() - started
            done.set()

        worker = threading.Thread(target=post)
        worker.start()
        with httpx.Client(base_url=url, timeout=30) as client:
            while not done.is_set():
                started = time.perf_counter()
                assert client.get("/healthz").status_code == 200
                latencies.append(time.perf_counter() - started)
                time.sleep(0.02)
        worker.join()
    assert outcome["status"] == 200 and outcome["seconds"] > 1.0  # planning alone took 1 s
    assert len(latencies) > 10
    # planning on the loop held every health check for the whole second; a busy machine
    # (two shared cores) may still delay one now and then
    latencies.sort()
    p90, worst = latencies[int(len(latencies) * 0.9)], latencies[-1]
    assert p90 < 0.2 and worst < 0.6, f"healthz: p90 {p90 * 1000:.0f} ms, max {worst * 1000:.0f} ms"


# --------------------------------------------------------------------------- typed responses


def test_every_response_has_a_typed_schema(store: SqlStore) -> None:
    spec = _client(store).get("/openapi.json").json()
    untyped = []
    for path, operations in spec["paths"].items():
        for method, operation in operations.items():
            ok = {k: v for k, v in operation["responses"].items() if k.startswith("2")}
            assert ok, (method, path)
            for code, response in ok.items():
                for media, content in response.get("content", {}).items():
                    schema = content.get("schema", {})
                    if not schema or schema == {"type": "object"}:
                        untyped.append(f"{method.upper()} {path} {code} {media}")
                    if media == "application/json" and schema.get("additionalProperties"):
                        untyped.append(f"{method.upper()} {path} {code}: a bare mapping")
    assert untyped == []
    schemas = spec["components"]["schemas"]
    for name in ("TierReport", "RerankResult", "ClassifyResult", "AuditResult", "AuditDecision"):
        assert name in schemas
    assert {"ReviewItem", "AuditRow", "Key", "NewKey", "Health"} <= set(schemas)
    metrics = spec["paths"]["/metrics"]["get"]["responses"]["200"]["content"]
    assert list(metrics) == ["text/plain"]


def test_typed_responses_send_the_json_they_always_sent(store: SqlStore) -> None:
    """Timestamps stay ``isoformat()`` (``+00:00``), and a tier report without ``id`` or
    ``context`` has neither key."""
    client = _client(store, ScriptedJudge(["nope"] * 3 + [tier_reply]))
    report = client.post("/tier", json=_tier()).json()
    assert "id" not in report and "context" not in report
    [item_id] = report["review_item_ids"]
    item = client.get(f"/review/{item_id}").json()
    # an item's own endpoint adds the decisions its caller may see (none yet)
    stored = {**store.get_review(item_id), "decisions": []}
    assert item == json.loads(json.dumps(stored, default=_iso))
    assert item["created_at"].endswith("+00:00")
    [row] = client.get("/log", params={"run_id": report["run_id"], "last": 1}).json()
    [stored] = store.audit_rows(run_id=report["run_id"], last=1)
    assert row == json.loads(json.dumps(stored, default=_iso))
    made = client.post("/keys", json={"role": "reviewer", "name": "ana"}).json()
    [listed] = client.get("/keys").json()
    assert listed == {k: v for k, v in made.items() if k != "key"}
    assert listed["created_at"] == store.list_keys()[0].as_dict()["created_at"]
    with_context = client.post("/tier", json=_tier(policy="strict", budget=100)).json()
    assert "context" in with_context and "passages" not in with_context


def _iso(value: Any) -> str:
    return value.isoformat()


def test_a_baseline_window_past_what_a_database_counts_is_422_not_500(store: SqlStore) -> None:
    """The audit's baseline window is a row limit of an audit-log query: past 64 bits the
    database refuses it, so the option is bounded and a huge one is the caller's error."""
    client = _client(store)
    body = {
        "answer": "Adults need 600 IU of vitamin D.",
        "passages": PASSAGES,
        "judge": "scripted",
        "policy": {"baseline_window": 2**70},
    }
    response = client.post("/audit", json=body)
    assert response.status_code == 422, response.text
    [error] = response.json()["detail"]
    assert error["loc"][-1] == "baseline_window" and "1000000" in error["msg"]
