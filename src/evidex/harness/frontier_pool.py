"""The frontier rule's rounds shared by the queries of one run, as their verdicts arrive.

Why: the rule was fitted and measured with one budget spent over a run's queries
(:mod:`evidex.evaluate.cascade_frontier`), where a query the expensive judge keeps finding
relevant takes what a query with nothing relevant leaves. Run over each query alone, the same
rule spends less on the second and cannot give it to the first, and measured that way it lost
more against the LLM alone (``docs/benchmarks.md``, the frontier section's *per query* rows).

A run of many inputs (:meth:`Harness.run_many`) opens one pool for the inputs it runs
together. Each input's tier run scores its passages with the cheap stage and :meth:`join`\\ s;
once every member has joined (or left), :class:`~evidex.frontier.FrontierRounds` asks its first
round, and each member grades what it is :meth:`asked` and :meth:`record`\\ s the verdicts. A
round is asked when the last member of the one before has answered. A member that fails
:meth:`leave`\\ s: it is dropped, and its unanswered passages are not counted as sent, so the
others never wait for it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from evidex.frontier import FrontierRounds, FrontierRule, Stop

__all__ = ["FrontierPool", "run_pooled"]

P = TypeVar("P")
R = TypeVar("R")


class FrontierPool:
    """One frontier rule's rounds over ``members`` inputs of a run, keyed by input index."""

    def __init__(self, rule: FrontierRule, members: int) -> None:
        self.rule = rule
        self._expected = members
        self._scores: dict[int, list[float]] = {}
        self._outside: dict[int, int] = {}
        self._mail: dict[int, asyncio.Queue[list[int] | None]] = {}
        self._gone: set[int] = set()
        self._rounds: FrontierRounds[int] | None = None

    @property
    def members(self) -> int:
        """The inputs that share the budget (those that left before the start excluded)."""
        return len(self._scores) if self._rounds is not None else self._expected

    def join(self, key: int, scores: Sequence[float], sent_outside: int = 0) -> None:
        """A member's cheap scores, in its passages' order, and how many of its passages it
        sent outside the rule (the cheap stage could not score them): they count in the
        budget."""
        if self._rounds is not None or key in self._scores:
            raise ValueError(f"input {key} joined the frontier pool twice, or after its start")
        self._scores[key] = list(scores)
        self._outside[key] = sent_outside
        self._mail[key] = asyncio.Queue()
        self._start_when_all_joined()

    async def asked(self, key: int) -> list[int] | None:
        """The positions of ``key``'s passages the expensive judge grades next; None when the
        rounds are over for it."""
        return await self._mail[key].get()

    def record(self, key: int, verdicts: Sequence[bool]) -> None:
        """The expensive judge's verdicts (relevant or not) on what ``key`` was last asked."""
        assert self._rounds is not None  # asked() gave the positions: the rounds started
        self._rounds.record(key, verdicts)
        self._advance()

    def leave(self, key: int) -> None:
        """A member that is finished or failed; the rounds go on without it. Idempotent."""
        if key in self._gone:
            return
        self._gone.add(key)
        if self._rounds is None:
            if key in self._scores:
                del self._scores[key], self._outside[key]
            self._expected -= 1
            self._start_when_all_joined()
        elif self._rounds.stopped is None:
            self._rounds.drop(key)
            self._advance()

    def sent(self, key: int) -> list[int]:
        """The positions of ``key``'s passages sent and answered, in the order sent."""
        assert self._rounds is not None
        return self._rounds.sent[key]

    def rounds_of(self, key: int) -> int:
        """How many rounds asked about ``key``'s passages."""
        assert self._rounds is not None
        return self._rounds.asked_in[key]

    @property
    def stopped(self) -> Stop | None:
        return self._rounds.stopped if self._rounds is not None else None

    def _start_when_all_joined(self) -> None:
        if self._rounds is not None or len(self._scores) < self._expected or not self._scores:
            return
        self._rounds = FrontierRounds(
            self.rule, self._scores, sent_outside=sum(self._outside.values())
        )
        self._send(self._rounds.first())
        if not self._rounds.waiting:  # the first round asked nothing (no budget): over
            self._advance()

    def _advance(self) -> None:
        rounds = self._rounds
        if rounds is None or rounds.waiting or rounds.stopped is not None:
            return
        asked = rounds.next()
        if asked:
            self._send(asked)
            return
        for mailbox in self._mail.values():
            mailbox.put_nowait(None)

    def _send(self, asked: dict[int, list[int]]) -> None:
        for key, positions in asked.items():
            self._mail[key].put_nowait(positions)


async def run_pooled(
    plans: Sequence[P],
    on_progress: Callable[[int, int], None] | None,
    rule: FrontierRule,
    limit: int,
    run_one: Callable[[P, Any, tuple[FrontierPool, int]], Awaitable[R]],
) -> list[R]:
    """The inputs in pools of ``limit``, each pool's inputs run at once and sharing one
    frontier budget (its rounds wait for every member's verdicts, so a pool's members cannot
    wait for a slot behind each other); ``run_one(plan, progress, pool)`` runs one. The first
    failure cancels the pool's other inputs and propagates, as a bounded run stops."""
    results: list[R] = []
    done = 0

    def counted(task: asyncio.Future[R]) -> None:
        nonlocal done
        if task.cancelled() or task.exception() is not None:
            return
        done += 1
        if on_progress is not None:
            on_progress(done, len(plans))

    for first in range(0, len(plans), limit):
        chunk = plans[first : first + limit]
        pool = FrontierPool(rule, len(chunk))

        async def member(key: int, plan: P, pool: FrontierPool = pool) -> R:
            try:
                return await run_one(plan, None, (pool, key))
            finally:
                pool.leave(key)

        tasks = [asyncio.ensure_future(member(k, p)) for k, p in enumerate(chunk)]
        for task in tasks:
            task.add_done_callback(counted)
        try:
            results += await asyncio.gather(*tasks)
        except BaseException:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise
    return results
