"""The API path: the tier job over an ``openai:`` judge whose server answers in a fixed time.

    python bench/api_path.py [--passages 2000] [--latency-ms 300] [--concurrency 4,32,64]
                             [--repeats 3] [--label after] [--no-write]

A scripted OpenAI-compatible server (``bench/_loopback_judge.py``, its own process on loopback)
answers every chat completion after ``--latency-ms`` with a valid tier reply for the passages
of the request. The real tier job (``evidex.jobs.tier.atier``) grades ``--passages`` synthetic
passages of one query in batches of 10 through ``openai:bench-model`` (its real HTTP path), cache
off, an in-memory store, once per concurrency C: ``HarnessSettings(max_concurrency=C)`` and,
where the judge has one, its own in-flight limit (``judge.max_concurrency = C``). A fresh judge
and store serve each run; one unmeasured batch first warms up imports and the server.

Reported per C (medians over ``--repeats`` runs): judge calls; wall seconds; the ideal
``ceil(calls / C) × latency`` (what a client with no overhead of its own would take); wall /
ideal; the client's CPU milliseconds per call (``time.process_time`` over the job, which runs
alone in this process: the server's CPU is its own process's), and that CPU in three parts:

* the tier step's own work (building each prompt, validating each reply): measured apart, by
  running the step's ``request`` and ``validate`` again on the same batches and the server's
  replies to them, verbatim-check memo cleared (timing inside the run would cost more CPU than
  it measures: reading a thread's CPU clock is a system call here);
* the HTTP client: aiohttp alone sending the same request bodies at the same concurrency to
  the same server (its session, the event loop, the sockets), measured after the runs;
* the rest, the harness's: everything else the job did (planning, the attempt loop, the
  judge's pool and limits, cache keys, audit rows, the judge-call wrapper around aiohttp).

Also: the peak of requests in flight at the server (the highest of the runs); fallback
passages (0 unless something is wrong).
``--label`` names the code measured (e.g. before / after) so that two sections can be compared;
figures go to docs/benchmarks.md, section ``api_path`` (``api_path_LABEL`` with a label).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import platform
import re
import statistics
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp

from evidex._text import _haystack_form
from evidex.harness.runner import HarnessSettings
from evidex.jobs.tier import atier
from evidex.judges import get_judge
from evidex.judges._openai._wire import body_of
from evidex.judging import JudgeRequest
from evidex.store import open_store
from evidex.tasks.tier import TierBatch, TierStep
from evidex.types import Passage

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _loopback_judge import tier_reply
from _report import command_line, write_section

HERE = Path(__file__).resolve().parent
BATCH = 10
QUERY = "how much vitamin D do adults need each day?"
_VOCABULARY = (
    "vitamin calcium bone skin sunlight dose daily adults children deficiency rickets "
    "supplement microgram serum level winter latitude diet fish milk fortified absorption "
    "kidney liver hormone immune muscle fracture elderly pregnancy guideline agency study "
    "trial cohort risk benefit intake upper limit toxicity test blood season exposure"
)
_WORDS = _VOCABULARY.split()


@dataclass
class Run:
    calls: int
    wall_s: float
    cpu_s: float
    peak: int
    server_requests: int
    unreadable: int
    fallbacks: int
    passages_back: int


def synthetic_passages(n: int) -> list[Passage]:
    """``n`` distinct passages of 40-70 words (deterministic; preflight removes duplicates, so
    every text must differ)."""
    out = []
    for i in range(n):
        length = 40 + (i * 7) % 31
        words = [_WORDS[(i * 13 + j * (i % 11 + 3)) % len(_WORDS)] for j in range(length)]
        out.append(
            Passage(passage_id=f"d{i:05d}", text=f"Record {i}. " + " ".join(words).capitalize())
        )
    return out


class LoopbackJudgeServer:
    """The scripted server, run as a child process for the length of a ``with`` block."""

    def __init__(self, latency_ms: float, *extra: str) -> None:
        """``extra``: more arguments of the server (``--grades``, ``--queries``)."""
        self.proc = subprocess.Popen(
            [
                sys.executable,
                str(HERE / "_loopback_judge.py"),
                "--latency-ms",
                str(latency_ms),
                *extra,
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().split()
        if len(line) != 2 or line[0] != "port":
            self.proc.kill()
            raise RuntimeError(f"the loopback judge did not start: {line}")
        self.root = f"http://127.0.0.1:{line[1]}"
        deadline = time.monotonic() + 20
        while True:
            try:
                self._get("/v1/models")
                break
            except OSError:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    self.stop()
                    raise RuntimeError("the loopback judge does not answer") from None
                time.sleep(0.05)

    @property
    def base_url(self) -> str:
        return self.root + "/v1"

    def _get(self, path: str, method: str = "GET") -> Any:
        data = b"" if method == "POST" else None
        request = urllib.request.Request(self.root + path, method=method, data=data)
        with urllib.request.urlopen(request, timeout=5) as response:
            return json.load(response)

    def stats(self) -> dict[str, int]:
        return dict(self._get("/stats"))

    def reset(self) -> None:
        self._get("/stats/reset", method="POST")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()


@contextmanager
def loopback_judge(latency_ms: float) -> Iterator[LoopbackJudgeServer]:
    server = LoopbackJudgeServer(latency_ms)
    try:
        yield server
    finally:
        server.stop()


def has_judge_limit() -> bool:
    """Whether this code's judges carry their own in-flight limit (the baseline's do not)."""
    judge = get_judge("openai:bench-model", base_url="http://127.0.0.1:9/v1")
    return hasattr(judge, "max_concurrency")


async def run_once(
    server: LoopbackJudgeServer, passages: Sequence[Passage], concurrency: int
) -> Run:
    judge = get_judge("openai:bench-model", base_url=server.base_url)
    if hasattr(judge, "max_concurrency"):
        judge.max_concurrency = concurrency  # the judge's own limit, where the code has one
    store = open_store("sqlite://")
    settings = HarnessSettings(max_concurrency=concurrency, use_cache=False)
    server.reset()
    try:
        cpu0, wall0 = time.process_time(), time.perf_counter()
        result = await atier(
            QUERY, passages, judge=judge, store=store, batch_size=BATCH, settings=settings
        )
        wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    finally:
        aclose = getattr(judge, "aclose", None)
        if aclose is not None:
            await aclose()
        store.close()
    stats = server.stats()
    return Run(
        calls=result.judge_calls,
        wall_s=wall,
        cpu_s=cpu,
        peak=stats["peak_in_flight"],
        server_requests=stats["requests"],
        unreadable=stats["unreadable"],
        fallbacks=sum(a.source == "fallback" for a in result.classifications),
        passages_back=len({a.passage_id for a in result.classifications}),
    )


def batches_of(passages: Sequence[Passage]) -> list[TierBatch]:
    return [
        TierBatch(QUERY, tuple(passages[i : i + BATCH])) for i in range(0, len(passages), BATCH)
    ]


def request_bodies(batches: Sequence[TierBatch]) -> list[dict[str, Any]]:
    """Each batch's chat-completions body as the judge sends it (JSON-schema mode)."""
    step = TierStep()
    bodies = []
    for batch in batches:
        request = step.request(batch)
        judge_request = JudgeRequest(
            job="tier",
            step="tier",
            messages=request.messages,
            schema=request.schema,
            payload=request.payload,
            temperature=0.0,
            max_tokens=request.max_tokens,
        )
        bodies.append(json.loads(body_of("bench-model", judge_request, "json_schema")))
    return bodies


