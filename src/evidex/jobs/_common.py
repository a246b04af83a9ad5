"""Plumbing shared by the job entry points: resolving judges and stores, running sync."""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Coroutine
from typing import Any, TypeVar

from evidex.errors import ConfigError
from evidex.harness.ports import StorePort
from evidex.judging import Judge

T = TypeVar("T")

DEFAULT_JUDGES = {
    "tier": "local:minilm",
    "rerank": "local:minilm",
    "classify": "local:qwen",
    "audit": "local:qwen",
}


def resolve_judge(judge: Judge | str | None, job: str, **options: Any) -> Judge:
    """A judge instance for ``job``: given, built from a spec string, or the job's default."""
    from evidex.judges import get_judge

    if judge is None:
        from evidex.config import load_settings

        judge = load_settings().judges[job]
    if isinstance(judge, str):
        judge = get_judge(judge, **options)
    if not judge.supports(job):
        raise ConfigError(
            f"judge {judge.judge_id} cannot do the {job} job "
            f"(it does: {', '.join(sorted(judge.jobs)) or 'nothing'})"
        )
    return judge


def resolve_store(store: StorePort | str | None) -> StorePort:
    """The given store, one opened from a URL, or the default store (``EVIDEX_DB`` or the user
    data dir): the audit log is not optional."""
    from evidex.store import open_store

    if store is None or isinstance(store, str):
        return open_store(store)
    return store


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine from sync code, also when the caller already runs an event loop
    (a notebook): then it runs in a worker thread with its own loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coro).result()
