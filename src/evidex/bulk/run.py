"""``run_bulk`` / ``arun_bulk``: one job over a JSONL file of tasks, resumable, with any engine.

The run: open the input (a usage error if it cannot be read), scan the output for the ids
already done (repairing a torn last line), start the errors file afresh (every bad line of the
input is found again on each run), resolve the judge and the store once, check the job's
options once, then hand the task stream to the engine. An engine is an async function with the
signature of :func:`~evidex.bulk.local.run_local`; ``local`` is the one built in.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from evidex.bulk.checkpoint import AppendLog, scan_output
from evidex.bulk.engine import BulkRun, Engine
from evidex.bulk.local import run_local
from evidex.bulk.ray_engine import run_ray
from evidex.bulk.stats import BulkProgress, BulkStats
from evidex.bulk.stream import TaskFeed, count_lines, open_input
from evidex.bulk.tasks import BulkJob
from evidex.errors import ConfigError
from evidex.harness.events import Hooks
from evidex.harness.ports import StorePort
from evidex.harness.settings import HarnessSettings
from evidex.jobs import resolve_judge, resolve_store, sync_of
from evidex.judging import Judge
from evidex.preflight import InputLimits

__all__ = ["ENGINES", "Engine", "arun_bulk", "default_errors_path", "run_bulk"]

ENGINES: dict[str, Engine] = {"local": run_local, "ray": run_ray}
"""Engines by name: ``local`` (this process) and ``ray`` (Ray Data ``map_batches`` over the same
:class:`~evidex.bulk.tasks.BulkJob`, one judge per actor; the ``ray`` extra, imported when run)."""


def default_errors_path(output: Path) -> Path:
    """``OUT.errors.jsonl`` next to ``OUT.jsonl``."""
    name = output.name.removesuffix(".jsonl")
    return output.with_name(f"{name}.errors.jsonl")


def engine_of(name: str) -> Engine:
    if name in ENGINES:
        return ENGINES[name]
    raise ConfigError(f"unknown engine {name!r}; choose one of {', '.join(ENGINES)}")


async def arun_bulk(
    job: str,
    input: str | Path,
    output: str | Path,
    *,
    errors: str | Path | None = None,
    concurrency: int | None = None,
    engine: str = "local",
    engine_options: Mapping[str, Any] | None = None,
    taxonomy: Any = None,
    judge: Judge | str | None = None,
    store: StorePort | str | None = None,
    settings: HarnessSettings | None = None,
    hooks: Hooks | None = None,
    on_progress: BulkProgress | None = None,
    sync_interval: float = 1.0,
    limits: InputLimits | None = None,
    **options: Any,
) -> BulkStats:
    """Run ``job`` over every task of ``input`` (JSONL, one task a line), appending one result
    line per task to ``output`` in completion order; return the run's counters.

    Resumable: tasks whose id is in ``output`` already are skipped, so after a crash or
    ``kill -9`` the same call finishes the run and each task is in the output exactly once.
    Bad lines go to ``errors`` (default ``OUT.errors.jsonl``) with their line number; the run
    goes on. ``concurrency``: tasks in flight, and the run's ``max_concurrency`` (so also the
    judge's in-flight limit, unless the judge has its own); default: the configured one.
    ``options``: the job's own options (``risk``, ``batch_size`` ...); classify's taxonomy
    is its ``labels`` option (``taxonomy=`` says the same). ``judge``, ``store``,
    ``settings``, ``hooks``, ``limits``: as for every job (a task over ``limits`` is a bad
    line, in the errors file).
    ``engine_options``: the engine's own keywords (ray: ``address``, ``workers``,
    ``judge_options``; see :func:`~evidex.bulk.ray_engine.run_ray`).
    """
    run_engine = engine_of(engine)
    if taxonomy is not None:
        options = {**options, "labels": taxonomy}
    bulk = BulkJob(job, options)
    in_path, out_path = Path(input), Path(output)
    err_path = Path(errors) if errors is not None else default_errors_path(out_path)
    open_input(in_path)
    if len({in_path.resolve(), out_path.resolve(), err_path.resolve()}) < 3:
        raise ConfigError("the input, the output and the errors file must be three files")
    settings = settings or HarnessSettings.from_config()
    limit = concurrency if concurrency is not None else settings.max_concurrency
    if limit < 1:
        raise ConfigError(f"concurrency must be at least 1, got {limit}")
    settings = dataclasses.replace(settings, max_concurrency=limit)
    async with contextlib.AsyncExitStack() as stack:
        out_log = AppendLog(out_path, sync_interval=sync_interval, lock=True)
        stack.callback(out_log.close)
        scanned = scan_output(out_path)
        err_path.unlink(missing_ok=True)
        err_log = AppendLog(err_path, sync_interval=sync_interval, lazy=True)
        stack.callback(err_log.close)
        the_judge = resolve_judge(judge, job)
        if not isinstance(judge, Judge):
            stack.push_async_callback(the_judge.aclose)
        the_store = resolve_store(store)
        if store is None or isinstance(store, str):
            stack.callback(getattr(the_store, "close", lambda: None))
        bulk.check(the_judge, the_store)
        stats = BulkStats(
            output=out_path,
            errors_path=err_path,
            total=max(0, count_lines(in_path) - len(scanned.done)),
            truncated_bytes=scanned.truncated_bytes,
        )
        run: dict[str, Any] = {"judge": the_judge, "store": the_store, "settings": settings}
        if hooks is not None:
            run["hooks"] = hooks
        if limits is not None:
            run["limits"] = limits
        if on_progress is not None:
            on_progress(stats)
        feed = TaskFeed(in_path, scanned.done)
        try:
            job_run = BulkRun(bulk, feed, out_log, err_log, stats, limit, run, on_progress)
            await run_engine(job_run, **(engine_options or {}))
        finally:
            stats.finished = time.monotonic()
    return stats


run_bulk = sync_of(arun_bulk, "The sync form of :func:`arun_bulk` (same keywords).")
