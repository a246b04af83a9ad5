"""The audit task's steps, pure: each validation fault is rejected with words a model can act on,
offsets point at the claim in the answer, and the summary is recomputed, never copied."""

from __future__ import annotations

from typing import Any

import pytest

from evidex.tasks.audit import (
    AuditStep,
    AuditSummary,
    ClaimBatch,
    ClaimSpan,
    ClassifyStep,
    ExtractStep,
    SegmentBatch,
)
from evidex.tasks.base import ReplyInvalid
from evidex.tasks.spans import find_span, segment_text
from tests.audit_fixtures import (
    ANSWER,
    CEO,
    FOUNDED,
    FREE,
    PASSAGES,
    contradicted,
    graded,
    inferred,
    reply,
    supported,
    unsupported,
)

BATCH = SegmentBatch(ANSWER, tuple(PASSAGES), answer_id="a1", question="About Acme?")
FOUNDED_ONLY = SegmentBatch(FOUNDED, tuple(PASSAGES), answer_id="a1")


def _errors(step: Any, batch: Any, data: Any) -> str:
    with pytest.raises(ReplyInvalid) as info:
        step.validate(batch, data)
    return "\n".join(info.value.errors)


def test_valid_reply_gives_offsets_sources_and_recomputed_summary() -> None:
    value = AuditStep().validate(BATCH, reply(supported(), inferred(), contradicted()))
    founded, ceo, free = value.claims
    assert ANSWER[founded.start : founded.end] == FOUNDED
    assert ANSWER[ceo.start : ceo.end] == CEO
    assert ANSWER[free.start : free.end] == FREE
    assert [c.claim_id for c in value.claims] == ["claim-1", "claim-2", "claim-3"]
    assert founded.sources[0].url == "https://acme.example/about"
    assert ceo.sources == []  # passage-3 has no title or URL
    summary = AuditSummary.of(value.claims)
    assert summary.model_dump() == {
        "total_claims": 3,
        "fully_supported": 1,
        "partially_supported": 0,
        "inferred": 1,
        "unsupported": 1,
        "contradicted": 1,
    }


def test_segment_offset_is_added_to_claim_offsets() -> None:
    batch = SegmentBatch(CEO, tuple(PASSAGES), offset=len(FOUNDED) + 1)
    (claim,) = AuditStep().validate(batch, reply(inferred())).claims
    assert ANSWER[claim.start : claim.end] == CEO


def test_claim_not_in_the_answer_is_rejected_with_the_nearest_text() -> None:
    errors = _errors(AuditStep(), BATCH, reply(supported("Acme was started in 2012.")))
    assert "not verbatim in the answer" in errors
    assert "the closest text there is 'Corp was founded in 2012.'" in errors


def test_paraphrased_quote_is_rejected_naming_the_passage() -> None:
    bad = supported(supporting_quotes=["Acme was set up in 2012 by Jane Smith."])
    errors = _errors(AuditStep(), BATCH, reply(bad))
    assert "not verbatim in the cited passages" in errors and "'passage-1'" in errors


def test_quote_from_an_uncited_passage_asks_to_cite_it() -> None:
    bad = supported(supporting_quotes=["The software license costs $500 per user per year."])
    errors = _errors(AuditStep(), BATCH, reply(bad))
    assert "is in passage 'passage-2', which is not in supporting_context_ids" in errors


def test_unknown_passage_id_is_rejected_listing_the_known_ones() -> None:
    errors = _errors(AuditStep(), BATCH, reply(supported(supporting_context_ids=["passage-9"])))
    assert "unknown passage id(s) ['passage-9']" in errors and "passage-1, passage-2" in errors


def test_bad_enum_is_rejected() -> None:
    errors = _errors(AuditStep(), BATCH, reply(supported(classification="supported")))
    assert "classification 'supported' is not one of" in errors


def test_contradicted_without_a_quote_is_rejected() -> None:
    errors = _errors(AuditStep(), BATCH, reply(contradicted(contradicting_quote=None)))
    assert "contradicted is true but contradicting_quote is empty" in errors


def test_contradicted_claim_must_be_unsupported() -> None:
    bad = contradicted(
        classification="inferred", supporting_context_ids=["passage-2"], supporting_quotes=[]
    )
    errors = _errors(AuditStep(), BATCH, reply(bad))
    assert "must be classified unsupported, not 'inferred'" in errors


