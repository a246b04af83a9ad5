"""The *frontier* routing rule of a cascade: which passages the expensive judge sees, round by
round, when a budget is shared by every query of a run.

Why: a band on the cheap score does not carry over to new queries. Settling the upper grades
with an encoder loses most out of set, and a band open above sends a share of the pairs that
differs from one query set to another, because queries differ in how many of their pairs are
relevant and the encoder's scores do not say which queries those are. The expensive judge's
verdicts on the current queries do.

The rule, over one pool of queries (a run's):

1. each query's passages are ordered by the cheap score, highest first;
2. the first round sends the top ``start`` share of every query;
3. a query's *frontier* is its last ``step`` share sent (the lowest-scored passages the
   expensive judge has seen of it); its *yield* is the share of them the expensive judge found
   relevant (not in the lowest tier);
4. each later round sends the next ``step`` share of the ``width`` queries whose frontiers
   yield most (ties: the smaller key), and their frontiers move down; the rounds end when
   ``budget`` times the pool's passages have been sent, when no frontier yields anything, or
   when every passage has been sent;
5. every passage not sent is settled in the lowest tier: the cheap stage never settles an upper
   grade.

The budget holds by construction: never more than ``floor(budget x passages)`` are sent (those
sent outside the rule, which had no cheap score, are counted in it). ``width`` 1 is the rule as
measured (``bench/cascade_frontier.py``); a wider round costs fewer sequential rounds and, at 8,
some quality.

:class:`FrontierRounds` is the rule's state over one pool and is pure: it says which positions
to send and takes the verdicts back. The harness drives it over a run's inputs as their
verdicts arrive (:mod:`evidex.harness.frontier_pool`), and
:mod:`evidex.evaluate.cascade_frontier` over recorded verdicts; both therefore apply the same
code.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Hashable, Mapping, Sequence
from typing import Generic, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = ["FrontierRounds", "FrontierRule", "Stop"]

K = TypeVar("K", bound=Hashable)

Stop = Literal["budget spent", "no frontier yields", "every passage sent"]
"""Why the rounds of a pool ended."""


class FrontierRule(BaseModel):
    """The rule's settings: the share of a pool's passages the expensive judge may see
    (``budget``), the share of each query sent first (``start``), the share a query's frontier
    moves by (``step``) and how many queries move theirs in one round (``width``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    budget: float = Field(gt=0.0, le=1.0)
    start: float = Field(gt=0.0, le=1.0)
    step: float = Field(gt=0.0, le=1.0)
    width: int = Field(default=1, ge=1)

    @model_validator(mode="after")
    def _start_within_budget(self) -> FrontierRule:
        if self.start > self.budget:
            raise ValueError(
                f"need 0 < start <= budget <= 1 and 0 < step <= 1, got budget={self.budget}, "
                f"start={self.start}, step={self.step}"
            )
        return self

    def label(self) -> str:
        return (
            f"frontier (budget {self.budget:.0%}, start {self.start:g}, step {self.step:g}, "
            f"width {self.width})"
        )


class FrontierRounds(Generic[K]):
    """The frontier rule over one pool of queries: :meth:`first`, then :meth:`record` the
    verdicts of every query asked (or :meth:`drop` it) and ask :meth:`next`, until a round
    asks nothing.

    ``scores``: each query's cheap scores, by key (keys order the ties: smaller first).
    ``sent_outside``: passages of the pool sent to the expensive judge without the rule (the
    cheap stage could not score them), counted in the pool's passages and in its budget.
    """

    def __init__(
        self, rule: FrontierRule, scores: Mapping[K, Sequence[float]], *, sent_outside: int = 0
    ) -> None:
        self.rule = rule
        self.order = {q: _ranked(s) for q, s in scores.items()}
        self.passages = sum(len(s) for s in scores.values()) + sent_outside
        self.cap = math.floor(rule.budget * self.passages + 1e-9)
        """The most passages the pool may send, those sent outside the rule included."""
        self.total = sent_outside
        self.sent: dict[K, list[int]] = {q: [] for q in self.order}
        """Each query's positions sent and answered, in the order sent."""
        self.seen: dict[K, list[bool]] = {q: [] for q in self.order}
        """The verdicts on them, in the same order."""
        self.rounds = 0
        self.asked_in: dict[K, int] = dict.fromkeys(self.order, 0)
        """How many rounds asked about each query's passages."""
        self.stopped: Stop | None = None
        self._chunk = {q: max(1, math.ceil(rule.step * len(r))) for q, r in self.order.items()}
        self._asked: dict[K, list[int]] = {}
        self._dropped: set[K] = set()
        self._heap: list[tuple[float, K]] = []
        self._returning: list[K] | None = None
        """Queries to put back in line before the next round (None: the first round's,
        which puts every open query in line)."""

    def first(self) -> dict[K, list[int]]:
        """The first round: the top ``start`` share of every query (at least one passage of
        each, while the budget lasts)."""
        if self.rounds:
            raise ValueError("the first round was asked already")
        asked: dict[K, list[int]] = {}
        for q, ranked in self.order.items():
            k = max(
                0,
                min(
                    max(1, math.floor(self.rule.start * len(ranked) + 1e-9)),
                    len(ranked),
                    self.cap - self.total,
                ),
            )
            asked[q] = ranked[:k]
            self.total += k
        return self._ask(asked)

    def record(self, key: K, verdicts: Sequence[bool]) -> None:
        """The expensive judge's verdicts (relevant or not) on the positions last asked of
        ``key``, in the order asked."""
        asked = self._asked.pop(key)
        if len(verdicts) != len(asked):
            self._asked[key] = asked
            raise ValueError(f"{len(asked)} verdicts were asked of {key!r}, got {len(verdicts)}")
        self.sent[key] += asked
        self.seen[key] += list(verdicts)

    def drop(self, key: K) -> None:
        """A query that leaves the pool (its input failed): nothing more of it is asked, and
        what it was asked and never answered is not counted as sent."""
        self._dropped.add(key)
        self.total -= len(self._asked.pop(key, []))

    @property
    def waiting(self) -> frozenset[K]:
        """The queries asked in the current round whose verdicts are not recorded yet."""
        return frozenset(self._asked)

    def next(self) -> dict[K, list[int]]:
        """The next round, once every query asked in the last one was recorded (or dropped):
        the next ``step`` share of the ``width`` queries whose frontiers yield most. Empty when
        the rounds are over (:attr:`stopped` says why)."""
        if self._asked:
            raise ValueError(f"the round is not over: {len(self._asked)} queries unanswered")
        back = self.order if self._returning is None else self._returning
        for q in back:
            if self._open(q):
                heapq.heappush(self._heap, (-self.frontier_yield(q), q))
        self._returning = []
        asked: dict[K, list[int]] = {}
        while self._heap and self.total < self.cap and len(asked) < self.rule.width:
            negative, q = self._heap[0]
            if q in self._dropped:
                heapq.heappop(self._heap)
                continue
            if -negative <= 0.0:
                break
            heapq.heappop(self._heap)
            k = len(self.sent[q])
            asked[q] = self.order[q][k : k + min(self._chunk[q], self.cap - self.total)]
            self.total += len(asked[q])
        if not asked:
            self.stopped = self._why()
            return {}
        return self._ask(asked)

    def _ask(self, asked: dict[K, list[int]]) -> dict[K, list[int]]:
        """Hold a round's non-empty asks until their verdicts are recorded, and return them."""
        asked = {q: ps for q, ps in asked.items() if ps and q not in self._dropped}
        self._asked = {q: list(ps) for q, ps in asked.items()}
        for q in asked:
            self.asked_in[q] += 1
        self.rounds += 1
        if self._returning is not None:
            self._returning = list(asked)
        return asked

    def _open(self, q: K) -> bool:
        return q not in self._dropped and len(self.sent[q]) < len(self.order[q])

    def _why(self) -> Stop:
        if not any(self._open(q) for q in self.order):
            return "every passage sent"
        return "budget spent" if self.total >= self.cap else "no frontier yields"

    def frontier_yield(self, key: K) -> float:
        """The share of relevant verdicts among the last ``step`` share of ``key`` sent."""
        last = self.seen[key][-self._chunk[key] :]
        return sum(last) / len(last) if last else 0.0

    @property
    def share_sent(self) -> float:
        """The share of the pool's passages sent so far."""
        return self.total / self.passages if self.passages else 0.0


def _ranked(scores: Sequence[float]) -> list[int]:
    """Positions by score, highest first (ties: the earlier first)."""
    return sorted(range(len(scores)), key=lambda i: (-scores[i], i))
