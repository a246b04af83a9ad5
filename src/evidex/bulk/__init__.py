"""Bulk runs: one job over a large JSONL file of tasks, streaming, resumable after ``kill -9``.

- :mod:`~evidex.bulk.tasks`: the per-task unit every engine runs (:class:`BulkJob`: a line's
  object in, a result line or an error line out); plain and picklable, no files, no loop.
- :mod:`~evidex.bulk.stream`: the input read one line at a time into tasks (bad lines and
  repeated ids become error lines, ids already done are skipped).
- :mod:`~evidex.bulk.checkpoint`: the output as the checkpoint (whole-line appends, fsync
  window, torn-last-line repair, the run's lock).
- :mod:`~evidex.bulk.local`: the local engine (asyncio, bounded window of tasks in flight).
- :mod:`~evidex.bulk.stats`: the counters behind the progress bar and the summary.
- :mod:`~evidex.bulk.run`: :func:`run_bulk` / :func:`arun_bulk` and the engine registry.

What it may import: the root modules (errors, types, preflight, taxonomy, judging), the public
modules of ``jobs`` (the job calls and specs), ``harness`` (settings, events, ports) and
``store`` (through ``evidex.jobs.resolve_store``). The CLI (``evidex bulk``) is a thin layer
over :func:`run_bulk`; nothing here imports the CLI.
"""

from evidex.bulk.run import ENGINES, arun_bulk, default_errors_path, run_bulk
from evidex.bulk.stats import BulkProgress, BulkStats
from evidex.bulk.tasks import JOBS, BulkJob, Processed, Task

__all__ = [
    "ENGINES",
    "JOBS",
    "BulkJob",
    "BulkProgress",
    "BulkStats",
    "Processed",
    "Task",
    "arun_bulk",
    "default_errors_path",
    "run_bulk",
]
