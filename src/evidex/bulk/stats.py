"""What a bulk run counts as it goes, engine-independent: the progress callback's argument and
the summary at the end."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from evidex.bulk.tasks import Processed
from evidex.types import Usage

__all__ = ["BulkProgress", "BulkStats"]


@dataclass
class BulkStats:
    """Counters of one run. ``total``: lines to run in this run (the input's lines less the
    results already in the output), for the progress bar; an estimate when the input has
    blank or bad lines."""

    output: Path
    errors_path: Path
    total: int = 0
    done: int = 0
    """Results written in this run."""
    skipped: int = 0
    """Tasks whose id was already in the output (done by an earlier run)."""
    errors: int = 0
    """Bad lines and refused tasks, each a line of the errors file."""
    fallbacks: int = 0
    """Results in which some judgment fell back (each has its review item)."""
    calls: int = 0
    attempts: int = 0
    usage: Usage = field(default_factory=Usage)
    """Tokens of every attempt of every judge call of this run."""
    cost: float = 0.0
    """The estimated cost of this run's results whose judge is priced (see ``unpriced``)."""
    unpriced: int = 0
    """Results without a cost: their judge is not in the price table."""
    truncated_bytes: int = 0
    """Bytes of a torn last line cut from the output on start."""
    started: float = field(default_factory=time.monotonic)
    finished: float | None = None

    @property
    def processed(self) -> int:
        """Lines handled in this run: results written and errors reported."""
        return self.done + self.errors

    @property
    def elapsed_s(self) -> float:
        return (self.finished or time.monotonic()) - self.started

    def record(self, item: Processed) -> None:
        if item.error is not None:
            self.errors += 1
            return
        self.done += 1
        self.fallbacks += item.fallback
        self.calls += item.calls
        self.attempts += item.attempts
        self.usage = self.usage + item.usage
        if item.cost is None:
            self.unpriced += 1
        else:
            self.cost += item.cost

    def summary(self) -> str:
        """One line: what this run did."""
        return (
            f"{self.done} done, {self.skipped} skipped as already done, {self.errors} errors, "
            f"{self.fallbacks} fallbacks; {self.calls} judge calls, {self.attempts} attempts, "
            f"tokens {self.usage.prompt_tokens}+{self.usage.completion_tokens}"
            f"{self._cost()}, {self.elapsed_s:.1f} s"
        )

    def _cost(self) -> str:
        """The estimated cost, when every result of the run was priced."""
        return f", est. cost {self.cost:.6f}" if self.done and not self.unpriced else ""


BulkProgress = Callable[[BulkStats], None]
"""``on_progress(stats)``: called after every line a run handles (and once at the start)."""