def test_contradicting_quote_must_be_verbatim() -> None:
    errors = _errors(
        AuditStep(), BATCH, reply(contradicted(contradicting_quote="The license is $500."))
    )
    assert "contradicting_quote 'The license is $500.' is not verbatim" in errors


def test_quote_without_contradiction_is_rejected() -> None:
    bad = unsupported(
        FREE, contradicting_quote="The software license costs $500 per user per year."
    )
    errors = _errors(AuditStep(), BATCH, reply(bad))
    assert "set contradicted to true or contradicting_quote to null" in errors


def test_partial_support_must_name_the_unsupported_part() -> None:
    partial = supported(classification="partially_supported")
    errors = _errors(AuditStep(), BATCH, reply(partial))
    assert "must copy into unsupported_part the words" in errors
    errors = _errors(AuditStep(), BATCH, reply({**partial, "unsupported_part": "in Delaware"}))
    assert "is not words of the claim" in errors
    errors = _errors(AuditStep(), BATCH, reply({**partial, "unsupported_part": FOUNDED}))
    assert "is the whole claim" in errors
    ok = AuditStep().validate(FOUNDED_ONLY, reply({**partial, "unsupported_part": "in 2012"}))
    assert ok.claims[0].unsupported_part == "in 2012"


def test_supported_claim_must_cite_and_quote() -> None:
    bad = supported(supporting_context_ids=[], supporting_quotes=[])
    errors = _errors(AuditStep(), BATCH, reply(bad))
    assert "must cite a passage id and quote it" in errors


def test_every_error_of_a_reply_is_reported_at_once() -> None:
    data = reply(
        supported("Acme was started in 2012."),
        contradicted(contradicting_quote=None),
        inferred(classification="maybe"),
    )
    with pytest.raises(ReplyInvalid) as info:
        AuditStep().validate(BATCH, data)
    assert len(info.value.errors) >= 3


def test_summary_that_disagrees_is_recomputed_and_logged() -> None:
    wrong = {
        "total_claims": 5,
        "fully_supported": 5,
        "partially_supported": 0,
        "inferred": 0,
        "unsupported": 0,
        "contradicted": 0,
    }
    value = AuditStep().validate(
        BATCH, reply(supported(), inferred(), contradicted(), summary=wrong)
    )
    assert [w.kind for w in value.warnings] == ["summary_mismatch"]
    assert value.warnings[0].data["computed"]["total_claims"] == 3
    assert AuditSummary.of(value.claims).fully_supported == 1


def test_empty_context_allows_only_unsupported() -> None:
    batch = SegmentBatch(FOUNDED, ())
    errors = _errors(AuditStep(), batch, reply(supported()))
    assert "the context is empty, so the claim must be unsupported" in errors
    value = AuditStep().validate(batch, reply(unsupported(FOUNDED)))
    assert value.claims[0].classification == "unsupported"
    # and the schema itself allows no passage id
    schema = AuditStep().request(batch).schema
    ids = schema["properties"]["claims"]["items"]["properties"]["supporting_context_ids"]
    assert ids["maxItems"] == 0


def test_refusal_yields_no_claims() -> None:
    batch = SegmentBatch("I'm sorry, I can't help with that. Could you say which product?", ())
    assert AuditStep().validate(batch, {"claims": []}).claims == []


def test_a_claim_listed_twice_needs_two_occurrences() -> None:
    text = "It rains. It rains."
    batch = SegmentBatch(text, ())
    twice = AuditStep().validate(batch, reply(unsupported("It rains."), unsupported("It rains.")))
    assert [(c.start, c.end) for c in twice.claims] == [(0, 9), (10, 19)]
    errors = _errors(
        AuditStep(),
        SegmentBatch("It rains.", ()),
        reply(unsupported("It rains."), unsupported("It rains.")),
    )
    assert "listed more often than it occurs" in errors


def test_not_a_claims_object_is_rejected() -> None:
    assert 'a "claims" list' in _errors(AuditStep(), BATCH, {"claim": []})


