"""The rerank job with the scripted judge: each strategy, each validation fault, the fallback to
retrieval order with a review item, the top_n cut, duplicates, cache and metrics."""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import pytest

from evidex.errors import InputError, JudgeUnavailable
from evidex.harness.runner import HarnessSettings
from evidex.jobs.rerank import RerankResult, rerank
from evidex.judging import Judge, JudgeReply, JudgeRequest
from evidex.store import SqlStore
from evidex.types import Passage
from tests.scripted import ScriptedJudge, rank_reply

FAST = HarnessSettings(backoff_s=0.0)
LADDER = HarnessSettings(backoff_s=0.0, split_batches=False, adapt_batch_size=False)
"""The spec's ladder alone: a ranking that fails is not split, nor the next window made smaller
(tests/test_split_every_job.py)."""
QUERY = "how much vitamin D do adults need?"


def _run(judge: Judge, store: SqlStore, passages: Sequence[Passage], **kw: Any) -> RerankResult:
    kw.setdefault("settings", FAST)
    kw.setdefault("strategy", "allpairs")
    return rerank(QUERY, passages, judge=judge, store=store, **kw)


def _ids(passages: Sequence[Passage]) -> list[str]:
    return [p.passage_id for p in passages]


def _user_text(request: JudgeRequest) -> str:
    return "\n".join(m.content for m in request.messages if m.role == "user")


# ---------------------------------------------------------------------------- allpairs


def test_allpairs_orders_and_reports(store: SqlStore, passages: list[Passage]) -> None:
    judge = ScriptedJudge([rank_reply()])
    result = _run(judge, store, passages)

    assert result.ids() == list(reversed(_ids(passages)))
    assert [r.rank for r in result.ranked_passages] == list(range(1, 8))
    assert result.source == "judge" and result.strategy == "allpairs"
    assert result.ranked_passages[0].relevance_score == 0.99
    assert all(r.source == "judge" for r in result.ranked_passages)
    assert result.metrics.inversion_rate == 1.0  # the exact reverse of the retrieval order
    assert result.metrics.judge_calls == 1 and result.metrics.prompt_tokens == 100
    assert result.metrics.candidate_count == 7 and result.metrics.output_ranking == result.ids()
    # the prompt is the spec's: query and passages filled in, field names kept
    user = judge.requests[0].messages[1].content
    assert QUERY in user and '"ranked_passages"' in user and "p7" in user
    notes = store.audit_rows(run_id=result.run_id, step="rerank_metrics")
    assert len(notes) == 1
    assert notes[0]["detail"]["inversion_rate"] == 1.0
    # the audit log keeps the query's hash, never its text, in every row, metrics included
    assert "query" not in notes[0]["detail"] and QUERY not in json.dumps(notes[0]["detail"])
    assert notes[0]["query_hash"] == store.audit_rows(run_id=result.run_id)[0]["query_hash"]


def _rows(store: SqlStore, run_id: str) -> list[dict[str, Any]]:
    return store.audit_rows(run_id=run_id)


@pytest.mark.parametrize(
    ("fault", "expected"),
    [
        (
            lambda r: {
                "ranked_passages": [
                    *rank_reply()(r)["ranked_passages"],
                    {"rank": 8, "passage_id": "p99", "justification": "vitamin"},
                ]
            },
            "'p99' is not one of the input passages",
        ),
        (
            lambda r: {"ranked_passages": rank_reply()(r)["ranked_passages"][:-1]},
            "'p1' is missing",
        ),
        (rank_reply(p2={"rank": 1}), "rank 1 is given to 2 passages"),
        (rank_reply(p2={"rank": 9}), "outside 1..7"),
        (rank_reply(p2={"relevance_score": "high"}), "relevance_score must be a number"),
        ("no json here", "invalid JSON"),
    ],
    ids=["invented-id", "missing-id", "duplicate-rank", "rank-gap", "bad-score", "not-json"],
)
def test_validation_fault_is_named_in_the_one_retry(
    store: SqlStore,
    passages: list[Passage],
    fault: Callable[[JudgeRequest], Any] | str,
    expected: str,
) -> None:
    judge = ScriptedJudge([fault, rank_reply()])
    result = _run(judge, store, passages)

    assert result.source == "judge"
    assert len(judge.requests) == 2
    retry = judge.requests[1]
    assert retry.attempt == 2 and retry.temperature == 0.0
    assert any(expected in m.content for m in retry.messages if m.role == "user")
    statuses = [r["status"] for r in _rows(store, result.run_id) if r["step"] == "rerank"]
    assert statuses == ["invalid", "ok"]


