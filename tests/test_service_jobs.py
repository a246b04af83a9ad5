"""HTTP endpoints of rerank, classify and audit, in-process, with the scripted judge."""

from __future__ import annotations

from typing import Any

import pytest

from evidex.store import SqlStore
from tests import audit_fixtures as af
from tests import classify_fixtures as cf
from tests.scripted import ScriptedJudge
from tests.test_rerank import rank_reply

pytest.importorskip("fastapi")
from fastapi.testclient import TestClient

from evidex.service import create_app


def _client(store: SqlStore, judge: ScriptedJudge) -> TestClient:
    return TestClient(
        create_app(store, judges={"scripted": judge}, auth="off", allowed_hosts=["testserver"])
    )


def _dump(passages: list[Any]) -> list[dict[str, Any]]:
    return [p.model_dump(mode="json") for p in passages]


def test_rerank_endpoint(store: SqlStore) -> None:
    passages = [
        {"passage_id": f"p{i}", "text": f"passage {i} about vitamin D doses"} for i in range(4)
    ]
    client = _client(store, ScriptedJudge([rank_reply(["p2", "p0"])]))
    response = client.post(
        "/rerank",
        json={
            "query": "vitamin D",
            "passages": passages,
            "judge": "scripted",
            "strategy": "allpairs",
            "top_k": 2,
        },
    )
    assert response.status_code == 200, response.text
    ranked = response.json()["ranked_passages"]
    # the strict top-k, as `evidex rerank --top-k` prints it: one behaviour for both
    assert [(r["passage_id"], r["rank"]) for r in ranked] == [("p2", 1), ("p0", 2)]
    assert response.json()["top_k"] == 2


@pytest.mark.parametrize("top_k", [1, 3])
def test_rerank_over_http_returns_the_top_k_as_the_cli_prints_it(
    store: SqlStore, top_k: int, tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    from evidex import judges
    from evidex.cli import main

    rows = [{"passage_id": f"p{i}", "text": f"passage {i} about vitamin D"} for i in range(4)]
    body = {"query": "vitamin D", "passages": rows, "judge": "scripted", "strategy": "allpairs"}
    reply = rank_reply(["p3", "p1"])
    http = _client(store, ScriptedJudge([reply])).post("/rerank", json={**body, "top_k": top_k})
    assert http.status_code == 200, http.text
    path = tmp_path / "p.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    judge = ScriptedJudge([reply])
    saved = dict(judges.JUDGES)
    judges.register_judge("scripted", lambda spec, **options: judge)
    try:
        argv = ["rerank", "-q", "vitamin D", "-p", str(path), "-j", "scripted", "-s", "allpairs"]
        code = main([*argv, "--top-k", str(top_k), "--db", f"sqlite:///{tmp_path / 'c.db'}"])
    finally:
        judges.JUDGES.clear()
        judges.JUDGES.update(saved)
    assert code == 0
    cli = json.loads(capsys.readouterr().out)["ranked_passages"]
    assert len(cli) == top_k
    same = ("passage_id", "rank", "source")
    assert [[r[k] for k in same] for r in http.json()["ranked_passages"]] == [
        [r[k] for k in same] for r in cli
    ]


def test_classify_endpoint(store: SqlStore) -> None:
    client = _client(store, ScriptedJudge([cf.reply()]))
    labels = [{"label": d.name, "description": d.description} for d in cf.TAXONOMY.labels]
    response = client.post(
        "/classify",
        json={
            "input": cf.INPUT,
            "passages": _dump(cf.PASSAGES),
            "labels": labels,
            "judge": "scripted",
        },
    )
    assert response.status_code == 200, response.text
    body = response.json()
    assert [c["label"] for c in body["classifications"]] == ["REFUND"]
    assert body["source"] == "judge"


def test_audit_endpoints_and_the_user_facing_decision(store: SqlStore) -> None:
    replies = [af.reply(af.supported(), af.inferred(), af.contradicted())] * 2
    client = _client(store, ScriptedJudge(replies))
    request = {"answer": af.ANSWER, "passages": _dump(af.PASSAGES), "judge": "scripted"}
    full = client.post("/audit", json=request)
    assert full.status_code == 200, full.text
    assert full.json()["decision"]["decision"] == "block"
    decision = client.post("/audit/decision", json=request).json()
    assert decision["decision"] == "block"
    text = str(decision)
    assert "raw_output" not in text and "explanation" not in text
