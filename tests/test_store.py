"""The store: numbered migrations, append-only audit log, cache, review queue."""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import sqlalchemy as sa

from evidex.errors import InputError, ReviewConflict, StoreError
from evidex.harness.events import AuditRecord
from evidex.harness.ports import ReviewRequest
from evidex.store import SqlStore, default_url, open_store


def test_migrations_are_numbered_and_idempotent(store: SqlStore) -> None:
    assert store.schema_version() == 6
    assert store.migrate() == []


def test_a_fresh_file_opens_while_another_connection_holds_its_write_lock(tmp_path: Path) -> None:
    # SQLite skips its busy handler when a rollback-journal file's write lock is taken, so
    # switching to WAL failed at once: one of ten processes opening a fresh file lost the race
    path = tmp_path / "fresh.db"
    holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN IMMEDIATE")
    releaser = threading.Timer(0.5, holder.execute, args=("COMMIT",))
    releaser.start()
    try:
        store = open_store(f"sqlite:///{path}")
        assert store.migrate() == [] and store.schema_version() > 0
        store.close()
    finally:
        releaser.join()
        holder.close()


def test_audit_log_round_trip(store: SqlStore) -> None:
    store.append_audit(
        AuditRecord(
            run_id="r1", job="tier", status="ok", raw_output="{}", labels={"p1": "irrelevant"}
        )
    )
    store.append_audit(AuditRecord(run_id="r2", job="tier", status="invalid", errors=["bad"]))
    rows = store.audit_rows()
    assert [r["run_id"] for r in rows] == ["r1", "r2"]
    assert rows[0]["labels"] == {"p1": "irrelevant"}
    assert rows[1]["errors"] == ["bad"]
    assert rows[0]["time"].tzinfo is not None
    assert [r["run_id"] for r in store.audit_rows(last=1)] == ["r2"]
    assert [r["run_id"] for r in store.audit_rows(run_id="r1")] == ["r1"]


@pytest.mark.parametrize(
    "statement", ["UPDATE audit_log SET status = 'ok'", "DELETE FROM audit_log"]
)
def test_audit_log_is_append_only_in_the_database(store: SqlStore, statement: str) -> None:
    store.append_audit(AuditRecord(run_id="r1", job="tier", status="ok"))
    store.flush()  # rows are committed in batches; flush commits this one now
    with pytest.raises(sa.exc.DatabaseError, match="append-only"), store.engine.begin() as conn:
        conn.exec_driver_sql(statement)
    assert len(store.audit_rows()) == 1


def test_cache_is_content_addressed(store: SqlStore) -> None:
    assert store.cache_get("k") is None
    store.cache_put("k", "tier", {"a": 1})
    store.cache_put("k", "tier", {"a": 1})  # a concurrent writer with the same content
    assert store.cache_get("k") == {"a": 1}
    assert store.cache_clear("tier") == 1
    assert store.cache_get("k") is None


def test_review_queue_lifecycle(store: SqlStore) -> None:
    item_id = store.add_review(
        ReviewRequest(
            job="tier", reason="fallback", run_id="r1", passage_ids=["p1"], payload={"x": 1}
        )
    )
    [pending] = store.list_reviews()
    assert (
        pending["id"] == item_id and pending["status"] == "pending" and pending["decision"] is None
    )
    resolved = store.resolve_review(
        item_id, decision="irrelevant", reviewer="ana", note="keyword match"
    )
    assert resolved["status"] == "resolved" and resolved["reviewer"] == "ana"
    assert resolved["resolved_at"] >= resolved["created_at"]
    assert store.list_reviews() == []
    assert len(store.list_reviews(status=None)) == 1
    with pytest.raises(ReviewConflict, match="already resolved"):
        store.resolve_review(item_id, decision="irrelevant")
    with pytest.raises(InputError, match="no review item"):
        store.get_review(999)
    with pytest.raises(InputError, match="decision is required"):
        store.resolve_review(
            store.add_review(ReviewRequest(job="tier", reason="r", run_id="r")), decision=" "
        )


