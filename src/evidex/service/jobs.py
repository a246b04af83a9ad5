"""The job endpoints, one per registered job, built from the job's definition.

A job's request model is its Input model's fields, its Options model's fields and its response
extras (tier's ``policy`` and ``budget``), flat, plus the judge spec: the same names, types,
defaults and bounds as the library call and the CLI, so ``/openapi.json`` describes what the
library validates. ``POST /JOB`` returns what ``evidex JOB`` prints; a definition's views add
more endpoints over the same run (``POST /audit/decision``: only the decision object that may
be shown to end users, no judge output).

How a request runs is :class:`JobCalls`, kept on ``app.state.jobs``, so that another surface
over the same app (the MCP tools) runs a job exactly as its endpoint does.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from fastapi import FastAPI
from pydantic import BaseModel, create_model

from evidex.harness.runner import HarnessSettings
from evidex.jobs import JobDefinition, definition, definitions, field_wire
from evidex.judging import Judge
from evidex.preflight import InputLimits
from evidex.service.guards import check_body
from evidex.store import SqlStore
from evidex.tasks.custom import BUILTIN_PROMPT, Prompt

__all__ = ["JobCalls", "JobRequest", "register_job_routes", "request_model"]


class JobRequest(BaseModel):
    """What every job request has: the judge spec (None: the job's configured judge)."""

    judge: str | None = None
    job: ClassVar[str] = ""
    input_fields: ClassVar[frozenset[str]] = frozenset()
    """Fields that are the job's input, not its options."""
    extra_fields: ClassVar[frozenset[str]] = frozenset()
    """Fields that shape the response only (the definition's ``extras``)."""

    def options(self) -> dict[str, Any]:
        """The job's options, as the library call takes them (typed values, not dumps)."""
        skip = self.input_fields | self.extra_fields | {"judge"}
        return {k: getattr(self, k) for k in type(self).model_fields if k not in skip}

    def item(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.input_fields}

    def extras(self) -> BaseModel | None:
        extras = definition(self.job).extras
        if extras is None:
            return None
        return extras.model_validate({k: getattr(self, k) for k in self.extra_fields})


def _fields(model: type[BaseModel] | None) -> dict[str, tuple[Any, Any]]:
    if model is None:
        return {}
    return {name: (field_wire(info), info) for name, info in model.model_fields.items()}


_MODELS: dict[str, type[JobRequest]] = {}


def request_model(job: JobDefinition[Any, Any, Any]) -> type[JobRequest]:
    """The request model of ``job`` (built once): ``TierRequest``, ``RerankRequest`` ..."""
    found = _MODELS.get(job.name)
    if found is not None:
        return found
    inputs = _fields(job.input)
    model = create_model(  # type: ignore[call-overload]
        f"{job.name.capitalize()}Request",
        __base__=JobRequest,
        __doc__=job.summary,
        **inputs,
        **_fields(job.options),
        **_fields(job.extras),
    )
    model.job = job.name
    model.input_fields = frozenset(inputs)
    model.extra_fields = frozenset(job.extras.model_fields) if job.extras else frozenset()
    _MODELS[job.name] = model
    return model  # type: ignore[no-any-return]


@dataclass(frozen=True)
class JobCalls:
    """How the service runs one job request: its limits checked, the job run on the server's
    judge for it, with the server's store, settings and prompt. One place, so every surface
    over the service runs a job the same way."""

    store: SqlStore
    judge_for: Callable[[str | None, str], Judge]
    settings: HarnessSettings
    limits: InputLimits = field(default_factory=InputLimits)
    prompts: Mapping[str, Prompt] = field(default_factory=dict)
    """The server's own prompt per job, read at start from its configuration; a request can
    never name a prompt file."""

    async def run(self, job: JobDefinition[Any, Any, Any], body: JobRequest) -> Any:
        """The job's result for ``body``; a body over the limits raises
        :class:`~fastapi.exceptions.RequestValidationError` naming the field."""
        # a walk over every text of a body of megabytes: off the event loop, like planning
        await asyncio.to_thread(check_body, body, self.limits)
        return await job.arun(
            body.item(),
            options=job.parse_options(body.options()),
            judge=self.judge_for(body.judge, job.name),
            store=self.store,
            settings=self.settings,
            prompt=self.prompts.get(job.name, BUILTIN_PROMPT),
        )

    async def respond(self, job: JobDefinition[Any, Any, Any], body: JobRequest) -> Any:
        """What ``POST /JOB`` answers for ``body``."""
        return job.respond(await self.run(job, body), body.extras())


def register_job_routes(
    app: FastAPI,
    store: SqlStore,
    judge_for: Callable[[str | None, str], Judge],
    settings: HarnessSettings,
    dependencies: Sequence[Any] = (),
    limits: InputLimits | None = None,
    prompts: Mapping[str, Prompt] | None = None,
) -> None:
    """Add every registered job's endpoints; ``dependencies`` guard each (the caller's role).
    How they run a job (``limits``, ``prompts``: see :class:`JobCalls`) is ``app.state.jobs``."""
    guard = list(dependencies)
    calls = JobCalls(store, judge_for, settings, limits or InputLimits(), dict(prompts or {}))
    app.state.jobs = calls
    for job in definitions():
        _job_routes(app, job, guard, calls)


def _job_routes(
    app: FastAPI, job: JobDefinition[Any, Any, Any], guard: list[Any], calls: JobCalls
) -> None:
    async def respond(body: JobRequest) -> Any:
        return await calls.respond(job, body)

    model = request_model(job)
    _route(app, f"/{job.name}", model, job.response_model, respond, guard, job.summary)
    for view, (view_model, make) in job.views.items():

        async def viewed(body: JobRequest, make: Callable[[Any], Any] = make) -> Any:
            return make(await calls.run(job, body))

        _route(app, f"/{job.name}/{view}", model, view_model, viewed, guard, job.summary)


def _route(
    app: FastAPI,
    path: str,
    request: type[JobRequest],
    response: type[BaseModel],
    handler: Callable[..., Any],
    guard: list[Any],
    summary: str,
) -> None:
    async def endpoint(body: Any) -> Any:
        return await handler(body)

    # FastAPI reads the body's model from the signature; the model is made at run time
    endpoint.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [inspect.Parameter("body", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=request)]
    )
    endpoint.__name__ = path.strip("/").replace("/", "_") + "_endpoint"
    app.post(
        path,
        dependencies=guard,
        response_model=response,
        response_model_exclude_unset=True,
        description=summary,
    )(endpoint)
