"""Where a running server's CPU goes: py-spy samples of its stacks, sorted into the parts of the
request path.

py-spy (``pip install py-spy``) records, 100 times a second and without pausing the process
(``--nonblocking``), the stack of the thread that holds the interpreter lock (``--gil``): the
service's Python work, which one process does on one core at a time, so the lock's time per
request bounds what a process can serve (1 s over it). Native work done without the lock
(SQLite's commits, scrypt, uvloop's polling) is not sampled. Each stack goes to the first part
in :data:`CATEGORIES` one of whose markers is in one of its frames (a frame reads
``function (path:line)``); a part's share of the samples is its share of the lock's time.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

CATEGORIES: list[tuple[str, tuple[str, ...]]] = [
    ("key check", ("evidex/service/auth.py", "store/_keys.py", "fastapi/security/")),
    (
        "audit-log and cache writes (queue, flush, writer thread)",
        (
            "store/_writer.py",
            "_insert_rows",
            "_insert_audit",
            "_AuditWriter",
            "append_audit",
            "cache_put",
            "(flush (",
            "(aflush (",
        ),
    ),
    ("cache reads", ("cache_get",)),
    ("review items and routing", ("store/_reviews.py", "_route_reviews", "harness/routing.py")),
    ("metrics", ("harness/metrics.py", "prometheus_client", "(forward (evidex/service")),
    (
        "response serialisation",
        ("serialize_response", "jsonable_encoder", "(render (", "(respond (evidex/jobs"),
    ),
    (
        "body parsing and validation",
        (
            "request_body_to_args",
            "_validate_value_with_model_field",
            "(json (starlette",
            "(body (starlette",
            "check_body",
            "parse_options",
            "parse_input",
            "(inputs (evidex",
        ),
    ),
    (
        "plan: preflight and injection screening",
        ("(plan (evidex/jobs", "evidex/preflight.py", "evidex/_screening.py"),
    ),
    ("judge call (HTTP client, request and reply JSON)", ("evidex/judges/", "aiohttp")),
    (
        "job run (harness, prompt, reply validation)",
        ("evidex/harness/", "evidex/tasks/", "evidex/jobs/", "evidex/_text", "evidex/types"),
    ),
    ("SQL driver (SQLAlchemy, sqlite3, psycopg)", ("sqlalchemy", "sqlite3", "psycopg")),
    ("HTTP server and event loop (uvicorn, starlette, asyncio)", ("",)),
]
"""Parts of the request path and the frame markers that place a sample in them, first match
wins: a store write inside the harness is a store write, the rest of the harness its own."""


def py_spy() -> str:
    found = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    if not Path(found).exists():
        raise SystemExit("py-spy is not installed: pip install py-spy")
    return found


class Profiler:
    """py-spy recording ``pids`` for ``duration_s`` from now, in the background."""

    def __init__(self, pids: Sequence[int], duration_s: float, rate: int = 100) -> None:
        self.rate = rate
        self.samples = 0
        """Samples taken (every part), once :meth:`result` has run."""
        self._dir = tempfile.TemporaryDirectory(prefix="evidex-profile-")
        self._outputs = [Path(self._dir.name) / f"{pid}.txt" for pid in pids]
        exe = py_spy()
        self._procs = [
            subprocess.Popen(
                [
                    exe,
                    "record",
                    "--pid",
                    str(pid),
                    "--duration",
                    str(max(1, int(duration_s))),
                    "--rate",
                    str(rate),
                    "--nonblocking",
                    "--gil",
                    "--subprocesses",
                    "--format",
                    "raw",
                    "--output",
                    str(out),
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            for pid, out in zip(pids, self._outputs, strict=True)
        ]

    def result(self) -> dict[str, float]:
        """Each part's share of the samples (waits for py-spy to finish)."""
        counts: Counter[str] = Counter()
        try:
            for proc in self._procs:
                proc.wait(timeout=120)
            for out in self._outputs:
                if out.exists():
                    counts += categorise(out.read_text().splitlines())
        finally:
            self._dir.cleanup()
        total = self.samples = sum(counts.values())
        return {name: counts[name] / total for name, _ in CATEGORIES} if total else {}

    def lock_s(self) -> float:
        """Seconds the sampled processes held the interpreter lock, all together."""
        return self.samples / self.rate


def categorise(lines: Sequence[str]) -> Counter[str]:
    """Samples per part, from py-spy's collapsed stacks (``frame;frame;... count``)."""
    counts: Counter[str] = Counter()
    for line in lines:
        stack, _, n = line.rpartition(" ")
        if not stack or not n.isdigit():
            continue
        counts[part_of(stack)] += int(n)
    return counts


def part_of(stack: str) -> str:
    for name, markers in CATEGORIES:
        if any(marker in stack for marker in markers):
            return name
    return CATEGORIES[-1][0]
