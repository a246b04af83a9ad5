"""The options that several commands share, declared once.

A command declares ``judge: JudgeOpt = None`` and gets the same flag, help text and checks as
every other command. Where commands share a flag and its meaning but say in their own words
what it is for them (``--passages``, ``--batch``, ``--job`` ...), a factory fixes the flag and
its metavar and takes the help text. The API key is deliberately *not* an option: command lines
end up in shell history and process lists, so keys come from the environment only.
"""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Annotated, Any

import typer

from evidex.cli._app import writable_output
from evidex.types import RiskLevel

__all__ = [
    "BaseUrlOpt",
    "DbOpt",
    "JudgeOpt",
    "JudgeOptionOpt",
    "MaxTextCharsOpt",
    "ModeOpt",
    "OnContradiction",
    "OnContradictionOpt",
    "OutputOpt",
    "PromptOpt",
    "RiskOpt",
    "VerboseOpt",
    "batch_option",
    "examples_option",
    "job_option",
    "json_option",
    "labels_option",
    "output_option",
    "passages_option",
    "query_option",
    "tiers_option",
    "unset_option",
]


class ModeOpt(str, Enum):
    """How audit finds claims (``audit`` and ``bulk audit``)."""

    ONE_PASS = "one-pass"
    TWO_PASS = "two-pass"


class OnContradiction(str, Enum):
    """What a contradicted claim decides (``audit`` and ``bulk audit``)."""

    BLOCK = "block"
    REVIEW = "review"


OnContradictionOpt = Annotated[
    OnContradiction,
    typer.Option(
        "--on-contradiction", case_sensitive=False, help="What a contradicted claim does."
    ),
]


def labels_option(help: str) -> Any:
    """The ``--labels`` / ``-l`` taxonomy file of classify, with the command's own help text."""
    return typer.Option("--labels", "-l", metavar="FILE", help=help)


def unset_option(*decls: str, metavar: str, help: str, **extra: Any) -> Any:
    """An option that may be left out (its default, None, is not shown in ``--help``)."""
    return typer.Option(*decls, metavar=metavar, show_default=False, help=help, **extra)


def passages_option(help: str) -> Any:
    """The ``--passages`` / ``-p`` option of a job command, with the job's own help text."""
    return unset_option("--passages", "-p", metavar="FILE.jsonl", help=help)


def examples_option(help: str) -> Any:
    """The ``--examples`` option (few-shot examples from a file), with the job's own help text."""
    return unset_option("--examples", metavar="FILE", help=help)


def batch_option(help: str) -> Any:
    """The ``--batch`` option (a JSONL file of inputs, one result a line out), with the job's
    own help text."""
    return unset_option("--batch", metavar="FILE.jsonl", help=help)


def query_option(help: str) -> Any:
    """The ``--query`` / ``-q`` option (the query text), with the command's own help text."""
    return unset_option("--query", "-q", metavar="TEXT", help=help)


def tiers_option(help: str) -> Any:
    """The ``--tiers`` option (a file of tier definitions), with the command's own help text."""
    return unset_option("--tiers", metavar="FILE", help=help)


def job_option(help: str) -> Any:
    """The ``--job`` option (which job's rows or items), with the command's own help text."""
    return unset_option("--job", metavar="JOB", help=help)


def json_option(help: str) -> Any:
    """The ``--json`` flag (JSON on stdout instead of a table), with the command's own help."""
    return typer.Option("--json", help=help)


JudgeOpt = Annotated[
    str | None,
    unset_option(
        "--judge",
        "-j",
        metavar="SPEC",
        help="Judge spec: openai:MODEL (any OpenAI-compatible API), local:minilm, local:qwen. "
        "Default: the job's configured judge (`EVIDEX_JUDGE_<JOB>`, [judges] in the config "
        "file), else local:minilm for tier and rerank, local:qwen for the others (in "
        "mode=score, where it measures best; --judge-option mode=generate has it write its "
        "replies).",
    ),
]
JudgeOptionOpt = Annotated[
    list[str] | None,
    unset_option(
        "--judge-option",
        metavar="KEY=VALUE",
        help="An option of the judge, e.g. compute=float32 or "
        "thresholds_path=reports/calibration-tier/thresholds.json for local:minilm, "
        "n_threads=1 for local:qwen. Repeatable; a misspelled option is an error.",
    ),
]
BaseUrlOpt = Annotated[
    list[str] | None,
    unset_option(
        "--base-url",
        metavar="URL",
        help="Endpoint of the OpenAI-compatible server, for openai: judges only; repeat it for "
        "several replicas of the model (calls go to the least busy one, and to another when one "
        "fails). Default: EVIDEX_OPENAI_BASE_URLS (comma-separated), EVIDEX_OPENAI_BASE_URL, "
        "OPENAI_BASE_URL, else [openai] in the config file. The API key is read from "
        "OPENAI_API_KEY only, never from the command line.",
    ),
]
DbOpt = Annotated[
    str | None,
    unset_option(
        "--db",
        metavar="URL",
        help="Store for the audit log, cache and review queue: sqlite:///FILE or a PostgreSQL "
        "URL. Default: EVIDEX_DB, else evidex.db in the user data dir.",
    ),
]
PromptOpt = Annotated[
    Path | None,
    unset_option(
        "--prompt",
        metavar="FILE",
        dir_okay=False,
        help="Your own wording of the job's prompt: a text file (the user message) or YAML with "
        "user and system, using the spec's `[PLACEHOLDERS]`; a missing or unknown one is an "
        "error naming the allowed ones. Default: `EVIDEX_PROMPT_<JOB>`, [prompts] in the "
        "config file, else the built-in prompt.",
    ),
]
RiskOpt = Annotated[
    RiskLevel,
    typer.Option(
        "--risk",
        case_sensitive=False,
        help="How costly a wrong judgment is: high routes more results to human review.",
    ),
]


def output_option(help: str) -> Any:
    """The ``--output`` / ``-o`` option (a file, checked writable before any judging), with
    the command's own help text."""
    return unset_option(
        "--output", "-o", metavar="FILE", dir_okay=False, callback=writable_output, help=help
    )


OutputOpt = Annotated[
    Path | None, output_option("Write the JSON result to FILE instead of stdout.")
]
MaxTextCharsOpt = Annotated[
    int | None,
    unset_option(
        "--max-text-chars",
        metavar="N",
        min=1,
        help="Refuse a text (query, passage, answer, input) longer than N characters, before "
        "any judge call. Default: any length; a text longer than the judge reads is cut to its "
        "window, with a 'truncated' event in the result.",
    ),
]
VerboseOpt = Annotated[
    bool,
    typer.Option(
        "--verbose",
        "-v",
        help="Log the settings and every judge exchange to stderr (secrets are masked).",
    ),
]
