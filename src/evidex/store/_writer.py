"""The store's writer thread: audit-log and cache rows committed in batches, off the caller's
thread and off any event loop.

A row is *queued* when :meth:`RowWriter.put` returns and *committed* once the transaction
holding it has committed: a ``kill -9`` loses queued rows, never committed ones. Rows commit
at the latest ``linger_s`` after the first of a batch was queued (at most ``max_batch`` a
transaction), at once when a flush or :meth:`RowWriter.stop` asks, and on a normal exit (the
store's ``atexit`` hook). Rows of one table commit in the order they were queued, so audit ids
follow that order.

Why linger: woken for every row, the writer commits one row per transaction and takes the
interpreter lock from the event loop as often; at high concurrency that cost more CPU per
judge call than the call itself (``bench/api_path.py``). Why cache rows come here too: a
service answering hundreds of requests a second paid a transaction (and a thread hop) per
cache row, the largest part of its store time (``bench/service_load.py --profile``); queued,
they share the audit rows' transaction, and the flush that a job makes before it returns
commits them with its audit rows.
"""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Callable
from typing import Any, Literal

from evidex.errors import StoreError

__all__ = ["RowWriter", "Table"]

Table = Literal["audit", "cache"]


_Item = tuple[Table, dict[str, Any]] | threading.Event | None
"""A row of a table, a flush's place in the queue (set once every row queued before it is
committed), or the end."""


class RowWriter:
    """Rows of the audit log and the cache, committed by a thread of their own in batches.

    ``write(audit_rows, cache_rows)`` commits both lists in one transaction. Cache rows queued
    and not yet committed are kept in :meth:`pending_cache`, so a read in this process finds
    them at once."""

    def __init__(
        self,
        write: Callable[[list[dict[str, Any]], list[dict[str, Any]]], None],
        max_batch: int = 500,
        linger_s: float = 0.1,
    ):
        self._write = write
        self._max_batch = max_batch
        self._linger_s = linger_s
        self._queue: queue.SimpleQueue[_Item] = queue.SimpleQueue()
        self._urgent = threading.Event()
        """Set by flush and stop: commit what is queued now, without lingering."""
        self._thread: threading.Thread | None = None
        self._pid = 0
        self._error: BaseException | None = None
        self._start_lock = threading.Lock()
        self._pending_cache: dict[str, dict[str, Any]] = {}

    def put(self, table: Table, row: dict[str, Any]) -> None:
        self._raise_error()
        self._ensure_thread()
        if table == "cache":
            self._pending_cache[row["key"]] = row
        self._queue.put((table, row))

    def pending_cache(self, key: str) -> dict[str, Any] | None:
        """The value of a cache row queued in this process and not yet committed."""
        row = self._pending_cache.get(key)
        return None if row is None else row["value"]

    def flush(self) -> None:
        """Return once every row queued before the call is committed."""
        if self._running():
            done = threading.Event()
            self._queue.put(done)
            self._urgent.set()
            done.wait()
        self._raise_error()

    def stop(self) -> None:
        if self._running() and self._thread is not None:
            self._queue.put(None)
            self._urgent.set()
            self._thread.join()
        self._thread = None

    def _running(self) -> bool:
        return self._thread is not None and self._pid == os.getpid()

    def _raise_error(self) -> None:
        error, self._error = self._error, None
        if error is not None:
            raise StoreError(f"audit rows could not be written: {error}") from error

    def _ensure_thread(self) -> None:
        # a forked process (a worker) has the object but not the thread: start its own
        if self._running():
            return
        with self._start_lock:
            if not self._running():
                self._pid = os.getpid()
                self._pending_cache.clear()  # the parent's queue is not this process's
                self._thread = threading.Thread(
                    target=self._run, name="evidex-audit-writer", daemon=True
                )
                self._thread.start()

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if isinstance(item, tuple):
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
            rows = [i for i in items if isinstance(i, tuple)]
            if rows:
                self._commit(rows)
            for i in items:
                if isinstance(i, threading.Event):
                    i.set()
            if any(i is None for i in items):
                return

    def _commit(self, rows: list[tuple[Table, dict[str, Any]]]) -> None:
        audit = [row for table, row in rows if table == "audit"]
        cache = [row for table, row in rows if table == "cache"]
        try:
            self._write(audit, cache)
        except BaseException as exc:  # kept and raised in the caller's thread
            self._error = exc
        finally:
            for row in cache:
                if self._pending_cache.get(row["key"]) is row:
                    del self._pending_cache[row["key"]]
