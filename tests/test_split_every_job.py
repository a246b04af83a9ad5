"""Every job degrades the same way before anything falls back, through the harness: a batch the
judge cannot answer whole is split in halves (:mod:`evidex.harness._split`), and the batches
after it are cut smaller (:mod:`evidex.harness.sizing`), where the job's unit can be split.

Tier passages and audit claims are in tests/test_harness_split.py and tests/test_batch_sizing.py.
Here: rerank's pointwise batches (scores, one per passage, split like tier's grades), its
listwise windows and its allpairs call (a ranking, split into halves ranked apart and
interleaved; windows cut at the size the judge holds), and classify, whose call is one answer
over the whole evidence set and is not split."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from evidex.harness.runner import HarnessSettings
from evidex.jobs.classify import classify
from evidex.jobs.rerank import RerankResult, rerank
from evidex.judging import JudgeRequest
from evidex.store import SqlStore
from evidex.types import Passage
from tests.classify_fixtures import INPUT, PASSAGES, TAXONOMY
from tests.scripted import ScriptedJudge, rank_reply

QUERY = "how much vitamin D do adults need?"
ONE_AT_A_TIME = HarnessSettings(backoff_s=0.0, max_concurrency=1)
"""Batches one after another, so each is cut after the last one's outcome is known."""


def _ids(request: JudgeRequest) -> list[str]:
    return [p.passage_id for p in request.payload.passages]  # type: ignore[attr-defined]


def _many(n: int) -> list[Passage]:
    return [
        Passage(passage_id=f"d{i:02d}", text=f"vitamin D fact number {i} here") for i in range(n)
    ]


def _rerank(
    judge: ScriptedJudge, store: SqlStore, passages: Sequence[Passage], **kw: Any
) -> RerankResult:
    kw.setdefault("settings", ONE_AT_A_TIME)
    return rerank(QUERY, passages, judge=judge, store=store, **kw)


def _kinds(result: Any, kind: str) -> list[Any]:
    return [e for e in result.events if e.kind == kind]


# ---------------------------------------------------------------------------- pointwise


def _scoring_at_most(size: int) -> Callable[[JudgeRequest], dict[str, Any]]:
    """Scores every passage of a batch of up to ``size``; of a larger one it leaves the last
    passage out, as a small model does."""

    def reply(request: JudgeRequest) -> dict[str, Any]:
        ids = _ids(request)
        kept = ids if len(ids) <= size else ids[:-1]
        score = {i: round(0.99 - int(i[1:]) / 100, 2) for i in ids}  # d00 best
        return {
            "scores": [
                {"passage_id": i, "relevance_score": score[i], "justification": "It says D."}
                for i in kept
            ]
        }

    return reply


def test_pointwise_batches_are_split_and_then_cut_smaller(store: SqlStore) -> None:
    passages = _many(20)
    judge = ScriptedJudge([_scoring_at_most(5)] * 40)
    result = _rerank(judge, store, passages, strategy="pointwise", top_n=20)  # batches of 10

    assert result.source == "judge" and result.review_item_ids == []
    assert result.ids() == [p.passage_id for p in passages]  # every score is the judge's
    assert all(r.source == "judge" for r in result.ranked_passages)
    # the first batch of 10: its own two attempts keep 9, then the one left out alone
    sizes = [len(_ids(r)) for r in judge.requests]
    assert sizes[:3] == [10, 10, 1]
    [split] = _kinds(result, "batch_split")
    assert split.data["kept"] == [p.passage_id for p in passages[:9]]
    # then batches of 5, which the judge holds
    assert sizes[3:] == [5, 5]
    [adapted] = _kinds(result, "batch_size_adapted")
    assert adapted.data["sizes"] == [10, 5, 5] and adapted.data["asked"] == 10


# ---------------------------------------------------------------------------- rankings


def _ranking_at_most(size: int) -> Callable[[JudgeRequest], Any]:
    """Ranks a list of up to ``size`` passages (d00 best); a longer one it cannot."""
    best_first = rank_reply([f"d{i:02d}" for i in range(100)])

    def reply(request: JudgeRequest) -> Any:
        return best_first(request) if len(_ids(request)) <= size else "I cannot rank that many"

    return reply


