"""How long a call to one endpoint may go without progress: deadlines that follow the latency
measured on that endpoint, not one total deadline.

A streamed reply shows progress: each server-sent event is a token or a few. So a call is not
given a total time; it is given a time to its first event (which holds queueing, reading the
prompt and the first token) and a gap between events. Both follow the endpoint's measured
replies: the first event at most :data:`FIRST_TOKEN_FACTOR` times the slowest of the last
:data:`WINDOW` first events (more for a longer prompt than that one, at its measured seconds per
byte of request), the gap at most :data:`IDLE_FACTOR` times the longest gap of the last
:data:`WINDOW` replies. Each lies between a floor, so that a fast server's jitter is not taken
for a stall, and the judge kind's ceiling (:class:`Limits`), which is also what a call waits
before anything was measured. A slow server that keeps writing is never abandoned; a stalled
one is, within the gap; a dead one refuses the connection at once.

Calls to one endpoint may wait for each other on the server (llama.cpp answers one at a time):
while a call waits for its first event, any event of another call to the same endpoint is
progress of the server, and restarts its wait. A server that does not stream (it answers one
JSON body) shows its first progress when the whole reply arrives: the same deadline then bounds
the whole call, and what is measured is whole calls.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

__all__ = [
    "FIRST_TOKEN_FACTOR",
    "IDLE_FACTOR",
    "LOCAL",
    "REMOTE",
    "WINDOW",
    "Deadlines",
    "Limits",
    "Pace",
]

WINDOW = 20
"""Replies remembered per endpoint."""
FIRST_TOKEN_FACTOR = 6.0
"""The first event may take this many times the slowest measured one: a loaded machine or a
busier server may well be several times slower than its recent past, and the wait before the
first token cannot tell slow from stalled."""
IDLE_FACTOR = 10.0
"""A gap between events may be this many times the longest measured one: between tokens a
server that is still working is regular, so a gap ten times the worst is a stall."""


@dataclass(frozen=True)
class Limits:
    """The bounds of one judge kind's deadlines, in seconds: the ceilings (what a call waits
    before anything was measured) and the floors (what a derived deadline never goes under)."""

    first_token_s: float
    idle_s: float
    first_token_floor_s: float = 30.0
    idle_floor_s: float = 10.0


REMOTE = Limits(first_token_s=60.0, idle_s=60.0)
"""An API: its first event within a minute (the whole reply's old limit), at least 30 s once
measured; a gap of a minute at most, at least 10 s."""
LOCAL = Limits(first_token_s=900.0, idle_s=60.0)
"""A server on this machine (llama.cpp, Ollama, LM Studio on the CPU): reading a prompt of ten
passages takes minutes on two cores, so the first event may take 15 minutes before anything
was measured; between tokens it is as regular as an API."""


@dataclass(frozen=True)
class Deadlines:
    """A call's deadlines, fixed when it is sent."""

    first_token_s: float
    idle_s: float
    total_s: float | None = None
    """A whole-call limit set by hand (``timeout_s``); None: none."""


class Pace:
    """One endpoint's measured replies, the deadlines they give, and its latest progress."""

    def __init__(
        self,
        limits: Limits,
        *,
        first_token_s: float | None = None,
        idle_s: float | None = None,
        total_s: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``first_token_s`` and ``idle_s``: fixed deadlines (options), instead of derived ones;
        ``total_s``: a whole-call limit, which also caps the first event's."""
        self.limits = limits
        self._fixed_first = first_token_s
        self._fixed_idle = idle_s
        self._total = total_s
        self.clock = clock
        self._firsts: deque[tuple[float, int]] = deque(maxlen=WINDOW)
        self._gaps: deque[float] = deque(maxlen=WINDOW)
        self._lock = threading.Lock()
        self.last_event = float("-inf")
        """When the latest event of any call to this endpoint arrived (``clock`` time)."""

    def deadlines(self, size: int) -> Deadlines:
        """The deadlines of a call whose request is ``size`` bytes long."""
        with self._lock:
            first = self._fixed_first or self._first(size)
            gap = self._fixed_idle or self._idle()
        if self._total is not None:
            first = min(first, self._total)
        return Deadlines(first_token_s=first, idle_s=gap, total_s=self._total)

    def _first(self, size: int) -> float:
        limits = self.limits
        if not self._firsts:
            return limits.first_token_s
        slowest = max(s for s, _ in self._firsts)
        per_byte = max(s / max(1, n) for s, n in self._firsts)
        wanted = FIRST_TOKEN_FACTOR * max(slowest, per_byte * size)
        return min(limits.first_token_s, max(limits.first_token_floor_s, wanted))

    def _idle(self) -> float:
        limits = self.limits
        if not self._gaps:
            return limits.idle_s
        wanted = IDLE_FACTOR * max(self._gaps)
        return min(limits.idle_s, max(limits.idle_floor_s, wanted))

    def observe(self, first_token_s: float, longest_gap_s: float | None, size: int) -> None:
        """A reply that arrived whole: its first event's wait, its longest gap between events
        (None: it came in one piece), and its request's size in bytes."""
        with self._lock:
            self._firsts.append((first_token_s, size))
            if longest_gap_s is not None:
                self._gaps.append(longest_gap_s)

    def progressed(self) -> None:
        """An event of some call arrived: the server is working."""
        self.last_event = self.clock()

    def state(self) -> dict[str, float | int]:
        """A snapshot for logs and benchmarks: replies measured and the deadlines now (for a
        request of the largest size measured)."""
        with self._lock:
            size = max((n for _, n in self._firsts), default=0)
            measured = len(self._firsts)
        now = self.deadlines(size)
        return {"measured": measured, "first_token_s": now.first_token_s, "idle_s": now.idle_s}
