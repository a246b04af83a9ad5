"""The service's response models, so ``/openapi.json`` describes every answer it gives.

The job endpoints answer with the job result models themselves (``RerankResult``,
``ClassifyResult``, ``AuditResult``, ``AuditDecision``); ``POST /tier`` with
:class:`TierReport`, the shape of ``TierResult.report()`` and its optional context. The rest
are the store's rows (review items, audit-log rows, keys) as they have always been sent: the
models describe the JSON, they do not change it (timestamps stay ``datetime.isoformat()``).
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, PlainSerializer

from evidex.jobs.tier import TierReport

__all__ = [
    "ERROR_RESPONSES",
    "TEXT_RESPONSES",
    "AuditRow",
    "ErrorBody",
    "Health",
    "Key",
    "NewKey",
    "ReviewDecision",
    "ReviewItem",
    "ReviewItemDecisions",
    "TierReport",
]

IsoDateTime = Annotated[
    datetime, PlainSerializer(lambda value: value.isoformat(), return_type=str, when_used="json")
]
"""A timestamp sent as ``datetime.isoformat()`` (``+00:00``, not pydantic's ``Z``), as the
service always has."""


class Health(BaseModel):
    status: str
    version: str
    schema_version: int


class ReviewDecision(BaseModel):
    """One decision on a review item: a reviewer's (``kind`` ``review``) or the adjudication
    of a disagreement (``adjudication``)."""

    reviewer: str
    kind: str
    decision: str
    note: str | None = None
    decided_at: IsoDateTime


class ReviewItem(BaseModel):
    """One review-queue item: why it is there, what the reviewer reads (``payload``, with its
    passages in full), the lease, its assignee, how many decisions it needs and has, and the
    final decision (``status`` ``disputed``: its reviewers disagree and it waits for an
    adjudication)."""

    model_config = ConfigDict(extra="allow")

    id: int
    job: str
    status: str
    reason: str
    risk: str
    run_id: str
    batch_id: str
    passage_ids: list[str]
    payload: dict[str, Any]
    decision: str | None = None
    note: str | None = None
    reviewer: str | None = None
    created_at: IsoDateTime
    resolved_at: IsoDateTime | None = None
    lease_holder: str | None = None
    lease_expires_at: IsoDateTime | None = None
    dedup_key: str | None = None
    decisions_required: int = 1
    decisions_made: int = 0
    assignee: str | None = None


class ReviewItemDecisions(ReviewItem):
    """One item as its own endpoints answer: with the decisions the caller may see (none of a
    pending item before the caller has decided it, so no reviewer leans on another's)."""

    decisions: list[ReviewDecision] = Field(default_factory=list)


class AuditRow(BaseModel):
    """One audit-log row: a judge exchange, cache hit, fallback, review routing or input note."""

    model_config = ConfigDict(extra="allow")

    id: int
    time: IsoDateTime
    run_id: str
    job: str
    step: str
    status: str
    query_hash: str
    batch_id: str
    judge_id: str
    model_version: str
    prompt_version: str
    attempt: int
    temperature: float | None = None
    raw_output: str | None = None
    errors: list[Any]
    labels: Any = None
    latency_ms: float | None = None
    prompt_tokens: int
    completion_tokens: int
    cache_key: str
    detail: dict[str, Any]


class Key(BaseModel):
    """An API key as listed: never its secret."""

    key_id: str
    name: str
    role: str
    created_at: IsoDateTime
    revoked_at: IsoDateTime | None = None


class NewKey(Key):
    """A key just made: the one response that shows its secret."""

    key: str = Field(description="the secret, sent as 'Authorization: Bearer KEY'")


class ValidationProblem(BaseModel):
    """Where a request is wrong (``["body", "passages", 3, "text"]``) and what is wrong."""

    loc: list[str | int]
    msg: str
    type: str


class ErrorBody(BaseModel):
    """Every error the service answers: ``detail`` says what to change (one message, or one
    entry per field of a request of the wrong shape); ``error`` names the kind of error, where
    one of the service's own checks made it (absent from 401, 403 and 404)."""

    error: str | None = Field(
        default=None, description="RequestValidationError, InputError, ReviewConflict ..."
    )
    detail: str | list[ValidationProblem]


ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    "4XX": {"model": ErrorBody, "description": "The request must change (never echoed back)"},
    "5XX": {"model": ErrorBody, "description": "The input was fine; running it failed"},
}
"""The error responses of every operation (in place of FastAPI's default 422 schema, which
describes none of them)."""

_ERROR_JSON = {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}}

TEXT_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {"content": {"text/plain": {"schema": {"type": "string"}}}},
    "4XX": {"description": ERROR_RESPONSES["4XX"]["description"], "content": _ERROR_JSON},
    "5XX": {"description": ERROR_RESPONSES["5XX"]["description"], "content": _ERROR_JSON},
}
"""The responses of an operation that answers text (``/metrics``): its errors are JSON still,
which an operation's text response class would otherwise claim for them too."""
