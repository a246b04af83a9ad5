"""A per-judge circuit breaker: after repeated transport failures, fail fast for a while.

States: closed (calls pass) → open after ``threshold`` consecutive failures (calls are refused
for ``cooldown_s``) → half-open (one trial call; success closes, failure re-opens).
Validation failures do not count: the judge answered, it just answered badly.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = ["CircuitBreaker"]


@dataclass
class CircuitBreaker:
    threshold: int = 5
    cooldown_s: float = 30.0
    clock: Callable[[], float] = time.monotonic
    failures: int = 0
    opened_at: float | None = field(default=None)
    _trial_out: bool = False

    @property
    def state(self) -> str:
        if self.opened_at is None:
            return "closed"
        if self.clock() - self.opened_at >= self.cooldown_s:
            return "half-open"
        return "open"

    def allow(self) -> bool:
        state = self.state
        if state == "closed":
            return True
        if state == "half-open" and not self._trial_out:
            self._trial_out = True
            return True
        return False

    def record_success(self) -> None:
        self.failures = 0
        self.opened_at = None
        self._trial_out = False

    def record_failure(self) -> None:
        self.failures += 1
        if self.state == "half-open" or self.failures >= self.threshold:
            self.opened_at = self.clock()
            self._trial_out = False
