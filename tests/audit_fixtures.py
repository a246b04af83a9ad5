"""Small hand-made audit fixtures: an answer with one claim of each kind, and reply builders."""

from __future__ import annotations

from typing import Any

from evidex.types import Passage

PASSAGES = [
    Passage(
        passage_id="passage-1",
        text="Acme Corp was founded in 2012 by Jane Smith. The company is headquartered in "
        "Austin, Texas.",
        title="About Acme",
        url="https://acme.example/about",
    ),
    Passage(passage_id="passage-2", text="The software license costs $500 per user per year."),
    Passage(
        passage_id="passage-3",
        text="The product launch event is scheduled for March 15. All senior executives will "
        "attend.",
    ),
]

FOUNDED = "Acme Corp was founded in 2012."
CEO = "The CEO will be at the product launch."
FREE = "The software license is free for academic use."
ANSWER = f"{FOUNDED} {CEO} {FREE}"
QUESTION = "Tell me about Acme."


def supported(claim: str = FOUNDED, **over: Any) -> dict[str, Any]:
    entry = {
        "claim_text": claim,
        "classification": "fully_supported",
        "supporting_context_ids": ["passage-1"],
        "supporting_quotes": ["Acme Corp was founded in 2012 by Jane Smith."],
        "explanation": "The passage states the founding year.",
        "unsupported_part": None,
        "contradicted": False,
        "contradicting_quote": None,
    }
    entry.update(over)
    return entry


def inferred(claim: str = CEO, **over: Any) -> dict[str, Any]:
    entry = {
        "claim_text": claim,
        "classification": "inferred",
        "supporting_context_ids": ["passage-3"],
        "supporting_quotes": ["All senior executives will attend."],
        "explanation": "A CEO is a senior executive, so the attendance follows.",
        "unsupported_part": None,
        "contradicted": False,
        "contradicting_quote": None,
    }
    entry.update(over)
    return entry


def contradicted(claim: str = FREE, **over: Any) -> dict[str, Any]:
    entry = {
        "claim_text": claim,
        "classification": "unsupported",
        "supporting_context_ids": [],
        "supporting_quotes": [],
        "explanation": "The context gives a price of $500 per user per year.",
        "unsupported_part": None,
        "contradicted": True,
        "contradicting_quote": "The software license costs $500 per user per year.",
    }
    entry.update(over)
    return entry


def unsupported(claim: str, **over: Any) -> dict[str, Any]:
    entry = {
        "claim_text": claim,
        "classification": "unsupported",
        "supporting_context_ids": [],
        "supporting_quotes": [],
        "explanation": "Nothing in the context mentions this.",
        "unsupported_part": None,
        "contradicted": False,
        "contradicting_quote": None,
    }
    entry.update(over)
    return entry


def reply(*claims: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"answer_id": None, "claims": list(claims), **extra}


def graded(claim_id: str, entry: dict[str, Any]) -> dict[str, Any]:
    """A classify-step entry: the one-pass entry with claim_id instead of claim_text."""
    out = {k: v for k, v in entry.items() if k != "claim_text"}
    return {"claim_id": claim_id, **out}
