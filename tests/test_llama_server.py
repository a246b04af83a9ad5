"""``openai:`` against a server nobody here wrote: llama-cpp-python's own OpenAI-compatible
server (``python -m llama_cpp.server``, the ``llm-server`` extra) serving local:qwen's weights on
a loopback port.

That server takes ``response_format`` only as ``text`` or ``json_object`` (optionally with a
``schema``, which it compiles to a grammar). Observed with llama-cpp-python 0.3.36::

    POST /v1/chat/completions  "response_format": {"type": "json_schema", "json_schema": {...}}
    -> HTTP 500 {"error": {"message": "1 validation error:\\n  {'type': 'literal_error',
       'loc': ('body', 'response_format', 'type'), 'msg': \\"Input should be 'text' or
       'json_object'\\", 'input': 'json_schema', ...}\\n\\n  File \\".../llama_cpp/server/app.py\\",
       line 376, in create_chat_completion\\n    POST /v1/chat/completions",
       "type": "internal_server_error", "param": null, "code": null}}

    POST /v1/chat/completions  "response_format": {"type": "json_object", "schema": {...}}
    -> HTTP 200, content '{ "verdict": "yes"}' (the schema's grammar held)

A 500, not a 400: the judge must read the refusal from the message, learn it once (a note in
the audit log), send ``json_object`` from then on, and never let it become a fallback.

Between the judge and the server sits a pass-through recorder of our own: it changes nothing,
and tells the test what each request asked for and what the server answered. It reads each
answer whole, so the test of a call given up mid-stream talks to the server directly.

The judge runs with its default deadlines (no timeout set by hand): the server streams, and
a call is watched by its first token and its idle gaps.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from evidex import Passage, rerank, tier
from evidex.judges import get_judge
from evidex.judges._openai import OpenAIJudge
from evidex.judging import JudgeReply, JudgeRequest, Message, Payload
from tests.live_service import stop_process, wait_ready

pytestmark = pytest.mark.slow

SERVER_MODULES = ("fastapi", "uvicorn", "sse_starlette", "starlette_context", "pydantic_settings")
START_TIMEOUT_S = 120.0
FORMAT_FAULT = re.compile(r"response_format|json_schema|HTTP 500", re.I)

QUESTION = "How tall is the Eiffel Tower?"
TIER_PASSAGES = [
    Passage(passage_id="t1", text="The Eiffel Tower is 330 metres tall."),
    Passage(passage_id="t2", text="The Eiffel Tower stands in Paris, on the Champ de Mars."),
    Passage(passage_id="t3", text="Bananas are rich in potassium."),
    Passage(passage_id="t4", text="The tower was finished in 1889 for the World's Fair."),
    Passage(passage_id="t5", text="Rain is common in Brittany in autumn."),
]
RERANK_PASSAGES = [
    Passage(passage_id="r1", text="Bananas are rich in potassium."),
    Passage(passage_id="r2", text="Paris is the capital of France."),
    Passage(passage_id="r3", text="The Eiffel Tower is 330 metres tall."),
]


# --------------------------------------------------------------------------- the server


@dataclass
class Exchange:
    response_format: dict[str, Any] | None
    status: int


@dataclass
class LlamaServer:
    process: subprocess.Popen[bytes]
    upstream: str
    log: Path
    exchanges: list[Exchange] = field(default_factory=list)
    base_url: str = ""

    def log_tail(self, lines: int = 15) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start(model: Path, threads: int, log: Path) -> LlamaServer:
    port = _free_port()
    command = [
        sys.executable, "-m", "llama_cpp.server",
        "--model", str(model), "--model_alias", "qwen",
        "--host", "127.0.0.1", "--port", str(port),
        "--n_ctx", "4096", "--n_threads", str(threads),
    ]  # fmt: skip
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}  # its prints reach the log as they happen
    with log.open("wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env)
    server = LlamaServer(process, f"http://127.0.0.1:{port}", log)
    if wait_ready(f"{server.upstream}/v1/models", process, START_TIMEOUT_S, interval_s=0.5):
        return server
    if process.poll() is not None:
        pytest.fail(f"llama_cpp.server exited with {process.returncode}:\n{server.log_tail()}")
    stop_process(process, timeout_s=15)
    pytest.fail(f"llama_cpp.server not ready after {START_TIMEOUT_S:g}s:\n{server.log_tail()}")


def _recorder(server: LlamaServer) -> ThreadingHTTPServer:
    """A loopback pass-through to ``server`` that records each chat request's format."""

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            """Quiet: the server's own log has the access lines."""

        def do_GET(self) -> None:
            self._forward(None)

        def do_POST(self) -> None:
            self._forward(self.rfile.read(int(self.headers.get("Content-Length") or 0)))

        def _forward(self, body: bytes | None) -> None:
            headers = {"Content-Type": self.headers.get("Content-Type", "application/json")}
            answer = httpx.request(
                self.command,
                server.upstream + self.path,
                content=body,
                headers=headers,
                timeout=None,  # the judge's own timeout governs
            )
            if self.path.endswith("/chat/completions"):
                asked = json.loads(body or b"{}").get("response_format")
                server.exchanges.append(Exchange(asked, answer.status_code))
            self.send_response(answer.status_code)
            self.send_header("Content-Type", answer.headers.get("content-type", "text/plain"))
            self.send_header("Content-Length", str(len(answer.content)))
            self.end_headers()
            self.wfile.write(answer.content)

    return ThreadingHTTPServer(("127.0.0.1", 0), Handler)


