"""Keep Python's cyclic garbage collector out of the way of a run.

A process that runs judges has imported their stacks (pydantic, aiohttp, SQLAlchemy, the
tokenizers: about 10^5 objects) and holds the run's inputs, and a run at 64 calls in flight
allocates for every call (request, reply, audit row, the client's buffers). Measured on the API
path (``bench/api_path.py``, 1,000 calls, 2 cores): full collections of the older heap paused
the event loop for 85-145 ms, every call in flight waiting; and young collections came every
700 allocations, 70 of them a run, 0.8 ms each (the objects of 64 calls in flight, cold in the
cache), 0.1-0.2 ms of CPU a call in all.

So while any run is going:

* the objects that existed when the first of them started are frozen (:func:`gc.freeze`,
  constant time), so collections look only at what runs allocate;
* the young generation is collected after 50,000 allocations rather than 700 (the first
  threshold of :func:`gc.set_threshold`; a higher one the process set is kept): 1-2
  collections a 1,000-call run, 50-75 ms each, in place of 76 costing twice as much.

When the last run ends both are undone: the heap unfrozen, the thresholds as they were (unless
the process changed them meanwhile). What it costs: garbage in cycles lives until the next
collection, at most 50,000 young objects later, and a cycle among the older objects that
becomes garbage during the runs is freed when they end.

A process that froze its heap itself (a server that preloads and forks) or turned the collector
off is left as it is. ``HarnessSettings(tune_gc=False)`` turns this off.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["YOUNG_THRESHOLD", "collector_tuned_for_runs"]

YOUNG_THRESHOLD = 50_000
"""Allocations between young collections while runs are going."""

_lock = threading.Lock()
_runs = 0
_froze = False
_thresholds: tuple[tuple[int, ...], tuple[int, ...]] | None = None
"""(the process's thresholds, the ones set for the runs), while they are set."""


@contextmanager
def collector_tuned_for_runs(enabled: bool = True) -> Iterator[None]:
    """Tune the collector for the first run in, undo it when the last one is out."""
    if not enabled:
        yield
        return
    _enter()
    try:
        yield
    finally:
        _leave()


def _enter() -> None:
    global _runs, _froze, _thresholds
    with _lock:
        _runs += 1
        if _runs > 1 or not gc.isenabled():
            return
        if gc.get_freeze_count() == 0:
            gc.freeze()
            _froze = True
        before = gc.get_threshold()
        if before[0] < YOUNG_THRESHOLD:
            during = (YOUNG_THRESHOLD, *before[1:])
            gc.set_threshold(*during)
            _thresholds = (before, during)


def _leave() -> None:
    global _runs, _froze, _thresholds
    with _lock:
        _runs -= 1
        if _runs > 0:
            return
        if _froze:
            gc.unfreeze()
            _froze = False
        if _thresholds is not None:
            before, during = _thresholds
            if gc.get_threshold() == during:  # else the process set its own meanwhile
                gc.set_threshold(*before)
            _thresholds = None
