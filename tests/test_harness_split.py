"""A batch the judge cannot answer whole is split before anything falls back: the valid items
of its last reply are kept, the rest is halved and asked again, down to one item, within a
bound on the attempts each item takes part in. Only an item that fails alone falls back."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from typing import Any

import evidex
from evidex.harness.runner import Harness, HarnessSettings, RunContext
from evidex.judging import JudgeRequest
from evidex.store import SqlStore
from evidex.tasks.audit import ClaimBatch, ClaimSpan, ClassifyStep
from evidex.types import Passage
from tests.audit_fixtures import CEO, FOUNDED, FREE, PASSAGES, graded, inferred, supported
from tests.audit_fixtures import contradicted as contradicted_entry
from tests.fake_openai_server import Reply, serve, tier_reply_for
from tests.scripted import ScriptedJudge, tier_reply

FAST = HarnessSettings(backoff_s=0.0)
QUERY = "how much vitamin D do adults need?"


def _ids(request: JudgeRequest) -> list[str]:
    return [p.passage_id for p in request.payload.passages]  # type: ignore[attr-defined]


def _run(judge: ScriptedJudge, store: SqlStore, passages: list[Passage], **kw: Any) -> Any:
    kw.setdefault("settings", FAST)
    return evidex.tier(QUERY, passages, judge=judge, store=store, **kw)


def _answering_at_most(size: int, replies: int = 100) -> ScriptedJudge:
    """A judge that answers batches of up to ``size`` passages and no larger (no JSON)."""

    def answer(request: JudgeRequest) -> Any:
        return tier_reply(request) if len(_ids(request)) <= size else "I cannot grade that many"

    return ScriptedJudge([answer] * replies)


def _attempts_per_passage(judge: ScriptedJudge) -> Counter[str]:
    return Counter(pid for r in judge.requests for pid in _ids(r))


def test_a_passage_the_judge_keeps_leaving_out_is_asked_alone_and_keeps_its_grade(
    store: SqlStore, passages: list[Passage]
) -> None:
    def leave_out_p5(request: JudgeRequest) -> dict[str, Any]:
        reply = tier_reply(request, tier="tangentially-related")
        if len(_ids(request)) > 1:
            reply["classifications"] = [
                c for c in reply["classifications"] if c["passage_id"] != "p5"
            ]
        return reply

    judge = ScriptedJudge([leave_out_p5] * 10)
    result = _run(judge, store, passages)
    assert [len(_ids(r)) for r in judge.requests] == [7, 7, 7, 1]
    assert {(a.source, a.tier) for a in result.classifications} == {
        ("judge", "tangentially-related")
    }
    assert result.review_item_ids == []
    [event] = [e for e in result.events if e.kind == "batch_split"]
    assert event.data["kept"] == ["p1", "p2", "p3", "p4", "p6", "p7"]
    assert event.data["parts"] == [["p5"]]
    rows = store.audit_rows(run_id=result.run_id)
    [split] = [r for r in rows if r["status"] == "split"]
    assert split["detail"]["parts"] == [["p5"]]
    assert "'p5' is missing" in split["errors"][0]
    alone = [r for r in rows if r["status"] == "ok"]
    assert [r["batch_id"] for r in alone] == [f"{result.run_id}-b000.1"]


def test_a_batch_too_large_for_the_judge_is_halved_until_it_answers(
    store: SqlStore, passages: list[Passage]
) -> None:
    judge = _answering_at_most(2)
    result = _run(judge, store, passages)
    sizes = [len(_ids(r)) for r in judge.requests]
    # the batch's three attempts, then each half once (one after the other), each split again
    assert sizes == [7, 7, 7, 4, 2, 2, 3, 2, 1]
    assert {a.source for a in result.classifications} == {"judge"}
    assert [a.passage_id for a in result.classifications] == [p.passage_id for p in passages]
    splits = [e for e in result.events if e.kind == "batch_split"]
    assert len(splits) == 3  # the batch of 7, then both of its halves
    assert max(_attempts_per_passage(judge).values()) <= FAST.max_item_attempts
    assert result.judge_calls == len(judge.requests) == 9
    assert result.attempts == 9


def test_only_a_passage_that_fails_alone_falls_back(
    store: SqlStore, passages: list[Passage]
) -> None:
    def bad_p3(request: JudgeRequest) -> dict[str, Any]:
        return tier_reply(request, p3={"tier": "highly-relevant"})

    judge = ScriptedJudge([bad_p3] * 10)
    result = _run(judge, store, passages)
    by_id = {a.passage_id: a for a in result.classifications}
    assert by_id["p3"].source == "fallback"
    assert by_id["p3"].tier == "contextually-relevant"
    assert by_id["p3"].reason and "highly-relevant" in by_id["p3"].reason
    assert {a.source for pid, a in by_id.items() if pid != "p3"} == {"judge"}
    # three attempts in the batch, two alone (the re-ask with its errors, at temperature 0)
    assert _attempts_per_passage(judge)["p3"] == 5
    alone = judge.requests[3:]
    assert [_ids(r) for r in alone] == [["p3"], ["p3"]]
    assert alone[1].temperature == 0.0
    assert "highly-relevant" in alone[1].messages[-2].content
    [item_id] = result.review_item_ids
    item = store.get_review(item_id)
    assert item["passage_ids"] == ["p3"]
    assert "fallback after 2 attempt(s)" in item["reason"]
    statuses = Counter(r["status"] for r in store.audit_rows(run_id=result.run_id))
    assert (statuses["split"], statuses["fallback"], statuses["invalid"]) == (1, 1, 5)


def test_a_reply_cut_off_is_split_at_once_not_asked_whole_again(
    store: SqlStore, passages: list[Passage]
) -> None:
    def cut_when_large(request: JudgeRequest) -> Any:
        if len(_ids(request)) > 2:
            text = json.dumps(tier_reply(request))
            return text[: len(text) // 2]  # stopped mid-way, as at a token limit
        return tier_reply(request)

    judge = ScriptedJudge([cut_when_large] * 20)
    result = _run(judge, store, passages)
    assert [len(_ids(r)) for r in judge.requests] == [7, 4, 2, 2, 3, 2, 1]
    assert {a.source for a in result.classifications} == {"judge"}
    splits = [e for e in result.events if e.kind == "batch_split"]
    assert [e.data["cut_off"] for e in splits] == [True, True, True]
    assert "cut off at its token limit" in splits[0].detail


def test_finish_reason_length_from_an_openai_server_splits_the_batch(
    store: SqlStore, passages: list[Passage]
) -> None:
    """A reply that is valid JSON but stopped at ``max_tokens`` (the server says
    ``finish_reason: length``) is split at once too."""
    with serve() as server:
        server.add(Reply('{"classifications": []}', finish_reason="length"))
        server.default = Reply(tier_reply_for)
        judge = evidex.get_judge("openai:test-model", base_url=server.base_url, api_key="k")
        try:
            result = evidex.tier(QUERY, passages, judge=judge, store=store, settings=FAST)
        finally:
            asyncio.run(judge.aclose())  # type: ignore[attr-defined]
        assert len(server.chat_requests) == 3  # the cut reply, then its two halves
    assert {a.source for a in result.classifications} == {"judge"}
    [event] = [e for e in result.events if e.kind == "batch_split"]
    assert event.data["cut_off"] is True


def test_the_attempt_bound_stops_splitting_and_the_batch_falls_back(
    store: SqlStore, passages: list[Passage]
) -> None:
    judge = _answering_at_most(2)
    settings = HarnessSettings(backoff_s=0.0, max_item_attempts=4)
    result = _run(judge, store, passages, settings=settings)
    # 3 in the batch, 1 in each half, then no budget left for the quarters
    assert [len(_ids(r)) for r in judge.requests][:3] == [7, 7, 7]
    assert len(judge.requests) == 5
    assert max(_attempts_per_passage(judge).values()) == 4
    assert {a.source for a in result.classifications} == {"fallback"}
    assert len(result.review_item_ids) == 1


def test_splitting_can_be_turned_off(store: SqlStore, passages: list[Passage]) -> None:
    judge = _answering_at_most(2)
    result = _run(
        judge, store, passages, settings=HarnessSettings(backoff_s=0, split_batches=False)
    )
    assert len(judge.requests) == 3
    assert {a.source for a in result.classifications} == {"fallback"}
    assert not [e for e in result.events if e.kind == "batch_split"]


def test_a_judge_that_does_not_answer_is_not_split(
    store: SqlStore, passages: list[Passage]
) -> None:
    """Splitting helps a judge that answers badly, not one that does not answer: three failed
    calls are not followed by more calls to the same server."""
    judge = ScriptedJudge([])  # every call fails: no replies left
    result = _run(judge, store, passages)
    assert len(judge.requests) == 3
    assert {a.source for a in result.classifications} == {"fallback"}


def test_audit_claim_batches_split_the_same_way(store: SqlStore) -> None:
    spans = (
        ClaimSpan(claim_id="claim-1", claim_text=FOUNDED, start=0, end=len(FOUNDED)),
        ClaimSpan(claim_id="claim-2", claim_text=CEO, start=31, end=31 + len(CEO)),
        ClaimSpan(claim_id="claim-3", claim_text=FREE, start=70, end=70 + len(FREE)),
    )
    entries = {
        "claim-1": supported(),
        "claim-2": inferred(),
        "claim-3": contradicted_entry(),
    }

    def answer(request: JudgeRequest) -> dict[str, Any]:
        ids = [c.claim_id for c in request.payload.claims]  # type: ignore[attr-defined]
        if len(ids) > 1:  # leaves a claim out of every batch of several
            ids = ids[1:]
        return {"claims": [graded(i, entries[i]) for i in ids]}

    judge = ScriptedJudge([answer] * 10)
    harness = Harness(judge, store, settings=FAST)
    ctx = RunContext(job="audit", query="About Acme?")
    outcome = asyncio.run(
        harness.call(ClassifyStep(), ClaimBatch(spans, tuple(PASSAGES)), ctx, batch_id="b")
    )
    assert outcome.source == "judge"
    assert [c.claim_id for c in outcome.value.claims] == ["claim-1", "claim-2", "claim-3"]
    assert [c.source for c in outcome.value.claims] == ["judge"] * 3
    assert outcome.value.claims[2].contradicted
    assert [len(r.payload.claims) for r in judge.requests] == [3, 3, 1]  # type: ignore[attr-defined]
    assert set(outcome.kept) == {"claim-1", "claim-2", "claim-3"}
    [event] = outcome.events
    assert event.data["parts"] == [["claim-1"]]
