"""The service's edge: what a request may send, checked before its body is parsed or run.

- :class:`BodyLimit`, a pure ASGI middleware, answers 413 to a body over its limit *before* the
  app parses any of it: at once when ``Content-Length`` says so, else as soon as the bytes it
  has counted pass the limit (a chunked upload declares no length). A JSON body that is not
  UTF-8 gets 422 at its first bad byte. It runs on every FastAPI and Starlette version the
  service supports, which a framework's own body limit does not.
- :func:`check_body` holds a parsed body to :class:`~evidex.preflight.InputLimits` (passages
  per request, characters per text) and refuses lone surrogates anywhere in it, since they
  cannot be stored, tokenised or sent back as UTF-8. Each problem is a 422 that names its field.
- :func:`validation_errors` renders every 422 of a request's shape: where and what, never the
  input itself, so a rejected 5 MB body is not sent back to its sender.
- :func:`validation_body` and :func:`error_body` are the JSON of every refusal, so the MCP
  tools refuse with the messages of the HTTP API.
- :class:`SecurityHeaders`, a pure ASGI middleware too, adds the service's security headers to
  every response that does not set its own (a ``BaseHTTPMiddleware`` did this at the cost of
  a task and a stream per request: 7 % of the service's CPU under load).
"""

from __future__ import annotations

import codecs
import itertools
import json
import os
from collections.abc import Mapping, Sequence
from typing import Any

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from evidex.errors import ConfigError, EvidexError
from evidex.preflight import InputLimits

__all__ = [
    "DEFAULT_MAX_BODY_BYTES",
    "BodyLimit",
    "SecurityHeaders",
    "bounded",
    "check_body",
    "error_body",
    "max_body_bytes_from_env",
    "validation_body",
    "validation_error_handler",
    "validation_errors",
]

DEFAULT_MAX_BODY_BYTES = 4 * 1024 * 1024
"""4 MiB: a thousand passages of a few thousand characters each, with room for the rest."""

MAX_PROBLEMS = 20
"""How many problems one 422 lists; a body with thousands of bad passages gets the first ones."""
MAX_MESSAGE_CHARS = 500
MAX_LOC_PART_CHARS = 100


def max_body_bytes_from_env() -> int:
    """The body limit from ``EVIDEX_MAX_BODY_MB`` (megabytes of 2**20 bytes, fractions allowed),
    else :data:`DEFAULT_MAX_BODY_BYTES`."""
    raw = os.environ.get("EVIDEX_MAX_BODY_MB", "").strip()
    if not raw:
        return DEFAULT_MAX_BODY_BYTES
    try:
        megabytes = float(raw)
    except ValueError:
        megabytes = 0.0
    if not 0 < megabytes < 1024**2:
        raise ConfigError(f"EVIDEX_MAX_BODY_MB must be a positive number of megabytes, got {raw!r}")
    return int(megabytes * 1024 * 1024)


class BodyLimit:
    """Refuse request bodies over ``max_bytes`` (413) and JSON bodies that are not UTF-8 (422),
    before the app reads them into a request.

    The wrapped ``receive`` counts bytes as they arrive. Once a limit is crossed it sends the
    refusal itself and tells the app the client went away, so the app stops reading; whatever
    the app then tries to send is dropped. The refusal closes the connection, since the rest
    of the body was never read."""

    def __init__(self, app: ASGIApp, max_bytes: int = DEFAULT_MAX_BODY_BYTES) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.lower(): v for k, v in scope.get("headers", [])}
        declared = headers.get(b"content-length", b"").strip()
        if declared.isdigit() and int(declared) > self.max_bytes:
            await _refuse(send, *self._too_large())
            return
        content_type = headers.get(b"content-type", b"").split(b";")[0].strip().lower()
        decoder = (
            codecs.getincrementaldecoder("utf-8")()
            if not content_type or content_type.endswith((b"/json", b"+json"))
            else None
        )
        received = 0
        refused = False
        started = False

        async def limited_receive() -> Message:
            nonlocal received, refused
            if refused:
                return {"type": "http.disconnect"}
            message = await receive()
            if message["type"] != "http.request":
                return message
            chunk: bytes = message.get("body", b"")
            before = received
            received += len(chunk)
            refusal = None
            if received > self.max_bytes:
                refusal = self._too_large()
            elif decoder is not None:
                refusal = _not_utf8(decoder, chunk, before, final=not message.get("more_body"))
            if refusal is None:
                return message
            refused = True
            if not started:
                await _refuse(send, *refusal)
            return {"type": "http.disconnect"}

        async def guarded_send(message: Message) -> None:
            nonlocal started
            if refused:
                return  # the refusal went out; the app's answer to a cut-off body is dropped
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        await self.app(scope, limited_receive, guarded_send)

    def _too_large(self) -> tuple[int, dict[str, Any]]:
        return 413, {
            "error": "RequestTooLarge",
            "detail": f"the request body is over the limit of {self.max_bytes} bytes",
        }


