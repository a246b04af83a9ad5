"""What every job command shares: reading inputs, the shared flags, and stderr plumbing.

Readers turn files into typed values and fail with an :class:`~evidex.errors.InputError` that
names the file, the line and what is wrong, so a user can fix the input without a traceback.
The options themselves are declared in :mod:`evidex.cli._options`; :func:`run_flags` adds the
ones every job command has and hands them to the command as one :class:`RunFlags`. Anything
written to stderr passes through :func:`redact`.
"""

from __future__ import annotations

import functools
import inspect
import json
import logging
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

from pydantic import ValidationError

from evidex.cli._app import redact
from evidex.cli._judge import job_judge
from evidex.cli._options import (
    BaseUrlOpt,
    DbOpt,
    JudgeOpt,
    JudgeOptionOpt,
    MaxTextCharsOpt,
    OutputOpt,
    VerboseOpt,
    unset_option,
)
from evidex.cli._progress import progress
from evidex.errors import ConfigError, InputError
from evidex.harness.events import AuditRecord, Hooks
from evidex.judging import Judge
from evidex.preflight import InputLimits
from evidex.store import SqlStore, open_store
from evidex.types import Passage

__all__ = [
    "RunFlags",
    "TextOrFile",
    "echo_hooks",
    "explain_passage_error",
    "json_line",
    "jsonl_objects",
    "open_db",
    "option_group",
    "progress",
    "read_lines",
    "read_passages",
    "redact",
    "run_flags",
    "verbose_logging",
]

logger = logging.getLogger("evidex.cli")

# ---------------------------------------------------------------------------- shared flags


@dataclass(frozen=True)
class RunFlags:
    """The options the job commands share, handed to a command as one value by
    :func:`run_flags`."""

    judge: str | None = None
    base_url: list[str] | None = None
    judge_option: list[str] | None = None
    db: str | None = None
    output: Path | None = None
    verbose: bool = False
    max_text_chars: int | None = None

    def job_judge(self, job: str) -> AbstractContextManager[Judge]:
        """The judge of ``job`` from ``--judge``, ``--base-url`` and ``--judge-option``."""
        return job_judge(self.judge, job, self.base_url, self.judge_option)

    @contextmanager
    def job(self, job: str) -> Iterator[dict[str, Any]]:
        """The run keywords of a job call, for the duration of the command: the judge of
        ``job``, the ``--db`` store, :func:`echo_hooks` and, with ``--max-text-chars``, the
        ``limits`` that refuse a longer text (without it, any length is fitted to the judge)."""
        with self.job_judge(job) as judge, open_db(self.db) as store:
            run: dict[str, Any] = {"judge": judge, "store": store, "hooks": echo_hooks()}
            if self.max_text_chars is not None:
                run["limits"] = InputLimits(
                    max_passages=None, max_text_chars=self.max_text_chars, lift=LIFT
                )
            yield run


LIFT = (
    "raise --max-text-chars, or leave it out to have a long text cut to what the judge reads "
    "(a 'truncated' event)"
)
"""How a refusal of ``--max-text-chars`` says to lift it."""


_RUN_FLAGS: dict[str, tuple[Any, Any]] = {
    "judge": (JudgeOpt, None),
    "base_url": (BaseUrlOpt, None),
    "judge_option": (JudgeOptionOpt, None),
    "db": (DbOpt, None),
    "output": (OutputOpt, None),
    "verbose": (VerboseOpt, False),
    "max_text_chars": (MaxTextCharsOpt, None),
}

R = TypeVar("R")


def option_group(
    param: str,
    factory: Callable[..., Any],
    table: Mapping[str, tuple[Any, Any]],
    names: Sequence[str] = (),
    around: Callable[[Any], AbstractContextManager[Any]] | None = None,
) -> Callable[[Callable[..., R]], Callable[..., R]]:
    """Add the options ``names`` of ``table`` (name → (annotated type, default); default: all)
    to a command, and hand them to it as one value ``factory(**values)`` in its ``param``
    parameter. typer reads the signature set here: the command's own options, then the
    group's. ``around(group)``, when given, is a context the command runs in. This is how
    options shared by several commands are declared once (click's option groups)."""
    chosen = tuple(names) or tuple(table)

    def decorate(command: Callable[..., R]) -> Callable[..., R]:
        signature = inspect.signature(command, eval_str=True)
        own = [p for p in signature.parameters.values() if p.name != param]
        keyword = inspect.Parameter.KEYWORD_ONLY
        shared = [
            inspect.Parameter(name, keyword, annotation=table[name][0], default=table[name][1])
            for name in chosen
        ]

        @functools.wraps(command)
        def with_group(*args: Any, **kwargs: Any) -> R:
            group = factory(**{name: kwargs.pop(name) for name in chosen})
            if around is None:
                return command(*args, **{param: group}, **kwargs)
            with around(group):
                return command(*args, **{param: group}, **kwargs)

        with_group.__signature__ = signature.replace(  # type: ignore[attr-defined]
            parameters=[*own, *shared]
        )
        return with_group

    return decorate


