"""The review UI's item routes: one item's page, claiming it, deciding it, and (an admin's)
assigning it and adjudicating its reviewers' disagreement.

An item's page shows the decisions the reviewer may see (``evidex.store.visible_decisions``:
none of a pending item before they have decided it), and a decision form only where they may
decide: the item is pending, not assigned to someone else, and not decided by them yet. After
a decision the page goes on to the next item of the reviewer's filter that they may decide.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlencode

from fastapi import FastAPI, Request
from fastapi.responses import RedirectResponse, Response

from evidex.errors import InputError, ReviewConflict
from evidex.service._ui_pages import PageError, Pages, now
from evidex.service._ui_views import FACETS, attempts_of, decision_from_form, item_view
from evidex.service.auth import Principal
from evidex.store import DEFAULT_LEASE_S, visible_decisions

__all__ = ["register_item_routes"]


def _query(filters: Mapping[str, str], **extra: Any) -> str:
    return urlencode({**extra, **{k: v for k, v in filters.items() if v and k != "status"}})


def register_item_routes(app: FastAPI, pages: Pages) -> None:
    store = pages.store

    async def item_page(
        request: Request,
        who: Principal,
        item_id: int,
        *,
        status: int = 200,
        error: str | None = None,
        filters: Mapping[str, str] | None = None,
    ) -> Response:
        def read() -> tuple[dict[str, Any], list[dict[str, Any]], list[dict[str, Any]]]:
            item = store.get_review(item_id)
            rows = store.audit_rows(run_id=str(item["run_id"]))
            every = store.review_decisions([item_id]).get(item_id, [])
            return item, rows, every

        try:
            item, rows, every = await asyncio.to_thread(read)
        except InputError as exc:
            raise PageError(404, str(exc)) from exc
        filters = filters if filters is not None else pages.filters_of(request.query_params)
        provenance = next(
            (r for r in reversed(rows) if r.get("prompt_version")), {"judge_id": "", "prompt": ""}
        )
        queue = await pages.queue_of({**filters, "status": str(item["status"])})
        ids = [int(r["id"]) for r in queue.rows]
        earlier = [i for i in ids if i < item_id]
        later = [i for i in ids if i > item_id]
        holder, until = item.get("lease_holder"), item.get("lease_expires_at")
        lease = {"holder": holder, "until": until} if holder and until and until > now() else None
        decided = any(x["reviewer"] == who.name and x["kind"] == "review" for x in every)
        assignee = item.get("assignee")
        admin = who.role == "admin"
        reviewers: list[str] = []
        if admin and item["status"] in ("pending", "disputed"):
            keys = await asyncio.to_thread(store.list_keys)
            reviewers = sorted({k.name for k in keys if k.role in ("reviewer", "admin")})
        notice = await pages.notice(request.query_params.get("resolved"))
        return pages.render(
            request,
            "item.html",
            status,
            who=who,
            title=f"Review item {item_id}",
            item=item,
            view=item_view(item),
            attempts=attempts_of(item, rows),
            provenance=provenance,
            lease=lease,
            mine=bool(lease and lease["holder"] == who.name),
            decisions=visible_decisions(item, every, who.name),
            decided=decided,
            can_decide=item["status"] == "pending"
            and not decided
            and (not assignee or assignee == who.name),
            can_adjudicate=admin and item["status"] == "disputed",
            admin=admin,
            reviewers=reviewers,
            prev_id=earlier[-1] if earlier else None,
            next_id=later[0] if later else None,
            filters={k: v for k, v in filters.items() if k != "status"},
            error=error,
            notice=notice,
        )

    async def onward(who: Principal, item_id: int, filters: Mapping[str, str]) -> Response:
        """After a decision: the next item the reviewer may decide, else the queue."""
        target = await pages.later(filters, item_id, who)
        query = _query(filters, resolved=item_id)
        url = f"/ui/item/{target}?{query}" if target is not None else f"/ui/?{query}"
        return RedirectResponse(url, status_code=303)

    @app.get("/ui/item/{item_id}", include_in_schema=False)
    async def item_show(request: Request, item_id: int) -> Response:
        return await item_page(request, await pages.caller(request), item_id)

    @app.post("/ui/item/{item_id}/claim", include_in_schema=False)
    async def item_claim(request: Request, item_id: int) -> Response:
        who = await pages.caller(request)
        form = await pages.checked_form(request)
        try:
            await asyncio.to_thread(store.claim_item, item_id, who.name, lease_s=DEFAULT_LEASE_S)
        except ReviewConflict as exc:
            raise PageError(409, str(exc)) from exc
        except InputError as exc:
            raise PageError(404, str(exc)) from exc
        back = pages.filters_of({k: form.get(k) for k in FACETS})
        return RedirectResponse(f"/ui/item/{item_id}?{_query(back)}", status_code=303)

    async def decide(request: Request, item_id: int, adjudicate: bool) -> Response:
        who = await (pages.admin(request) if adjudicate else pages.caller(request))
        form = await pages.checked_form(request)
        filters = pages.filters_of({k: form.get(k) for k in FACETS})
        if adjudicate:
            filters["status"] = "disputed"
        try:
            item = await asyncio.to_thread(store.get_review, item_id)
        except InputError as exc:
            raise PageError(404, str(exc)) from exc
        note = form.get("note").strip() or None
        record = store.adjudicate_review if adjudicate else store.resolve_review
        try:
            decision = decision_from_form(item, item_view(item), form)
            await asyncio.to_thread(
                record, item_id, decision=decision, note=note, reviewer=who.name
            )
        except ReviewConflict as exc:
            raise PageError(409, str(exc)) from exc
        except InputError as exc:
            return await item_page(
                request, who, item_id, status=422, error=str(exc), filters=filters
            )
        if adjudicate:
            url = f"/ui/item/{item_id}?{_query(filters, resolved=item_id)}"
            return RedirectResponse(url, status_code=303)
        return await onward(who, item_id, filters)

    @app.post("/ui/item/{item_id}/resolve", include_in_schema=False)
    async def item_resolve(request: Request, item_id: int) -> Response:
        return await decide(request, item_id, adjudicate=False)

    @app.post("/ui/item/{item_id}/adjudicate", include_in_schema=False)
    async def item_adjudicate(request: Request, item_id: int) -> Response:
        return await decide(request, item_id, adjudicate=True)

    @app.post("/ui/item/{item_id}/assign", include_in_schema=False)
    async def item_assign(request: Request, item_id: int) -> Response:
        await pages.admin(request)
        form = await pages.checked_form(request)
        assignee = None if form.get("unassign") else form.get("assign_to").strip()
        if assignee == "":
            raise PageError(422, "name the reviewer to assign the item to")
        try:
            await asyncio.to_thread(store.assign_review, item_id, assignee)
        except ReviewConflict as exc:
            raise PageError(409, str(exc)) from exc
        except InputError as exc:
            raise PageError(404 if "no review item" in str(exc) else 422, str(exc)) from exc
        back = pages.filters_of({k: form.get(k) for k in FACETS})
        return RedirectResponse(f"/ui/item/{item_id}?{_query(back)}", status_code=303)
