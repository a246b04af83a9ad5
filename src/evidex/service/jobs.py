"""HTTP endpoints of the rerank, classify and audit jobs, thin layers over the async library
calls. ``POST /audit`` returns the internal audit; ``POST /audit/decision`` only the decision
object that may be shown to end users (no judge output)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import FastAPI
from pydantic import BaseModel, Field

from evidex.harness.runner import HarnessSettings
from evidex.jobs.audit import aaudit
from evidex.jobs.classify import aclassify
from evidex.jobs.rerank import arerank
from evidex.judging import Judge
from evidex.store import SqlStore
from evidex.types import Passage, RiskLevel

__all__ = ["register_job_routes"]


class RerankRequest(BaseModel):
    query: str
    passages: list[Passage]
    judge: str | None = None
    strategy: str | None = Field(
        default=None, description="allpairs | pairwise | listwise | pointwise"
    )
    top_k: int = 10
    top_n: int = 30


class ClassifyRequest(BaseModel):
    input: str
    passages: list[Passage]
    labels: Any = Field(description="the taxonomy: a list of {label, description} or a mapping")
    judge: str | None = None
    threshold: float = 0.7
    risk: RiskLevel = RiskLevel.LOW
    multi_label: bool = False
    constraints: list[str] | None = None


class AuditRequest(BaseModel):
    answer: str
    passages: list[Passage | str]
    answer_id: str | None = None
    question: str | None = None
    mode: str = "one-pass"
    risk: RiskLevel = RiskLevel.LOW
    judge: str | None = None


def register_job_routes(
    app: FastAPI,
    store: SqlStore,
    judge_for: Callable[[str | None, str], Judge],
    settings: HarnessSettings,
) -> None:
    @app.post("/rerank")
    async def rerank_endpoint(body: RerankRequest) -> dict[str, Any]:
        result = await arerank(
            body.query,
            body.passages,
            strategy=body.strategy,
            top_k=body.top_k,
            top_n=body.top_n,
            judge=judge_for(body.judge, "rerank"),
            store=store,
            settings=settings,
        )
        return result.model_dump(mode="json")

    @app.post("/classify")
    async def classify_endpoint(body: ClassifyRequest) -> dict[str, Any]:
        result = await aclassify(
            body.input,
            body.passages,
            body.labels,
            judge=judge_for(body.judge, "classify"),
            store=store,
            settings=settings,
            threshold=body.threshold,
            risk=body.risk,
            multi_label=body.multi_label,
            constraints=body.constraints,
        )
        return result.model_dump(mode="json")

    async def _audit(body: AuditRequest) -> Any:
        return await aaudit(
            body.answer,
            body.passages,
            answer_id=body.answer_id,
            question=body.question,
            mode=body.mode,
            risk=body.risk,
            judge=judge_for(body.judge, "audit"),
            store=store,
            settings=settings,
        )

    @app.post("/audit")
    async def audit_endpoint(body: AuditRequest) -> dict[str, Any]:
        return (await _audit(body)).report()  # type: ignore[no-any-return]

    @app.post("/audit/decision")
    async def audit_decision_endpoint(body: AuditRequest) -> dict[str, Any]:
        return (await _audit(body)).decision.model_dump(mode="json")  # type: ignore[no-any-return]
