"""The batch size a judge can hold: smaller batches for a judge whose batches keep failing,
larger again as its replies validate (additive increase, multiplicative decrease between 5 and
the job's batch size), within a run, across runs through the audit log, and shown on the
result and in the metrics."""

from __future__ import annotations

from typing import Any

import evidex
from evidex.harness.metrics import metrics
from evidex.harness.runner import HarnessSettings
from evidex.harness.sizing import BatchSizer, replayed
from evidex.judging import JudgeRequest
from evidex.store import SqlStore
from evidex.types import Passage
from tests.scripted import ScriptedJudge, tier_reply

ONE_AT_A_TIME = HarnessSettings(backoff_s=0.0, max_concurrency=1)
QUERY = "how much vitamin D do adults need?"
PASSAGES = [Passage(passage_id=f"x{i}", text=f"fact number {i} about vitamin D") for i in range(30)]


def _sizes(store: SqlStore, run_id: str) -> list[int]:
    """The size of each batch of a run at its first attempt (split parts left out)."""
    return [
        r["detail"]["items"]
        for r in store.audit_rows(run_id=run_id, step="tier")
        if r["attempt"] == 1 and r["status"] in ("ok", "invalid") and "." not in r["batch_id"]
    ]


def _holding(size: int) -> ScriptedJudge:
    """A judge that answers batches of up to ``size`` passages, and no larger ones."""

    def answer(request: JudgeRequest) -> Any:
        fits = len(request.payload.passages) <= size  # type: ignore[attr-defined]
        return tier_reply(request) if fits else "too many passages for me"

    return ScriptedJudge([answer] * 100)


def test_additive_increase_multiplicative_decrease_between_5_and_the_asked_size() -> None:
    sizer = BatchSizer()
    assert sizer.current(10) == 10
    sizer.observe("held", 10)
    assert sizer.current(10) == 10  # never above what the job asked for
    sizer.observe("failed", 10)
    assert sizer.current(10) == 5
    sizer.observe("failed", 10)
    assert sizer.current(10) == 5  # the spec's smallest batch
    for expected in (6, 7, 8, 9):
        sizer.observe("held", 10)
        assert sizer.current(10) == expected
    sizer.observe(None, 10)  # a re-ask that worked says nothing
    assert sizer.current(10) == 9
    sizer.observe("held", 10)
    assert sizer.current(10) == 10 and sizer.size is None
    sizer.observe("failed", 15)
    assert sizer.current(15) == 7
    # a job that asks for fewer than 5 is never sent more
    small = BatchSizer()
    small.observe("failed", 3)
    assert small.current(3) == 3


def test_the_audit_log_rows_replay_as_whole_batches() -> None:
    rows = [
        {"batch_id": "r1-b000", "status": "split", "attempt": 3},
        {"batch_id": "r1-b000.1", "status": "ok", "attempt": 1},  # a part: the same batch
        {"batch_id": "r1-b000.2", "status": "fallback", "attempt": 2},
        {"batch_id": "r1-b001", "status": "ok", "attempt": 1},
        {"batch_id": "r1-b002", "status": "ok", "attempt": 2},  # after a re-ask: no signal
        {"batch_id": "r2-b000", "status": "fallback", "attempt": 3},
    ]
    assert replayed(rows) == ["failed", "held", "failed"]


def test_a_run_sends_smaller_batches_after_one_fails_and_grows_them_back(
    store: SqlStore,
) -> None:
    judge = _holding(6)
    result = evidex.tier(
        QUERY, PASSAGES, judge=judge, store=store, batch_size=10, settings=ONE_AT_A_TIME
    )
    # 10 fails (split: 5 + 5), then 5 holds, 6 holds, 7 fails (split: 4 + 3), then the last 2
    assert _sizes(store, result.run_id) == [10, 5, 6, 7, 2]
    assert {a.source for a in result.classifications} == {"judge"}
    assert [a.passage_id for a in result.classifications] == [p.passage_id for p in PASSAGES]
    [event] = [e for e in result.events if e.kind == "batch_size_adapted"]
    assert event.data == {"sizes": [10, 5, 6, 7, 2], "asked": 10}
    notes = [r for r in store.audit_rows(run_id=result.run_id) if r["step"] == "batch_size_adapted"]
    assert len(notes) == 1
    assert {"job": "tier", "judge": "scripted", "size": 2} in metrics().snapshot()["batch_size"]


def test_a_new_process_reads_the_size_back_from_the_audit_log(store: SqlStore) -> None:
    evidex.tier(
        QUERY, PASSAGES, judge=_holding(6), store=store, batch_size=10, settings=ONE_AT_A_TIME
    )
    # a judge instance never used in this process: its size comes from the audit log's rows
    # (failed, held, held, failed, held: 10 -> 5 -> 6 -> 7 -> 5 -> 6)
    fresh = _holding(6)
    second = evidex.tier(
        QUERY, PASSAGES, judge=fresh, store=store, batch_size=10, settings=ONE_AT_A_TIME
    )
    assert _sizes(store, second.run_id)[0] == 6
    # the same instance goes on from where its last run left it, in the process
    again = evidex.tier(
        QUERY, PASSAGES[:12], judge=fresh, store=store, batch_size=10, settings=ONE_AT_A_TIME
    )
    assert [e.kind for e in again.events].count("batch_size_adapted") == 1


def test_a_judge_that_holds_the_batch_keeps_the_asked_size(store: SqlStore) -> None:
    judge = ScriptedJudge([tier_reply] * 3)
    result = evidex.tier(
        QUERY, PASSAGES, judge=judge, store=store, batch_size=10, settings=ONE_AT_A_TIME
    )
    assert _sizes(store, result.run_id) == [10, 10, 10]
    assert not [e for e in result.events if e.kind == "batch_size_adapted"]


def test_adapting_can_be_turned_off(store: SqlStore) -> None:
    judge = _holding(6)
    settings = HarnessSettings(backoff_s=0.0, max_concurrency=1, adapt_batch_size=False)
    result = evidex.tier(
        QUERY, PASSAGES, judge=judge, store=store, batch_size=10, settings=settings
    )
    assert _sizes(store, result.run_id) == [10, 10, 10]
