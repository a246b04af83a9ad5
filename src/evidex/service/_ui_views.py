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

__all__ = [
    "AGES",
    "FACETS",
    "Marked",
    "QueueView",
    "attempts_of",
    "decision_from_form",
    "filter_queue",
    "highlight",
    "item_view",
    "reason_kind",
]

FACETS = ("job", "reason", "risk", "judge", "prompt", "age")
"""The queue's filters, in the order the page shows them."""

AGES = (("1h", 3600.0), ("1d", 86400.0), ("7d", 7 * 86400.0), ("older", math.inf))
"""Age buckets: an item is in the first bucket whose limit its age is under."""

MAX_LISTED = 200
"""Rows the queue page lists at once; the counts cover every item."""


def reason_kind(reason: str) -> str:
    """The kind of a review reason, for filtering: reasons are sentences with numbers in them
    (``fallback after 3 attempt(s): ...``), and one filter value per sentence would not
    group anything."""
    text = reason.strip().lower()
    if text.startswith("fallback"):
        return "fallback"
    if text.startswith("high risk"):
        return "high risk"
    if text.startswith("confidence") and "below the threshold" in text:
        return "low confidence"
    head = re.split(r"[:;(]", text, maxsplit=1)[0].strip()
    return re.sub(r"\d+(\.\d+)?", "N", head)[:40] or "other"


def _age(created: datetime | None, now: datetime) -> str:
    seconds = (now - created).total_seconds() if created else 0.0
    return next(name for name, limit in AGES if seconds < limit)


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
        }
        rows.append({**summary, "facet": values, **{f"{k}_value": v for k, v in values.items()}})
    chosen = {k: v for k, v in filters.items() if k in FACETS and v}
    facets: dict[str, list[tuple[str, int]]] = {}
    for name in FACETS:
        counts: dict[str, int] = {}
        for row in rows:
            if all(row["facet"][k] == v for k, v in chosen.items() if k != name):
                counts[row["facet"][name]] = counts.get(row["facet"][name], 0) + 1
        order = [a for a, _ in AGES] if name == "age" else sorted(counts)
        facets[name] = [(value, counts[value]) for value in order if value in counts]
    kept = [r for r in rows if all(r["facet"][k] == v for k, v in chosen.items())]
    return QueueView(rows=kept[:MAX_LISTED], total=len(kept), facets=facets)


# ---------------------------------------------------------------------------- highlights


@dataclass(frozen=True)
class Marked:
    """A piece of a passage: ``kind`` is None for plain text, else ``support`` or
    ``counter`` (a quote the judge gave for or against)."""

    text: str
    kind: str | None = None
    start: int = 0


def highlight(
    text: str, quotes: Iterable[tuple[str, str]]
) -> tuple[list[Marked], list[tuple[int, int]], list[str]]:
    """``text`` cut into pieces at the quotes found in it verbatim (else ignoring case), the
    found spans as ``(start, end)`` offsets, and the quotes that are not in the text (shown
    apart: a quote that is not in its passage is something a reviewer should see).
    ``quotes``: ``(quote, kind)`` pairs; overlapping spans merge, the earlier kind wins."""
    spans: list[tuple[int, int, str]] = []
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


def _dicts(value: Any) -> list[dict[str, Any]]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def _quotes_by_passage(job: str, payload: Mapping[str, Any]) -> dict[str, list[tuple[str, str]]]:
    """The judge's snippets and quotes, keyed by the passage they cite ("" = any passage)."""
    found: dict[str, list[tuple[str, str]]] = {}

    def add(pid: Any, quote: Any, kind: str = "support") -> None:
        if isinstance(quote, str) and quote.strip():
            found.setdefault(str(pid or ""), []).append((quote, kind))

    if job == "tier":
        fallback = payload.get("fallback")
        assignments = _dicts([payload.get("assignment")])
        if isinstance(fallback, dict):
            assignments += _dicts(fallback.get("classifications"))
        for a in assignments:
            add(a.get("passage_id"), a.get("key_evidence_snippet"))
    elif job == "classify":
        result = payload.get("result")
        labels = _dicts(result.get("classifications")) if isinstance(result, dict) else []
        for a in labels or _dicts([payload.get("assignment")]):
            for e in _dicts(a.get("supporting_evidence")):
                add(e.get("passage_id"), e.get("quoted_text"))
            for e in _dicts(a.get("counter_evidence")):
                add(e.get("passage_id"), e.get("quoted_text"), "counter")
    elif job == "audit":
        for claim in _dicts(payload.get("claims")):
            cited = [str(c) for c in claim.get("supporting_context_ids") or []] or [""]
            for quote in claim.get("supporting_quotes") or []:
                for pid in cited:
                    add(pid, quote)
            add("", claim.get("contradicting_quote"), "counter")
    return found


