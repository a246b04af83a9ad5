"""The review web UI at ``/ui/``: server-rendered pages over the review queue, for reviewers.

- **Login** with a reviewer or admin key (a client key is refused): the key is checked once
  and a login session is opened in the store, so every replica sharing the database knows it.
  The cookie (``evidex_session``) is HttpOnly, SameSite=Strict, Secure over https. Logout
  ends the session in the store, not only in the browser.
- **CSRF.** Every form carries the session's CSRF token, compared in constant time (403 on a
  mismatch). The login form, which has no session yet, uses a double-submit cookie. Where the
  service asks for no key (``--no-auth``, or ``auto`` on loopback before the first key
  exists) the pages work without a login and the forms carry a token made once per process:
  a page of another site cannot read it, so it cannot post a form in the reviewer's name.
- **Pages.** The queue with filters and their counts, an item with its evidence highlighted
  where the judge quoted it and controls that fit its job, and the agreement of each judge with
  the reviewers (:mod:`evidex.service._ui_agreement`). Every text is escaped by the templates;
  scripts come from ``/ui/static/`` only, as the service's Content-Security-Policy requires.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import secrets
from collections.abc import Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode

from fastapi import FastAPI, HTTPException, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from jinja2 import Environment, FileSystemLoader

from evidex.errors import InputError, ReviewConflict
from evidex.service._ui_agreement import agreement, reviewer_agreement
from evidex.service._ui_views import (
    FACETS,
    Form,
    attempts_of,
    decision_from_form,
    filter_queue,
    item_view,
)
from evidex.service.auth import SESSION_COOKIE, Principal
from evidex.store import DEFAULT_LEASE_S, SqlStore

__all__ = ["LOGIN_CSRF_COOKIE", "register_ui"]

HERE = Path(__file__).resolve().parent
LOGIN_CSRF_COOKIE = "evidex_login_csrf"
MAX_FORM_BYTES = 256 * 1024
"""A decision form is small; a larger body is refused before it is parsed."""


class _PageError(Exception):
    """Ends a page with an error page (or, for 401, a redirect to the login page)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def _now() -> datetime:
    return datetime.now(timezone.utc)


def _safe_next(target: str | None) -> str:
    """Where to go after login: a page of the UI only, never another site."""
    if target and target.startswith("/ui/") and not target.startswith("//"):
        return target
    return "/ui/"


def static_version(directory: Path) -> str:
    """A digest of the UI's script and style sheet: the pages name them with it, so a
    browser may keep them (see :class:`CachedStatic`) and still fetches them anew once they
    change."""
    digest = hashlib.sha256()
    for path in sorted(p for p in directory.iterdir() if p.is_file()):
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:12]


class CachedStatic(StaticFiles):
    """The UI's static files, cacheable: they hold no data (every page stays ``no-store``),
    and the pages ask for them by :func:`static_version`, so a reviewer's browser fetches them
    once, not again with every item."""

    async def get_response(self, path: str, scope: Any) -> Response:
        response = await super().get_response(path, scope)
        if response.status_code == 200:
            response.headers["Cache-Control"] = "public, max-age=31536000, immutable"
        return response


