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
- **Pages.** The queue with filters and their counts (the reviewer's own assigned items
  among them), an item with its evidence highlighted where the judge quoted it and controls
  that fit its job (:mod:`evidex.service._ui_items`: deciding, and an admin's assignment and
  adjudication), and the agreement of each judge with the reviewers and of the reviewers with
  each other (:mod:`evidex.service._ui_agreement`). Every text is escaped by the templates;
  scripts come from ``/ui/static/`` only, as the service's Content-Security-Policy requires.
- **Between items** the script fetches the next page's fragment and swaps it in
  (:mod:`evidex.service._ui_pages`), keeping the address and the history right; without the
  script every form posts and every link loads a whole page, as before.
"""

from __future__ import annotations

import asyncio
import hmac
import secrets
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from fastapi import FastAPI, Request
from fastapi.responses import RedirectResponse, Response

from evidex.service._ui_agreement import agreement, reviewer_agreement
from evidex.service._ui_baseline import Reports, baseline_views, register_baseline_routes
from evidex.service._ui_items import register_item_routes
from evidex.service._ui_pages import HERE, CachedStatic, PageError, Pages, now
from evidex.service._ui_views import FACETS
from evidex.service.auth import SESSION_COOKIE

__all__ = ["LOGIN_CSRF_COOKIE", "register_ui"]

LOGIN_CSRF_COOKIE = "evidex_login_csrf"


def _safe_next(target: str | None) -> str:
    """Where to go after login: a page of the UI only, never another site."""
    if target and target.startswith("/ui/") and not target.startswith("//"):
        return target
    return "/ui/"


def register_ui(app: FastAPI, *, reports: str | Path = "reports") -> None:
    """Add the review UI to the service's app (its store and gate are on ``app.state``).
    ``reports``: where ``evidex calibrate`` wrote its records, for the staleness banner, and
    ``evidex eval`` its reports, for the baseline run an admin pins."""
    pages = Pages(
        app.state.store,
        app.state.gate.requires("reviewer", cookie=True),
        secrets.token_urlsafe(24),
    )
    store = pages.store
    render = pages.render
    reports_dir = Path(reports)
    runs = Reports(reports_dir)

    async def _page_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, PageError)
        if exc.status == 401:
            target = urlencode({"next": request.url.path})
            return RedirectResponse(f"/ui/login?{target}", status_code=303)
        title = {403: "Not allowed", 404: "Not found", 409: "Conflict"}.get(exc.status, "Error")
        return render(request, "error.html", exc.status, title=title, message=exc.message)

    app.add_exception_handler(PageError, _page_error)
    app.mount("/ui/static", CachedStatic(directory=HERE / "static"), name="ui-static")

    # ------------------------------------------------------------------ login

    @app.get("/ui", include_in_schema=False)
    async def ui_root() -> RedirectResponse:
        return RedirectResponse("/ui/", status_code=307)

    @app.get("/ui/login", include_in_schema=False)
    async def login_page(request: Request, next: str | None = None) -> Response:
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
        form = await pages.form_of(request)
        cookie = request.cookies.get(LOGIN_CSRF_COOKIE) or ""
        if not cookie or not hmac.compare_digest(form.get("csrf").encode(), cookie.encode()):
            raise PageError(403, "the login form is out of date; reload the page and try again")
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
            raise PageError(403, f"a {key.role} key cannot use the review UI; use a reviewer key")
        token, session = await asyncio.to_thread(store.open_session, key)
        response = RedirectResponse(_safe_next(form.get("next")), status_code=303)
        response.set_cookie(
            SESSION_COOKIE,
            token,
            max_age=max(1, int((session.expires_at - now()).total_seconds())),
            httponly=True,
            samesite="strict",
            path="/",
            secure=request.url.scheme == "https",
        )
        response.delete_cookie(LOGIN_CSRF_COOKIE, path="/ui/login")
        return response

    @app.post("/ui/logout", include_in_schema=False)
    async def logout(request: Request) -> Response:
        await pages.caller(request)
        await pages.checked_form(request)
        token = request.cookies.get(SESSION_COOKIE)
        if token:
            await asyncio.to_thread(store.close_session, token)
        response = RedirectResponse("/ui/login", status_code=303)
        response.delete_cookie(SESSION_COOKIE, path="/", httponly=True, samesite="strict")
        return response

    # ------------------------------------------------------------------ queue

    @app.get("/ui/", include_in_schema=False)
    async def queue_page(request: Request) -> Response:
        who = await pages.caller(request)
        filters = pages.filters_of(request.query_params)
        view = await pages.queue_of(filters)
        today = now().replace(hour=0, minute=0, second=0, microsecond=0)

        def counts() -> tuple[dict[str, int], int]:
            mine = store.review_summaries(status="pending", assignee=who.name)
            return store.resolved_by_reviewer(today), len(mine)

        done, assigned = await asyncio.to_thread(counts)
        return render(
            request,
            "queue.html",
            who=who,
            title="Review queue",
            view=view,
            resolved_today=sorted(done.items(), key=lambda kv: (-kv[1], kv[0])),
            assigned_to_me=assigned,
            filters=filters,
            link_filters={k: v for k, v in filters.items() if k != "status"},
            facets=FACETS,
            now=now(),
            notice=request.query_params.get("notice"),
            decided_notice=await pages.notice(request.query_params.get("resolved")),
        )

    @app.post("/ui/claim", include_in_schema=False)
    async def claim_next(request: Request) -> Response:
        """Lease the oldest free pending item (of the chosen job) and open it: the items
        assigned to the reviewer first."""
        who = await pages.caller(request)
        form = await pages.checked_form(request)
        job = form.get("job") or None
        item = await asyncio.to_thread(store.claim_review, who.name, job=job)
        if item is None:
            notice = urlencode({"notice": "no pending item is free to claim"})
            return RedirectResponse(f"/ui/?{notice}", status_code=303)
        return RedirectResponse(f"/ui/item/{item['id']}", status_code=303)

    register_item_routes(app, pages)

    # ------------------------------------------------------------------ agreement

    @app.get("/ui/agreement", include_in_schema=False)
    async def agreement_page(request: Request) -> Response:
        who = await pages.caller(request)

        def read() -> Any:
            items = store.list_reviews(status="resolved")
            provenance = store.run_provenance(i["run_id"] for i in items)
            between = reviewer_agreement(store.decided_items())
            known, skipped = runs.scan()
            pinned = baseline_views(store.baselines(), known, runs)
            return agreement(items, provenance, reports_dir), between, known, skipped, pinned

        rows, between, known, skipped, pinned = await asyncio.to_thread(read)
        return render(
            request,
            "agreement.html",
            who=who,
            title="Agreement",
            rows=rows,
            between=between,
            between_of={r.job: r for r in between},
            baselines=pinned,
            known=known,
            skipped=skipped,
            reports=reports_dir,
            notice=request.query_params.get("notice"),
        )

    register_baseline_routes(app, pages, runs)
