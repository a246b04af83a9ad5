"""The service under load: many concurrent clients, each with its own API key, against
``evidex serve`` (a real uvicorn process) whose ``openai:`` judge is a scripted loopback server.

    python bench/service_load.py [--clients 200] [--requests 5] [--passages 10]
                                 [--latency-ms 100] [--judge-concurrency 64] [--db URL]
                                 [--no-write]

Each client has a client key of its own (made as ``evidex keys create --role client`` makes
them), sends one untimed
warm-up ``POST /tier`` (the server checks the key with its slow hash once, then remembers it),
then ``--requests`` timed requests of ``--passages`` distinct passages each, all clients at
once. Checked on every response: no 5xx, and every passage back exactly once, in input order.
Reported: requests, 5xx and other errors, passages lost or duplicated, fallbacks, p50/p99
latency of the warm-up and of the timed requests, and requests per second. Figures go to
docs/benchmarks.md, section ``service_load``; ``tests/test_service_load.py`` runs the same code
on a smaller load and asserts the contract.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from evidex.store import open_store
from evidex.types import Passage

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the tests' live server
from tests.live_service import serve_process

from _report import write_section
from api_path import QUERY, loopback_judge, synthetic_passages

JUDGE = "openai:bench-model"


@dataclass
class Load:
    requests: int = 0
    server_errors: int = 0
    other_errors: list[str] = field(default_factory=list)
    lost_or_duplicated: int = 0
    fallbacks: int = 0
    warmup_ms: list[float] = field(default_factory=list)
    latencies_ms: list[float] = field(default_factory=list)
    wall_s: float = 0.0

    def ok(self) -> bool:
        return not (self.server_errors or self.other_errors or self.lost_or_duplicated)


@contextmanager
def evidex_server(db: str, judge_url: str, judge_concurrency: int) -> Iterator[str]:
    """``evidex serve`` on a free loopback port for the block, its judge the loopback server;
    yields its base URL."""
    env = {
        "EVIDEX_OPENAI_BASE_URL": judge_url,
        "OPENAI_API_KEY": "unused",
        "EVIDEX_JUDGE_TIER": JUDGE,
        "EVIDEX_SERVICE_JUDGES": JUDGE,
        "EVIDEX_MAX_CONCURRENCY": str(judge_concurrency),
        "EVIDEX_CONFIG": os.devnull,
    }
    with serve_process(db, env=env) as base:
        yield base


def make_keys(db: str, n: int) -> list[str]:
    """``n`` client keys, made as ``evidex keys create --role client`` makes them."""
    store = open_store(db)
    try:
        return [store.create_key("client", f"load-{i}")[1] for i in range(n)]
    finally:
        store.close()


async def _client(
    base: str, key: str, pool: Sequence[Passage], requests: int, passages: int, load: Load
) -> None:
    """One client: its own connection (as a separate service would have) and its own key."""
    headers = {"Authorization": f"Bearer {key}"}
    async with httpx.AsyncClient(base_url=base, timeout=300, headers=headers) as http:
        for n in range(requests + 1):
            batch = pool[n * passages : (n + 1) * passages]
            body = {
                "query": QUERY,
                "passages": [p.model_dump(include={"passage_id", "text"}) for p in batch],
            }
            started = time.perf_counter()
            try:
                response = await http.post("/tier", json=body)
            except httpx.HTTPError as exc:
                load.other_errors.append(f"{type(exc).__name__}: {exc}")
                continue
            elapsed = (time.perf_counter() - started) * 1000
            (load.warmup_ms if n == 0 else load.latencies_ms).append(elapsed)
            load.requests += 1
            if response.status_code >= 500:
                load.server_errors += 1
                continue
            if response.status_code != 200:
                load.other_errors.append(f"HTTP {response.status_code}: {response.text[:200]}")
                continue
            graded = response.json()["classifications"]
            if [c["passage_id"] for c in graded] != [p.passage_id for p in batch]:
                load.lost_or_duplicated += 1
            load.fallbacks += sum(c["source"] == "fallback" for c in graded)


async def drive(base: str, keys: Sequence[str], requests: int, passages: int) -> Load:
    load = Load()
    each = (requests + 1) * passages
    texts = synthetic_passages(len(keys) * each)
    started = time.perf_counter()
    await asyncio.gather(
        *(
            _client(base, key, texts[i * each : (i + 1) * each], requests, passages, load)
            for i, key in enumerate(keys)
        )
    )
    load.wall_s = time.perf_counter() - started
    return load


def measure(
    clients: int,
    requests: int,
    passages: int,
    latency_ms: float,
    judge_concurrency: int,
    db: str | None = None,
) -> Load:
    with tempfile.TemporaryDirectory(prefix="evidex-load-") as tmp:
        url = db or f"sqlite:///{Path(tmp) / 'load.db'}"
        keys = make_keys(url, clients)
        with (
            loopback_judge(latency_ms) as judge,
            evidex_server(url, judge.base_url, judge_concurrency) as base,
        ):
            return asyncio.run(drive(base, keys, requests, passages))


def _pct(values: Sequence[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def report(load: Load, args: argparse.Namespace) -> str:
    rows = [
        ("clients (one key each)", f"{args.clients}"),
        ("requests (timed + warm-up)", f"{load.requests}"),
        ("5xx responses", f"{load.server_errors}"),
        ("other errors", f"{len(load.other_errors)}"),
        ("responses with a passage lost or duplicated", f"{load.lost_or_duplicated}"),
        ("fallback passages", f"{load.fallbacks}"),
        (
            "warm-up latency p50 / p99 (key check)",
            f"{_pct(load.warmup_ms, 0.5):.0f} / {_pct(load.warmup_ms, 0.99):.0f} ms",
        ),
        (
            "timed latency p50 / p99",
            f"{_pct(load.latencies_ms, 0.5):.0f} / {_pct(load.latencies_ms, 0.99):.0f} ms",
        ),
        (
            "timed latency mean",
            f"{statistics.fmean(load.latencies_ms):.0f} ms" if load.latencies_ms else "n/a",
        ),
        ("throughput", f"{load.requests / load.wall_s:.1f} requests/s over {load.wall_s:.1f} s"),
    ]
    table = "| figure | value |\n|---|---|\n" + "\n".join(f"| {a} | {b} |" for a, b in rows)
    return (
        f"{args.clients} concurrent clients, each with its own client key, send one warm-up and "
        f"{args.requests} timed `POST /tier` requests of {args.passages} distinct passages to "
        f"`evidex serve` on loopback (SQLite store), whose `{JUDGE}` judge is a scripted "
        f"OpenAI-compatible server answering after {args.latency_ms:.0f} ms, with "
        f"`EVIDEX_MAX_CONCURRENCY={args.judge_concurrency}` judge calls in flight at most. "
        f"Client, server and judge share the machine's 2 cores.\n\n{table}\n"
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=200)
    parser.add_argument("--requests", type=int, default=5)
    parser.add_argument("--passages", type=int, default=10)
    parser.add_argument("--latency-ms", type=float, default=100.0)
    parser.add_argument("--judge-concurrency", type=int, default=64)
    parser.add_argument("--db", default=None, help="store URL (default: a temporary SQLite file)")
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args(argv)
    load = measure(
        args.clients, args.requests, args.passages, args.latency_ms, args.judge_concurrency, args.db
    )
    text = report(load, args)
    print(text)
    for line in load.other_errors[:5]:
        print("error:", line)
    if not args.no_write:
        write_section("service_load", "The service under load: 200 clients with keys", text)
    return 0 if load.ok() else 1


if __name__ == "__main__":
    raise SystemExit(main())
