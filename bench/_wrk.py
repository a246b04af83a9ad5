"""wrk, the C load generator, driven from a benchmark: one wrk process per server URL (a
client-side balancer over replicas), their latency distributions pooled.

wrk is Debian's package ``wrk`` (``apt-get install wrk``; ``make system-deps`` installs it).
Its Lua script (``bench/service_load.lua``) makes each request's body and prints, when done,
one line of JSON with the request count, the errors by kind and the latency at every 0.1 %.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent / "service_load.lua"


def wrk_binary() -> str:
    """The path of ``wrk``; exits with how to install it when it is missing."""
    found = shutil.which("wrk")
    if found is None:
        raise SystemExit(
            "wrk is not installed: `apt-get install wrk` (Debian, Ubuntu), `brew install wrk` "
            "(macOS), or `make system-deps` as root"
        )
    return found


@dataclass
class WrkRun:
    """What the wrk processes of one run saw, pooled."""

    requests: int = 0
    seconds: float = 0.0
    non_2xx: int = 0
    socket_errors: int = 0
    timeouts: int = 0
    cpu_s: float = 0.0
    """User and system CPU time of the wrk processes."""
    percentiles_us: list[float] = field(default_factory=list)
    """Pooled latency at 0.1 %, 0.2 % ... 100 %."""

    @property
    def rate(self) -> float:
        return self.requests / self.seconds if self.seconds else 0.0

    def percentile_ms(self, q: float) -> float:
        """The latency at ``q`` (0.5: the median) in milliseconds."""
        if not self.percentiles_us:
            return float("nan")
        index = min(len(self.percentiles_us) - 1, max(0, round(q * 1000) - 1))
        return self.percentiles_us[index] / 1000


def run_wrk(
    urls: Sequence[str],
    key: str,
    passages: int,
    *,
    threads: int,
    connections: int,
    duration_s: float,
    timeout_s: float = 10.0,
) -> WrkRun:
    """Load ``urls`` for ``duration_s``: ``connections`` and ``threads`` split evenly over
    one wrk process per URL (at least one thread each), every request a ``POST /tier`` with
    ``passages`` passages and a query of its own."""
    exe = wrk_binary()
    n = len(urls)
    procs = []
    for i, url in enumerate(urls):
        command = [
            exe,
            f"-t{max(1, threads // n)}",
            f"-c{max(1, connections // n)}",
            f"-d{duration_s:g}s",
            f"--timeout={timeout_s:g}s",
            "-s",
            str(SCRIPT),
            url,
            "--",
            key,
            str(passages),
            f"r{i}.",
        ]
        procs.append(subprocess.Popen(command, stdout=subprocess.PIPE, text=True))
    run = WrkRun()
    pooled: list[tuple[int, list[float]]] = []
    for proc in procs:
        assert proc.stdout is not None
        with proc.stdout:
            out = proc.stdout.read()
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        run.cpu_s += usage.ru_utime + usage.ru_stime
        line = next((s for s in out.splitlines() if s.startswith("{")), None)
        if proc.returncode != 0 or line is None:
            raise RuntimeError(f"wrk failed (exit {proc.returncode}): {out[-2000:]}")
        figures = json.loads(line)
        run.requests += figures["requests"]
        run.seconds = max(run.seconds, figures["seconds"])
        run.non_2xx += figures["status"]
        run.socket_errors += figures["connect"] + figures["read"] + figures["write"]
        run.timeouts += figures["timeout"]
        pooled.append((figures["requests"], figures["percentiles_us"]))
    run.percentiles_us = pool_percentiles(pooled)
    return run


def pool_percentiles(parts: Sequence[tuple[int, Sequence[float]]]) -> list[float]:
    """The latency at every 0.1 % of several runs' requests together, each run's 1,000
    percentile points standing for its share of the requests (exact to within 0.1 % of
    each run)."""
    points: list[tuple[float, float]] = []
    total = sum(count for count, _ in parts)
    if not total:
        return []
    for count, values in parts:
        points += [(v, count / len(values)) for v in values]
    points.sort()
    out: list[float] = []
    seen = 0.0
    target = 1
    for value, weight in points:
        seen += weight
        while target <= 1000 and seen >= total * target / 1000 - 1e-9:
            out.append(value)
            target += 1
    while len(out) < 1000:
        out.append(points[-1][0])
    return out
