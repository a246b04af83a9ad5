"""What an engine runs: one object with the task unit, the input, the sinks and the counters.

Every engine (:mod:`~evidex.bulk.local`, :mod:`~evidex.bulk.ray_engine`) takes a
:class:`BulkRun` and its own keywords, sends each task of ``feed`` through ``bulk`` however it
likes, and hands every finished line to :meth:`BulkRun.settle`, which alone writes the output
and the errors file and counts: so the checkpoint discipline is the same for all engines.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from evidex.bulk.checkpoint import AppendLog
from evidex.bulk.stats import BulkProgress, BulkStats
from evidex.bulk.stream import TaskFeed
from evidex.bulk.tasks import BulkJob, Processed

__all__ = ["BulkRun", "Engine"]


@dataclass
class BulkRun:
    """One bulk run as an engine sees it.

    ``run`` holds the run keywords of the job calls (judge, store, settings, hooks) resolved
    in this process; ``concurrency`` bounds the tasks in flight (per actor, on Ray).
    """

    bulk: BulkJob
    feed: TaskFeed
    output: AppendLog
    errors: AppendLog
    stats: BulkStats
    concurrency: int
    run: Mapping[str, Any]
    on_progress: BulkProgress | None = None

    def settle(self, item: Processed) -> None:
        """Write one finished line (its result, else its error) and count it."""
        if item.error is not None:
            self.errors.write(item.error)
        elif item.result is not None:
            self.output.write(item.result)
        self.stats.skipped = self.feed.skipped
        self.stats.record(item)
        if self.on_progress is not None:
            self.on_progress(self.stats)

    def done(self) -> None:
        """The input is exhausted: the skipped count is final."""
        self.stats.skipped = self.feed.skipped


Engine = Callable[..., Awaitable[None]]
"""``engine(bulk_run, **engine_options)``."""
