"""The agreement page's pinned baseline run: per job, the newest evaluation run against the run
an admin pinned, metric by metric and item by item.

A run is an evaluation report (``report.json`` as ``evidex eval`` writes it, format 2, which
keeps its items). The reports the service knows are the ``report.json`` files below its
reports folder (the ``reports`` setting; ``evidex eval`` writes ``reports/eval-JOB/`` by
default). An admin pins one of them as its job's baseline: the store keeps the report itself
(:mod:`evidex.store._pins`), so writing the folder again does not move the baseline. Pinning
is an admin's, as assigning and adjudicating are: the baseline is the team's reference, and a
reviewer reading the page should not find it changed by another reviewer.

The comparison is :func:`evidex.evaluate.compare.compare_reports` (the pinned report as the
baseline, the newest other report of the job as the run), the same figures, paired bootstrap
interval and verdict as ``evidex eval compare``; a pair of reports it refuses (other golden
labels, no item in common) shows its message instead.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from fastapi import FastAPI, Request
from fastapi.responses import RedirectResponse, Response

from evidex.errors import EvidexError, ReviewConflict
from evidex.evaluate.compare import (
    check_report,
    compare_reports,
    interval_text,
    judgment_text,
    signed_text,
)
from evidex.evaluate.plots import fmt_value
from evidex.service._ui_pages import PageError, Pages
from evidex.store import BaselinePin

__all__ = ["BaselineView", "KnownReport", "Reports", "baseline_views", "register_baseline_routes"]

CHANGED_SHOWN = 50
"""Changed items a job's comparison lists on the page (``evidex eval compare`` gives all)."""


@dataclass(frozen=True)
class KnownReport:
    """A report below the reports folder that a comparison can pair (format 2)."""

    name: str
    """Its path below the folder (``eval-tier/report.json``): what the pin form posts."""
    job: str
    digest: str
    """sha-256 of the file: a pin of the same file is recognised, not compared with itself."""
    run: dict[str, Any]
    items: int


@dataclass
class BaselineView:
    """One job's pinned run and, when there is one, the newest other run against it."""

    job: str
    pin: BaselinePin
    current: KnownReport | None = None
    comparison: dict[str, Any] | None = None
    error: str | None = None
    changed: list[dict[str, Any]] = field(default_factory=list)


class Reports:
    """The reports below ``folder``, read once per file version (path, size, modification
    time), and the comparisons made from them, kept per pin and run."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._known: dict[str, tuple[tuple[int, int], KnownReport | str]] = {}
        self._compared: OrderedDict[tuple[int, str], dict[str, Any] | str] = OrderedDict()

    def scan(self) -> tuple[list[KnownReport], list[str]]:
        """The comparable reports, the newest run first, and why any other was left out."""
        known: list[KnownReport] = []
        skipped: list[str] = []
        paths = sorted(self.folder.rglob("report.json")) if self.folder.is_dir() else []
        for path in paths:
            found = self._read(path)
            if isinstance(found, KnownReport):
                known.append(found)
            else:
                skipped.append(found)
        known.sort(key=lambda r: (str(r.run.get("finished") or ""), r.name), reverse=True)
        return known, skipped

    def _read(self, path: Path) -> KnownReport | str:
        name = path.relative_to(self.folder).as_posix()
        try:
            stat = path.stat()
            version = (stat.st_size, stat.st_mtime_ns)
            cached = self._known.get(name)
            if cached is not None and cached[0] == version:
                return cached[1]
            found = _known_report(name, path.read_bytes())
        except OSError as exc:
            return f"{name}: {exc}"
        self._known[name] = (version, found)
        return found

    def load(self, name: str) -> tuple[KnownReport, dict[str, Any]]:
        """The known report posted as ``name`` and its content (never a path outside the
        folder: only a name :meth:`scan` lists is read)."""
        known, _ = self.scan()
        match = next((r for r in known if r.name == name), None)
        if match is None:
            raise PageError(404, f"no comparable report {name!r} below {self.folder}")
        try:
            data = (self.folder / match.name).read_bytes()
        except OSError as exc:
            raise PageError(404, f"cannot read {name}: {exc}") from exc
        found = _known_report(match.name, data)  # as it is now, if written again since
        if isinstance(found, str):
            raise PageError(409, found)
        return found, json.loads(data)

    def compare(self, pin: BaselinePin, current: KnownReport) -> dict[str, Any] | str:
        """``current`` against ``pin`` (its message when the two cannot be compared)."""
        key = (pin.id, current.digest)
        if key not in self._compared:
            try:
                report = json.loads((self.folder / current.name).read_bytes())
                made: dict[str, Any] | str = compare_reports(pin.report, report)
            except (EvidexError, OSError, ValueError) as exc:
                made = str(exc)
            self._compared[key] = made
            while len(self._compared) > 32:
                self._compared.popitem(last=False)
        return self._compared[key]


def _known_report(name: str, data: bytes) -> KnownReport | str:
    try:
        report = json.loads(data)
        if not isinstance(report, dict):
            return f"{name}: not a report (a JSON object)"
        check_report(report, name)
    except (EvidexError, ValueError) as exc:
        return str(exc)
    return KnownReport(
        name=name,
        job=str(report.get("job")),
        digest=hashlib.sha256(data).hexdigest(),
        run=dict(report.get("run") or {}),
        items=len(report.get("items") or []),
    )


def baseline_views(
    pins: dict[str, BaselinePin], known: list[KnownReport], reports: Reports
) -> list[BaselineView]:
    """Per pinned job, its view: the newest known run of the job that is not the pinned file,
    compared with the pin."""
    views = []
    for job, pin in sorted(pins.items()):
        view = BaselineView(job, pin)
        view.current = next((r for r in known if r.job == job and r.digest != pin.digest), None)
        if view.current is not None:
            made = reports.compare(pin, view.current)
            if isinstance(made, str):
                view.error = made
            else:
                view.comparison = made
                view.changed = made["changed"][:CHANGED_SHOWN]
        views.append(view)
    return views


def register_baseline_routes(app: FastAPI, pages: Pages, reports: Reports) -> None:
    """``POST /ui/agreement/baseline`` pins a known report as its job's baseline (replacing
    the job's pin); ``POST /ui/agreement/baseline/clear`` ends a job's pin. Admins only, each
    form with its CSRF token."""
    store = pages.store
    pages.env.filters.update(
        figure=fmt_value, signed=signed_text, interval=interval_text, judgment=judgment_text
    )

    def back(notice: str) -> RedirectResponse:
        return RedirectResponse(
            f"/ui/agreement?{urlencode({'notice': notice})}#baseline", status_code=303
        )

    @app.post("/ui/agreement/baseline", include_in_schema=False)
    async def pin_baseline(request: Request) -> Response:
        who = await pages.admin(request)
        form = await pages.checked_form(request)
        known, report = await asyncio.to_thread(reports.load, form.get("report"))
        try:
            await asyncio.to_thread(
                store.pin_baseline,
                known.job,
                report,
                name=known.name,
                digest=known.digest,
                by=who.name,
            )
        except ReviewConflict as exc:
            raise PageError(409, str(exc)) from exc
        return back(f"Pinned {known.name} as the {known.job} baseline.")

    @app.post("/ui/agreement/baseline/clear", include_in_schema=False)
    async def clear_baseline(request: Request) -> Response:
        who = await pages.admin(request)
        form = await pages.checked_form(request)
        job = form.get("job")
        cleared = await asyncio.to_thread(store.clear_baseline, job, by=who.name)
        return back(f"Cleared the {job} baseline." if cleared else f"{job} had no baseline.")
