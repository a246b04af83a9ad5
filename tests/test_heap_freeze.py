"""While a run is going the heap that was there before it is frozen for the garbage collector,
and afterwards it is as it was: unfrozen, or frozen by the process itself and left so."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Iterator

import pytest

import evidex
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
    yield
    gc.unfreeze()


def frozen_during(settings: HarnessSettings, store: SqlStore, runs: int = 1) -> list[int]:
    """gc.get_freeze_count() as each judge call saw it, over ``runs`` concurrent runs."""
    seen: list[int] = []

    def reply(request: JudgeRequest) -> object:
        seen.append(gc.get_freeze_count())
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


def test_freeze_heap_false_leaves_the_collector_alone(store: SqlStore) -> None:
    seen = frozen_during(HarnessSettings(backoff_s=0, use_cache=False, freeze_heap=False), store)
    assert seen == [0, 0]


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
