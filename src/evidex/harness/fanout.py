"""Bounded fan-out: run a coroutine over every item, at most ``limit`` at once, results in input
order.

``limit`` workers take the next index from one shared iterator, instead of one task per item
waiting on a semaphore. A run of 1,000 batches at concurrency 64 then holds 64 coroutines, not
1,000 tasks and their waiter futures, and a finished call starts the next without waking a
waiter through the event loop: about 20 microseconds a call less, measured on CPython 3.11.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar, cast

__all__ = ["bounded_map", "chunked_map"]

T = TypeVar("T")
R = TypeVar("R")


async def bounded_map(
    items: Sequence[T],
    limit: int,
    fn: Callable[[int, T], Awaitable[R]],
    on_progress: Callable[[int, int], None] | None = None,
) -> list[R]:
    """``[await fn(i, item) for i, item in enumerate(items)]``, at most ``limit`` (at least 1)
    running at once and started in input order; ``on_progress(done, total)`` after each. The
    first exception propagates, as ``asyncio.gather`` does, and no new item is started after
    it."""
    total = len(items)
    slots: list[R | None] = [None] * total
    indices = iter(range(total))
    failed = False
    done = 0

    async def worker() -> None:
        nonlocal done, failed
        for index in indices:  # shared: each index is taken by exactly one worker
            if failed:
                return
            try:
                slots[index] = await fn(index, items[index])
            except BaseException:
                failed = True
                raise
            done += 1
            if on_progress is not None:
                on_progress(done, total)

    await asyncio.gather(*(worker() for _ in range(min(max(1, limit), total))))
    return cast("list[R]", slots)  # every slot was filled, or an exception left above


async def chunked_map(
    items: Sequence[T],
    limit: int,
    size: Callable[[], int],
    fn: Callable[[int, Sequence[T]], Awaitable[R]],
    on_progress: Callable[[int, int], None] | None = None,
) -> list[R]:
    """:func:`bounded_map` over chunks of ``items`` that are cut when they are started, each of
    ``size()`` items at that moment (a batch size that adapts while the run goes); results in
    chunk order. ``on_progress(done, total)`` counts chunks, the total estimated at the
    current size for what is left."""
    results: dict[int, R] = {}
    position = started = done = 0
    failed = False

    async def worker() -> None:
        nonlocal position, started, done, failed
        while position < len(items) and not failed:
            chunk = items[position : position + max(1, size())]
            position += len(chunk)
            index, started = started, started + 1
            try:
                results[index] = await fn(index, chunk)
            except BaseException:
                failed = True
                raise
            done += 1
            if on_progress is not None:
                left = len(items) - position
                on_progress(done, started + -(-left // max(1, size())))

    await asyncio.gather(*(worker() for _ in range(max(1, limit))))
    return [results[i] for i in range(started)]