def task_cpu_per_call(passages: Sequence[Passage]) -> float:
    """CPU seconds per call of the tier step's own work, on the run's batches and replies."""
    step = TierStep()
    batches = batches_of(passages)
    replies = [tier_reply(body) for body in request_bodies(batches)]
    _haystack_form.cache_clear()  # in the run each passage is checked once, cold
    started = time.process_time()
    for batch, reply in zip(batches, replies, strict=True):
        step.request(batch)
        step.validate(batch, reply)
    return (time.process_time() - started) / len(batches)


async def http_cpu_per_call(
    server: LoopbackJudgeServer, passages: Sequence[Passage], concurrency: int
) -> float:
    """CPU seconds per call of aiohttp alone sending the run's bodies, ``concurrency`` at once."""
    bodies = [
        json.dumps(b, ensure_ascii=False, separators=(",", ":")).encode()
        for b in request_bodies(batches_of(passages))
    ]
    url = server.base_url + "/chat/completions"
    headers = {"Content-Type": "application/json"}
    semaphore = asyncio.Semaphore(concurrency)
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:

        async def one(body: bytes) -> None:
            async with semaphore, session.post(url, data=body, headers=headers) as response:
                await response.read()
                response.raise_for_status()

        await one(bodies[0])
        started = time.process_time()
        await asyncio.gather(*(one(b) for b in bodies))
        return (time.process_time() - started) / len(bodies)


