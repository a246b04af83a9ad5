"""Small fixtures for the classify tests: a taxonomy, passages and reply builders."""

from __future__ import annotations

from typing import Any

from evidex.taxonomy import Taxonomy
from evidex.types import Passage

TAXONOMY = Taxonomy.parse(
    {
        "REFUND": "The customer asks for their money back.",
        "SHIPPING": "The message is about delivery, tracking or a late parcel.",
        "OTHER": "Anything else.",
    }
)

INPUT = "My parcel never arrived and I want my money back."

PASSAGES = [
    Passage(
        passage_id="p1", text="Refunds are issued when an order is not delivered within 30 days."
    ),
    Passage(passage_id="p2", text="Tracking numbers are emailed once the parcel leaves the depot."),
    Passage(passage_id="p3", text="Gift cards cannot be exchanged for cash."),
]


def evidence(pid: str, quote: str, rationale: str = "It says so.") -> dict[str, Any]:
    return {"passage_id": pid, "quoted_text": quote, "rationale": rationale}


def label(
    name: str = "REFUND",
    confidence: Any = 0.9,
    support: list[dict[str, Any]] | None = None,
    counter: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    return {
        "label": name,
        "confidence": confidence,
        "supporting_evidence": support
        if support is not None
        else [evidence("p1", "Refunds are issued when an order is not delivered")],
        "counter_evidence": counter or [],
    }


def reply(*labels: dict[str, Any], **overrides: Any) -> dict[str, Any]:
    """A valid reply assigning ``labels`` (default: REFUND backed by p1)."""
    data: dict[str, Any] = {
        "classifications": list(labels) if labels else [label()],
        "unclassifiable": False,
        "unclassifiable_reason": None,
        "evidence_gaps": [],
    }
    data.update(overrides)
    return data


def unclassifiable(reason: str | None = "Nothing in the passages covers this.") -> dict[str, Any]:
    return reply(classifications=[], unclassifiable=True, unclassifiable_reason=reason)