def _grades_by_passage(job: str, payload: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The judge's tier and justification of each passage (tier items)."""
    if job != "tier":
        return {}
    grades: dict[str, dict[str, Any]] = {}
    fallback = payload.get("fallback")
    if isinstance(fallback, dict):
        for a in _dicts(fallback.get("classifications")):
            grades[str(a.get("passage_id"))] = {**a, "source": a.get("source") or "fallback"}
    for a in _dicts([payload.get("assignment")]):
        grades[str(a.get("passage_id"))] = a
    return grades


def item_view(item: Mapping[str, Any], tiers: Sequence[str]) -> dict[str, Any]:
    """What the item page shows of an item: its passages highlighted, the judge's grades, and
    the values its decision controls offer."""
    job = str(item["job"])
    payload: Mapping[str, Any] = item.get("payload") or {}
    quotes = _quotes_by_passage(job, payload)
    grades = _grades_by_passage(job, payload)
    anywhere = quotes.get("", [])
    passages = []
    texts = {str(p.get("passage_id")): p for p in _dicts(payload.get("passages"))}
    for index, pid in enumerate([str(p) for p in item.get("passage_ids") or []] or list(texts)):
        passage = texts.get(pid, {})
        text = str(passage.get("text") or "")
        own = quotes.get(pid, [])
        pieces, spans, missing = highlight(text, [*own, *anywhere])
        passages.append(
            {
                "index": index,
                "passage_id": pid,
                "title": passage.get("title"),
                "url": passage.get("url"),
                "text": text,
                "pieces": pieces,
                "spans": spans,
                # a quote for any passage is not "missing" from each one it is not in
                "missing": [m for m in missing if any(m == q.strip() for q, _ in own)],
                "grade": grades.get(pid),
            }
        )
    names = [str(x) for x in payload.get("tiers") or []] or list(tiers)
    assignment = payload.get("assignment") if isinstance(payload.get("assignment"), dict) else None
    claims = []
    for c in _dicts(payload.get("claims")):
        status = "contradicted" if c.get("contradicted") else c.get("classification")
        claims.append({**c, "status": status})
    return {
        "job": job,
        "payload": payload,
        "passages": passages,
        "tiers": names,
        "assignment": assignment,
        "judge_tier": (assignment or {}).get("tier"),
        "labels": [str(x) for x in payload.get("labels") or []],
        "judge_label": payload.get("label"),
        "claims": claims,
        "fallback_json": (
            json.dumps(payload["fallback"], indent=2, ensure_ascii=False)
            if "fallback" in payload
            else None
        ),
        "errors": payload.get("errors") or [],
    }


def attempts_of(item: Mapping[str, Any], rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The exchanges of the item among its run's audit rows: those of its batch when it has
    one, else those whose labels name one of its passages, else every exchange of the run."""
    exchanges = [r for r in rows if r.get("step") not in ("review", "") or r.get("raw_output")]
    batch = item.get("batch_id")
    if batch:
        mine = [r for r in exchanges if r.get("batch_id") == batch]
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
    (``decision_text``) wins: it takes any form the store accepts."""
    typed = form.get("decision_text").strip()
    if typed:
        return typed
    verdict = form.get("verdict").strip()
    job = view["job"]
    ids = [p["passage_id"] for p in view["passages"]]
    if job == "tier":
        chosen = {
            pid: form.get(f"tier_p{i}") for i, pid in enumerate(ids) if form.get(f"tier_p{i}")
        }
        if not chosen:
            return verdict
        base = verdict if verdict in view["tiers"] else None
        return json.dumps({pid: chosen.get(pid) or base for pid in ids}, ensure_ascii=False)
    if job == "rerank" and verdict == "ranking":

        def rank(i: int) -> float:
            try:
                return float(form.get(f"rank_p{i}"))
            except ValueError:
                return math.inf

        order = sorted(range(len(ids)), key=lambda i: (rank(i), i))
        return json.dumps([ids[i] for i in order], ensure_ascii=False)
    if job == "classify" and verdict == "labels":
        labels = form.all("label")
        return (
            labels[0]
            if len(labels) == 1
            else json.dumps(labels, ensure_ascii=False)
            if labels
            else ""
        )
    if job == "audit" and verdict == "claims":
        mapping = {
            str(c["claim_id"]): form.get(f"claim_{i}")
            for i, c in enumerate(view["claims"])
            if c.get("claim_id")
        }
        return json.dumps(mapping, ensure_ascii=False)
    return verdict