def run_flags(*names: str) -> Callable[[Callable[..., R]], Callable[..., R]]:
    """Add the shared options ``names`` (default: all of :class:`RunFlags`) to a command, which
    declares a ``flags: RunFlags`` parameter to get them as one value. With ``--verbose`` the
    whole command runs under :func:`verbose_logging`."""
    return option_group(
        "flags", RunFlags, _RUN_FLAGS, names, around=lambda f: verbose_logging(f.verbose)
    )


# ---------------------------------------------------------------------------- passages

_PASSAGE_FIELDS = "passage_id (or id), text, title, url, rank, score, metadata"


def read_passages(path: str | Path) -> list[Passage]:
    """Passages from a JSONL file, one object a line; ``-`` reads stdin. Blank lines are skipped.

    Ids must be unique in the file: a repeated id is reported with both line numbers, since it
    is almost always a join bug upstream rather than a passage worth grading twice. A text of
    any length is taken, as the library takes it: preflight fits it to the judge's window, with
    a ``truncated`` event (the service's request limits guard a shared worker, not a file on the
    user's own disk).
    """
    passages: list[Passage] = []
    first_seen: dict[str, int] = {}
    for where, lineno, data in jsonl_objects(path):
        if "text" not in data:
            raise InputError("the passage has no 'text' field", where=where)
        try:
            passage = Passage.model_validate(data)
        except ValidationError as exc:
            raise InputError(explain_passage_error(exc), where=where) from exc
        if passage.passage_id in first_seen:
            raise InputError(
                f"passage id {passage.passage_id!r} was already used on line "
                f"{first_seen[passage.passage_id]}; ids must be unique",
                where=where,
            )
        first_seen[passage.passage_id] = lineno
        passages.append(passage)
    return passages


def jsonl_objects(path: str | Path) -> Iterator[tuple[str, int, dict[str, Any]]]:
    """``(where, line number, object)`` for each non-blank line of a JSONL file or stdin (``-``).

    ``where`` is ``FILE:LINE`` for error messages. Malformed JSON, a line that is not an object
    and a file without any object raise :class:`InputError` naming the file (and line).
    """
    name, lines = read_lines(path)
    empty = True
    for lineno, line in enumerate(lines, 1):
        if not line.strip():
            continue
        where = f"{name}:{lineno}"
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputError(
                f"malformed JSON: {exc.msg} (column {exc.colno})", where=where
            ) from exc
        if not isinstance(data, dict):
            raise InputError(f"expected a JSON object, got {_json_kind(data)}", where=where)
        empty = False
        yield where, lineno, data
    if empty:
        raise InputError("the file is empty (expected one JSON object a line)", where=name)


def read_lines(path: str | Path) -> tuple[str, list[str]]:
    """The display name and the lines of a file or stdin, both read as UTF-8 (a byte-order
    mark dropped): bytes that are not UTF-8 are an input error naming the byte, whichever way
    they come in.

    Splits on ``\\n`` only: JSON strings may hold U+2028 and friends unescaped, which
    ``str.splitlines`` would treat as line breaks.
    """
    name = "<stdin>" if str(path) == "-" else str(path)
    try:
        if name == "<stdin>":
            # the bytes, not the text stream: its decoding depends on the locale, and fails
            # with a traceback rather than an error that names the input
            buffer = getattr(sys.stdin, "buffer", None)
            raw = sys.stdin.read() if buffer is None else buffer.read()
            text = raw if isinstance(raw, str) else raw.decode("utf-8-sig")
        else:
            text = Path(path).read_text(encoding="utf-8-sig")
    except FileNotFoundError as exc:
        raise InputError("no such file", where=name) from exc
    except UnicodeDecodeError as exc:
        raise InputError(f"not UTF-8 text (byte {exc.start})", where=name) from exc
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror or exc}", where=name) from exc
    return name, [line.rstrip("\r") for line in text.split("\n")]


def _json_kind(value: Any) -> str:
    names = {list: "an array", str: "a string", bool: "a boolean", type(None): "null"}
    return names.get(type(value), "a number")


