"""FastAPI app factory. Judges are built once per spec and kept, so a model loads once and a
judge's in-flight limit and circuit breaker hold across every request. The job endpoints are in
:mod:`evidex.service.jobs`, who may call what in :mod:`evidex.service.auth`; the review queue,
the audit log, keys, metrics and health here."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

try:
    from fastapi import Depends, FastAPI, HTTPException, Request
    from fastapi.exceptions import RequestValidationError
    from fastapi.middleware.cors import CORSMiddleware
    from fastapi.middleware.trustedhost import TrustedHostMiddleware
    from fastapi.openapi.docs import get_swagger_ui_html
    from fastapi.responses import HTMLResponse, JSONResponse, PlainTextResponse
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    from evidex.errors import MissingExtraError

    raise MissingExtraError("the HTTP service", "service") from exc

from pydantic import BaseModel

from evidex._version import __version__
from evidex.config import load_settings
from evidex.errors import EvidexError, ReviewConflict, RunError, UsageError
from evidex.harness.metrics import grounding_outcome, metrics
from evidex.harness.runner import HarnessSettings
from evidex.jobs import judge_key, resolve_judge
from evidex.judging import Judge
from evidex.preflight import InputLimits
from evidex.pricing import Price, estimate_cost
from evidex.service.auth import AuthMode, Gate
from evidex.service.guards import (
    BodyLimit,
    SecurityHeaders,
    check_body,
    error_body,
    max_body_bytes_from_env,
    validation_error_handler,
)
from evidex.service.reviews import register_review_routes
from evidex.service.schemas import (
    ERROR_RESPONSES,
    TEXT_RESPONSES,
    AuditRow,
    Health,
    Key,
    NewKey,
)
from evidex.store import ROLES, SqlStore, open_store
from evidex.types import Usage

__all__ = ["LOOPBACK_HOSTS", "allowed_hosts_for", "create_app"]

LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "[::1]", "::1")
"""The Host headers a service answers by default: names of this machine only, so a page on
another site cannot reach it through DNS rebinding."""


def allowed_hosts_for(host: str, given: Sequence[str]) -> list[str]:
    """The Host headers a server bound to ``host`` answers: the given ones, else this machine's
    names plus the bound address (any, when bound to every interface and none is given)."""
    if given:
        return list(given)
    if host in ("0.0.0.0", "::", ""):
        return ["*"]
    return [*LOOPBACK_HOSTS, *([] if host in LOOPBACK_HOSTS else [host])]


SECURITY_HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Content-Security-Policy": (
        "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; "
        "frame-ancestors 'none'; form-action 'self'; base-uri 'none'"
    ),
    "Cache-Control": "no-store",
}


class KeyRequest(BaseModel):
    role: str
    name: str | None = None


def create_app(
    store: SqlStore | str | None = None,
    *,
    judges: Mapping[str, Judge] | None = None,
    allowed_judges: set[str] | None = None,
    auth: AuthMode = "auto",
    allowed_hosts: Sequence[str] = LOOPBACK_HOSTS,
    cors_origins: Sequence[str] = (),
    max_body_bytes: int | None = None,
    limits: InputLimits | None = None,
) -> FastAPI:
    """Build the app. ``judges`` pre-builds judges by spec (tests, custom backends);
    ``allowed_judges`` limits which specs a request may name (default: ``EVIDEX_SERVICE_JUDGES``
    as a comma list, else the configured judges of the jobs plus the pre-built ones). Judge
    endpoints and keys come from the server's environment, never from a request.

    ``auth``: see :mod:`evidex.service.auth`. ``allowed_hosts``: the Host headers answered
    (``["*"]`` for any); ``cors_origins``: the browser origins allowed to call the API from
    their pages (none by default).

    ``max_body_bytes``: the largest request body (default ``EVIDEX_MAX_BODY_MB``, else 4 MiB),
    refused with 413 before it is parsed; ``limits``: passages per request and characters per
    text (:class:`~evidex.preflight.InputLimits`), refused with 422 naming the field."""
    # Read once: a request must not pay for a config-file read, and a server's judges and
    # limits should not change under it when someone edits the file.
    configured = load_settings()
    settings = HarnessSettings.from_config(configured)
    the_store: SqlStore = store if isinstance(store, SqlStore) else open_store(store)
    the_store.settle_review_settings(configured.review)
    given = dict(judges or {})
    built: dict[tuple[str, str], Judge] = {}
    env_allowed = {
        s.strip() for s in os.environ.get("EVIDEX_SERVICE_JUDGES", "").split(",") if s.strip()
    }
    allowed = allowed_judges or env_allowed or set(configured.judges.values()) | set(given)

    def judge_for(spec: str | None, job: str) -> Judge:
        spec = spec or configured.judges[job]
        if spec not in allowed:
            raise UsageError(
                f"judge {spec!r} is not enabled on this server; enabled: {sorted(allowed)}"
            )
        if spec in given:
            return resolve_judge(given[spec], job)
        # one judge per spec and the options its jobs register for it (evidex._registered:
        # local:qwen's score mode), shared by every request of those jobs
        key = judge_key(job, spec)
        if key not in built:
            built[key] = resolve_judge(spec, job)
        return resolve_judge(built[key], job)

    gate = Gate(the_store, auth)
    client, reviewer, admin = (
        Depends(gate.requires("client")),
        Depends(gate.requires("reviewer")),
        Depends(gate.requires("admin")),
    )
    anyone = Depends(gate.requires(*ROLES, cookie=True))

    app = FastAPI(
        title="evidex",
        version=__version__,
        description="Grade retrieved evidence.",
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
        responses=ERROR_RESPONSES,
    )
    app.state.store = the_store
    app.state.judge_for = judge_for
    app.state.gate = gate
    app.state.limits = bounds = limits or InputLimits()
    app.add_middleware(TrustedHostMiddleware, allowed_hosts=list(allowed_hosts))
    app.add_middleware(BodyLimit, max_bytes=max_body_bytes or max_body_bytes_from_env())
    app.add_exception_handler(RequestValidationError, validation_error_handler)
    if cors_origins:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=list(cors_origins),
            allow_methods=["GET", "POST"],
            allow_headers=["Authorization", "Content-Type"],
        )

    app.add_middleware(SecurityHeaders, headers=SECURITY_HEADERS)

    _mount_prometheus(app, anyone, settings.prices)

    @app.get("/openapi.json", include_in_schema=False, dependencies=[anyone])
    async def openapi() -> JSONResponse:
        return JSONResponse(app.openapi())

    @app.get("/docs", include_in_schema=False, dependencies=[anyone])
    async def docs() -> HTMLResponse:
        page = get_swagger_ui_html(openapi_url="/openapi.json", title="evidex API")
        # Swagger UI's page loads its script from a CDN: widen the policy for this page only.
        page.headers["Content-Security-Policy"] = (
            "default-src 'self' https://cdn.jsdelivr.net 'unsafe-inline'; img-src 'self' data: "
            "https:; frame-ancestors 'none'"
        )
        return page

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
        return JSONResponse(status_code=status, content=error_body(exc))

    @app.get("/healthz", response_model=Health)
    async def healthz() -> dict[str, Any]:
        return {
            "status": "ok",
            "version": __version__,
            "schema_version": the_store.schema_version(),
        }

    register_review_routes(app, the_store, reviewer=reviewer, admin=admin, limits=bounds)

    @app.get("/keys", dependencies=[admin], response_model=list[Key])
    async def keys_list(include_revoked: bool = False) -> list[dict[str, Any]]:
        return [k.as_dict() for k in the_store.list_keys(include_revoked=include_revoked)]

    @app.post("/keys", dependencies=[admin], status_code=201, response_model=NewKey)
    async def keys_create(body: KeyRequest) -> dict[str, Any]:
        """Make a key; the response is the only place its secret is ever shown."""
        check_body(body, bounds)
        key, secret = the_store.create_key(body.role, body.name)
        return {**key.as_dict(), "key": secret}

    @app.post("/keys/{key_id}/revoke", dependencies=[admin], response_model=Key)
    async def keys_revoke(key_id: str) -> dict[str, Any]:
        return the_store.revoke_key(key_id).as_dict()

    @app.get("/log", dependencies=[reviewer], response_model=list[AuditRow])
    async def log(
        last: int = 50, run_id: str | None = None, job: str | None = None
    ) -> list[dict[str, Any]]:
        if last < 1 or last > 10_000:
            raise HTTPException(status_code=422, detail="last must be within 1..10000")
        return the_store.audit_rows(last=last, run_id=run_id, job=job)

    from evidex.loaders import load_prompt
    from evidex.service.jobs import register_job_routes

    prompts = {job: load_prompt(path) for job, path in configured.prompts.items()}
    register_job_routes(
        app, the_store, judge_for, settings, dependencies=[client], limits=bounds, prompts=prompts
    )

    from evidex.service.ui import register_ui

    register_ui(app, reports=configured.reports)
    return app


def _mount_prometheus(app: FastAPI, anyone: Any, prices: Mapping[str, Price]) -> None:
    """Expose harness metrics at /metrics in the Prometheus text format; ``prices``: the
    configured price table, for the estimated cost of priced judges' tokens."""
    try:
        import prometheus_client as prom
    except ImportError:  # pragma: no cover - the service extra brings it

        @app.get("/metrics", dependencies=[anyone])
        async def metrics_json() -> dict[str, Any]:
            return metrics().snapshot()

        return

    registry = prom.CollectorRegistry()

    def counter(name: str, doc: str, *labels: str) -> Any:
        return prom.Counter(name, doc, list(labels), registry=registry)

    def histogram(name: str, doc: str, buckets: tuple[float, ...]) -> Any:
        return prom.Histogram(name, doc, ["job"], registry=registry, buckets=buckets)

    records = counter(
        "evidex_records",
        "Harness records by job and status (ok, invalid, error, fallback, cache, review, note)",
        "job",
        "status",
    )
    latency = histogram(
        "evidex_judge_latency_seconds",
        "Judge call latency",
        (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120),
    )
    queue = histogram(
        "evidex_judge_queue_seconds",
        "Time a judge call waited for a slot of the judge's in-flight limit (not in latency)",
        (0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
    )
    tokens = counter("evidex_tokens", "Judge tokens", "job", "kind")
    cost = counter(
        "evidex_cost",
        "Estimated judge cost at the configured prices, in their currency (priced judges only)",
        "job",
        "judge",
    )
    grounding = counter(
        "evidex_rerank_grounding",
        "Rerank grounding checks by outcome (answered, not_answered, fallback)",
        "outcome",
    )

    batch_size = prom.Gauge(
        "evidex_batch_size",
        "Items in the latest batch whose reply validated, by job and judge (adapted to the judge)",
        ["job", "judge"],
        registry=registry,
    )

    def forward(record: Any) -> None:
        records.labels(record.job, record.status).inc()
        if record.status == "ok" and "items" in record.detail:
            batch_size.labels(record.job, record.judge_id).set(record.detail["items"])
        if (outcome := grounding_outcome(record)) is not None:
            grounding.labels(outcome).inc()
        if record.latency_ms is not None:
            latency.labels(record.job).observe(record.latency_ms / 1000)
        if "queue_ms" in record.detail:
            queue.labels(record.job).observe(record.detail["queue_ms"] / 1000)
        tokens.labels(record.job, "prompt").inc(record.prompt_tokens)
        tokens.labels(record.job, "completion").inc(record.completion_tokens)
        used = Usage(prompt_tokens=record.prompt_tokens, completion_tokens=record.completion_tokens)
        spent = estimate_cost(prices, record.judge_id, used)
        if spent is not None:
            cost.labels(record.job, record.judge_id).inc(spent)

    metrics().add_listener(forward)

    @app.get(
        "/metrics",
        dependencies=[anyone],
        response_class=PlainTextResponse,
        responses=TEXT_RESPONSES,
    )
    async def prometheus_metrics() -> PlainTextResponse:
        return PlainTextResponse(
            prom.generate_latest(registry).decode(), media_type=prom.CONTENT_TYPE_LATEST
        )
