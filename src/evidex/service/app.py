"""FastAPI app factory. Judges are built once per spec and kept, so a model loads once and a
judge's in-flight limit and circuit breaker hold across every request. The job endpoints are in
:mod:`evidex.service.jobs`; the review queue, the audit log, metrics and health here."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

try:
    from fastapi import FastAPI, HTTPException, Request
    from fastapi.responses import JSONResponse, PlainTextResponse
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    from evidex.errors import MissingExtraError

    raise MissingExtraError("the HTTP service", "service") from exc

from pydantic import BaseModel

from evidex._version import __version__
from evidex.config import load_settings
from evidex.errors import EvidexError, ReviewConflict, RunError, UsageError
from evidex.harness.metrics import metrics
from evidex.harness.runner import HarnessSettings
from evidex.jobs import resolve_judge
from evidex.judging import Judge
from evidex.store import DEFAULT_LEASE_S, SqlStore, open_store

__all__ = ["create_app"]


class ResolveRequest(BaseModel):
    decision: str
    note: str | None = None
    reviewer: str | None = None


class ClaimRequest(BaseModel):
    reviewer: str
    job: str | None = None
    lease_s: float = DEFAULT_LEASE_S


def create_app(
    store: SqlStore | str | None = None,
    *,
    judges: Mapping[str, Judge] | None = None,
    allowed_judges: set[str] | None = None,
) -> FastAPI:
    """Build the app. ``judges`` pre-builds judges by spec (tests, custom backends);
    ``allowed_judges`` limits which specs a request may name (default: ``EVIDEX_SERVICE_JUDGES``
    as a comma list, else the configured judges of the jobs plus the pre-built ones). Judge
    endpoints and keys come from the server's environment, never from a request."""
    # Read once: a request must not pay for a config-file read, and a server's judges and
    # limits should not change under it when someone edits the file.
    configured = load_settings()
    settings = HarnessSettings.from_config(configured)
    the_store: SqlStore = store if isinstance(store, SqlStore) else open_store(store)
    cache: dict[str, Judge] = dict(judges or {})
    env_allowed = {
        s.strip() for s in os.environ.get("EVIDEX_SERVICE_JUDGES", "").split(",") if s.strip()
    }
    allowed = allowed_judges or env_allowed or set(configured.judges.values()) | set(cache)

    def judge_for(spec: str | None, job: str) -> Judge:
        spec = spec or configured.judges[job]
        if spec not in allowed:
            raise UsageError(
                f"judge {spec!r} is not enabled on this server; enabled: {sorted(allowed)}"
            )
        if spec not in cache:
            cache[spec] = resolve_judge(spec, job)
        return resolve_judge(cache[spec], job)

    app = FastAPI(title="evidex", version=__version__, description="Grade retrieved evidence.")
    app.state.store = the_store
    app.state.judge_for = judge_for
    _mount_prometheus(app)

    @app.exception_handler(EvidexError)
    async def _errors(_: Request, exc: EvidexError) -> JSONResponse:
        status = (
            409
            if isinstance(exc, ReviewConflict)
            else 422
            if isinstance(exc, UsageError)
            else 503
            if isinstance(exc, RunError)
            else 500
        )
        return JSONResponse(
            status_code=status, content={"error": type(exc).__name__, "detail": str(exc)}
        )

    @app.get("/healthz")
    async def healthz() -> dict[str, Any]:
        return {
            "status": "ok",
            "version": __version__,
            "schema_version": the_store.schema_version(),
        }

    @app.get("/review")
    async def review_list(
        status: str = "pending", job: str | None = None, limit: int = 100
    ) -> list[dict[str, Any]]:
        return the_store.list_reviews(
            status=None if status == "all" else status, job=job, limit=limit
        )

    @app.post("/review/claim")
    async def review_claim(body: ClaimRequest) -> dict[str, Any] | None:
        """Lease the oldest free pending item to the reviewer (null when none is free)."""
        return the_store.claim_review(body.reviewer, job=body.job, lease_s=body.lease_s)

    @app.get("/review/{item_id}")
    async def review_show(item_id: int) -> dict[str, Any]:
        return the_store.get_review(item_id)

    @app.post("/review/{item_id}/resolve")
    async def review_resolve(item_id: int, body: ResolveRequest) -> dict[str, Any]:
        return the_store.resolve_review(
            item_id, decision=body.decision, note=body.note, reviewer=body.reviewer
        )

    @app.get("/log")
    async def log(
        last: int = 50, run_id: str | None = None, job: str | None = None
    ) -> list[dict[str, Any]]:
        if last < 1 or last > 10_000:
            raise HTTPException(status_code=422, detail="last must be within 1..10000")
        return the_store.audit_rows(last=last, run_id=run_id, job=job)

    from evidex.service.jobs import register_job_routes

    register_job_routes(app, the_store, judge_for, settings)
    return app


def _mount_prometheus(app: FastAPI) -> None:
    """Expose harness metrics at /metrics in the Prometheus text format."""
    try:
        import prometheus_client as prom
    except ImportError:  # pragma: no cover - the service extra brings it

        @app.get("/metrics")
        async def metrics_json() -> dict[str, Any]:
            return metrics().snapshot()

        return

    registry = prom.CollectorRegistry()
    records = prom.Counter(
        "evidex_records",
        "Harness records by job and status (ok, invalid, error, fallback, cache, review, note)",
        ["job", "status"],
        registry=registry,
    )
    latency = prom.Histogram(
        "evidex_judge_latency_seconds",
        "Judge call latency",
        ["job"],
        registry=registry,
        buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120),
    )
    queue = prom.Histogram(
        "evidex_judge_queue_seconds",
        "Time a judge call waited for a slot of the judge's in-flight limit (not in latency)",
        ["job"],
        registry=registry,
        buckets=(0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
    )
    tokens = prom.Counter("evidex_tokens", "Judge tokens", ["job", "kind"], registry=registry)

    def forward(record: Any) -> None:
        records.labels(record.job, record.status).inc()
        if record.latency_ms is not None:
            latency.labels(record.job).observe(record.latency_ms / 1000)
        if "queue_ms" in record.detail:
            queue.labels(record.job).observe(record.detail["queue_ms"] / 1000)
        tokens.labels(record.job, "prompt").inc(record.prompt_tokens)
        tokens.labels(record.job, "completion").inc(record.completion_tokens)

    metrics().add_listener(forward)

    @app.get("/metrics")
    async def prometheus_metrics() -> PlainTextResponse:
        return PlainTextResponse(
            prom.generate_latest(registry).decode(), media_type=prom.CONTENT_TYPE_LATEST
        )
