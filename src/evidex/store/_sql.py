"""The store over SQLAlchemy Core: SQLite by default, PostgreSQL by URL."""

from __future__ import annotations

import atexit
import logging
import os
import sqlite3
import threading
import time
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError, SQLAlchemyError
from sqlalchemy.pool import StaticPool

from evidex.errors import ConfigError, StoreError
from evidex.harness.events import AuditRecord
from evidex.review_policy import ReviewSettings
from evidex.store import _schema as t
from evidex.store._keys import KeyRing
from evidex.store._pins import BaselinePins
from evidex.store._review_decisions import ReviewDecisions
from evidex.store._reviews import ReviewQueue
from evidex.store._util import aware as _aware
from evidex.store._util import new_id as _new_id
from evidex.store._util import now as _now
from evidex.store._util import safe_url as _safe_url
from evidex.store._util import select_where as _select
from evidex.store._writer import RowWriter

__all__ = ["SqlStore", "default_url", "open_store"]

MIGRATION_LOCK = 0x65766964_6D696772  # "evidmigr": the advisory lock key of migrations


def default_url() -> str:
    """``EVIDEX_DB`` (a URL or a file path), else ``evidex.db`` in the user data dir."""
    configured = os.environ.get("EVIDEX_DB")
    if configured:
        return configured if "://" in configured else f"sqlite:///{Path(configured).expanduser()}"
    import platformdirs

    data_dir = Path(platformdirs.user_data_dir("evidex"))
    return f"sqlite:///{data_dir / 'evidex.db'}"


def open_store(url: str | None = None, *, review: ReviewSettings | None = None) -> SqlStore:
    """The store at ``url`` (default :func:`default_url`); ``review``: how many decisions new
    review items need and who they are assigned to (default: the ``[review]`` settings)."""
    return SqlStore(url or default_url(), review=review)


