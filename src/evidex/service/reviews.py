"""The review queue's JSON API: list, show, claim and resolve items (the reviewer role).

The routes are thin: the store (:mod:`evidex.store`) holds every rule of the queue (leases,
decisions checked per job, one resolve per item), and each route runs it off the event loop's
way only as the app's other reads do. Who acts is the caller's key (:func:`acting_reviewer`):
a request names a reviewer only where no key identifies the caller.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import FastAPI, HTTPException, Path, Query
from pydantic import BaseModel

from evidex.preflight import InputLimits
from evidex.service.auth import Principal
from evidex.service.guards import check_body
from evidex.service.schemas import ReviewItem
from evidex.store import DEFAULT_LEASE_S, SqlStore

__all__ = ["ClaimRequest", "ItemId", "ResolveRequest", "acting_reviewer", "register_review_routes"]

ItemId = Annotated[int, Path(ge=1, le=2**63 - 1, description="a review item's id")]
"""A review item's id: within what the database's integer column holds."""


class ResolveRequest(BaseModel):
    decision: str
    note: str | None = None
    reviewer: str | None = None


class ClaimRequest(BaseModel):
    reviewer: str | None = None
    job: str | None = None
    lease_s: float = DEFAULT_LEASE_S


def acting_reviewer(principal: Principal, named: str | None) -> str | None:
    """Who resolves or claims: the key's name. A request may name someone only where no key
    identifies the caller (no keys yet, or --no-auth)."""
    if not principal.key_id:
        return named
    if named is not None and named != principal.name:
        raise HTTPException(
            status_code=422,
            detail=f"reviewer {named!r} is not the caller; this key acts as {principal.name!r}",
        )
    return principal.name


def register_review_routes(
    app: FastAPI, store: SqlStore, *, reviewer: Any, limits: InputLimits
) -> None:
    """Add ``/review`` and its item routes; ``reviewer``: the dependency that admits the
    reviewer role (it yields the caller)."""

    @app.get("/review", dependencies=[reviewer], response_model=list[ReviewItem])
    async def review_list(
        status: str = "pending",
        job: str | None = None,
        limit: Annotated[int, Query(ge=1, le=10_000)] = 100,
    ) -> list[dict[str, Any]]:
        return store.list_reviews(status=None if status == "all" else status, job=job, limit=limit)

    @app.post("/review/claim", response_model=ReviewItem | None)
    async def review_claim(body: ClaimRequest, who: Principal = reviewer) -> dict[str, Any] | None:
        """Lease the oldest free pending item to the reviewer (null when none is free)."""
        check_body(body, limits)
        name = acting_reviewer(who, body.reviewer)
        if not name:
            raise HTTPException(status_code=422, detail="name the reviewer who claims")
        return store.claim_review(name, job=body.job, lease_s=body.lease_s)

    @app.get("/review/{item_id}", dependencies=[reviewer], response_model=ReviewItem)
    async def review_show(item_id: ItemId) -> dict[str, Any]:
        return store.get_review(item_id)

    @app.post("/review/{item_id}/resolve", response_model=ReviewItem)
    async def review_resolve(
        item_id: ItemId, body: ResolveRequest, who: Principal = reviewer
    ) -> dict[str, Any]:
        check_body(body, limits)
        return store.resolve_review(
            item_id,
            decision=body.decision,
            note=body.note,
            reviewer=acting_reviewer(who, body.reviewer),
        )
