"""The review queue's JSON API: list, show, claim and resolve items (the reviewer role);
assign an item and adjudicate a disagreement (the admin role).

The routes are thin: the store (:mod:`evidex.store`) holds every rule of the queue (leases,
assignment, decisions checked per job, several reviewers per item, one resolve per item) and
runs in a worker thread, off the event loop. Who acts is the caller's key
(:func:`acting_reviewer`): a request names a reviewer only where no key identifies the caller.
An item's own endpoints answer with the decisions the caller may see, never another
reviewer's decision on a pending item the caller has not decided.
"""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

from fastapi import FastAPI, HTTPException, Path, Query
from pydantic import BaseModel, Field

from evidex.preflight import InputLimits
from evidex.service.auth import Principal
from evidex.service.guards import check_body
from evidex.service.schemas import ReviewItem, ReviewItemDecisions
from evidex.store import DEFAULT_LEASE_S, SqlStore, visible_decisions

__all__ = [
    "AdjudicateRequest",
    "AssignRequest",
    "ClaimRequest",
    "ItemId",
    "ResolveRequest",
    "acting_reviewer",
    "register_review_routes",
    "with_decisions",
]

ItemId = Annotated[int, Path(ge=1, le=2**63 - 1, description="a review item's id")]
"""A review item's id: within what the database's integer column holds."""


class ResolveRequest(BaseModel):
    decision: str
    note: str | None = None
    reviewer: str | None = None


class AdjudicateRequest(BaseModel):
    decision: str = Field(description="the decision that settles the reviewers' disagreement")
    note: str | None = None


class AssignRequest(BaseModel):
    assignee: str | None = Field(
        default=None, description="the reviewer's name; null (or empty) assigns it to nobody"
    )


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


def with_decisions(store: SqlStore, item: dict[str, Any], viewer: str | None) -> dict[str, Any]:
    """``item`` with the decisions ``viewer`` may see (:func:`evidex.store.visible_decisions`)."""
    every = store.review_decisions([int(item["id"])]).get(int(item["id"]), [])
    return {**item, "decisions": visible_decisions(item, every, viewer)}


def register_review_routes(
    app: FastAPI, store: SqlStore, *, reviewer: Any, admin: Any, limits: InputLimits
) -> None:
    """Add ``/review`` and its item routes; ``reviewer`` and ``admin``: the dependencies that
    admit those roles (each yields the caller)."""

    @app.get("/review", dependencies=[reviewer], response_model=list[ReviewItem])
    async def review_list(
        status: str = "pending",
        job: str | None = None,
        assignee: Annotated[
            str | None, Query(description="only items assigned to this reviewer; '' unassigned")
        ] = None,
        limit: Annotated[int, Query(ge=1, le=10_000)] = 100,
    ) -> list[dict[str, Any]]:
        """Items oldest first (``status``: pending, disputed, resolved or all)."""
        return await asyncio.to_thread(
            store.list_reviews,
            status=None if status == "all" else status,
            job=job,
            assignee=assignee,
            limit=limit,
        )

    @app.post("/review/claim", response_model=ReviewItem | None)
    async def review_claim(body: ClaimRequest, who: Principal = reviewer) -> dict[str, Any] | None:
        """Lease the oldest free pending item to the reviewer, the items assigned to them
        first (null when none is free)."""
        check_body(body, limits)
        name = acting_reviewer(who, body.reviewer)
        if not name:
            raise HTTPException(status_code=422, detail="name the reviewer who claims")
        return await asyncio.to_thread(store.claim_review, name, job=body.job, lease_s=body.lease_s)

    @app.get("/review/{item_id}", response_model=ReviewItemDecisions)
    async def review_show(item_id: ItemId, who: Principal = reviewer) -> dict[str, Any]:
        def read() -> dict[str, Any]:
            return with_decisions(store, store.get_review(item_id), who.name)

        return await asyncio.to_thread(read)

    @app.post("/review/{item_id}/resolve", response_model=ReviewItemDecisions)
    async def review_resolve(
        item_id: ItemId, body: ResolveRequest, who: Principal = reviewer
    ) -> dict[str, Any]:
        """Record the caller's decision. An item that needs several decisions stays pending
        until it has them, then is resolved (they agree) or disputed (they do not)."""
        check_body(body, limits)
        name = acting_reviewer(who, body.reviewer)

        def write() -> dict[str, Any]:
            item = store.resolve_review(
                item_id, decision=body.decision, note=body.note, reviewer=name
            )
            return with_decisions(store, item, name)

        return await asyncio.to_thread(write)

    @app.post("/review/{item_id}/adjudicate", response_model=ReviewItemDecisions)
    async def review_adjudicate(
        item_id: ItemId, body: AdjudicateRequest, who: Principal = admin
    ) -> dict[str, Any]:
        """Settle a disputed item (its reviewers disagree) with a decision: an admin's."""
        check_body(body, limits)

        def write() -> dict[str, Any]:
            item = store.adjudicate_review(
                item_id, decision=body.decision, note=body.note, reviewer=who.name
            )
            return with_decisions(store, item, who.name)

        return await asyncio.to_thread(write)

    @app.post("/review/{item_id}/assign", dependencies=[admin], response_model=ReviewItem)
    async def review_assign(item_id: ItemId, body: AssignRequest) -> dict[str, Any]:
        """Assign an open item to a reviewer (null: to nobody): while it is assigned, only
        they may claim or decide it."""
        check_body(body, limits)
        return await asyncio.to_thread(store.assign_review, item_id, body.assignee)
