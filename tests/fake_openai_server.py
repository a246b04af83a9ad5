"""A real OpenAI-compatible HTTP server on a loopback port, scripted per test.

It speaks just enough of the chat API (``POST /v1/chat/completions``, ``GET /v1/models``) for
the ``openai:MODEL`` judge to run through its real HTTP client and network stack, and it plays
the faults that a mock transport cannot: slow answers, dropped connections, rate limits, servers
that reject ``response_format``. Standard library only, so it starts in milliseconds.

Each chat request takes the next behaviour from :attr:`FakeOpenAIServer.script` (or
:attr:`FakeOpenAIServer.default` once the script is empty); every request is recorded (path,
headers, JSON body) so tests can assert what the judge sent, and the chat requests in flight are
counted (:attr:`FakeOpenAIServer.peak_in_flight`). :func:`tier_reply_for` and
:func:`score_reply_for` build valid replies from a request, for load tests that cannot script
each answer.

A request that asks for ``"stream": true`` gets its :class:`Reply` as server-sent events, as
real servers send them: the headers at once, then ``delay_s`` (the time to the first token,
with a ``: ping`` comment every ``ping_s`` as sse-starlette sends them), then the text in
chunks ``gap_s`` apart, a chunk with the ``finish_reason``, the usage in a last chunk when the
request asked for it (``stream_options.include_usage``) and ``data: [DONE]``. ``stall_after``
chunks into it the reply stops for ``stall_s``; ``interrupted`` ends it with ``[DONE]`` and no
``finish_reason``, as llama-cpp-python's server does when another request arrives. Each stream
is logged (:attr:`FakeOpenAIServer.streams`): how many chunks it meant to write and wrote, and
whether its client hung up, which stops it, as a server that checks for a closed connection
stops generating.
"""

from __future__ import annotations

import hashlib
import json
import re
import socket
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = [
    "Close",
    "FakeOpenAIServer",
    "Raw",
    "Recorded",
    "Refuses",
    "Reply",
    "Status",
    "StreamLog",
    "closed_port",
    "format_mode",
    "passages_in",
    "score_reply_for",
    "serve",
    "tier_reply_for",
]


@dataclass(frozen=True)
class Reply:
    """Answer with a proper ``chat.completion`` whose message content is ``text`` (streamed
    when the request asks for it: see the module docstring).

    ``text`` may be a callable of the request body, for replies that depend on the request.
    """

    text: str | Callable[[dict[str, Any]], str]
    prompt_tokens: int = 120
    completion_tokens: int = 40
    delay_s: float = 0.0
    finish_reason: str = "stop"
    chunk_chars: int = 16
    gap_s: float = 0.0
    stall_after: int | None = None
    stall_s: float = 0.0
    interrupted: bool = False
    ping_s: float | None = None
    usage_in_stream: bool = True
    """Whether a stream that asked for its usage gets it (llama-cpp-python's sends none)."""


@dataclass
class StreamLog:
    """What one streamed reply did on the server."""

    planned: int
    """Chunks of text it was to write."""
    written: int = 0
    client_gone: bool = False
    """The client hung up before the end: the server stopped writing."""
    ended_at: float | None = None
    """``time.monotonic()`` when it stopped writing, whatever the reason."""


@dataclass(frozen=True)
class Status:
    """Answer with an HTTP error status and an OpenAI-style error body.

    ``{auth}`` in ``message`` is replaced by the request's Authorization header, to play a
    server that echoes credentials back in its error text.
    """

    code: int
    message: str = "scripted failure"
    headers: Mapping[str, str] = field(default_factory=dict)
    param: str | None = None


@dataclass(frozen=True)
class Raw:
    """Answer with this exact body: a server that says 200 but sends no chat completion."""

    body: str
    code: int = 200
    content_type: str = "application/json"


@dataclass(frozen=True)
class Close:
    """Read the request, then drop the connection without answering."""


@dataclass(frozen=True)
class Refuses:
    """A server that accepts only some structured-output modes: a request whose
    ``response_format`` is one of ``modes`` (``json_schema``, ``json_object+schema`` for a
    json_object carrying a schema, ``json_object``) gets ``status`` naming response_format (as
    llama-cpp-python's server answers: 500); any other gets ``reply``."""

    modes: frozenset[str]
    reply: Reply
    status: int = 500


