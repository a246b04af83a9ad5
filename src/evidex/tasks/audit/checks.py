"""Semantic checks of an audit reply against its input, in words a model can act on.

Every claim is found in place in the answer (:func:`locate_claim`), every graded claim is
checked against the passages it cites (:func:`check_grading`), and the judge's own summary is
compared with the claims and ignored (:func:`summary_warning`).

Lexical checks catch the audit judge's two commonest slips, cheaply and without a model.

A small judge (and sometimes a large one) grades a claim ``fully_supported`` while quoting a
sentence that is about something else, or that gives a different number; and it skips a
sentence of the answer altogether, so that sentence is never audited. Neither slip can be seen
by schema or verbatim checks. These checks are deliberately narrow, so that a correct reply
never trips them:

- a number written in a fully supported claim must appear in one of its quotes (a paraphrase
  can change words, not figures);
- a fully supported claim must share at least one content word with its quotes;
- every sentence of the answer that states something (it has a figure, or three content
  words, and is not a question) must overlap at least one claim.

The first two produce validation errors, so the judge is re-asked with the exact problem, like
any other validation failure; they never change a grade themselves. A skipped sentence is not an
error: the audit job grades it as a claim of its own in a classification call, so it is judged
like every other claim (re-asking for it failed with small judges, which then fell back).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from evidex._text import contains_verbatim, nearest_span, quote_mismatch
from evidex.tasks.audit.models import (
    SUPPORT_LEVELS,
    AuditSummary,
    ClaimAudit,
    ClaimBatch,
    ClaimSpan,
    SegmentBatch,
    SourceRef,
)
from evidex.tasks.base import ItemGrades, ReplyInvalid, count_ids, reply_list
from evidex.tasks.spans import find_span
from evidex.types import Event, Passage

__all__ = [
    "check_grading",
    "content_words",
    "figures",
    "grade_claims",
    "graded_claim",
    "locate_claim",
    "number_errors",
    "skipped_sentences",
    "sort_found",
    "statement_sentences",
    "summary_warning",
    "uncovered_sentences",
    "word_overlap_error",
]

_NUMBER = re.compile(r"(?<![\w.])\d+(?:[.,]\d+)*(?![\w])")
_WORD = re.compile(r"[^\W\d_]{3,}", re.UNICODE)
_SENTENCE = re.compile(r"[^\n]+?(?:[.!?]+(?=\s|$)|$)", re.MULTILINE)
# Words of three letters or more that carry no topic; shorter words are ignored anyway.
_FUNCTION_WORD_LIST = """
    all and any are but can did for had has her him his how its may nor not now our own she the
    too was who why yes yet you about above after again against also although among another
    because been before being below between both could does doing down during each either every
    from further have having here hers herself himself however into itself just least less many
    more most much must neither none only other ought ours ourselves over same several should
    since some such than that their theirs them themselves then there these they this those
    though through thus under until upon very what when where whether which while whom whose
    will with within without would your yours yourself yourselves
    """
_FUNCTION_WORDS = frozenset(_FUNCTION_WORD_LIST.split())


def content_words(text: str) -> set[str]:
    """Lower-cased words of three letters or more that are not function words, cut to their
    first five letters so that "arrives" and "arrival" meet."""
    return {w.lower()[:5] for w in _WORD.findall(text) if w.lower() not in _FUNCTION_WORDS}


def figures(text: str) -> list[str]:
    """The figures written in ``text`` (thousands separators dropped), as the figure check
    compares them."""
    return [n.replace(",", "") for n in _NUMBER.findall(text)]


def number_errors(label: str, claim: str, quotes: Iterable[str]) -> list[str]:
    """An error when a fully supported claim states a number none of its quotes contains."""
    quoted = {n for q in quotes for n in figures(q)}
    missing = sorted({n for n in figures(claim) if n not in quoted})
    if not missing:
        return []
    return [
        f"{label}: classified fully_supported, but the figure(s) {missing} of the claim appear "
        "in none of its supporting_quotes. Quote the passage words that state them; if no "
        "passage states them, classify the claim partially_supported or unsupported (and "
        "contradicted when a passage gives a different figure)"
    ]


def word_overlap_error(label: str, claim: str, quotes: Sequence[str]) -> list[str]:
    """An error when a fully supported claim's quotes share no content word with it."""
    words = content_words(claim)
    if not words or not quotes or words & content_words(" ".join(quotes)):
        return []
    return [
        f"{label}: classified fully_supported, but its supporting_quotes share no word with the "
        "claim, so they do not state it. Quote the sentence that states the claim, or classify "
        "it lower"
    ]


