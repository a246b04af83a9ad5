"""The judge of a command from its flags: ``--judge``, ``--base-url`` (repeatable) and
``--judge-option``, one rule for every command (the job commands, bulk, eval and the demo)."""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from evidex.config import load_settings
from evidex.errors import ConfigError
from evidex.jobs import resolve_judge, run_sync
from evidex.judging import Judge

__all__ = [
    "BaseUrls",
    "endpoint_options",
    "job_judge",
    "judge_options",
    "make_judge",
    "takes_base_url",
]

logger = logging.getLogger("evidex.cli")


def judge_options(pairs: Sequence[str] | None) -> dict[str, str]:
    """``--judge-option KEY=VALUE`` pairs as a mapping (the backend validates and converts)."""
    options = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--judge-option must be KEY=VALUE, got {pair!r}")
        options[key.strip()] = value.strip()
    return options


BaseUrls = str | Sequence[str] | None
"""``--base-url``: one server, several (a pool), or none (the configured ones)."""


def endpoint_options(base_url: BaseUrls) -> dict[str, Any]:
    """``--base-url`` as judge options: ``base_url`` for one server, ``base_urls`` for more."""
    urls = [base_url] if isinstance(base_url, str) else list(base_url or [])
    urls = [u.strip() for u in urls if u and u.strip()]
    if not urls:
        return {}
    return {"base_url": urls[0]} if len(urls) == 1 else {"base_urls": urls}


def takes_base_url(spec: str) -> bool:
    """Whether ``--base-url`` reaches a judge of ``spec``: an ``openai:`` judge, or a cascade
    with an ``openai:`` stage (the cascade routes it there)."""
    spec = spec.strip()
    return spec.startswith("openai:") or (spec.startswith("cascade:") and "openai:" in spec)


def make_judge(
    spec: str | None,
    job: str,
    base_url: BaseUrls = None,
    option_pairs: Sequence[str] | None = None,
) -> Judge:
    """The judge for ``job`` from ``--judge``, ``--base-url`` (repeatable) and
    ``--judge-option`` (without ``--judge``: the configured judge of the job, else its default).

    ``--base-url`` only makes sense for a remote API; given with another judge it is refused
    rather than ignored, so a typo in ``--judge`` cannot silently run a different backend.
    """
    spec = (spec or load_settings().judges[job]).strip()
    options: dict[str, Any] = dict(judge_options(option_pairs))
    endpoints = endpoint_options(base_url)
    if endpoints:
        if not takes_base_url(spec):
            raise ConfigError(f"--base-url applies to openai: judges only, not to {spec!r}")
        options.update(endpoints)
    judge = resolve_judge(spec, job, **options)
    logger.info("judge %s (model %s)", judge.judge_id, judge.model_version)
    for url in endpoints.get("base_urls") or ([endpoints["base_url"]] if endpoints else []):
        logger.info("judge endpoint %s", url)
    return judge


@contextmanager
def job_judge(
    spec: str | None,
    job: str,
    base_url: BaseUrls = None,
    option_pairs: Sequence[str] | None = None,
) -> Iterator[Judge]:
    """The judge of one command (see :func:`make_judge`), closed when the command ends."""
    judge = make_judge(spec, job, base_url, option_pairs)
    try:
        yield judge
    finally:
        run_sync(judge.aclose())
