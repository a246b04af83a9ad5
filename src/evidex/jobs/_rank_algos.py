"""Ranking algorithms used by the rerank strategies, free of judges and I/O.

- :func:`kendall_tau_distance`: how far a reranking moved away from the retrieval order.
- :func:`tournament_top_k`: the ``pairwise`` strategy's sort. A knockout tournament finds the
  best item in n-1 comparisons; each next best is found by replaying only the matches on the
  previous winner's path (about log2 n each). The top-k of n therefore costs roughly
  n - 1 + (k - 1)·log2(n) comparisons instead of the n(n-1)/2 of comparing all pairs, and the
  matches of one round run concurrently.
- :func:`next_window_start`: the listwise windows, from the bottom of the list to the top, each
  of the size the judge holds when it is cut.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Hashable, Sequence
from typing import TypeVar

from evidex.harness.fanout import bounded_map

__all__ = ["kendall_tau_distance", "next_window_start", "tournament_top_k"]

T = TypeVar("T", bound=Hashable)


def kendall_tau_distance(before: Sequence[Hashable], after: Sequence[Hashable]) -> float:
    """The share of item pairs whose relative order differs between two rankings, in [0, 1].

    Only items present in both rankings count. 0 means the same order, 1 the reverse order;
    fewer than two shared items give 0.
    """
    position = {item: i for i, item in enumerate(after)}
    shared = [item for item in before if item in position]
    n = len(shared)
    if n < 2:
        return 0.0
    discordant = sum(
        1 for i in range(n) for j in range(i + 1, n) if position[shared[i]] > position[shared[j]]
    )
    return discordant / (n * (n - 1) / 2)


def next_window_start(start: int, n: int, size: int, window: int, step: int) -> int:
    """Where the next listwise window of ``size`` passages starts, over ``n`` passages: after
    the window at ``start`` (``n`` before the first), moved up by ``step`` as scaled from the
    asked ``window`` to ``size`` (at least 1), so consecutive windows overlap by the share the
    caller asked for. The bottom window is the first, the one at 0 the last."""
    moved = size if start == n else max(1, step * size // window)
    return max(0, start - moved)


async def tournament_top_k(
    items: Sequence[T],
    k: int,
    better: Callable[[T, T], Awaitable[T]],
    *,
    limit: int = 64,
) -> list[T]:
    """The ``k`` best of ``items``, best first, using the async comparator ``better(a, b)``
    (it returns the winner). Each distinct pair is compared at most once; at most ``limit``
    comparisons of a round run at once.

    Items are seeded in the order given (the retrieval order), so with a comparator that
    respects a total order the result does not depend on that order, and ties broken by the
    comparator stay deterministic.
    """
    n = len(items)
    k = max(0, min(k, n))
    if n == 0 or k == 0:
        return []
    size = 1
    while size < n:
        size *= 2
    tree: list[T | None] = [None] * (2 * size)
    for i, item in enumerate(items):
        tree[size + i] = item
    memo: dict[frozenset[T], T] = {}

    async def match(a: T | None, b: T | None) -> T | None:
        if a is None or b is None:
            return a if b is None else b
        key = frozenset((a, b))
        if key not in memo:
            memo[key] = await better(a, b)
        return memo[key]

    level = size // 2
    while level >= 1:  # build round by round; one round's matches run concurrently
        nodes = range(level, 2 * level)
        winners = await bounded_map(
            list(nodes), limit, lambda _, v: match(tree[2 * v], tree[2 * v + 1])
        )
        for v, w in zip(nodes, winners, strict=True):
            tree[v] = w
        level //= 2

    leaf = {item: size + i for i, item in enumerate(items)}
    top: list[T] = []
    while len(top) < k:
        champion = tree[1]
        if champion is None:
            break
        top.append(champion)
        v = leaf[champion]
        tree[v] = None
        v //= 2
        while v >= 1:  # replay the champion's path only
            tree[v] = await match(tree[2 * v], tree[2 * v + 1])
            v //= 2
    return top