def format_mode(body: Mapping[str, Any]) -> str:
    """The structured-output mode of a request: its ``response_format`` type, ``json_object+
    schema`` when a json_object carries a schema, ``none`` without one."""
    fmt = body.get("response_format")
    if not isinstance(fmt, Mapping):
        return "none"
    kind = str(fmt.get("type"))
    return "json_object+schema" if kind == "json_object" and "schema" in fmt else kind


Behaviour = Reply | Status | Raw | Close | Refuses


@dataclass(frozen=True)
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    """Header names in lower case."""
    body: dict[str, Any]

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list(self.body.get("messages", []))

    @property
    def text(self) -> str:
        """Every message content of the request, joined: what the model was shown."""
        return "\n".join(str(m.get("content", "")) for m in self.messages)


class FakeOpenAIServer:
    """The server; use :func:`serve` to run it for the length of a ``with`` block."""

    reported_model = "fake-model-2025-01-01"

    def __init__(self, *, backlog: int | None = None, serial: bool = False) -> None:
        """``backlog``: the listen queue (default the standard library's 5); a load test that
        opens hundreds of connections at once needs more, or the kernel drops some.
        ``serial``: answer one chat request at a time, the others waiting their turn, as
        llama.cpp's servers do with one model."""
        self._turn: threading.Lock | None = threading.Lock() if serial else None
        self.script: list[Behaviour] = []
        self.requests: list[Recorded] = []
        self.unscripted = 0
        """Chat requests that arrived with an empty script and no default (answered 500)."""
        self.default: Behaviour | None = None
        """The behaviour of every chat request once the script is empty; None: HTTP 500."""
        self.in_flight = 0
        """Chat requests received and not yet answered."""
        self.peak_in_flight = 0
        """The most chat requests ever in flight at once."""
        self.streams: list[StreamLog] = []
        """Every streamed reply, in the order they began."""
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._connections: set[socket.socket] = set()
        self._httpd = _Server(("127.0.0.1", 0), _handler_for(self), bind_and_activate=False)
        if backlog is not None:
            self._httpd.request_queue_size = backlog
        try:
            self._httpd.server_bind()
            self._httpd.server_activate()
        except OSError:
            self._httpd.server_close()
            raise
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def chat_requests(self) -> list[Recorded]:
        return [r for r in self.requests if r.path.endswith("/chat/completions")]

    def add(self, *behaviours: Behaviour) -> None:
        with self._lock:
            self.script.extend(behaviours)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Stop serving, wake sleeping handlers, and close every open connection."""
        self._stopping.set()
        self._httpd.shutdown()
        with self._lock:
            connections = list(self._connections)
        for conn in connections:
            with suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        self._httpd.server_close()
        self._thread.join(timeout=5)

    # ------------------------------------------------------------ used by the handler

    def _record(self, item: Recorded) -> Behaviour | None:
        with self._lock:
            self.requests.append(item)
            if not item.path.endswith("/chat/completions"):
                return None
            if not self.script and self.default is not None:
                return self.default
            if not self.script:
                self.unscripted += 1
                return Status(500, "the fake server has no scripted behaviour left")
            return self.script.pop(0)

    def _in_flight(self, delta: int) -> None:
        with self._lock:
            self.in_flight += delta
            self.peak_in_flight = max(self.peak_in_flight, self.in_flight)

    def _track(self, conn: socket.socket, *, add: bool) -> None:
        with self._lock:
            if add:
                self._connections.add(conn)
            else:
                self._connections.discard(conn)

    def _sleep(self, seconds: float) -> None:
        self._stopping.wait(seconds)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Clients that hang up (timeouts, cancelled calls) are expected here: stay quiet."""


