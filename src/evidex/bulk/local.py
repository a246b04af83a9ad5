"""The local engine: one process, one event loop, a bounded window of tasks in flight.

It pulls lines from the :class:`~evidex.bulk.stream.TaskFeed` only while fewer than
``concurrency`` tasks run, so memory does not grow with the input; each completed task's
line is appended to the output (or the errors file) at once, in completion order. A run-time
error of any task cancels the others and propagates: what was written stays, and the same
command resumes from there.
"""

from __future__ import annotations

import asyncio

from evidex.bulk.engine import BulkRun
from evidex.bulk.tasks import Processed

__all__ = ["run_local"]


async def run_local(job: BulkRun) -> None:
    """Run every task of the feed with the run's keywords, at most ``concurrency`` at once."""
    pending: set[asyncio.Future[Processed]] = set()
    settle, concurrency = job.settle, job.concurrency

    async def drain(limit: int) -> None:
        nonlocal pending
        while len(pending) > limit:
            finished, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            for future in finished:
                settle(future.result())

    try:
        for item in job.feed:
            if item.data is None:
                settle(Processed(item.line, None, error=item.error))
                continue
            await drain(concurrency - 1)
            task = job.bulk.process(item.data, item.line, **job.run)
            pending.add(asyncio.ensure_future(task))
        await drain(0)
        job.done()
    finally:
        for future in pending:
            future.cancel()
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)
