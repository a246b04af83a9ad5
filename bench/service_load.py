"""The service under load, measured with wrk (a C load generator), not with Python clients.

    python bench/service_load.py [--duration 20] [--connections 128] [--threads 2]
        [--passages 10] [--latency-ms 100] [--judge-concurrency 64] [--keys 200]
        [--postgres] [--replicas 1] [--serve-arg ARG ...]
        [--baseline CHECKOUT] [--baseline-asyncio] [--src CHECKOUT] [--rounds 1] [--profile]
        [--no-write]

The setup of issue 31: ``evidex serve`` (a real uvicorn process; ``--replicas`` of them on one
PostgreSQL database with ``--postgres``) whose ``openai:`` judge is the scripted loopback server
(``bench/_loopback_judge.py``, its own process) answering after ``--latency-ms``, with
``EVIDEX_MAX_CONCURRENCY`` = ``--judge-concurrency`` split evenly over the replicas, so the
judge's limit is the same whatever the replica count. The ideal is that limit over the latency
(64 / 0.1 s = 640 requests/s).

1. Warm-up: ``--keys`` client keys (made as ``evidex keys create --role client`` makes them)
   each send one ``POST /tier`` at once, from Python; the server checks each new key with its
   slow hash. Reported: p50 and p99 of those requests and how long all took; checked: every
   answer 200 with each passage back exactly once, in input order, none a fallback.
2. Load: ``wrk -t2 -c128 -d20s`` with ``bench/service_load.lua``: every request a
   ``POST /tier`` with a client key, ``--passages`` distinct passages and a query of its own
   (never a cache hit: one judge call each). With replicas, one wrk process per replica
   (connections and threads split), their latency distributions pooled.
   Reported: requests/s, p50, p99, non-2xx, socket errors, the ratio to the ideal, and the CPU
   milliseconds per request of the service, the judge server and wrk (from ``/proc``).
3. After the load the servers stop and the audit log is read: every answered request must have
   its ``ok`` row (the rows per status are reported, and fallbacks must be 0).

``--baseline CHECKOUT`` serves another checkout's code (its ``src`` first on ``PYTHONPATH``,
e.g. a ``git worktree`` of an older commit) before this one, ``--rounds`` times in turn, so a
before/after pair is measured back to back under the same machine load;
``--baseline-asyncio`` serves the baseline on plain asyncio and h11 (uvloop and httptools
hidden). ``--profile`` also samples each server with py-spy (``pip install py-spy``) during the
load and writes where its CPU per request goes (``bench/_profile.py``) to the section
``service_profile`` instead (the sampling slows the servers). Figures go to
docs/benchmarks.md, section ``service_load`` (with ``--postgres``: ``service_load_postgres``),
with the load average beside each.
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
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import sqlalchemy as sa

from evidex.store import open_store

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the tests' live server
from tests.live_service import server_process

from _cpu import cpu_s, load_average, server_on_port
from _profile import CATEGORIES, Profiler
from _report import write_section
from _wrk import WrkRun, run_wrk, wrk_binary
from api_path import QUERY, loopback_judge, synthetic_passages

JUDGE = "openai:bench-model"
HERE = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Side:
    """One configuration measured: whose code, on which loop, with which serve options."""

    label: str
    src: Path | None = None
    """A checkout's ``src`` put first on ``PYTHONPATH`` (None: the installed code)."""
    plain_asyncio: bool = False
    serve_args: tuple[str, ...] = ()


@dataclass
class Warmup:
    latencies_ms: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    lost_or_duplicated: int = 0
    """Answers whose passages did not come back exactly once each, in input order."""
    fallbacks: int = 0
    wall_s: float = 0.0


