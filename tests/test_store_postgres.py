"""The same store on a real PostgreSQL server, started by the test in a temp dir.

Skipped (with the reason) where the PostgreSQL server binaries or psycopg are missing.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import sqlalchemy as sa

from evidex.harness.events import AuditRecord
from evidex.harness.ports import ReviewRequest
from evidex.store import SqlStore, open_store
from tests import pg_server

pytest.importorskip("psycopg", reason="the postgres extra is not installed")


@pytest.fixture(scope="module")
def pg_url() -> Iterator[str]:
    reason = pg_server.missing()
    if reason is not None:
        pytest.skip(reason)
    with pg_server.temp_postgres() as url:
        yield url


@pytest.fixture
def pg_store(pg_url: str) -> Iterator[SqlStore]:
    store = open_store(pg_url)
    yield store
    store.flush()  # queued rows, before their tables go
    with store.engine.begin() as conn:
        conn.exec_driver_sql(
            "DROP TABLE IF EXISTS audit_log, cache, review_queue, golden_labels, "
            "baseline_pins, schema_migrations CASCADE"
        )
    store.close()


@pytest.mark.network
def test_postgres_store_round_trip(pg_store: SqlStore) -> None:
    assert pg_store.schema_version() == 6
    pg_store.append_audit(
        AuditRecord(run_id="r", job="tier", status="ok", labels={"a": "irrelevant"})
    )
    assert pg_store.audit_rows()[0]["labels"] == {"a": "irrelevant"}
    with pytest.raises(sa.exc.DatabaseError, match="append-only"), pg_store.engine.begin() as conn:
        conn.exec_driver_sql("DELETE FROM audit_log")
    pg_store.cache_put("k", "tier", {"v": 1})
    pg_store.cache_put("k", "tier", {"v": 1})
    assert pg_store.cache_get("k") == {"v": 1}
    item = pg_store.add_review(ReviewRequest(job="tier", reason="r", run_id="r"))
    assert pg_store.resolve_review(item, decision="accept")["status"] == "resolved"


@pytest.mark.network
def test_two_replicas_share_one_database(pg_url: str, pg_store: SqlStore) -> None:
    other = open_store(pg_url)  # a second service replica: migrations already ran
    other.append_audit(AuditRecord(run_id="replica-2", job="tier", status="ok"))
    other.flush()  # what a job does before it returns: the other replica then sees the row
    assert [r["run_id"] for r in pg_store.audit_rows()] == ["replica-2"]
    other.close()
