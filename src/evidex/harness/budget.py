"""Token budgets, fitted once for every job.

Two shapes of exchange exist. Batched jobs (tier, rerank) send many passages per call and
share a context window between them: :func:`passage_limit` is what one passage may keep. Jobs
that send all their evidence in one exchange (classify, audit) must fit the *retry*, the
largest exchange: the first prompt, the rejected reply, the errors, the strict reminder with
the whole schema, and the new reply (:func:`retry_tokens`). When the evidence does not fit,
a job either leaves out its lowest-ranked passages (:func:`drop_to_budget`) or cuts only the
longest ones, all to one length (:func:`water_level`); each cut is an event, never silent.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence

from evidex.errors import InputError
from evidex.judging import Judge
from evidex.tasks.base import PromptTemplate, StepRequest
from evidex.types import Event, Passage

__all__ = [
    "ERRORS_RESERVE",
    "MESSAGE_OVERHEAD",
    "drop_to_budget",
    "passage_limit",
    "rank_order",
    "reply_reserve",
    "retry_prompt_tokens",
    "retry_tokens",
    "water_level",
]

ERRORS_RESERVE = 300
"""Tokens kept for the validation errors that a re-ask quotes back to the judge."""
MESSAGE_OVERHEAD = 8
"""Chat-template tokens a judge adds around each message (role markers)."""


def passage_limit(judge: Judge, fixed_text: str, per_call: int) -> int:
    """Tokens one passage may have when ``per_call`` passages share a prompt whose fixed part
    is ``fixed_text`` (the judge splits what its window leaves; encoders answer with their
    sequence length)."""
    return judge.passage_token_limit(judge.count_tokens(fixed_text), per_call)


def retry_prompt_tokens(judge: Judge, template: PromptTemplate, request: StepRequest) -> int:
    """Prompt tokens of the retry: the messages, the re-ask note and the strict reminder with
    the schema, each with its chat-template overhead (the replies are :func:`reply_reserve`)."""
    texts = [m.content for m in request.messages]
    texts += [
        template.reask.replace("[ERRORS]", ""),
        template.strict.replace("[SCHEMA]", json.dumps(request.schema)),
    ]
    return judge.count_tokens("\n".join(texts)) + MESSAGE_OVERHEAD * (len(texts) + 1)


def reply_reserve(request: StepRequest) -> int:
    """Room for the rejected reply, the errors quoted back and the new reply."""
    return 2 * request.max_tokens + ERRORS_RESERVE


def retry_tokens(judge: Judge, template: PromptTemplate, request: StepRequest) -> int:
    """Every token of the retry exchange."""
    return retry_prompt_tokens(judge, template, request) + reply_reserve(request)


def water_level(counts: Sequence[int], budget: int, *, floor: int) -> int:
    """The largest per-passage limit L (at least ``floor``) with ``sum(min(c, L)) <= budget``:
    only the longest passages are cut, and all of them to the same length."""
    lo, hi = floor, max(counts)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if sum(min(c, mid) for c in counts) <= budget:
            lo = mid
        else:
            hi = mid - 1
    return lo


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
