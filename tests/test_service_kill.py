"""The service killed with SIGKILL under load loses no audit row of an answer it gave.

``evidex serve`` runs as its own process (a real uvicorn) on a real SQLite file, and on a real
PostgreSQL database where the server binaries are installed; its ``openai:`` judge is the fake
OpenAI server of the tests. Clients keep 32 requests in flight, each with a query of its own (a
judge call each, nothing cached), until the server has answered a few hundred; then it is
killed mid-load. Every response a client received must have, in the store, the rows of each of
its judge attempts (an ``ok`` row with the labels it answered) and its cache row: the audit and
cache rows are committed in batches by a writer thread, and a job flushes them before it
answers.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa

from evidex.store import open_store
from tests import pg_server
from tests.fake_openai_server import Reply, serve, tier_reply_for
from tests.live_service import server_process

pytest.importorskip("fastapi")

JUDGE = "openai:fake-model"
IN_FLIGHT = 32
ANSWERS_BEFORE_KILL = 300


@pytest.fixture(params=["sqlite", "postgresql"])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'killed.db'}"
        return
    pytest.importorskip("psycopg", reason="the postgres extra is not installed")
    reason = pg_server.missing()
    if reason is not None:
        pytest.skip(reason)
    with pg_server.temp_postgres() as url:
        yield url


async def _load(base: str, key: str, pid: int) -> list[dict[str, Any]]:
    """Requests from ``IN_FLIGHT`` clients until ``ANSWERS_BEFORE_KILL`` answers are in, then
    SIGKILL to the server while the others are in flight; returns every answer received."""
    answers: list[dict[str, Any]] = []
    killed = asyncio.Event()
    counter = iter(range(1_000_000))

    async def client(http: httpx.AsyncClient) -> None:
        while not killed.is_set():
            n = next(counter)
            body = {
                "query": f"how much vitamin D do adults need? (request {n})",
                "passages": [
                    {"passage_id": f"p{i}", "text": f"Request {n}, passage {i}: 600 IU a day."}
                    for i in range(5)
                ],
            }
            try:
                response = await http.post("/tier", json=body)
            except httpx.HTTPError:
                return  # the server is gone
            assert response.status_code == 200, response.text
            answers.append(response.json())
            if len(answers) >= ANSWERS_BEFORE_KILL and not killed.is_set():
                os.kill(pid, signal.SIGKILL)
                killed.set()

    headers = {"Authorization": f"Bearer {key}"}
    limits = httpx.Limits(max_connections=IN_FLIGHT)
    async with httpx.AsyncClient(base_url=base, headers=headers, timeout=60, limits=limits) as http:
        await asyncio.gather(*(client(http) for _ in range(IN_FLIGHT)))
    return answers


@pytest.mark.slow
def test_a_sigkill_under_load_loses_no_audit_row_of_an_answer_given(db: str) -> None:
    store = open_store(db)
    _, key = store.create_key("client", "load")
    store.close()
    with serve(backlog=256) as judge:
        judge.default = Reply(tier_reply_for, delay_s=0.05)
        env = {
            "EVIDEX_OPENAI_BASE_URL": judge.base_url,
            "OPENAI_API_KEY": "unused",
            "EVIDEX_JUDGE_TIER": JUDGE,
            "EVIDEX_SERVICE_JUDGES": JUDGE,
            "EVIDEX_MAX_CONCURRENCY": str(IN_FLIGHT),
            "EVIDEX_CONFIG": os.devnull,
        }
        with server_process(db, env=env) as (base, proc):
            answers = asyncio.run(_load(base, key, proc.pid))
            assert proc.wait(timeout=30) == -signal.SIGKILL
    assert len(answers) >= ANSWERS_BEFORE_KILL

    engine = sa.create_engine(db)
    with engine.connect() as conn:
        rows = [dict(r._mapping) for r in conn.execute(sa.text("SELECT * FROM audit_log"))]
        cached = {r[0] for r in conn.execute(sa.text("SELECT key FROM cache"))}
    engine.dispose()
    by_run: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        by_run.setdefault(row["run_id"], []).append(row)
    for answer in answers:
        logged = by_run.get(answer["run_id"], [])
        attempts = [r for r in logged if r["status"] in ("ok", "invalid", "error")]
        assert len(attempts) == answer["judge_calls"] >= 1, answer["run_id"]
        (ok,) = [r for r in logged if r["status"] == "ok"]
        labels = ok["labels"] if isinstance(ok["labels"], dict) else json.loads(ok["labels"])
        assert labels == {c["passage_id"]: c["tier"] for c in answer["classifications"]}
        assert ok["cache_key"] in cached
