"""The store over SQLAlchemy Core: SQLite by default, PostgreSQL by URL."""

from __future__ import annotations

import atexit
import logging
import os
import queue
import threading
import weakref
from collections.abc import Callable, Iterator
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
from evidex.store._review_decisions import ReviewDecisions
from evidex.store._reviews import ReviewQueue
from evidex.store._util import aware as _aware
from evidex.store._util import new_id as _new_id
from evidex.store._util import now as _now
from evidex.store._util import safe_url as _safe_url
from evidex.store._util import select_where as _select

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


class SqlStore(ReviewQueue, ReviewDecisions, KeyRing):
    """Audit log (append-only), content-addressed cache, review queue (:mod:`._reviews`, its
    decisions :mod:`._review_decisions`), golden labels, and the service's keys and UI
    sessions (:mod:`._keys`)."""

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
        self._audit = _AuditWriter(self._insert_audit)
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
        holes. A ``kill -9`` loses no committed row (see :class:`_AuditWriter`)."""
        self._audit.put(record.model_dump(mode="python"))

    def flush(self) -> None:
        """Commit every queued audit row now."""
        self._audit.flush()

    def _insert_audit(self, rows: list[dict[str, Any]]) -> None:
        self._write(t.audit_log.insert(), rows)

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
        rows = self._read(sa.select(t.cache.c.value).where(t.cache.c.key == key))
        return rows[0]["value"] if rows else None

    def cache_put(self, key: str, job: str, value: dict[str, Any]) -> None:
        try:
            self._write(t.cache.insert().values(key=key, job=job, value=value, created_at=_now()))
        except StoreError as exc:
            if not isinstance(exc.__cause__, IntegrityError):
                raise  # same key, same content: a concurrent writer got there first

    def cache_clear(self, job: str | None = None) -> int:
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
            self._audit.stop()
            _OPEN.discard(self)
            self.engine.dispose()


class _AuditWriter:
    """Audit rows committed in batches by a thread of their own, off the event loop.

    A row is *queued* when :meth:`put` returns and *committed* once the transaction holding it
    has committed: a ``kill -9`` loses queued rows, never committed ones. Rows commit at the
    latest ``linger_s`` after the first of a batch was queued (at most ``max_batch`` a
    transaction), at once when :meth:`flush` or :meth:`stop` asks, and on a normal exit (the
    module's ``atexit`` hook). Rows commit in the order they were queued, so their ids follow
    that order. Why linger: woken for every row, the writer commits one row per transaction
    and takes the interpreter lock from the event loop as often; at high concurrency that cost
    more CPU per judge call than the call itself (``bench/api_path.py``).
    """

    def __init__(
        self,
        write: Callable[[list[dict[str, Any]]], None],
        max_batch: int = 500,
        linger_s: float = 0.1,
    ):
        self._write = write
        self._max_batch = max_batch
        self._linger_s = linger_s
        self._queue: queue.SimpleQueue[dict[str, Any] | threading.Event | None] = (
            queue.SimpleQueue()
        )
        self._urgent = threading.Event()
        """Set by flush and stop: commit what is queued now, without lingering."""
        self._thread: threading.Thread | None = None
        self._pid = 0
        self._error: BaseException | None = None
        self._start_lock = threading.Lock()

    def put(self, row: dict[str, Any]) -> None:
        self._raise_error()
        self._ensure_thread()
        self._queue.put(row)

    def flush(self) -> None:
        """Return once every row queued before the call is committed."""
        if self._thread is not None and self._pid == os.getpid():
            done = threading.Event()
            self._queue.put(done)
            self._urgent.set()
            done.wait()
        self._raise_error()

    def stop(self) -> None:
        if self._thread is not None and self._pid == os.getpid():
            self._queue.put(None)
            self._urgent.set()
            self._thread.join()
        self._thread = None

    def _raise_error(self) -> None:
        error, self._error = self._error, None
        if error is not None:
            raise StoreError(f"audit rows could not be written: {error}") from error

    def _ensure_thread(self) -> None:
        # a forked process (a worker) has the object but not the thread: start its own
        if self._thread is not None and self._pid == os.getpid():
            return
        with self._start_lock:
            if self._thread is None or self._pid != os.getpid():
                self._pid = os.getpid()
                self._thread = threading.Thread(
                    target=self._run, name="evidex-audit-writer", daemon=True
                )
                self._thread.start()

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if isinstance(item, dict):
                # rows queued meanwhile join this batch; flush and stop cut the wait short
                # (they queue their marker before setting the event, so the drain sees it)
                self._urgent.wait(self._linger_s)
            self._urgent.clear()
            items = [item]
            while len(items) < self._max_batch:
                try:
                    items.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            rows = [i for i in items if isinstance(i, dict)]
            if rows:
                try:
                    self._write(rows)
                except BaseException as exc:  # kept and raised in the caller's thread
                    self._error = exc
            for i in items:
                if isinstance(i, threading.Event):
                    i.set()
            if any(i is None for i in items):
                return


_OPEN: weakref.WeakSet[SqlStore] = weakref.WeakSet()


@atexit.register
def _flush_open_stores() -> None:
    """A library user who never closes a store still gets every row of a normal exit."""
    for store in list(_OPEN):
        try:
            store.flush()
        except StoreError:
            logging.getLogger("evidex.store").exception("audit rows lost at exit")


def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    cursor = dbapi_conn.cursor()
    cursor.execute("PRAGMA busy_timeout=10000")  # first: switching to WAL may have to wait
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.close()
