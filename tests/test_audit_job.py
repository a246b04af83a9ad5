"""The audit job end to end with the scripted judge: both modes, retry then fallback to review,
decisions, the no-raw-output decision object, baseline alert, several answers, long answers."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import pytest

from evidex.errors import ConfigError, InputError
from evidex.harness.events import AuditRecord, Hooks
from evidex.harness.runner import HarnessSettings
from evidex.jobs._audit_policy import (
    DISTRIBUTION_STEP,
    AuditDecision,
    AuditPolicy,
    audit_metrics,
    decide,
)
from evidex.jobs.audit import AnswerInput, audit, audit_many
from evidex.judging import JudgeReply, JudgeRequest
from evidex.store import SqlStore
from evidex.tasks.audit import AuditSummary
from evidex.types import RiskLevel
from tests.audit_fixtures import (
    ANSWER,
    CEO,
    FOUNDED,
    FREE,
    PASSAGES,
    QUESTION,
    contradicted,
    graded,
    inferred,
    reply,
    supported,
    unsupported,
)
from tests.scripted import ScriptedJudge

FAST = HarnessSettings(backoff_s=0.0)


def _audit(judge: ScriptedJudge, store: SqlStore, **kw: Any) -> Any:
    kw.setdefault("settings", FAST)
    kw.setdefault("question", QUESTION)
    return audit(
        kw.pop("answer", ANSWER), kw.pop("passages", PASSAGES), judge=judge, store=store, **kw
    )


# ---------------------------------------------------------------------------------- modes


def test_one_pass_grades_every_claim_and_blocks_a_contradiction(store: SqlStore) -> None:
    judge = ScriptedJudge([reply(supported(), inferred(), contradicted())])
    result = _audit(judge, store, answer_id="a-1")
    assert [c.classification for c in result.claims] == [
        "fully_supported",
        "inferred",
        "unsupported",
    ]
    assert [ANSWER[c.start : c.end] for c in result.claims] == [FOUNDED, CEO, FREE]
    assert result.summary.contradicted == 1 and result.source == "judge"
    assert result.decision.decision == "block"
    assert [r.code for r in result.decision.reasons] == ["contradicted", "unsupported_ratio"]
    assert len(judge.requests) == 1 and judge.requests[0].step == "audit"
    assert QUESTION in judge.requests[0].messages[1].content
    notes = store.audit_rows(job="audit", step=DISTRIBUTION_STEP)
    assert len(notes) == 1
    detail = notes[0]["detail"]
    assert (detail["answer_id"], detail["fully_supported"], detail["inferred"]) == ("a-1", 1, 1)
    assert [c["classification"] for c in detail["claims"]] == [
        "fully_supported",
        "inferred",
        "unsupported",
    ]
    assert store.list_reviews(job="audit") == []  # a block is final, not a review


def test_two_pass_extracts_then_classifies_in_batches(store: SqlStore) -> None:
    judge = ScriptedJudge(
        [
            {"claims": [FOUNDED, CEO, FREE]},
            {"claims": [graded("claim-1", supported()), graded("claim-2", inferred())]},
            {"claims": [graded("claim-3", unsupported(FREE))]},
        ]
    )
    result = _audit(judge, store, mode="two-pass", claims_per_batch=2)
    assert [r.step for r in judge.requests] == ["audit.extract", "audit.classify", "audit.classify"]
    assert '"claim_id": "claim-3"' in judge.requests[2].messages[1].content
    assert [c.claim_id for c in result.claims] == ["claim-1", "claim-2", "claim-3"]
    assert [c.classification for c in result.claims] == [
        "fully_supported",
        "inferred",
        "unsupported",
    ]
    assert result.mode == "two-pass" and "+" in result.prompt_version
    assert result.decision.decision == "review"  # 1 of 3 unsupported: 33 % > 30 %


def test_given_claims_skip_extraction(store: SqlStore) -> None:
    judge = ScriptedJudge([{"claims": [graded("claim-1", supported())]}])
    result = _audit(judge, store, claims=[FOUNDED])
    assert [r.step for r in judge.requests] == ["audit.classify"]
    assert result.decision.decision == "publish"
    with pytest.raises(InputError, match="not verbatim in the answer"):
        _audit(ScriptedJudge(), store, claims=["Acme is old."])


def test_passages_without_ids_are_numbered_and_metadata_is_carried(store: SqlStore) -> None:
    passages = [
        {"text": PASSAGES[0].text, "title": "About Acme", "url": "https://acme.example/about"},
        PASSAGES[1].text,
    ]
    judge = ScriptedJudge([reply(supported(), contradicted())])
    result = _audit(judge, store, answer=f"{FOUNDED} {FREE}", passages=passages)
    assert '"passage_id": "passage-2"' in judge.requests[0].messages[1].content
    assert result.claims[0].sources[0].model_dump() == {
        "passage_id": "passage-1",
        "title": "About Acme",
        "url": "https://acme.example/about",
    }


# ---------------------------------------------------------------------------------- faults


def test_one_retry_with_stricter_reminder_then_fallback_to_review(store: SqlStore) -> None:
    """The one-pass reply never validates: after one stricter retry the answer's sentences are
    graded as claims one by one, and the answer goes to review."""
    bad = reply(supported("Acme was started in 2012."))
    by_sentence = {
        "claims": [
            graded("skipped-1", supported()),
            graded("skipped-2", inferred()),
            graded("skipped-3", unsupported(FREE)),
        ]
    }
    judge = ScriptedJudge([bad, "not json at all", by_sentence])
    result = _audit(judge, store)
    # max_attempts = 2: the first try and one retry, then the sentences' classification
    assert [r.step for r in judge.requests] == ["audit", "audit", "audit.classify"]
    retry = judge.requests[1]
    assert retry.temperature == 0.0
    texts = [m.content for m in retry.messages]
    assert any("not verbatim in the answer" in t for t in texts)
    assert "Reply with exactly one JSON object that matches the schema" in texts[-1]
    assert [(c.claim_text, c.classification) for c in result.claims] == [
        (FOUNDED, "fully_supported"),
        (CEO, "inferred"),
        (FREE, "unsupported"),
    ]
    assert result.source == "fallback" and result.unaudited == []
    assert result.decision.decision == "review"
    assert result.decision.reasons[0].code == "fallback"
    (item,) = store.list_reviews(job="audit")
    assert result.review_item_ids == [item["id"]]
    assert item["payload"]["last_raw_output"] == "not json at all"


def test_a_failed_segment_without_statements_is_reported_unaudited(store: SqlStore) -> None:
    answer = "Which product do you mean? Tell me more!"
    judge = ScriptedJudge(["not json", "still not json"])
    result = _audit(judge, store, answer=answer)
    assert len(judge.requests) == 2 and result.claims == []
    (span,) = result.unaudited
    assert (span.start, span.end) == (0, len(answer)) and "invalid JSON" in (span.reason or "")
    assert result.decision.decision == "review"


def test_retry_that_fixes_the_reply_is_accepted(store: SqlStore) -> None:
    judge = ScriptedJudge([reply(contradicted(contradicting_quote=None)), reply(contradicted())])
    result = _audit(judge, store, answer=FREE)
    assert result.source == "judge" and result.summary.contradicted == 1
    assert "contradicting_quote is empty" in judge.requests[1].messages[-2].content


def test_classify_fallback_keeps_the_claims_as_unsupported_for_review(store: SqlStore) -> None:
    judge = ScriptedJudge([{"claims": [FOUNDED]}, {"claims": []}, {"claims": []}])
    result = _audit(judge, store, answer=FOUNDED, mode="two-pass")
    (claim,) = result.claims
    assert (claim.classification, claim.source) == ("unsupported", "fallback")
    assert result.source == "fallback" and result.decision.decision == "review"
    assert len(store.list_reviews(job="audit")) == 1  # the fallback's item, not a second one


def test_claims_graded_validly_survive_a_fallback_of_their_batch(store: SqlStore) -> None:
    """A reply that keeps failing on one claim loses that claim, not its neighbours: the
    contradiction it found still blocks, and only the failing claim waits for a person."""
    bad_number = graded(
        "claim-1", supported(supporting_quotes=["The company is headquartered in Austin, Texas."])
    )
    last = {
        "claims": [bad_number, graded("claim-2", inferred()), graded("claim-3", contradicted())]
    }
    alone = {"claims": [bad_number]}
    judge = ScriptedJudge([last, last, alone, alone])
    result = _audit(judge, store, claims=[FOUNDED, CEO, FREE])
    # the batch's two attempts, then the failing claim asked alone (the re-ask, at temperature 0)
    assert [len(r.payload.claims) for r in judge.requests] == [3, 3, 1, 1]  # type: ignore[attr-defined]
    assert judge.requests[3].temperature == 0.0
    sources = [(c.classification, c.source) for c in result.claims]
    assert sources == [("unsupported", "fallback"), ("inferred", "judge"), ("unsupported", "judge")]
    assert "2012" in (result.claims[0].reason or "")
    assert result.claims[2].contradicted
    assert result.source == "fallback"
    assert result.decision.decision == "block"
    assert {r.code for r in result.decision.reasons} >= {"fallback", "contradicted"}
    (item,) = store.list_reviews(job="audit")
    assert result.review_item_ids == [item["id"]]
    # the one item of the answer shows every claim with its grade; only the fallback's waits
    shown = [(c["claim_id"], c["source"]) for c in item["payload"]["claims"]]
    assert shown == [("claim-1", "fallback"), ("claim-2", "judge"), ("claim-3", "judge")]
    assert item["payload"]["answer"] and item["payload"]["question"] is not None


def test_one_pass_reply_with_bad_claims_keeps_the_segment_audited(store: SqlStore) -> None:
    """The one-pass reply keeps misquoting two claims: the valid claim stays the judge's, the
    two sentences are graded by the classification pass (the contradiction among them still
    blocks), and nothing is left unaudited."""
    wrong_year = supported(supporting_quotes=["Acme Corp was founded in 2013 by Jane Smith."])
    last = reply(wrong_year, inferred(), supported(FREE, supporting_quotes=["Acme is free."]))
    regraded = {"claims": [graded("skipped-1", supported()), graded("skipped-2", contradicted())]}
    judge = ScriptedJudge([last, last, regraded])
    result = _audit(judge, store)
    assert [r.step for r in judge.requests] == ["audit", "audit", "audit.classify"]
    asked = judge.requests[2].messages[-1].content
    assert FOUNDED in asked and FREE in asked and CEO not in asked
    assert [(c.claim_text, c.classification, c.source) for c in result.claims] == [
        (FOUNDED, "fully_supported", "judge"),
        (CEO, "inferred", "judge"),
        (FREE, "unsupported", "judge"),
    ]
    assert result.unaudited == []
    assert result.source == "fallback" and result.decision.decision == "block"
    assert {r.code for r in result.decision.reasons} >= {"fallback", "contradicted"}
    (row,) = [r for r in store.audit_rows(run_id=result.run_id) if r["status"] == "fallback"]
    assert row["detail"]["kept"] == ["claim-1"]
    assert len(result.review_item_ids) == 1


def test_empty_context_makes_every_claim_unsupported(store: SqlStore) -> None:
    judge = ScriptedJudge([reply(supported()), reply(unsupported(FOUNDED))])
    result = _audit(judge, store, answer=FOUNDED, passages=[])
    assert "the context is empty" in judge.requests[1].messages[-2].content
    assert [c.classification for c in result.claims] == ["unsupported"]
    assert [e.kind for e in result.events] == ["empty_context"]
    assert result.decision.decision == "review"


@pytest.mark.parametrize("answer", ["", "   \n"])
def test_empty_answer_is_an_input_error(store: SqlStore, answer: str) -> None:
    with pytest.raises(InputError, match="is empty: there is nothing to audit"):
        _audit(ScriptedJudge(), store, answer=answer)


def test_refusal_has_no_claims_and_is_published(store: SqlStore) -> None:
    judge = ScriptedJudge([{"answer_id": None, "claims": []}])
    result = _audit(judge, store, answer="I can't answer that. Which product do you mean?")
    assert result.claims == [] and result.summary.total_claims == 0
    assert result.decision.decision == "publish"
    assert result.decision.reasons[0].code == "no_claims"


def _sentence_claims(request: JudgeRequest) -> dict[str, Any]:
    """Every sentence of the segment as an unsupported claim (one-pass) or a claim (extract)."""
    sentences = re.findall(r"[^.]+\.", request.payload.answer)
    if request.step == "audit.extract":
        return {"claims": [s.strip() for s in sentences]}
    return reply(*(unsupported(s.strip()) for s in sentences))


@pytest.mark.parametrize("mode", ["one-pass", "two-pass"])
def test_a_20000_word_answer_is_batched_and_nothing_is_lost(store: SqlStore, mode: str) -> None:
    words = ("alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota")
    sentences = [f"Item {i} says {' '.join(words)}." for i in range(20_000 // 12 + 1)]
    answer = " ".join(sentences)
    assert len(answer.split()) >= 20_000

    def classify(request: JudgeRequest) -> dict[str, Any]:
        return {
            "claims": [
                graded(c.claim_id, unsupported(c.claim_text)) for c in request.payload.claims
            ]
        }

    class Judge(ScriptedJudge):
        async def complete(self, request: JudgeRequest) -> JudgeReply:
            self.replies.append(classify if request.step == "audit.classify" else _sentence_claims)
            return await super().complete(request)

    judge = Judge()
    result = _audit(
        judge,
        store,
        answer=answer,
        passages=[],
        mode=mode,
        settings=HarnessSettings(backoff_s=0.0, max_concurrency=8),
    )
    segments = [r for r in judge.requests if r.step in ("audit", "audit.extract")]
    assert len(segments) > 50
    assert [answer[c.start : c.end] for c in result.claims] == sentences
    assert [c.claim_id for c in result.claims] == [
        f"claim-{i}" for i in range(1, len(sentences) + 1)
    ]
    assert result.summary.total_claims == len(sentences) and result.source == "judge"


# ---------------------------------------------------------------------------------- decisions


def _summary(**counts: int) -> AuditSummary:
    total = sum(v for k, v in counts.items() if k != "contradicted")
    return AuditSummary(total_claims=total, **counts)


@pytest.mark.parametrize(
    ("counts", "risk", "policy", "expected", "codes"),
    [
        ({"fully_supported": 7, "unsupported": 3}, "low", {}, "publish", ["within_policy"]),
        ({"fully_supported": 6, "unsupported": 4}, "low", {}, "review", ["unsupported_ratio"]),
        (
            {"fully_supported": 9, "unsupported": 1},
            "low",
            {"unsupported_threshold": 0.05},
            "review",
            ["unsupported_ratio"],
        ),
        (
            {"fully_supported": 9, "unsupported": 1, "contradicted": 1},
            "low",
            {},
            "block",
            ["contradicted"],
        ),
        (
            {"fully_supported": 9, "unsupported": 1, "contradicted": 1},
            "low",
            {"on_contradiction": "review"},
            "review",
            ["contradicted"],
        ),
        ({"fully_supported": 9, "inferred": 1}, "low", {}, "publish", ["within_policy"]),
        ({"fully_supported": 9, "inferred": 1}, "high", {}, "review", ["high_risk_signoff"]),
        (
            {"fully_supported": 9, "inferred": 1},
            "high",
            {"inferred_counts_as_unsupported_in_high_risk": False},
            "publish",
            ["within_policy"],
        ),
        (
            {"fully_supported": 9, "unsupported": 1},
            "high",
            {"inferred_counts_as_unsupported_in_high_risk": False},
            "review",
            ["high_risk_signoff"],
        ),
        (
            {"fully_supported": 6, "inferred": 4},
            "high",
            {},
            "review",
            ["unsupported_ratio", "high_risk_signoff"],
        ),
        ({"partially_supported": 3}, "high", {}, "publish", ["within_policy"]),
    ],
)
def test_decision_rules(
    counts: dict[str, int], risk: str, policy: dict[str, Any], expected: str, codes: list[str]
) -> None:
    decision = decide("a", _summary(**counts), risk=RiskLevel(risk), policy=AuditPolicy(**policy))
    assert decision.decision == expected
    assert [r.code for r in decision.reasons] == codes


def test_fallback_source_always_reviews() -> None:
    decision = decide("a", _summary(), risk=RiskLevel.LOW, policy=AuditPolicy(), source="fallback")
    assert decision.decision == "review" and decision.reasons[0].code == "fallback"


def test_policy_rejects_misspelled_settings() -> None:
    with pytest.raises(ValueError, match="unsupported_treshold"):
        AuditPolicy(unsupported_treshold=0.2)  # type: ignore[call-arg]


def test_high_risk_review_goes_to_the_queue(store: SqlStore) -> None:
    judge = ScriptedJudge([reply(supported(), inferred())])
    result = _audit(judge, store, answer=f"{FOUNDED} {CEO}", risk="high")
    assert result.decision.decision == "review"
    (item,) = store.list_reviews(job="audit")
    assert result.review_item_ids == [item["id"]] and item["risk"] == "high"
    assert (
        "sign-off" in item["reason"]
        and item["payload"]["claims"][1]["classification"] == "inferred"
    )


def test_decision_object_carries_no_judge_output(store: SqlStore) -> None:
    judge = ScriptedJudge([reply(supported(), inferred(), contradicted())])
    result = _audit(judge, store)
    assert set(AuditDecision.model_fields) == {
        "answer_id",
        "decision",
        "reasons",
        "summary",
        "unsupported_ratio",
    }
    shown = result.decision.model_dump_json()
    raw = store.audit_rows(job="audit", step="audit")[0]["raw_output"]
    assert raw and raw not in shown
    for claim in result.claims:
        for text in (claim.claim_text, claim.explanation, *claim.supporting_quotes):
            assert text not in shown
    assert "$500" not in shown and "senior executive" not in shown


# ---------------------------------------------------------------------------------- observability


def test_baseline_alert_when_the_unsupported_ratio_rises(store: SqlStore) -> None:
    policy = AuditPolicy(baseline_min_answers=3, alert_margin=0.2)
    fresh = HarnessSettings(backoff_s=0.0, use_cache=False)

    def run(*replies: Any, answer: str = f"{FOUNDED} {CEO}") -> Any:
        return _audit(
            ScriptedJudge(list(replies)), store, answer=answer, policy=policy, settings=fresh
        )

    for _ in range(3):
        assert run(reply(supported(), inferred())).alert is None  # no baseline yet, then 0 %
    run("x", "y", answer=FOUNDED)  # a fallback answer does not enter the baseline
    bad = run(reply(unsupported(FOUNDED), inferred()))
    assert bad.alert is not None
    assert (bad.alert.unsupported_ratio, bad.alert.baseline) == (0.5, 0.0)
    assert "last 3 answers" in bad.alert.message
    alerts = store.audit_rows(job="audit", step="audit.alert")
    assert len(alerts) == 1 and alerts[0]["status"] == "note"
    # the baseline now pools 1 unsupported claim of 8 (12.5 %): 50 % is still above + 20 %,
    # 0 % is not
    assert run(reply(unsupported(FOUNDED), inferred())).alert is not None
    assert run(reply(supported(), inferred())).alert is None


def test_distribution_reaches_metrics_and_caller_hooks(store: SqlStore) -> None:
    seen: list[AuditRecord] = []
    hooks = Hooks()
    hooks.subscribe(seen.append)
    before = audit_metrics().distribution()
    _audit(ScriptedJudge([reply(supported(), inferred(), contradicted())]), store, hooks=hooks)
    after = audit_metrics().distribution()
    assert {k: after[k] - before[k] for k in after} == {
        "fully_supported": 1,
        "partially_supported": 0,
        "inferred": 1,
        "unsupported": 1,
    }
    assert [r.step for r in seen if r.status == "note"] == [DISTRIBUTION_STEP]
    assert audit_metrics().snapshot()["decisions"]["block"] >= 1


def test_cached_answer_says_so(store: SqlStore) -> None:
    first = _audit(ScriptedJudge([reply(supported())]), store, answer=FOUNDED)
    again = _audit(ScriptedJudge(), store, answer=FOUNDED)
    assert first.source == "judge" and again.source == "cache"
    assert again.claims[0].source == "cache" and again.claims[0].classification == "fully_supported"


# ---------------------------------------------------------------------------------- many answers


class _Counting(ScriptedJudge):
    """Records how many calls were in flight at once."""

    def __init__(self) -> None:
        super().__init__(delay_s=0.01)
        self.in_flight = self.peak = 0

    async def complete(self, request: JudgeRequest) -> JudgeReply:
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        answer = request.payload.answer
        self.replies.append(reply(supported()) if answer == FOUNDED else reply(contradicted()))
        try:
            return await super().complete(request)
        finally:
            self.in_flight -= 1


def test_several_answers_run_concurrently_and_are_kept_per_id(store: SqlStore) -> None:
    judge = _Counting()
    items = [
        AnswerInput(answer_id="first", answer=FOUNDED, passages=list(PASSAGES)),
        {"answer": FREE, "passages": list(PASSAGES)},
        {"answer_id": "third", "answer": FOUNDED, "passages": [p.text for p in PASSAGES]},
    ]
    results = audit_many(items, judge=judge, store=store, settings=FAST)
    by_id = {r.answer_id: r for r in results}  # a list in input order, like every batch form
    assert [r.answer_id for r in results] == ["first", "answer-2", "third"]
    assert by_id["first"].decision.decision == "publish"
    assert by_id["answer-2"].decision.decision == "block"
    assert by_id["answer-2"].claims[0].claim_text == FREE
    assert judge.peak > 1
    assert len({r.run_id for r in results}) == 3


def test_repeated_answer_ids_are_an_input_error(store: SqlStore) -> None:
    with pytest.raises(InputError, match="'x' is used twice"):
        audit_many(
            [{"answer_id": "x", "answer": FOUNDED}, {"answer_id": "x", "answer": FREE}],
            judge=ScriptedJudge(),
            store=store,
        )


def test_async_twin_runs_inside_an_event_loop(store: SqlStore) -> None:
    from evidex.jobs.audit import aaudit

    judge = ScriptedJudge([reply(supported())])
    result = asyncio.run(aaudit(FOUNDED, PASSAGES, judge=judge, store=store, settings=FAST))
    assert result.decision.decision == "publish"


# ---------------------------------------------------------------------------------- window


def _tokens(request: JudgeRequest) -> int:
    return sum((len(m.content) + 3) // 4 for m in request.messages) + request.max_tokens


def test_retry_fits_a_small_window_by_shrinking_batches_then_cutting_passages(
    store: SqlStore,
) -> None:
    judge = ScriptedJudge(["not json", "still not json"])
    judge.context_window = 4096
    long = [
        f"Passage {i} talks at length. " + "Acme makes anvils and rockets. " * 120 for i in range(3)
    ]
    result = _audit(
        judge, store, answer=ANSWER * 3, passages=long, mode="two-pass", claims_per_batch=8
    )
    kinds = [e.kind for e in result.events]
    # fewer claims per call first; the passages still do not fit, so the longest are cut
    assert kinds[0] == "batches_shrunk" and kinds.count("truncated") == 3
    assert all(_tokens(r) <= judge.context_window for r in judge.requests)
    judge = ScriptedJudge(["not json", "still not json"])
    judge.context_window = 4096
    result = _audit(judge, store, answer=ANSWER * 12, passages=long[:1])
    assert "batches_shrunk" in [e.kind for e in result.events]
    assert len(judge.requests) > 2  # smaller segments: more calls, each with its retry
    assert all(_tokens(r) <= 4096 for r in judge.requests)
    assert result.source == "fallback"


def test_a_window_too_small_for_any_audit_is_a_config_error(store: SqlStore) -> None:
    judge = ScriptedJudge()
    judge.context_window = 1024
    with pytest.raises(ConfigError, match="cannot hold an audit exchange and its retry"):
        _audit(judge, store)


def test_many_short_passages_are_kept_whole(store: SqlStore) -> None:
    # 40 passages at the 32-token minimum cut would not fit beside the retry; their real size does
    judge = ScriptedJudge([{"claims": [graded("claim-1", unsupported(FOUNDED))]}])
    judge.context_window = 4096
    sentences = [f"Fact number {i} is short." for i in range(1, 41)]
    result = _audit(judge, store, answer=FOUNDED, passages=sentences, claims=[FOUNDED])
    assert not [e for e in result.events if e.kind == "truncated"]
    assert '"passage_id": "passage-40"' in judge.requests[0].messages[1].content
    assert result.source == "judge"


@pytest.mark.parametrize("mode", ["one-pass", "two-pass"])
def test_sentences_the_judge_skipped_are_graded_as_claims(mode: str, store: SqlStore) -> None:
    first = reply(supported()) if mode == "one-pass" else {"claims": [FOUNDED]}
    graded_skips = {
        "claims": [graded("skipped-1", inferred()), graded("skipped-2", contradicted())]
    }
    if mode == "two-pass":  # the classification call sees the found claim and the skipped ones
        graded_skips = {
            "claims": [
                graded("claim-1", supported()),
                graded("claim-2", inferred()),
                graded("claim-3", contradicted()),
            ]
        }
    judge = ScriptedJudge([first, graded_skips])
    result = _audit(judge, store, mode=mode)

    assert [c.claim_text for c in result.claims] == [FOUNDED, CEO, FREE]
    assert [c.claim_id for c in result.claims] == ["claim-1", "claim-2", "claim-3"]
    assert [c.classification for c in result.claims] == [
        "fully_supported",
        "inferred",
        "unsupported",
    ]
    assert result.decision.decision == "block"  # the skipped sentence was the contradicted one
    [event] = [e for e in result.events if e.kind == "sentences_without_claims"]
    assert event.data["sentences"] == [
        [ANSWER.index(CEO), ANSWER.index(CEO) + len(CEO)],
        [
            ANSWER.index(FREE),
            len(ANSWER),
        ],
    ]
    notes = [r for r in store.audit_rows(run_id=result.run_id) if r["status"] == "note"]
    assert any("sentences_without_claims" in str(r) for r in notes)
