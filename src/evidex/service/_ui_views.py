"""What the review UI's pages show, computed apart from the routes: the queue's filters and
their counts, the evidence highlighted where the judge quoted it, each attempt of the exchange,
and the decision a form's fields stand for.

Nothing here renders HTML: the templates do, with autoescaping, so every text from a judge or a
passage reaches the page escaped.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from evidex._text import CUT_MARK
from evidex.jobs import FlaggedStretch, ReviewPayload, review_kind
from evidex.review_policy import reason_kind

__all__ = [
    "AGES",
    "FACETS",
    "UNASSIGNED",
    "Marked",
    "QueueView",
    "attempts_of",
    "decision_from_form",
    "filter_queue",
    "format_age",
    "highlight",
    "item_view",
]

FACETS = ("job", "reason", "risk", "judge", "prompt", "age", "assignee")
"""The queue's filters, in the order the page shows them."""

UNASSIGNED = "nobody"
"""The assignee filter's value of the items assigned to nobody."""

AGES = (("1h", 3600.0), ("1d", 86400.0), ("7d", 7 * 86400.0), ("older", math.inf))
"""Age buckets: an item is in the first bucket whose limit its age is under."""

MAX_LISTED = 200
"""Rows the queue page lists at once; the counts cover every item."""


def _age(created: datetime | None, now: datetime) -> str:
    seconds = (now - created).total_seconds() if created else 0.0
    return next(name for name, limit in AGES if seconds < limit)


def format_age(seconds: float) -> str:
    """An item's age as a person reads it, rounded down to its largest whole unit: ``"4 min"``,
    ``"2 h"``, ``"3 d"``; under a minute (or a clock a little behind) ``"<1 min"``."""
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{int(seconds // size)} {unit}"
    return "<1 min"


@dataclass
class QueueView:
    rows: list[dict[str, Any]]
    """The first :data:`MAX_LISTED` items that pass every filter, with their facet values."""
    total: int
    """How many items pass every filter."""
    facets: dict[str, list[tuple[str, int]]]
    """Per filter, each value and how many items have it among those that pass the *other*
    filters (so a count says what choosing that value would list)."""


def filter_queue(
    summaries: Iterable[Mapping[str, Any]],
    provenance: Mapping[str, Mapping[str, str]],
    filters: Mapping[str, str],
    now: datetime,
) -> QueueView:
    """Filter and count items (rows of ``store.review_summaries``); ``provenance`` is the
    store's ``run_provenance`` of their runs."""
    rows = []
    for summary in summaries:
        prov = provenance.get(str(summary["run_id"]), {})
        values = {
            "job": str(summary["job"]),
            "reason": reason_kind(str(summary["reason"])),
            "risk": str(summary["risk"]),
            "judge": prov.get("judge_id") or "unknown",
            "prompt": prov.get("prompt_version") or "unknown",
            "age": _age(summary.get("created_at"), now),
            "assignee": str(summary.get("assignee") or UNASSIGNED),
        }
        created = summary.get("created_at")
        age = format_age((now - created).total_seconds()) if created else ""
        rows.append(
            {
                **summary,
                "facet": values,
                "age_text": age,
                **{f"{k}_value": v for k, v in values.items()},
            }
        )
    chosen = {k: v for k, v in filters.items() if k in FACETS and v}
    facets: dict[str, list[tuple[str, int]]] = {}
    for name in FACETS:
        counts: dict[str, int] = {}
        for row in rows:
            if all(row["facet"][k] == v for k, v in chosen.items() if k != name):
                counts[row["facet"][name]] = counts.get(row["facet"][name], 0) + 1
        order = [a for a, _ in AGES] if name == "age" else sorted(counts)
        if name == "assignee":  # the named reviewers first, then the unassigned items
            order = sorted(counts, key=lambda v: (v == UNASSIGNED, v))
        facets[name] = [(value, counts[value]) for value in order if value in counts]
    kept = [r for r in rows if all(r["facet"][k] == v for k, v in chosen.items())]
    return QueueView(rows=kept[:MAX_LISTED], total=len(kept), facets=facets)


# ---------------------------------------------------------------------------- highlights


@dataclass(frozen=True)
class Marked:
    """A piece of a passage: ``kind`` is None for plain text, else ``support`` or
    ``counter`` (a quote the judge gave for or against), ``flagged`` (text the screen found
    aimed at the grader) or ``cut`` (where preflight cut such text from what the judge read)."""

    text: str
    kind: str | None = None
    start: int = 0


def highlight(
    text: str, quotes: Iterable[tuple[str, str]], marks: Iterable[tuple[int, int, str]] = ()
) -> tuple[list[Marked], list[tuple[int, int]], list[str]]:
    """``text`` cut into pieces at the quotes found in it verbatim (else ignoring case), the
    found spans as ``(start, end)`` offsets, and the quotes that are not in the text (shown
    apart: a quote that is not in its passage is something a reviewer should see).
    ``quotes``: ``(quote, kind)`` pairs; ``marks``: ``(start, end, kind)`` spans known by
    offset; overlapping spans merge, the earlier kind wins. Every place preflight cut text
    from what the judge read is marked too (kind ``cut``)."""
    spans: list[tuple[int, int, str]] = [
        *marks,
        *((m.start(), m.end(), "cut") for m in re.finditer(re.escape(CUT_MARK), text)),
    ]
    missing: list[str] = []
    lowered = text.lower()
    for quote, kind in quotes:
        wanted = quote.strip()
        if not wanted:
            continue
        start = text.find(wanted)
        if start < 0:
            start = lowered.find(wanted.lower())
        if start < 0:
            missing.append(wanted)
            continue
        spans.append((start, start + len(wanted), kind))
    merged: list[list[Any]] = []
    for start, end, kind in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end, kind])
    pieces: list[Marked] = []
    at = 0
    for start, end, kind in merged:
        if start > at:
            pieces.append(Marked(text[at:start], None, at))
        pieces.append(Marked(text[start:end], kind, start))
        at = end
    if at < len(text) or not pieces:
        pieces.append(Marked(text[at:], None, at))
    return pieces, [(s, e) for s, e, _ in merged], list(dict.fromkeys(missing))