def test_an_allpairs_ranking_is_split_into_halves_ranked_apart_in_the_order_given(
    store: SqlStore,
) -> None:
    passages = list(reversed(_many(8)))  # retrieval order: d07 first, d00 last
    judge = ScriptedJudge([_ranking_at_most(4)] * 10)
    result = _rerank(judge, store, passages, strategy="allpairs")

    assert [len(_ids(r)) for r in judge.requests] == [8, 8, 4, 4]
    assert result.source == "judge" and result.review_item_ids == []
    # each half ranked by the judge, the two rankings interleaved: each half's best on top
    assert result.ids() == ["d04", "d00", "d05", "d01", "d06", "d02", "d07", "d03"]
    assert [r.rank for r in result.ranked_passages] == list(range(1, 9))
    [split] = _kinds(result, "batch_split")
    assert split.data["parts"] == [["d07", "d06", "d05", "d04"], ["d03", "d02", "d01", "d00"]]


def test_a_split_ranking_whose_half_falls_back_keeps_the_order_given(store: SqlStore) -> None:
    """The fallback of a ranking is the order given: when a part cannot be ranked even alone,
    the parts are not interleaved; the judged parts keep their rankings within."""
    passages = list(reversed(_many(8)))
    ranking = _ranking_at_most(4)

    def not_the_second_half(request: JudgeRequest) -> Any:
        return "no" if "d00" in _ids(request) else ranking(request)

    judge = ScriptedJudge([not_the_second_half] * 20)
    result = _rerank(judge, store, passages, strategy="allpairs")

    assert result.source == "fallback" and len(result.review_item_ids) == 1
    # halves of halves: only d00, alone, fell back; each judged part ranked, none interleaved
    assert result.ids() == ["d04", "d05", "d06", "d07", "d02", "d03", "d01", "d00"]


def test_listwise_windows_are_split_and_then_cut_to_the_size_the_judge_holds(
    store: SqlStore,
) -> None:
    passages = list(reversed(_many(20)))  # the best passages last
    judge = ScriptedJudge([_ranking_at_most(5)] * 60)
    result = _rerank(judge, store, passages, strategy="listwise", top_n=20, window=10, step=5)

    assert result.source == "judge" and result.review_item_ids == []
    assert sorted(result.ids()) == sorted(p.passage_id for p in passages)
    assert all(r.source == "judge" for r in result.ranked_passages)
    windows = [_ids(r) for r in judge.requests]
    # the bottom window of 10 fails its two attempts and is ranked as two halves of 5
    assert [len(w) for w in windows[:4]] == [10, 10, 5, 5]
    assert _kinds(result, "batch_split")
    # the next window is cut at 5 and moves up by half of it, as a window of 10 moves by 5
    assert len(windows[4]) == 5 and windows[4][0] == "d11"
    [adapted] = _kinds(result, "batch_size_adapted")
    assert adapted.data["sizes"][:2] == [10, 5] and adapted.data["asked"] == 10
    # the best passage, found at the bottom, climbed to the top two (the judge, probing a
    # window of 6 again, had to split the last window too: between halves nothing is judged)
    assert "d00" in result.ids()[:2]


# ---------------------------------------------------------------------------- classify


def test_a_classify_call_is_not_split_its_evidence_set_is_one_question(
    store: SqlStore,
) -> None:
    """A classify call labels the input from the whole evidence set (one label, counter
    evidence, unclassifiable): halves would answer other questions. A reply cut off at its
    token limit is asked again whole, then the explicit fallback."""
    cut = '{"classifications": [{"label": "REFUND", "confidence": 0.9, "supporting_evidence": ['
    judge = ScriptedJudge([cut, cut, cut])
    result = classify(
        INPUT, PASSAGES, TAXONOMY, judge=judge, store=store,
        settings=HarnessSettings(backoff_s=0.0), risk="medium",
    )  # fmt: skip

    assert len(judge.requests) == 2  # the spec's attempts, each with every passage
    assert all(
        [p.passage_id for p in r.payload.passages] == ["p1", "p2", "p3"]  # type: ignore[attr-defined]
        for r in judge.requests
    )
    assert _kinds(result, "batch_split") == []
    assert result.source == "fallback" and result.unclassifiable and len(result.review) == 1