def parse_concurrency(text: str) -> list[int]:
    values = [int(v) for v in text.split(",") if v.strip()]
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError("give positive integers, e.g. 4,32,64")
    return values


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--passages", type=int, default=2000)
    parser.add_argument("--latency-ms", type=float, default=300.0)
    parser.add_argument("--concurrency", type=parse_concurrency, default=[4, 32, 64])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--label", default="", help="what code this measures, e.g. before")
    parser.add_argument("--no-write", action="store_true", help="print only; leave the docs")
    args = parser.parse_args(argv)

    passages = synthetic_passages(args.passages)
    latency_s = args.latency_ms / 1000
    judge_limit = has_judge_limit()
    load_before = os.getloadavg()[0]
    rows = []
    with loopback_judge(args.latency_ms) as server:
        asyncio.run(run_once(server, passages[:BATCH], 1))  # imports and first connection
        for c in args.concurrency:
            # each repeat measures the three parts back to back, so that a drift in the
            # machine's speed (these machines are shared) moves all three alike
            runs, task_ms, http_ms = [], [], []
            for i in range(args.repeats):
                task_ms.append(1000 * task_cpu_per_call(passages))
                run = asyncio.run(run_once(server, passages, c))
                http_ms.append(1000 * asyncio.run(http_cpu_per_call(server, passages, c)))
                runs.append(run)
                print(
                    f"C={c} run {i + 1}/{args.repeats}: {run.calls} calls "
                    f"({run.server_requests} at the server), {run.wall_s:.2f} s wall, "
                    f"{1000 * run.cpu_s / max(1, run.calls):.2f} ms CPU/call (the step's "
                    f"{task_ms[-1]:.2f}, aiohttp alone {http_ms[-1]:.2f}), peak in flight "
                    f"{run.peak}, {run.fallbacks} fallbacks, {run.unreadable} unreadable",
                    flush=True,
                )
                if run.passages_back != len(passages):
                    raise SystemExit(f"{run.passages_back} of {len(passages)} passages came back")
            rows.append(row(c, runs, latency_s, task_ms, http_ms))
    load_after = os.getloadavg()[0]

    label = f" ({args.label})" if args.label else ""
    body = "\n".join(
        [
            f"Code measured{label}: the tier job over `openai:bench-model` (its real HTTP path), "
            f"{args.passages} synthetic passages of one query in batches of {BATCH}, cache off, "
            f"in-memory store; the loopback server (`bench/_loopback_judge.py`, its own "
            f"process) answers each call after {args.latency_ms:g} ms with a valid reply. "
            f"Limit per run: `HarnessSettings(max_concurrency=C)`"
            + (
                " and `judge.max_concurrency = C`"
                if judge_limit
                else " (the judge has no limit of its own)"
            )
            + f". Medians of {args.repeats} repeats, each measuring the step's CPU (a replay of "
            "its requests and validations), the run, and aiohttp alone on the same bodies, "
            "back to back; the harness's share is taken per repeat. Peak in flight is the "
            "highest of the runs. "
            f"1-min load average before / after: {load_before:.1f} / {load_after:.1f}; "
            f"{os.cpu_count()} cores, {platform.python_implementation()}.",
            "",
            "| C | calls | wall s | ideal s | wall / ideal | client CPU ms / call "
            "| the task's | HTTP client (aiohttp alone) | the harness's (the rest) "
            "| peak in flight | fallbacks |",
            "|---|---|---|---|---|---|---|---|---|---|---|",
            *rows,
        ]
    )
    print(body)
    if not args.no_write:
        slug = re.sub(r"[^a-z0-9]+", "_", args.label.lower()).strip("_")
        name = "api_path" + (f"_{slug}" if slug else "")
        write_section(name, f"API path: tier over a loopback judge{label}", body, command_line())
    return 0


def row(
    c: int,
    runs: Sequence[Run],
    latency_s: float,
    task_ms: Sequence[float],
    http_ms: Sequence[float],
) -> str:
    """Medians over the repeats; the harness's share is taken per repeat (the run's CPU less
    the step's and aiohttp's measured beside it) and its median given."""
    med = statistics.median
    calls = int(med([r.calls for r in runs]))
    wall = med([r.wall_s for r in runs])
    ideal = math.ceil(calls / c) * latency_s
    cpu = [1000 * r.cpu_s / max(1, r.calls) for r in runs]
    harness = [total - t - h for total, t, h in zip(cpu, task_ms, http_ms, strict=True)]
    return (
        f"| {c} | {calls} | {wall:.2f} | {ideal:.2f} | {wall / ideal:.2f} | {med(cpu):.2f} "
        f"| {med(task_ms):.2f} | {med(http_ms):.2f} | {med(harness):.2f} "
        f"| {max(r.peak for r in runs)} | {sum(r.fallbacks for r in runs)} |"
    )


if __name__ == "__main__":
    raise SystemExit(main())