def test_two_failures_fall_back_to_retrieval_order_with_review(
    store: SqlStore, passages: list[Passage]
) -> None:
    only_three = lambda r: {"ranked_passages": rank_reply()(r)["ranked_passages"][:3]}  # noqa: E731
    judge = ScriptedJudge([only_three, only_three, rank_reply()])
    result = _run(judge, store, passages, settings=LADDER)

    assert len(judge.requests) == 2  # max_attempts = 2: no third call
    assert result.source == "fallback"
    assert result.ids() == _ids(passages)
    assert all(r.source == "fallback" for r in result.ranked_passages)
    assert "missing" in (result.reason or "")
    assert len(result.review_item_ids) == 1
    item = store.get_review(result.review_item_ids[0])
    assert item["job"] == "rerank" and item["payload"]["strategy"] == "allpairs"
    assert "offline review" in item["payload"]["flag"]
    assert item["payload"]["last_raw_output"] is not None


def test_reply_ranking_3_of_20_lists_every_missing_id(store: SqlStore) -> None:
    many = [Passage(passage_id=f"d{i}", text=f"vitamin fact number {i} here") for i in range(20)]
    only_three = lambda r: {"ranked_passages": rank_reply()(r)["ranked_passages"][:3]}  # noqa: E731
    judge = ScriptedJudge([only_three, only_three])
    result = _run(judge, store, many)

    note = _user_text(judge.requests[1])
    assert sum(f"'d{i}' is missing" in note for i in range(20)) == 17
    assert result.source == "fallback" and result.ids() == _ids(many)


def test_judge_that_always_fails_gives_retrieval_order_flagged(
    store: SqlStore, passages: list[Passage]
) -> None:
    judge = ScriptedJudge([JudgeUnavailable("down"), JudgeUnavailable("down")])
    result = _run(judge, store, passages)

    assert result.source == "fallback" and result.ids() == _ids(passages)
    assert "judge unavailable" in (result.reason or "")
    assert len(result.review_item_ids) == 1


def test_exclusion_needs_a_reason(store: SqlStore, passages: list[Passage]) -> None:
    def excluding(reason: str) -> Callable[[JudgeRequest], dict[str, Any]]:
        def reply(request: JudgeRequest) -> dict[str, Any]:
            data = rank_reply(["p2", "p6", "p1", "p4", "p7", "p5"])(request)
            data["ranked_passages"] = [
                e for e in data["ranked_passages"] if e["passage_id"] != "p3"
            ]
            data["excluded"] = [{"passage_id": "p3", "reason": reason}]
            return data

        return reply

    judge = ScriptedJudge([excluding(""), excluding("about the 1944 landings, not vitamins")])
    result = _run(judge, store, passages)

    assert "excluded passage 'p3' needs a reason" in _user_text(judge.requests[1])
    assert result.ids() == ["p2", "p6", "p1", "p4", "p7", "p5", "p3"]
    last = result.ranked_passages[-1]
    assert last.excluded == "about the 1944 landings, not vitamins" and last.rank == 7


def test_empty_and_generic_justifications_are_flagged(
    store: SqlStore, passages: list[Passage]
) -> None:
    judge = ScriptedJudge(
        [rank_reply(p1={"justification": ""}, p2={"justification": "This is ranked here."})]
    )
    result = _run(judge, store, passages)

    assert result.source == "judge"  # flags are warnings, not rejections
    assert result.metrics.justification_flags == {"p1": "empty", "p2": "generic"}
    flagged = [e for e in result.events if e.kind == "justification_flag"]
    assert {e.passage_ids[0] for e in flagged} == {"p1", "p2"}
    assert all(e.detail.startswith("heuristic:") for e in flagged)
    notes = store.audit_rows(run_id=result.run_id, step="justification_flag")
    assert len(notes) == 2


# ---------------------------------------------------------------------------- input shapes


