"""The MCP tools, driven by the official SDK's own client: over stdio (the real ``evidex mcp``
process), over streamable HTTP (the real ``evidex serve --mcp`` process on a loopback port),
and in memory for what needs no transport (the tool list against the registry, the refusals
against the HTTP API's). The judge of the processes is the real ``openai:`` judge, configured
as a user configures it, talking to the fake OpenAI server on loopback."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import types
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("mcp")
pytest.importorskip("fastapi")
import httpx2
from fastapi.testclient import TestClient
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS

from evidex.jobs import definition, definitions, job_names
from evidex.jobs import registry as job_registry
from evidex.preflight import InputLimits
from evidex.service import create_app
from evidex.service.jobs import request_model
from evidex.service.mcp import REVIEW_TOOLS, STDIO_CALLER, mcp_server
from evidex.store import SqlStore, open_store
from tests import audit_fixtures as af
from tests.fake_openai_server import FakeOpenAIServer, Reply, serve, tier_reply_for
from tests.live_service import serve_process
from tests.scripted import ScriptedJudge, tier_reply

PASSAGES = [
    {"passage_id": "a", "text": "Most adults need 600 IU of vitamin D a day."},
    {"passage_id": "b", "text": "The D-Day landings took place in June 1944."},
]
TIER = {"query": "vitamin D dose", "passages": PASSAGES}
AUDIT = {
    "answer": f"{af.FOUNDED} {af.CEO}",
    "passages": [p.model_dump(mode="json") for p in af.PASSAGES],
    "risk": "high",
}
AUDIT_REPLY = json.dumps(af.reply(af.supported(), af.inferred()))
"""An inferred claim at high risk: the answer goes to review (one review-queue item)."""
BIN = Path(sys.executable).parent


def _run(coro: Any) -> Any:
    return asyncio.run(coro)


def _names(listed: Any) -> list[str]:
    return [tool.name for tool in listed.tools]


def _body(result: Any) -> Any:
    """A refused call's text: the JSON the HTTP API answers."""
    assert result.is_error, result
    [content] = result.content
    return json.loads(content.text)


@pytest.fixture
def judged(tmp_path: Path) -> Iterator[tuple[FakeOpenAIServer, dict[str, str]]]:
    """The fake OpenAI server, and the environment of a process whose configured judge of
    tier and audit is ``openai:`` on it (a config file, as a user writes one)."""
    config = tmp_path / "config.toml"
    config.write_text('[judges]\ntier = "openai:fake-model"\naudit = "openai:fake-model"\n')
    with serve() as server:
        env = {
            **os.environ,
            "EVIDEX_CONFIG": str(config),
            "EVIDEX_OPENAI_BASE_URL": server.base_url,
        }
        yield server, env


async def _graded(server: FakeOpenAIServer, client: Client) -> tuple[Any, Any]:
    """Call tier, then audit (one judge reply each), as an agent does; both results."""
    server.add(Reply(tier_reply_for), Reply(AUDIT_REPLY))
    return await client.call_tool("tier", TIER), await client.call_tool("audit", AUDIT)


def _check_tier_and_audit(tier: Any, audit: Any) -> None:
    assert not tier.is_error, tier
    graded = tier.structured_content["classifications"]
    assert sorted(c["passage_id"] for c in graded) == ["a", "b"]
    assert {c["source"] for c in graded} == {"judge"}
    assert tier.structured_content["judge_id"] == "openai:fake-model"
    summary, text = tier.content
    assert summary.text.startswith("tier: query=vitamin D dose; classifications: 2")
    assert json.loads(text.text) == tier.structured_content
    assert not audit.is_error, audit
    assert audit.structured_content["decision"]["decision"] == "review"
    assert [c["classification"] for c in audit.structured_content["claims"]] == [
        "fully_supported",
        "inferred",
    ]


# ------------------------------------------------------------------------------ stdio


