"""Keep the cyclic garbage collector off the heap that was there before a run.

A full collection traverses every tracked object. A process that runs judges has imported
their stacks (pydantic, aiohttp, SQLAlchemy, the tokenizers: about 10^5 objects) and holds the
run's inputs; in a run of 1,000 calls at 64 in flight on 2 cores, two or three full
collections came round, each took 100-150 ms, and while one ran the event loop served no
reply, so every call in flight waited: 0.3-0.4 ms of CPU a call, and the latency tail.

While any run is going, the objects that existed when the first of them started are frozen
(:func:`gc.freeze`, which moves them to the permanent generation in constant time), so
collections look only at what runs allocate; when the last run ends they are unfrozen and
collected as before. What the freeze costs: a cycle among those older objects that becomes
garbage during the runs is freed when they end rather than during them.

A process that froze its heap itself (a server that preloads and forks) is left as it is.
``HarnessSettings(freeze_heap=False)`` turns this off.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["older_objects_frozen"]

_lock = threading.Lock()
_runs = 0
_froze = False


@contextmanager
def older_objects_frozen(enabled: bool = True) -> Iterator[None]:
    """Freeze the heap for the first run in, unfreeze it when the last one is out."""
    global _runs, _froze
    if not enabled:
        yield
        return
    with _lock:
        _runs += 1
        if _runs == 1 and gc.isenabled() and gc.get_freeze_count() == 0:
            gc.freeze()
            _froze = True
    try:
        yield
    finally:
        with _lock:
            _runs -= 1
            if _runs == 0 and _froze:
                gc.unfreeze()
                _froze = False
