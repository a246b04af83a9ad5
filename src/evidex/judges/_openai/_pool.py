"""The endpoints of one ``openai:`` judge and how a call picks one.

Each :class:`Endpoint` has its own connections (:mod:`._http`), circuit breaker, in-flight
limit, count of outstanding calls, cooldown and structured-output state. :meth:`Pool.pick`
sends a call to the endpoint with the fewest outstanding calls among those that may take one
(breaker closed, or half-open and not probing yet; not cooling down after a 429), preferring
one with a free slot.

Adaptive concurrency (AIMD, as TCP does it): a 429 or a timeout halves the endpoint's limit,
once per round of calls (a call that started before the last cut does not cut again), and a
full round of successes (as many as the limit) adds one back, up to the endpoint's maximum.
A server seen to interrupt one streamed reply for another request (:meth:`Pool.serialise`)
answers one call at a time: its maximum becomes 1.

Each endpoint also keeps its :class:`~._pace.Pace`: its measured replies and the deadlines of
its next calls.

With one endpoint there is nowhere else to send a call: the judge's own breaker and the
harness's ``Retry-After`` wait do that job, so the endpoint's breaker and cooldown are not
consulted (its limit still adapts, and negotiation is the same).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from evidex.judges._openai._pace import Pace
from evidex.judges._openai._wire import public_url
from evidex.limits import CircuitBreaker, InFlightLimit

if TYPE_CHECKING:
    from evidex.judges._openai._http import Transport

__all__ = ["UNSIZED_LIMIT", "Endpoint", "Pool"]

UNSIZED_LIMIT = 64
"""An endpoint's limit before a run sized it (a judge called directly, outside the harness)."""


class Endpoint:
    """One server of a pool. Counters and state change under the pool's lock."""

    def __init__(
        self,
        url: str,
        *,
        limit: int,
        breaker_threshold: int,
        breaker_cooldown_s: float,
        clock: Callable[[], float],
        pace: Pace,
    ) -> None:
        self.url = url
        self.public = public_url(url)
        self.breaker = CircuitBreaker(
            threshold=breaker_threshold, cooldown_s=breaker_cooldown_s, clock=clock
        )
        self.max_limit = limit
        self.limit = InFlightLimit(limit)
        self.outstanding = 0
        self.cooling_until = 0.0
        self.refused: frozenset[str] = frozenset()
        """Structured-output modes this server refused (see :mod:`._wire`)."""
        self.epoch = 0
        """Counts limit cuts; a call remembers the epoch it started in."""
        self.answered = 0
        self.failed = 0
        self._successes = 0
        self.transport: Transport | None = None
        self.pace = pace
        self.serial = False
        """The server interrupts a streamed reply when another request arrives: one call at a
        time."""

    def state(self) -> dict[str, Any]:
        """A snapshot for tests, logs and benchmarks (no credentials)."""
        return {
            "url": self.public,
            "breaker": self.breaker.state,
            "limit": self.limit.limit,
            "max_limit": self.max_limit,
            "outstanding": self.outstanding,
            "answered": self.answered,
            "failed": self.failed,
            "refused": sorted(self.refused),
            "serial": self.serial,
            "pace": self.pace.state(),
        }


