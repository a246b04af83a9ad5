"""Judges that bench/injection.py serves itself on loopback, named in a judge spec.

- ``openai:obedient``: ``bench/_loopback_judge.py --obey --latency-ms 0`` in its own process,
  the maximally gullible judge (``bench/_obedience.py``);
- ``openai:llama-server``: llama-cpp-python's server (``python -m llama_cpp.server``, the
  ``llm-server`` extra) on the shipped Qwen2.5-Coder-1.5B weights, as
  bench/small_model_batches.py starts it, with ``n_threads`` threads (option, default 1) and
  ``n_ctx`` 8192.

Either may be a stage of a cascade (``cascade:local:minilm,openai:obedient``): the server is
started, its URL goes to the ``openai:`` stage as ``base_url``, and it is stopped when the
judge is done. Any other spec passes through unchanged.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
SERVED = ("openai:obedient", "openai:llama-server")


@contextlib.contextmanager
def served(spec: str, options: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """``(spec, options)`` to build the judge with, the server it names running meanwhile."""
    if "openai:obedient" in spec:
        with _obedient() as url:
            yield spec, {**options, "base_url": url, "api_key": "loopback"}
    elif "openai:llama-server" in spec:
        options = dict(options)
        threads = int(options.pop("n_threads", 1))
        with _llama(threads) as url:
            yield (
                spec.replace("openai:llama-server", "openai:qwen"),
                {
                    **options,
                    "base_url": url,
                    "api_key": "loopback",
                },
            )
    else:
        yield spec, options


@contextlib.contextmanager
def _obedient() -> Iterator[str]:
    command = [sys.executable, str(HERE / "_loopback_judge.py"), "--obey", "--latency-ms", "0"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    try:
        line = process.stdout.readline() if process.stdout else ""
        if not line.startswith("port "):
            raise SystemExit(f"the obedient loopback judge did not start: {line!r}")
        yield f"http://127.0.0.1:{int(line.split()[1])}/v1"
    finally:
        process.terminate()
        process.wait(timeout=30)


@contextlib.contextmanager
def _llama(threads: int) -> Iterator[str]:
    from evidex.judges._qwen import QwenJudge
    from small_model_batches import start_server

    log = Path(tempfile.mkdtemp(prefix="evidex-injection-")) / "server.log"
    process, url = start_server(QwenJudge().model_path(), threads, 8192, log)
    try:
        yield url
    finally:
        process.terminate()
        process.wait(timeout=30)
