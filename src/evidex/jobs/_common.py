"""How every job is called: the keywords all four share, the harness they get, the sync twin.

Each job has one async entry point (``atier``...) and one batch form (``atier_many``...); the
sync API is made from them by :func:`sync_of`, which keeps the signature, types and docstring,
so nothing is written twice.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import logging
import os
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, ParamSpec, TypedDict, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from evidex._registered import JOBS
from evidex.errors import ConfigError
from evidex.harness.budget import passage_limit
from evidex.harness.events import Hooks, Subscriber
from evidex.harness.job import Plan, Progress
from evidex.harness.ports import StorePort
from evidex.harness.runner import Harness, HarnessSettings
from evidex.jobs._fields import Wire
from evidex.judging import Judge
from evidex.preflight import (
    InputLimits,
    Prepared,
    coerce_passages,
    prepare_passages,
    require_text,
)
from evidex.tasks.base import PromptTemplate, StepRequest
from evidex.tasks.custom import BUILTIN_PROMPT, Prompt, custom_template
from evidex.types import Passage, RiskLevel

__all__ = [
    "RISK_HELP",
    "QueryInput",
    "QueryPassages",
    "RunOptions",
    "harness_for",
    "judge_defaults",
    "judge_key",
    "plan_query",
    "prompt_template",
    "resolve_judge",
    "resolve_store",
    "run_sync",
    "sync_of",
]

T = TypeVar("T")
P = ParamSpec("P")


@dataclass(frozen=True)
class QueryPassages:
    """One query's passages: as the caller gave them, and as preflight prepared them."""

    items: list[Passage]
    prepared: Prepared


def plan_query(
    item: QueryInput,
    judge: Judge,
    probe: Callable[[str], StepRequest],
    per_call: int | None,
    risk: RiskLevel,
) -> Plan[QueryPassages]:
    """Preflight of a job over one query's passages: the query and passages checked, duplicates
    merged, each passage cut to what the judge's window leaves when ``per_call`` passages (None:
    all of them) share the prompt ``probe(query)`` asks, and the passages screened for text
    aimed at the grader, the query stuffing included. A judge that answers the probe's
    payload in pieces of its own (:meth:`~evidex.judging.Judge.answers_in_pieces`) reads the
    passages whole."""
    query = require_text(item.query, "the query")
    items = coerce_passages(item.passages)
    request = probe(query)
    limit = None
    if not judge.answers_in_pieces(type(request.payload)):
        fixed = "".join(m.content for m in request.messages)
        limit = passage_limit(judge, fixed, per_call or len(items))
    prepared = prepare_passages(
        items, count_tokens=judge.count_tokens, max_passage_tokens=limit, query=query
    )
    return Plan(
        query=query,
        data=QueryPassages(items, prepared),
        risk=risk.value,
        events=tuple(e for e in (judge.query_truncation(query), *prepared.events) if e),
        id=item.id,
    )


RISK_HELP = "How costly a wrong judgment is: high routes more results to human review."