def explain_passage_error(exc: ValidationError) -> str:
    """Pydantic's errors for one passage, in words that say what to change."""
    problems = []
    for err in exc.errors():
        field = ".".join(str(part) for part in err["loc"]) or "passage"
        if err["type"] == "missing" and field == "passage_id":
            problems.append("the passage has no 'passage_id' (or 'id') field")
        elif err["type"] == "extra_forbidden":
            problems.append(f"unknown field {field!r}; allowed fields: {_PASSAGE_FIELDS}")
        else:
            problems.append(f"{field}: {err['msg'].removeprefix('Value error, ')}")
    return "; ".join(problems)


@dataclass(frozen=True)
class TextOrFile:
    """A text given on the command line (``--NAME TEXT``) or read from a file
    (``--NAME-file FILE``): the two options, and :meth:`read`, which takes exactly one.

    ``what`` names the text in errors ("the answer"); the file is read like every other input
    (UTF-8, a byte-order mark and CR line ends dropped).
    """

    flag: str
    short: str
    help: str
    file_help: str
    what: str

    @property
    def text_option(self) -> Any:
        return unset_option(self.flag, self.short, metavar="TEXT", help=self.help)

    @property
    def file_option(self) -> Any:
        return unset_option(f"{self.flag}-file", metavar="FILE", help=self.file_help)

    def read(self, text: str | None, file: Path | None, otherwise: str = "") -> str:
        """The text from exactly one of the two options, not blank; ``otherwise`` is another
        way to give it, added to the error that says so (" (or --batch)")."""
        if (text is None) == (file is None):
            raise ConfigError(
                f"give {self.what} with exactly one of {self.flag} or {self.flag}-file{otherwise}"
            )
        if file is not None:
            _, lines = read_lines(file)
            text = "\n".join(lines)
        where = str(file or self.flag)
        if not (text or "").strip():
            raise InputError(f"{self.what} is empty", where=where)
        return text or ""


# ---------------------------------------------------------------------------- judge and store


@contextmanager
def open_db(url: str | None) -> Iterator[SqlStore]:
    """Open the store named by ``--db`` (or the default one) and close it when the command ends."""
    store = open_store(url)
    logger.info("store %s", store.url)
    try:
        yield store
    finally:
        store.close()


def echo_hooks() -> Hooks:
    """A hook bus that logs every audit record of a run in one line: what ``--verbose`` shows.

    The job functions emit each record to the caller's ``hooks=`` as well as to the audit log,
    so these lines and the log rows are the same records.
    """
    hooks = Hooks()
    hooks.subscribe(log_record)
    return hooks


def log_record(record: AuditRecord) -> None:
    """One line for an audit record: job, step, batch, status, attempt, latency, tokens, errors."""
    parts = [record.job, record.step, record.batch_id or "-", record.status]
    if record.attempt:
        parts.append(f"attempt {record.attempt}")
    if record.latency_ms is not None:
        parts.append(f"{record.latency_ms:.0f} ms")
    if record.prompt_tokens or record.completion_tokens:
        parts.append(f"tokens {record.prompt_tokens}+{record.completion_tokens}")
    if record.errors:
        parts.append("errors: " + "; ".join(record.errors)[:300])
    if record.detail:
        parts.append(json_line(record.detail)[:300])
    logger.info(" ".join(parts))


# ---------------------------------------------------------------------------- stderr


class _RedactingFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return redact(super().format(record))


# Loggers shown by --verbose: ours in full, the HTTP client's request lines.
_VERBOSE_LOGGERS = {"evidex": logging.DEBUG, "openai": logging.INFO, "httpx": logging.INFO}


@contextmanager
def verbose_logging(enabled: bool) -> Iterator[None]:
    """With ``enabled``, log to stderr for the duration of one command, every line redacted.

    The handler is removed afterwards, so the library never keeps handlers it did not ask for
    (and in-process callers, such as tests, can run many commands in a row).
    """
    if not enabled:
        yield
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_RedactingFormatter("%(asctime)s %(name)s: %(message)s", "%H:%M:%S"))
    previous = {}
    for name, level in _VERBOSE_LOGGERS.items():
        log = logging.getLogger(name)
        previous[name] = log.level
        log.setLevel(level)
        log.addHandler(handler)
    try:
        yield
    finally:
        for name, level in previous.items():
            log = logging.getLogger(name)
            log.removeHandler(handler)
            log.setLevel(level)


def json_line(value: Any, indent: int | None = None) -> str:
    """JSON with datetimes as ISO 8601: compact (one line) unless ``indent`` is given."""

    def default(obj: Any) -> Any:
        return obj.isoformat() if isinstance(obj, datetime) else str(obj)

    return json.dumps(value, ensure_ascii=False, default=default, indent=indent)
