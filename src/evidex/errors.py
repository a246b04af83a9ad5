"""The one exception tree of evidex.

Usage errors say the caller must change something; run-time errors say a judge or the store
misbehaved while the input was fine. Callers catch the branch they can act on::

    EvidexError
    ├── UsageError                    fix the call, the input or the configuration
    │   ├── InputError                bad passages, query, taxonomy ... (names file and line)
    │   ├── ConfigError               bad settings, tier file, options
    │   │   └── UnknownJudgeError     a judge spec that no backend claims
    │   └── MissingExtraError         an optional dependency is absent (carries the pip hint)
    └── RunError                      the input was fine, running it failed
        ├── JudgeError                a judge call failed
        │   ├── JudgeUnavailable      network, timeout, 429/5xx: worth another attempt
        │   │   └── CircuitOpenError  the breaker is open: fail fast, no call was made
        │   └── JudgeOutputInvalid    still invalid after every re-ask (carries the attempts)
        └── StoreError                the audit log / cache / review queue could not be written
            └── ReviewConflict        someone else got there first: resolved, or leased to another

Vendor exceptions are converted to this tree in one place per backend (``raise ... from exc``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

__all__ = [
    "AttemptRecord",
    "CircuitOpenError",
    "ConfigError",
    "EvidexError",
    "InputError",
    "JudgeError",
    "JudgeOutputInvalid",
    "JudgeUnavailable",
    "MissingExtraError",
    "ReviewConflict",
    "RunError",
    "StoreError",
    "UnknownJudgeError",
    "UsageError",
]


class EvidexError(Exception):
    """Base of every error evidex raises on purpose."""


class UsageError(EvidexError):
    """The caller has to change the call, the input or the configuration."""


class InputError(UsageError):
    """Bad input data. ``where`` names the file and line when there is one."""

    def __init__(self, message: str, *, where: str | None = None) -> None:
        self.where = where
        super().__init__(f"{where}: {message}" if where else message)


class ConfigError(UsageError):
    """Bad settings, option names or definition files."""


class UnknownJudgeError(ConfigError):
    """A judge spec string that no registered backend understands."""


class MissingExtraError(UsageError):
    """An optional dependency is not installed; the message says what to install."""

    def __init__(self, what: str, extra: str) -> None:
        self.extra = extra
        super().__init__(f"{what} needs the '{extra}' extra: pip install 'evidex[{extra}]'")


class RunError(EvidexError):
    """The input was fine; running it failed."""


class JudgeError(RunError):
    """A judge call failed."""


class JudgeUnavailable(JudgeError):
    """The judge could not answer (network, timeout, rate limit, server error).

    Counted by the circuit breaker, and worth another attempt.
    """

    def __init__(
        self, message: str, *, status: int | None = None, retry_after_s: float | None = None
    ) -> None:
        self.status = status
        self.retry_after_s: float | None = retry_after_s
        """How long the server asked us to wait (its ``Retry-After``), when it said."""
        super().__init__(message)


class CircuitOpenError(JudgeUnavailable):
    """The judge's circuit breaker is open; no call was made."""


@dataclass(frozen=True)
class AttemptRecord:
    """One judge exchange inside a validated call, kept for errors and the audit log."""

    attempt: int
    raw_output: str | None
    errors: tuple[str, ...] = field(default_factory=tuple)
    prompt_tokens: int = 0
    completion_tokens: int = 0


class JudgeOutputInvalid(JudgeError):
    """Every attempt failed; carries all of them, so nothing about the failure is lost."""

    def __init__(self, message: str, attempts: Sequence[AttemptRecord]) -> None:
        self.attempts = tuple(attempts)
        super().__init__(message)

    @property
    def last_raw_output(self) -> str | None:
        return self.attempts[-1].raw_output if self.attempts else None

    @property
    def errors(self) -> tuple[str, ...]:
        return self.attempts[-1].errors if self.attempts else ()


class StoreError(RunError):
    """The store (audit log, cache, review queue) failed."""


class ReviewConflict(StoreError):
    """A review item changed under the caller: another reviewer resolved it first, or holds its
    lease. Nothing was written; the service answers 409, the CLI exits 2."""
