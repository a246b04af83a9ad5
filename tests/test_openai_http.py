"""The ``openai:`` judge's HTTP client (aiohttp) against a raw server on loopback, end to end:
connections kept alive and reused, a chunked answer, a server closing a kept-alive connection,
timeouts, status errors, a session per event loop, the proxy the environment names, and no
openai SDK or httpx imported."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from evidex.errors import JudgeUnavailable
from evidex.judges import get_judge
from evidex.judges._openai import OpenAIJudge, _http
from evidex.judging import JudgeRequest, Message, Payload

pytestmark = pytest.mark.network

REQUEST = JudgeRequest(
    job="tier", messages=(Message("user", "grade"),), schema={}, payload=Payload()
)


def completion(text: str) -> bytes:
    return json.dumps(
        {
            "model": "served-model",
            "choices": [{"message": {"content": text}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 7, "completion_tokens": 3},
        }
    ).encode()


Answer = Callable[[int, bytes], Awaitable[tuple[bytes, bool]]]
"""(call number, request body) -> (raw HTTP answer, close the connection after it)."""


class RawServer:
    """Reads one HTTP/1.1 request at a time per connection and writes what ``answer`` says."""

    def __init__(self, answer: Answer) -> None:
        self.answer = answer
        self.connections = 0
        self.calls = 0
        self.headers: list[dict[str, str]] = []
        self.request_lines: list[str] = []
        self.server: asyncio.Server | None = None

    async def start(self) -> str:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        port = self.server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}/v1"

    async def stop(self) -> None:
        assert self.server is not None
        self.server.close()
        await self.server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                self.request_lines.append(lines[0])
                headers = {
                    k.strip().lower(): v.strip()
                    for k, _, v in (line.partition(":") for line in lines[1:] if line)
                }
                self.headers.append(headers)
                body = await reader.readexactly(int(headers["content-length"]))
                self.calls += 1
                raw, close = await self.answer(self.calls, body)
                writer.write(raw)
                await writer.drain()
                if close:
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


def judge_for(url: str, **options: Any) -> OpenAIJudge:
    judge = get_judge(
        "openai:test-model", base_url=url, api_key="sk-raw", structured_output="none", **options
    )
    assert isinstance(judge, OpenAIJudge)
    return judge


async def calls(answer: Answer, n: int, **options: Any) -> tuple[RawServer, list[str]]:
    server = RawServer(answer)
    judge = judge_for(await server.start(), **options)
    try:
        texts = [(await judge.complete(REQUEST)).text for _ in range(n)]
    finally:
        await judge.aclose()
        await server.stop()
    return server, texts


def sized(body: bytes, extra: str = "") -> bytes:
    head = f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n{extra}"
    return f"{head}Content-Length: {len(body)}\r\n\r\n".encode() + body


async def keep_alive(call: int, _: bytes) -> tuple[bytes, bool]:
    return sized(completion(f"answer {call}")), False


def test_calls_reuse_one_kept_alive_connection_and_send_the_key() -> None:
    server, texts = asyncio.run(calls(keep_alive, 3))
    assert texts == ["answer 1", "answer 2", "answer 3"]
    assert server.connections == 1
    assert {h["authorization"] for h in server.headers} == {"Bearer sk-raw"}
    assert server.headers[0]["host"].startswith("127.0.0.1:")


def test_a_chunked_answer_is_read_whole() -> None:
    async def chunked(call: int, _: bytes) -> tuple[bytes, bool]:
        body = completion("chunked answer")
        parts = [body[:10], body[10:25], body[25:]]
        framed = b"".join(f"{len(p):x}\r\n".encode() + p + b"\r\n" for p in parts) + b"0\r\n\r\n"
        head = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        return head + framed, False

    server, texts = asyncio.run(calls(chunked, 2))
    assert texts == ["chunked answer"] * 2 and server.connections == 1


def test_a_kept_alive_connection_the_server_dropped_is_replaced() -> None:
    async def drop_after_answer(call: int, _: bytes) -> tuple[bytes, bool]:
        return sized(completion(f"answer {call}")), True  # answers keep-alive, then closes

    async def run() -> tuple[RawServer, list[str]]:
        server = RawServer(drop_after_answer)
        judge = judge_for(await server.start())
        texts = []
        for _ in range(3):
            texts.append((await judge.complete(REQUEST)).text)
            await asyncio.sleep(0.05)  # the server's close arrives while the connection idles
        await judge.aclose()
        await server.stop()
        return server, texts

    server, texts = asyncio.run(run())
    assert texts == ["answer 1", "answer 2", "answer 3"]
    assert server.connections == 3


def test_no_answer_in_time_is_judge_unavailable_naming_the_timeout() -> None:
    async def never(call: int, _: bytes) -> tuple[bytes, bool]:
        await asyncio.sleep(5)
        return b"", True

    with pytest.raises(JudgeUnavailable, match=r"did not answer within 0\.2s"):
        asyncio.run(calls(never, 1, timeout_s=0.2))


def test_status_errors_keep_retry_after_and_the_server_message() -> None:
    async def busy(call: int, _: bytes) -> tuple[bytes, bool]:
        body = json.dumps({"error": {"message": "slow down please"}}).encode()
        head = f"HTTP/1.1 429 Too Many Requests\r\nRetry-After: 7\r\nContent-Length: {len(body)}"
        return f"{head}\r\n\r\n".encode() + body, False

    with pytest.raises(JudgeUnavailable, match="HTTP 429, retry after 7s: slow down please") as e:
        asyncio.run(calls(busy, 1))
    assert e.value.status == 429 and e.value.retry_after_s == 7.0


def test_each_sync_run_gets_connections_of_its_own_loop() -> None:
    server = RawServer(keep_alive)

    async def serve_forever(ready: asyncio.Future[str], stop: asyncio.Event) -> None:
        ready.set_result(await server.start())
        await stop.wait()
        await server.stop()

    loop = asyncio.new_event_loop()
    ready: asyncio.Future[str] = loop.create_future()
    stop = asyncio.Event()
    thread = threading.Thread(target=loop.run_until_complete, args=(serve_forever(ready, stop),))
    thread.start()
    try:
        url = asyncio.run_coroutine_threadsafe(_result(ready), loop).result(5)
        judge = judge_for(url)
        first = asyncio.run(judge.complete(REQUEST))  # one loop, closed after
        second = asyncio.run(judge.complete(REQUEST))  # another: a fresh connection
        assert (first.text, second.text) == ("answer 1", "answer 2")
        assert server.connections == 2  # the first loop's connection closed with its loop
    finally:
        loop.call_soon_threadsafe(stop.set)
        thread.join(5)
        loop.close()


async def _result(future: asyncio.Future[str]) -> str:
    return await future


@pytest.fixture(params=["read once", "read by aiohttp"])
def proxy_lookup(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Both ways the transport finds the proxy: aiohttp's lookup once per session, or, in an
    aiohttp release without that helper, aiohttp reading the environment per request."""
    if request.param == "read by aiohttp":
        monkeypatch.setattr(_http, "get_env_proxy_for_url", None)


