"""While a run is going the garbage collector is tuned for it (the heap that was there before
it frozen, young objects collected less often), and afterwards it is as it was: unfrozen and
its thresholds back, or left as the process set it."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Iterator

import pytest

import evidex
from evidex.harness.collector import YOUNG_THRESHOLD
from evidex.harness.runner import HarnessSettings
from evidex.judging import JudgeRequest
from evidex.store import SqlStore
from evidex.types import Passage
from tests.scripted import ScriptedJudge, tier_reply

PASSAGES = [
    Passage(passage_id=f"p{i}", text=f"Adults need about {i} units a day.") for i in range(6)
]


@pytest.fixture(autouse=True)
def unfrozen() -> Iterator[None]:
    gc.unfreeze()
    thresholds = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*thresholds)


def frozen_during(settings: HarnessSettings, store: SqlStore, runs: int = 1) -> list[int]:
    """gc.get_freeze_count() as each judge call saw it, over ``runs`` concurrent runs."""
    return [frozen for frozen, _ in collector_during(settings, store, runs)]


def collector_during(
    settings: HarnessSettings, store: SqlStore, runs: int = 1
) -> list[tuple[int, tuple[int, ...]]]:
    """The freeze count and the thresholds as each judge call saw them."""
    seen: list[tuple[int, tuple[int, ...]]] = []

    def reply(request: JudgeRequest) -> object:
        seen.append((gc.get_freeze_count(), gc.get_threshold()))
        return tier_reply(request)

    async def go() -> None:
        judge = ScriptedJudge([reply] * (2 * runs), delay_s=0.01)
        await asyncio.gather(
            *(
                evidex.atier(
                    "q", PASSAGES, judge=judge, store=store, batch_size=5, settings=settings
                )
                for _ in range(runs)
            )
        )

    asyncio.run(go())
    return seen


def test_the_older_heap_is_frozen_during_a_run_and_unfrozen_after(store: SqlStore) -> None:
    assert gc.get_freeze_count() == 0
    seen = frozen_during(HarnessSettings(backoff_s=0, use_cache=False), store)
    assert len(seen) == 2 and min(seen) > 1000  # the modules, the inputs, the judge
    assert gc.get_freeze_count() == 0


def test_overlapping_runs_freeze_once_and_unfreeze_when_the_last_ends(
    store: SqlStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[str] = []
    freeze, unfreeze = gc.freeze, gc.unfreeze
    monkeypatch.setattr(gc, "freeze", lambda: (calls.append("freeze"), freeze())[1])
    monkeypatch.setattr(gc, "unfreeze", lambda: (calls.append("unfreeze"), unfreeze())[1])
    seen = frozen_during(HarnessSettings(backoff_s=0, use_cache=False), store, runs=3)
    assert len(seen) == 6 and min(seen) > 1000  # every call of the three runs saw it frozen
    assert calls == ["freeze", "unfreeze"]
    assert gc.get_freeze_count() == 0


def test_tune_gc_false_leaves_the_collector_alone(store: SqlStore) -> None:
    gc.set_threshold(700, 10, 10)
    seen = collector_during(HarnessSettings(backoff_s=0, use_cache=False, tune_gc=False), store)
    assert seen == [(0, (700, 10, 10))] * 2


def test_a_heap_the_process_froze_itself_stays_frozen(
    store: SqlStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    gc.freeze()
    calls: list[str] = []
    monkeypatch.setattr(gc, "freeze", lambda: calls.append("freeze"))
    monkeypatch.setattr(gc, "unfreeze", lambda: calls.append("unfreeze"))
    seen = frozen_during(HarnessSettings(backoff_s=0, use_cache=False), store)
    assert len(seen) == 2 and min(seen) > 1000
    assert calls == []  # not frozen again, not unfrozen
    assert gc.get_freeze_count() > 1000


def test_young_objects_are_collected_less_often_during_a_run_and_as_before_after(
    store: SqlStore,
) -> None:
    gc.set_threshold(700, 11, 12)
    seen = collector_during(HarnessSettings(backoff_s=0, use_cache=False), store, runs=2)
    assert [thresholds for _, thresholds in seen] == [(YOUNG_THRESHOLD, 11, 12)] * 4
    assert gc.get_threshold() == (700, 11, 12)


def test_a_higher_threshold_of_the_process_is_kept(store: SqlStore) -> None:
    gc.set_threshold(2 * YOUNG_THRESHOLD, 10, 10)
    seen = collector_during(HarnessSettings(backoff_s=0, use_cache=False), store)
    assert [thresholds for _, thresholds in seen] == [(2 * YOUNG_THRESHOLD, 10, 10)] * 2
    assert gc.get_threshold() == (2 * YOUNG_THRESHOLD, 10, 10)


def test_thresholds_the_process_set_during_a_run_are_left_as_it_set_them(
    store: SqlStore,
) -> None:
    gc.set_threshold(700, 10, 10)

    def reply(request: JudgeRequest) -> object:
        gc.set_threshold(1234, 5, 5)
        return tier_reply(request)

    judge = ScriptedJudge([reply] * 2, delay_s=0.0)
    evidex.tier(
        "q",
        PASSAGES,
        judge=judge,
        store=store,
        batch_size=5,
        settings=HarnessSettings(backoff_s=0, use_cache=False),
    )
    assert gc.get_threshold() == (1234, 5, 5)


def test_a_process_that_turned_the_collector_off_is_left_as_it_is(store: SqlStore) -> None:
    gc.set_threshold(700, 10, 10)
    gc.disable()
    try:
        seen = collector_during(HarnessSettings(backoff_s=0, use_cache=False), store)
    finally:
        gc.enable()
    assert seen == [(0, (700, 10, 10))] * 2
