"""CPU time of running processes and their children, read from ``/proc`` (Linux)."""

from __future__ import annotations

import os
from pathlib import Path

_TICK = os.sysconf("SC_CLK_TCK")


def descendants(pid: int) -> list[int]:
    """``pid`` and every process under it (a uvicorn's workers)."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        for task in Path(f"/proc/{p}/task").glob("*"):
            try:
                todo += [int(c) for c in (task / "children").read_text().split()]
            except OSError:
                continue
    return out


def cpu_s(pid: int) -> float:
    """User and system CPU seconds of ``pid`` and the processes under it, so far."""
    total = 0
    for p in descendants(pid):
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15)
    return total / _TICK


def load_average() -> str:
    """The 1, 5 and 15 minute load averages, as ``uptime`` prints them."""
    return ", ".join(f"{v:.2f}" for v in os.getloadavg())


def server_on_port(name: str, port: int) -> int | None:
    """The pid of the process whose command is ``name`` and which was told ``-p PORT`` (a
    PostgreSQL postmaster), or None."""
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            args = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if args and args[0].endswith(name.encode()) and f"{port}".encode() in args:
            at = args.index(f"{port}".encode())
            if at > 0 and args[at - 1] == b"-p":
                return int(proc.name)
    return None
