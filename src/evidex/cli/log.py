"""``evidex log``: read the audit log, as a table for people or JSON lines for tools."""

from __future__ import annotations

import sys
from datetime import datetime
from typing import Annotated, Any

import typer
from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from evidex.cli._app import app, err_console
from evidex.cli._io import DbOpt, json_line, open_db

__all__ = ["audit_table", "log_command"]

_STATUS_STYLE = {
    "ok": "green",
    "cache": "cyan",
    "invalid": "yellow",
    "error": "red",
    "fallback": "bold red",
    "review": "magenta",
    "note": "dim",
}


@app.command("log")
def log_command(
    last: Annotated[
        int, typer.Option("--last", "-n", metavar="N", help="Show the newest N rows; 0 shows all.")
    ] = 20,
    run: Annotated[
        str | None,
        typer.Option("--run", metavar="RUN_ID", show_default=False, help="Only this run."),
    ] = None,
    job: Annotated[
        str | None,
        typer.Option(
            "--job", metavar="JOB", show_default=False, help="Only this job (tier, rerank ...)."
        ),
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="One JSON object a line, every column, raw output too.")
    ] = False,
    db: DbOpt = None,
) -> None:
    """Show audit-log rows, oldest first.

    One row per judge call, cache hit, fallback, review routing and input note, with its judge,
    prompt version, latency, tokens and (shortened) validation errors.
    """
    if last < 0:
        raise typer.BadParameter("must be 0 or more", param_hint="--last")
    with open_db(db) as store:
        rows = store.audit_rows(last=last or None, run_id=run, job=job)
    if as_json:
        sys.stdout.writelines(json_line(row) + "\n" for row in rows)
        return
    if not rows:
        err_console.print("no audit-log rows match")
        return
    Console().print(audit_table(rows))


def audit_table(rows: list[dict[str, Any]]) -> Table:
    """The audit rows as a rich table; raw outputs stay out of it (see ``--json``)."""
    table = Table(title=f"audit log ({len(rows)} rows)", title_justify="left", box=box.SIMPLE_HEAD)
    for name, wrap in [
        ("time (UTC)", False),
        ("run", False),
        ("job", False),
        ("step", True),
        ("status", False),
        ("try", False),
        ("judge", True),
        ("prompt", False),
        ("latency", False),
        ("tokens", False),
        ("errors", True),
    ]:
        table.add_column(name, no_wrap=not wrap, overflow="fold")
    for row in rows:
        status = str(row["status"])
        cells = [
            _time(row["time"]),
            row["run_id"],
            row["job"],
            row["step"],
            status,
            str(row["attempt"] or ""),
            row["judge_id"],
            row["prompt_version"][:8],
            "" if row["latency_ms"] is None else f"{row['latency_ms']:.0f} ms",
            _tokens(row),
            _short_errors(row["errors"]),
        ]
        # Text cells, not markup: ids and judge errors may hold brackets.
        texts = [Text(str(c)) for c in cells]
        texts[4].stylize(_STATUS_STYLE.get(status, ""))
        table.add_row(*texts)
    return table


def _time(value: datetime | None) -> str:
    return value.strftime("%m-%d %H:%M:%S") if value else ""


def _tokens(row: dict[str, Any]) -> str:
    prompt, completion = row["prompt_tokens"] or 0, row["completion_tokens"] or 0
    return f"{prompt}+{completion}" if prompt or completion else ""


def _short_errors(errors: list[str] | None, width: int = 80) -> str:
    if not errors:
        return ""
    first = errors[0] if len(errors[0]) <= width else errors[0][: width - 1] + "…"
    return first + (f" (+{len(errors) - 1} more)" if len(errors) > 1 else "")
