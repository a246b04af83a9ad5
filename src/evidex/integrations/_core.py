"""What every adapter does, apart from any framework: grade texts, say where each one goes.

An adapter hands over its documents' texts in order; evidex numbers them ``passage-1``,
``passage-2`` ... (:func:`evidex.preflight.coerce_passages`), so a grade always finds its way
back to the document it came from by position, whatever ids or metadata the documents carry
(the framework's own ids may be missing or repeated). Which documents a job keeps and the
grades an adapter writes under ``metadata["evidex"]`` are the job's (its definition's
``documents``), read here for every framework, so the three report the same keys.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Any, Protocol

from pydantic import AfterValidator

from evidex.errors import InputError, MissingExtraError
from evidex.jobs import Keep, definition, definitions, job_names, run_sync

if TYPE_CHECKING:
    from evidex.jobs import Documents, JobDefinition

__all__ = [
    "GRADES_KEY",
    "AdaptedJob",
    "AdapterFields",
    "Grade",
    "Grading",
    "adapted_job",
    "adapted_jobs",
    "grading_of",
    "require",
    "run_options",
]

GRADES_KEY = "evidex"
"""The metadata key under which every adapter puts evidex's grades."""

Job = str
"""A job the adapters run: any that :func:`adapted_jobs` lists (the registry's jobs whose
definition says which documents they keep), checked when an adapter is made."""


def require(module: str, what: str, extra: str) -> Any:
    """``module`` imported, or :class:`MissingExtraError` naming the extra that installs it."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingExtraError(what, extra) from exc


@dataclass(frozen=True)
class Grade:
    """Where one document goes: its position in the caller's list, its score (what the
    framework sorts by; None when the judge gave none) and the grades for its metadata."""

    index: int
    score: float | None
    grades: dict[str, Any]

    def onto(self, metadata: Mapping[str, Any]) -> dict[str, Any]:
        """A copy of a document's ``metadata`` with these grades under :data:`GRADES_KEY`. The
        grades of an earlier evidex step (a tier filter before a ranker) are kept where this
        step has no key of the same name, so ``tier`` and ``snippet`` survive a rerank."""
        earlier = metadata.get(GRADES_KEY)
        kept = dict(earlier) if isinstance(earlier, Mapping) else {}
        return {**metadata, GRADES_KEY: {**kept, **self.grades}}


@dataclass(frozen=True)
class Grading:
    """One adapter's settings: which job, how many to keep, and the keywords of the job call.

    The job is any registered job whose definition says which documents it keeps
    (:class:`~evidex.jobs.Documents`): ``job="rerank"`` keeps documents in evidex's ranking,
    the first ``top_k`` (all when None); ``job="tier"`` the documents
    :func:`~evidex.select_context` keeps under ``policy`` and ``token_budget``, most relevant
    tier first; any other job of :func:`adapted_jobs` the documents its definition keeps (the
    check before generating: every document, the first ``top_k``, when the passages suffice,
    none when its decision is to abstain or escalate). ``options`` are the job's own options
    and run keywords (``judge``, ``store``, ``settings``, ``hooks``, ``strategy``, ``risk``...).
    """

    job: Job = "rerank"
    top_k: int | None = None
    policy: str = "standard"
    token_budget: int = 4000
    options: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        _documents(self.job)
        if self.top_k is not None and self.top_k < 1:
            raise InputError(f"top_k must be at least 1, got {self.top_k}")

    async def agrade(self, query: str, texts: Sequence[str]) -> list[Grade]:
        """The documents to keep, in the order to keep them, with their grades."""
        if not texts:
            return []
        spec, documents = _documents(self.job)
        keep = Keep(self.top_k, self.policy, self.token_budget)
        options = {**documents.keywords(keep), **self.options}
        result = await spec.arun({"query": query, "passages": list(texts)}, **options)
        return [
            Grade(index=_index(k.passage_id), score=k.score, grades=k.grades)
            for k in documents.kept(result, keep)
        ]

    def grade(self, query: str, texts: Sequence[str]) -> list[Grade]:
        """:meth:`agrade` from sync code (also inside a running event loop)."""
        return run_sync(self.agrade(query, texts))


def adapted_jobs() -> list[str]:
    """The registered jobs an adapter can run: those whose definition declares which
    documents they keep."""
    return [d.name for d in definitions() if d.documents is not None]


def adapted_job(job: str) -> str:
    """``job`` when an adapter can run it; else a ``ValueError`` naming those it can (for an
    adapter's own field validation, which reports ``ValueError``s as its framework does)."""
    try:
        _documents(job)
    except InputError as exc:
        raise ValueError(str(exc)) from exc
    return job


AdaptedJob = Annotated[str, AfterValidator(adapted_job)]
"""The ``job`` field of a pydantic adapter: checked by :func:`adapted_job` when the adapter is
made, so LangChain's and LlamaIndex's adapters refuse an unknown job with the same message."""


class AdapterFields(Protocol):
    """The fields the LangChain and LlamaIndex adapters both declare (read-only here)."""

    @property
    def job(self) -> str: ...
    @property
    def top_k(self) -> int | None: ...
    @property
    def policy(self) -> str: ...
    @property
    def token_budget(self) -> int: ...
    @property
    def judge(self) -> Any: ...
    @property
    def store(self) -> Any: ...
    @property
    def options(self) -> Mapping[str, Any]: ...


def run_options(judge: Any, store: Any, options: Mapping[str, Any]) -> dict[str, Any]:
    """The job call's keywords of an adapter: its ``judge`` and ``store``, then its own
    ``options``, which win (every adapter merges them in this order)."""
    return {"judge": judge, "store": store, **options}


def grading_of(adapter: AdapterFields) -> Grading:
    """The :class:`Grading` of an adapter whose fields are :class:`AdapterFields`: the mapping
    of those fields onto a job call, written once for the frameworks that share them."""
    options = run_options(adapter.judge, adapter.store, adapter.options)
    return Grading(adapter.job, adapter.top_k, adapter.policy, adapter.token_budget, options)


def _documents(job: str) -> tuple[JobDefinition[Any, Any, Any], Documents[Any]]:
    """The definition of ``job`` and its rule for adapters; a job without one (or no job of
    that name) is an :class:`InputError` naming the jobs an adapter can run."""
    spec = definition(job) if job in job_names() else None
    if spec is None or spec.documents is None:
        adapted = " or ".join(map(repr, adapted_jobs()))
        raise InputError(f"job must be {adapted}, got {job!r}")
    return spec, spec.documents


def _index(passage_id: str) -> int:
    return int(passage_id.removeprefix("passage-")) - 1
