"""The same store on a real PostgreSQL server, started by the test in a temp dir.

Skipped (with the reason) where the PostgreSQL server binaries or psycopg are missing.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from evidex.harness.events import AuditRecord
from evidex.harness.ports import ReviewRequest
from evidex.store import SqlStore, open_store

pytest.importorskip("psycopg", reason="the postgres extra is not installed")

BIN_DIRS = [
    Path("/usr/local/bin"),
    *sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True),
]


def _binary(name: str) -> str | None:
    for d in BIN_DIRS:
        if (d / name).exists():
            return str(d / name)
    return shutil.which(name)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def pg_url() -> Iterator[str]:
    initdb, pg_ctl = _binary("initdb"), _binary("pg_ctl")
    if not initdb or not pg_ctl:
        pytest.skip("PostgreSQL server binaries (initdb, pg_ctl) are not installed")
    as_user: list[str] = []
    if os.geteuid() == 0:  # initdb refuses to run as root
        if shutil.which("runuser") is None:
            pytest.skip("running as root without runuser to drop to the postgres user")
        as_user = ["runuser", "-u", "postgres", "--"]
    root = Path(tempfile.mkdtemp(prefix="evidex-pg-"))
    if as_user:
        shutil.chown(root, "postgres")
    data, port = root / "data", _free_port()
    subprocess.run(
        [*as_user, initdb, "-D", str(data), "-U", "evidex", "--auth=trust"],
        check=True,
        capture_output=True,
    )
    subprocess.run(
        [
            *as_user,
            pg_ctl,
            "-D",
            str(data),
            "-w",
            "-l",
            str(root / "log"),
            "-o",
            f"-p {port} -k {root} -c listen_addresses=127.0.0.1",
            "start",
        ],
        check=True,
        capture_output=True,
    )
    try:
        yield f"postgresql+psycopg://evidex@127.0.0.1:{port}/postgres"
    finally:
        subprocess.run(
            [*as_user, pg_ctl, "-D", str(data), "-m", "fast", "stop"], capture_output=True
        )
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def pg_store(pg_url: str) -> Iterator[SqlStore]:
    store = open_store(pg_url)
    yield store
    with store.engine.begin() as conn:
        conn.exec_driver_sql(
            "DROP TABLE IF EXISTS audit_log, cache, review_queue, golden_labels, "
            "schema_migrations CASCADE"
        )
    store.close()


@pytest.mark.network
def test_postgres_store_round_trip(pg_store: SqlStore) -> None:
    assert pg_store.schema_version() == 5
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
