"""The service on a real uvicorn server on a free loopback port (in a thread, or as its own
``evidex serve`` process), for the tests and benchmarks that talk to it over HTTP."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


@contextmanager
def serve_app(app: Any, *, backlog: int = 2048) -> Iterator[str]:
    """Run ``app`` until the block ends; yields its base URL."""
    import uvicorn

    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", backlog=backlog)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.02)
    assert server.started, "uvicorn did not start"
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def wait_ready(url: str, process: Any, timeout_s: float, interval_s: float = 0.1) -> bool:
    """Whether ``GET url`` answered 200 within ``timeout_s``; False at once if ``process``
    (a ``subprocess.Popen``) has exited."""
    import httpx

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and process.poll() is None:
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return True
        except httpx.TransportError:
            pass
        time.sleep(interval_s)
    return False


def stop_process(process: Any, timeout_s: float = 20) -> None:
    """Ask a server process to end; kill it if it has not within ``timeout_s``."""
    import subprocess

    process.terminate()
    try:
        process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


@contextmanager
def serve_process(db: str, *args: str, env: dict[str, str] | None = None) -> Iterator[str]:
    """``evidex serve`` as its own process on a free loopback port (a replica, as a deployment
    runs it) until the block ends; yields its base URL."""
    with server_process(db, *args, env=env) as (base, _):
        yield base


@contextmanager
def server_process(
    db: str, *args: str, env: dict[str, str] | None = None, port: int | None = None
) -> Iterator[tuple[str, Any]]:
    """:func:`serve_process` that also yields the process (a ``subprocess.Popen``), for a test
    that kills it or a benchmark that reads its CPU time; ``port``: a given one (default: a
    free one)."""
    import os
    import socket
    import subprocess
    import sys
    import tempfile
    from pathlib import Path

    if port is None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
    exe = str(Path(sys.executable).parent / "evidex")
    base = f"http://127.0.0.1:{port}"
    with tempfile.TemporaryFile(mode="w+") as log:
        proc = subprocess.Popen(
            [exe, "serve", "--port", str(port), "--db", db, *args],
            env={**os.environ, **(env or {})},
            stdout=subprocess.DEVNULL,
            stderr=log,
            text=True,
        )
        try:
            if not wait_ready(f"{base}/healthz", proc, timeout_s=60):
                log.seek(0)
                raise AssertionError(f"evidex serve did not start: {log.read()[-2000:]}")
            yield base, proc
        finally:
            if proc.poll() is None:
                stop_process(proc)
