"""The classify job with the scripted judge: preflight, retry, fallback by risk, routing."""

from __future__ import annotations

from typing import Any

import pytest

from evidex.errors import InputError, JudgeUnavailable
from evidex.harness.runner import HarnessSettings
from evidex.jobs.classify import ClassifyResult, classify, classify_many
from evidex.store import SqlStore
from evidex.types import Passage
from tests.classify_fixtures import (
    INPUT,
    PASSAGES,
    TAXONOMY,
    evidence,
    label,
    reply,
    unclassifiable,
)
from tests.scripted import ScriptedJudge

FAST = HarnessSettings(backoff_s=0.0)


def run(
    judge: ScriptedJudge,
    store: SqlStore,
    passages: list[Passage] | None = None,
    **options: Any,
) -> ClassifyResult:
    options.setdefault("settings", FAST)
    return classify(
        INPUT,
        PASSAGES if passages is None else passages,
        TAXONOMY,
        judge=judge,
        store=store,
        **options,
    )


def reasons(store: SqlStore) -> list[str]:
    return [item["reason"] for item in store.list_reviews(job="classify")]


def test_a_valid_answer_is_returned_with_its_provenance(store: SqlStore) -> None:
    judge = ScriptedJudge([reply()])
    result = run(judge, store)
    assert result.labels == ["REFUND"] and result.source == "judge"
    assert result.classifications[0].supporting_evidence[0].passage_id == "p1"
    assert result.review == [] and reasons(store) == []
    assert result.passage_ids == ["p1", "p2", "p3"] and result.judge_calls == 1
    rows = store.audit_rows(run_id=result.run_id)
    assert [r["status"] for r in rows] == ["ok"]
    assert rows[0]["labels"] == {"labels": {"REFUND": 0.9}, "unclassifiable": False}


def test_the_same_input_again_comes_from_the_cache(store: SqlStore) -> None:
    judge = ScriptedJudge([reply()])
    run(judge, store)
    again = run(judge, store)
    assert again.source == "cache" and again.labels == ["REFUND"] and len(judge.requests) == 1


BAD_REPLIES = {
    "unknown label": (reply(label("CANCEL")), "'CANCEL' is not in the taxonomy"),
    "quote not in passage": (
        reply(label(support=[evidence("p1", "Refunds are always paid")])),
        "is not verbatim in passage 'p1'",
    ),
    "quote from the wrong passage": (
        reply(label(support=[evidence("p3", "Refunds are issued when an order")])),
        "is not in passage 'p3' but in passage 'p1'",
    ),
    "confidence 1.7": (reply(label(confidence=1.7)), "confidence 1.7 is outside the range"),
    "confidence high": (reply(label(confidence="high")), "got 'high'"),
    "missing unclassifiable_reason": (
        unclassifiable(reason=None),
        '"unclassifiable_reason" is missing',
    ),
    "not JSON": ("I think it is a refund.", "invalid JSON"),
}


@pytest.mark.parametrize("case", sorted(BAD_REPLIES))
def test_a_bad_reply_is_retried_once_with_the_exact_error(store: SqlStore, case: str) -> None:
    bad, message = BAD_REPLIES[case]
    judge = ScriptedJudge([bad, reply()])
    result = run(judge, store)
    assert result.source == "judge" and result.labels == ["REFUND"]
    assert len(judge.requests) == 2
    retry = judge.requests[1]
    assert retry.messages[: len(judge.requests[0].messages)] == judge.requests[0].messages
    assert retry.messages[-3].role == "assistant"
    assert message in retry.messages[-2].content
    assert "exactly one JSON object" in retry.messages[-1].content
    assert retry.temperature == 0.0


@pytest.mark.parametrize("case", sorted(BAD_REPLIES))
def test_two_bad_replies_fall_back_never_to_an_unvalidated_label(
    store: SqlStore, case: str
) -> None:
    bad, message = BAD_REPLIES[case]
    judge = ScriptedJudge([bad, bad, reply()])
    result = run(judge, store)
    assert len(judge.requests) == 2, "the spec retries exactly once"
    assert result.source == "fallback" and result.classifications == []
    assert result.unclassifiable and message in (result.reason or "")
    assert message in (result.unclassifiable_reason or "")


def test_low_risk_fallback_is_final_and_logged_without_a_review_item(store: SqlStore) -> None:
    bad = reply(label("CANCEL"))
    result = run(ScriptedJudge([bad, bad]), store, risk="low")
    assert result.source == "fallback" and result.review == [] and reasons(store) == []
    statuses = [r["status"] for r in store.audit_rows(run_id=result.run_id)]
    assert statuses == ["invalid", "invalid", "fallback"]


@pytest.mark.parametrize("risk", ["medium", "high"])
def test_medium_and_high_risk_fallbacks_go_to_review(store: SqlStore, risk: str) -> None:
    bad = reply(label("CANCEL"))
    result = run(ScriptedJudge([bad, bad]), store, risk=risk)
    assert result.source == "fallback" and result.unclassifiable
    (decision,) = result.review
    assert decision.reason.startswith(f"fallback at {risk} risk:")
    (item,) = store.list_reviews(job="classify")
    assert item["id"] == decision.review_item_id and "'CANCEL'" in item["reason"]
    assert item["payload"]["fallback"]["source"] == "fallback"