@dataclass
class Measured:
    side: Side
    load_before: str
    load_after: str
    warmup: Warmup
    wrk: WrkRun
    server_cpu_s: float
    judge_cpu_s: float
    database_cpu_s: float | None
    judge_requests: int
    judge_peak: int
    rows: dict[str, int]
    profile: dict[str, float] | None = None
    lock_s: float | None = None
    """Seconds the servers held the interpreter lock during the load (``--profile``)."""

    def cpu_ms(self, seconds: float) -> float:
        return 1000 * seconds / self.wrk.requests if self.wrk.requests else float("nan")

    def answered(self) -> int:
        return self.wrk.requests - self.wrk.non_2xx

    def ok(self) -> bool:
        """No 5xx or other refusal, no fallback, and an ``ok`` row for every answer."""
        return (
            self.wrk.non_2xx == 0
            and not self.warmup.errors
            and not self.warmup.lost_or_duplicated
            and not self.warmup.fallbacks
            and self.rows.get("fallback", 0) == 0
            and self.rows.get("ok", 0) >= self.answered()
        )


def make_keys(db: str, n: int) -> list[str]:
    """``n`` client keys, made as ``evidex keys create --role client`` makes them."""
    store = open_store(db)
    try:
        return [store.create_key("client", f"load-{i}")[1] for i in range(n)]
    finally:
        store.close()


