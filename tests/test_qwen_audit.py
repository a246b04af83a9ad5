"""The audit in scoring mode: claims and quotes made by code, the grade by an injected function.

Contracts: claims are verbatim spans of the answer; quotes are verbatim slices of their
passages (offsets kept); every reply passes the audit task's own checks, whatever the grade;
a contradiction found blocks the answer. The encoder is replaced by a bag-of-words embedding
and the model by fixed probabilities, so these tests need no model file.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt
import pytest

import evidex
from evidex.judges._claim_evidence import Evidence, EvidencePicker, split_claims
from evidex.judges._qwen_audit import (
    CLASSES,
    AuditScorer,
    Cuts,
    figure_conflict,
    model_grade,
    unsupported_part,
    word_coverage,
)
from evidex.judging import Judge, JudgeReply, JudgeRequest, Message, PassageText
from evidex.tasks.audit import ClaimBatch, ClaimSpan, ClassifyStep, ExtractStep, SegmentBatch
from evidex.tasks.audit.steps import AuditStep
from evidex.tasks.base import ReplyInvalid
from evidex.types import Passage

PASSAGES = (
    Passage(
        passage_id="p1",
        text="Pods get a grace period of 30 seconds by default. The kubelet sends SIGTERM "
        "first. After the grace period it sends SIGKILL.",
    ),
    Passage(passage_id="p2", text="kubectl delete takes a --grace-period flag for one deletion."),
    Passage(passage_id="p3", text="Bananas are rich in potassium."),
)
ANSWER = (
    "The kubelet sends SIGTERM first. The grace period is 60 seconds by default. "
    "A single deletion can set its own period with kubectl delete --grace-period. "
    "The API server rejects grace periods above 300 seconds."
)


def bag_embed(texts: Sequence[str]) -> npt.NDArray[np.float32]:
    """Unit bag-of-words vectors (hashed lower-case words): near texts share words."""
    out = np.zeros((len(texts), 256), dtype=np.float32)
    for row, text in enumerate(texts):
        for word in re.findall(r"\w+", text.lower()):
            out[row, int(hashlib.md5(word.encode()).hexdigest(), 16) % 256] += 1.0
    norms = np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-9)
    result: npt.NDArray[np.float32] = out / norms
    return result


def fixed(level: str) -> Any:
    """A grade function that rates every claim ``level`` with probability 0.85."""

    def grade(claim: str, evidence: Sequence[Evidence]) -> dict[str, float]:
        assert evidence, "the scorer never grades without candidates"
        return {c: (0.85 if c == level else 0.05) for c in CLASSES}

    return grade


def scorer(level: str) -> AuditScorer:
    return AuditScorer(fixed(level), bag_embed, name="test-grade")


def claims_reply(level: str, claims: Sequence[str]) -> tuple[ClaimBatch, dict[str, Any]]:
    spans = tuple(
        ClaimSpan(claim_id=f"claim-{i}", claim_text=c, start=ANSWER.index(c), end=0)
        for i, c in enumerate(claims, 1)
    )
    batch = ClaimBatch(spans, PASSAGES)
    request = ClassifyStep().request(batch)
    return batch, scorer(level).reply(request.payload)


# ------------------------------------------------------------------ claims and evidence


def test_claims_are_verbatim_spans_of_the_answer() -> None:
    spans = split_claims(ANSWER)
    assert len(spans) == 4
    assert [ANSWER[s:e] for s, e in spans][1] == "The grace period is 60 seconds by default."
    reply = scorer("fully_supported").reply(ExtractStep().request(SegmentBatch(ANSWER, ())).payload)
    value = ExtractStep().validate(SegmentBatch(ANSWER, ()), reply)
    assert [c.claim_text for c in value.claims] == [ANSWER[s:e] for s, e in spans]
    assert all(ANSWER[c.start : c.end] == c.claim_text for c in value.claims)
    assert value.skipped == []


def test_candidate_sentences_are_slices_of_their_passages_with_offsets() -> None:
    picker = EvidencePicker(PassageText.of(PASSAGES), bag_embed)
    picked = picker.pick("The grace period is 60 seconds by default.")
    by_id = {p.passage_id: p.text for p in PASSAGES}
    assert picked and picked[0].passage_id == "p1"
    assert picked[0].text == "Pods get a grace period of 30 seconds by default."
    for e in picked:
        assert by_id[e.passage_id][e.start : e.end] == e.text
    assert "Bananas are rich in potassium." not in [e.text for e in picked]


def test_a_sentence_carrying_a_claim_figure_is_kept_among_the_candidates() -> None:
    passages = (
        Passage(passage_id="a", text="The tower is tall. It is made of iron. Paint is brown."),
        Passage(passage_id="b", text="Records list 330 as its height in metres."),
    )
    picked = EvidencePicker(PassageText.of(passages), bag_embed).pick(
        "The tower is tall and made of iron, 330 metres.", k=1
    )
    assert any("330" in e.text for e in picked)


# ------------------------------------------------------------------ replies pass the checks


def test_supported_reply_passes_the_checks_and_quotes_its_evidence() -> None:
    claim = "The kubelet sends SIGTERM first."
    batch, reply = claims_reply("fully_supported", [claim])
    (graded,) = ClassifyStep().validate(batch, reply).claims
    assert graded.classification == "fully_supported"
    assert "The kubelet sends SIGTERM first." in graded.supporting_quotes
    assert graded.supporting_context_ids[0] == "p1"
    assert graded.explanation.startswith("heuristic")
    assert "fully_supported 0.85" in graded.explanation


def test_supported_grade_without_the_figure_in_its_quotes_is_lowered_honestly() -> None:
    claim = "The kubelet sends SIGTERM first, 2 times."
    batch = ClaimBatch((ClaimSpan(claim_id="c", claim_text=claim, start=0, end=0),), PASSAGES)
    reply = scorer("fully_supported").reply(ClassifyStep().request(batch).payload)
    (graded,) = ClassifyStep().validate(batch, reply).claims
    assert graded.classification == "partially_supported"
    assert "lowered from fully_supported" in graded.explanation
    assert graded.unsupported_part is not None and "2" in graded.unsupported_part
    assert graded.unsupported_part in claim


def test_supported_grade_whose_quotes_lack_most_claim_words_is_lowered_honestly() -> None:
    # "kubelet", "sends", "SIGTERM", "first" are quoted; "politely", "waits", "minutes",
    # "anyway" are in no passage: 4 of 8 content words, under a coverage cut of 0.6
    claim = "The kubelet sends SIGTERM first, politely waits minutes anyway."
    batch = ClaimBatch((ClaimSpan(claim_id="c", claim_text=claim, start=0, end=0),), PASSAGES)
    strict = AuditScorer(fixed("fully_supported"), bag_embed, cuts=Cuts(coverage=0.6), name="t")
    (graded,) = (
        ClassifyStep().validate(batch, strict.reply(ClassifyStep().request(batch).payload)).claims
    )
    assert graded.classification == "partially_supported"
    assert "lowered from fully_supported" in graded.explanation
    assert "50% of the claim's content words" in graded.explanation
    assert graded.unsupported_part is not None and "politely" in graded.unsupported_part
    lenient = AuditScorer(fixed("fully_supported"), bag_embed, cuts=Cuts(coverage=0.5), name="t")
    (kept,) = (
        ClassifyStep().validate(batch, lenient.reply(ClassifyStep().request(batch).payload)).claims
    )
    assert kept.classification == "fully_supported"
    assert "50% of the claim's content words" in kept.explanation


def test_word_coverage_is_the_share_of_claim_content_words_quoted() -> None:
    assert word_coverage("Cats are blue and loud.", ["Cats are blue."]) == pytest.approx(2 / 3)
    assert word_coverage("Cats are blue.", ["The cats: blue!"]) == 1.0
    assert word_coverage("It is.", []) == 1.0  # no content word: nothing to miss
    assert word_coverage("Cats are blue.", []) == 0.0


def test_a_figure_the_evidence_gives_otherwise_is_a_contradiction_whatever_the_grade() -> None:
    claim = "The grace period is 60 seconds by default."
    batch, reply = claims_reply("fully_supported", [claim])
    (graded,) = ClassifyStep().validate(batch, reply).claims
    assert graded.classification == "unsupported" and graded.contradicted
    assert "'60 seconds'" in graded.explanation and "'30 seconds'" in graded.explanation
    assert "no grading call" in graded.explanation
    assert graded.contradicting_quote == "Pods get a grace period of 30 seconds by default."


def test_partially_supported_reply_names_the_unsupported_words() -> None:
    claim = "A single deletion can set its own period with kubectl delete --grace-period."
    batch, reply = claims_reply("partially_supported", [claim])
    (graded,) = ClassifyStep().validate(batch, reply).claims
    assert graded.classification == "partially_supported"
    assert graded.supporting_context_ids and graded.supporting_quotes
    assert graded.unsupported_part and graded.unsupported_part in claim
    assert graded.unsupported_part != claim


def test_unsupported_reply_cites_nothing() -> None:
    claim = "The API server rejects grace periods above 300 seconds."
    batch, reply = claims_reply("unsupported", [claim])
    (graded,) = ClassifyStep().validate(batch, reply).claims
    assert graded.classification == "unsupported"
    assert graded.supporting_quotes == [] and not graded.contradicted


def test_contradicted_reply_quotes_the_conflicting_sentence() -> None:
    claim = "The kubelet sends SIGTERM first."
    batch, reply = claims_reply("contradicted", [claim])
    (graded,) = ClassifyStep().validate(batch, reply).claims
    assert graded.classification == "unsupported" and graded.contradicted
    assert graded.contradicting_quote == "The kubelet sends SIGTERM first."


def test_one_pass_reply_passes_the_checks_for_every_grade() -> None:
    for level in CLASSES:
        batch = SegmentBatch(ANSWER, PASSAGES)
        reply = scorer(level).reply(AuditStep().request(batch).payload)
        value = AuditStep().validate(batch, reply)
        assert len(value.claims) == 4 and value.skipped == []


def test_the_checks_would_refuse_a_reply_whose_quote_is_not_verbatim() -> None:
    """The contract tests above can fail: the same checks refuse a changed quote."""
    claim = "The kubelet sends SIGTERM first."
    batch, reply = claims_reply("fully_supported", [claim])
    reply["claims"][0]["supporting_quotes"] = ["The kubelet sends SIGKILL first."]
    with pytest.raises(ReplyInvalid):
        ClassifyStep().validate(batch, reply)


def test_an_empty_context_grades_unsupported_without_a_call() -> None:
    def never(claim: str, evidence: Sequence[Evidence]) -> dict[str, float]:
        raise AssertionError("no grading call without passages")

    batch = ClaimBatch((ClaimSpan(claim_id="c", claim_text="X is 5.", start=0, end=7),), ())
    reply = AuditScorer(never, bag_embed, name="t").reply(ClassifyStep().request(batch).payload)
    (graded,) = ClassifyStep().validate(batch, reply).claims
    assert graded.classification == "unsupported"


def test_unsupported_part_is_never_the_whole_claim() -> None:
    assert unsupported_part("Cats are blue.", ["Dogs bark."]) is None
    assert unsupported_part("Cats are blue and loud.", ["Cats are blue."]) == "loud"


def test_cut_points_order_contradiction_support_partial() -> None:
    cuts = Cuts(supported=0.6, partial=0.5, contradicted=0.5)
    p = {"fully_supported": 0.3, "partially_supported": 0.3, "unsupported": 0.3}
    assert cuts.level({**p, "contradicted": 0.6}) == "contradicted"
    assert cuts.level({"fully_supported": 0.7}) == "fully_supported"
    assert cuts.level(p) == "partially_supported"
    assert cuts.level({"unsupported": 0.9}) == "unsupported"


def test_model_grade_composes_two_yes_no_answers_into_classes() -> None:
    seen: list[Sequence[Message]] = []

    def probabilities(messages: Sequence[Message], candidates: Sequence[str]) -> dict[str, float]:
        seen.append(messages)
        assert list(candidates) == ["Yes", "No"]
        yes = 0.2 if "everything" in messages[-1].content else 0.5
        return {"Yes": yes, "No": 1 - yes}

    probs = model_grade(probabilities)("Claim.", [Evidence("p", "Sentence.", 0, 9, 0.5)])
    assert probs == pytest.approx(
        {"fully_supported": 0.2, "partially_supported": 0.4, "unsupported": 0.4}
    )
    assert len(seen) == 2 and seen[0][0] == seen[1][0]
    assert "Claim." in seen[0][-1].content and "Sentence." in seen[0][-1].content
    shared = seen[0][-1].content.rsplit("\n", 1)[0]
    assert seen[1][-1].content.startswith(shared), "the questions differ only at the end"


# ------------------------------------------------------------------ the job


class ScoringAuditJudge(Judge):
    """A test double: the audit scorer with a grade function that reads the claim."""

    jobs: ClassVar[frozenset[str]] = frozenset({"audit"})

    def __init__(self, grades: Mapping[str, str]) -> None:
        super().__init__("test:scoring-audit")

        def grade(claim: str, evidence: Sequence[Evidence]) -> dict[str, float]:
            level = next(v for k, v in grades.items() if k in claim)
            return fixed(level)(claim, evidence)  # type: ignore[no-any-return]

        self.scorer = AuditScorer(grade, bag_embed, name="test-grade")

    async def complete(self, request: JudgeRequest) -> JudgeReply:
        return JudgeReply(text=json.dumps(self.scorer.reply(request.payload)))


def test_a_contradiction_blocks_the_answer(store: Any) -> None:
    judge = ScoringAuditJudge(
        {
            "SIGTERM": "fully_supported",
            "60 seconds": "contradicted",
            "--grace": "fully_supported",
            "300": "unsupported",
        }
    )
    result = evidex.audit(ANSWER, PASSAGES, judge=judge, store=store)
    assert result.source == "judge"
    assert result.summary.contradicted == 1
    assert result.decision.decision == "block"
    result2 = evidex.audit(
        ANSWER, PASSAGES, judge=judge, store=store, mode="two-pass", answer_id="b"
    )
    assert result2.decision.decision == "block" and result2.source == "judge"


# ------------------------------------------------------------------ the real model


@pytest.mark.slow
def test_real_scoring_grades_the_demo_contradiction_below_support(qwen: Any) -> None:
    grade = model_grade(qwen.class_probabilities)
    evidence = [Evidence("p1", "Pods get a grace period of 30 seconds by default.", 0, 49, 0.8)]
    supported = asyncio.run(asyncio.to_thread(grade, "Pods get 30 seconds by default.", evidence))
    assert abs(sum(supported.values()) - 1.0) < 1e-6
    other = grade("Bananas grow on trees in Brazil.", evidence)
    assert supported["fully_supported"] > other["fully_supported"]


def test_a_bound_is_no_figure_conflict() -> None:
    evidence = [Evidence("p1", "Pods get a grace period of 30 seconds by default.", 0, 49, 0.8)]
    assert figure_conflict("Grace periods above 300 seconds are rejected.", evidence) is None
    found = figure_conflict("The grace period is 60 seconds.", evidence)
    assert found is not None and found[:2] == ("60 seconds", "30 seconds")
    assert figure_conflict("Bananas ripen in 60 seconds.", evidence) is None, "no shared topic"


@pytest.mark.slow
def test_real_score_mode_audit_passes_its_checks_and_catches_the_figure(
    qwen: Any, store: Any
) -> None:
    from evidex.judges._qwen import QwenJudge, QwenOptions

    judge = QwenJudge(options=QwenOptions(mode="score", n_ctx=qwen.options.n_ctx))
    result = evidex.audit(ANSWER, PASSAGES, judge=judge, store=store)
    assert result.source == "judge" and result.judge_calls == 1, "no re-ask, no fallback"
    assert all(ANSWER[c.start : c.end] == c.claim_text for c in result.claims)
    assert len(result.claims) == 4
    by_figure = {c.claim_text: c for c in result.claims}
    sixty = by_figure["The grace period is 60 seconds by default."]
    assert sixty.contradicted and result.decision.decision == "block"
    assert all(c.explanation.startswith("heuristic") for c in result.claims)
    assert result.usage.prompt_tokens > 0, "the prompt tokens of the questions asked are counted"
