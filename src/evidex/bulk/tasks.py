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
from typing import TYPE_CHECKING, Any, Literal

from evidex.errors import ConfigError, InputError, UsageError
from evidex.jobs.audit import AuditSpec, aaudit
from evidex.jobs.classify import ClassifySpec, aclassify
from evidex.jobs.rerank import RerankSpec, arerank
from evidex.jobs.tier import TierSpec, atier
from evidex.preflight import coerce_passages
from evidex.taxonomy import Taxonomy
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
    "fell_back",
    "parse_line",
    "task_id",
]

JOBS = ("tier", "rerank", "classify", "audit")

TaskId = str | int
"""A task's id: a non-empty string or an integer, written back as given."""

_FIELDS = {
    "tier": '{"id", "query", "passages": [{"passage_id", "text"}, ...]}',
    "rerank": '{"id", "query", "passages": [{"passage_id", "text"}, ...]}',
    "classify": '{"id", "input", "passages": [{"passage_id", "text"}, ...]}',
    "audit": '{"id", "answer", "passages": [...], "question"?, "claims"?}',
}


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


def _text(data: Mapping[str, Any], name: str, *, required: bool = True) -> str | None:
    value = data.get(name)
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value.strip():
        raise InputError(f"'{name}' is missing, empty or not a string")
    return value


@dataclass(frozen=True)
class BulkJob:
    """A job with its options for a whole run; see the module docstring.

    ``options`` are the job's own options (:class:`~evidex.jobs.tier.TierOptions` ...);
    classify also needs ``taxonomy`` (anything :meth:`Taxonomy.parse` takes)."""

    job: Literal["tier", "rerank", "classify", "audit"]
    options: Mapping[str, Any] = field(default_factory=dict)
    taxonomy: Taxonomy | None = None

    def __post_init__(self) -> None:
        if self.job not in JOBS:
            raise ConfigError(f"unknown job {self.job!r}; choose one of {', '.join(JOBS)}")
        if self.job == "classify" and self.taxonomy is None:
            raise ConfigError("bulk classify needs the taxonomy (--labels FILE)")
        if self.taxonomy is not None and self.job != "classify":
            raise ConfigError("a taxonomy is for the classify job only")

    def check(self, judge: Judge, store: StorePort) -> None:
        """Validate the options once, before any task runs (a bad option is a usage error of
        the run, not an error of every line)."""
        if self.job == "tier":
            TierSpec.of(self.options)
        elif self.job == "rerank":
            RerankSpec.of(self.options, judge)
        elif self.job == "classify":
            ClassifySpec.of(self.taxonomy, self.options)
        else:
            AuditSpec.of(self.options, store)
        if not judge.supports(self.job):
            raise ConfigError(f"judge {judge.judge_id} cannot do the {self.job} job")

    def task(self, data: Mapping[str, Any], line: int) -> Task:
        """One line's object as a task; a bad one is an :class:`InputError`."""
        return Task(task_id(data), line, self.fields(data))

    def fields(self, data: Mapping[str, Any]) -> dict[str, Any]:
        """The job's input fields of a line's object, checked (the id apart)."""
        raw = data.get("passages")
        if self.job == "audit" and raw is None:
            raw = []
        if not isinstance(raw, list):
            raise InputError(f"'passages' must be a list; a task is {_FIELDS[self.job]}")
        if not raw and self.job != "audit":
            raise InputError("'passages' is empty")
        passages = coerce_passages(raw)
        if self.job in ("tier", "rerank"):
            return {"query": _text(data, "query"), "passages": passages}
        if self.job == "classify":
            return {"input": _text(data, "input"), "passages": passages}
        claims = data.get("claims")
        if claims is not None and (
            not isinstance(claims, list) or not all(isinstance(c, str) for c in claims)
        ):
            raise InputError("'claims' must be a list of strings")
        answer_id = data.get("answer_id", data.get("id"))
        return {
            "answer": _text(data, "answer"),
            "passages": passages,
            "answer_id": None if answer_id is None else str(answer_id),
            "question": _text(data, "question", required=False),
            "claims": claims,
        }

    async def run(self, task: Task, **run: Any) -> tuple[dict[str, Any], Any]:
        """Run one task (``run``: the run keywords every job takes: ``judge``, ``store``,
        ``settings``, ``hooks``); the result line (``id`` first, then the job's report) and
        the result itself."""
        options: dict[str, Any] = {**self.options, **run}
        f = task.fields
        result: Any
        if self.job == "tier":
            result = await atier(f["query"], f["passages"], **options)
            report = result.report()
        elif self.job == "rerank":
            result = await arerank(f["query"], f["passages"], **options)
            report = result.report()
        elif self.job == "classify":
            result = await aclassify(f["input"], f["passages"], self.taxonomy, **options)
            report = result.report()
        else:
            result = await aaudit(
                f["answer"],
                f["passages"],
                answer_id=f["answer_id"],
                question=f["question"],
                claims=f["claims"],
                **options,
            )
            report = result.report()
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
            fallback=fell_back(self.job, result),
            attempts=result.attempts,
            cost=result.cost,
        )


def fell_back(job: str, result: Any) -> bool:
    """Whether any part of a result is a fallback (tier: any passage's tier)."""
    if job == "tier":
        return any(a.source == "fallback" for a in result.classifications)
    return bool(result.source == "fallback")
