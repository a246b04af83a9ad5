"""What the assertions of a test run share: the judge of each job, the store, cache use, and the
tally the plugin prints at the end.

The pytest plugin opens a :class:`Session` from its options when the run is configured and
closes it when the run ends (a run inside a run, as pytest's own ``pytester`` makes, stacks
its session over the outer one). Outside pytest the assertions use a session with the jobs'
defaults. Nothing here imports a job, a judge or the store before the first assertion runs:
the plugin is loaded by every pytest run of an environment where evidex is installed.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["Session", "Settings", "Tally", "current", "parse_judges", "pop", "push"]

ALL_JOBS = ""
"""The key of a judge spec given for every job (``--evidex-judge SPEC``)."""
_JOB_SCOPED = re.compile(r"^([a-z][a-z_]*)=(.+)$")


def parse_judges(values: Iterable[str]) -> dict[str, str]:
    """``--evidex-judge`` values as ``{job: spec}``: ``SPEC`` is every job's judge (key
    :data:`ALL_JOBS`), ``JOB=SPEC`` one job's; a later value wins. A judge spec holds a colon
    before any ``=`` (``local:minilm?bm25_weight=0.3``), so the two forms never read alike."""
    judges: dict[str, str] = {}
    for value in values:
        value = value.strip()
        scoped = _JOB_SCOPED.match(value)
        if scoped:
            judges[scoped.group(1)] = scoped.group(2).strip()
        elif value:
            judges[ALL_JOBS] = value
    return judges


def store_url(db: str) -> str:
    """A store URL from ``--evidex-db``: a URL as given, a file path as SQLite (absolute, so a
    test that changes directory keeps the same store)."""
    return db if "://" in db else f"sqlite:///{Path(db).expanduser().resolve()}"


@dataclass(frozen=True)
class Settings:
    """The options of a test run: each job's judge spec (:func:`parse_judges`; a job not
    named gets its configured default), the store URL (None: the default store, ``EVIDEX_DB``
    or the user data dir) and whether the cache is read."""

    judges: Mapping[str, str] = field(default_factory=dict)
    db: str | None = None
    use_cache: bool = True

    def judge_spec(self, job: str) -> str | None:
        return self.judges.get(job) or self.judges.get(ALL_JOBS)


@dataclass
class Tally:
    """What the run's assertions did, for the summary line."""

    checks: int = 0
    failed: int = 0
    judge_calls: int = 0
    from_cache: int = 0
    """Checks answered without a judge call: every judgment came from the cache."""
    fallbacks: int = 0
    """Checks whose result holds a fallback (each is a failure)."""

    def line(self, settings: Settings, store: str | None) -> str:
        judges = ", ".join(
            f"{job or 'all jobs'}={spec}" for job, spec in sorted(settings.judges.items())
        )
        return (
            f"evidex: {self.checks} check{'s' * (self.checks != 1)} ({self.failed} failed), "
            f"{self.judge_calls} judge call{'s' * (self.judge_calls != 1)}, "
            f"{self.from_cache} answered from the cache, {self.fallbacks} fell back; "
            f"judges: {judges or 'each job its default'}; store: {store or 'the default'}"
            + ("" if settings.use_cache else "; cache not read")
        )


class Session:
    """The judges, store and settings of one test run, built on first use."""

    def __init__(self, settings: Settings | None = None) -> None:
        self.settings = settings or Settings()
        self.tally = Tally()
        self._judges: dict[str, Any] = {}
        self._store: Any = None

    def judge(self, job: str) -> Any:
        """The judge of ``job``: built once per run from its spec (the model of an embedded
        judge is loaded once, not once per test)."""
        if job not in self._judges:
            from evidex.jobs import resolve_judge

            self._judges[job] = resolve_judge(self.settings.judge_spec(job), job)
        return self._judges[job]

    def store(self) -> Any:
        """The run's store, opened on first use and closed by :meth:`close`."""
        if self._store is None:
            from evidex.jobs import resolve_store

            self._store = resolve_store(self.settings.db)
        return self._store

    @property
    def store_url(self) -> str | None:
        return None if self._store is None else str(getattr(self._store, "url", self._store))

    def keywords(self, job: str, options: Mapping[str, Any]) -> dict[str, Any]:
        """The keywords of one job call: the caller's ``options``, and the run's judge, store
        and cache setting for what they leave out."""
        out = dict(options)
        if out.get("judge") is None:
            out["judge"] = self.judge(job)
        if out.get("store") is None:
            out["store"] = self.store()
        if out.get("settings") is None and not self.settings.use_cache:
            from evidex.harness.runner import HarnessSettings

            out["settings"] = HarnessSettings(use_cache=False)
        return out

    def count(self, result: Any, *, failed: bool, fell_back: bool) -> None:
        """Add one check and its result to the tally."""
        calls = int(getattr(result, "judge_calls", 0) or 0)
        self.tally.checks += 1
        self.tally.failed += failed
        self.tally.judge_calls += calls
        self.tally.from_cache += calls == 0 and not fell_back
        self.tally.fallbacks += fell_back

    def close(self) -> None:
        if self._store is not None and hasattr(self._store, "close"):
            self._store.close()
        self._store = None


_STACK: list[Session] = []


def push(session: Session) -> None:
    """Make ``session`` the current one (the plugin, when a run is configured)."""
    _STACK.append(session)


def pop() -> Session | None:
    """End the current session (the plugin, when a run ends) and close what it opened."""
    if not _STACK:
        return None
    session = _STACK.pop()
    session.close()
    return session


def current() -> Session:
    """The session of the running tests; outside pytest, one with the jobs' defaults."""
    if not _STACK:
        push(Session())
    return _STACK[-1]