def register_ui(app: FastAPI, *, reports: str | Path = "reports") -> None:
    """Add the review UI to the service's app (its store and gate are on ``app.state``).
    ``reports``: where ``evidex calibrate`` wrote its records, for the staleness banner."""
    store: SqlStore = app.state.store
    check = app.state.gate.requires("reviewer", cookie=True)
    process_csrf = secrets.token_urlsafe(24)
    reports_dir = Path(reports)
    env = Environment(loader=FileSystemLoader(HERE / "templates"), autoescape=True)
    env.filters["when"] = lambda d: d.strftime("%Y-%m-%d %H:%M UTC") if d else ""
    env.filters["qs"] = lambda m: urlencode({k: v for k, v in m.items() if v})
    env.globals["static_version"] = static_version(HERE / "static")

    def render(request: Request, name: str, status: int = 200, **context: Any) -> HTMLResponse:
        session = getattr(request.state, "session", None)
        context.setdefault("who", getattr(request.state, "principal", None))
        html = env.get_template(name).render(
            session=session,
            csrf=session.csrf if session else process_csrf,
            **context,
        )
        return HTMLResponse(html, status_code=status)

    async def _page_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, _PageError)
        if exc.status == 401:
            target = urlencode({"next": request.url.path})
            return RedirectResponse(f"/ui/login?{target}", status_code=303)
        title = {403: "Not allowed", 404: "Not found", 409: "Conflict"}.get(exc.status, "Error")
        return render(request, "error.html", exc.status, title=title, message=exc.message)

    app.add_exception_handler(_PageError, _page_error)
    app.mount("/ui/static", CachedStatic(directory=HERE / "static"), name="ui-static")

    async def caller(request: Request) -> Principal:
        """The reviewer of a page (a session cookie; never a key in the URL)."""
        try:
            principal: Principal = await check(request, None)
        except HTTPException as exc:
            raise _PageError(exc.status_code, str(exc.detail)) from exc
        return principal

    async def form_of(request: Request) -> Form:
        body = await request.body()
        if len(body) > MAX_FORM_BYTES:
            raise _PageError(413, "the form is too large")
        return Form(parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True))

    async def checked_form(request: Request) -> Form:
        """The posted form, once its CSRF token matches the caller's (403 otherwise)."""
        form = await form_of(request)
        session = getattr(request.state, "session", None)
        expected = session.csrf if session else process_csrf
        if not hmac.compare_digest(form.get("csrf").encode(), expected.encode()):
            raise _PageError(403, "the form's CSRF token is missing or wrong; reload the page")
        return form

    def filters_of(source: Mapping[str, str]) -> dict[str, str]:
        wanted = {name: str(source.get(name) or "") for name in FACETS}
        wanted["status"] = source.get("status") or "pending"
        return wanted

    async def queue_of(filters: Mapping[str, str]) -> Any:
        status = filters.get("status") or "pending"

        def read() -> Any:
            rows = store.review_summaries(status=None if status == "all" else status)
            provenance = store.run_provenance(r["run_id"] for r in rows)
            return filter_queue(rows, provenance, filters, _now())

        return await asyncio.to_thread(read)

    # ------------------------------------------------------------------ login

    @app.get("/ui", include_in_schema=False)
    async def ui_root() -> RedirectResponse:
        return RedirectResponse("/ui/", status_code=307)

    @app.get("/ui/login", include_in_schema=False)
    async def login_page(request: Request, next: str | None = None) -> HTMLResponse:
        principal = await app.state.gate.principal(request, None, cookie=True)
        token = secrets.token_urlsafe(24)
        page = render(
            request,
            "login.html",
            who=None,
            login_csrf=token,
            next=_safe_next(next),
            keyless=principal is not None and not principal.key_id,
            signed_in=principal if principal is not None and principal.key_id else None,
        )
        page.set_cookie(
            LOGIN_CSRF_COOKIE,
            token,
            httponly=True,
            samesite="strict",
            path="/ui/login",
            secure=request.url.scheme == "https",
        )
        return page

    @app.post("/ui/login", include_in_schema=False)
    async def login(request: Request) -> Response:
        form = await form_of(request)
        cookie = request.cookies.get(LOGIN_CSRF_COOKIE) or ""
        if not cookie or not hmac.compare_digest(form.get("csrf").encode(), cookie.encode()):
            raise _PageError(403, "the login form is out of date; reload the page and try again")
        secret = form.get("key").strip()
        key = await asyncio.to_thread(store.verify_key, secret) if secret else None
        if key is None:
            return render(
                request,
                "login.html",
                401,
                who=None,
                login_csrf=cookie,
                next=_safe_next(form.get("next")),
                error="that key is unknown or revoked",
            )
        if key.role not in ("reviewer", "admin"):
            raise _PageError(403, f"a {key.role} key cannot use the review UI; use a reviewer key")
        token, session = await asyncio.to_thread(store.open_session, key)
        response = RedirectResponse(_safe_next(form.get("next")), status_code=303)
        response.set_cookie(
            SESSION_COOKIE,
            token,
            max_age=max(1, int((session.expires_at - _now()).total_seconds())),
            httponly=True,
            samesite="strict",
            path="/",
            secure=request.url.scheme == "https",
        )
        response.delete_cookie(LOGIN_CSRF_COOKIE, path="/ui/login")
        return response

    @app.post("/ui/logout", include_in_schema=False)
    async def logout(request: Request) -> Response:
        await caller(request)
        await checked_form(request)
        token = request.cookies.get(SESSION_COOKIE)
        if token:
            await asyncio.to_thread(store.close_session, token)
        response = RedirectResponse("/ui/login", status_code=303)
        response.delete_cookie(SESSION_COOKIE, path="/", httponly=True, samesite="strict")
        return response

    # ------------------------------------------------------------------ queue

    @app.get("/ui/", include_in_schema=False)
    async def queue_page(request: Request) -> HTMLResponse:
        who = await caller(request)
        filters = filters_of(request.query_params)
        view = await queue_of(filters)
        today = _now().replace(hour=0, minute=0, second=0, microsecond=0)
        done = await asyncio.to_thread(store.resolved_by_reviewer, today)
        return render(
            request,
            "queue.html",
            who=who,
            title="Review queue",
            view=view,
            resolved_today=sorted(done.items(), key=lambda kv: (-kv[1], kv[0])),
            filters=filters,
            link_filters={k: v for k, v in filters.items() if k != "status"},
            facets=FACETS,
            now=_now(),
            notice=request.query_params.get("notice"),
            request_resolved=request.query_params.get("resolved"),
        )

    @app.post("/ui/claim", include_in_schema=False)
    async def claim_next(request: Request) -> Response:
        """Lease the oldest free pending item (of the chosen job) and open it."""
        who = await caller(request)
        form = await checked_form(request)
        job = form.get("job") or None
        item = await asyncio.to_thread(store.claim_review, who.name, job=job)
        if item is None:
            notice = urlencode({"notice": "no pending item is free to claim"})
            return RedirectResponse(f"/ui/?{notice}", status_code=303)
        return RedirectResponse(f"/ui/item/{item['id']}", status_code=303)

    # ------------------------------------------------------------------ one item

    async def item_page(
        request: Request,
        who: Principal,
        item_id: int,
        *,
        status: int = 200,
        error: str | None = None,
        filters: Mapping[str, str] | None = None,
    ) -> HTMLResponse:
        try:
            item = await asyncio.to_thread(store.get_review, item_id)
        except InputError as exc:
            raise _PageError(404, str(exc)) from exc
        filters = filters if filters is not None else filters_of(request.query_params)
        rows = await asyncio.to_thread(store.audit_rows, run_id=str(item["run_id"]))
        provenance = next(
            (r for r in reversed(rows) if r.get("prompt_version")), {"judge_id": "", "prompt": ""}
        )
        queue = await queue_of({**filters, "status": str(item["status"])})
        ids = [int(r["id"]) for r in queue.rows]
        earlier = [i for i in ids if i < item_id]
        later = [i for i in ids if i > item_id]
        holder, until = item.get("lease_holder"), item.get("lease_expires_at")
        lease = {"holder": holder, "until": until} if holder and until and until > _now() else None
        return render(
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
            prev_id=earlier[-1] if earlier else None,
            next_id=later[0] if later else None,
            filters={k: v for k, v in filters.items() if k != "status"},
            error=error,
            resolved_notice=request.query_params.get("resolved"),
        )

    @app.get("/ui/item/{item_id}", include_in_schema=False)
    async def item_show(request: Request, item_id: int) -> HTMLResponse:
        return await item_page(request, await caller(request), item_id)

    @app.post("/ui/item/{item_id}/claim", include_in_schema=False)
    async def item_claim(request: Request, item_id: int) -> Response:
        who = await caller(request)
        form = await checked_form(request)
        try:
            await asyncio.to_thread(store.claim_item, item_id, who.name, lease_s=DEFAULT_LEASE_S)
        except ReviewConflict as exc:
            raise _PageError(409, str(exc)) from exc
        except InputError as exc:
            raise _PageError(404, str(exc)) from exc
        back = filters_of({k: form.get(k) for k in FACETS})
        query = urlencode({k: v for k, v in back.items() if v and k != "status"})
        return RedirectResponse(f"/ui/item/{item_id}?{query}", status_code=303)

    @app.post("/ui/item/{item_id}/resolve", include_in_schema=False)
    async def item_resolve(request: Request, item_id: int) -> Response:
        who = await caller(request)
        form = await checked_form(request)
        filters = filters_of({k: form.get(k) for k in FACETS})
        try:
            item = await asyncio.to_thread(store.get_review, item_id)
        except InputError as exc:
            raise _PageError(404, str(exc)) from exc
        view = item_view(item)
        note = form.get("note").strip() or None
        try:
            decision = decision_from_form(item, view, form)
            await asyncio.to_thread(
                store.resolve_review, item_id, decision=decision, note=note, reviewer=who.name
            )
        except ReviewConflict as exc:
            raise _PageError(409, str(exc)) from exc
        except InputError as exc:
            return await item_page(
                request, who, item_id, status=422, error=str(exc), filters=filters
            )
        queue = await queue_of(filters)
        later = [int(r["id"]) for r in queue.rows if int(r["id"]) > item_id]
        query = urlencode(
            {"resolved": item_id, **{k: v for k, v in filters.items() if v and k != "status"}}
        )
        target = f"/ui/item/{later[0]}?{query}" if later else f"/ui/?{query}"
        return RedirectResponse(target, status_code=303)

    # ------------------------------------------------------------------ agreement

    @app.get("/ui/agreement", include_in_schema=False)
    async def agreement_page(request: Request) -> HTMLResponse:
        who = await caller(request)

        def read() -> Any:
            items = store.list_reviews(status="resolved")
            provenance = store.run_provenance(i["run_id"] for i in items)
            between = reviewer_agreement(store.decided_items())
            return agreement(items, provenance, reports_dir), between

        rows, between = await asyncio.to_thread(read)
        return render(
            request,
            "agreement.html",
            who=who,
            title="Agreement",
            rows=rows,
            between=between,
            between_of={r.job: r for r in between},
        )
