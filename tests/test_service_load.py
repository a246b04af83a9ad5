"""The service under load, as a contract: 200 concurrent clients, each with its own key, against
``evidex serve`` in its own process with a scripted loopback judge get no 5xx and every passage
back exactly once. ``bench/service_load.py`` is the same code with the figures written down."""

from __future__ import annotations

import importlib
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
def test_two_hundred_clients_with_keys_get_every_passage_back_and_no_5xx() -> None:
    load = _bench("service_load").measure(
        clients=200, requests=1, passages=10, latency_ms=50, judge_concurrency=64
    )
    assert load.requests == 400
    assert load.server_errors == 0 and load.other_errors == []
    assert load.lost_or_duplicated == 0 and load.fallbacks == 0
