"""Reviewer decisions become golden labels: resolved review items → golden records.

This closes the human loop of the spec: what people decide in the review queue feeds the next
calibration. Every job's decisions become rows of its own golden format
(:mod:`evidex.evaluate.golden`), the rows its evaluator reads; how a decision becomes a row is
the job's review payload model's (``JobDefinition.review``, :mod:`evidex.jobs._review`):

- **tier**: a tier name (every passage of the item), a JSON object of passage id → tier, or
  ``accept`` of a graded tier → one :class:`TierGolden` per passage;
- **rerank**: a ranking (or ``accept`` of a grounding check's order) → one
  :class:`RerankGolden` whose grades are the ranking's positions;
- **classify**: a label, a JSON array of labels or ``accept`` of the judge's →
  one :class:`ClassifyGolden`;
- **audit**: a verdict (publish or block) with a status for every claim, a status for every
  claim, a JSON object of claim id → status or ``accept`` of the judge's grades → one
  :class:`AuditGolden` with the answer and its claims.

An item that several reviewers decided gives its agreed decision, or the adjudicated one where
they disagreed; a disagreement nobody has adjudicated yet (a ``disputed`` item) gives no row
and is counted apart (``ExportResult.disputed``), never settled by picking one reviewer.

``reject`` says only what the grade is not: it gives no label. Rows need the passage texts:
taken from the item's payload when the job put them there, else from ``texts`` (passage id →
text, e.g. the corpus the run was made from). Items that cannot be turned into a label are
returned as skipped, each with its reason: nothing is dropped silently.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from evidex.errors import ConfigError, InputError
from evidex.jobs import ExportContext, definition, review_kind
from evidex.types import DEFAULT_TIERS, TierScheme

__all__ = [
    "ExportResult",
    "export_reviews",
    "export_tier_reviews",
]


@dataclass
class ExportResult:
    records: list[Any] = field(default_factory=list)
    """Golden rows of the job's format (:data:`evidex.evaluate.golden.GOLDEN_TYPES`)."""
    skipped: list[tuple[int, str]] = field(default_factory=list)
    """(review item id, why it gave no golden label)."""
    disputed: list[int] = field(default_factory=list)
    """Items whose reviewers disagree and that nobody has adjudicated yet: left out."""


def export_reviews(
    items: Iterable[Mapping[str, Any]],
    job: str,
    *,
    scheme: TierScheme | None = None,
    texts: Mapping[str, str] | None = None,
) -> ExportResult:
    """Golden records of ``job`` from its resolved review items; its disputed items are
    counted in ``disputed``, the rest ignored.
    ``scheme``: the tiers a tier decision is checked against (default: the item's own)."""
    kind = review_kind(job)
    evaluation = definition(job).evaluation
    if evaluation is None or not evaluation.from_reviews:
        raise ConfigError(f"the {job} job's review decisions are not exported as golden records")
    row = evaluation.golden_type()
    context = ExportContext(row=row, texts=dict(texts or {}), scheme=scheme)
    result = ExportResult()
    for item in items:
        if item.get("job") == job and item.get("status") == "disputed":
            result.disputed.append(int(item["id"]))
        if item.get("job") != job or item.get("status") != "resolved":
            continue
        item_id = int(item["id"])
        try:
            records, partial = kind.golden(item, context)
        except (InputError, ValueError) as exc:  # ValueError: a decision that is not JSON
            result.skipped.append((item_id, str(exc)))
            continue
        result.records += records
        result.skipped += [(item_id, reason) for reason in partial]
    return result


def export_tier_reviews(
    items: Iterable[Mapping[str, Any]],
    *,
    scheme: TierScheme = DEFAULT_TIERS,
    texts: Mapping[str, str] | None = None,
) -> ExportResult:
    """Golden tier records from resolved tier review items (others are ignored); decisions
    are checked against ``scheme``."""
    return export_reviews(items, "tier", scheme=scheme, texts=texts)
