"""Bounded fan-out: input order, the limit, progress, and what an exception stops."""

from __future__ import annotations

import asyncio

import pytest

from evidex.harness.fanout import bounded_map


def run_map(items: list[int], limit: int) -> dict[str, object]:
    running, peak, started, progress = 0, 0, [], []

    async def fn(index: int, item: int) -> int:
        nonlocal running, peak
        started.append(index)
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(0.001 * (item % 3))  # finish out of order
        running -= 1
        return item * 10

    async def go() -> list[int]:
        return await bounded_map(items, limit, fn, lambda d, t: progress.append((d, t)))

    results = asyncio.run(go())
    return {"results": results, "peak": peak, "started": started, "progress": progress}


def test_results_come_back_in_input_order_with_at_most_limit_running() -> None:
    seen = run_map(list(range(50)), 4)
    assert seen["results"] == [i * 10 for i in range(50)]
    assert seen["peak"] == 4
    assert seen["started"] == list(range(50))  # started in input order
    assert seen["progress"] == [(d, 50) for d in range(1, 51)]


@pytest.mark.parametrize(("n", "limit", "peak"), [(3, 64, 3), (5, 0, 1), (0, 4, 0)])
def test_the_limit_is_at_least_one_and_at_most_the_items(n: int, limit: int, peak: int) -> None:
    seen = run_map(list(range(n)), limit)
    assert seen["results"] == [i * 10 for i in range(n)]
    assert seen["peak"] == peak


def test_the_first_exception_propagates_and_no_item_starts_after_it() -> None:
    started: list[int] = []

    async def fn(index: int, item: int) -> int:
        started.append(index)
        await asyncio.sleep(0)
        if index == 2:
            raise ValueError("stop")
        await asyncio.sleep(0.01)
        return item

    with pytest.raises(ValueError, match="stop"):
        asyncio.run(bounded_map(list(range(40)), 2, fn))
    assert max(started) <= 3  # the other worker finishes what it holds and takes at most one
