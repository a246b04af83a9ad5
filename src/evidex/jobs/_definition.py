"""A job is one definition; every surface reads it.

A :class:`JobDefinition` says, once, what the CLI, the bulk lines, the service, the review UI
and the evaluators would otherwise each spell out by hand and let drift:

- its ``name`` (and the one-line ``summary`` registered with it);
- its **Options model** (:class:`JobOptions`: each field with its type, default, bounds and
  help text), which the library call, ``evidex JOB``, ``evidex bulk JOB`` and ``POST /JOB`` all
  validate with;
- its **Input model** (one item of the job: a bulk line, the input fields of a request) and its
  Result model;
- its **spec factory**, taking the options and one :class:`SpecContext` (judge, store, prompt)
  for every job;
- what a result reports (the JSON a command prints and a request returns) and whether it is a
  fallback.
- its review side (:class:`ReviewKind`: the payload a reviewer reads, the decisions they may
  take, how a decision becomes a golden label, the UI's partial template);
- how it is evaluated (:class:`Evaluation`: its measures, golden-set row type and evaluator)
  and which of its passages the framework adapters keep (:class:`Documents`).

How a field looks on a command line, where its name alone does not say it, is a :class:`Flag`
in the field's ``Annotated`` metadata; how it looks on the wire, where the library accepts more
forms than a JSON body can carry, is a :class:`Wire`. Both stay beside the field they describe,
so the model is the one place a job's option is declared (Django's ``ModelForm``, FastAPI's
request models and pydantic-settings' ``CliApp`` read models the same way).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Any, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from evidex._registered import JOBS
from evidex.errors import InputError
from evidex.jobs._common import RISK_HELP, RUN_KEYS, harness_for
from evidex.jobs._demo import DemoPart
from evidex.jobs._documents import Documents
from evidex.jobs._evaluation import Evaluation
from evidex.jobs._fields import Flag, Wire, field_flag, field_wire
from evidex.jobs._review import GENERIC, ReviewKind
from evidex.preflight import InputLimits
from evidex.types import RiskLevel

if TYPE_CHECKING:
    from evidex.harness.job import JobSpec
    from evidex.harness.ports import StorePort
    from evidex.harness.runner import Harness
    from evidex.judging import Judge

__all__ = [
    "Documents",
    "Evaluation",
    "Flag",
    "JobDefinition",
    "JobOptions",
    "SpecContext",
    "Wire",
    "field_flag",
    "field_wire",
    "validation_message",
]

In = TypeVar("In", bound=BaseModel)
Opt = TypeVar("Opt", bound="JobOptions")
R = TypeVar("R", bound=BaseModel)


class JobOptions(BaseModel):
    """A job's own options: one model, validated the same way from every surface.

    Unknown names are rejected, so a misspelled option never passes silently."""

    model_config = ConfigDict(extra="forbid", frozen=True, arbitrary_types_allowed=True)

    def values(self) -> dict[str, Any]:
        """The options as the job's keywords (typed values, not dumps)."""
        return {name: getattr(self, name) for name in type(self).model_fields}


class RiskOptions(JobOptions):
    """A job's options, starting with the one every job has, declared once: how costly a
    wrong judgment is, which sets how many results go to human review."""

    risk: Annotated[RiskLevel, Field(description=RISK_HELP)] = RiskLevel.LOW


def validation_message(exc: ValidationError) -> str:
    """A pydantic error as one sentence a user can act on: each field, what is wrong, and the
    value that was given."""
    parts = []
    for error in exc.errors(include_url=False):
        where = ".".join(str(p) for p in error["loc"]) or "input"
        given = error.get("input")
        shown = "" if isinstance(given, (dict, list)) else f", got {given!r}"
        parts.append(f"{where}: {error['msg'].lower()}{shown}")
    return "; ".join(parts)


@dataclass(frozen=True)
class SpecContext:
    """What a spec factory may read besides the options, the same for every job: the judge it
    will run on (rerank picks its strategy by it), the store (audit reads its baseline there)
    and the caller's prompt (a :class:`~evidex.tasks.custom.Prompt`, a file path, or None for
    the configured one)."""

    judge: Judge
    store: StorePort | None = None
    prompt: Any = None


def _report(result: BaseModel) -> dict[str, Any]:
    report: Callable[[], dict[str, Any]] | None = getattr(result, "report", None)
    return report() if report is not None else result.model_dump(mode="json")


def _source_fell_back(result: BaseModel) -> bool:
    return getattr(result, "source", None) == "fallback"


