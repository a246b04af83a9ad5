"""``evidex log``: read the audit log, as a table for people or a JSON array for tools."""

from __future__ import annotations

import sys
from typing import Annotated, Any

import typer
from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from evidex.cli._app import app, err_console
from evidex.cli._io import json_line, open_db
from evidex.cli._options import DbOpt, job_option, json_option, unset_option
from evidex.cli._tables import print_table

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
        unset_option("--run", metavar="RUN_ID", help="Only this run."),
    ] = None,
    job: Annotated[str | None, job_option("Only this job (tier, rerank ...).")] = None,
    as_json: Annotated[
        bool,
        json_option(
            "One JSON array of the rows (the shape of GET /log), every column, raw output too."
        ),
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
        sys.stdout.write(json_line(rows, indent=2) + "\n")
        return
    if not rows:
        err_console.print("no audit-log rows match")
        return
    console = Console()
    print_table(console, audit_table(rows, console.width))


# (name, min width when it may wrap or None when it never wraps, console width it needs)
_COLUMNS: list[tuple[str, int | None, int]] = [
    ("time", None, 0),
    ("run", None, 0),
    ("job", 4, 0),
    ("step", 5, 100),
    ("status #", None, 0),
    ("judge", 8, 0),
    ("prompt", None, 120),
    ("latency", None, 100),
    ("tokens", None, 120),
    ("errors", 12, 0),
]


def audit_table(rows: list[dict[str, Any]], width: int = 200) -> Table:
    """The audit rows as a rich table; raw outputs stay out of it (see ``--json``).

    Ten columns do not fit a narrow terminal: below 120 and 100 columns the least needed ones
    are left out (the caption names them) rather than squeezing every column into slivers.
    """
    times = [r["time"] for r in rows if r["time"]]
    days = sorted({t.strftime("%Y-%m-%d") for t in times})
    span = days[0] if len(days) == 1 else f"{days[0]} to {days[-1]}" if days else ""
    shown = [c for c in _COLUMNS if width >= c[2]]
    hidden = [c[0] for c in _COLUMNS if width < c[2]]
    table = Table(
        title=f"audit log: {len(rows)} row{'' if len(rows) == 1 else 's'}"
        + (f", {span} (UTC)" if span else ""),
        title_justify="left",
        caption=f"not shown at this width: {', '.join(hidden)} (see --json)" if hidden else None,
        caption_justify="left",
        box=box.SIMPLE_HEAD,
    )
    for name, min_width, _ in shown:
        table.add_column(name, no_wrap=min_width is None, overflow="fold", min_width=min_width)
    for row in rows:
        status = str(row["status"])
        cells = {
            "time": row["time"].strftime("%H:%M:%S") if row["time"] else "",
            "run": row["run_id"],
            "job": row["job"],
            "step": row["step"],
            "status #": f"{status} #{row['attempt']}" if row["attempt"] else status,
            "judge": row["judge_id"],
            "prompt": row["prompt_version"][:8],
            "latency": "" if row["latency_ms"] is None else f"{row['latency_ms']:.0f} ms",
            "tokens": _tokens(row),
            "errors": _short_errors(row["errors"]),
        }
        # Text cells, not markup: ids and judge errors may hold brackets.
        texts = {name: Text(str(value)) for name, value in cells.items()}
        texts["status #"].stylize(_STATUS_STYLE.get(status, ""), 0, len(status))
        table.add_row(*(texts[name] for name, _, _ in shown))
    return table


def _tokens(row: dict[str, Any]) -> str:
    prompt, completion = row["prompt_tokens"] or 0, row["completion_tokens"] or 0
    return f"{prompt}+{completion}" if prompt or completion else ""


def _short_errors(errors: list[str] | None, width: int = 80) -> str:
    if not errors:
        return ""
    first = errors[0] if len(errors[0]) <= width else errors[0][: width - 1] + "…"
    return first + (f" (+{len(errors) - 1} more)" if len(errors) > 1 else "")
