"""The HTTP service: in-process ASGI client, and one real uvicorn server on a loopback port."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from evidex.store import SqlStore
from tests.live_service import serve_app
from tests.scripted import ScriptedJudge, tier_reply

pytest.importorskip("fastapi")
from fastapi.testclient import TestClient

from evidex.service import create_app

PASSAGES = [
    {"passage_id": "a", "text": "Most adults need 600 IU of vitamin D a day."},
    {"passage_id": "b", "text": "The D-Day landings took place in June 1944."},
]


def _client(store: SqlStore, judge: ScriptedJudge) -> TestClient:
    return TestClient(
        create_app(store, judges={"scripted": judge}, auth="off", allowed_hosts=["testserver"])
    )


def test_tier_endpoint_returns_the_spec_schema(store: SqlStore) -> None:
    judge = ScriptedJudge(
        [lambda r: tier_reply(r, b={"tier": "irrelevant", "key_evidence_snippet": None})]
    )
    client = _client(store, judge)
    response = client.post(
        "/tier",
        json={
            "query": "vitamin D dose",
            "passages": PASSAGES,
            "judge": "scripted",
            "policy": "strict",
            "budget": 100,
        },
    )
    assert response.status_code == 200, response.text
    body = response.json()
    assert [c["passage_id"] for c in body["classifications"]] == ["a", "b"]
    assert body["tier_summary"]["irrelevant_count"] == 1
    assert [i["passage_id"] for i in body["context"]["items"]] == ["a"]
    assert "passages" not in body


def test_bad_input_is_422_with_a_message(store: SqlStore) -> None:
    client = _client(store, ScriptedJudge())
    dup = [PASSAGES[0], PASSAGES[0]]
    response = client.post("/tier", json={"query": "q", "passages": dup, "judge": "scripted"})
    assert response.status_code == 422
    assert "unique" in response.json()["detail"]
    response = client.post(
        "/tier", json={"query": "q", "passages": PASSAGES, "judge": "openai:evil"}
    )
    assert response.status_code == 422 and "not enabled" in response.json()["detail"]


def test_fallback_then_review_round_trip(store: SqlStore) -> None:
    # three attempts on the batch, then each passage alone (two attempts each): all invalid
    client = _client(store, ScriptedJudge(["nope"] * 7))
    body = client.post(
        "/tier", json={"query": "q", "passages": PASSAGES, "judge": "scripted"}
    ).json()
    assert {c["source"] for c in body["classifications"]} == {"fallback"}
    [item_id] = body["review_item_ids"]
    assert [i["id"] for i in client.get("/review").json()] == [item_id]
    resolved = client.post(
        f"/review/{item_id}/resolve", json={"decision": "irrelevant", "reviewer": "ana"}
    ).json()
    assert resolved["status"] == "resolved"
    assert client.get("/review").json() == []
    rows = client.get("/log", params={"run_id": body["run_id"]}).json()
    statuses = [r["status"] for r in rows if r["step"] == "tier"]
    assert statuses[:4] == ["invalid"] * 3 + ["split"]
    assert sorted(statuses[4:]) == ["fallback"] * 2 + ["invalid"] * 4


def test_metrics_and_health(store: SqlStore) -> None:
    client = _client(store, ScriptedJudge([tier_reply]))
    client.post("/tier", json={"query": "q", "passages": PASSAGES, "judge": "scripted"})
    text = client.get("/metrics").text
    assert 'evidex_records_total{job="tier",status="ok"} 1.0' in text
    assert client.get("/healthz").json()["status"] == "ok"


@pytest.fixture
def live_server(store: SqlStore) -> Iterator[tuple[str, ScriptedJudge]]:
    judge = ScriptedJudge([tier_reply] * 5)
    with serve_app(create_app(store, judges={"scripted": judge})) as base:
        yield base, judge


@pytest.mark.network
def test_real_server_on_loopback(live_server: tuple[str, Any]) -> None:
    base, judge = live_server
    with httpx.Client(base_url=base, timeout=10) as client:
        response = client.post(
            "/tier", json={"query": "vitamin D", "passages": PASSAGES, "judge": "scripted"}
        )
        assert response.status_code == 200
        assert len(response.json()["classifications"]) == 2
        assert client.get("/healthz").status_code == 200
    assert len(judge.requests) == 1


def test_settings_are_read_once_when_the_service_starts(
    store: SqlStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The configured judge and limits apply; a config change (here a broken one) after the
    start neither costs nor breaks a request."""
    monkeypatch.setenv("EVIDEX_JUDGE_TIER", "scripted")
    monkeypatch.setenv("EVIDEX_TIMEOUT_S", "0.2")
    judge = ScriptedJudge([tier_reply], delay_s=0.5)
    client = _client(store, judge)
    monkeypatch.setenv("EVIDEX_TIMEOUT_S", "not a number")
    monkeypatch.setenv("EVIDEX_JUDGE_TIER", "openai:evil")
    body = client.post("/tier", json={"query": "q", "passages": PASSAGES}).json()
    assert judge.requests, "the configured judge answered the request that named none"
    assert {c["source"] for c in body["classifications"]} == {"fallback"}
    assert "did not answer within 0.2s" in body["classifications"][0]["reason"]