def _handler_for(server: FakeOpenAIServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, like real servers

        def setup(self) -> None:
            super().setup()
            server._track(self.connection, add=True)

        def finish(self) -> None:
            server._track(self.connection, add=False)
            with suppress(OSError):
                super().finish()

        def log_message(self, format: str, *args: Any) -> None:
            """No access log on stderr."""

        def do_GET(self) -> None:
            server._record(Recorded("GET", self.path, self._headers(), {}))
            if self.path.rstrip("/").endswith("/models"):
                model = {"id": server.reported_model, "object": "model", "owned_by": "fake"}
                self._json(200, {"object": "list", "data": [model]})
            else:
                self._json(404, _error(f"no route {self.path}", "not_found"))

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                body = json.loads(raw or b"{}")
            except ValueError:
                body = {"_unparseable": raw.decode("utf-8", "replace")}
            behaviour = server._record(Recorded("POST", self.path, self._headers(), body))
            if behaviour is None:
                self._json(404, _error(f"no route {self.path}", "not_found"))
                return
            server._in_flight(+1)
            try:
                if server._turn is None:
                    self._answer(behaviour, body)
                else:
                    with server._turn:
                        self._answer(behaviour, body)
            finally:
                server._in_flight(-1)

        def _answer(self, behaviour: Behaviour, body: dict[str, Any]) -> None:
            if isinstance(behaviour, Refuses):
                mode = format_mode(body)
                if mode in behaviour.modes:
                    message = f"response_format type {mode} is not supported: use text"
                    behaviour = Status(behaviour.status, message, param="response_format")
                else:
                    behaviour = behaviour.reply
            if isinstance(behaviour, Close):
                self.close_connection = True
            elif isinstance(behaviour, Raw):
                self._send(behaviour.code, behaviour.body.encode("utf-8"), behaviour.content_type)
            elif isinstance(behaviour, Status):
                message = behaviour.message.replace("{auth}", self.headers.get("Authorization", ""))
                payload = _error(message, "scripted", behaviour.param)
                self._json(behaviour.code, payload, behaviour.headers)
            elif body.get("stream"):
                self._stream(behaviour, body)
            else:
                if behaviour.delay_s:
                    server._sleep(behaviour.delay_s)
                text = behaviour.text(body) if callable(behaviour.text) else behaviour.text
                self._json(200, _completion(server.reported_model, text, behaviour))

        def _stream(self, reply: Reply, body: dict[str, Any]) -> None:
            text = reply.text(body) if callable(reply.text) else reply.text
            pieces = [
                text[i : i + reply.chunk_chars] for i in range(0, len(text), reply.chunk_chars)
            ]
            log = StreamLog(planned=len(pieces))
            with server._lock:
                server.streams.append(log)
            usage = bool((body.get("stream_options") or {}).get("include_usage"))
            try:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream; charset=utf-8")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                self._wait(reply.delay_s, reply.ping_s)
                self._event({"role": "assistant", "content": ""}, None)
                for n, piece in enumerate(pieces):
                    if n and reply.gap_s:
                        server._sleep(reply.gap_s)
                    if n == reply.stall_after:
                        self._wait(reply.stall_s, reply.ping_s)
                    self._event({"content": piece}, None)
                    log.written += 1
                if not reply.interrupted:
                    self._event({}, reply.finish_reason)
                    if usage and reply.usage_in_stream:
                        self._chunk(b"data: " + json.dumps(_usage_chunk(server, reply)).encode())
                self._chunk(b"data: [DONE]")
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()
            except OSError:  # the client hung up: stop generating
                log.client_gone = True
                self.close_connection = True
            finally:
                log.ended_at = time.monotonic()

        def _event(self, delta: dict[str, Any], finish: str | None) -> None:
            chunk = {
                "id": "chatcmpl-stream",
                "object": "chat.completion.chunk",
                "created": int(time.time()),
                "model": server.reported_model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            }
            self._chunk(b"data: " + json.dumps(chunk).encode())

        def _chunk(self, line: bytes) -> None:
            data = line + b"\n\n"
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.flush()

        def _wait(self, seconds: float, ping_s: float | None) -> None:
            """Wait, with a ping comment every ``ping_s`` (not progress of the reply)."""
            end = time.monotonic() + seconds
            while (left := end - time.monotonic()) > 0:
                server._sleep(min(left, ping_s or left))
                if ping_s and end - time.monotonic() > 0:
                    ping = b": ping\r\n\r\n"
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(ping), ping))
                    self.wfile.flush()

        def _headers(self) -> dict[str, str]:
            return {name.lower(): value for name, value in self.headers.items()}

        def _json(self, code: int, payload: Any, headers: Mapping[str, str] | None = None) -> None:
            self._send(code, json.dumps(payload).encode("utf-8"), "application/json", headers)

        def _send(
            self,
            code: int,
            data: bytes,
            content_type: str,
            headers: Mapping[str, str] | None = None,
        ) -> None:
            try:
                self.send_response(code)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(data)))
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)
            except OSError:  # the client gave up waiting
                self.close_connection = True

    return Handler


