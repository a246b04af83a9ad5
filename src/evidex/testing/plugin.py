"""The pytest plugin of evidex, loaded through the ``pytest11`` entry point ``evidex``.

Options (each also an ini setting, e.g. in ``pyproject.toml``'s ``[tool.pytest.ini_options]``;
the command line wins):

- ``--evidex-judge SPEC`` every job's judge, ``--evidex-judge JOB=SPEC`` one job's (repeat
  it); a job left out gets its configured default (``local:minilm`` for tier and rerank).
  Ini: ``evidex_judge``, one value a line.
- ``--evidex-db URL_OR_FILE`` the store: audit log, review queue and the content-addressed
  cache, so a rerun of an unchanged test makes no judge call. Default: ``EVIDEX_DB``, else the
  user data dir. Ini: ``evidex_db``.
- ``--evidex-no-cache`` judge afresh: the cache is not read (still written).

The ``evidex`` fixture is an :class:`~evidex.testing.Evidex` over the run's judges and store.
At the end, a run that made checks prints one line: how many, how many failed, the judge calls
made, the checks answered from the cache, and the fallbacks.

Loading this module costs nothing a suite that does not use evidex would notice: it imports
pytest and :mod:`evidex.testing._session` (the standard library alone); the jobs, judges and
the store are imported by the first assertion.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from evidex.testing._session import Session, Settings, parse_judges, pop, push, store_url

__all__ = ["evidex"]


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("evidex", "evidex: grounding, relevance and sufficiency assertions")
    group.addoption(
        "--evidex-judge",
        action="append",
        default=[],
        metavar="[JOB=]SPEC",
        help="Judge of every job (SPEC, e.g. openai:gpt-4o-mini) or of one (tier=local:minilm); "
        "repeatable. Default: each job's configured judge.",
    )
    group.addoption(
        "--evidex-db",
        default=None,
        metavar="URL_OR_FILE",
        help="Store of the audit log and the cache that makes reruns free (sqlite:///FILE, a "
        "file path, or postgresql://...). Default: EVIDEX_DB, else the user data dir.",
    )
    group.addoption(
        "--evidex-no-cache",
        action="store_true",
        default=False,
        help="Judge afresh: do not read the cache (answers are still written to it).",
    )
    parser.addini("evidex_judge", "Judges, [JOB=]SPEC one a line (--evidex-judge).", "linelist")
    parser.addini("evidex_db", "Store URL or file (--evidex-db).")


def pytest_configure(config: pytest.Config) -> None:
    given = config.getoption("evidex_judge") or config.getini("evidex_judge")
    judges = parse_judges(given)
    scoped = sorted(job for job in judges if job)
    if scoped:  # only then pay for reading the registry
        from evidex.jobs import job_names

        unknown = [job for job in scoped if job not in job_names()]
        if unknown:
            raise pytest.UsageError(
                f"--evidex-judge names unknown job(s) {unknown}; jobs: {', '.join(job_names())}"
            )
    db = config.getoption("evidex_db") or config.getini("evidex_db") or None
    settings = Settings(
        judges=judges,
        db=store_url(str(db)) if db else None,
        use_cache=not config.getoption("evidex_no_cache"),
    )
    session = Session(settings)
    config.stash[_SESSION] = session
    push(session)


def pytest_unconfigure(config: pytest.Config) -> None:
    if _SESSION in config.stash:
        pop()


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    session = config.stash.get(_SESSION, None)
    if session is not None and session.tally.checks:
        terminalreporter.write_line(session.tally.line(session.settings, session.store_url))


@pytest.fixture
def evidex(request: pytest.FixtureRequest) -> Iterator[Any]:
    """The run's jobs and assertions, with the judges and store of its options."""
    from evidex.testing._fixture import Evidex

    yield Evidex(request.config.stash[_SESSION])


_SESSION = pytest.StashKey[Session]()