class Pool:
    """The endpoints of one judge instance, shared by every loop and thread that uses it."""

    def __init__(
        self,
        urls: Sequence[str],
        *,
        limit: int | None,
        breaker_threshold: int,
        breaker_cooldown_s: float,
        pace: Callable[[], Pace],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``pace``: makes each endpoint's :class:`Pace`."""
        self.clock = clock
        self.sized = limit is not None
        self.endpoints = tuple(
            Endpoint(
                url,
                limit=limit or UNSIZED_LIMIT,
                breaker_threshold=breaker_threshold,
                breaker_cooldown_s=breaker_cooldown_s,
                clock=self._now,
                pace=pace(),
            )
            for url in urls
        )
        self.on_resize: Callable[[int], None] | None = None
        """Called with the sum of the endpoints' limits when one changes."""
        self._lock = threading.Lock()

    def _now(self) -> float:
        return self.clock()

    @property
    def capacity(self) -> int:
        return sum(e.limit.limit for e in self.endpoints)

    def size(self, limit: int) -> None:
        """Give every endpoint ``limit`` as its maximum, once (the first run's judge limit)."""
        with self._lock:
            if self.sized:
                return
            self.sized = True
            for e in self.endpoints:
                if not e.serial:
                    e.max_limit = limit
                    e.limit.resize(limit)

    # ------------------------------------------------------------------ routing

    def pick(self, tried: Sequence[Endpoint]) -> Endpoint | None:
        """The least busy endpoint that may take a call and was not tried yet for it; its
        outstanding count is taken here. None: no endpoint may take it."""
        with self._lock:
            if len(self.endpoints) == 1:
                (only,) = self.endpoints
                if only in tried:
                    return None
                only.outstanding += 1
                return only
            now = self.clock()
            ready = [
                e
                for e in self.endpoints
                if e not in tried and e.cooling_until <= now and e.breaker.state != "open"
            ]
            ready.sort(key=lambda e: (e.outstanding >= e.limit.limit, e.outstanding))
            for e in ready:
                if e.breaker.allow():  # a half-open endpoint takes one trial call
                    e.outstanding += 1
                    return e
            return None

    def done(self, endpoint: Endpoint) -> None:
        with self._lock:
            endpoint.outstanding -= 1

    def resting(self) -> tuple[list[str], float | None, bool]:
        """Why no endpoint may take a call: one line each, the seconds until the first may
        again, and whether every one is drained (breaker open) rather than cooling down."""
        with self._lock:
            now = self.clock()
            lines, waits, drained = [], [], True
            for e in self.endpoints:
                if e.cooling_until > now:
                    left = e.cooling_until - now
                    lines.append(f"{e.public} cooling down ({left:.1f}s left)")
                    waits.append(left)
                    drained = False
                elif e.breaker.opened_at is not None:
                    left = max(0.0, e.breaker.opened_at + e.breaker.cooldown_s - now)
                    lines.append(f"{e.public} drained after {e.breaker.failures} failures")
                    waits.append(left)
                else:
                    lines.append(f"{e.public} busy")
                    drained = False
            return lines, (min(waits) if waits else None), drained

    # ------------------------------------------------------------------ outcomes

    def succeeded(self, endpoint: Endpoint) -> None:
        with self._lock:
            endpoint.answered += 1
            endpoint.breaker.record_success()
            endpoint._successes += 1
            limit = endpoint.limit.limit
            if endpoint._successes >= limit and limit < endpoint.max_limit:
                endpoint._successes = 0
                endpoint.limit.resize(limit + 1)
                self._resized()

    def failed(
        self,
        endpoint: Endpoint,
        *,
        epoch: int,
        overloaded: bool,
        broken: bool,
        cool_for_s: float | None,
    ) -> None:
        """Record a failed call: ``overloaded`` (429, timeout) cuts the limit, ``broken``
        (transport fault, timeout, 5xx) counts for the breaker, ``cool_for_s`` rests it."""
        with self._lock:
            endpoint.failed += 1
            if broken:
                endpoint.breaker.record_failure()
            if cool_for_s is not None:
                endpoint.cooling_until = max(endpoint.cooling_until, self.clock() + cool_for_s)
            if overloaded and epoch == endpoint.epoch:
                endpoint.epoch += 1
                endpoint._successes = 0
                endpoint.limit.resize(max(1, endpoint.limit.limit // 2))
                self._resized()

    def abandoned(self, endpoint: Endpoint) -> None:
        """A call given up by its caller (cancelled): a probe that never finished re-opens the
        breaker, so the next probe is not blocked forever."""
        with self._lock:
            if endpoint.breaker.state == "half-open":
                endpoint.breaker.record_failure()

    def serialise(self, endpoint: Endpoint) -> bool:
        """Send ``endpoint`` one call at a time from now on; True the first time."""
        with self._lock:
            if endpoint.serial:
                return False
            endpoint.serial = True
            endpoint.max_limit = 1
            endpoint.limit.resize(1)
            self._resized()
            return True

    def refuse(self, endpoint: Endpoint, kind: str) -> bool:
        """Remember that ``endpoint`` refused a structured-output mode; True the first time."""
        with self._lock:
            if kind in endpoint.refused:
                return False
            endpoint.refused = endpoint.refused | {kind}
            return True

    def _resized(self) -> None:
        if self.on_resize is not None:
            self.on_resize(self.capacity)
