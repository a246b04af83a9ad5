"""The consistency check: repeated and shuffled runs, without the cache, and its arithmetic."""

from __future__ import annotations

from typing import Any

import pytest

from evidex.errors import InputError
from evidex.harness.runner import HarnessSettings
from evidex.jobs.consistency import ConsistencyRun, consistency_check, summarise
from evidex.judging import JudgeRequest
from evidex.store import SqlStore
from tests.classify_fixtures import INPUT, PASSAGES, TAXONOMY, evidence, label, reply
from tests.scripted import ScriptedJudge

SHIPPING = label("SHIPPING", 0.6, [evidence("p2", "Tracking numbers are emailed")])


def test_runs_bypass_the_cache_and_shuffle_the_passages(store: SqlStore) -> None:
    answers = [reply(label(confidence=c)) for c in (0.9, 0.8, 0.7)] + [
        reply(label(confidence=0.9)),
        reply(SHIPPING),
        reply(label(confidence=0.5)),
    ]
    judge = ScriptedJudge(answers)
    report = consistency_check(
        INPUT,
        PASSAGES,
        TAXONOMY,
        runs=3,
        seed=1,
        judge=judge,
        store=store,
        settings=HarnessSettings(backoff_s=0.0),
    )
    assert len(judge.requests) == 6, "identical inputs must not be served from the cache"
    assert [r.order for r in report.runs] == ["original"] * 3 + ["shuffled"] * 3
    originals = {tuple(r.passage_order) for r in report.runs[:3]}
    assert originals == {("p1", "p2", "p3")}
    assert any(tuple(r.passage_order) != ("p1", "p2", "p3") for r in report.runs[3:])
    sent = [tuple(p.passage_id for p in q.payload.passages) for q in judge.requests]
    assert sent == [tuple(r.passage_order) for r in report.runs]

    assert report.modal_labels == ["REFUND"]
    assert report.agreement == pytest.approx(5 / 6)
    assert report.repeat_agreement == 1.0
    assert report.shuffle_agreement == pytest.approx(2 / 3)
    assert not report.stable
    refund = next(s for s in report.labels if s.label == "REFUND")
    assert refund.share == pytest.approx(5 / 6)
    assert (refund.confidence_min, refund.confidence_max) == (0.5, 0.9)
    assert refund.confidence_mean == pytest.approx((0.9 + 0.8 + 0.7 + 0.9 + 0.5) / 5)
    assert store.list_reviews(job="classify") == [], "a diagnostic opens no review items"


def test_summarise_counts_fallbacks_and_unclassifiable_runs() -> None:
    def run(labels: list[str], source: Any = "judge") -> ConsistencyRun:
        return ConsistencyRun(
            order="original",
            passage_order=["p1"],
            labels=labels,
            confidences={name: 0.8 for name in labels},
            unclassifiable=not labels,
            source=source,
        )

    report = summarise([run([]), run([], "fallback"), run(["A"])])
    assert report.modal_labels == []
    assert report.agreement == pytest.approx(2 / 3)
    assert report.fallbacks == 1
    assert [s.label for s in report.labels] == ["A"]
    assert report.labels[0].confidence_stdev == 0.0
    stable = summarise([run(["A", "B"]), run(["A", "B"])])
    assert stable.stable and stable.modal_labels == ["A", "B"]


def test_the_check_uses_one_preflight_for_every_run(store: SqlStore) -> None:
    def answer(request: JudgeRequest) -> dict[str, Any]:
        assert len(request.payload.passages) == 3
        return reply()

    passages = [*PASSAGES, PASSAGES[0].model_copy(update={"passage_id": "dup"})]
    report = consistency_check(
        INPUT, passages, TAXONOMY, runs=2, judge=ScriptedJudge([answer] * 4), store=store
    )
    assert report.stable and all("dup" not in r.passage_order for r in report.runs)


@pytest.mark.parametrize("runs", [0, -1, True])
def test_runs_must_be_positive(store: SqlStore, runs: Any) -> None:
    with pytest.raises(InputError, match="runs"):
        consistency_check(INPUT, PASSAGES, TAXONOMY, runs=runs, judge=ScriptedJudge(), store=store)
