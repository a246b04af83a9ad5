"""Fitting an audit into the judge's context window, retry included.

The retry of a rejected reply carries the first prompt, the rejected reply, the errors and the
stricter reminder with the whole schema, and then needs room for its own reply. So the budget
of the passages is what the window leaves after *that* exchange. When the passages do not fit,
the answer side shrinks first (smaller answer segments, fewer claims per batch: more calls, same
evidence); only then are the longest passages cut, each cut recorded by preflight as an event.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from evidex.errors import ConfigError
from evidex.harness.budget import retry_tokens, water_level
from evidex.jobs._audit_stages import BUILTIN_PROMPTS, AuditPrompts
from evidex.judging import AuditPayload, ClaimsPayload, ExtractPayload, Judge, Payload
from evidex.tasks.audit import (
    AuditStep,
    ClaimBatch,
    ClaimSpan,
    ClassifyStep,
    ExtractStep,
    SegmentBatch,
)
from evidex.types import Event, Passage, RiskLevel

__all__ = ["Fit", "fit_to_window"]

MIN_SEGMENT, MIN_PASSAGE = 60, 32
_FILLER = "The answer states one more fact here. "
_CLAIM_CHARS = 120


@dataclass(frozen=True)
class Fit:
    segment_tokens: int
    claims_per_batch: int
    passage_limit: int | None
    """Tokens a passage may keep (``None``: every passage fits whole)."""
    events: list[Event] = field(default_factory=list)


def fit_to_window(
    judge: Judge,
    passages: Sequence[Passage],
    *,
    extract: bool,
    classify: bool,
    risk: RiskLevel,
    segment_tokens: int,
    claims_per_batch: int,
    prompts: AuditPrompts = BUILTIN_PROMPTS,
) -> Fit:
    """Sizes that let every exchange and its retry fit ``judge.context_window``.

    ``extract`` is the one-pass or extraction step over answer segments, ``classify`` the
    classification of claim batches; the grading step (one-pass or classify) carries the
    passages. Raises :class:`ConfigError` when not even the smallest sizes fit.

    A judge that answers every step of this audit in pieces of its own
    (:meth:`~evidex.judging.Judge.answers_in_pieces`: ``local:qwen`` in score mode reads one
    claim and a few picked sentences per question) needs none of this: its passages go whole
    and the sizes stay as asked.
    """
    if _in_pieces(judge, extract=extract, classify=classify):
        return Fit(segment_tokens, claims_per_batch, None)
    window = judge.context_window
    counts = [judge.count_tokens(p.text) for p in passages]
    probe = tuple(Passage(passage_id=p.passage_id, text="x") for p in passages)
    segment, claims = segment_tokens, claims_per_batch
    while True:
        free, answer_side_fits = _free(
            judge, probe, risk, extract, classify, segment, claims, prompts
        )
        if answer_side_fits and sum(counts) <= free:
            break  # every passage fits whole
        if classify and claims > 1:
            claims = max(1, claims // 2)
        elif extract and segment > MIN_SEGMENT:
            segment = max(MIN_SEGMENT, segment // 2)
        else:
            break
    if not answer_side_fits or sum(min(c, MIN_PASSAGE) for c in counts) > free:
        raise ConfigError(
            f"the context window of {judge.judge_id} ({window} tokens) cannot hold an audit "
            f"exchange and its retry with {len(counts)} passage(s), even with answer segments of "
            f"{segment} tokens and {claims} claim(s) per call; use a judge with a larger window "
            "or pass fewer passages"
        )
    events = []
    if (segment, claims) != (segment_tokens, claims_per_batch):
        events.append(
            Event(
                kind="batches_shrunk",
                detail=f"to fit {judge.judge_id}'s {window}-token window with the retry, answer "
                f"segments are {segment} tokens (asked {segment_tokens}) and {claims} claim(s) "
                f"go per call (asked {claims_per_batch})",
                data={"segment_tokens": segment, "claims_per_batch": claims},
            )
        )
    limit = None if sum(counts) <= free else water_level(counts, free, floor=MIN_PASSAGE)
    return Fit(segment, claims, limit, events)


def _in_pieces(judge: Judge, *, extract: bool, classify: bool) -> bool:
    """Whether ``judge`` answers every exchange this audit sends in pieces of its own."""
    steps: list[type[Payload]] = [ClaimsPayload if classify else AuditPayload]
    if extract and classify:
        steps.append(ExtractPayload)
    return all(judge.answers_in_pieces(step) for step in steps)


def _free(
    judge: Judge,
    probe: tuple[Passage, ...],
    risk: RiskLevel,
    extract: bool,
    classify: bool,
    segment: int,
    claims: int,
    prompts: AuditPrompts,
) -> tuple[int, bool]:
    """Tokens left for passage texts by the grading exchange, and whether the other exchanges
    (which carry no passages) fit at all."""
    window = judge.context_window
    text = (_FILLER * (1 + segment * 4 // len(_FILLER)))[: segment * 4].strip()
    if classify:
        spans = tuple(
            ClaimSpan(claim_id=f"claim-{i}", claim_text=_FILLER * 3, start=0, end=_CLAIM_CHARS)
            for i in range(1, claims + 1)
        )
        grading = retry_tokens(
            judge,
            prompts.grading,
            ClassifyStep(prompts.grading).request(ClaimBatch(spans, probe, risk=risk)),
        )
        other = (
            retry_tokens(judge, ExtractStep.template, ExtractStep().request(SegmentBatch(text, ())))
            if extract
            else 0
        )
        return window - grading, other <= window
    one_pass = AuditStep(prompts.one_pass)
    grading = retry_tokens(
        judge, prompts.one_pass, one_pass.request(SegmentBatch(text, probe, risk=risk))
    )
    return window - grading, True
