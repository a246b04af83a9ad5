"""Ranking algorithms of the rerank job, on hand examples: Kendall tau distance, the pairwise
tournament (exactness, comparison counts, order independence) and the listwise windows."""

from __future__ import annotations

import asyncio
import itertools
import random

import pytest

from evidex.jobs._rank_algos import kendall_tau_distance, next_window_start, tournament_top_k
from evidex.tasks.rerank import justification_flag


@pytest.mark.parametrize(
    ("before", "after", "expected"),
    [
        (["a", "b", "c"], ["a", "b", "c"], 0.0),
        (["a", "b", "c"], ["c", "b", "a"], 1.0),
        # one adjacent swap: 1 discordant pair of 3
        (["a", "b", "c"], ["b", "a", "c"], 1 / 3),
        # a b c d → b d a c: discordant (a,b) (a,d) (c,d) = 3 of 6
        (["a", "b", "c", "d"], ["b", "d", "a", "c"], 3 / 6),
        # items missing from one side do not count: shared a, c in the same order
        (["a", "b", "c"], ["a", "x", "c"], 0.0),
        (["a"], ["a"], 0.0),
        ([], [], 0.0),
    ],
)
def test_kendall_tau_distance_by_hand(before: list[str], after: list[str], expected: float) -> None:
    assert kendall_tau_distance(before, after) == pytest.approx(expected)


def test_kendall_tau_distance_matches_brute_force() -> None:
    items = list("abcdef")
    for perm in itertools.islice(itertools.permutations(items), 0, 720, 37):
        pos = {x: i for i, x in enumerate(perm)}
        pairs = list(itertools.combinations(items, 2))
        brute = sum(pos[x] > pos[y] for x, y in pairs) / len(pairs)
        assert kendall_tau_distance(items, list(perm)) == pytest.approx(brute)


def _top_k(items: list[int], k: int, value: dict[int, float]) -> tuple[list[int], int]:
    calls: list[tuple[int, int]] = []

    async def better(a: int, b: int) -> int:
        calls.append((a, b))
        return a if value[a] > value[b] else b

    return asyncio.run(tournament_top_k(items, k, better)), len(calls)


@pytest.mark.parametrize(("n", "k"), [(1, 1), (2, 1), (5, 3), (7, 7), (30, 10), (100, 10)])
def test_tournament_top_k_is_exact_and_cheap(n: int, k: int) -> None:
    rng = random.Random(n * 31 + k)
    value = {i: rng.random() for i in range(n)}
    top, comparisons = _top_k(list(range(n)), k, value)
    assert top == sorted(value, key=lambda i: -value[i])[:k]
    bound = max(0, n - 1) + (k - 1) * max(1, (n - 1).bit_length())
    assert comparisons <= bound
    if n >= 30:
        assert comparisons <= 0.2 * n * (n - 1) / 2


def test_tournament_does_not_depend_on_input_order() -> None:
    rng = random.Random(5)
    value = {i: rng.random() for i in range(20)}
    expected = sorted(value, key=lambda i: -value[i])[:6]
    for seed in range(5):
        items = list(value)
        random.Random(seed).shuffle(items)
        assert _top_k(items, 6, value)[0] == expected


def test_tournament_compares_each_pair_at_most_once() -> None:
    seen: list[frozenset[int]] = []

    async def better(a: int, b: int) -> int:
        seen.append(frozenset((a, b)))
        return min(a, b)

    assert asyncio.run(tournament_top_k(list(range(16)), 16, better)) == list(range(16))
    assert len(seen) == len(set(seen))


def _starts(n: int, sizes: list[int], window: int, step: int) -> list[int]:
    """The window starts over ``n`` passages when the judge holds ``sizes`` in turn."""
    starts, start = [], n
    for size in sizes:
        start = next_window_start(start, n, size, window, step)
        starts.append(start)
        if start == 0:
            return starts
    raise AssertionError("the windows never reached the top")


def test_window_starts() -> None:
    assert _starts(7, [4] * 9, 4, 2) == [3, 1, 0]
    assert _starts(30, [20] * 9, 20, 10) == [10, 0]
    assert _starts(100, [20] * 20, 20, 10) == [80, 70, 60, 50, 40, 30, 20, 10, 0]
    assert _starts(5, [20], 20, 10) == [0]


def test_smaller_windows_move_up_by_the_same_share_and_still_overlap() -> None:
    # halved to 10 after the first window: half a window up each time, as asked of 20
    assert _starts(40, [20, 10, 10, 10, 11, 12], 20, 10) == [20, 15, 10, 5, 0]
    assert next_window_start(3, 40, 1, 20, 10) == 2  # a window of one still moves


@pytest.mark.parametrize(
    ("justification", "flag"),
    [
        ("", "empty"),
        ("   ", "empty"),
        ("This passage is the most relevant to the query.", "generic"),
        ("It gives the adult dose of 600 IU.", None),
        ("Mentions sunlight and skin.", None),
    ],
)
def test_justification_flag_heuristic(justification: str, flag: str | None) -> None:
    text = "Vitamin D is made in the skin by sunlight; adults need 600 IU a day."
    assert justification_flag(justification, text) == flag