def test_an_unavailable_judge_ends_in_the_fallback(store: SqlStore) -> None:
    judge = ScriptedJudge([JudgeUnavailable("down"), JudgeUnavailable("down")])
    result = run(judge, store, risk="medium")
    assert result.source == "fallback" and "judge unavailable" in (result.reason or "")
    assert len(result.review) == 1


@pytest.mark.parametrize("risk", ["low", "medium", "high"])
def test_a_label_below_the_threshold_goes_to_review(store: SqlStore, risk: str) -> None:
    result = run(ScriptedJudge([reply(label(confidence=0.55))]), store, threshold=0.6, risk=risk)
    (decision,) = result.review
    assert decision.label == "REFUND"
    assert decision.reason == "confidence 0.55 for label REFUND is below the threshold 0.6"
    assert reasons(store) == [decision.reason]
    item = store.get_review(decision.review_item_id)
    assert item["payload"]["assignment"]["label"] == "REFUND" and item["risk"] == risk


def test_a_label_at_the_threshold_is_not_routed(store: SqlStore) -> None:
    result = run(ScriptedJudge([reply(label(confidence=0.6))]), store, threshold=0.6)
    assert result.review == []


CONTESTED = label(
    support=[evidence("p1", "Refunds are issued")],
    counter=[evidence("p1", "within 30 days", "Only after 30 days; the order may be recent.")],
)


def test_high_risk_routes_a_label_whose_only_support_is_counter_evidenced(
    store: SqlStore,
) -> None:
    result = run(ScriptedJudge([reply(CONTESTED)]), store, risk="high")
    (decision,) = result.review
    assert "every supporting quote for label REFUND" in decision.reason
    low = run(
        ScriptedJudge([reply(CONTESTED)]),
        store,
        risk="low",
        settings=HarnessSettings(backoff_s=0.0, use_cache=False),
    )
    assert low.review == []


def test_counter_evidence_from_another_passage_is_not_contested(store: SqlStore) -> None:
    answer = reply(label(counter=[evidence("p3", "Gift cards cannot be exchanged for cash.")]))
    assert run(ScriptedJudge([answer]), store, risk="high").review == []


def test_high_risk_reviews_an_unclassifiable_answer_low_risk_does_not(store: SqlStore) -> None:
    high = run(ScriptedJudge([unclassifiable()]), store, risk="high")
    assert high.source == "judge" and high.unclassifiable
    (decision,) = high.review
    assert decision.reason.startswith("high risk: the judge found no label")
    low = run(ScriptedJudge([unclassifiable()]), store, risk="low")
    assert low.unclassifiable and low.review == []


def test_multi_label_routes_each_weak_label(store: SqlStore) -> None:
    answer = reply(
        label(confidence=0.95),
        label("SHIPPING", 0.4, [evidence("p2", "Tracking numbers are emailed")]),
    )
    result = run(ScriptedJudge([answer]), store, multi_label=True)
    assert result.labels == ["REFUND", "SHIPPING"]
    assert [d.label for d in result.review] == ["SHIPPING"]


# ------------------------------------------------------------------------------ preflight


def test_duplicate_passages_are_merged_and_reported(store: SqlStore) -> None:
    passages = [
        *PASSAGES,
        Passage(passage_id="p1-copy", text=PASSAGES[0].text),
        Passage(
            passage_id="p2-spaced",
            text="  Tracking numbers are emailed once the parcel\nleaves   the depot. ",
        ),
    ]
    judge = ScriptedJudge([reply()])
    result = run(judge, store, passages)
    assert result.duplicates == {"p1-copy": "p1", "p2-spaced": "p2"}
    assert result.passage_ids == ["p1", "p2", "p3"]
    assert [p.passage_id for p in judge.requests[0].payload.passages] == ["p1", "p2", "p3"]
    (event,) = result.events
    assert event.kind == "duplicates_removed"
    notes = [r for r in store.audit_rows(run_id=result.run_id) if r["status"] == "note"]
    assert notes and notes[0]["step"] == "duplicates_removed"


def test_repeated_passage_ids_are_an_input_error(store: SqlStore) -> None:
    passages = [*PASSAGES, Passage(passage_id="p1", text="Something else entirely.")]
    judge = ScriptedJudge([reply()])
    with pytest.raises(InputError, match="repeated: p1"):
        run(judge, store, passages)
    assert judge.requests == []


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda j, s: classify("  ", PASSAGES, TAXONOMY, judge=j, store=s), "input text"),
        (lambda j, s: classify(INPUT, [], TAXONOMY, judge=j, store=s), "no passages"),
        (lambda j, s: classify(INPUT, PASSAGES, [], judge=j, store=s), "at least one"),
        (lambda j, s: classify(INPUT, PASSAGES, {}, judge=j, store=s), "at least one"),
        (
            lambda j, s: classify(INPUT, [{"id": "x", "text": ""}], TAXONOMY, judge=j, store=s),
            "text must not be empty",
        ),
        (
            lambda j, s: classify(INPUT, PASSAGES, TAXONOMY, judge=j, store=s, threshold=1.5),
            "threshold",
        ),
        (
            lambda j, s: classify(INPUT, PASSAGES, TAXONOMY, judge=j, store=s, risk="extreme"),
            "risk",
        ),
    ],
)
def test_empty_or_bad_inputs_stop_before_any_judge_call(
    store: SqlStore, call: Any, message: str
) -> None:
    judge = ScriptedJudge([reply()])
    with pytest.raises(InputError, match=message):
        call(judge, store)
    assert judge.requests == []


