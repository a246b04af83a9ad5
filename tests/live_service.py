"""The service on a real uvicorn server on a free loopback port, in a thread, for the tests
that talk to it over HTTP."""

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


@contextmanager
def serve_process(db: str, *args: str, env: dict[str, str] | None = None) -> Iterator[str]:
    """``evidex serve`` as its own process on a free loopback port (a replica, as a deployment
    runs it) until the block ends; yields its base URL."""
    import os
    import socket
    import subprocess
    import sys
    import tempfile
    from pathlib import Path

    import httpx

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
            deadline = time.monotonic() + 60
            while True:
                try:
                    if httpx.get(f"{base}/healthz", timeout=2).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                if proc.poll() is not None or time.monotonic() > deadline:
                    log.seek(0)
                    raise AssertionError(f"evidex serve did not start: {log.read()[-2000:]}")
                time.sleep(0.1)
            yield base
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
