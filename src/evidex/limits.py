"""What a judge instance allows at once: an in-flight limit and a circuit breaker.

Both belong to the judge, not to a job run: every job, request and thread that uses one judge
instance shares its :class:`JudgeGate`, so two jobs or 200 service requests never put more
calls in flight than the judge's limit, and repeated transport failures seen by any of them
open one breaker for all. The time a call waits for a slot is measured apart from the call
itself, so latency figures are the backend's, not the queue's.

Breaker states: closed (calls pass) → open after ``threshold`` consecutive failures (calls are
refused for ``cooldown_s``) → half-open (one trial call; success closes, failure re-opens).
Validation failures do not count: the judge answered, it just answered badly.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

__all__ = ["CircuitBreaker", "InFlightLimit", "JudgeGate"]


@dataclass
class CircuitBreaker:
    threshold: int = 5
    cooldown_s: float = 30.0
    clock: Callable[[], float] = time.monotonic
    failures: int = 0
    opened_at: float | None = field(default=None)
    _trial_out: bool = False

    @property
    def state(self) -> str:
        if self.opened_at is None:
            return "closed"
        if self.clock() - self.opened_at >= self.cooldown_s:
            return "half-open"
        return "open"

    def allow(self) -> bool:
        state = self.state
        if state == "closed":
            return True
        if state == "half-open" and not self._trial_out:
            self._trial_out = True
            return True
        return False

    def record_success(self) -> None:
        self.failures = 0
        self.opened_at = None
        self._trial_out = False

    def record_failure(self) -> None:
        self.failures += 1
        if self.state == "half-open" or self.failures >= self.threshold:
            self.opened_at = self.clock()
            self._trial_out = False


class InFlightLimit:
    """A counting limit that any event loop in any thread may wait on.

    ``asyncio.Semaphore`` binds itself to one event loop, but one judge serves the sync API
    (a fresh loop per call), notebooks (a worker thread's loop) and the service (the server's
    loop) alike. Waiters are served first come, first served; a freed slot is handed straight
    to the next waiter, so nobody can overtake the queue.
    """

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError(f"an in-flight limit must be at least 1, got {limit}")
        self._limit = limit
        self._lock = threading.Lock()
        self._active = 0
        self._waiters: deque[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = deque()
        self.peak = 0
        """The most calls ever in flight at once (for tests and metrics)."""

    @property
    def limit(self) -> int:
        return self._limit

    @property
    def in_flight(self) -> int:
        return self._active

    @property
    def waiting(self) -> int:
        return len(self._waiters)

    def resize(self, limit: int) -> None:
        """Change the limit; a larger one admits waiters at once, a smaller one takes effect as
        calls finish."""
        if limit < 1:
            raise ValueError(f"an in-flight limit must be at least 1, got {limit}")
        with self._lock:
            self._limit = limit
            while self._waiters and self._active < self._limit:
                self._grant_next_locked()

    async def acquire(self) -> None:
        loop = asyncio.get_running_loop()
        with self._lock:
            if self._active < self._limit and not self._waiters:
                self._take_locked()
                return
            future: asyncio.Future[None] = loop.create_future()
            entry = (loop, future)
            self._waiters.append(entry)
        try:
            await future
        except asyncio.CancelledError:
            with self._lock:
                if entry in self._waiters:
                    self._waiters.remove(entry)
                    raise
            # the slot was handed over before the cancellation landed: give it back
            if future.done() and not future.cancelled():
                self.release()
            raise

    def release(self) -> None:
        with self._lock:
            self._active -= 1
            if self._waiters and self._active < self._limit:
                self._grant_next_locked()

    def _take_locked(self) -> None:
        self._active += 1
        self.peak = max(self.peak, self._active)

    def _grant_next_locked(self) -> None:
        loop, future = self._waiters.popleft()
        self._take_locked()
        loop.call_soon_threadsafe(self._grant, future)

    def _grant(self, future: asyncio.Future[None]) -> None:
        if future.done():  # cancelled while the grant was on its way
            self.release()
        else:
            future.set_result(None)


class JudgeGate:
    """The in-flight limit and the circuit breaker of one judge instance."""

    def __init__(
        self, limit: int, *, breaker_threshold: int = 5, breaker_cooldown_s: float = 30.0
    ) -> None:
        self.limit = InFlightLimit(limit)
        self.breaker = CircuitBreaker(threshold=breaker_threshold, cooldown_s=breaker_cooldown_s)

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[float]:
        """Hold one in-flight slot; yields the seconds spent waiting for it."""
        started = time.perf_counter()
        await self.limit.acquire()
        try:
            yield time.perf_counter() - started
        finally:
            self.limit.release()