def test_default_url_follows_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVIDEX_DB", str(tmp_path / "x.db"))
    assert default_url() == f"sqlite:///{tmp_path / 'x.db'}"
    monkeypatch.setenv("EVIDEX_DB", "postgresql://u:pw@localhost/db")
    assert default_url() == "postgresql://u:pw@localhost/db"


def test_store_survives_reopen(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'nested' / 'evidex.db'}"
    first = open_store(url)
    first.append_audit(AuditRecord(run_id="r", job="tier", status="ok"))
    first.close()
    second = open_store(url)
    assert len(second.audit_rows()) == 1
    second.close()


def test_unwritable_store_raises_store_error(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path / 's.db'}")
    with store.engine.begin() as conn:
        conn.exec_driver_sql("DROP TABLE review_queue")
    with pytest.raises(StoreError, match="review queue"):
        store.add_review(ReviewRequest(job="tier", reason="r", run_id="r"))
    store.close()


def test_bad_url_is_a_config_error() -> None:
    from evidex.errors import ConfigError

    with pytest.raises(ConfigError, match="cannot open the store"):
        open_store("nosuchdialect://x")


def test_audit_rows_are_committed_in_batches_off_the_caller_thread(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path / 'batched.db'}")
    statements: list[int] = []
    sa.event.listen(
        store.engine,
        "before_cursor_execute",
        lambda conn, cursor, statement, params, context, executemany: (
            statements.append(len(params) if executemany else 1)
            if statement.startswith("INSERT INTO audit_log")
            else None
        ),
    )
    for i in range(300):
        store.append_audit(AuditRecord(run_id=f"r{i}", job="tier", status="ok"))
    store.flush()
    assert len(store.audit_rows()) == 300
    assert sum(statements) == 300 and len(statements) < 300  # fewer statements than rows
    store.close()


def test_a_failed_audit_write_is_raised_not_lost(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path / 'broken.db'}")
    with store.engine.begin() as conn:
        conn.exec_driver_sql("DROP TRIGGER IF EXISTS audit_log_no_update")
        conn.exec_driver_sql("ALTER TABLE audit_log RENAME TO audit_log_gone")
    store.append_audit(AuditRecord(run_id="r", job="tier", status="ok"))
    with pytest.raises(StoreError, match="audit rows could not be written"):
        store.flush()


def test_a_memory_store_is_one_database_for_every_thread() -> None:
    store = open_store("sqlite://")
    store.append_audit(AuditRecord(run_id="r", job="tier", status="ok"))
    assert [r["run_id"] for r in store.audit_rows()] == ["r"]  # written by the writer thread


def test_a_library_call_without_a_store_says_once_where_its_log_goes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import evidex
    from evidex.jobs import _common
    from evidex.types import Passage
    from tests.scripted import ScriptedJudge, tier_reply

    monkeypatch.setenv("EVIDEX_DB", str(tmp_path / "default.db"))
    monkeypatch.setattr(_common, "_ANNOUNCED", set())
    passages = [Passage(passage_id="a", text="Some passage text here.")]
    with caplog.at_level("INFO", logger="evidex"):
        for _ in range(2):
            evidex.tier("q", passages, judge=ScriptedJudge([tier_reply]))
        evidex.tier("q", passages, judge=ScriptedJudge([tier_reply]), store="sqlite://")
    said = [r for r in caplog.records if "default.db" in r.getMessage()]
    assert len(said) == 1 and said[0].levelname == "WARNING"  # once per process and store
    message = said[0].getMessage()
    assert "raw judge output" in message and 'store="sqlite://"' in message
    assert (tmp_path / "default.db").exists()