def statement_sentences(text: str) -> list[tuple[int, int]]:
    """Offsets of the sentences of ``text`` that state something checkable: a figure or at
    least three content words, and not a question."""
    spans = []
    for match in _SENTENCE.finditer(text):
        sentence = match.group().strip()
        if not sentence or sentence.endswith("?"):
            continue
        if figures(sentence) or len(content_words(sentence)) >= 3:
            begin = match.start() + (len(match.group()) - len(match.group().lstrip()))
            spans.append((begin, begin + len(sentence)))
    return spans


def uncovered_sentences(text: str, claim_spans: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """The statement sentences of ``text`` (offsets in ``text``) that no claim span overlaps."""
    return [
        (begin, end)
        for begin, end in statement_sentences(text)
        if not any(b < end and begin < e for b, e in claim_spans)
    ]


# ------------------------------------------------------------------------------ replies


def sort_found(
    batch: SegmentBatch, items: Sequence[Any]
) -> tuple[list[ClaimAudit], list[tuple[int, int]], list[str]]:
    """A one-pass reply sorted out: the claims found verbatim in the segment and graded validly
    (offsets in the whole answer), where they sit in the segment, and every error."""
    errors: list[str] = []
    claims: list[ClaimAudit] = []
    located: list[tuple[int, int]] = []
    cursor: dict[str, int] = {}
    for index, item in enumerate(items):
        label = f"claims[{index}]"
        if not isinstance(item, dict):
            errors.append(f"{label} is not an object")
            continue
        span, span_errors = locate_claim(batch.answer, item.get("claim_text"), label, cursor)
        grading_errors = check_grading(label, item, batch.passages)
        errors += span_errors + grading_errors
        if span is None or span_errors or grading_errors:
            continue
        located.append((span.start, span.end))
        offsets = {
            "claim_id": f"claim-{len(claims) + 1}",
            "start": span.start + batch.offset,
            "end": span.end + batch.offset,
        }
        claims.append(graded_claim(item, span.model_copy(update=offsets), batch.passages))
    return claims, located, errors


def grade_claims(batch: ClaimBatch, data: Any) -> ItemGrades[ClaimAudit]:
    by_id = {c.claim_id: c for c in batch.claims}
    graded: ItemGrades[ClaimAudit] = ItemGrades(tuple(by_id))
    try:
        items = reply_list(data, "claims")
    except ReplyInvalid as exc:  # not even a list of claims
        graded.general += exc.errors
        return graded
    counts = count_ids(items, "claim_id")
    for index, item in enumerate(items):
        if not isinstance(item, dict):
            graded.general.append(f"claims[{index}] is not an object")
            continue
        cid = str(item.get("claim_id"))
        if cid not in by_id:
            graded.general.append(
                f"claims[{index}]: claim_id {cid!r} is not one of {sorted(by_id)}"
            )
        elif counts[cid] > 1:
            graded.failed[cid] = [f"claim {cid!r} is graded more than once; grade each claim once"]
        else:
            errors = check_grading(f"claim {cid!r}", item, batch.passages, by_id[cid].claim_text)
            if errors:
                graded.failed[cid] = errors
            else:
                graded.valid[cid] = graded_claim(item, by_id[cid], batch.passages)
    for cid in by_id:
        if cid not in counts:
            graded.failed[cid] = [f"claim {cid!r} is missing; grade every claim"]
    return graded


def check_grading(
    label: str, item: Mapping[str, Any], passages: Sequence[Passage], claim_text: Any = None
) -> list[str]:
    """Every problem with one graded claim, in words a model can act on.

    Enum, cited ids in the context, quotes verbatim in a cited passage, a contradiction that is
    ``unsupported`` and quotes the conflicting sentence, a partial grade that names the
    unsupported words, and an empty context that supports nothing.
    """
    by_id = {p.passage_id: p for p in passages}
    claim = claim_text if claim_text is not None else item.get("claim_text")
    errors: list[str] = []
    level = item.get("classification")
    if level not in SUPPORT_LEVELS:
        errors.append(f"{label}: classification {level!r} is not one of {list(SUPPORT_LEVELS)}")

    ids = item.get("supporting_context_ids")
    quotes = item.get("supporting_quotes")
    if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
        errors.append(f"{label}: supporting_context_ids must be a list of passage ids")
        ids = []
    if not isinstance(quotes, list) or not all(isinstance(q, str) for q in quotes):
        errors.append(f"{label}: supporting_quotes must be a list of strings")
        quotes = []
    unknown = [i for i in ids if i not in by_id]
    if unknown:
        known = ", ".join(by_id) or "none: the context is empty"
        errors.append(f"{label}: unknown passage id(s) {unknown}; the context has: {known}")
    cited = [by_id[i] for i in ids if i in by_id]
    errors += [_quote_error(label, q, cited, passages) for q in quotes if not _in_any(q, cited)]

    if not passages and level in SUPPORT_LEVELS and level != "unsupported":
        errors.append(f"{label}: the context is empty, so the claim must be unsupported")
    if level in ("fully_supported", "partially_supported") and (not ids or not quotes):
        errors.append(f"{label}: a {level} claim must cite a passage id and quote it")
    if level == "fully_supported" and isinstance(claim, str) and not errors:
        errors += number_errors(label, claim, quotes) or word_overlap_error(label, claim, quotes)
    if level == "inferred" and not ids:
        errors.append(f"{label}: an inferred claim must cite the passages the inference rests on")

    explanation = item.get("explanation")
    if not isinstance(explanation, str) or not explanation.strip():
        errors.append(f"{label}: explanation is empty; say why this classification fits")

    part = item.get("unsupported_part")
    if level == "partially_supported" and (not isinstance(part, str) or not part.strip()):
        errors.append(
            f"{label}: a partially_supported claim must copy into unsupported_part the words "
            "of the claim that no passage backs"
        )
    elif isinstance(part, str) and part.strip() and isinstance(claim, str):
        if not contains_verbatim(claim, part):
            errors.append(f"{label}: unsupported_part {part[:120]!r} is not words of the claim")
        elif level == "partially_supported" and contains_verbatim(part, claim):
            errors.append(
                f"{label}: unsupported_part is the whole claim; then the claim is unsupported"
            )
    elif part is not None and not isinstance(part, str):
        errors.append(f"{label}: unsupported_part must be a string or null")
    errors += _check_contradiction(label, item, level, passages)
    return errors


def _check_contradiction(
    label: str, item: Mapping[str, Any], level: Any, passages: Sequence[Passage]
) -> list[str]:
    contradicted = item.get("contradicted", False)
    quote = item.get("contradicting_quote")
    if not isinstance(contradicted, bool):
        return [f"{label}: contradicted must be true or false"]
    if not contradicted:
        if quote not in (None, ""):
            return [
                f"{label}: contradicting_quote is set but contradicted is false; set "
                "contradicted to true or contradicting_quote to null"
            ]
        return []
    errors = []
    if level != "unsupported":
        errors.append(
            f"{label}: a contradicted claim must be classified unsupported, not {level!r}"
        )
    if not isinstance(quote, str) or not quote.strip():
        errors.append(
            f"{label}: contradicted is true but contradicting_quote is empty; copy the sentence "
            "of the passage that conflicts with the claim"
        )
    elif not _in_any(quote, passages):
        errors.append(_quote_error(label, quote, (), passages, what="contradicting_quote"))
    return errors


def _in_any(quote: str, passages: Sequence[Passage]) -> bool:
    return any(contains_verbatim(p.text, quote) for p in passages)


def _quote_error(
    label: str,
    quote: str,
    cited: Sequence[Passage],
    passages: Sequence[Passage],
    what: str = "quote",
) -> str:
    holder = next((p for p in passages if contains_verbatim(p.text, quote)), None)
    if holder is not None:
        return (
            f"{label}: {what} {quote[:120]!r} is in passage {holder.passage_id!r}, which is not "
            "in supporting_context_ids; cite it"
        )
    if not passages:
        return f"{label}: {what} {quote[:120]!r} cannot be right: the context is empty"
    pool = cited or passages
    best = max(pool, key=lambda p: len(nearest_span(p.text, quote)) and _overlap(p.text, quote))
    return (
        f"{label}: {what} {quote[:80]!r} is not verbatim in the cited passages; in "
        f"{best.passage_id!r}, {quote_mismatch(best.text, quote)}. Copy the words exactly"
    )


def _overlap(text: str, quote: str) -> int:
    words = set(text.lower().split())
    return sum(1 for w in quote.lower().split() if w in words)


def skipped_sentences(batch: SegmentBatch, located: Sequence[tuple[int, int]]) -> list[ClaimSpan]:
    """Statement sentences of the segment that no located claim overlaps, as claim spans with
    offsets in the whole answer."""
    return [
        ClaimSpan(
            claim_id=f"skipped-{i}",
            claim_text=batch.answer[begin:end],
            start=begin + batch.offset,
            end=end + batch.offset,
        )
        for i, (begin, end) in enumerate(uncovered_sentences(batch.answer, located), 1)
    ]


def locate_claim(
    answer: str, text: Any, label: str, cursor: dict[str, int]
) -> tuple[ClaimSpan | None, list[str]]:
    """Find a claim in the answer. A claim repeated in the reply takes the next occurrence in
    the answer; with none left, it is a repeat the judge must remove."""
    if not isinstance(text, str) or not text.strip():
        return None, [f"{label}: claim_text must be a non-empty span of the answer"]
    key = " ".join(text.split())
    span = find_span(answer, text, cursor.get(key, 0))
    if span is None:
        if find_span(answer, text) is not None:
            return None, [f"{label}: claim {text[:120]!r} is listed more often than it occurs"]
        near = nearest_span(answer, text)
        return None, [
            f"{label}: claim_text {text[:120]!r} is not verbatim in the answer; the closest "
            f"text there is {near[:120]!r}. Copy claims exactly, do not rephrase"
        ]
    cursor[key] = span[1]
    return ClaimSpan(claim_text=answer[span[0] : span[1]], start=span[0], end=span[1]), []


def graded_claim(
    item: Mapping[str, Any], span: ClaimSpan, passages: Sequence[Passage]
) -> ClaimAudit:
    by_id = {p.passage_id: p for p in passages}
    ids = list(dict.fromkeys(item.get("supporting_context_ids") or []))
    part = item.get("unsupported_part")
    return ClaimAudit(
        **span.model_dump(),
        classification=item["classification"],
        supporting_context_ids=ids,
        supporting_quotes=list(item.get("supporting_quotes") or []),
        explanation=str(item.get("explanation") or "").strip(),
        unsupported_part=part.strip() if isinstance(part, str) and part.strip() else None,
        contradicted=bool(item.get("contradicted", False)),
        contradicting_quote=item.get("contradicting_quote") or None,
        sources=[
            SourceRef(passage_id=i, title=by_id[i].title, url=by_id[i].url)
            for i in ids
            if by_id[i].title or by_id[i].url
        ],
    )


def summary_warning(data: Mapping[str, Any], claims: Sequence[ClaimAudit]) -> list[Event]:
    """A judge summary that disagrees with its own claims is logged, and ignored."""
    reported = data.get("summary")
    if not isinstance(reported, dict):
        return []
    computed = AuditSummary.of(claims).model_dump()
    if all(reported.get(k, v) == v for k, v in computed.items()):
        return []
    return [
        Event(
            kind="summary_mismatch",
            detail="the judge's summary disagrees with its own claims; the summary was "
            "recomputed from the claims",
            data={"reported": reported, "computed": computed},
        )
    ]