class QueryInput(BaseModel):
    """One query with its retrieved passages: the item of the tier and rerank batch forms.
    ``passages`` are anything :func:`~evidex.preflight.coerce_passages` takes (a request
    carries them as passage objects)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    query: Annotated[str, Field(description="The user's question.")]
    passages: Annotated[
        list[Any],
        Wire(list[Passage]),
        Field(description="The retrieved passages, each with a unique passage_id and its text."),
    ]
    id: str | None = None


class RunOptions(TypedDict, total=False):
    """The keywords every job takes, whatever its own options.

    ``judge``: a :class:`~evidex.judging.Judge`, a spec string, or None for the job's configured
    judge. ``store``: where the audit log, cache and review queue live (a store, a URL such as
    ``sqlite://`` for memory only, or None for ``EVIDEX_DB`` / the user data dir). ``settings``:
    timeouts, concurrency, cache use. ``hooks``: a bus whose subscribers see every audit record
    of the run. ``on_progress``: ``(done, total)`` as the job advances. ``prompt``: your own
    wording of the job's prompt, a :class:`~evidex.tasks.custom.Prompt` or the path of a prompt
    file (default: the ``prompts`` setting of the job, else the built-in prompt;
    ``BUILTIN_PROMPT``: the built-in one, the settings unread); unlike the
    others it is part of the job's spec, since it changes what the judge is asked.
    ``limits``: how much one input may carry (:class:`~evidex.preflight.InputLimits`: a text
    over ``max_text_chars``, more than ``max_passages`` passages), refused with an
    :class:`~evidex.errors.InputError` naming the field before any judge call; None (the
    default): any size, each text fitted to the judge's window with a ``truncated`` event.
    """

    judge: Judge | str | None
    store: StorePort | str | None
    settings: HarnessSettings | None
    hooks: Hooks | None
    on_progress: Progress | None
    prompt: Prompt | str | Path | None
    limits: InputLimits | None


RUN_KEYS = frozenset(RunOptions.__annotations__) - {"prompt"}


def job_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """The job's own options out of all the keywords of a call."""
    return {k: v for k, v in options.items() if k not in RUN_KEYS}


def prompt_template(job: str, step: str, builtin: PromptTemplate, given: Any) -> PromptTemplate:
    """The template ``step`` of ``job`` runs with: ``given`` (a :class:`Prompt` or a prompt
    file's path), else the job's configured prompt file (``prompts`` in the settings, which is
    how the service gets one: a request never names a file), else ``builtin``. A custom prompt
    is checked against the step's placeholders here, before any judge is called."""
    if given is None:
        from evidex.config import load_settings

        given = load_settings().prompts.get(job)
        if given is None:
            return builtin
    if given is BUILTIN_PROMPT:
        return builtin
    if isinstance(given, PromptTemplate):
        return given
    if isinstance(given, (str, os.PathLike)):
        from evidex.loaders import load_prompt

        given = load_prompt(os.fspath(given))
    if not isinstance(given, Prompt):
        raise ConfigError(f"prompt must be a Prompt or a prompt file's path, got {given!r}")
    return custom_template(builtin, given, step)


def judge_defaults(job: str, spec: str) -> dict[str, Any]:
    """The options a judge of ``spec`` gets when it is built for ``job`` from its spec string
    (registered beside the job's default judge, :mod:`evidex._registered`: ``local:qwen``
    grades claims and labels in score mode); empty for a spec the job names no options for."""
    registered = JOBS.get(job)
    if registered is None:
        return {}
    return dict(registered.judge_options.get(spec.strip(), {}))


def judge_key(job: str, spec: str) -> tuple[str, str]:
    """What the judge :func:`resolve_judge` builds for ``job`` from ``spec`` is told apart by:
    the spec and the options the job registers for it. Jobs whose keys are equal can share
    one instance (and its in-flight limit); audit and tier on ``local:qwen`` cannot."""
    spec = spec.strip()
    return spec, repr(sorted(judge_defaults(job, spec).items()))


def resolve_judge(judge: Judge | str | None, job: str, **options: Any) -> Judge:
    """A judge instance for ``job``: given, built from a spec string, or the job's default.

    A judge built here from a spec string gets the job's :func:`judge_defaults` under
    ``options`` (so ``mode="generate"`` given by the caller wins); a judge instance is used as
    it was built."""
    from evidex.judges import get_judge

    if judge is None:
        from evidex.config import load_settings

        judge = load_settings().judges[job]
    if isinstance(judge, str):
        judge = get_judge(judge, **{**judge_defaults(job, judge), **options})
    if not judge.supports(job):
        raise ConfigError(
            f"judge {judge.judge_id} cannot do the {job} job "
            f"(it does: {', '.join(sorted(judge.jobs)) or 'nothing'})"
        )
    return judge


_ANNOUNCED: set[str] = set()
"""Default stores already named in the log by this process."""


def resolve_store(store: StorePort | str | None) -> StorePort:
    """The given store, one opened from a URL, or the default store (``EVIDEX_DB`` or the user
    data dir): the audit log is not optional. The first call of a process that falls back to
    the default store logs a warning naming it, since it keeps raw judge output on disk."""
    from evidex.store import default_url, open_store

    if store is None:
        url = default_url()
        if url not in _ANNOUNCED:
            _ANNOUNCED.add(url)
            logging.getLogger("evidex").warning(
                "no store= given: the audit log (raw judge output included), the cache and the "
                'review queue are written to %s; pass store="sqlite://" to keep them in '
                "memory, or set EVIDEX_DB",
                url,
            )
        return open_store(url)
    if isinstance(store, str):
        return open_store(store)
    return store


def harness_for(
    job: str,
    options: RunOptions,
    *,
    judge: Judge | None = None,
    subscribers: tuple[Subscriber, ...] = (),
) -> Harness:
    """The harness of one call: its judge (``judge`` overrides the resolved one, e.g. a
    wrapper), its store, settings, and a fresh hook bus that forwards to the caller's hooks (so
    a caller's bus is never subscribed to twice)."""
    bus = Hooks()
    for subscriber in subscribers:
        bus.subscribe(subscriber)
    given = options.get("hooks")
    if given is not None:
        bus.subscribe(given.emit)
    return Harness(
        judge or resolve_judge(options.get("judge"), job),
        resolve_store(options.get("store")),
        settings=options.get("settings"),
        hooks=bus,
    )


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine from sync code, also when the caller already runs an event loop
    (a notebook): then it runs in a worker thread with its own loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coro).result()


def sync_of(fn: Callable[P, Coroutine[Any, Any, T]], doc: str | None = None) -> Callable[P, T]:
    """The sync twin of an async entry point ``aNAME``: ``NAME``, with the same parameters,
    types and docstring (or ``doc``), run to the end by :func:`run_sync`. The one way the
    library makes a blocking call of a coroutine function."""

    @functools.wraps(fn)
    def sync(*args: P.args, **kwargs: P.kwargs) -> T:
        return run_sync(fn(*args, **kwargs))

    name = fn.__name__.removeprefix("a")
    sync.__name__ = name
    sync.__qualname__ = fn.__qualname__.removesuffix(fn.__name__) + name
    if doc is not None:
        sync.__doc__ = doc
    return sync
