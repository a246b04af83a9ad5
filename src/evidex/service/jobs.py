"""The four job endpoints, thin layers over the async library calls.

Each request model carries the job's own options under the same names as the library's
options type (``TierOptions``, ``RerankOptions``, ``ClassifyOptions``, ``AuditOptions``; a test
keeps them in step), plus the input and the judge spec. ``POST /audit`` returns the internal
audit; ``POST /audit/decision`` only the decision object that may be shown to end users (no
judge output).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

from fastapi import FastAPI
from pydantic import BaseModel, Field

from evidex.harness.runner import HarnessSettings
from evidex.jobs.audit import (
    DEFAULT_CLAIMS_PER_BATCH,
    DEFAULT_SEGMENT_TOKENS,
    AuditDecision,
    AuditPolicy,
    AuditResult,
    aaudit,
)
from evidex.jobs.classify import DEFAULT_THRESHOLD, ClassifyResult, aclassify
from evidex.jobs.rerank import (
    DEFAULT_STEP,
    DEFAULT_TOP_K,
    DEFAULT_TOP_N,
    DEFAULT_WINDOW,
    RerankResult,
    arerank,
)
from evidex.jobs.select import select_context
from evidex.jobs.tier import DEFAULT_BATCH, atier
from evidex.judging import Judge
from evidex.preflight import InputLimits
from evidex.service.guards import check_body
from evidex.service.schemas import TierReport
from evidex.store import SqlStore
from evidex.tasks.classify import ClassifyExample
from evidex.tasks.custom import BUILTIN_PROMPT, Prompt
from evidex.tasks.tier import TierExample
from evidex.types import Passage, RiskLevel, TierScheme

__all__ = [
    "AuditRequest",
    "ClassifyRequest",
    "JobRequest",
    "RerankRequest",
    "TierRequest",
    "register_job_routes",
]


class JobRequest(BaseModel):
    """What every job request has: the judge spec (None: the job's configured judge)."""

    judge: str | None = None
    input_fields: ClassVar[frozenset[str]] = frozenset()
    """Fields that are the job's input, not its options."""

    def options(self) -> dict[str, Any]:
        """The job's options, as the library call takes them (typed values, not dumps)."""
        return {
            k: getattr(self, k)
            for k in type(self).model_fields
            if k != "judge" and k not in self.input_fields
        }


class TierRequest(JobRequest):
    query: str
    passages: list[Passage]
    risk: RiskLevel = RiskLevel.LOW
    batch_size: int = DEFAULT_BATCH
    tiers: TierScheme | None = None
    examples: list[TierExample] | None = None
    review_sample_rate: float = 1.0
    policy: str | None = Field(default=None, description="strict | standard | broad")
    budget: int = 4000
    input_fields: ClassVar[frozenset[str]] = frozenset({"query", "passages", "policy", "budget"})


class RerankRequest(JobRequest):
    query: str
    passages: list[Passage]
    strategy: str | None = Field(
        default=None, description="allpairs | pairwise | listwise | pointwise"
    )
    top_k: int = DEFAULT_TOP_K
    top_n: int = DEFAULT_TOP_N
    window: int = DEFAULT_WINDOW
    step: int = DEFAULT_STEP
    check_grounding: bool = Field(
        default=False, description="check that the top-k answer the query (review if not)"
    )
    input_fields: ClassVar[frozenset[str]] = frozenset({"query", "passages"})


class ClassifyRequest(JobRequest):
    input: str
    passages: list[Passage]
    labels: Any = Field(description="the taxonomy: a list of {label, description} or a mapping")
    threshold: float = DEFAULT_THRESHOLD
    risk: RiskLevel = RiskLevel.LOW
    multi_label: bool = False
    constraints: list[str] | None = None
    examples: list[ClassifyExample] | None = None
    input_fields: ClassVar[frozenset[str]] = frozenset({"input", "passages", "labels"})


class AuditRequest(JobRequest):
    answer: str
    passages: list[Passage | str]
    answer_id: str | None = None
    question: str | None = None
    mode: str = "one-pass"
    risk: RiskLevel = RiskLevel.LOW
    policy: AuditPolicy | None = None
    segment_tokens: int = DEFAULT_SEGMENT_TOKENS
    claims_per_batch: int = DEFAULT_CLAIMS_PER_BATCH
    input_fields: ClassVar[frozenset[str]] = frozenset(
        {"answer", "passages", "answer_id", "question"}
    )


def register_job_routes(
    app: FastAPI,
    store: SqlStore,
    judge_for: Callable[[str | None, str], Judge],
    settings: HarnessSettings,
    dependencies: Sequence[Any] = (),
    limits: InputLimits | None = None,
    prompts: Mapping[str, Prompt] | None = None,
) -> None:
    """Add the four job endpoints; ``dependencies`` guard each (the caller's role), ``limits``
    bound what one request may carry. ``prompts``: the server's own prompt per job, read at
    start from its configuration; a request can never name a prompt file."""
    guard = list(dependencies)
    bounds = limits or InputLimits()
    configured_prompts = dict(prompts or {})

    async def run(body: JobRequest, job: str) -> dict[str, Any]:
        # a walk over every text of a body of megabytes: off the event loop, like planning
        await asyncio.to_thread(check_body, body, bounds)
        return {
            "judge": judge_for(body.judge, job),
            "store": store,
            "settings": settings,
            "prompt": configured_prompts.get(job, BUILTIN_PROMPT),
        }

    @app.post(
        "/tier", dependencies=guard, response_model=TierReport, response_model_exclude_unset=True
    )
    async def tier_endpoint(body: TierRequest) -> dict[str, Any]:
        options = await run(body, "tier")
        result = await atier(body.query, body.passages, **options, **body.options())
        report = result.report()
        if body.policy:
            report["context"] = select_context(result, body.policy, body.budget).model_dump(
                mode="json"
            )
        return report

    @app.post("/rerank", dependencies=guard, response_model=RerankResult)
    async def rerank_endpoint(body: RerankRequest) -> dict[str, Any]:
        options = await run(body, "rerank")
        result = await arerank(body.query, body.passages, **options, **body.options())
        # the strict top-k, as the CLI prints it; the library's result keeps the full order
        return result.report(limit=result.top_k)

    @app.post("/classify", dependencies=guard, response_model=ClassifyResult)
    async def classify_endpoint(body: ClassifyRequest) -> dict[str, Any]:
        options = await run(body, "classify")
        result = await aclassify(
            body.input, body.passages, body.labels, **options, **body.options()
        )
        return result.model_dump(mode="json")

    async def _audit(body: AuditRequest) -> Any:
        options = await run(body, "audit")
        return await aaudit(
            body.answer,
            body.passages,
            answer_id=body.answer_id,
            question=body.question,
            **options,
            **body.options(),
        )

    @app.post("/audit", dependencies=guard, response_model=AuditResult)
    async def audit_endpoint(body: AuditRequest) -> dict[str, Any]:
        return (await _audit(body)).report()  # type: ignore[no-any-return]

    @app.post("/audit/decision", dependencies=guard, response_model=AuditDecision)
    async def audit_decision_endpoint(body: AuditRequest) -> dict[str, Any]:
        return (await _audit(body)).decision.model_dump(mode="json")  # type: ignore[no-any-return]
