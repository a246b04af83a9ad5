"""Pinned baseline runs in the store, on SQLite and on a real PostgreSQL server: pinning,
replacing and clearing keep one current pin per job (the database refuses a second), every pin
keeps its row with who made and ended it, and migration 6 adds the table to a version-5
database."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from evidex.store import SqlStore, open_store
from evidex.store import _schema as schema
from evidex.store._util import now
from tests.test_review_queue import _new_database

with contextlib.suppress(pytest.skip.Exception):  # skips itself without psycopg
    from tests.test_store_postgres import pg_url  # noqa: F401  (the server fixture, reused)

REPORT = {"job": "tier", "report_format": 2, "metrics": {"kappa": 0.5}, "items": []}


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.network)])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'pins.db'}"
    pytest.importorskip("psycopg", reason="the postgres extra is not installed")
    return _new_database(str(request.getfixturevalue("pg_url")))


@pytest.fixture
def store(url: str) -> Iterator[SqlStore]:
    s = open_store(url)
    yield s
    s.close()


def test_pin_replace_and_clear_keep_every_pin_on_record(store: SqlStore) -> None:
    assert store.baseline("tier") is None and store.baselines() == {}
    first = store.pin_baseline("tier", REPORT, name="eval-tier/report.json", digest="d1", by="ana")
    assert (first.job, first.name, first.digest, first.pinned_by) == (
        "tier",
        "eval-tier/report.json",
        "d1",
        "ana",
    )
    assert first.report == REPORT and first.ended is None
    assert first.pinned_at.tzinfo is not None

    other = {**REPORT, "metrics": {"kappa": 0.7}}
    second = store.pin_baseline("tier", other, name="v2/report.json", digest="d2", by="bo")
    rerank = store.pin_baseline(
        "rerank", {**REPORT, "job": "rerank"}, name="r/report.json", digest="r1", by="ana"
    )
    assert store.baseline("tier") == second
    assert set(store.baselines()) == {"rerank", "tier"}

    assert store.clear_baseline("tier", by="cy") is True
    assert store.clear_baseline("tier", by="cy") is False  # nothing left to clear
    assert store.baseline("tier") is None
    assert store.baseline("rerank") == rerank  # another job's pin is its own

    newest, oldest = store.baseline_history("tier")
    assert (newest.id, newest.ended, newest.ended_by) == (second.id, "cleared", "cy")
    assert (oldest.id, oldest.ended, oldest.ended_by) == (first.id, "replaced", "bo")
    assert oldest.ended_at is not None and oldest.report == REPORT


def test_the_database_keeps_one_current_pin_per_job(store: SqlStore) -> None:
    store.pin_baseline("tier", REPORT, name="a", digest="d1", by="ana")
    row = {
        "job": "tier",
        "name": "b",
        "digest": "d2",
        "report": REPORT,
        "pinned_by": "bo",
        "pinned_at": now(),
    }
    with pytest.raises(sa.exc.IntegrityError), store.engine.begin() as conn:
        conn.execute(schema.baseline_pins.insert().values(**row))
    # an ended pin is no current one: the index leaves it alone
    with store.engine.begin() as conn:
        conn.execute(schema.baseline_pins.insert().values(**row, ended="cleared", ended_at=now()))
    assert store.baseline("tier").name == "a"  # type: ignore[union-attr]


def test_migration_6_adds_the_table_to_a_version_5_database(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(schema, "MIGRATIONS", schema.MIGRATIONS[:5])
    old = open_store(url)
    with old.engine.begin() as conn:  # a version-5 database never had the table
        conn.exec_driver_sql("DROP TABLE IF EXISTS baseline_pins")
    assert old.schema_version() == 5
    old.close()
    monkeypatch.undo()
    store = open_store(url)
    assert store.schema_version() == 6
    store.pin_baseline("tier", REPORT, name="a", digest="d1", by="ana")
    assert store.baseline("tier") is not None
    store.close()
