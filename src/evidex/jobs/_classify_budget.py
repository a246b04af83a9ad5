"""Fitting one classify exchange, and its retry, into the judge's context window.

The passages go whole to a judge that answers in pieces of its own (``local:qwen`` in score
mode reads the input with a few picked sentences per question). Otherwise the retry (the
first prompt, the rejected reply, the errors and the strict reminder) must fit: each passage is
cut to what the window leaves around the rest of the prompt, then the lowest-ranked passages
are left out until the whole prompt fits, each cut and each drop an event.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from evidex.errors import InputError
from evidex.harness.budget import drop_to_budget, reply_reserve, retry_prompt_tokens
from evidex.judging import ClassifyPayload, Judge
from evidex.preflight import Prepared, prepare_passages
from evidex.tasks.base import PromptTemplate
from evidex.tasks.classify import ClassifyBatch, ClassifyStep
from evidex.types import Event, Passage

__all__ = ["fit_passages", "prompt_tokens"]


def prompt_tokens(
    judge: Judge, prompt: PromptTemplate, base: ClassifyBatch, passages: Sequence[Passage]
) -> int:
    """Prompt tokens of the retry with these passages (the replies are reserved apart)."""
    batch = dataclasses.replace(base, passages=tuple(passages))
    return retry_prompt_tokens(judge, prompt, ClassifyStep(prompt).request(batch))


def fit_passages(
    judge: Judge, prompt: PromptTemplate, base: ClassifyBatch, items: Sequence[Passage]
) -> tuple[Prepared, list[Passage], list[Event]]:
    """The passages checked and fitted, the ones kept, and the events of those left out; an
    :class:`InputError` when the input, taxonomy and examples alone do not fit."""
    if judge.answers_in_pieces(ClassifyPayload):
        prepared = prepare_passages(items, count_tokens=judge.count_tokens)
        return prepared, prepared.passages, []
    reserve = reply_reserve(ClassifyStep(prompt).request(base))
    budget = judge.context_window - reserve
    fixed = prompt_tokens(judge, prompt, base, ())
    if fixed >= budget:
        raise InputError(
            f"the input, taxonomy, constraints and examples alone need {fixed} prompt "
            f"tokens, over the {budget} that {judge.judge_id} leaves after reserving "
            f"{reserve} for the replies of the retry; shorten them or use a judge with a "
            "larger context window"
        )
    # the prompt with one passage's id, title and tags but no text: what a passage cut to the
    # rest of the budget needs around it to fit alone
    bare = (prompt_tokens(judge, prompt, base, [p.model_copy(update={"text": ""})]) for p in items)
    room = budget - max(bare, default=fixed)
    prepared = prepare_passages(items, count_tokens=judge.count_tokens, max_passage_tokens=room)
    kept, dropped = drop_to_budget(
        prepared.passages,
        prompt_tokens=lambda ps: prompt_tokens(judge, prompt, base, ps),
        budget=budget,
    )
    return prepared, kept, dropped
