"""How a request reaches one endpoint: HTTP/1.1 over kept-alive connections, per event loop.

Why not the openai SDK or httpx: measured with ``bench/api_path.py`` at concurrency 64, the
SDK's request building and its HTTP stack cost 3-4 ms of CPU per call, httpx's connection pool
alone 1-2 ms (it scans every connection, probing each socket, whenever a request starts or
ends), more than everything else the client does. A judge call is one POST of a JSON body and
one JSON reply, so this module speaks just that much HTTP/1.1 on asyncio's transports: write
the request, read the status line, the headers and a body framed by ``Content-Length``,
``chunked`` or the end of the connection. :mod:`._wire` builds the body and reads the reply.

Connections are kept alive and reused last-in first-out; their number is not bounded here,
since the endpoint's in-flight limit (:mod:`._pool`) bounds the calls, and at most ``keepalive``
idle ones are kept. A connection belongs to the loop that opened it, and the sync API runs each
job in a loop of its own (``asyncio.run``), so each loop has its own idle connections, closed
by :meth:`Transport.aclose` or when the loop ends (a guard task waits on the loop, and
``asyncio.run`` cancels it on the way out). A kept-alive connection the server closed while it
was idle is noticed before reuse; if the server closes one just as a request goes out and
nothing came back, the request is sent once more on a new connection.

Errors, all subclasses of :class:`HTTPFault`: :class:`StatusError` (the server answered, not
2xx), :class:`TimedOut` (no complete answer within ``timeout_s``, connecting included),
:class:`Unreachable` (no connection, or it broke). ``max_retries`` retries a connection that
could not be opened. Proxies named by the environment (``HTTPS_PROXY``...) are not used; a
server behind one needs its own ``base_url``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import ssl
import zlib
from collections.abc import Mapping
from urllib.parse import urlsplit

__all__ = ["HTTPFault", "StatusError", "TimedOut", "Transport", "Unreachable"]

_MAX_HEAD = 64 * 1024
_MAX_BODY = 64 * 1024 * 1024


class HTTPFault(Exception):
    """A request that brought no 2xx answer."""


class StatusError(HTTPFault):
    """The endpoint answered, but not 2xx: the status, the server's text and Retry-After."""

    def __init__(self, status: int, text: str, retry_after: str | None) -> None:
        super().__init__(f"HTTP {status}: {text[:500]}")
        self.status = status
        self.text = text
        self.retry_after = retry_after


class TimedOut(HTTPFault):
    """No complete answer in time."""


class Unreachable(HTTPFault):
    """No connection could be opened, or it broke before a complete answer."""


class _Response:
    __slots__ = ("body", "close", "headers", "status")

    def __init__(self, status: int, headers: dict[str, str], body: bytes, close: bool) -> None:
        self.status, self.headers, self.body, self.close = status, headers, body, close


