"""The Ray engine: the same bulk run on Ray Data, one judge per actor, on one machine or a cluster.

The driver (this process) keeps everything that makes a run exactly-once: it reads the input
through the same :class:`~evidex.bulk.stream.TaskFeed` as the local engine (bad lines and
repeated ids become error lines with their line number, ids already in the output are
skipped), and it alone appends to the output and the errors file, one whole line at a time,
through the run's :class:`~evidex.bulk.checkpoint.AppendLog`. The workers only compute: the
feed is cut into windows of ``window`` tasks, each window becomes a Ray Dataset, and
``map_batches`` runs :class:`Grader`, a callable class on a fixed pool of ``workers`` actors.
Each actor builds its judge and opens its own store connection once, then runs the per-task
unit (:meth:`BulkJob.process <evidex.bulk.tasks.BulkJob.process>`) over every batch it gets,
at most ``concurrency`` tasks at once. Results stream back in input order (Ray Data's
``preserve_order``) and are written as they arrive, so a run stopped at any point resumes
from the output like a local one.

What scales: the actors (one judge each: a MiniLM session, a Qwen model, or an ``openai:``
pool of endpoints with its own limits and breakers) and the store. Every actor writes audit
rows, cache entries and review items to the ``--db`` store: a SQLite file works on one
machine (WAL, a busy timeout; writers take turns), a shared PostgreSQL is what several
machines need. Each window starts a fresh actor pool, so a judge is loaded once per window,
not once per task. The caller's ``hooks`` are not called for records made on the workers;
those records are in the store's audit log.

Ray is the ``ray`` extra (``pip install 'evidex[ray]'``), imported only when this engine runs.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import os
import pickle
import warnings
from collections.abc import Awaitable, Iterator, Mapping
from dataclasses import dataclass, field
from itertools import islice
from typing import Any

from evidex.bulk.engine import BulkRun
from evidex.bulk.stream import FeedItem, TaskFeed
from evidex.bulk.tasks import BulkJob, Processed
from evidex.errors import ConfigError, MissingExtraError, RunError
from evidex.harness.fanout import bounded_map
from evidex.harness.settings import HarnessSettings
from evidex.jobs import resolve_judge, resolve_store
from evidex.preflight import InputLimits

__all__ = ["DEFAULT_WINDOW", "Grader", "RaySetup", "run_ray"]

logger = logging.getLogger("evidex.bulk")

DEFAULT_WINDOW = 10_000
"""Tasks per Ray Dataset: the driver holds at most one window of tasks, and each window loads
the judge once per actor."""


@dataclass(frozen=True)
class RaySetup:
    """What an actor needs to build its own judge and store: plain values, shipped pickled.

    ``judge``: the spec string; ``judge_options``: its options (``base_url`` ...);
    ``store``: the store URL every actor opens (never an in-memory database)."""

    bulk: BulkJob
    judge: str
    store: str
    judge_options: Mapping[str, Any] = field(default_factory=dict)
    settings: HarnessSettings = field(default_factory=HarnessSettings)
    concurrency: int = 4
    limits: InputLimits | None = None


class Grader:
    """The callable class of ``map_batches``: one judge and one store per actor, built once.

    A batch is ``{"line": [...], "task": [pickled line objects]}``; the answer is
    ``{"line": [...], "processed": [pickled Processed]}`` in the same order."""

    def __init__(self, setup: RaySetup) -> None:
        self.setup = setup
        self.loop = asyncio.new_event_loop()
        self.judge = resolve_judge(setup.judge, setup.bulk.job, **setup.judge_options)
        self.store = resolve_store(setup.store)
        self.run: dict[str, Any] = {
            "judge": self.judge,
            "store": self.store,
            "settings": setup.settings,
            "limits": setup.limits,
        }

    def __call__(self, batch: Mapping[str, Any]) -> dict[str, list[Any]]:
        lines = [int(n) for n in batch["line"]]
        tasks = [pickle.loads(raw) for raw in batch["task"]]
        done = self.loop.run_until_complete(self._process(lines, tasks))
        return {"line": lines, "processed": [pickle.dumps(p) for p in done]}

    async def _process(self, lines: list[int], tasks: list[dict[str, Any]]) -> list[Processed]:
        bulk = self.setup.bulk

        def one(_: int, numbered: tuple[int, dict[str, Any]]) -> Awaitable[Processed]:
            line, data = numbered
            return bulk.process(data, line, **self.run)

        numbered = list(zip(lines, tasks, strict=True))
        return await bounded_map(numbered, self.setup.concurrency, one)

    def __del__(self) -> None:  # best effort: an actor is ended by its pool, not closed
        try:
            self.loop.run_until_complete(self.judge.aclose())
            getattr(self.store, "close", lambda: None)()
            self.loop.close()
        except Exception:  # pragma: no cover - interpreter shutdown
            pass


def import_ray() -> Any:
    """The ``ray`` module (typed ``Any``: Ray is the untyped boundary), or the install hint."""
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    try:
        ray = importlib.import_module("ray")
        importlib.import_module("ray.data")
    except ImportError as exc:
        raise MissingExtraError("the ray engine (evidex bulk --engine ray)", "ray") from exc
    return ray


def connect(ray: Any, address: str | None, workers: int | None) -> bool:
    """Join the cluster at ``address`` (``auto``, ``ray://HOST:10001`` ...; else
    ``RAY_ADDRESS``), or start a local one with ``workers`` CPUs and no dashboard. True when
    this call started Ray (the run then shuts it down); an already initialised Ray (a test's,
    a notebook's) is used as it is."""
    if ray.is_initialized():
        return False
    quiet = {"log_to_driver": False, "logging_level": logging.WARNING}
    address = address or os.environ.get("RAY_ADDRESS") or None
    if address:
        ray.init(address=address, **quiet)
    else:
        ray.init(num_cpus=workers or os.cpu_count() or 1, include_dashboard=False, **quiet)
    return True


def pool_size(ray: Any, workers: int | None) -> int:
    """``workers``, else one actor per CPU of the cluster."""
    if workers is not None:
        return workers
    return max(1, int(ray.cluster_resources().get("CPU", 1)))


def windows(feed: TaskFeed, size: int) -> Iterator[list[FeedItem]]:
    """The feed in lists of at most ``size`` lines (tasks and error lines, in input order)."""
    items = iter(feed)
    while chunk := list(islice(items, size)):
        yield chunk


async def run_ray(
    job: BulkRun,
    *,
    address: str | None = None,
    workers: int | None = None,
    judge_options: Mapping[str, Any] | None = None,
    window: int = DEFAULT_WINDOW,
    batch_size: int | None = None,
) -> None:
    """Run every task of ``feed`` on Ray Data (see the module docstring).

    The run's judge and store are those resolved in this process: the actors rebuild
    them from the judge's spec string (with ``judge_options``) and the store's URL.
    ``concurrency``: tasks in flight per actor; ``workers``: actors (default: one per CPU);
    ``address``: a running cluster (default: start Ray on this machine); ``window``: tasks per
    Ray Dataset; ``batch_size``: tasks per ``map_batches`` batch (default ``2 × concurrency``).
    """
    if workers is not None and workers < 1:
        raise ConfigError(f"--ray-workers must be at least 1, got {workers}")
    if window < 1:
        raise ConfigError(f"the window must be at least 1 task, got {window}")
    run, concurrency = job.run, job.concurrency
    setup = RaySetup(
        bulk=job.bulk,
        judge=run["judge"].judge_id,
        store=store_url(run["store"]),
        judge_options=dict(judge_options or {}),
        settings=run.get("settings") or HarnessSettings(),
        concurrency=concurrency,
        limits=run.get("limits"),
    )
    ray = import_ray()
    started = connect(ray, address, workers)
    try:
        size = pool_size(ray, workers)
        logger.info("ray engine: %d actors, %d tasks in flight each", size, concurrency)
        batch = batch_size or max(1, 2 * concurrency)

        for chunk in windows(job.feed, window):
            rows = []
            for item in chunk:
                if item.data is None:
                    job.settle(Processed(item.line, None, error=item.error))
                else:
                    rows.append({"line": item.line, "task": pickle.dumps(item.data)})
            if rows:
                for processed in _map(ray, rows, setup, size, batch):
                    job.settle(processed)
        job.done()
    finally:
        if started:
            ray.shutdown()


def _map(
    ray: Any, rows: list[dict[str, Any]], setup: RaySetup, size: int, batch: int
) -> Iterator[Processed]:
    """One window through the actor pool, its results in input order as they complete."""
    with warnings.catch_warnings():  # Ray's own defaults warn of Ray's deprecated settings
        warnings.simplefilter("ignore", DeprecationWarning)
        context = ray.data.DataContext.get_current()
    context.execution_options.preserve_order = True
    context.enable_progress_bars = False
    logging.getLogger("ray.data").setLevel(logging.ERROR)
    dataset = ray.data.from_items(rows).map_batches(
        Grader,
        fn_constructor_args=(setup,),
        compute=ray.data.ActorPoolStrategy(size=size),
        batch_size=batch,
        batch_format="numpy",
        num_cpus=1,
    )
    try:
        for row in dataset.iter_rows():
            yield pickle.loads(row["processed"])
    except ray.exceptions.RayError as exc:
        cause = getattr(exc, "cause", None)
        if isinstance(cause, Exception):
            raise cause from exc
        # An actor that could not start (its judge or store failed to build there): Ray's
        # message is the remote traceback, whose last line names the error.
        lines = [line for line in str(exc).splitlines() if line.strip()]
        raise RunError(f"the ray engine stopped: {lines[-1] if lines else exc!r}") from exc


def store_url(store: Any) -> str:
    """The URL each actor opens: the run's store's, never an in-memory one (each actor would
    get its own empty database, and the audit log would vanish with it)."""
    url = getattr(store, "url", None)
    if not isinstance(url, str):
        raise ConfigError("the ray engine needs a store it can open by URL (--db URL)")
    if url in ("sqlite://", "sqlite:///:memory:"):
        raise ConfigError(
            "the ray engine needs a store every actor can open: a SQLite file or a "
            "PostgreSQL URL (--db), not an in-memory database"
        )
    return url