@pytest.mark.usefixtures("proxy_lookup")
def test_the_proxy_named_by_the_environment_is_used(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy", "http_proxy"):
        monkeypatch.delenv(name, raising=False)

    async def run() -> tuple[RawServer, str]:
        proxy = RawServer(keep_alive)  # answers itself: it never forwards
        monkeypatch.setenv("HTTP_PROXY", (await proxy.start()).removesuffix("/v1"))
        judge = judge_for("http://127.0.0.1:9/v1")  # nothing listens there
        try:
            text = (await judge.complete(REQUEST)).text
        finally:
            await judge.aclose()
            await proxy.stop()
        return proxy, text

    proxy, text = asyncio.run(run())
    assert text == "answer 1"
    assert proxy.request_lines == ["POST http://127.0.0.1:9/v1/chat/completions HTTP/1.1"]
    assert proxy.headers[0]["host"] == "127.0.0.1:9"


@pytest.mark.usefixtures("proxy_lookup")
def test_no_proxy_keeps_a_host_off_the_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    async def run() -> tuple[RawServer, RawServer, str]:
        proxy, server = RawServer(keep_alive), RawServer(keep_alive)
        monkeypatch.setenv("HTTP_PROXY", (await proxy.start()).removesuffix("/v1"))
        monkeypatch.setenv("NO_PROXY", "127.0.0.1")
        judge = judge_for(await server.start())
        try:
            text = (await judge.complete(REQUEST)).text
        finally:
            await judge.aclose()
            await proxy.stop()
            await server.stop()
        return proxy, server, text

    proxy, server, text = asyncio.run(run())
    assert text == "answer 1" and server.calls == 1 and proxy.calls == 0


def test_the_judge_imports_neither_the_openai_sdk_nor_httpx() -> None:
    code = (
        "import asyncio, sys\n"
        "from evidex.errors import JudgeUnavailable\n"
        "from evidex.judges import get_judge\n"
        "from evidex.judging import JudgeRequest, Message, Payload\n"
        "judge = get_judge('openai:m', base_url='http://127.0.0.1:9/v1')\n"
        "request = JudgeRequest(job='tier', messages=(Message('user', 'x'),), schema={},"
        " payload=Payload())\n"
        "try:\n"
        "    asyncio.run(judge.complete(request))\n"
        "except JudgeUnavailable:\n"
        "    pass\n"
        "print(sorted(m for m in ('openai', 'httpx', 'httpx2') if m in sys.modules))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert done.stdout.strip() == "[]"
