"""Watching a call's progress, and reading a streamed reply (server-sent events).

:class:`Watch` guards one call with the deadlines of :mod:`._pace`: one timer, re-armed when it
fires and at the first event, whose idle deadline is sooner than the first token's (any later
event costs one clock reading, not a new timer); it cancels the calling task
when the first event or the next one is late, and swallows that cancellation (the transport
then raises :class:`~._http.TimedOut` with :attr:`Watch.expired`). The caller's own
cancellation passes through untouched.

:func:`read_events` reads the ``data:`` lines of a ``text/event-stream`` body as they come:
comments (``: ping``, which sse-starlette sends every 15 s whether or not the model writes) are
not progress, ``data: [DONE]`` ends the stream. The events are parsed later, all at once
(:func:`~._wire.parse_stream`), so a reply of a thousand tokens costs one read per network
chunk, not one JSON parse per token while it streams.
"""

from __future__ import annotations

import asyncio
import sys
from types import TracebackType

import aiohttp

from evidex.judges._openai._pace import Deadlines, Pace

__all__ = ["Watch", "read_events"]

_DONE = b"[DONE]"


class Watch:
    """The deadlines of one call (``with Watch(...)`` around it, in the calling task)."""

    def __init__(self, deadlines: Deadlines, pace: Pace) -> None:
        self.deadlines = deadlines
        self.pace = pace
        self.first_token_s: float | None = None
        """Seconds from sending to the first event (None: none yet)."""
        self.longest_gap_s: float | None = None
        """The longest wait between two events (None: fewer than two)."""
        self.expired: str | None = None
        """What was late when the watch cancelled the call."""
        self._loop = asyncio.get_running_loop()
        self._clock = pace.clock
        self._started = self._clock()
        self._last: float | None = None
        self._task: asyncio.Task[object] | None = None
        self._timer: asyncio.TimerHandle | None = None

    def __enter__(self) -> Watch:
        self._task = asyncio.current_task()
        self._arm()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool:
        """True (the exception is swallowed) only for the cancellation the watch made."""
        if self._timer is not None:
            self._timer.cancel()
        if self.expired is None or not isinstance(exc, asyncio.CancelledError):
            return False
        if sys.version_info >= (3, 11) and self._task is not None and self._task.uncancel() > 0:
            return False  # the caller cancelled too: that cancellation wins
        return True

    def event(self) -> None:
        """An event arrived (a token, a few, or the whole reply)."""
        now = self._clock()
        first = self._last is None
        if self._last is None:
            self.first_token_s = now - self._started
        else:
            gap = now - self._last
            if self.longest_gap_s is None or gap > self.longest_gap_s:
                self.longest_gap_s = gap
        self._last = now
        self.pace.progressed()
        if first and self._timer is not None:  # from now on the idle gap: an earlier deadline
            self._timer.cancel()
            self._arm()

    def _due(self) -> tuple[float, str]:
        """When the call is late (``clock`` time), and what to say of the server then."""
        d = self.deadlines
        if self._last is None:
            since = max(self._started, self.pace.last_event)
            due, what = since + d.first_token_s, f"began no reply within {d.first_token_s:g}s"
            if since > self._started:
                what += " of its last progress on another call"
        else:
            due, what = self._last + d.idle_s, f"stalled: no token for {d.idle_s:g}s"
        if d.total_s is not None and self._started + d.total_s <= due:
            due, what = self._started + d.total_s, f"did not answer within {d.total_s:g}s"
        return due, what

    def _arm(self) -> None:
        due, _ = self._due()
        delay = max(0.0, due - self._clock())
        self._timer = self._loop.call_at(self._loop.time() + delay, self._fire)

    def _fire(self) -> None:
        due, what = self._due()
        if self._clock() < due:  # progress since the timer was set: wait for the new deadline
            self._arm()
            return
        self.expired = what
        if self._task is not None:
            self._task.cancel()


async def read_events(content: aiohttp.StreamReader, watch: Watch) -> tuple[list[bytes], bool]:
    """The ``data:`` payloads of an event stream, and whether it ended with ``[DONE]`` (else
    the connection closed first)."""
    events: list[bytes] = []
    data: list[bytes] = []
    rest = b""
    async for chunk in content.iter_any():
        lines = (rest + chunk).split(b"\n")
        rest = lines.pop()
        fed = False
        for raw in lines:
            line = raw.rstrip(b"\r")
            if not line:  # the end of an event: its data lines joined (mostly just one)
                if data:
                    payload = b"\n".join(data)
                    data = []
                    if payload.strip() == _DONE:
                        watch.event()
                        return events, True
                    events.append(payload)
                continue
            if line.startswith(b"data:"):
                value = line[5:]
                data.append(value[1:] if value.startswith(b" ") else value)
                fed = True
        if fed:
            watch.event()
    if data:  # a last event without its blank line
        payload = b"\n".join(data)
        if payload.strip() == _DONE:
            return events, True
        events.append(payload)
    return events, False