@pytest.fixture(scope="module")
def llama_server(qwen: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    """llama_cpp.server over local:qwen's GGUF file with local:qwen's thread count
    (``EVIDEX_QWEN_THREADS``, else every core), stopped however the tests end."""
    missing = [m for m in SERVER_MODULES if importlib.util.find_spec(m) is None]
    if missing:
        pytest.skip(
            f"llama_cpp.server needs {', '.join(missing)}: pip install 'evidex[llm,llm-server]'"
        )
    server = _start(qwen.model_path(), qwen.n_threads, tmp_path_factory.mktemp("llama") / "log")
    recorder = _recorder(server)
    thread = threading.Thread(target=recorder.serve_forever, daemon=True)
    thread.start()
    server.base_url = f"http://127.0.0.1:{recorder.server_address[1]}/v1"
    try:
        yield server
    finally:
        recorder.shutdown()
        recorder.server_close()
        thread.join(timeout=5)
        stop_process(server.process, timeout_s=15)


# --------------------------------------------------------------------------- the test


def test_tier_and_rerank_are_judged_through_a_server_that_refuses_json_schema(
    llama_server: LlamaServer, store: Any
) -> None:
    judge = get_judge("openai:qwen", base_url=llama_server.base_url)
    run = {"judge": judge, "store": store}

    tiered = tier(QUESTION, TIER_PASSAGES, batch_size=5, **run)
    ranked = rerank(QUESTION, RERANK_PASSAGES, strategy="allpairs", **run)
    rows = store.audit_rows()
    exchanges = llama_server.exchanges
    context = f"exchanges: {exchanges}\nserver log:\n{llama_server.log_tail()}"

    # every passage once, in input order; nothing fell back because of the server's refusal
    assert [a.passage_id for a in tiered.classifications] == [p.passage_id for p in TIER_PASSAGES]
    assert sorted(ranked.ids()) == sorted(p.passage_id for p in RERANK_PASSAGES)
    for a in tiered.classifications:
        assert a.source == "judge" or not FORMAT_FAULT.search(a.reason or ""), context
    assert ranked.source == "judge" or not FORMAT_FAULT.search(ranked.reason or ""), context
    assert [r for r in rows if r["status"] == "error"] == [], context

    # the negotiation: one json_schema request refused with 500, learnt once, then json_object
    assert exchanges, context
    first, later = exchanges[0], exchanges[1:]
    assert (first.response_format or {}).get("type") == "json_schema" and first.status == 500
    assert later and all(e.status == 200 for e in later), context
    assert all((e.response_format or {}).get("type") == "json_object" for e in later), context
    assert all("schema" in (e.response_format or {}) for e in later), "json_object keeps the schema"
    notes = [r for r in rows if r["step"] == "judge.note"]
    assert len(notes) == 1, notes
    assert "json_object" in json.dumps(notes[0]["detail"]), notes[0]

    # every answered request is an audit row of one of the two runs, and vice versa
    answered = [r for r in rows if r["status"] in {"ok", "invalid"}]
    assert len(answered) == len(later), context
    assert {r["run_id"] for r in answered} == {tiered.run_id, ranked.run_id}
    assert all(r["model_version"] == "qwen" for r in answered)

    # the small model, constrained by the schema's grammar, should get these right
    assert all(a.source == "judge" for a in tiered.classifications), tiered.classifications
    assert ranked.source == "judge", ranked.reason


def _ask(text: str, max_tokens: int) -> JudgeRequest:
    return JudgeRequest(
        job="tier",
        messages=(Message("user", text),),
        schema={},
        payload=Payload(),
        temperature=0.0,
        max_tokens=max_tokens,
    )


def test_a_streamed_call_given_up_stops_on_the_server_and_the_next_call_does_not_wait_for_it(
    llama_server: LlamaServer,
) -> None:
    """A long streamed reply is given up once it has begun (its caller cancels it): the judge
    closes the connection, the server notices at its next token and stops writing (its log says
    so), and the next call is answered at once instead of after the hundreds of tokens the
    first one had left. Straight to the server: the recorder reads answers whole."""
    judge = get_judge("openai:qwen", base_url=f"{llama_server.upstream}/v1")
    assert isinstance(judge, OpenAIJudge)
    long = _ask("Write every number from 1 to 400, separated by commas.", 1600)
    short = _ask("Say OK.", 3)

    async def scenario() -> tuple[JudgeReply, float]:
        pace = judge.pool.endpoints[0].pace
        began = pace.last_event
        task = asyncio.ensure_future(judge.complete(long))
        while pace.last_event == began:  # its first token
            await asyncio.sleep(0.05)
        await asyncio.sleep(1.0)  # a few more
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        started = time.monotonic()
        try:
            return await judge.complete(short), time.monotonic() - started
        finally:
            await judge.aclose()

    reply, took = asyncio.run(asyncio.wait_for(scenario(), timeout=900))
    log = llama_server.log.read_text(errors="replace")
    assert "Disconnected from client" in log, llama_server.log_tail()
    assert reply.text.strip()
    # the 1,600 tokens asked for take minutes at CPU speed; the short call took seconds
    assert took < 60, (took, llama_server.log_tail())
