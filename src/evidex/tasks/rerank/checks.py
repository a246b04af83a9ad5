"""Checks of a rerank reply against its batch, in words a judge can act on: passage ids,
scores, exclusions and ranks."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from evidex.types import Passage

__all__ = [
    "JUSTIFICATION_SCHEMA",
    "entry_errors",
    "exclusions",
    "id_errors",
    "rank_errors",
    "score_of",
]

JUSTIFICATION_SCHEMA = {"type": "string", "maxLength": 200}
"""A ranking justification in a reply schema: one sentence, bounded, so a judge with
constrained decoding cannot write on past the ``max_tokens`` its batch is given (about 90 a
passage)."""


def score_of(value: Any) -> float | None:
    """A finite number, or None when the value is not one (``bool`` is not a score)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def id_errors(seen: Counter[str], known: Mapping[str, Passage], what: str) -> list[str]:
    errors = []
    for pid, n in seen.items():
        if pid not in known:
            errors.append(
                f"passage_id {pid!r} is not one of the input passages; use only the ids given"
            )
        elif n > 1:
            errors.append(f"passage_id {pid!r} appears {n} times; {what} each passage once")
    return errors


def exclusions(raw: Any, by_id: Mapping[str, Passage]) -> tuple[dict[str, str], list[str]]:
    if raw is None:
        return {}, []
    if not isinstance(raw, list):
        return {}, ['"excluded" must be a list of {"passage_id", "reason"} objects']
    excluded: dict[str, str] = {}
    errors: list[str] = []
    for item in raw:
        if not isinstance(item, dict):
            errors.append('each "excluded" entry must be an object with passage_id and reason')
            continue
        pid, reason = str(item.get("passage_id")), item.get("reason")
        if pid not in by_id:
            errors.append(f"excluded passage_id {pid!r} is not one of the input passages")
        elif not isinstance(reason, str) or not reason.strip():
            errors.append(f"excluded passage {pid!r} needs a reason; otherwise rank it")
        else:
            excluded[pid] = reason.strip()
    return excluded, errors


def entry_errors(pid: str, entry: Mapping[str, Any]) -> list[str]:
    errors = []
    justification = entry.get("justification")
    if justification is not None and not isinstance(justification, str):
        errors.append(f"passage {pid!r}: justification must be a string")
    score = entry.get("relevance_score")
    if score is not None and score_of(score) is None:
        errors.append(f"passage {pid!r}: relevance_score must be a number or null, got {score!r}")
    return errors


def rank_errors(ranks: Sequence[int]) -> list[str]:
    """Ranks must be exactly 1..m, each once."""
    errors = []
    counts = Counter(ranks)
    for rank, n in sorted(counts.items()):
        if n > 1:
            errors.append(f"rank {rank} is given to {n} passages; every rank must be unique")
    expected = set(range(1, len(ranks) + 1))
    stray = sorted(set(ranks) - expected)
    gaps = sorted(expected - set(ranks))
    if stray:
        errors.append(
            f"ranks {stray} are outside 1..{len(ranks)}; number the passages 1, 2, 3 ... "
            "without gaps"
        )
    elif gaps and not any(n > 1 for n in counts.values()):
        errors.append(f"ranks {gaps} are missing; number the passages 1, 2, 3 ... without gaps")
    return errors
