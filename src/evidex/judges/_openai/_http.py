"""How a request reaches one endpoint: aiohttp, one client session per event loop.

Why aiohttp: a judge call is one POST of a JSON body and one JSON reply, and at high
concurrency the client's own CPU per call is what bounds throughput (``bench/api_path.py``).
Measured at concurrency 64 against a loopback server, the openai SDK's request building and
httpx's pool cost 3-21 ms of CPU per call (httpx scans every pooled connection whenever a
request starts or ends); aiohttp, with its C HTTP parser and a keep-alive pool that does no such
scan, costs 0.47-0.95 ms per bare request (2,000 POSTs of a 3 kB body, load average 4.5-10). A
hand-written HTTP/1.1 client was a little cheaper (0.57-0.69 ms at load 10; in the tier job
over 10,000 passages, ``bench/api_path.py --concurrency 64``, harness and client took 1.85-1.91
ms per call against aiohttp's 2.16-2.28, back to back at load 5-7.6), but it was our code to
keep for framing, TLS and proxies, and it dropped the proxies the SDK honoured; aiohttp is the
well-kept library made for the job.
:mod:`._wire` builds the body and reads the reply.

One :class:`aiohttp.ClientSession` per event loop: a session belongs to the loop it was opened
in, and the sync API runs each job in a loop of its own (``asyncio.run``). It is closed by
:meth:`Transport.aclose` or when its loop ends (a guard task waits on the loop, and
``asyncio.run`` cancels it on the way out). Its pool is not bounded here (``limit=0``): the
endpoint's in-flight limit (:mod:`._pool`) bounds the calls, so the idle connections never
outnumber it. The session is lean: no cookie jar, no compression asked for (a compressed body,
which a proxy may send, is still decompressed), no redirects followed.

Proxies come from the environment (``HTTPS_PROXY``, ``HTTP_PROXY``, ``ALL_PROXY``, ``NO_PROXY``,
by aiohttp's own rules), read once when a loop's session opens. aiohttp's ``trust_env=True``
reads them again on every request, in a thread, together with ``~/.netrc``, which measured
0.4-0.7 ms more CPU per request at concurrency 64 (0.90-1.25 ms against 0.47-0.53 ms, load
average 4.5); our requests carry their own ``Authorization``, so netrc has nothing to add.
TLS trusts the system's store when ``SSL_CERT_FILE``/``SSL_CERT_DIR`` name one, else certifi's
bundle where it is installed (as the SDK did), else the system's.

A request may ask for a streamed reply (``"stream": true``): a server that streams answers
``text/event-stream`` and its events are read as they come (:mod:`._stream`); one that does not
answers one JSON body, read whole. Either way the call is watched by the deadlines it was sent
with (:mod:`._pace`): the first event (or the whole body) and each gap between events, not one
total time. A call given up (late, or cancelled by its caller) closes its connection, so a
server that checks for it (llama-cpp-python's between two streamed tokens, vLLM's, OpenAI's)
stops writing a reply nobody reads, and the next request does not queue behind it.

Errors, all subclasses of :class:`HTTPFault`, mapped from aiohttp's in :meth:`Transport.send`
alone: :class:`StatusError` (the server answered, not 2xx), :class:`TimedOut` (a deadline
passed, connecting included), :class:`Unreachable` (no connection, or it broke; its subclass
:class:`Interrupted`: a stream that ended before its reply did). ``max_retries`` retries a
connection that could not be opened, under the same deadlines. A kept-alive connection the
server closed while it was idle is noticed before reuse; a request the server dropped is not
sent again here (a POST is not idempotent to aiohttp either): the pool sends it to another
endpoint, or the harness retries it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

import aiohttp
from yarl import URL

try:  # aiohttp's own reading of the proxy variables; not documented API, so it may move
    from aiohttp.helpers import get_env_proxy_for_url
except ImportError:  # pragma: no cover - depends on the aiohttp release
    get_env_proxy_for_url = None  # type: ignore[assignment]

from evidex.judges._openai._stream import Watch, read_events

__all__ = [
    "Answer",
    "HTTPFault",
    "Interrupted",
    "StatusError",
    "TimedOut",
    "Transport",
    "Unreachable",
]

# aiohttp adds these unless told not to: compression is not asked for (small JSON bodies on a
# fast link), and the judge's own headers name the rest
_SKIPPED = ("Accept-Encoding",)


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
    """A deadline passed: no reply began in time, it stalled, or it did not end in time."""


class Unreachable(HTTPFault):
    """No connection could be opened, or it broke before a complete answer."""


class Interrupted(Unreachable):
    """A streamed reply that ended (``data: [DONE]``) before the model finished it: no
    ``finish_reason``. llama-cpp-python's server does this to a stream when another request
    arrives (its ``interrupt_requests``, on by default)."""


@dataclass(frozen=True)
class Answer:
    """A 2xx answer: a JSON body read whole, or the ``data:`` events of a stream."""

    body: bytes = b""
    events: tuple[bytes, ...] | None = None
    """The events of a streamed reply (None: the server answered one JSON body)."""
    done: bool = True
    """The stream ended with ``data: [DONE]`` (else its connection closed first)."""


_UNTIMED = aiohttp.ClientTimeout()
"""aiohttp's own timeouts are off: the call's :class:`Watch` keeps its deadlines."""


class _Session:
    """A loop's session and the proxy the environment named when it opened."""

    __slots__ = ("client", "proxy", "proxy_auth")

    def __init__(
        self, client: aiohttp.ClientSession, proxy: URL | None, auth: aiohttp.BasicAuth | None
    ) -> None:
        self.client, self.proxy, self.proxy_auth = client, proxy, auth