def test_extract_step_validates_verbatim_spans() -> None:
    value = ExtractStep().validate(BATCH, {"claims": [FOUNDED, CEO, FREE]})
    assert [ANSWER[c.start : c.end] for c in value.claims] == [FOUNDED, CEO, FREE]
    assert "not verbatim" in _errors(ExtractStep(), BATCH, {"claims": ["Acme is old."]})


def test_classify_step_needs_each_claim_exactly_once() -> None:
    spans = (
        ClaimSpan(claim_id="claim-1", claim_text=FOUNDED, start=0, end=len(FOUNDED)),
        ClaimSpan(claim_id="claim-2", claim_text=FREE, start=70, end=116),
    )
    batch = ClaimBatch(spans, tuple(PASSAGES))
    errors = _errors(
        ClassifyStep(),
        batch,
        {
            "claims": [
                graded("claim-1", supported()),
                graded("claim-1", supported()),
                graded("claim-7", supported()),
            ]
        },
    )
    assert "'claim-1' is graded more than once" in errors
    assert "claim_id 'claim-7' is not one of" in errors
    assert "claim 'claim-2' is missing" in errors
    ok = ClassifyStep().validate(
        batch, {"claims": [graded("claim-2", contradicted()), graded("claim-1", supported())]}
    )
    assert [c.claim_id for c in ok.claims] == ["claim-1", "claim-2"]
    assert ok.claims[1].start == 70  # offsets come from the span, not the judge


def test_classify_fallback_is_explicit_and_conservative() -> None:
    span = ClaimSpan(claim_id="claim-1", claim_text=FOUNDED, start=0, end=len(FOUNDED))
    value = ClassifyStep().fallback(ClaimBatch((span,), tuple(PASSAGES)), "boom")
    (claim,) = value.claims
    assert (claim.classification, claim.source, claim.reason) == ("unsupported", "fallback", "boom")


def test_classify_salvage_keeps_only_claims_that_pass_on_their_own() -> None:
    spans = (
        ClaimSpan(claim_id="claim-1", claim_text=FOUNDED, start=0, end=len(FOUNDED)),
        ClaimSpan(claim_id="claim-2", claim_text=FREE, start=70, end=116),
    )
    batch = ClaimBatch(spans, tuple(PASSAGES))
    step = ClassifyStep()
    salvaged = step.salvage(batch, {"claims": [graded("claim-2", contradicted())]}, "boom")
    assert salvaged is not None and salvaged.kept == ("claim-2",)
    assert [c.claim_id for c in salvaged.left.claims] == ["claim-1"]
    first, second = salvaged.value.claims
    assert (first.source, first.classification) == ("fallback", "unsupported")
    assert first.reason == "claim 'claim-1' is missing; grade every claim"
    assert (second.source, second.contradicted) == ("judge", True)
    # nothing valid, not a list, or nothing wrong with the batch's own claims: no salvage
    unquoted = graded("claim-1", supported(supporting_quotes=["Acme is old."]))
    assert step.salvage(batch, {"claims": [unquoted]}, "x") is None
    assert step.salvage(batch, {"claims": "no"}, "x") is None
    both = [graded("claim-1", supported()), graded("claim-2", contradicted())]
    assert step.salvage(batch, {"claims": [*both, graded("claim-9", supported())]}, "x") is None


def test_one_pass_salvage_keeps_valid_claims_and_returns_the_rest_as_sentences() -> None:
    step = AuditStep()
    wrong_year = supported(supporting_quotes=["Acme Corp was founded in 2013 by Jane Smith."])
    last = {"claims": [wrong_year, inferred(), contradicted()]}
    with pytest.raises(ReplyInvalid):
        step.validate(BATCH, last)
    salvaged = step.salvage(BATCH, last, "boom")
    assert salvaged is not None and salvaged.kept == ("claim-1", "claim-2")
    assert [(c.claim_text, c.source) for c in salvaged.value.claims] == [
        (CEO, "judge"),
        (FREE, "judge"),
    ]
    assert salvaged.value.claims[1].contradicted
    # the founding sentence is no longer lost: it goes to the classification pass
    assert [s.claim_text for s in salvaged.value.skipped] == [FOUNDED]
    assert salvaged.left == BATCH  # the review item shows the whole segment
    # nothing valid, or not a list of claims: no salvage
    assert step.salvage(BATCH, {"claims": [wrong_year]}, "x") is None
    assert step.salvage(BATCH, {"claims": "no"}, "x") is None


