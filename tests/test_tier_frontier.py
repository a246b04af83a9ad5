"""The tier job routed by a cascade's frontier rule: the expensive judge sees each query's top
share by the cheap score, then one step at a time while its last step found relevant passages,
never more than the budget; every passage not sent is settled in the lowest tier."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import evidex
from evidex import HarnessSettings, Passage
from evidex.evaluate import evaluate
from evidex.evaluate.cascade_frontier import RecordedPairs, frontier_labels
from evidex.frontier import FrontierRule
from evidex.harness.frontier_pool import FrontierPool
from evidex.judges.cascade import CascadeJudge
from evidex.judging import JudgeRequest
from evidex.store import SqlStore
from tests.scripted import ScriptedJudge, tier_reply
from tests.test_cascade import FakeScorer, passages_scored, sent_ids

SCORES = (0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2, 0.1, 0.05)  # p0 scores highest, then p1 ...


def grades(relevant: set[str]) -> Any:
    """The expensive judge: directly-supporting for the ids in ``relevant``, else irrelevant."""

    def reply(request: JudgeRequest) -> dict[str, Any]:
        ids = [p.passage_id for p in request.payload.passages]  # type: ignore[attr-defined]
        return tier_reply(
            request,
            **{i: {"tier": "directly-supporting" if i in relevant else "irrelevant"} for i in ids},
        )

    return reply


def frontier_cascade(expensive: ScriptedJudge, **rule: float) -> CascadeJudge:
    settings = {"budget": 0.5, "start": 0.2, "step": 0.1, "width": 1} | rule
    return CascadeJudge(FakeScorer(), expensive, band="0.3:0.7", frontier=FrontierRule(**settings))


def run(expensive: ScriptedJudge, store: SqlStore, **rule: float) -> Any:
    return evidex.tier(
        "vitamin D",
        passages_scored(*SCORES),
        judge=frontier_cascade(expensive, **rule),
        store=store,
    )


def test_the_frontier_moves_down_while_its_last_step_finds_relevant_passages(
    store: SqlStore,
) -> None:
    expensive = ScriptedJudge([grades({"p0", "p1", "p2"})] * 10)
    result = run(expensive, store)
    # top 20% first, then 10% at a time: p2 relevant, so p3; p3 is not, so the rounds end
    asked = [[p.passage_id for p in r.payload.passages] for r in expensive.requests]  # type: ignore[attr-defined]
    assert asked == [["p0", "p1"], ["p2"], ["p3"]]
    by_id = {a.passage_id: a for a in result.classifications}
    assert [by_id[f"p{i}"].judged_by for i in range(4)] == ["scripted"] * 4
    assert by_id["p2"].tier == "directly-supporting" and by_id["p3"].tier == "irrelevant"
    for i in range(4, 10):  # the band would have sent p4 (0.5) and p5 (0.4) on: not here
        settled = by_id[f"p{i}"]
        assert settled.tier == "irrelevant" and settled.judged_by == "fake:cheap"
        assert "frontier" in settled.justification
    report = result.cascade
    assert report is not None
    assert (report.items, report.sent, report.settled) == (10, 4, 6)
    assert report.rule.startswith("frontier") and report.stopped == "no frontier yields"
    split = [e for e in result.events if e.kind == "cascade.split"]
    assert split and split[0].passage_ids == ["p0", "p1", "p2", "p3"]
    assert "frontier" in split[0].detail and "3 round(s)" in split[0].detail


def test_the_budget_bounds_what_is_sent_whatever_the_judge_finds(store: SqlStore) -> None:
    expensive = ScriptedJudge([grades({f"p{i}" for i in range(10)})] * 10)
    result = run(expensive, store)
    assert sent_ids(expensive) == ["p0", "p1", "p2", "p3", "p4"]  # floor(0.5 x 10)
    report = result.cascade
    assert report is not None and report.sent == 5 and report.stopped == "budget spent"
    by_id = {a.passage_id: a for a in result.classifications}
    assert {by_id[f"p{i}"].tier for i in range(5, 10)} == {"irrelevant"}  # never an upper grade


def test_a_step_that_falls_back_finds_nothing_relevant(store: SqlStore) -> None:
    # the first round's reply never validates: its passages fall back (the conservative tier,
    # to review), and a fallback is no verdict, so the frontier does not move on it
    graded = grades({"p0", "p1", "p2"})

    def broken_first(request: JudgeRequest) -> Any:
        ids = {p.passage_id for p in request.payload.passages}  # type: ignore[attr-defined]
        return "not json" if ids & {"p0", "p1"} else graded(request)

    expensive = ScriptedJudge([broken_first] * 20)
    result = run(expensive, store)
    assert set(sent_ids(expensive)) == {"p0", "p1"}  # asked again, split, never past them
    by_id = {a.passage_id: a for a in result.classifications}
    assert by_id["p0"].source == "fallback" and by_id["p1"].source == "fallback"
    assert result.review_item_ids
    assert result.cascade is not None and result.cascade.stopped == "no frontier yields"


def test_the_band_still_routes_without_the_rule(store: SqlStore) -> None:
    expensive = ScriptedJudge([tier_reply] * 3)
    judge = CascadeJudge(FakeScorer(), expensive, band="0.3:0.7")
    result = evidex.tier("vitamin D", passages_scored(*SCORES), judge=judge, store=store)
    assert sent_ids(expensive) == ["p3", "p4", "p5", "p6"]  # 0.6, 0.5, 0.4, 0.3: in the band
    assert result.cascade is not None and result.cascade.rule == "band"
    assert result.cascade.stopped is None


# ---------------------------------------------------------------------- one budget over a run


def scored_as(prefix: str, scores: tuple[float, ...]) -> list[Passage]:
    return [
        Passage(passage_id=f"{prefix}{i}", text=f"Passage {i} about vitamin D, score={s} here.")
        for i, s in enumerate(scores)
    ]


def two_queries(expensive: ScriptedJudge, store: SqlStore, concurrency: int) -> list[Any]:
    """Query ``a``, whose every passage the expensive judge finds relevant, and query ``b``,
    none of whose passages it does, in one run."""
    return evidex.tier_many(
        [
            {"query": "vitamin D", "passages": scored_as("a", SCORES)},
            {"query": "vitamin D dose", "passages": scored_as("b", SCORES)},
        ],
        judge=frontier_cascade(expensive),
        store=store,
        settings=HarnessSettings(max_concurrency=concurrency),
    )


def test_the_queries_of_a_run_share_one_budget(store: SqlStore) -> None:
    # 20 passages, budget 50%: 10 for the run. Both get their top 20% (2 each); b's frontier
    # finds nothing, so what b leaves goes to a, 10% a round, until the 10 are spent
    expensive = ScriptedJudge([grades({f"a{i}" for i in range(10)})] * 20)
    a, b = two_queries(expensive, store, concurrency=4)
    sent = sent_ids(expensive)
    assert sorted(i for i in sent if i.startswith("a")) == [f"a{i}" for i in range(8)]
    assert sorted(i for i in sent if i.startswith("b")) == ["b0", "b1"]
    assert a.cascade is not None and b.cascade is not None
    assert (a.cascade.sent, b.cascade.sent) == (8, 2)
    assert a.cascade.pooled == b.cascade.pooled == 2
    assert a.cascade.stopped == "budget spent"
    split = next(e for e in a.events if e.kind == "cascade.split")
    assert "budget shared by 2 queries" in split.detail
    by_id = {x.passage_id: x for x in a.classifications}
    assert by_id["a7"].tier == "directly-supporting" and by_id["a8"].tier == "irrelevant"


def test_inputs_that_cannot_run_together_keep_their_own_budget(store: SqlStore) -> None:
    # a pool's rounds wait for all its members, so a pool is at most the inputs run at once
    expensive = ScriptedJudge([grades({f"a{i}" for i in range(10)})] * 20)
    a, b = two_queries(expensive, store, concurrency=1)
    assert a.cascade is not None and b.cascade is not None
    assert (a.cascade.sent, b.cascade.sent) == (5, 2)  # floor(0.5 x 10) for a alone
    assert a.cascade.pooled == b.cascade.pooled == 1


def test_a_member_that_fails_does_not_hold_the_others() -> None:
    async def scenario() -> tuple[list[int], list[int], str | None]:
        pool = FrontierPool(FrontierRule(budget=0.5, start=0.2, step=0.1), members=3)
        pool.leave(2)  # failed before it had scores: the rounds start without it
        pool.join(0, SCORES)
        pool.join(1, SCORES)
        assert await pool.asked(0) == [0, 1] and await pool.asked(1) == [0, 1]
        pool.record(0, [True, True])
        pool.leave(1)  # failed while its step was asked: dropped, not counted as sent
        asked: list[list[int]] = []
        while (positions := await pool.asked(0)) is not None:
            asked.append(positions)
            pool.record(0, [True] * len(positions))
        return pool.sent(0), pool.sent(1), pool.stopped

    sent_0, sent_1, stopped = asyncio.run(scenario())
    assert sent_1 == []
    # the budget is floor(0.5 x 20) = 10 over the two that joined; member 1's unanswered two
    # were given back, so member 0 sends all of its 10
    assert sent_0 == list(range(10)) and stopped in ("budget spent", "every passage sent")


def test_ties_go_to_the_earlier_input_as_in_the_recorded_figures(store: SqlStore) -> None:
    # both queries' frontiers always yield alike: every tie goes to the run's first input, and
    # the figures computed from recorded verdicts (keyed "q2" then "q1", so not by id) agree
    everything = {f"{q}{i}" for q in "ab" for i in range(10)}
    expensive = ScriptedJudge([grades(everything)] * 20)
    a, b = two_queries(expensive, store, concurrency=4)
    assert a.cascade is not None and b.cascade is not None
    assert (a.cascade.sent, b.cascade.sent) == (8, 2)
    recorded = RecordedPairs(
        groups=["q2"] * 10 + ["q1"] * 10,
        scores=list(SCORES) * 2,
        expensive=[0] * 20,
        gold=[0] * 20,
        n_labels=4,
    )
    _, _, flags = frontier_labels(recorded, {"q1", "q2"}, budget=0.5, start=0.2, step=0.1)
    assert (sum(flags[:10]), sum(flags[10:])) == (8, 2)


def test_an_evaluation_shares_the_budget_over_the_queries_it_runs_together(
    store: SqlStore, tmp_path: Path
) -> None:
    # `evidex eval tier` under the rule: the queries run at once share it, as in the bench
    golden = tmp_path / "golden.jsonl"
    golden.write_text(
        "".join(
            json.dumps(
                {
                    "query_id": qid,
                    "query": query,
                    "passage_id": p.passage_id,
                    "text": p.text,
                    "tier": "directly-supporting" if qid == "a" else "irrelevant",
                }
            )
            + "\n"
            for qid, query in (("a", "vitamin D"), ("b", "vitamin D dose"))
            for p in scored_as(qid, SCORES)
        ),
        encoding="utf-8",
    )
    for concurrency, expected in ((4, (8, 2)), (1, (5, 2))):
        expensive = ScriptedJudge([grades({f"a{i}" for i in range(10)})] * 20)
        report = evaluate(
            "tier",
            golden,
            judge=frontier_cascade(expensive),
            store=store,
            out_dir=tmp_path / f"run{concurrency}",
            settings=HarnessSettings(max_concurrency=concurrency, use_cache=False),
        )
        sent = sent_ids(expensive)
        assert tuple(sum(i.startswith(q) for i in sent) for q in "ab") == expected
        assert report["run"]["groups"] == 2