def test_top_n_cut_keeps_the_rest_in_retrieval_order(store: SqlStore) -> None:
    many = [
        Passage(passage_id=f"d{i:03d}", text=f"vitamin D passage number {i}", rank=i + 1)
        for i in range(200)
    ]
    judge = ScriptedJudge([rank_reply()])
    result = _run(judge, store, list(reversed(many)), top_n=30)

    assert len(judge.requests[0].payload.passages) == 30
    assert [p.passage_id for p in judge.requests[0].payload.passages] == _ids(many[:30])
    assert result.ids()[:30] == list(reversed(_ids(many[:30])))
    assert result.ids()[30:] == _ids(many[30:])
    assert [r.rank for r in result.ranked_passages] == list(range(1, 201))
    assert all(r.source is None for r in result.ranked_passages[30:])
    cut = [e for e in result.events if e.kind == "truncated" and e.data.get("cause") == "top_n"]
    assert len(cut) == 1 and len(cut[0].passage_ids) == 170
    assert result.metrics.truncation_events == 1 and result.metrics.reranked_count == 30
    assert store.audit_rows(run_id=result.run_id, step="truncated")


def test_identical_passages_are_ranked_once_and_follow_their_twin(store: SqlStore) -> None:
    items = [
        Passage(passage_id="a", text="Adults need 600 IU of vitamin D."),
        Passage(passage_id="b", text="Sunlight makes vitamin D in skin."),
        Passage(passage_id="c", text="Adults  need 600 IU of vitamin D."),
    ]
    judge = ScriptedJudge([rank_reply(["a", "b"])])
    result = _run(judge, store, items)

    assert _ids([Passage.model_validate(vars(p)) for p in judge.requests[0].payload.passages]) == [
        "a",
        "b",
    ]
    assert result.ids() == ["a", "c", "b"]
    assert result.ranked_passages[1].duplicate_of == "a"
    assert any(e.kind == "duplicates_removed" for e in result.events)


def test_empty_query_and_bad_settings_are_input_errors(
    store: SqlStore, passages: list[Passage]
) -> None:
    with pytest.raises(InputError, match="query is empty"):
        rerank("  ", passages, judge=ScriptedJudge(), store=store)
    with pytest.raises(InputError, match="strategy: input should be 'allpairs'"):
        _run(ScriptedJudge(), store, passages, strategy="bubble")
    with pytest.raises(InputError, match="step must be less than window"):
        _run(ScriptedJudge(), store, passages, window=5, step=5)
    with pytest.raises(InputError, match="top_n: input should be greater than or equal to 1"):
        _run(ScriptedJudge(), store, passages, top_n=0)
    with pytest.raises(InputError, match="no passages"):
        _run(ScriptedJudge(), store, [])
    with pytest.raises(InputError, match="candidate 2 is not a valid passage: text"):
        _run(ScriptedJudge(), store, [{"id": "a", "text": "x"}, {"id": "b"}])  # type: ignore[list-item]


def test_one_candidate(store: SqlStore) -> None:
    only = [Passage(passage_id="x", text="Adults need 600 IU of vitamin D.")]
    result = _run(ScriptedJudge([rank_reply()]), store, only)
    assert result.ids() == ["x"] and result.ranked_passages[0].rank == 1
    assert result.metrics.inversion_rate == 0.0
    paired = _run(ScriptedJudge(), store, only, strategy="pairwise")
    assert paired.ids() == ["x"] and paired.judge_calls == 0


def test_retrieval_order_comes_from_rank_when_given(store: SqlStore) -> None:
    items = [Passage(passage_id=f"r{i}", text=f"vitamin text {i}", rank=10 - i) for i in range(5)]
    judge = ScriptedJudge([JudgeUnavailable("x"), JudgeUnavailable("x")])
    result = _run(judge, store, items)
    assert result.ids() == ["r4", "r3", "r2", "r1", "r0"]


# ---------------------------------------------------------------------------- cache


def test_identical_request_is_served_from_cache(store: SqlStore, passages: list[Passage]) -> None:
    judge = ScriptedJudge([rank_reply(), rank_reply()])
    first = _run(judge, store, passages)
    second = _run(judge, store, passages)

    assert len(judge.requests) == 1
    assert second.source == "cache" and second.ids() == first.ids()
    assert all(r.source == "cache" for r in second.ranked_passages)
    # another strategy over the same passages is another question
    third = _run(judge, store, passages, strategy="listwise")
    assert len(judge.requests) == 2 and third.source == "judge"
    # and a changed passage set too
    _run(ScriptedJudge([rank_reply()]), store, passages[:-1])


