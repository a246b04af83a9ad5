"""The local engine: one process, one event loop, a bounded window of tasks in flight.

It pulls lines from the :class:`~evidex.bulk.stream.TaskFeed` only while fewer than
``concurrency`` tasks run, so memory does not grow with the input; each completed task's
line is appended to the output (or the errors file) at once, in completion order. A run-time
error of any task cancels the others and propagates: what was written stays, and the same
command resumes from there.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from evidex.bulk.checkpoint import AppendLog
from evidex.bulk.stats import BulkProgress, BulkStats
from evidex.bulk.stream import TaskFeed
from evidex.bulk.tasks import BulkJob, Processed

__all__ = ["run_local"]


async def run_local(
    bulk: BulkJob,
    feed: TaskFeed,
    output: AppendLog,
    errors: AppendLog,
    stats: BulkStats,
    *,
    concurrency: int,
    run: Mapping[str, Any],
    on_progress: BulkProgress | None = None,
) -> None:
    """Run every task of ``feed`` with the run keywords ``run`` (judge, store, settings,
    hooks), at most ``concurrency`` at once."""
    pending: set[asyncio.Future[Processed]] = set()

    def settle(item: Processed) -> None:
        if item.error is not None:
            errors.write(item.error)
        elif item.result is not None:
            output.write(item.result)
        stats.skipped = feed.skipped
        stats.record(item)
        if on_progress is not None:
            on_progress(stats)

    async def drain(limit: int) -> None:
        nonlocal pending
        while len(pending) > limit:
            finished, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            for future in finished:
                settle(future.result())

    try:
        for item in feed:
            if item.data is None:
                settle(Processed(item.line, None, error=item.error))
                continue
            await drain(concurrency - 1)
            pending.add(asyncio.ensure_future(bulk.process(item.data, item.line, **run)))
        await drain(0)
        stats.skipped = feed.skipped
    finally:
        for future in pending:
            future.cancel()
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)
