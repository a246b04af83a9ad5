"""The service and your own prompts and the grounding check: the prompt comes from the
server's configuration only (a request never names a file on the server), and ``/rerank``
takes ``check_grounding``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from evidex.errors import ConfigError
from evidex.store import SqlStore
from evidex.tasks.tier import TIER_TEMPLATE
from evidex.types import Passage
from tests.scripted import ScriptedJudge, rank_reply, tier_reply

pytest.importorskip("fastapi")

from tests.test_service_jobs import _client, _dump

QUERY = "how much vitamin D do adults need?"


def _user_text(judge: ScriptedJudge) -> str:
    return "\n".join(m.content for m in judge.requests[0].messages if m.role == "user")


def _tier_body(passages: list[Passage], **extra: Any) -> dict[str, Any]:
    return {"query": QUERY, "passages": _dump(passages[:5]), "judge": "scripted", **extra}


def test_the_servers_configured_prompt_is_used(
    store: SqlStore, passages: list[Passage], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "tier.txt"
    path.write_text("Server wording. [QUERY]\n[PASSAGES]\n", encoding="utf-8")
    monkeypatch.setenv("EVIDEX_PROMPT_TIER", str(path))
    judge = ScriptedJudge([tier_reply])
    response = _client(store, judge).post("/tier", json=_tier_body(passages))

    assert response.status_code == 200, response.text
    assert _user_text(judge).startswith("Server wording.")
    assert response.json()["prompt_version"] != TIER_TEMPLATE.version


def test_a_request_cannot_name_a_prompt_file_on_the_server(
    store: SqlStore, passages: list[Passage], tmp_path: Path
) -> None:
    path = tmp_path / "planted.txt"
    path.write_text("Planted wording. [QUERY]\n[PASSAGES]\n", encoding="utf-8")
    judge = ScriptedJudge([tier_reply])
    response = _client(store, judge).post("/tier", json=_tier_body(passages, prompt=str(path)))

    if response.status_code == 200:  # the field is not an option: it is never read
        assert "Planted wording" not in _user_text(judge)
        assert response.json()["prompt_version"] == TIER_TEMPLATE.version
    else:
        assert response.status_code == 422 and judge.requests == []


def test_rerank_endpoint_checks_grounding_on_request(
    store: SqlStore, passages: list[Passage]
) -> None:
    judge = ScriptedJudge([rank_reply(["p2", "p6"]), lambda r: tier_reply(r, "irrelevant")])
    body = {
        "query": QUERY,
        "passages": _dump(passages),
        "judge": "scripted",
        "strategy": "allpairs",
        "top_k": 2,
        "check_grounding": True,
    }
    client = _client(store, judge)
    response = client.post("/rerank", json=body)

    assert response.status_code == 200, response.text
    grounding = response.json()["grounding"]
    assert grounding["answered"] is False and grounding["checked"] == ["p2", "p6"]
    assert len(response.json()["review_item_ids"]) == 1
    exported = client.get("/metrics").text
    assert 'evidex_rerank_grounding_total{outcome="not_answered"} 1.0' in exported


def test_the_prompt_files_are_read_once_at_start(
    store: SqlStore, passages: list[Passage], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "tier.txt"
    path.write_text("At start. [QUERY]\n[PASSAGES]\n", encoding="utf-8")
    monkeypatch.setenv("EVIDEX_PROMPT_TIER", str(path))
    judge = ScriptedJudge([tier_reply])
    client = _client(store, judge)
    path.write_text("Edited later. [QUERY]\n[PASSAGES]\n", encoding="utf-8")
    assert client.post("/tier", json=_tier_body(passages)).status_code == 200
    assert _user_text(judge).startswith("At start.")

    monkeypatch.setenv("EVIDEX_PROMPT_TIER", str(tmp_path / "missing.txt"))
    with pytest.raises(ConfigError, match=r"missing\.txt: cannot read the prompt file"):
        _client(store, judge)
