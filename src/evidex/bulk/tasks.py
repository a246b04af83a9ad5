"""One bulk task, engine-independent: a line's object in, a result line or an error line out.

:class:`BulkJob` is the unit every engine runs. It holds the job's name and its options for
the whole run (plain, picklable values: an engine may ship it to worker processes), and knows
how to

- :meth:`BulkJob.task`: check one line's object and turn it into a :class:`Task` (an
  :class:`~evidex.errors.InputError` naming the line when it is bad);
- :meth:`BulkJob.run`: run one task through the job's library call with a given judge and
  store, and serialise the result as one JSON-ready line (the job's report plus the task id);
- :meth:`BulkJob.process`: both, with a bad task turned into an error line instead of an
  exception, and the figures an engine counts (calls, tokens, fallbacks).

What it does not know: files, checkpoints, ordering, concurrency across tasks. Those belong to
the engine (:mod:`evidex.bulk.local`); a run-time failure (the store is down, a bug) is not a
bad task and propagates, so the engine stops instead of writing a million error lines.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from evidex.errors import ConfigError, InputError, UsageError
from evidex.jobs import JobDefinition, SpecContext, definition, job_names
from evidex.types import Usage

if TYPE_CHECKING:
    from evidex.harness.ports import StorePort
    from evidex.judging import Judge

__all__ = [
    "JOBS",
    "BulkJob",
    "Processed",
    "Task",
    "TaskId",
    "error_line",
    "line_format",
    "parse_line",
    "task_id",
]

JOBS = job_names()

TaskId = str | int
"""A task's id: a non-empty string or an integer, written back as given."""


@dataclass(frozen=True)
class Task:
    """One checked line: its id, its line number and the job's input fields."""

    id: TaskId
    line: int
    fields: Mapping[str, Any]


@dataclass(frozen=True)
class Processed:
    """What an engine gets back for one line: a result line or an error line, and its figures.

    Plain values only, so it crosses process boundaries (a Ray actor's output row)."""

    line: int
    id: TaskId | None
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    calls: int = 0
    usage: Usage = field(default_factory=Usage)
    fallback: bool = False
    attempts: int = 0
    cost: float | None = None
    """The result's estimated cost (None: its judge is not in the price table)."""


def parse_line(text: str) -> dict[str, Any]:
    """The JSON object of one input line; anything else is an :class:`InputError`."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"malformed JSON: {exc.msg} (column {exc.colno})") from exc
    if not isinstance(data, dict):
        raise InputError(f"expected a JSON object, got {type(data).__name__}")
    return data


def task_id(data: Mapping[str, Any]) -> TaskId:
    """The ``id`` of a line's object: required, a non-empty string or an integer."""
    if "id" not in data:
        raise InputError("the task has no 'id' (results are joined back and resumed by id)")
    value = data["id"]
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise InputError(f"'id' must be a string or an integer, got {type(value).__name__}")
    if isinstance(value, str) and not value.strip():
        raise InputError("'id' is empty")
    return value


def error_line(line: int, id: TaskId | None, kind: str, message: str) -> dict[str, Any]:
    """One line of the errors file."""
    return {"line": line, "id": id, "kind": kind, "error": message}


@dataclass(frozen=True)
class BulkJob:
    """A job with its options for a whole run; see the module docstring.

    ``job`` names a registered job (:mod:`evidex.jobs.registry`) and ``options`` are its own
    options (its Options model's fields; classify's taxonomy is its ``labels`` option). Only
    plain values are held, so an engine can ship the job to worker processes."""

    job: str
    options: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        definition(self.job)  # an unknown job is a usage error now, not on the first line

    @property
    def definition(self) -> JobDefinition[Any, Any, Any]:
        return definition(self.job)

    def check(self, judge: Judge, store: StorePort) -> None:
        """Validate the options once, before any task runs (a bad option is a usage error of
        the run, not an error of every line)."""
        job = self.definition
        job.spec(job.parse_options(self.options), SpecContext(judge, store))
        if not judge.supports(self.job):
            raise ConfigError(f"judge {judge.judge_id} cannot do the {self.job} job")

    def task(self, data: Mapping[str, Any], line: int) -> Task:
        """One line's object as a task; a bad one is an :class:`InputError`."""
        return Task(task_id(data), line, self.fields(data))

    def fields(self, data: Mapping[str, Any]) -> dict[str, Any]:
        """The job's input fields of a line's object, checked (the id apart)."""
        job = self.definition
        if job.line_input is not None:
            fields = dict(job.line_input(data))
        else:
            fields = {k: v for k, v in data.items() if k in job.input.model_fields and k != "id"}
        job.parse_input(fields)
        return fields

    async def run(self, task: Task, **run: Any) -> tuple[dict[str, Any], Any]:
        """Run one task (``run``: the run keywords every job takes: ``judge``, ``store``,
        ``settings``, ``hooks``); the result line (``id`` first, then the job's report) and
        the result itself."""
        job = self.definition
        result = await job.arun(task.fields, options=job.parse_options(self.options), **run)
        report = job.report(result)
        report.pop("id", None)
        return {"id": task.id, **report}, result

    async def process(self, data: Mapping[str, Any], line: int, **run: Any) -> Processed:
        """Check and run one line's object: a result line, or an error line for a bad task
        (also one the job's preflight refuses, e.g. duplicate passage ids). Run-time errors
        propagate."""
        ident: TaskId | None = None
        try:
            ident = task_id(data)
            task = Task(ident, line, self.fields(data))
        except UsageError as exc:
            return Processed(line, ident, error=error_line(line, ident, "invalid", str(exc)))
        try:
            report, result = await self.run(task, **run)
        except UsageError as exc:
            return Processed(line, task.id, error=error_line(line, task.id, "refused", str(exc)))
        return Processed(
            line,
            task.id,
            result=report,
            calls=result.judge_calls,
            usage=result.usage,
            fallback=self.definition.fell_back(result),
            attempts=result.attempts,
            cost=result.cost,
        )


def line_format(job: JobDefinition[Any, Any, Any]) -> str:
    """What one input line of ``evidex bulk JOB`` holds, from the job's Input model:
    ``{"id", "query", "passages": [...]}`` (``?``: optional)."""
    names = ['"id"']
    for name, info in job.input.model_fields.items():
        if name == "id":
            continue
        shown = f'"{name}"' + ("" if info.is_required() else "?")
        names.append(f"{shown}: [...]" if name == "passages" else shown)
    return "{" + ", ".join(names) + "}"
