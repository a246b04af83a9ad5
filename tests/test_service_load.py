"""The service under load, as a contract: ``bench/service_load.py`` on a small load. New client
keys each send their first request at once (every passage back exactly once, no fallback),
then wrk keeps 32 connections busy for a few seconds: no non-2xx answer, no socket error, and
an ``ok`` audit row for every answer. The bench is the same code with the figures written
down; it needs wrk (``make system-deps``)."""

from __future__ import annotations

import importlib
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi")

_BENCH = Path(__file__).resolve().parent.parent / "bench"


def _bench(name: str) -> Any:
    if str(_BENCH) not in sys.path:
        sys.path.insert(0, str(_BENCH))
    return importlib.import_module(name)


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("wrk") is None, reason="wrk is not installed (make system-deps)")
def test_new_keys_then_wrk_get_every_answer_logged_and_no_error() -> None:
    bench = _bench("service_load")
    args = bench.parse_args(
        ["--duration", "4", "--connections", "32", "--keys", "40", "--latency-ms", "50"]
    )
    with bench.databases(postgres=False) as fresh:
        measured = bench.measure(bench.Side("this checkout"), fresh(), args)
    assert len(measured.warmup.latencies_ms) == 40 and measured.warmup.errors == []
    assert measured.warmup.lost_or_duplicated == 0 and measured.warmup.fallbacks == 0
    assert measured.wrk.requests > 0 and measured.wrk.non_2xx == 0
    assert measured.wrk.socket_errors == 0 and measured.wrk.timeouts == 0
    assert measured.rows.get("ok", 0) >= measured.answered() + 40
    assert measured.rows.get("fallback", 0) == 0
    assert measured.ok()