def test_stdio_lists_the_registry_calls_tier_and_audit_and_reads_the_queue(
    tmp_path: Path, judged: tuple[FakeOpenAIServer, dict[str, str]]
) -> None:
    server, env = judged
    db = f"sqlite:///{tmp_path / 'stdio.db'}"
    params = StdioServerParameters(command=str(BIN / "evidex"), args=["mcp", "--db", db], env=env)

    async def session() -> None:
        async with Client(params) as client:
            listed = await client.list_tools()
            # the caller is this machine's user: every job, and the review queue
            assert _names(listed) == [*job_names(), *REVIEW_TOOLS]
            _check_schemas(type(listed)(tools=listed.tools[: len(job_names())]))
            tier, audit = await _graded(server, client)
            _check_tier_and_audit(tier, audit)
            queue = await client.call_tool("review_list", {})
            [item] = queue.structured_content["items"]
            assert item["job"] == "audit"
            assert audit.structured_content["review_item_ids"] == [item["id"]]
            shown = await client.call_tool("review_show", {"item_id": item["id"]})
            assert shown.structured_content["id"] == item["id"]
            assert shown.structured_content["payload"] == item["payload"]
            # bad input is a tool error with the HTTP API's message, and the server goes on
            empty = await client.call_tool("tier", {**TIER, "query": " "})
            assert _body(empty) == {"error": "InputError", "detail": "the query is empty"}
            missing = await client.call_tool("review_show", {"item_id": 999})
            assert _body(missing) == {
                "error": "InputError",
                "detail": "no review item with id 999",
            }
            assert _names(await client.list_tools()) == _names(listed)

    _run(session())
    assert len(server.chat_requests) == 2  # one judge call per job, nothing else


# ------------------------------------------------------------------------------ HTTP


@asynccontextmanager
async def _http(url: str, key: str | None, mode: str = "auto") -> AsyncIterator[Client]:
    """The SDK's client over streamable HTTP, sending ``key`` as the service's keys are sent."""
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    timeout = httpx2.Timeout(60, read=300)
    async with httpx2.AsyncClient(headers=headers, timeout=timeout) as http:
        transport = streamable_http_client(url, http_client=http)
        async with Client(transport, mode=mode) as client:
            yield client


def _errors_in(exc: BaseException) -> list[BaseException]:
    found = [exc]
    for inner in getattr(exc, "exceptions", ()):
        found += _errors_in(inner)
    return found


@pytest.mark.network
def test_http_uses_the_service_keys_and_roles(
    tmp_path: Path, judged: tuple[FakeOpenAIServer, dict[str, str]]
) -> None:
    server, env = judged
    db = f"sqlite:///{tmp_path / 'http.db'}"
    store = open_store(db)
    client_key = store.create_key("client", "agent")[1]
    reviewer_key = store.create_key("reviewer", "ana")[1]
    store.close()
    with serve_process(db, "--mcp", env=env) as base:
        url = f"{base}/mcp"
        initialize = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
        bare = httpx.post(url, json=initialize, timeout=30)
        assert bare.status_code == 401
        assert bare.headers["www-authenticate"] == "Bearer"
        assert bare.json() == {"detail": "send an API key as 'Authorization: Bearer KEY'"}
        wrong = httpx.post(url, json=initialize, headers={"Authorization": "Bearer nope"})
        assert wrong.status_code == 401

        async def no_key() -> None:
            async with _http(url, None) as client:
                await client.list_tools()

        with pytest.raises(BaseException) as refused:
            _run(no_key())
        assert any(isinstance(e, MCPError) for e in _errors_in(refused.value))

        async def as_client() -> None:
            async with _http(url, client_key) as client:
                listed = await client.list_tools()
                assert _names(listed) == list(job_names())
                _check_schemas(listed)
                tier, audit = await _graded(server, client)
                _check_tier_and_audit(tier, audit)
                queue = await client.call_tool("review_list", {})
                assert _body(queue) == {"detail": "this needs a reviewer key; yours is client"}

        async def as_reviewer() -> None:
            async with _http(url, reviewer_key) as client:
                assert _names(await client.list_tools()) == list(REVIEW_TOOLS)
                queue = await client.call_tool("review_list", {"job": "audit"})
                [item] = queue.structured_content["items"]
                assert item["reason"] and item["status"] == "pending"
                shown = await client.call_tool("review_show", {"item_id": item["id"]})
                assert shown.structured_content["payload"] == item["payload"]
                tier = await client.call_tool("tier", TIER)
                assert _body(tier) == {"detail": "this needs a client key; yours is reviewer"}

        async def handshake_era() -> None:
            # a client of the 2025 protocol (initialize first), as most deployed clients are
            async with _http(url, client_key, mode="legacy") as client:
                assert _names(await client.list_tools()) == list(job_names())
                again = await client.call_tool("tier", TIER)  # the cached grades: no judge call
                assert not again.is_error and again.structured_content["judge_calls"] == 0

        _run(as_client())
        _run(as_reviewer())
        _run(handshake_era())
    assert len(server.chat_requests) == 2


def _check_schemas(listed: Any) -> None:
    for tool in listed.tools:
        job = definition(tool.name)
        assert tool.input_schema == request_model(job).model_json_schema()
        assert tool.output_schema == job.response_model.model_json_schema(mode="serialization")
        assert tool.description == job.summary