# ---------------------------------------------------------------------------- listwise


def _by_hidden_relevance(relevance: dict[str, float]) -> Callable[[JudgeRequest], dict[str, Any]]:
    def reply(request: JudgeRequest) -> dict[str, Any]:
        ids = [p.passage_id for p in request.payload.passages]
        return rank_reply(sorted(ids, key=lambda i: -relevance[i]))(request)

    return reply


def test_listwise_slides_windows_from_the_bottom(store: SqlStore, passages: list[Passage]) -> None:
    relevance = {"p1": 1, "p2": 7, "p3": 0, "p4": 3, "p5": 2, "p6": 6, "p7": 5}
    judge = ScriptedJudge([_by_hidden_relevance(relevance)] * 3)
    result = _run(judge, store, passages, strategy="listwise", window=4, step=2)

    windows = [[p.passage_id for p in r.payload.passages] for r in judge.requests]
    assert windows[0] == ["p4", "p5", "p6", "p7"]  # the bottom window first
    assert len(windows) == 3 and all(len(w) == 4 for w in windows)
    assert result.ids()[:3] == ["p2", "p6", "p7"]
    assert result.judge_calls == 3 and result.source == "judge"


def test_listwise_window_fallback_keeps_that_window(
    store: SqlStore, passages: list[Passage]
) -> None:
    relevance = {"p1": 1, "p2": 7, "p3": 0, "p4": 3, "p5": 2, "p6": 6, "p7": 5}
    ok = _by_hidden_relevance(relevance)
    judge = ScriptedJudge([ok, "garbage", "garbage", ok])
    result = _run(judge, store, passages, strategy="listwise", window=4, step=2, settings=LADDER)

    assert result.source == "fallback" and len(result.review_item_ids) == 1
    assert len(judge.requests) == 4


# ---------------------------------------------------------------------------- pointwise


class _Scorer(Judge):
    """A scoring judge double: word overlap with the query."""

    jobs: ClassVar[frozenset[str]] = frozenset({"rerank"})

    def __init__(self) -> None:
        super().__init__("test:scorer")
        self.scored: list[int] = []

    def score(self, query: str, texts: Sequence[str]) -> list[float]:
        self.scored.append(len(texts))
        words = set(query.lower().split())
        return [len(words & set(t.lower().split())) / len(words) for t in texts]

    async def complete(self, request: JudgeRequest) -> JudgeReply:
        raise AssertionError("pointwise must use score(), not the chat path")


def test_pointwise_uses_the_scoring_protocol_and_the_cache(store: SqlStore) -> None:
    items = [
        Passage(passage_id="a", text="the moon is far"),
        Passage(passage_id="b", text="adults need vitamin d daily"),
        Passage(passage_id="c", text="vitamin d"),
    ]
    scorer = _Scorer()
    result = rerank("how much vitamin d do adults need", items, judge=scorer, store=store)

    assert result.strategy == "pointwise"  # the default for scoring judges
    assert result.ids() == ["b", "c", "a"]
    assert result.ranked_passages[0].relevance_score == pytest.approx(4 / 7)
    assert "test:scorer relevance score" in result.ranked_passages[0].justification
    assert result.metrics.justification_flags == {}  # encoder scores make no reading claims
    again = rerank("how much vitamin d do adults need", items, judge=scorer, store=store)
    assert scorer.scored == [3] and again.source == "cache" and again.ids() == result.ids()


def test_pointwise_with_a_chat_judge(store: SqlStore, passages: list[Passage]) -> None:
    def scores(request: JudgeRequest) -> dict[str, Any]:
        return {
            "scores": [
                {
                    "passage_id": p.passage_id,
                    "relevance_score": len(p.text) / 100,
                    "justification": f"It says {p.text[:20]}",
                }
                for p in request.payload.passages
            ]
        }

    judge = ScriptedJudge([scores])
    result = _run(judge, store, passages, strategy="pointwise")
    lengths = {p.passage_id: len(p.text) for p in passages}
    assert result.ids() == sorted(lengths, key=lambda i: -lengths[i])
    assert judge.requests[0].step == "rerank.score"


# ---------------------------------------------------------------------------- pairwise