class SqlStore(ReviewQueue, ReviewDecisions, KeyRing, BaselinePins):
    """Audit log (append-only), content-addressed cache, review queue (:mod:`._reviews`, its
    decisions :mod:`._review_decisions`), golden labels, the service's keys and UI
    sessions (:mod:`._keys`), and the agreement page's pinned baseline runs (:mod:`._pins`)."""

    def __init__(self, url: str, *, review: ReviewSettings | None = None) -> None:
        self.url = url
        self._review_settings = review
        try:
            if url.startswith("sqlite:///") and url != "sqlite:///:memory:":
                Path(url.removeprefix("sqlite:///")).expanduser().parent.mkdir(
                    parents=True, exist_ok=True
                )
            self._memory = url in ("sqlite://", "sqlite:///:memory:")
            if self._memory:
                # one database shared by every thread (the audit writer's included): by default
                # each thread would get a memory database of its own
                self.engine = sa.create_engine(
                    url,
                    future=True,
                    poolclass=StaticPool,
                    connect_args={"check_same_thread": False},
                )
            else:
                self.engine = sa.create_engine(url, future=True)
            if self.engine.dialect.name == "sqlite":
                sa.event.listen(self.engine, "connect", _sqlite_pragmas)
        except (SQLAlchemyError, ImportError, OSError, ValueError) as exc:
            raise ConfigError(f"cannot open the store at {_safe_url(url)}: {exc}") from exc
        self._lock = threading.RLock()
        self._verified_keys = {}
        self._rows = RowWriter(self._insert_rows)
        _OPEN.add(self)
        self.migrate()

    # ------------------------------------------------------------------ schema

    def migrate(self) -> list[int]:
        """Apply the numbered migrations that have not run yet; returns their numbers.

        Safe when several processes open a fresh database at once: the migrations run in one
        transaction under a lock (PostgreSQL: ``pg_advisory_xact_lock``; SQLite: ``BEGIN
        IMMEDIATE``, the database's write lock), and what has run is read again inside it, so
        the processes that waited find the work done and apply nothing."""
        applied: list[int] = []
        try:
            if self._migrated():
                return []
            with self._lock, self.engine.connect() as conn:
                if conn.dialect.name == "sqlite":
                    conn.exec_driver_sql("BEGIN IMMEDIATE")
                elif conn.dialect.name == "postgresql":
                    conn.execute(
                        sa.text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATION_LOCK}
                    )
                t.migrations_table.create(conn, checkfirst=True)
                done = {row.number for row in conn.execute(sa.select(t.migrations_table.c.number))}
                for number, name, fn in t.MIGRATIONS:
                    if number in done:
                        continue
                    fn(conn)
                    conn.execute(
                        t.migrations_table.insert().values(
                            number=number, name=name, applied_at=_now()
                        )
                    )
                    applied.append(number)
                conn.commit()
        except SQLAlchemyError as exc:
            raise StoreError(f"cannot migrate the store at {_safe_url(self.url)}: {exc}") from exc
        return applied

    def _migrated(self) -> bool:
        """Whether every migration has run (read without a lock: the common case, cheap)."""
        with self._lock, self.engine.connect() as conn:
            if not sa.inspect(conn).has_table(t.migrations_table.name):
                return False
            done = {row.number for row in conn.execute(sa.select(t.migrations_table.c.number))}
        return all(number in done for number, _, _ in t.MIGRATIONS)

    def schema_version(self) -> int:
        with self.engine.connect() as conn:
            value = conn.execute(sa.select(sa.func.max(t.migrations_table.c.number))).scalar()
        return int(value or 0)

    # ------------------------------------------------------------------ audit log

    def append_audit(self, record: AuditRecord) -> None:
        """Queue one row; a writer thread commits rows in batches (within 0.1 s), so a judge
        call never waits for the database. :meth:`flush` returns once every queued row is
        committed (the harness flushes before a job returns its result, reads flush first), and
        a failed write is raised by the next append or flush: the audit trail never has silent
        holes. A ``kill -9`` loses no committed row (see :mod:`evidex.store._writer`)."""
        self._rows.put("audit", record.model_dump(mode="python"))

    def flush(self) -> None:
        """Commit every queued audit and cache row now."""
        self._rows.flush()

    def _insert_rows(self, audit: list[dict[str, Any]], cache: list[dict[str, Any]]) -> None:
        """One transaction: the audit rows, then the cache rows whose key is not stored yet."""
        unique = list({row["key"]: row for row in cache}.values())
        with self._lock:
            try:
                with self.engine.begin() as conn:
                    if audit:
                        conn.execute(t.audit_log.insert(), audit)
                    if unique and self._cache_insert is not None:
                        conn.execute(self._cache_insert, unique)
            except SQLAlchemyError as exc:
                raise StoreError(f"cannot write the store: {exc}") from exc
        if unique and self._cache_insert is None:
            for row in unique:
                self._put_one(row)

    def audit_rows(
        self,
        *,
        last: int | None = None,
        run_id: str | None = None,
        job: str | None = None,
        step: str | None = None,
    ) -> list[dict[str, Any]]:
        """Rows oldest first (``last`` keeps the newest N)."""
        query = _select(
            t.audit_log, t.audit_log.c.id.desc(), last, run_id=run_id, job=job, step=step
        )
        self.flush()
        rows = self._read(query)
        for row in rows:
            row["time"] = _aware(row["time"])
        return list(reversed(rows))

    def batch_outcomes(
        self, judge_id: str, step: str, prompt_version: str, last: int
    ) -> list[dict[str, Any]]:
        """The newest ``last`` rows (oldest first) that end a batch of this judge, step and
        prompt version (``ok``, ``split``, ``fallback``): batch id, status and attempt only, for
        the batch size the harness learns (:mod:`evidex.harness.sizing`)."""
        log = t.audit_log.c
        query = (
            sa.select(log.batch_id, log.status, log.attempt)
            .where(
                log.judge_id == judge_id,
                log.step == step,
                log.prompt_version == prompt_version,
                log.status.in_(("ok", "split", "fallback")),
            )
            .order_by(log.id.desc())
            .limit(last)
        )
        self.flush()
        return list(reversed(self._read(query)))

    # ------------------------------------------------------------------ cache

    def cache_get(self, key: str) -> dict[str, Any] | None:
        pending = self._rows.pending_cache(key)
        if pending is not None:
            return pending
        rows = self._read(sa.select(t.cache.c.value).where(t.cache.c.key == key))
        return rows[0]["value"] if rows else None

    def cache_put(self, key: str, job: str, value: dict[str, Any]) -> None:
        """Queue a cache row: committed with the audit rows (the job's flush before it returns
        commits both), readable by :meth:`cache_get` in this process at once. A key already
        stored keeps its row: same key, same content."""
        self._rows.put("cache", {"key": key, "job": job, "value": value, "created_at": _now()})

    @property
    def _cache_insert(self) -> Any:
        """``INSERT ... ON CONFLICT DO NOTHING`` into the cache where the database has it."""
        name = self.engine.dialect.name
        if name == "sqlite":
            from sqlalchemy.dialects.sqlite import insert as sqlite_insert

            return sqlite_insert(t.cache).on_conflict_do_nothing(index_elements=["key"])
        if name == "postgresql":
            from sqlalchemy.dialects.postgresql import insert as pg_insert

            return pg_insert(t.cache).on_conflict_do_nothing(index_elements=["key"])
        return None

    def _put_one(self, row: dict[str, Any]) -> None:
        try:
            self._write(t.cache.insert(), [row])
        except StoreError as exc:
            if not isinstance(exc.__cause__, IntegrityError):
                raise  # same key, same content: a concurrent writer got there first

    def cache_clear(self, job: str | None = None) -> int:
        self.flush()  # a queued row would land after the clear
        stmt = t.cache.delete()
        if job:
            stmt = stmt.where(t.cache.c.job == job)
        return self._write(stmt)

    # ------------------------------------------------------------------ golden labels

    def add_golden(self, job: str, item: dict[str, Any], label: Any, origin: str) -> int:
        with self.engine.begin() as conn:
            result = conn.execute(
                t.golden_labels.insert().values(
                    job=job, item=item, label=label, origin=origin, created_at=_now()
                )
            )
            return _new_id(result)

    def golden(self, job: str) -> Iterator[dict[str, Any]]:
        query = sa.select(t.golden_labels).where(t.golden_labels.c.job == job)
        yield from self._read(query.order_by(t.golden_labels.c.id))

    # ------------------------------------------------------------------ internals

    def _read(self, query: Any) -> list[dict[str, Any]]:
        try:
            if self._memory:  # one shared connection: one thread at a time
                with self._lock, self.engine.connect() as conn:
                    return [dict(r._mapping) for r in conn.execute(query)]
            with self.engine.connect() as conn:
                return [dict(r._mapping) for r in conn.execute(query)]
        except SQLAlchemyError as exc:
            raise StoreError(f"cannot read the store: {exc}") from exc

    def _write(self, stmt: Any, rows: list[dict[str, Any]] | None = None) -> int:
        with self._lock:
            try:
                with self.engine.begin() as conn:
                    result = conn.execute(stmt) if rows is None else conn.execute(stmt, rows)
                    return int(result.rowcount or 0)
            except SQLAlchemyError as exc:
                raise StoreError(f"cannot write the store: {exc}") from exc

    def close(self) -> None:
        try:
            self.flush()
        finally:
            self._rows.stop()
            _OPEN.discard(self)
            self.engine.dispose()


_OPEN: weakref.WeakSet[SqlStore] = weakref.WeakSet()


@atexit.register
def _flush_open_stores() -> None:
    """A library user who never closes a store still gets every row of a normal exit."""
    for store in list(_OPEN):
        try:
            store.flush()
        except StoreError:
            logging.getLogger("evidex.store").exception("audit rows lost at exit")


BUSY_TIMEOUT_S = 10.0


def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    cursor = dbapi_conn.cursor()
    cursor.execute(f"PRAGMA busy_timeout={int(BUSY_TIMEOUT_S * 1000)}")
    try:
        _switch_to_wal(cursor)
    finally:
        cursor.close()


def _switch_to_wal(cursor: Any) -> None:
    """SQLite does not call its busy handler when another connection holds the write lock of a
    file still in rollback-journal mode (waiting could deadlock), so the switch fails at once
    when processes open a fresh file together; retry it for as long as the handler would wait."""
    deadline = time.monotonic() + BUSY_TIMEOUT_S
    pause = 0.005
    while True:
        try:
            cursor.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() + pause > deadline:
                raise
            time.sleep(pause)
            pause = min(pause * 2, 0.2)