def item_view(item: Mapping[str, Any]) -> dict[str, Any]:
    """What the item page shows of an item: its payload read through its job's model, its
    passages highlighted where the judge quoted them, the judge's grade of each, and the
    partial template that shows the job's input, grades and decision controls."""
    job = str(item["job"])
    kind = review_kind(job)
    payload = kind.read(item.get("payload"))
    quotes = payload.quotes()
    grades = payload.grades()
    anywhere = quotes.get("", [])
    texts = {p.passage_id: p for p in payload.passages}
    passages = []
    for index, pid in enumerate([str(p) for p in item.get("passage_ids") or []] or list(texts)):
        passage = texts.get(pid)
        text = passage.text if passage is not None else ""
        own = quotes.get(pid, [])
        flagged = passage.flagged if passage is not None else []
        pieces, spans, missing = highlight(text, [*own, *anywhere], _in_place(text, flagged))
        passages.append(
            {
                "index": index,
                "passage_id": pid,
                "title": passage.title if passage is not None else None,
                "url": passage.url if passage is not None else None,
                "text": text,
                "pieces": pieces,
                "spans": spans,
                # a quote for any passage is not "missing" from each one it is not in
                "missing": [m for m in missing if any(m == q.strip() for q, _ in own)],
                "grade": grades.get(pid),
                "flagged": flagged,
            }
        )
    steps = [
        {**s.model_dump(exclude={"fallback"}), "fallback_json": _json(s.fallback)}
        for s in payload.steps
    ]
    return {
        "job": job,
        "payload": payload,
        "template": kind.template,
        "passages": passages,
        "passage_ids": [p["passage_id"] for p in passages],
        "steps": steps,
    }


def _in_place(text: str, flagged: Sequence[FlaggedStretch]) -> list[tuple[int, int, str]]:
    """The flagged stretches of a passage's text, as marks, where the item holds the text as
    given (a routed item; a fallback item holds what the judge read, with the cut marks)."""
    return [
        (f.start, f.end, "flagged")
        for f in flagged
        if f.field == "text"
        and f.start is not None
        and f.end is not None
        and f.excerpt
        and text[f.start : f.start + len(f.excerpt)] == f.excerpt
    ]


def _json(value: Any) -> str | None:
    return None if value is None else json.dumps(value, indent=2, ensure_ascii=False)


def attempts_of(item: Mapping[str, Any], rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The exchanges of the item among its run's audit rows: those of its batches when it has
    them (an item of several steps has one per step), else those whose labels name one of its
    passages, else every exchange of the run."""
    exchanges = [r for r in rows if r.get("step") not in ("review", "") or r.get("raw_output")]
    steps = review_kind(str(item.get("job"))).read(item.get("payload")).steps
    batches = {s.batch_id for s in steps if s.batch_id} | {str(item.get("batch_id") or "")}
    batches.discard("")
    if batches:
        mine = [r for r in exchanges if r.get("batch_id") in batches]
    else:
        ids = {str(p) for p in item.get("passage_ids") or []}
        mine = [
            r
            for r in exchanges
            if isinstance(r.get("labels"), dict) and ids & {str(k) for k in r["labels"]}
        ]
    return [dict(r) for r in (mine or exchanges)][-30:]


# ---------------------------------------------------------------------------- decisions


@dataclass
class Form:
    """An urlencoded form: every value of each field, in order."""

    fields: dict[str, list[str]] = field(default_factory=dict)

    def get(self, name: str, default: str = "") -> str:
        values = self.fields.get(name)
        return values[0] if values else default

    def all(self, name: str) -> list[str]:
        return list(self.fields.get(name, []))


def decision_from_form(item: Mapping[str, Any], view: Mapping[str, Any], form: Form) -> str:
    """The decision string the store checks, from the item page's controls. A typed decision
    (``decision_text``) wins: it takes any form the store accepts; else the job's payload
    model reads its own controls."""
    typed = form.get("decision_text").strip()
    if typed:
        return typed
    verdict = form.get("verdict").strip()
    payload: ReviewPayload = view["payload"]
    return payload.from_form(verdict, form, view["passage_ids"])
