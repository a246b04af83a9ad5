"""The batch size a judge can hold, learnt from how its replies went.

A small or busy model that cannot answer a batch of ten whole gets every batch split
(:mod:`evidex.harness._split`): correct, but each split costs the failed attempts first. So
the harness keeps, per judge, step and prompt version, a batch size that follows the replies:
additive increase, multiplicative decrease, as TCP's congestion window does. A batch whose
first reply validated adds one; a batch that had to be split or fell back halves the size;
a batch that needed a re-ask leaves it. The size stays between the spec's lower bound (5, or
the job's own size when smaller) and the size the job asked for, which is never exceeded.

Within a process the state lives beside the judge's in-flight gate, so every run and request
on one judge instance shares it, and a run forms each batch when it is sent (see
:meth:`~evidex.harness.job.JobRun.map_sized`, and :meth:`~evidex.harness.job.JobRun.sized`
for batches that follow one another, as rerank's listwise windows do), so a run of many
batches adapts as it goes.
Across runs it is read back from the audit log: the first use in a process replays the
newest batch outcomes of that judge, step and prompt version (:func:`replayed`).
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from evidex.harness.outcome import Outcome
from evidex.types import Event

__all__ = ["SPEC_FLOOR", "BatchSizer", "Signal", "Sized", "replayed", "signal_of", "sizer_for"]

SPEC_FLOOR = 5
"""The smallest batch the spec names for tier (5–15 passages per call)."""
HISTORY = 50
"""Batch outcomes read back from the audit log when a process first uses a judge."""

Signal = Literal["held", "failed"]


@dataclass
class BatchSizer:
    """The AIMD state of one judge, step and prompt version (see the module docstring)."""

    size: float | None = None
    """The learnt size; None until a batch failed (then the job's own size holds)."""
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def current(self, ceiling: int) -> int:
        """The size for the next batch of a job that asks for ``ceiling``."""
        with self._lock:
            if self.size is None:
                return ceiling
            return max(min(SPEC_FLOOR, ceiling), min(ceiling, int(self.size)))

    def observe(self, signal: Signal | None, ceiling: int) -> None:
        with self._lock:
            if signal is None:
                return
            now = float(ceiling) if self.size is None else min(float(ceiling), self.size)
            if signal == "failed":
                self.size = max(float(min(SPEC_FLOOR, ceiling)), now / 2)
            elif self.size is not None:
                self.size = now + 1
                if self.size >= ceiling:
                    self.size = None  # back where the job asked to be

    def replay(self, signals: Iterable[Signal], ceiling: int) -> None:
        for s in signals:
            self.observe(s, ceiling)


@dataclass
class Sized:
    """One run's batches of a step, each of the size the judge holds when it is cut: the sizes
    sent, the outcomes told to the sizer (when sizes adapt), and the event that says when the
    batches were smaller than asked."""

    sizer: BatchSizer
    ceiling: int
    adapt: bool
    sizes: list[int] = field(default_factory=list)

    def next(self) -> int:
        """The size of the next batch."""
        return self.sizer.current(self.ceiling) if self.adapt else self.ceiling

    def sent(self, size: int) -> None:
        self.sizes.append(size)

    def observe(self, outcome: Outcome[Any]) -> None:
        if self.adapt:
            self.sizer.observe(signal_of(outcome), self.ceiling)

    def event(self, judge_id: str, items: int) -> Event | None:
        """A ``batch_size_adapted`` event when a batch but the last was smaller than asked (or
        than the ``items`` there were), else None."""
        sizes = self.sizes
        if not any(n < min(self.ceiling, items) for n in sizes[:-1] or sizes):
            return None
        return Event(
            kind="batch_size_adapted",
            detail=(
                f"{judge_id} was sent batches of {', '.join(map(str, sizes))} (asked: "
                f"{self.ceiling}): its recent replies to batches of this size failed "
                "validation, and the size grows back as they validate"
            ),
            data={"sizes": sizes, "asked": self.ceiling},
        )


def signal_of(outcome: Outcome[Any]) -> Signal | None:
    """What one batch's outcome says of the size: ``failed`` when it was split or fell back,
    ``held`` when its first reply validated, None otherwise (a cache hit, a re-ask that
    worked)."""
    if outcome.source == "fallback" or any(e.kind == "batch_split" for e in outcome.events):
        return "failed"
    if outcome.source == "judge" and len(outcome.attempts) == 1:
        return "held"
    return None


def replayed(rows: Sequence[Mapping[str, Any]]) -> list[Signal]:
    """The signals of audit-log rows (oldest first) of one judge, step and prompt version:
    a whole batch's ``split`` or ``fallback`` row is a failure, its ``ok`` row at the first
    attempt a success; the rows of split parts (batch ids ending ``.N``) are the same batch's
    and say nothing more."""
    found: list[Signal] = []
    for row in rows:
        batch_id = str(row.get("batch_id") or "")
        if "." in batch_id.rpartition("-b")[2]:
            continue
        status = row.get("status")
        if status in ("split", "fallback"):
            found.append("failed")
        elif status == "ok" and row.get("attempt") == 1:
            found.append("held")
    return found


_SIZERS: weakref.WeakKeyDictionary[Any, dict[tuple[str, str], BatchSizer]] = (
    weakref.WeakKeyDictionary()
)
_REGISTRY_LOCK = threading.Lock()


def sizer_for(
    judge: Any, step: str, prompt_version: str, history: Callable[[], list[Signal]], ceiling: int
) -> BatchSizer:
    """The sizer of ``judge`` (an instance) for a step and prompt version; made on first use
    in the process and seeded by ``history`` (the audit log's signals, oldest first)."""
    with _REGISTRY_LOCK:
        per_judge = _SIZERS.setdefault(judge, {})
        sizer = per_judge.get((step, prompt_version))
        if sizer is not None:
            return sizer
        sizer = per_judge[(step, prompt_version)] = BatchSizer()
    sizer.replay(history(), ceiling)
    return sizer
