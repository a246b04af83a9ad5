"""Preflight checks shared by every job: run before any judge is called.

Ids must be unique (a duplicate id is the caller's bug: we stop with a clear error), duplicate
passages are merged and reported, and passages too long for the judge's context are truncated
with a recorded event, never dropped silently.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from evidex._text import normalize_ws
from evidex.errors import InputError
from evidex.types import Event, Passage

__all__ = ["Prepared", "drop_to_budget", "prepare_passages", "rank_order", "truncate_to_tokens"]


@dataclass
class Prepared:
    """Passages ready for batching, and what preflight did to get there."""

    passages: list[Passage]
    duplicates: dict[str, str] = field(default_factory=dict)
    """Removed passage id → the id of the identical passage that was kept."""
    events: list[Event] = field(default_factory=list)


def prepare_passages(
    passages: Sequence[Passage],
    *,
    count_tokens: Callable[[str], int],
    max_passage_tokens: int | None = None,
) -> Prepared:
    if not passages:
        raise InputError("no passages given: at least one passage is required")
    counts = Counter(p.passage_id for p in passages)
    repeated = sorted(pid for pid, n in counts.items() if n > 1)
    if repeated:
        raise InputError(
            f"passage ids must be unique; repeated: {', '.join(repeated[:10])}"
            + (f" and {len(repeated) - 10} more" if len(repeated) > 10 else "")
        )

    kept: list[Passage] = []
    first_by_text: dict[str, str] = {}
    duplicates: dict[str, str] = {}
    for passage in passages:
        norm = normalize_ws(passage.text)
        if norm in first_by_text:
            duplicates[passage.passage_id] = first_by_text[norm]
            continue
        first_by_text[norm] = passage.passage_id
        kept.append(passage)

    events: list[Event] = []
    if duplicates:
        events.append(
            Event(
                kind="duplicates_removed",
                detail=f"{len(duplicates)} passage(s) repeat the text of an earlier passage; "
                "each is judged once and the duplicate takes the kept passage's result",
                passage_ids=sorted(duplicates),
                data={"duplicate_of": duplicates},
            )
        )

    if max_passage_tokens is not None:
        kept = [_fit(p, count_tokens, max_passage_tokens, events) for p in kept]
    return Prepared(passages=kept, duplicates=duplicates, events=events)


def _fit(
    passage: Passage, count_tokens: Callable[[str], int], limit: int, events: list[Event]
) -> Passage:
    tokens = count_tokens(passage.text)
    if tokens <= limit:
        return passage
    text = truncate_to_tokens(passage.text, limit, count_tokens)
    events.append(
        Event(
            kind="truncated",
            detail=f"passage {passage.passage_id} has {tokens} tokens, over the per-passage "
            f"budget of {limit}; the judge sees its first {len(text)} characters",
            passage_ids=[passage.passage_id],
            data={"tokens": tokens, "limit": limit, "kept_chars": len(text)},
        )
    )
    return passage.model_copy(update={"text": text})


def truncate_to_tokens(text: str, limit: int, count_tokens: Callable[[str], int]) -> str:
    """The longest prefix of ``text`` within ``limit`` tokens, cut at a word boundary."""
    lo, hi = 0, len(text)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if count_tokens(text[:mid]) <= limit:
            lo = mid
        else:
            hi = mid - 1
    cut = text[:lo]
    space = cut.rfind(" ")
    return cut[:space] if space > len(cut) // 2 else cut


def rank_order(passages: Sequence[Passage]) -> list[Passage]:
    """Best first: by the given ``rank`` (lower is better), else by input order."""
    indexed = list(enumerate(passages))
    indexed.sort(key=lambda pair: (pair[1].rank is None, pair[1].rank or 0, pair[0]))
    return [p for _, p in indexed]


def drop_to_budget(
    passages: Sequence[Passage],
    *,
    prompt_tokens: Callable[[Sequence[Passage]], int],
    budget: int,
) -> tuple[list[Passage], list[Event]]:
    """Keep the best-ranked passages whose assembled prompt fits ``budget`` tokens.

    ``prompt_tokens`` counts the whole prompt for a set of passages (in input order), so the
    check covers the real assembled text. The lowest-ranked passages go first (see
    :func:`rank_order`); every drop is recorded in one ``dropped_over_budget`` event. Raises
    ``InputError`` when not even the best passage fits.
    """
    position = {p.passage_id: i for i, p in enumerate(passages)}
    ranked = rank_order(passages)
    kept = list(ranked)
    total = prompt_tokens(passages)
    first_total = total
    while total > budget and kept:
        kept.pop()
        if kept:
            total = prompt_tokens(sorted(kept, key=lambda p: position[p.passage_id]))
    if not kept:
        raise InputError(
            f"the prompt needs {first_total} tokens with every passage and does not fit the "
            f"budget of {budget} even with the best-ranked passage alone; shorten the input or "
            "the passages, or use a judge with a larger context window"
        )
    dropped = [p.passage_id for p in ranked[len(kept) :]]
    events = []
    if dropped:
        events.append(
            Event(
                kind="dropped_over_budget",
                detail=f"the assembled prompt needs {first_total} tokens, over the budget of "
                f"{budget}; the {len(dropped)} lowest-ranked passage(s) were left out and the "
                f"prompt now needs {total}",
                passage_ids=dropped,
                data={"tokens": first_total, "budget": budget, "kept_tokens": total},
            )
        )
    kept.sort(key=lambda p: position[p.passage_id])
    return kept, events