def _pair_judge(relevance: dict[str, float]) -> Callable[[JudgeRequest], dict[str, Any]]:
    def reply(request: JudgeRequest) -> dict[str, Any]:
        a, b = (p.passage_id for p in request.payload.passages)
        winner = "A" if relevance[a] > relevance[b] else "B"
        return {"winner": winner, "justification": f"It says {a if winner == 'A' else b}"}

    return reply


def test_pairwise_finds_the_top_k_with_few_comparisons_in_both_orders(store: SqlStore) -> None:
    rng = random.Random(7)
    items = [Passage(passage_id=f"d{i:02d}", text=f"vitamin passage {i}") for i in range(30)]
    relevance = {p.passage_id: rng.random() for p in items}
    reply = _pair_judge(relevance)
    judge = ScriptedJudge([reply] * 400)
    result = _run(judge, store, items, strategy="pairwise", top_k=10)

    best = sorted(relevance, key=lambda i: -relevance[i])[:10]
    assert result.ids()[:10] == best
    comparisons = result.metrics.comparisons or 0
    assert comparisons < 30 * 29 / 2 * 0.2
    assert result.judge_calls == 2 * comparisons == len(judge.requests)
    asked = [tuple(p.passage_id for p in r.payload.passages) for r in judge.requests]
    assert all((b, a) in asked for a, b in asked)  # every pair in both orders
    assert result.metrics.ties == 0
    assert all(r.source is None for r in result.ranked_passages[10:])


def test_pairwise_result_does_not_depend_on_input_order(store: SqlStore) -> None:
    rng = random.Random(3)
    items = [Passage(passage_id=f"d{i:02d}", text=f"vitamin passage {i}") for i in range(12)]
    relevance = {p.passage_id: rng.random() for p in items}
    tops = []
    for seed in range(3):
        shuffled = items[:]
        random.Random(seed).shuffle(shuffled)
        judge = ScriptedJudge([_pair_judge(relevance)] * 200)
        settings = HarnessSettings(backoff_s=0.0, use_cache=False)
        tops.append(
            _run(judge, store, shuffled, strategy="pairwise", top_k=5, settings=settings).ids()[:5]
        )
    assert tops[0] == tops[1] == tops[2]


def test_pairwise_position_bias_counts_as_a_tie(store: SqlStore, passages: list[Passage]) -> None:
    always_a = {"winner": "A", "justification": "The first one mentions vitamin D."}
    judge = ScriptedJudge([always_a] * 100)
    result = _run(judge, store, passages, strategy="pairwise", top_k=3)

    assert result.metrics.ties == result.metrics.comparisons
    assert result.ids() == _ids(passages)  # every tie goes to the better retrieval rank
    assert "Tied with" in result.ranked_passages[0].justification


def test_pairwise_failed_comparisons_are_ties_with_review(
    store: SqlStore, passages: list[Passage]
) -> None:
    judge = ScriptedJudge(["nope"] * 200)
    result = _run(judge, store, passages[:3], strategy="pairwise", top_k=2)

    assert result.metrics.ties == result.metrics.comparisons
    assert result.ids() == _ids(passages[:3])
    assert result.source == "fallback"
    assert result.review_item_ids and any(e.kind == "comparison_fallback" for e in result.events)
    assert judge.requests[0].step == "rerank.pair"
    assert json.loads(json.dumps(result.report()))["strategy"] == "pairwise"


# ---------------------------------------------------------------------------- the real encoder


@pytest.mark.slow
@pytest.mark.parametrize("strategy", ["pointwise", "allpairs"])
def test_local_minilm_reranks_natively_and_by_score(
    store: SqlStore, passages: list[Passage], strategy: str
) -> None:
    """The default judge: pointwise through score(), allpairs through its native reply,
    which passes the same validation as a chat judge's."""
    result = rerank(
        "How much vitamin D do adults need each day?",
        passages,
        judge="local:minilm",
        store=store,
        strategy=strategy,
        settings=FAST,
    )
    assert result.source == "judge" and result.judge_id == "local:minilm"
    assert set(result.ids()[:2]) == {"p2", "p6"}  # the two passages that give a daily dose
    assert result.ids()[-1] == "p3"  # the D-Day landings
    assert all(r.relevance_score is not None for r in result.ranked_passages)