# ------------------------------------------------------------------------------ in memory


def _server(store: SqlStore, judge: ScriptedJudge, **kw: Any) -> Any:
    app = create_app(store, judges={"scripted": judge}, auth="off", **kw)
    return mcp_server(app.state.jobs, lambda ctx: STDIO_CALLER), app


def test_the_tools_are_the_registry_and_a_new_job_is_a_tool(
    store: SqlStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A job registered later is a tool, with no edit to the MCP module."""
    echo = replace(definition("sufficiency"), name="echo", summary="Echo, a job added later.")
    module = types.ModuleType("tests._echo_job")
    module.DEFINITION = echo  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, module.__name__, module)
    monkeypatch.setitem(job_registry._MODULES, "echo", module.__name__)
    server, _ = _server(store, ScriptedJudge())

    async def listed() -> Any:
        async with Client(server) as client:
            return await client.list_tools()

    tools = _run(listed())
    assert _names(tools) == [*(job.name for job in definitions()), *REVIEW_TOOLS]
    assert "echo" in _names(tools)
    _check_schemas(type(tools)(tools=[t for t in tools.tools if t.name not in REVIEW_TOOLS]))
    review = {t.name: t for t in tools.tools if t.name in REVIEW_TOOLS}
    assert review["review_show"].input_schema["required"] == ["item_id"]
    assert review["review_list"].annotations.read_only_hint is True


MAX_CHARS = max(len(p["text"]) for p in PASSAGES)
LONG = "x" * (MAX_CHARS + 1)
BAD_INPUTS = {
    "a missing field": {"passages": PASSAGES, "judge": "scripted"},
    "a wrong type": {**TIER, "judge": "scripted", "batch_size": "many"},
    "an empty query": {**TIER, "judge": "scripted", "query": " "},
    "a judge the server does not run": {**TIER, "judge": "openai:gpt-4o"},
    "a text over the limit": {"query": LONG, "passages": PASSAGES, "judge": "scripted"},
    "an unknown option value": {**TIER, "judge": "scripted", "risk": "extreme"},
}


@pytest.mark.parametrize("case", list(BAD_INPUTS))
def test_a_bad_call_is_refused_with_the_http_api_message(store: SqlStore, case: str) -> None:
    arguments = BAD_INPUTS[case]
    limits = InputLimits(max_text_chars=MAX_CHARS)  # the passages fit; LONG does not
    judge = ScriptedJudge([tier_reply])
    server, app = _server(store, judge, limits=limits, allowed_hosts=["testserver"])
    http = TestClient(app).post("/tier", json=arguments)
    assert http.status_code == 422, http.text

    async def call() -> Any:
        async with Client(server) as client:
            return await client.call_tool("tier", arguments)

    body = _body(_run(call()))
    expected = http.json()
    if isinstance(expected["detail"], list):  # a 422 of the request's shape: no "body" part
        for problem in expected["detail"]:
            assert problem["loc"][0] == "body"
            problem["loc"] = problem["loc"][1:]
    assert body == expected
    assert judge.requests == []  # refused before any judge call


def test_an_unknown_tool_is_a_protocol_error(store: SqlStore) -> None:
    server, _ = _server(store, ScriptedJudge())

    async def call() -> None:
        async with Client(server) as client:
            await client.call_tool("grade_everything", {})

    with pytest.raises(BaseException) as raised:
        _run(call())
    [error] = [e for e in _errors_in(raised.value) if isinstance(e, MCPError)]
    assert (error.code, error.message) == (INVALID_PARAMS, "unknown tool 'grade_everything'")


# ------------------------------------------------------------------------------ the CLI


def test_the_cli_loads_the_sdk_only_when_the_command_runs() -> None:
    probe = (
        "import sys; from evidex.cli import main; main(['--help']); main(['serve', '--help']); "
        "main(['mcp', '--help']); print('LOADED', 'mcp' in sys.modules, file=sys.stderr)"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert "LOADED False" in done.stderr, done.stderr
    assert "--mcp" in done.stdout and "MCP tools over stdin and stdout" in done.stdout


def test_without_the_extra_the_commands_name_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import importlib.util

    from evidex.cli import main

    found = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "mcp" else found(name, *a)
    )
    assert main(["mcp"]) == 2
    assert "pip install 'evidex[mcp]'" in capsys.readouterr().err
    assert main(["serve", "--mcp"]) == 2
    assert "evidex serve --mcp needs the 'mcp' extra" in capsys.readouterr().err