class _Connection(asyncio.Protocol):
    """One TCP (or TLS) connection, one request at a time."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.used = False
        self._buffer = bytearray()
        self._waiter: asyncio.Future[_Response] | None = None
        self._head: tuple[int, dict[str, str], int, bool] | None = None

    # asyncio's callbacks
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        if self._waiter is None or self._waiter.done():
            self.close()  # bytes nobody asked for: the connection is out of step
            return
        self._buffer += data
        try:
            response = self._parse(eof=False)
        except ValueError as exc:
            self._fail(Unreachable(f"malformed HTTP answer: {exc}"))
            return
        if response is not None:
            self._waiter.set_result(response)

    def eof_received(self) -> bool | None:
        self.closed = True
        if self._waiter is not None and not self._waiter.done():
            try:
                response = self._parse(eof=True)
            except ValueError as exc:
                self._fail(Unreachable(f"malformed HTTP answer: {exc}"))
                return None
            if response is not None:
                self._waiter.set_result(response)
            else:
                self._fail(Unreachable("the server closed the connection without an answer"))
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        why = f": {exc}" if exc else ""
        self._fail(Unreachable(f"the connection was closed{why}"))

    # ours
    async def exchange(self, request: bytes) -> _Response:
        assert self.transport is not None
        self.used = True
        self._buffer.clear()
        self._head = None
        self._waiter = asyncio.get_running_loop().create_future()
        self.transport.write(request)
        return await self._waiter

    @property
    def answered_nothing(self) -> bool:
        return not self._buffer

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()

    def time_out(self, timeout_s: float) -> None:
        self._fail(TimedOut(f"no complete answer within {timeout_s:g}s"))

    def _fail(self, exc: HTTPFault) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_exception(exc)

    def _parse(self, *, eof: bool) -> _Response | None:
        """The response once the buffer holds all of it, else None; ``ValueError`` when what
        came is not HTTP/1.x."""
        buf = self._buffer
        if self._head is None:
            end = buf.find(b"\r\n\r\n")
            if end < 0:
                if len(buf) > _MAX_HEAD:
                    raise ValueError("headers too long")
                return None
            lines = bytes(buf[:end]).decode("latin-1").split("\r\n")
            version, _, rest = lines[0].partition(" ")
            if not version.startswith("HTTP/1."):
                raise ValueError(f"status line {lines[0][:80]!r}")
            status = int(rest[:3])
            headers: dict[str, str] = {}
            for line in lines[1:]:
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
            if 100 <= status < 200:  # an interim answer: the real one follows
                del buf[: end + 4]
                return self._parse(eof=eof)
            connection = headers.get("connection", "").lower()
            close = "close" in connection or (
                version == "HTTP/1.0" and "keep-alive" not in connection
            )
            self._head = (status, headers, end + 4, close)
        status, headers, start, close = self._head
        if "chunked" in headers.get("transfer-encoding", "").lower():
            body = _dechunk(buf, start)
            if body is None:
                return None
        elif "content-length" in headers:
            length = int(headers["content-length"])
            if length > _MAX_BODY:
                raise ValueError("body too large")
            if len(buf) - start < length:
                return None
            body = bytes(buf[start : start + length])
        elif status in (204, 304):
            body = b""
        else:  # framed by the end of the connection
            if not eof:
                if len(buf) - start > _MAX_BODY:
                    raise ValueError("body too large")
                return None
            body, close = bytes(buf[start:]), True
        return _Response(status, headers, body, close)


def _dechunk(buf: bytearray, pos: int) -> bytes | None:
    parts: list[bytes] = []
    while True:
        line_end = buf.find(b"\r\n", pos)
        if line_end < 0:
            return None
        size = int(bytes(buf[pos:line_end]).split(b";")[0].strip() or b"0", 16)
        pos = line_end + 2
        if size == 0:
            trailer_end = buf.find(b"\r\n\r\n", pos - 2)
            return b"".join(parts) if trailer_end >= 0 else None
        if len(buf) < pos + size + 2:
            return None
        parts.append(bytes(buf[pos : pos + size]))
        pos += size + 2


class Transport:
    """One endpoint's connections. Cheap to build: nothing is opened before the first call."""

    def __init__(
        self,
        url: str,
        *,
        headers: Mapping[str, str],
        timeout_s: float,
        max_retries: int,
        keepalive: int,
    ) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {url!r}")
        self._tls = parts.scheme == "https"
        self._host = parts.hostname
        self._port = parts.port or (443 if self._tls else 80)
        self._path = parts.path.rstrip("/")
        host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname  # IPv6
        host_header = host if parts.port is None else f"{host}:{parts.port}"
        lines = [f"Host: {host_header}", "Connection: keep-alive"]
        lines += [f"{name}: {value}" for name, value in headers.items()]
        self._header_block = ("\r\n".join(lines) + "\r\n").encode("latin-1")
        self._timeout_s = timeout_s
        self._max_retries = max_retries
        self._keepalive = keepalive
        self._ssl: ssl.SSLContext | None = None
        self._idle: dict[asyncio.AbstractEventLoop, list[_Connection]] = {}
        self._guards: dict[asyncio.AbstractEventLoop, asyncio.Task[None]] = {}

    async def post(self, path: str, body: bytes) -> bytes:
        """POST ``body`` (JSON) to the endpoint's ``path``: the body of a 2xx answer, else an
        :class:`HTTPFault`."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._timeout_s
        head = f"POST {self._path}{path} HTTP/1.1\r\nContent-Length: {len(body)}\r\n"
        request = head.encode("latin-1") + self._header_block + b"\r\n" + body
        response = await self._send(loop, request, deadline)
        body = response.body
        encoding = response.headers.get("content-encoding", "identity").lower()
        if encoding in ("gzip", "deflate"):  # not asked for, but a proxy may send it
            try:
                body = zlib.decompress(body, 47)  # gzip or zlib, told apart by the header
            except zlib.error as exc:
                raise Unreachable(f"a {encoding} body that does not decompress: {exc}") from exc
        if response.status >= 300:
            text = body.decode("utf-8", "replace")
            raise StatusError(response.status, text, response.headers.get("retry-after"))
        return body

    async def _send(
        self, loop: asyncio.AbstractEventLoop, request: bytes, deadline: float
    ) -> _Response:
        for _ in range(2):  # a second time only when a reused connection answered nothing
            conn = await self._connection(loop, deadline)
            reused = conn.used
            timer = loop.call_at(deadline, conn.time_out, self._timeout_s)
            try:
                response = await conn.exchange(request)
            except Unreachable:
                conn.close()
                if reused and conn.answered_nothing:
                    continue
                raise
            except BaseException:
                conn.close()  # timed out or cancelled mid-answer: out of step
                raise
            finally:
                timer.cancel()
            if response.close or conn.closed:
                conn.close()
            else:
                idle = self._idle.setdefault(loop, [])
                if len(idle) < self._keepalive:
                    idle.append(conn)
                else:
                    conn.close()
            return response
        raise AssertionError("unreachable")  # pragma: no cover

    async def _connection(self, loop: asyncio.AbstractEventLoop, deadline: float) -> _Connection:
        idle = self._idle.get(loop)
        while idle:
            conn = idle.pop()
            if not conn.closed:
                return conn
        if loop not in self._guards:
            self._forget_closed_loops()
            self._guards[loop] = loop.create_task(self._close_at_loop_end(loop))
        for attempt in range(self._max_retries + 1):
            opening = loop.create_connection(
                _Connection, self._host, self._port, ssl=self._ssl_context() if self._tls else None
            )
            try:
                _, conn = await asyncio.wait_for(opening, timeout=max(0.0, deadline - loop.time()))
                return conn
            except asyncio.TimeoutError:
                raise TimedOut(f"no connection within {self._timeout_s:g}s") from None
            except (OSError, ssl.SSLError) as exc:
                if attempt == self._max_retries:
                    raise Unreachable(str(exc) or type(exc).__name__) from exc
        raise AssertionError("unreachable")  # pragma: no cover

    def _ssl_context(self) -> ssl.SSLContext:
        """The system's trust store when ``SSL_CERT_FILE``/``SSL_CERT_DIR`` name one, else
        certifi's bundle where it is installed (as the SDK used), else the system's."""
        if self._ssl is None:
            cafile = None
            if not (os.environ.get("SSL_CERT_FILE") or os.environ.get("SSL_CERT_DIR")):
                try:
                    import certifi

                    cafile = certifi.where()
                except ImportError:
                    pass
            self._ssl = ssl.create_default_context(cafile=cafile)
        return self._ssl

    def _forget_closed_loops(self) -> None:
        for loop in [loop for loop in self._guards if loop.is_closed()]:
            del self._guards[loop]
            self._idle.pop(loop, None)

    async def _close_at_loop_end(self, loop: asyncio.AbstractEventLoop) -> None:
        try:
            await asyncio.Event().wait()  # until cancelled: by aclose, or by asyncio.run's end
        finally:
            for conn in self._idle.pop(loop, []):
                conn.close()

    async def aclose(self) -> None:
        """Close the calling loop's idle connections now (others close when their loops end)."""
        loop = asyncio.get_running_loop()
        guard = self._guards.pop(loop, None)
        if guard is not None:
            guard.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await guard
        for conn in self._idle.pop(loop, []):
            conn.close()
