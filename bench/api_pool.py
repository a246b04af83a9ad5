"""Judge pools: the tier job over an ``openai:`` judge with one endpoint against two, and with
one of two endpoints killed in the middle of a run.

    python bench/api_pool.py [--passages 10000] [--latency-ms 300] [--per-endpoint 16]
                             [--repeats 3] [--kill-after-s 3] [--no-write]

Each endpoint is its own scripted server process (``bench/_loopback_judge.py``: a valid tier
reply for the passages of the request after ``--latency-ms``). The real tier job grades
``--passages`` synthetic passages in batches of 10, cache off, in-memory store, through
``openai:bench-model`` with ``endpoint_concurrency=--per-endpoint`` (the judge's limit is then
the sum) and ``HarnessSettings(max_concurrency=that sum)``.

(a) one endpoint against two, the same concurrency per endpoint: passages per second (median
of ``--repeats``) and their ratio (the target is 1.9x or more). The run must be long enough for
the ratio to measure throughput: calls go out in rounds of C (one latency each), so even a client
with no overhead of its own reaches only ``ceil(calls / C) / ceil(calls / 2C)``, printed as the
ideal ratio: 1.86x with 200 calls (2,000 passages) at C=16, 1.97x with the default 1,000 calls.
(b) two endpoints, one killed (SIGKILL) ``--kill-after-s`` into the run: passages that came
back, fallbacks, error rows in the audit log, and which endpoint answered how many calls.
Figures go to docs/benchmarks.md, section ``api_pool``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from collections import Counter
from collections.abc import Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

from evidex.harness.runner import HarnessSettings
from evidex.jobs.tier import atier
from evidex.judges import get_judge
from evidex.store import open_store
from evidex.types import Passage

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _report import command_line, write_section
from api_path import BATCH, QUERY, LoopbackJudgeServer, loopback_judge, synthetic_passages


@dataclass
class Run:
    wall_s: float
    passages_back: int
    fallbacks: int
    error_rows: int
    by_endpoint: Counter[str]

    def rate(self) -> float:
        return self.passages_back / self.wall_s


async def run_once(
    servers: Sequence[LoopbackJudgeServer],
    passages: Sequence[Passage],
    per_endpoint: int,
    *,
    kill: tuple[LoopbackJudgeServer, float] | None = None,
) -> Run:
    judge = get_judge(
        "openai:bench-model",
        base_urls=[s.base_url for s in servers],
        endpoint_concurrency=per_endpoint,
    )
    store = open_store("sqlite://")
    settings = HarnessSettings(max_concurrency=per_endpoint * len(servers), use_cache=False)
    if kill is not None:
        victim, after_s = kill
        asyncio.get_running_loop().call_later(after_s, victim.proc.kill)
    try:
        started = time.perf_counter()
        result = await atier(
            QUERY, passages, judge=judge, store=store, batch_size=BATCH, settings=settings
        )
        wall = time.perf_counter() - started
        rows = store.audit_rows(run_id=result.run_id)
    finally:
        await judge.aclose()
        store.close()
    return Run(
        wall_s=wall,
        passages_back=len({a.passage_id for a in result.classifications}),
        fallbacks=sum(a.source == "fallback" for a in result.classifications),
        error_rows=sum(r["status"] == "error" for r in rows),
        by_endpoint=Counter(
            str((r.get("detail") or {}).get("endpoint", "")) for r in rows if r["status"] == "ok"
        ),
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--passages", type=int, default=10000)
    parser.add_argument("--latency-ms", type=float, default=300.0)
    parser.add_argument("--per-endpoint", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--kill-after-s", type=float, default=3.0)
    parser.add_argument("--no-write", action="store_true", help="print only; leave the docs")
    args = parser.parse_args(argv)

    passages = synthetic_passages(args.passages)
    c = args.per_endpoint
    load_before = os.getloadavg()[0]
    rates: dict[int, list[float]] = {1: [], 2: []}
    with ExitStack() as stack:
        servers = [stack.enter_context(loopback_judge(args.latency_ms)) for _ in range(2)]
        asyncio.run(run_once(servers, passages[:BATCH], 1))  # imports and first connections
        for i in range(args.repeats):
            for n in (1, 2):
                run = asyncio.run(run_once(servers[:n], passages, c))
                if run.passages_back != len(passages) or run.fallbacks:
                    raise SystemExit(f"{n} endpoint(s): {run}")
                rates[n].append(run.rate())
                print(f"{n} endpoint(s) run {i + 1}: {run.wall_s:.2f} s, {run.rate():.0f}/s")
    with ExitStack() as stack:
        servers = [stack.enter_context(loopback_judge(args.latency_ms)) for _ in range(2)]
        asyncio.run(run_once(servers, passages[:BATCH], 1))
        killed = asyncio.run(run_once(servers, passages, c, kill=(servers[1], args.kill_after_s)))
        print(f"kill run: {killed}")
        names = {servers[0].base_url: "survivor", servers[1].base_url: "killed"}

    one, two = statistics.median(rates[1]), statistics.median(rates[2])
    calls = -(-args.passages // BATCH)
    ideal = -(-calls // c) / -(-calls // (2 * c))
    answered = ", ".join(f"{names.get(u, u)} {n}" for u, n in sorted(killed.by_endpoint.items()))
    body = "\n".join(
        [
            f"The tier job over `openai:bench-model`, {args.passages} synthetic passages in "
            f"batches of {BATCH} ({calls} calls), cache off, in-memory store; each endpoint is "
            f"its own loopback server process (`bench/_loopback_judge.py`) answering after "
            f"{args.latency_ms:g} ms; `endpoint_concurrency={c}` and "
            f"`HarnessSettings(max_concurrency={c} x endpoints)`. Medians of {args.repeats} "
            f"runs. Ideal ratio (rounds of {c} calls against rounds of {2 * c}, no client "
            f"overhead): {ideal:.2f}. 1-min load average before / after: {load_before:.1f} / "
            f"{os.getloadavg()[0]:.1f}; {os.cpu_count()} cores.",
            "",
            "| endpoints | in flight at most | passages / s | ratio to one endpoint |",
            "|---|---|---|---|",
            f"| 1 | {c} | {one:.0f} | 1.00 |",
            f"| 2 | {2 * c} | {two:.0f} | {two / one:.2f} (ideal {ideal:.2f}) |",
            "",
            f"One of two endpoints killed (SIGKILL) {args.kill_after_s:g} s into a run of "
            f"{killed.wall_s:.2f} s:",
            "",
            "| passages back | lost | fallbacks | error rows in the audit log | calls answered |",
            "|---|---|---|---|---|",
            f"| {killed.passages_back} / {args.passages} "
            f"| {args.passages - killed.passages_back} | {killed.fallbacks} "
            f"| {killed.error_rows} | {answered} |",
        ]
    )
    print(body)
    if not args.no_write:
        write_section(
            "api_pool", "Judge pools: one endpoint, two, one killed", body, command_line()
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
