"""Reviewer decisions become golden labels: resolved review items → golden records.

This closes the human loop of the spec: what people decide in the review queue feeds the next
calibration. For the tier job a resolved item's ``decision`` may be

- a tier name: the golden tier of every passage of the item;
- a JSON object ``{"passage_id": "tier", ...}``: one tier per passage;
- ``accept``: the graded tier was right (items that carry the judge's ``assignment``, such as
  high-risk top-tier samples); for a fallback item there is no graded tier to accept;
- ``reject``: says only what the tier is not, so it gives no golden label.

Golden tier records need the passage text. It is taken from the item's payload when the job
put it there (``passages`` or ``assignment.text``), else from ``texts`` (passage id → text,
e.g. the corpus the run was made from). Items that cannot be turned into a label are returned
as skipped, each with its reason: nothing is dropped silently.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from evidex.errors import InputError
from evidex.evaluate.golden import TierGolden
from evidex.types import DEFAULT_TIERS, TierScheme

__all__ = ["ExportResult", "export_tier_reviews"]


@dataclass
class ExportResult:
    records: list[TierGolden] = field(default_factory=list)
    skipped: list[tuple[int, str]] = field(default_factory=list)
    """(review item id, why it gave no golden label)."""


def export_tier_reviews(
    items: Iterable[Mapping[str, Any]],
    *,
    scheme: TierScheme = DEFAULT_TIERS,
    texts: Mapping[str, str] | None = None,
) -> ExportResult:
    """Golden tier records from resolved tier review items (others are ignored)."""
    result = ExportResult()
    texts = texts or {}
    for item in items:
        if item.get("job") != "tier" or item.get("status") != "resolved":
            continue
        item_id = int(item["id"])
        payload: Mapping[str, Any] = item.get("payload") or {}
        query = str(payload.get("query") or "").strip()
        if not query:
            result.skipped.append((item_id, "the item's payload has no query"))
            continue
        try:
            tiers = _decided_tiers(item, scheme)
        except InputError as exc:
            result.skipped.append((item_id, str(exc)))
            continue
        known = _payload_texts(payload)
        for pid, tier in tiers.items():
            text = known.get(pid) or texts.get(pid)
            if not text:
                result.skipped.append((item_id, f"no text for passage {pid!r}; pass the corpus"))
                continue
            result.records.append(TierGolden(query=query, passage_id=pid, text=text, tier=tier))
    return result


def _decided_tiers(item: Mapping[str, Any], scheme: TierScheme) -> dict[str, str]:
    decision = str(item.get("decision") or "").strip()
    ids = [str(p) for p in item.get("passage_ids") or []]
    payload = item.get("payload") or {}
    if decision in scheme.names:
        return dict.fromkeys(ids, decision)
    if decision.lower() == "accept":
        assignment = payload.get("assignment")
        if not isinstance(assignment, dict) or assignment.get("tier") not in scheme.names:
            raise InputError("'accept' on an item without a graded tier (a fallback) says no tier")
        return {str(assignment.get("passage_id", ids[0] if ids else "")): assignment["tier"]}
    if decision.lower() == "reject":
        raise InputError("'reject' says what the tier is not, not what it is")
    if decision.startswith("{"):
        try:
            mapping = json.loads(decision)
        except ValueError as exc:
            raise InputError(f"the decision is not valid JSON: {exc}") from exc
        bad = {k: v for k, v in mapping.items() if v not in scheme.names}
        if bad:
            raise InputError(f"decision tiers {bad} are not among {scheme.names}")
        return {str(k): str(v) for k, v in mapping.items()}
    raise InputError(f"decision {decision!r} is not a tier of {scheme.names}, accept or reject")


def _payload_texts(payload: Mapping[str, Any]) -> dict[str, str]:
    found: dict[str, str] = {}
    passages = payload.get("passages")
    if isinstance(passages, list):
        for p in passages:
            if isinstance(p, dict) and p.get("text"):
                found[str(p.get("passage_id"))] = str(p["text"])
    assignment = payload.get("assignment")
    if isinstance(assignment, dict) and assignment.get("text"):
        found[str(assignment.get("passage_id"))] = str(assignment["text"])
    return found