def test_prompt_keeps_the_spec_placeholders_and_field_names() -> None:
    request = AuditStep().request(BATCH)
    text = "\n".join(m.content for m in request.messages)
    for name in (
        "claim_text",
        "supporting_context_ids",
        "supporting_quotes",
        "contradicting_quote",
        "fully_supported | partially_supported | inferred | unsupported",
    ):
        assert name in text
    assert AuditStep.template.placeholders() >= {
        "ANSWER",
        "CONTEXT",
        "SOURCE_METADATA",
        "RISK_LEVEL",
    }
    assert "About Acme" in text and "passage-3" in text
    assert AuditStep.max_attempts == 2


def test_find_span_forgives_whitespace_and_curly_quotes() -> None:
    text = "He said \u201chello\n   world\u201d twice."
    start, end = find_span(text, '"hello world"') or (0, 0)
    assert text[start:end] == "\u201chello\n   world\u201d"
    assert find_span(text, "goodbye") is None


def test_segments_cover_the_text_at_sentence_ends() -> None:
    text = " ".join(f"Sentence number {i} is here." for i in range(50))
    segments = segment_text(text, 40, lambda s: (len(s) + 3) // 4)
    assert len(segments) > 1
    assert all((len(s.text) + 3) // 4 <= 40 for s in segments)
    assert all(s.text.endswith(".") for s in segments)
    assert " ".join(s.text for s in segments) == text
    run_on = "word " * 400
    pieces = segment_text(run_on, 30, lambda s: (len(s) + 3) // 4)
    assert "".join(run_on[s.start : s.end] for s in pieces).replace(" ", "") == run_on.replace(
        " ", ""
    )


# ------------------------------------------------------------ lexical sanity of the grades


def test_fully_supported_claim_needs_its_figures_in_the_quotes() -> None:
    wrong_year = supported("Acme Corp was founded in 2013.")
    batch = SegmentBatch("Acme Corp was founded in 2013.", tuple(PASSAGES))
    errors = _errors(AuditStep(), batch, reply(wrong_year))
    assert "the figure(s) ['2013'] of the claim appear in none of its supporting_quotes" in errors
    # the same claim graded lower is accepted: the check never forces a grade
    lower = supported(
        "Acme Corp was founded in 2013.",
        classification="partially_supported",
        unsupported_part="in 2013",
    )
    assert AuditStep().validate(batch, reply(lower)).claims[0].unsupported_part == "in 2013"


def test_fully_supported_claim_needs_quotes_about_it() -> None:
    off_topic = supported(
        "Acme Corp was founded by Jane Smith.",
        supporting_context_ids=["passage-3"],
        supporting_quotes=["All senior executives will attend."],
    )
    batch = SegmentBatch("Acme Corp was founded by Jane Smith.", tuple(PASSAGES))
    errors = _errors(AuditStep(), batch, reply(off_topic))
    assert "its supporting_quotes share no word with the claim" in errors
    # a paraphrase that shares a word and no figure passes
    assert AuditStep().validate(FOUNDED_ONLY, reply(supported())).claims


@pytest.mark.parametrize("step", [AuditStep(), ExtractStep()], ids=["one-pass", "extract"])
def test_a_sentence_without_a_claim_is_handed_back_as_skipped(step: Any) -> None:
    partial = reply(supported()) if isinstance(step, AuditStep) else {"claims": [FOUNDED]}
    value = step.validate(BATCH, partial)
    assert [c.claim_text for c in value.claims] == [FOUNDED]
    assert [(s.claim_text, ANSWER[s.start : s.end]) for s in value.skipped] == [
        (CEO, CEO),
        (FREE, FREE),
    ]


def test_questions_and_pleasantries_need_no_claim() -> None:
    text = f"{FOUNDED} Would you like to know more? Hope this helps."
    batch = SegmentBatch(text, tuple(PASSAGES))
    value = AuditStep().validate(batch, reply(supported()))
    assert [c.claim_text for c in value.claims] == [FOUNDED]
    assert value.skipped == []