class SmallJudge(ScriptedJudge):
    """A scripted judge with a small context window and a word-count tokenizer."""

    def __init__(self, replies: list[Any], context_window: int) -> None:
        super().__init__(replies)
        self.context_window = context_window

    def count_tokens(self, text: str) -> int:
        return len(text.split())


def _fixed_cost(store: SqlStore) -> int:
    """Tokens the prompt needs with one short passage (measured, so the test tracks the prompt)."""
    probe = SmallJudge([], 100_000)
    from evidex.jobs._definition import SpecContext
    from evidex.jobs.classify import DEFINITION, ClassifyInput, ClassifySpec

    spec = ClassifySpec.of(DEFINITION.parse_options({"labels": TAXONOMY}), SpecContext(probe))
    base = spec.plan(ClassifyInput(input=INPUT, passages=PASSAGES[:1]), probe).data.batch
    return spec.prompt_tokens(probe, base, []) + 2 * 550 + 300  # reply reserve of single-label


def long_passages() -> list[Passage]:
    words = " ".join(["refund"] * 60)
    return [
        Passage(passage_id=f"d{i}", text=f"Doc {i}: {words}.", rank=rank)
        for i, rank in enumerate([3, 1, 4, 2], 1)
    ]


def test_over_budget_drops_the_lowest_ranked_passages_and_says_so(store: SqlStore) -> None:
    window = _fixed_cost(store) + 2 * 70  # room for two 63-word passages, not three
    judge = SmallJudge([reply(label(support=[evidence("d2", "Doc 2: refund")]))], window)
    result = run(judge, store, long_passages())
    assert result.passage_ids == ["d2", "d4"]  # ranks 1 and 2, shown in input order
    assert result.dropped == ["d1", "d3"]  # ranks 3 and 4
    (event,) = result.events
    assert event.kind == "dropped_over_budget" and event.passage_ids == ["d1", "d3"]
    assert "lowest-ranked" in event.detail
    notes = [r for r in store.audit_rows(run_id=result.run_id) if r["status"] == "note"]
    assert notes[0]["step"] == "dropped_over_budget"
    sent = [p.passage_id for p in judge.requests[0].payload.passages]
    assert sent == ["d2", "d4"]


def test_without_ranks_the_last_passages_go_first(store: SqlStore) -> None:
    passages = [p.model_copy(update={"rank": None}) for p in long_passages()]
    window = _fixed_cost(store) + 2 * 70
    judge = SmallJudge([reply(label(support=[evidence("d1", "Doc 1: refund")]))], window)
    result = run(judge, store, passages)
    assert result.passage_ids == ["d1", "d2"] and result.dropped == ["d3", "d4"]


def test_a_context_too_small_for_the_input_is_an_input_error(store: SqlStore) -> None:
    judge = SmallJudge([reply()], 1000)
    with pytest.raises(InputError, match="alone need"):
        run(judge, store)
    assert judge.requests == []


# ------------------------------------------------------------------------------ many inputs


def test_many_inputs_keep_their_order_and_report_progress(store: SqlStore) -> None:
    def answer(request: Any) -> dict[str, Any]:
        if "parcel" in request.payload.input:
            return reply()
        return unclassifiable()

    judge = ScriptedJudge([answer, answer, answer])
    seen: list[tuple[int, int]] = []
    items = [
        {"id": "a", "input": INPUT, "passages": PASSAGES},
        {"id": "b", "input": "What colour is the sky?", "passages": PASSAGES},
        {"id": "c", "input": "Where is my parcel?", "passages": PASSAGES[:2]},
    ]
    results = classify_many(
        items,
        TAXONOMY,
        judge=judge,
        store=store,
        settings=FAST,
        on_progress=lambda d, n: seen.append((d, n)),
    )
    assert [r.id for r in results] == ["a", "b", "c"]
    assert [r.unclassifiable for r in results] == [False, True, False]
    assert len({r.run_id for r in results}) == 3
    assert sorted(seen) == [(1, 3), (2, 3), (3, 3)]


def test_a_bad_item_stops_the_batch_before_any_call(store: SqlStore) -> None:
    judge = ScriptedJudge([reply(), reply()])
    items = [
        {"id": "a", "input": INPUT, "passages": PASSAGES},
        {"id": "b", "input": INPUT, "passages": [*PASSAGES, PASSAGES[0]]},
    ]
    with pytest.raises(InputError, match=r"item 'b'.*repeated: p1"):
        classify_many(items, TAXONOMY, judge=judge, store=store)
    assert judge.requests == []
