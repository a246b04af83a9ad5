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

from typing import NamedTuple

from evidex._registered import JOBS

__all__ = ["GENERATED", "Command", "commands"]


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