def _pct(values: Sequence[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def warm_up(bases: Sequence[str], keys: Sequence[str], passages: int) -> Warmup:
    """Every key's first request at once (spread over the replicas)."""
    texts = synthetic_passages(len(keys) * passages)
    out = Warmup()
    limits = httpx.Limits(max_connections=len(keys), max_keepalive_connections=len(keys))

    async def one(i: int, key: str, http: httpx.AsyncClient) -> None:
        batch = texts[i * passages : (i + 1) * passages]
        body = {
            "query": f"{QUERY} (warm-up {i})",
            "passages": [p.model_dump(include={"passage_id", "text"}) for p in batch],
        }
        started = time.perf_counter()
        try:
            response = await http.post(
                f"{bases[i % len(bases)]}/tier",
                json=body,
                headers={"Authorization": f"Bearer {key}"},
            )
        except httpx.HTTPError as exc:
            out.errors.append(f"{type(exc).__name__}: {exc}")
            return
        out.latencies_ms.append((time.perf_counter() - started) * 1000)
        if response.status_code != 200:
            out.errors.append(f"HTTP {response.status_code}: {response.text[:200]}")
            return
        graded = response.json()["classifications"]
        if [c["passage_id"] for c in graded] != [p.passage_id for p in batch]:
            out.lost_or_duplicated += 1
        out.fallbacks += sum(c["source"] == "fallback" for c in graded)

    started = time.perf_counter()
    async with httpx.AsyncClient(timeout=300, limits=limits) as http:
        await asyncio.gather(*(one(i, key, http) for i, key in enumerate(keys)))
    out.wall_s = time.perf_counter() - started
    return out


@contextmanager
def _hidden_uvloop() -> Iterator[str]:
    """A directory whose ``uvloop`` and ``httptools`` fail to import, so that uvicorn's auto
    choice falls back to asyncio and h11 for a server with it first on ``PYTHONPATH``."""
    with tempfile.TemporaryDirectory(prefix="evidex-plain-") as tmp:
        for name in ("uvloop", "httptools"):
            (Path(tmp) / f"{name}.py").write_text(
                f"raise ImportError('{name} hidden by bench/service_load.py')\n"
            )
        yield tmp


def _rows_by_status(db: str) -> dict[str, int]:
    engine = sa.create_engine(db)
    try:
        with engine.connect() as conn:
            result = conn.exec_driver_sql("SELECT status, count(*) FROM audit_log GROUP BY status")
            return {status: int(n) for status, n in result}
    finally:
        engine.dispose()


@contextmanager
def databases(postgres: bool) -> Iterator[Any]:
    """A factory of fresh store URLs: SQLite files in a temp dir, or new databases on one temp
    PostgreSQL server (``tests/pg_server.py``)."""
    with tempfile.TemporaryDirectory(prefix="evidex-load-") as tmp:
        if not postgres:
            count = iter(range(1_000_000))
            yield lambda: f"sqlite:///{Path(tmp) / f'load-{next(count)}.db'}"
            return
        from tests.pg_server import temp_postgres

        with temp_postgres("max_connections=300") as server:
            admin = sa.create_engine(server, isolation_level="AUTOCOMMIT")

            def fresh() -> str:
                name = f"load_{os.urandom(6).hex()}"
                with admin.connect() as conn:
                    conn.exec_driver_sql(f"CREATE DATABASE {name}")
                return server.rsplit("/", 1)[0] + f"/{name}"

            try:
                yield fresh
            finally:
                admin.dispose()


def measure(side: Side, db: str, args: argparse.Namespace) -> Measured:
    """One configuration under the load: warm-up, then wrk; the servers stopped, then the audit
    log read."""
    keys = make_keys(db, args.keys)
    per_replica = max(1, args.judge_concurrency // args.replicas)
    env = {
        "EVIDEX_OPENAI_BASE_URL": "",
        "OPENAI_API_KEY": "unused",
        "EVIDEX_JUDGE_TIER": JUDGE,
        "EVIDEX_SERVICE_JUDGES": JUDGE,
        "EVIDEX_MAX_CONCURRENCY": str(per_replica),
        "EVIDEX_CONFIG": os.devnull,
    }
    with ExitStack() as stack:
        judge = stack.enter_context(loopback_judge(args.latency_ms))
        env["EVIDEX_OPENAI_BASE_URL"] = judge.base_url
        path = [str(side.src)] if side.src else []
        if side.plain_asyncio:
            path.insert(0, stack.enter_context(_hidden_uvloop()))
        if path:
            env["PYTHONPATH"] = os.pathsep.join([*path, os.environ.get("PYTHONPATH", "")])
        servers = [
            stack.enter_context(server_process(db, *side.serve_args, env=env))
            for _ in range(args.replicas)
        ]
        bases = [base for base, _ in servers]
        pids = [proc.pid for _, proc in servers]
        warm = asyncio.run(warm_up(bases, keys, args.passages))
        judge.reset()
        load_before = load_average()
        profiler = Profiler(pids, args.duration) if args.profile else None
        database = _database_pid(db)
        cpu_before = (
            sum(cpu_s(pid) for pid in pids),
            cpu_s(judge.proc.pid),
            cpu_s(database) if database else 0.0,
        )
        wrk = run_wrk(
            bases,
            keys[0],
            args.passages,
            threads=args.threads,
            connections=args.connections,
            duration_s=args.duration,
        )
        cpu_after = (
            sum(cpu_s(pid) for pid in pids),
            cpu_s(judge.proc.pid),
            cpu_s(database) if database else 0.0,
        )
        load_after = load_average()
        profile = profiler.result() if profiler else None
        lock_s = profiler.lock_s() if profiler else None
        stats = judge.stats()
    # the servers have stopped (their rows flushed on a normal exit): read what they wrote
    return Measured(
        side=side,
        load_before=load_before,
        load_after=load_after,
        warmup=warm,
        wrk=wrk,
        server_cpu_s=cpu_after[0] - cpu_before[0],
        judge_cpu_s=cpu_after[1] - cpu_before[1],
        database_cpu_s=cpu_after[2] - cpu_before[2] if database else None,
        judge_requests=int(stats.get("requests", 0)),
        judge_peak=int(stats.get("peak_in_flight", 0)),
        rows=_rows_by_status(db),
        profile=profile,
        lock_s=lock_s,
    )


def _database_pid(db: str) -> int | None:
    """The PostgreSQL server's postmaster (its backends are its children), for its CPU time."""
    if not db.startswith("postgresql"):
        return None
    port = sa.engine.make_url(db).port
    return server_on_port("postgres", port) if port else None


def ideal(args: argparse.Namespace) -> float:
    return (args.judge_concurrency // args.replicas) * args.replicas / (args.latency_ms / 1000)


def report(results: Sequence[Measured], args: argparse.Namespace) -> str:
    best = ideal(args)
    head = (
        "| configuration | load avg (1, 5, 15 min) before / after | requests/s | ideal / measured "
        "| p50 ms | p99 ms | non-2xx | socket errors, timeouts | service CPU ms/request "
        "| judge CPU ms/request | database CPU ms/request | wrk CPU ms/request "
        "| warm-up p50 / p99 ms (all keys in) | audit rows ok / answered | fallbacks |\n"
        + "|---" * 15
        + "|\n"
    )
    lines = []
    for m in results:
        w = m.wrk
        database = "-" if m.database_cpu_s is None else f"{m.cpu_ms(m.database_cpu_s):.2f}"
        lines.append(
            f"| {m.side.label} | {m.load_before} / {m.load_after} | {w.rate:.1f} "
            f"| {best / w.rate if w.rate else float('inf'):.2f} | {w.percentile_ms(0.5):.0f} "
            f"| {w.percentile_ms(0.99):.0f} | {w.non_2xx} | {w.socket_errors}, {w.timeouts} "
            f"| {m.cpu_ms(m.server_cpu_s):.2f} | {m.cpu_ms(m.judge_cpu_s):.2f} "
            f"| {database} | {m.cpu_ms(w.cpu_s):.2f} | {_pct(m.warmup.latencies_ms, 0.5):.0f} / "
            f"{_pct(m.warmup.latencies_ms, 0.99):.0f} ({m.warmup.wall_s:.1f} s) "
            f"| {m.rows.get('ok', 0)} / {m.answered()} | {m.rows.get('fallback', 0)} |"
        )
    medians = ""
    labels = list(dict.fromkeys(m.side.label for m in results))
    if len(results) > len(labels):
        parts = []
        for label in labels:
            mine = [m for m in results if m.side.label == label]
            rate = statistics.median(m.wrk.rate for m in mine)
            p99 = statistics.median(m.wrk.percentile_ms(0.99) for m in mine)
            parts.append(f"{label}: {rate:.1f} requests/s, p99 {p99:.0f} ms")
        medians = "\n\nMedians over the rounds: " + "; ".join(parts) + "."
    store = (
        f"PostgreSQL (a temp server, a fresh database per configuration), {args.replicas} "
        f"`evidex serve` replicas each with `EVIDEX_MAX_CONCURRENCY="
        f"{args.judge_concurrency // args.replicas}`"
        if args.postgres
        else f"SQLite store (a temp file), {args.replicas} `evidex serve` process(es) with "
        f"`EVIDEX_MAX_CONCURRENCY={args.judge_concurrency // args.replicas}`"
    )
    return (
        f"`wrk -t{args.threads} -c{args.connections} -d{args.duration:g}s` "
        f"(`bench/service_load.lua`) sends `POST /tier` with a client key, each request "
        f"{args.passages} distinct passages and a query of its own (one judge call), to "
        f"{store}; the `{JUDGE}` judge is `bench/_loopback_judge.py` answering after "
        f"{args.latency_ms:g} ms. Ideal: {best:.0f} requests/s (the judge limit over its "
        f"latency); the target of issue 31 is ideal / measured <= 1.4 with p99 <= 300 ms. "
        f"Before the load, {args.keys} new client keys send their first request at once "
        f"(warm-up: the slow key hash of each). Server, judge server and wrk share the "
        f"machine's 2 cores with whatever else runs (the load average says how much). CPU per "
        f"request is each process's user + system time over the wrk run divided by wrk's "
        f"requests. After the run the audit log is read: `ok` rows against the 2xx answers "
        f"wrk received."
        f"\n\n{head}" + "\n".join(lines) + medians + "\n"
    )


def profile_report(results: Sequence[Measured], args: argparse.Namespace) -> str:
    profiled = [m for m in results if m.profile is not None and m.lock_s is not None]
    head = "| part of the request path | " + " | ".join(
        f"{m.side.label} (load {m.load_before.split(',')[0]}, {m.wrk.rate:.0f} req/s)"
        for m in profiled
    )
    head += " |\n" + "|---" * (len(profiled) + 1) + "|\n"
    rows = []
    for name, _ in CATEGORIES:
        cells = []
        for m in profiled:
            share = (m.profile or {}).get(name, 0.0)
            cells.append(f"{share * m.cpu_ms(m.server_cpu_s):.2f} ms ({share:.0%})")
        rows.append(f"| {name} | " + " | ".join(cells) + " |")
    lock = " | ".join(f"{m.cpu_ms(m.lock_s or 0.0):.2f} ms" for m in profiled)
    cpu = " | ".join(f"**{m.cpu_ms(m.server_cpu_s):.2f} ms**" for m in profiled)
    rows.append(f"| **service CPU per request (user + system, every thread)** | {cpu} |")
    rows.append(f"| interpreter lock held per request (wall time) | {lock} |")
    return (
        f"Where the service's CPU per request goes under the load of `service_load` "
        f"(`wrk -t{args.threads} -c{args.connections} -d{args.duration:g}s`, one judge call "
        f"per request, {args.passages} passages): py-spy (`record --nonblocking --gil`, 100 "
        f"samples/s) on each server during the wrk run samples the thread that holds the "
        f"interpreter lock, i.e. the service's Python work, which one process does on one core "
        f"at a time. Each sample goes to the first part of `bench/_profile.py` whose frames it "
        f"holds; a part's figure is its share of the samples times the service's measured CPU "
        f"per request (so native work outside the lock, SQLite's commits, scrypt and uvloop's "
        f"polling, is spread over the parts). The last line is the lock's wall time per "
        f"request: a process serves at most 1 s over it; on a loaded machine it exceeds the "
        f"CPU time, as the lock's holder is sometimes descheduled while it holds it. The "
        f"sampling costs the server a little, so these "
        f"runs' requests/s are not the load section's.\n\n" + head + "\n".join(rows) + "\n"
    )


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=20.0, help="seconds of load")
    parser.add_argument("--connections", type=int, default=128)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--passages", type=int, default=10)
    parser.add_argument("--latency-ms", type=float, default=100.0)
    parser.add_argument("--judge-concurrency", type=int, default=64)
    parser.add_argument("--keys", type=int, default=200, help="client keys in the warm-up")
    parser.add_argument("--postgres", action="store_true", help="a temp PostgreSQL server")
    parser.add_argument("--replicas", type=int, default=1)
    parser.add_argument("--serve-arg", action="append", default=[], help="for evidex serve")
    parser.add_argument("--baseline", type=Path, help="another checkout, served first")
    parser.add_argument("--baseline-asyncio", action="store_true")
    parser.add_argument("--baseline-label", default="before")
    parser.add_argument("--label", default="this checkout")
    parser.add_argument("--src", type=Path, help="serve another checkout's code as this side")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--profile", action="store_true", help="sample the servers with py-spy")
    parser.add_argument("--no-write", action="store_true")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    wrk_binary()
    src = (args.src / "src").resolve() if args.src else None
    sides = [Side(args.label, src=src, serve_args=tuple(args.serve_arg))]
    if args.baseline is not None:
        before = Side(
            args.baseline_label,
            src=(args.baseline / "src").resolve(),
            plain_asyncio=args.baseline_asyncio,
        )
        sides.insert(0, before)
    results = []
    with databases(args.postgres) as fresh:
        for _ in range(args.rounds):
            for side in sides:
                m = measure(side, fresh(), args)
                results.append(m)
                print(report([m], args).rsplit("\n\n", 1)[-1], flush=True)
    text = report(results, args)
    print(text)
    for m in results:
        for line in m.warmup.errors[:5]:
            print(f"{m.side.label}: warm-up error: {line}")
    if args.profile:
        print(profile_report(results, args))
    if not args.no_write and args.profile:
        # the sampling slows the servers: these runs' throughput is not the load section's
        title = "Where the service's CPU goes"
        write_section("service_profile", title, profile_report(results, args))
    elif not args.no_write:
        name = "service_load_postgres" if args.postgres else "service_load"
        title = (
            f"The service under wrk: PostgreSQL, {args.replicas} replicas"
            if args.postgres
            else "The service under wrk: SQLite"
        )
        write_section(name, title, text)
    return 0 if all(m.ok() for m in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