@dataclass(frozen=True)
class JobDefinition(Generic[In, Opt, R]):
    """One job, declared once; see the module docstring.

    ``report(result)`` is the JSON a bulk line and the library's ``report()`` carry;
    ``response(result, extras)`` what a command prints and a request returns (rerank: the
    strict top-k; tier with ``extras.policy``: the selected context too); ``extras``: options of
    the response only, never of the judgment; ``views``: more endpoints over the same run
    (audit's ``/audit/decision``: name → (response model, how the result becomes it)).
    """

    name: str
    options: type[Opt]
    input: type[In]
    result: type[R]
    spec: Callable[[Opt, SpecContext], JobSpec[Any, Any, Any, R]]
    report: Callable[[R], dict[str, Any]] = _report
    response: Callable[[R, Any], dict[str, Any]] | None = None
    extras: type[BaseModel] | None = None
    response_type: type[BaseModel] | None = None
    """The model of :meth:`respond`'s JSON, where it is not the Result model's."""
    fell_back: Callable[[R], bool] = _source_fell_back
    views: Mapping[str, tuple[type[BaseModel], Callable[[R], dict[str, Any]]]] = field(
        default_factory=dict
    )
    line_input: Callable[[Mapping[str, Any]], Mapping[str, Any]] | None = None
    """How a bulk line's object becomes the Input model's fields (audit: ``answer_id``
    defaults to the task id); default: the fields the Input model names."""
    items: Callable[[Iterable[Any]], list[In]] | None = None
    """How one call's items are checked together (audit: ids by position, each used once);
    default: each item alone, by the Input model."""
    subscribers: Callable[[], tuple[Callable[[Any], None], ...]] = tuple
    """Hooks every run of the job feeds (audit: its support-level metrics)."""
    evaluation: Evaluation | None = None
    """How the job is measured against a golden set: its measures, golden-set row type,
    evaluator and, where it has them, calibration and review export (``evidex eval``,
    ``evidex calibrate``, ``evidex review export`` read it); None: not evaluated."""
    documents: Documents[R] | None = None
    """Which of a result's passages the framework adapters keep, and their grades; None: no
    adapter runs the job."""
    demo: DemoPart | None = None
    """The job's own step in ``evidex demo``, on the context the demo selected; None: the
    demo does not show the job (the first jobs are its own steps)."""
    review: ReviewKind = GENERIC
    """The review side (:class:`~evidex.jobs._review.ReviewKind`): the typed payload of the
    job's review items, the decisions a reviewer may take, how a decision becomes a golden
    row, and the partial template the review UI shows an item with."""
    summary: str = ""
    """What the job does, in one line; default: the summary registered with it
    (:mod:`evidex._registered`), which ``evidex --help`` lists without importing the job."""

    def __post_init__(self) -> None:
        if not self.summary:
            registered = JOBS.get(self.name)
            object.__setattr__(self, "summary", registered.summary if registered else self.name)

    @property
    def response_model(self) -> type[BaseModel]:
        return self.response_type or self.result

    def parse_options(self, values: Mapping[str, Any] | Opt | None = None) -> Opt:
        """The validated options; a bad value is an :class:`InputError` naming it."""
        if isinstance(values, self.options):
            return values
        try:
            return self.options.model_validate(dict(values or {}))
        except ValidationError as exc:
            raise InputError(f"{self.name} options: {validation_message(exc)}") from exc

    def parse_input(self, values: Mapping[str, Any] | In, index: int | None = None) -> In:
        """One validated input item; a bad one is an :class:`InputError` naming the field
        (and the item's index in a batch)."""
        if isinstance(values, self.input):
            return values
        try:
            return self.input.model_validate(dict(values))
        except (ValidationError, TypeError, ValueError) as exc:
            problem = validation_message(exc) if isinstance(exc, ValidationError) else str(exc)
            raise InputError(problem if index is None else f"item {index}: {problem}") from exc

    def respond(self, result: R, extras: Any = None) -> dict[str, Any]:
        """What a command prints and a request returns for one result."""
        if self.response is None:
            return self.report(result)
        return self.response(result, extras)

    def prepare(self, call: Mapping[str, Any]) -> tuple[Harness, JobSpec[Any, Any, Any, R]]:
        """The harness and spec of one call (``call``: the job's options, or ``options=`` a
        validated model, and the run keywords of every job). The options are checked before
        the judge is loaded, so a typo costs no model load."""
        given = call.get("options")
        own = {k: v for k, v in call.items() if k not in RUN_KEYS and k not in _NOT_OPTIONS}
        options = self.parse_options(given if given is not None else own)
        run: Any = {k: v for k, v in call.items() if k in RUN_KEYS}
        harness = harness_for(self.name, run, subscribers=self.subscribers())
        context = SpecContext(harness.judge, harness.store, call.get("prompt"))
        spec = self.spec(options, context)
        # a spec may run its steps on a wrapper of the judge (rerank's pointwise steps on a
        # scoring judge's own score): the harness then calls the wrapper
        runner_judge: Callable[[Judge], Judge] | None = getattr(spec, "runner_judge", None)
        if runner_judge is not None:
            wrapped = runner_judge(harness.judge)
            if wrapped is not harness.judge:
                harness = harness.for_judge(wrapped)
        return harness, spec

    def inputs(
        self, items: Iterable[In | Mapping[str, Any]], limits: InputLimits | None = None
    ) -> list[In]:
        """One call's items, validated (see :attr:`items`) and, with ``limits``, held to them
        (the first item over them is an :class:`InputError` naming it and the field)."""
        checked = (
            self.items(items)
            if self.items is not None
            else [self.parse_input(item, index) for index, item in enumerate(items)]
        )
        if limits is not None:
            for index, item in enumerate(checked):
                limits.check(item, where=f"item {index}" if len(checked) > 1 else None)
        return checked

    async def arun(self, item: In | Mapping[str, Any], **call: Any) -> R:
        """Run the job on one item (progress counted in the job's own steps)."""
        (one,) = self.inputs([item], call.get("limits"))
        harness, spec = self.prepare(call)
        return await harness.run(spec, one, on_progress=call.get("on_progress"))

    async def arun_many(self, items: Iterable[In | Mapping[str, Any]], **call: Any) -> list[R]:
        """Run the job on many items with the same options; results in input order, progress
        counted in items."""
        checked = self.inputs(items, call.get("limits"))
        harness, spec = self.prepare(call)
        return await harness.run_many(spec, checked, on_progress=call.get("on_progress"))

    def run_many(self, items: Iterable[In | Mapping[str, Any]], **call: Any) -> list[R]:
        """:meth:`arun_many` from sync code (a command, a notebook)."""
        from evidex.jobs._common import run_sync

        return run_sync(self.arun_many(items, **call))


_NOT_OPTIONS = frozenset({"prompt", "options"})