class SecurityHeaders:
    """Add ``headers`` to every HTTP response that does not carry them already (a page that
    needs a wider policy, ``/docs``, sets its own)."""

    def __init__(self, app: ASGIApp, headers: Mapping[str, str]) -> None:
        self.app = app
        self.headers = [(k.lower().encode(), v.encode()) for k, v in headers.items()]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                given = list(message.get("headers", ()))
                present = {name.lower() for name, _ in given}
                given += [(k, v) for k, v in self.headers if k not in present]
                message = {**message, "headers": given}
            await send(message)

        await self.app(scope, receive, with_headers)


def _not_utf8(
    decoder: codecs.IncrementalDecoder, chunk: bytes, before: int, *, final: bool
) -> tuple[int, dict[str, Any]] | None:
    pending = len(decoder.getstate()[0])
    try:
        decoder.decode(chunk, final=final)
    except UnicodeDecodeError as exc:
        at = before - pending + exc.start
        return 422, validation_body(
            [{"loc": ("body",), "msg": f"not UTF-8 text (byte {at})", "type": "unicode_decode"}]
        )
    return None


async def _refuse(send: Send, status: int, body: Mapping[str, Any]) -> None:
    payload = json.dumps(body).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(payload)).encode()),
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": payload})


# ---------------------------------------------------------------------------- parsed bodies


def check_body(body: Any, limits: InputLimits) -> None:
    """Raise :class:`RequestValidationError` naming each field of ``body`` (a parsed request
    model) over ``limits`` or holding a lone surrogate (:meth:`InputLimits.problems`: every
    string of the body, keys included, and every ``passages`` list)."""
    problems = [
        {"loc": ("body", *p.loc), "msg": p.msg, "type": p.kind}
        for p in itertools.islice(limits.problems(body), MAX_PROBLEMS)
    ]
    if problems:
        raise RequestValidationError(problems)


# ---------------------------------------------------------------------------- 422 bodies


def bounded(text: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    """``text`` made safe to send back: at most ``limit`` characters, lone surrogates written as
    escapes (they cannot be encoded as UTF-8)."""
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def validation_errors(errors: Sequence[Any]) -> list[dict[str, Any]]:
    """Each error as ``{loc, msg, type}``: no ``input``, ``ctx`` or ``url``, the message and every
    part of the location bounded."""
    shown = []
    for error in list(errors)[:MAX_PROBLEMS]:
        loc = [
            bounded(part, MAX_LOC_PART_CHARS) if isinstance(part, str) else part
            for part in error.get("loc", ())
        ]
        shown.append(
            {"loc": loc, "msg": bounded(str(error.get("msg", ""))), "type": str(error.get("type"))}
        )
    return shown


def validation_body(errors: Sequence[Any], under: str | None = None) -> dict[str, Any]:
    """The JSON of a 422: every problem of a request's shape. ``under``: a first location part
    to leave out (``body``, for a caller that sent the body's fields as arguments)."""
    if under is not None:
        errors = [
            {**e, "loc": tuple(e.get("loc", ()))[1:]}
            if tuple(e.get("loc", ()))[:1] == (under,)
            else e
            for e in errors
        ]
    return {"error": "RequestValidationError", "detail": validation_errors(errors)}


ERROR_DETAIL_CHARS = 2000


def error_body(exc: EvidexError) -> dict[str, Any]:
    """The JSON of a refusal or failure the library raised: its kind and its message."""
    return {"error": type(exc).__name__, "detail": bounded(str(exc), ERROR_DETAIL_CHARS)}


async def validation_error_handler(_: Request, exc: Exception) -> JSONResponse:
    """The app's answer to a request of the wrong shape: 422 with where and what."""
    errors = exc.errors() if isinstance(exc, RequestValidationError) else []
    return JSONResponse(status_code=422, content=validation_body(errors))