def _completion(model: str, text: str, reply: Reply) -> dict[str, Any]:
    return {
        "id": f"chatcmpl-{time.monotonic_ns()}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "finish_reason": reply.finish_reason,
                "logprobs": None,
            }
        ],
        "usage": {
            "prompt_tokens": reply.prompt_tokens,
            "completion_tokens": reply.completion_tokens,
            "total_tokens": reply.prompt_tokens + reply.completion_tokens,
        },
    }


def _usage_chunk(server: FakeOpenAIServer, reply: Reply) -> dict[str, Any]:
    return {
        "id": "chatcmpl-stream",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": server.reported_model,
        "choices": [],
        "usage": {
            "prompt_tokens": reply.prompt_tokens,
            "completion_tokens": reply.completion_tokens,
            "total_tokens": reply.prompt_tokens + reply.completion_tokens,
        },
    }


def _error(message: str, kind: str, param: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": param, "code": None}}


# ---------------------------------------------------------------------- replies from the request

_ARRAY_START = re.compile(r"\[\s*\{")
_DEFAULT_TIER_NAMES = ("directly-supporting", "contextually-relevant", "irrelevant")


def passages_in(body: dict[str, Any]) -> list[dict[str, str]]:
    """The passages a chat request shows the model: the first JSON array of ``{passage_id,
    text}`` objects in the first user message (the tasks render them with ``passages_json``;
    a re-ask appends messages and does not repeat them)."""
    decoder = json.JSONDecoder()
    user = next((m for m in body.get("messages", []) if m.get("role") == "user"), None)
    content = str((user or {}).get("content") or "")
    for match in _ARRAY_START.finditer(content):
        try:
            value, _ = decoder.raw_decode(content, match.start())
        except ValueError:
            continue
        if isinstance(value, list) and all(
            isinstance(v, dict) and {"passage_id", "text"} <= set(v) for v in value
        ):
            return [{"passage_id": str(v["passage_id"]), "text": str(v["text"])} for v in value]
    return []


def _pick(passage_id: str, n: int) -> int:
    return int(hashlib.sha256(passage_id.encode()).hexdigest()[:8], 16) % n


def tier_reply_for(body: dict[str, Any]) -> str:
    """A tier reply that passes validation for the passages of ``body``: one tier each (from
    the request's schema, picked by a hash of the id) and a snippet copied from the text.

    Use as ``Reply(tier_reply_for, delay_s=...)``."""
    fmt = body.get("response_format") or {}
    schema = (fmt.get("json_schema") or {}).get("schema") or fmt.get("schema") or {}
    try:
        names = list(schema["properties"]["classifications"]["items"]["properties"]["tier"]["enum"])
    except (KeyError, TypeError):
        names = list(_DEFAULT_TIER_NAMES)
    items = []
    for p in passages_in(body):
        quote = " ".join(p["text"].split()[:5])
        items.append(
            {
                "passage_id": p["passage_id"],
                "tier": names[_pick(p["passage_id"], len(names))],
                "justification": f"It says {quote}.",
                "key_evidence_snippet": quote,
            }
        )
    return json.dumps({"classifications": items})


def score_reply_for(body: dict[str, Any]) -> str:
    """A pointwise rerank reply (``rerank.score``) that passes validation for the passages of
    ``body``: one score in [0, 1] each, picked by a hash of the id."""
    scores = [
        {
            "passage_id": p["passage_id"],
            "relevance_score": _pick(p["passage_id"], 101) / 100,
            "justification": f"It says {' '.join(p['text'].split()[:5])}.",
        }
        for p in passages_in(body)
    ]
    return json.dumps({"scores": scores})


@contextmanager
def serve(*, backlog: int | None = None, serial: bool = False) -> Iterator[FakeOpenAIServer]:
    """Run a fresh server on a free loopback port for the ``with`` block."""
    server = FakeOpenAIServer(backlog=backlog, serial=serial)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def closed_port() -> int:
    """A loopback port nobody listens on (bound, then released): connections are refused."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