class Transport:
    """One endpoint's sessions. Cheap to build: nothing is opened before the first call."""

    def __init__(self, url: str, *, headers: Mapping[str, str], max_retries: int) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {url!r}")
        self._base = URL(url.rstrip("/"))
        self._tls = parts.scheme == "https"
        self._headers = dict(headers)
        self._max_retries = max_retries
        self._urls: dict[str, URL] = {}
        self._ssl: ssl.SSLContext | None = None
        self._sessions: dict[asyncio.AbstractEventLoop, _Session] = {}
        self._guards: dict[asyncio.AbstractEventLoop, asyncio.Task[None]] = {}

    async def send(self, path: str, body: bytes, watch: Watch) -> Answer:
        """POST ``body`` (JSON) to the endpoint's ``path`` under ``watch``'s deadlines: the
        2xx answer, else an :class:`HTTPFault`."""
        loop = asyncio.get_running_loop()
        session = self._sessions.get(loop) or self._open(loop)
        url = self._urls.get(path)
        if url is None:
            url = self._urls[path] = URL(str(self._base) + path)
        failed_connects = 0
        with watch:
            while True:
                try:
                    return await self._once(session, url, body, watch)
                except aiohttp.ClientConnectorError as exc:
                    if failed_connects == self._max_retries:
                        raise Unreachable(str(exc) or type(exc).__name__) from exc
                    failed_connects += 1
                except aiohttp.ClientError as exc:
                    raise Unreachable(str(exc) or type(exc).__name__) from exc
        raise TimedOut(watch.expired or "a deadline passed")  # the watch cancelled the call

    async def _once(self, session: _Session, url: URL, body: bytes, watch: Watch) -> Answer:
        response = await session.client.post(
            url,
            data=body,
            timeout=_UNTIMED,
            allow_redirects=False,
            proxy=session.proxy,
            proxy_auth=session.proxy_auth,
        )
        read = False
        try:
            if response.status >= 300:
                content = await response.read()
                read = True
                text = content.decode("utf-8", "replace")
                raise StatusError(response.status, text, response.headers.get("Retry-After"))
            if response.content_type == "text/event-stream":
                events, done = await read_events(response.content, watch)
                read = done
                return Answer(events=tuple(events), done=done)
            content = await response.read()
            read = True
            watch.event()
            return Answer(body=content)
        finally:
            if read:
                response.release()
            else:  # given up, or the stream broke: the server sees its client go
                response.close()

    def _open(self, loop: asyncio.AbstractEventLoop) -> _Session:
        """The calling loop's session, opened now, with a guard that closes it when the loop
        ends."""
        self._forget_closed_loops()
        connector = aiohttp.TCPConnector(limit=0, ssl=self._ssl_context() if self._tls else True)
        client = aiohttp.ClientSession(
            connector=connector,
            headers=self._headers,
            timeout=_UNTIMED,
            cookie_jar=aiohttp.DummyCookieJar(),
            skip_auto_headers=_SKIPPED,
            # without the lookup below, aiohttp reads the environment on every request
            trust_env=get_env_proxy_for_url is None,
        )
        proxy, auth = None, None
        if get_env_proxy_for_url is not None:
            # LookupError: none named for this scheme, or NO_PROXY covers the host
            with contextlib.suppress(LookupError):
                proxy, auth = get_env_proxy_for_url(self._base)
        session = self._sessions[loop] = _Session(client, proxy, auth)
        self._guards[loop] = loop.create_task(self._close_at_loop_end(loop))
        return session

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
            self._sessions.pop(loop, None)

    async def _close_at_loop_end(self, loop: asyncio.AbstractEventLoop) -> None:
        try:
            await asyncio.Event().wait()  # until cancelled: by aclose, or by asyncio.run's end
        finally:
            session = self._sessions.pop(loop, None)
            if session is not None:
                await session.client.close()

    async def aclose(self) -> None:
        """Close the calling loop's session now (the others close when their loops end)."""
        loop = asyncio.get_running_loop()
        guard = self._guards.pop(loop, None)
        if guard is not None:
            guard.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await guard
        session = self._sessions.pop(loop, None)
        if session is not None:
            await session.client.close()
