"""The table of ``evidex`` commands: each one's name, the module that registers it and the line
``evidex --help`` shows for it, so that the top-level help and the dispatch of a command import
no command module but the one that runs (:class:`~evidex.cli._group.LazyGroup`). A command's own
``--help`` is its module's, in full.

It imports nothing but the jobs' registration: a job's line is its registered summary, and a job
without a command module of its own gets the command its definition makes
(:mod:`evidex.cli._job_command`). ``tests/test_cli_startup.py`` holds the table to what the
modules register: the same names, each in its module, each line the start of its help.
"""

from __future__ import annotations

import shutil
import textwrap
from typing import NamedTuple

from evidex._registered import JOBS

__all__ = ["DESCRIPTION", "GENERATED", "ROOT_OPTIONS", "Command", "commands", "help_text"]

DESCRIPTION = (
    "Grade retrieved evidence for RAG: relevance tiers, reranking, cited classification and "
    "claim-level answer audits, with an audit log and a human review queue."
)
"""What ``evidex`` is, atop its help."""
ROOT_OPTIONS = {
    "--version": "Print the installed version of evidex and exit.",
    "--help": "Show this message and exit.",
}
"""The options of ``evidex`` itself and their help."""


class Command(NamedTuple):
    module: str
    """The module whose import registers the command (on ``evidex.cli._app.app``)."""
    help: str
    """Its line in ``evidex --help``: the start of its own help (its first sentence or
    paragraph, or the clause before it goes into detail)."""


GENERATED = "evidex.cli._job_command"
"""The module that makes ``evidex JOB`` from the definition of a job without its own module."""

_OWN_MODULES = {"tier", "rerank", "classify", "audit"}
"""Jobs with a command module of their own (named after the job), for input forms their Input
model cannot say (TREC runs, answer files, consistency checks)."""

_OTHERS: dict[str, Command] = {
    "bulk": Command(
        "evidex.cli.bulk",
        "Run one job over a large JSONL file of tasks: streaming, bounded concurrency, resumable "
        "after a crash or kill -9 (each task exactly once in the output).",
    ),
    "eval": Command(
        "evidex.cli.eval",
        "Evaluate a job against a golden set (a JSONL file or a TREC DL, LLMJudge, WiCE or "
        "SciFact folder): its figures with intervals, confusion matrix, worst disagreements.",
    ),
    "eval compare": Command(
        "evidex.cli.gate", "Compare an evaluation run with a baseline run, item by item"
    ),
    "calibrate": Command(
        "evidex.cli.eval",
        "Measure a judge against a golden set, show which tier boundaries cause disagreements, "
        "fit cut points for score-based judges",
    ),
    "gate": Command(
        "evidex.cli.gate",
        "Check evaluation metrics against their floors, and against a baseline run; exit 1 when "
        "any is missed.",
    ),
    "demo": Command(
        "evidex.cli.demo",
        "Run the jobs on a bundled example, offline: rerank, tier, context, check, audit, "
        "classify.",
    ),
    "serve": Command(
        "evidex.cli.serve",
        "Serve the jobs over HTTP: POST /tier (and the other jobs), the review queue and its web "
        "UI at /ui/, /log, /keys, /metrics and /healthz; with --mcp, the same jobs as MCP tools "
        "at /mcp.",
    ),
    "mcp": Command(
        "evidex.cli.mcp",
        "Serve the jobs and the review queue as MCP tools over stdin and stdout, for an agent "
        "that starts this command (Claude Desktop, an IDE, any MCP client).",
    ),
    "review": Command(
        "evidex.cli.review",
        "The human review queue: fallbacks and risk-routed results wait here for a person.",
    ),
    "keys": Command("evidex.cli.keys", "API keys of `evidex serve`."),
    "log": Command("evidex.cli.log", "Show audit-log rows, oldest first."),
}


def commands() -> dict[str, Command]:
    """Every command in the order ``evidex --help`` lists them: the registered jobs, then the
    rest."""
    jobs = {
        name: Command(f"evidex.cli.{name}" if name in _OWN_MODULES else GENERATED, job.summary)
        for name, job in JOBS.items()
    }
    return {**jobs, **_OTHERS}


def help_text(width: int | None = None) -> str:
    """``evidex --help``: the usage, :data:`DESCRIPTION`, :data:`ROOT_OPTIONS` and a line per
    command, in click's layout, wrapped between words to ``width`` columns (default: the
    terminal's, less 2, as click)."""
    if width is None:
        width = max(shutil.get_terminal_size().columns - 2, 50)
    wrap = textwrap.TextWrapper(width - 2, break_on_hyphens=False)
    out = ["Usage: evidex [OPTIONS] COMMAND [ARGS]...", ""]
    out += ["  " + line for line in wrap.wrap(DESCRIPTION)]
    table = {name: entry.help for name, entry in commands().items()}
    for title, rows in (("Options", ROOT_OPTIONS), ("Commands", table)):
        out += ["", f"{title}:", *_rows(rows, width)]
    return "\n".join(out) + "\n"


def _rows(rows: dict[str, str], width: int) -> list[str]:
    """A definition list as click's ``write_dl`` lays it out: names in a column of their
    widest (at most 30), two spaces, the text wrapped in the rest."""
    first = min(max(len(name) for name in rows), 30) + 2
    wrap = textwrap.TextWrapper(max(width - first - 2, 10), break_on_hyphens=False)
    out = []
    for name, text in rows.items():
        lines = wrap.wrap(text)
        if len(name) <= first - 2:
            out.append(f"  {name:<{first}}{lines[0]}")
        else:
            out += [f"  {name}", " " * (first + 2) + lines[0]]
        out += [" " * (first + 2) + line for line in lines[1:]]
    return out
