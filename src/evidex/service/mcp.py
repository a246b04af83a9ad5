"""The jobs and the review queue as MCP tools, for agents: over stdio (``evidex mcp``) or over
streamable HTTP inside the service (``evidex serve --mcp``, at ``/mcp``).

The tools are read from the job registry, as the HTTP endpoints are: one tool per registered
job, named after it, whose input schema is the job's request model (its Input and Options
fields, flat, and the judge spec: what ``POST /JOB`` takes) and whose output schema is what
``POST /JOB`` answers. A job runs through the service's :class:`~evidex.service.jobs.JobCalls`,
so a tool call has the endpoint's limits, judges and prompts. Two more tools read the review
queue: ``review_list`` (``GET /review``) and ``review_show`` (``GET /review/{id}``).

Who may call what is the service's: over HTTP the caller's key is checked by the app's own
:class:`~evidex.service.auth.Gate` before a message reaches the MCP server (no key: 401), a
client key lists and calls the job tools and a reviewer key the review tools; a tool the key
may not use is refused with the 403's message. Over stdio the caller is this machine's user,
who holds the store already (as with the CLI), so every tool is there.

A result is the endpoint's JSON as structured content, with a one-line summary and the JSON as
text for clients that read text only. A refused call is a tool error whose text is the JSON
body the HTTP API answers for the same input (bad arguments: where and what, as a 422 says).

It is built on the low-level server of the official ``mcp`` SDK, which takes the registry's
JSON schemas as they are (its ``MCPServer`` derives a schema from a function's signature).
The HTTP transport is stateless and answers JSON: every message is one request that carries
its key, so any replica can answer it, as any replica answers the HTTP API.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

try:
    import mcp_types as types
    from mcp.server.lowlevel import Server
    from mcp.shared.exceptions import MCPError
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    from evidex.errors import MissingExtraError

    raise MissingExtraError("the MCP server", "mcp") from exc

from fastapi import Depends, FastAPI
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.types import ASGIApp, Receive, Scope, Send

from evidex._version import __version__
from evidex.errors import ConfigError, EvidexError
from evidex.harness.job import JobResult
from evidex.jobs import JobDefinition, definitions
from evidex.service.auth import Gate, Principal
from evidex.service.guards import bounded, error_body, validation_body
from evidex.service.jobs import JobCalls, request_model
from evidex.service.schemas import ReviewItem
from evidex.store import SqlStore

__all__ = [
    "REVIEW_TOOLS",
    "STDIO_CALLER",
    "ReviewList",
    "ReviewShow",
    "mcp_server",
    "mount_mcp",
    "serve_stdio",
]

JOB_ROLE = "client"
REVIEW_ROLE = "reviewer"

STDIO_CALLER = Principal(key_id="", name="this machine's user (stdio)", role="admin")
"""The caller over stdio: the user who started ``evidex mcp`` and holds its store."""

INSTRUCTIONS = (
    "evidex grades retrieved evidence for RAG. Each job tool takes the fields its HTTP "
    "endpoint takes (the input, the job's options, and a judge the server runs; none: the "
    "job's configured judge) and answers what the endpoint answers. A result that could not "
    "be judged says source 'fallback' and why, and has a review-queue item; review_list and "
    "review_show read the queue (a reviewer key over HTTP)."
)


class ReviewList(BaseModel):
    """List review-queue items, as ``GET /review`` does."""

    model_config = ConfigDict(extra="forbid")

    status: str = Field(
        default="pending", description="the items' status (pending, resolved ...); all: any"
    )
    job: str | None = Field(default=None, description="only this job's items")
    limit: int = Field(default=100, ge=1, le=10_000, description="at most this many items")


class ReviewShow(BaseModel):
    """Read one review item with its payload, as ``GET /review/{id}`` does."""

    model_config = ConfigDict(extra="forbid")

    item_id: int = Field(ge=1, le=2**63 - 1, description="a review item's id")


class ReviewItems(BaseModel):
    """Review-queue items (an object, as a tool's structured result must be)."""

    items: list[ReviewItem]


@dataclass(frozen=True)
class _Tool:
    name: str
    description: str
    arguments: type[BaseModel]
    result: type[BaseModel]
    role: str
    run: Callable[[Any], Awaitable[Any]]
    read_only: bool = False

    def listing(self) -> types.Tool:
        """The tool as ``tools/list`` shows it: the schemas of its models."""
        return types.Tool(
            name=self.name,
            description=self.description,
            input_schema=self.arguments.model_json_schema(),
            output_schema=self.result.model_json_schema(mode="serialization"),
            annotations=types.ToolAnnotations(
                read_only_hint=self.read_only, destructive_hint=False, open_world_hint=False
            ),
        )


def _job_tool(job: JobDefinition[Any, Any, Any], calls: JobCalls) -> _Tool:
    async def run(body: Any) -> Any:
        return await calls.respond(job, body)

    return _Tool(job.name, job.summary, request_model(job), job.response_model, JOB_ROLE, run)


def _review_tools(store: SqlStore) -> list[_Tool]:
    async def review_list(args: ReviewList) -> dict[str, Any]:
        status = None if args.status == "all" else args.status
        items = await asyncio.to_thread(
            store.list_reviews, status=status, job=args.job, limit=args.limit
        )
        return {"items": items}

    async def review_show(args: ReviewShow) -> dict[str, Any]:
        return await asyncio.to_thread(store.get_review, args.item_id)

    return [
        _Tool(
            "review_list",
            "List review-queue items (default: pending), oldest first, payloads included.",
            ReviewList,
            ReviewItems,
            REVIEW_ROLE,
            review_list,
            read_only=True,
        ),
        _Tool(
            "review_show",
            "Read one review item: why it is there, what the reviewer reads, its decision.",
            ReviewShow,
            ReviewItem,
            REVIEW_ROLE,
            review_show,
            read_only=True,
        ),
    ]


REVIEW_TOOLS = ("review_list", "review_show")


def _tools(calls: JobCalls) -> dict[str, _Tool]:
    jobs = {job.name: _job_tool(job, calls) for job in definitions()}
    review = {tool.name: tool for tool in _review_tools(calls.store)}
    if clash := sorted(set(jobs) & set(review)):
        raise ConfigError(f"a job may not be named as a review tool: {', '.join(clash)}")
    return {**jobs, **review}


def mcp_server(calls: JobCalls, caller: Callable[[Any], Principal]) -> Server[Any]:
    """The MCP server of ``calls``' jobs and store; ``caller(ctx)`` is who sends a message
    (its role decides which tools it lists and may call)."""
    tools = _tools(calls)
    listings = {name: tool.listing() for name, tool in tools.items()}

    async def list_tools(
        ctx: Any, params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        who = caller(ctx)
        return types.ListToolsResult(
            tools=[listings[name] for name, tool in tools.items() if who.may(tool.role)]
        )

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        tool = tools.get(params.name)
        if tool is None:
            raise MCPError(types.INVALID_PARAMS, f"unknown tool {params.name!r}")
        refusal = caller(ctx).refusal(tool.role)
        if refusal is not None:
            return _refused({"detail": refusal})
        try:
            arguments = tool.arguments.model_validate(params.arguments or {})
            answer = await tool.run(arguments)
            data = tool.result.model_validate(answer).model_dump(mode="json", exclude_unset=True)
        except ValidationError as exc:
            return _refused(validation_body(exc.errors()))
        except RequestValidationError as exc:
            return _refused(validation_body(exc.errors(), under="body"))
        except EvidexError as exc:
            return _refused(error_body(exc))
        text = json.dumps(data, ensure_ascii=False)
        return types.CallToolResult(
            content=[
                types.TextContent(text=summary(tool.name, data)),
                types.TextContent(text=text),
            ],
            structured_content=data,
        )

    def input_schema(name: str) -> Mapping[str, Any] | None:
        listing = listings.get(name)
        return listing.input_schema if listing else None

    return Server(
        "evidex",
        version=__version__,
        instructions=INSTRUCTIONS,
        get_tool_input_schema=input_schema,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


def _refused(body: Mapping[str, Any]) -> types.CallToolResult:
    text = json.dumps(body, ensure_ascii=False)
    return types.CallToolResult(content=[types.TextContent(text=text)], is_error=True)


_RUN_FIELDS = frozenset(JobResult.model_fields)
_SHOWN_CHARS = 80


def summary(tool: str, data: Mapping[str, Any]) -> str:
    """One line a person or a model reads first: the result's own scalar fields, the size of
    its lists and the scalars of its small mappings (what every job's result shares, the run's
    bookkeeping, is left to the JSON)."""
    parts = []
    for key, value in data.items():
        if key in _RUN_FIELDS or value is None:
            continue
        if isinstance(value, list):
            parts.append(f"{key}: {len(value)}")
        elif isinstance(value, dict):
            flat = [f"{k}={_shown(v)}" for k, v in value.items() if isinstance(v, _SCALARS)]
            if flat:
                parts.append(f"{key}: {', '.join(flat)}")
        else:
            parts.append(f"{key}={_shown(value)}")
    return f"{tool}: {'; '.join(parts)}" if parts else tool


_SCALARS = (str, int, float, bool)


def _shown(value: Any) -> str:
    return bounded(str(value), _SHOWN_CHARS)


# ---------------------------------------------------------------------------- transports


async def serve_stdio(calls: JobCalls) -> None:
    """Serve the tools over this process's stdin and stdout until stdin closes."""
    from mcp.server.stdio import stdio_server

    server = mcp_server(calls, lambda ctx: STDIO_CALLER)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


class _Forward(Response):
    """A route's answer that is another ASGI app's: the MCP transport answers the request the
    route has admitted."""

    def __init__(self, app: ASGIApp) -> None:
        super().__init__()
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.app(scope, receive, send)


class _Transport:
    """The streamable-HTTP transport of one server, a new session manager each time the app
    starts (a manager runs once)."""

    def __init__(self, server: Server[Any]) -> None:
        self.server = server
        self.manager: Any = None

    @asynccontextmanager
    async def run(self) -> AsyncIterator[None]:
        from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

        self.manager = StreamableHTTPSessionManager(
            self.server,
            json_response=True,
            stateless=True,
            # the app's BodyLimit has refused a larger body before it is read: one limit
            max_request_body_size=sys.maxsize,
        )
        async with self.manager.run():
            yield

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.manager.handle_request(scope, receive, send)


def mount_mcp(app: FastAPI, path: str = "/mcp") -> None:
    """Serve the tools over streamable HTTP at ``path`` of ``app`` (a :func:`create_app`
    app), behind the app's key check: a client or reviewer key (401 without one)."""
    calls: JobCalls = app.state.jobs
    gate: Gate = app.state.gate
    transport = _Transport(mcp_server(calls, lambda ctx: ctx.request.state.principal))

    async def endpoint() -> Response:
        return _Forward(transport)

    app.add_api_route(
        path,
        endpoint,
        methods=["GET", "POST", "DELETE"],
        dependencies=[Depends(gate.requires(JOB_ROLE, REVIEW_ROLE))],
        include_in_schema=False,
    )
    running = app.router.lifespan_context

    @asynccontextmanager
    async def lifespan(application: Any) -> AsyncIterator[Any]:
        async with transport.run(), running(application) as state:
            yield state

    app.router.lifespan_context = lifespan