def test_audit_rows_commit_in_queue_order_without_a_flush_within_the_linger(
    tmp_path: Path,
) -> None:
    path = tmp_path / "linger.db"
    store = open_store(f"sqlite:///{path}")
    for i in range(50):
        store.append_audit(AuditRecord(run_id=f"r{i:02d}", job="tier", status="ok"))

    def committed() -> list[tuple[int, str]]:  # read by another connection: no flush first
        with sqlite3.connect(path) as conn:
            return conn.execute("SELECT id, run_id FROM audit_log ORDER BY id").fetchall()

    deadline = time.monotonic() + 5
    while len(committed()) < 50 and time.monotonic() < deadline:
        time.sleep(0.05)
    rows = committed()
    assert [run_id for _, run_id in rows] == [f"r{i:02d}" for i in range(50)]  # queue order
    assert [i for i, _ in rows] == sorted(i for i, _ in rows)
    store.close()


_KILLED_WRITER = """
import os, signal, sys
from evidex.harness.events import AuditRecord
from evidex.store import open_store
store = open_store(sys.argv[1])
for i in range(200):
    store.append_audit(AuditRecord(run_id=f"c{i:03d}", job="tier", status="ok"))
    store.cache_put(f"c{i:03d}", "tier", {"i": i})
store.flush()  # these 200 are committed
for i in range(200):
    store.append_audit(AuditRecord(run_id=f"q{i:03d}", job="tier", status="ok"))
    store.cache_put(f"q{i:03d}", "tier", {"i": i})
os.kill(os.getpid(), signal.SIGKILL)  # queued, maybe not committed
"""


def test_a_kill_9_loses_no_committed_audit_or_cache_row(tmp_path: Path) -> None:
    path = tmp_path / "killed.db"
    done = subprocess.run(
        [sys.executable, "-c", _KILLED_WRITER, f"sqlite:///{path}"], check=False, timeout=60
    )
    assert done.returncode == -signal.SIGKILL
    store = open_store(f"sqlite:///{path}")
    rows = [r["run_id"] for r in store.audit_rows()]
    assert rows[:200] == [f"c{i:03d}" for i in range(200)]
    assert rows[200:] == [f"q{i:03d}" for i in range(len(rows) - 200)]  # a prefix, in order
    assert all(store.cache_get(f"c{i:03d}") == {"i": i} for i in range(200))
    # a cache row commits with the audit rows queued beside it, never without them
    cached = sum(store.cache_get(f"q{i:03d}") is not None for i in range(200))
    assert cached <= len(rows) - 200
    store.close()


def test_cache_rows_are_queued_read_at_once_and_committed_with_the_audit_rows(
    tmp_path: Path,
) -> None:
    path = tmp_path / "cache.db"
    store = open_store(f"sqlite:///{path}")
    store.append_audit(AuditRecord(run_id="r", job="tier", status="ok"))
    store.cache_put("k1", "tier", {"a": 1})
    store.cache_put("k1", "tier", {"a": 1})  # the same reply twice in one batch
    assert store.cache_get("k1") == {"a": 1}  # before any commit: this process sees it
    store.flush()
    with sqlite3.connect(path) as conn:  # another connection: committed, once, with its log row
        assert conn.execute("SELECT key FROM cache").fetchall() == [("k1",)]
        assert conn.execute("SELECT count(*) FROM audit_log").fetchone() == (1,)
    other = open_store(f"sqlite:///{path}")
    other.cache_put("k1", "tier", {"a": 1})  # already stored by another process: kept as is
    other.cache_put("k2", "tier", {"b": 2})
    other.flush()
    assert other.cache_get("k2") == {"b": 2} and store.cache_get("k2") == {"b": 2}
    other.close()
    store.close()


def test_close_commits_every_queued_row(tmp_path: Path) -> None:
    path = tmp_path / "closed.db"
    store = open_store(f"sqlite:///{path}")
    for i in range(20):
        store.append_audit(AuditRecord(run_id=f"r{i}", job="tier", status="ok"))
    started = time.monotonic()
    store.close()
    assert time.monotonic() - started < 5
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT count(*) FROM audit_log").fetchone() == (20,)
