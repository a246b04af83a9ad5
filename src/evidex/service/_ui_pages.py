"""What every page of the review UI shares: the templates, the caller, posted forms and their
CSRF check, the queue's filters, and the error page.

A page asked for with ``X-Evidex-Fragment: 1`` (the UI's script, moving from one item to the
next) is rendered as its fragment only: the ``<main>`` and the key legend, no head, no header.
The browser swaps them into the page it has instead of loading a new document; without the
script, the same URLs answer whole pages.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode

from fastapi import HTTPException, Request
from fastapi.responses import HTMLResponse, Response
from fastapi.staticfiles import StaticFiles
from jinja2 import Environment, FileSystemLoader

from evidex.errors import InputError
from evidex.service._ui_views import FACETS, Form, QueueView, filter_queue
from evidex.service.auth import Principal
from evidex.store import SqlStore

__all__ = [
    "FRAGMENT_HEADER",
    "HERE",
    "MAX_FORM_BYTES",
    "CachedStatic",
    "PageError",
    "Pages",
    "now",
    "static_version",
]

HERE = Path(__file__).resolve().parent
FRAGMENT_HEADER = "X-Evidex-Fragment"
MAX_FORM_BYTES = 256 * 1024
"""A decision form is small; a larger body is refused before it is parsed."""


class PageError(Exception):
    """Ends a page with an error page (or, for 401, a redirect to the login page)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def now() -> datetime:
    return datetime.now(timezone.utc)


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


@dataclass
class Pages:
    """The plumbing of the UI's routes: ``check`` is the gate's reviewer dependency (session
    cookies count), ``process_csrf`` the forms' token where no session exists."""

    store: SqlStore
    check: Callable[[Request, Any], Awaitable[Principal]]
    process_csrf: str

    def __post_init__(self) -> None:
        env = Environment(loader=FileSystemLoader(HERE / "templates"), autoescape=True)
        env.filters["when"] = lambda d: d.strftime("%Y-%m-%d %H:%M UTC") if d else ""
        env.filters["qs"] = lambda m: urlencode({k: v for k, v in m.items() if v})
        env.globals["static_version"] = static_version(HERE / "static")
        self.env = env

    def render(self, request: Request, name: str, status: int = 200, **context: Any) -> Response:
        session = getattr(request.state, "session", None)
        context.setdefault("who", getattr(request.state, "principal", None))
        html = self.env.get_template(name).render(
            session=session,
            csrf=session.csrf if session else self.process_csrf,
            fragment=request.headers.get(FRAGMENT_HEADER) == "1",
            **context,
        )
        response = HTMLResponse(html, status_code=status)
        response.headers["Vary"] = FRAGMENT_HEADER
        return response

    async def caller(self, request: Request) -> Principal:
        """The reviewer of a page (a session cookie; never a key in the URL)."""
        try:
            return await self.check(request, None)
        except HTTPException as exc:
            raise PageError(exc.status_code, str(exc.detail)) from exc

    async def admin(self, request: Request) -> Principal:
        """The caller, if an admin: assigning items and adjudicating are theirs (403 else)."""
        who = await self.caller(request)
        if who.role != "admin":
            raise PageError(403, f"this needs an admin key; yours is {who.role}")
        return who

    async def form_of(self, request: Request) -> Form:
        body = await request.body()
        if len(body) > MAX_FORM_BYTES:
            raise PageError(413, "the form is too large")
        return Form(parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True))

    async def checked_form(self, request: Request) -> Form:
        """The posted form, once its CSRF token matches the caller's (403 otherwise)."""
        form = await self.form_of(request)
        session = getattr(request.state, "session", None)
        expected = session.csrf if session else self.process_csrf
        if not hmac.compare_digest(form.get("csrf").encode(), expected.encode()):
            raise PageError(403, "the form's CSRF token is missing or wrong; reload the page")
        return form

    @staticmethod
    def filters_of(source: Mapping[str, str]) -> dict[str, str]:
        wanted = {name: str(source.get(name) or "") for name in FACETS}
        wanted["status"] = source.get("status") or "pending"
        return wanted

    async def queue_of(self, filters: Mapping[str, str]) -> QueueView:
        return await asyncio.to_thread(self._queue, filters)

    def _queue(self, filters: Mapping[str, str]) -> QueueView:
        status = filters.get("status") or "pending"
        rows = self.store.review_summaries(status=None if status == "all" else status)
        provenance = self.store.run_provenance(r["run_id"] for r in rows)
        return filter_queue(rows, provenance, filters, now())

    async def notice(self, item_id: str | None) -> str | None:
        """What a page says of the item the reviewer just decided (``?resolved=ID``), as it
        stands now: resolved, waiting for more decisions, or disputed."""
        if not item_id or not item_id.isdigit():
            return None
        try:
            item = await asyncio.to_thread(self.store.get_review, int(item_id))
        except InputError:
            return None
        if item["status"] == "resolved":
            return f"Resolved item {item_id}."
        if item["status"] == "disputed":
            return (
                f"Decided item {item_id}: its reviewers disagree, so it waits for an adjudication."
            )
        more = int(item["decisions_required"]) - int(item["decisions_made"])
        return (
            f"Decided item {item_id}: it waits for {more} more decision{'s' * (more != 1)} "
            "by other reviewers."
        )

    async def later(self, filters: Mapping[str, str], item_id: int, who: Principal) -> int | None:
        """The first item after ``item_id`` in the queue as ``filters`` list it that ``who``
        may decide: pending, assigned to nobody or to them, and not decided by them yet."""

        def read() -> int | None:
            rows = self._queue({**filters, "status": "pending"}).rows
            decided = self.store.open_items_decided_by(who.name)
            for row in rows:
                assignee = row.get("assignee")
                mine = not assignee or assignee == who.name
                if int(row["id"]) > item_id and mine and int(row["id"]) not in decided:
                    return int(row["id"])
            return None

        return await asyncio.to_thread(read)
