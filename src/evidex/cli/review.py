"""``evidex review``: the human review queue — list items, show one, claim one, record a
decision, assign an item, adjudicate a disagreement, and export the decisions as golden
records."""

from __future__ import annotations

import getpass
import sys
from enum import Enum
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from evidex.cli._app import EXIT_USAGE, app, err_console
from evidex.cli._group import Group
from evidex.cli._io import json_line, open_db
from evidex.cli._options import DbOpt, job_option, json_option, tiers_option, unset_option
from evidex.cli._tables import print_table
from evidex.errors import ConfigError, ReviewConflict
from evidex.evaluate.golden import read_jsonl, write_jsonl
from evidex.evaluate.review_export import export_reviews
from evidex.jobs import definitions
from evidex.store import DEFAULT_LEASE_S, visible_decisions
from evidex.types import DEFAULT_TIERS, TierScheme

__all__ = ["review_app"]

review_app = typer.Typer(
    help="The human review queue: fallbacks and risk-routed results wait here for a person.",
    no_args_is_help=True,
    cls=Group,
    rich_markup_mode=None,  # click's layout, as the top-level app (evidex.cli._app)
)
app.add_typer(review_app, name="review")

ItemId = Annotated[
    int, typer.Argument(metavar="ID", help="The review item id.", show_default=False)
]
JsonOpt = Annotated[bool, json_option("Print JSON instead of a table.")]
ListJsonOpt = Annotated[
    bool,
    json_option("Print one JSON array of the items (the shape of GET /review) instead of a table."),
]
ReviewerOpt = Annotated[
    str | None,
    unset_option("--reviewer", metavar="NAME", help="Who decides. Default: the login name."),
]


class Status(str, Enum):
    PENDING = "pending"
    DISPUTED = "disputed"
    RESOLVED = "resolved"
    ALL = "all"


@review_app.command("list")
def list_command(
    status: Annotated[
        Status, typer.Option("--status", case_sensitive=False, help="Which items to list.")
    ] = Status.PENDING,
    job: Annotated[str | None, job_option("Only this job.")] = None,
    assignee: Annotated[
        str | None,
        unset_option(
            "--assignee", metavar="NAME", help="Only items assigned to NAME ('' : unassigned)."
        ),
    ] = None,
    as_json: ListJsonOpt = False,
    db: DbOpt = None,
) -> None:
    """List review items, oldest first, with why each one is there.

    Status disputed: items whose reviewers disagree, waiting for an adjudication.
    """
    with open_db(db) as store:
        items = store.list_reviews(
            status=None if status is Status.ALL else status.value, job=job, assignee=assignee
        )
    if as_json:
        sys.stdout.write(json_line(items, indent=2) + "\n")
        return
    if not items:
        err_console.print(f"no {'' if status is Status.ALL else status.value + ' '}review items")
        return
    table = Table(
        title=f"review queue: {_count(len(items), 'item')}",
        title_justify="left",
        box=box.SIMPLE_HEAD,
    )
    for name in ("id", "job", "status", "risk", "run"):
        table.add_column(name, no_wrap=True)
    table.add_column("passages", overflow="fold", min_width=8)
    table.add_column("reason", overflow="fold", ratio=3)
    table.add_column("decisions", no_wrap=True)
    table.add_column("assignee", overflow="fold")
    table.add_column("decision", overflow="fold")
    for item in items:
        table.add_row(
            *(
                Text(str(value))
                for value in (
                    item["id"],
                    item["job"],
                    item["status"],
                    item["risk"],
                    item["run_id"],
                    _ids(item["passage_ids"]),
                    item["reason"],
                    f"{item['decisions_made']}/{item['decisions_required']}",
                    item["assignee"] or "",
                    item["decision"] or "",
                )
            )
        )
    print_table(Console(), table)


@review_app.command("show")
def show_command(
    item_id: ItemId, reviewer: ReviewerOpt = None, as_json: JsonOpt = False, db: DbOpt = None
) -> None:
    """Show one review item in full.

    Its reason, passages and the payload a reviewer needs: the query, the errors of each
    attempt, the last raw output, and the fallback or the graded result; and its decisions,
    once --reviewer has decided it (or it is no longer pending): reviewers decide independently.
    """
    with open_db(db) as store:
        item = store.get_review(item_id)
        every = store.review_decisions([item_id]).get(item_id, [])
        item["decisions"] = visible_decisions(item, every, reviewer or _login())
    if as_json:
        sys.stdout.write(json_line(item, indent=2) + "\n")
        return
    console = Console()
    fields = Table.grid(padding=(0, 2))
    fields.add_column(style="bold")
    fields.add_column(overflow="fold")
    for label, value in _summary(item):
        fields.add_row(label, Text(value))
    print_table(console, fields)
    for decision in item["decisions"]:
        said = f"{decision['kind']} by {decision['reviewer'] or 'an unnamed reviewer'}: "
        note = f" ({decision['note']})" if decision["note"] else ""
        console.print(Text(said + decision["decision"] + note))
    console.print(Text("payload:", style="bold"))
    console.print_json(json_line(item["payload"]))


@review_app.command("claim")
def claim_command(
    job: Annotated[str | None, job_option("Only an item of this job.")] = None,
    lease: Annotated[
        float,
        typer.Option(
            "--lease",
            metavar="SECONDS",
            min=1,
            help="How long the item stays yours; after that another reviewer may claim it.",
        ),
    ] = DEFAULT_LEASE_S,
    reviewer: ReviewerOpt = None,
    as_json: JsonOpt = False,
    db: DbOpt = None,
) -> None:
    """Take the oldest pending item nobody holds, leased to you so no one else works on it.

    Items assigned to you come first; items assigned to others, and items you decided
    already, are never yours.
    """
    with open_db(db) as store:
        item = store.claim_review(reviewer or _login() or "unknown", job=job, lease_s=lease)
    if as_json:
        sys.stdout.write(json_line(item, indent=2) + "\n")
        return
    if item is None:
        err_console.print("no pending review item is free to claim")
        return
    until = item["lease_expires_at"].isoformat(timespec="seconds")
    err_console.print(
        Text(f"claimed review item {item['id']} for {item['lease_holder']} until {until}")
    )
    sys.stdout.write(f"{item['id']}\n")


@review_app.command("release")
def release_command(item_id: ItemId, reviewer: ReviewerOpt = None, db: DbOpt = None) -> None:
    """Give a claimed item back to the queue before its lease runs out."""
    with open_db(db) as store:
        try:
            store.release_review(item_id, reviewer or _login() or "unknown")
        except ReviewConflict as exc:
            _conflict(exc)
    err_console.print(f"released review item {item_id}")


DecisionOpt = Annotated[
    str,
    typer.Option(
        "--decision",
        "-d",
        metavar="TEXT",
        help=(
            "The reviewer's verdict, one the item's job allows: a tier (or a JSON object of "
            "passage id to tier), a label (or a JSON array), a claim status (or a JSON "
            'object naming every claim), {"verdict": "publish" or "block", "claims": '
            "{claim id: status}} for an answer audit, a ranking (passage ids, best first), "
            "or accept/reject."
        ),
    ),
]
NoteOpt = Annotated[
    str | None,
    unset_option("--note", metavar="TEXT", help="Why, in a sentence."),
]


@review_app.command("resolve")
def resolve_command(
    item_id: ItemId,
    decision: DecisionOpt,
    note: NoteOpt = None,
    reviewer: ReviewerOpt = None,
    db: DbOpt = None,
) -> None:
    """Record your decision on a pending item, once.

    An item that needs several independent decisions (the [review] settings) waits for the
    others, then is resolved when they agree, or disputed when they do not. A decision the
    item does not allow exits 2 naming the allowed values; an item already resolved,
    claimed by or assigned to another reviewer, or decided by you already, exits 2 and
    nothing is written.
    """
    with open_db(db) as store:
        try:
            item = store.resolve_review(
                item_id, decision=decision, reviewer=reviewer or _login(), note=note
            )
        except ReviewConflict as exc:
            _conflict(exc)
    if item["status"] == "resolved":
        said = f"resolved review item {item['id']}: {item['decision']!r} by {item['reviewer']}"
    elif item["status"] == "disputed":
        said = (
            f"recorded your decision on review item {item['id']}: its reviewers disagree, so "
            "it waits for an adjudication (evidex review adjudicate)"
        )
    else:
        more = int(item["decisions_required"]) - int(item["decisions_made"])
        said = (
            f"recorded your decision on review item {item['id']} "
            f"({item['decisions_made']} of {item['decisions_required']}); it waits for "
            f"{_count(more, 'more decision')} by other reviewers"
        )
    err_console.print(Text(said))


@review_app.command("adjudicate")
def adjudicate_command(
    item_id: ItemId,
    decision: DecisionOpt,
    note: NoteOpt = None,
    reviewer: ReviewerOpt = None,
    db: DbOpt = None,
) -> None:
    """Settle an item whose reviewers disagree (status disputed) with your decision.

    The item is resolved with it, and the golden export takes it. An item that is not
    disputed exits 2 and nothing is written.
    """
    with open_db(db) as store:
        try:
            item = store.adjudicate_review(
                item_id, decision=decision, reviewer=reviewer or _login() or "unknown", note=note
            )
        except ReviewConflict as exc:
            _conflict(exc)
    err_console.print(
        Text(f"adjudicated review item {item['id']}: {item['decision']!r} by {item['reviewer']}")
    )


@review_app.command("assign")
def assign_command(
    item_id: ItemId,
    to: Annotated[
        str | None,
        unset_option("--to", metavar="NAME", help="The reviewer who works on it."),
    ] = None,
    clear: Annotated[
        bool, typer.Option("--clear", help="Assign it to nobody (anyone may claim it).")
    ] = False,
    db: DbOpt = None,
) -> None:
    """Assign an open item to a reviewer: while it is, only they may claim or decide it.

    Claims take a reviewer's assigned items first. An assignee who decides an item that
    needs more decisions hands it on to the others.
    """
    if (to is None) == (not clear):
        raise typer.BadParameter("give --to NAME, or --clear")
    with open_db(db) as store:
        try:
            item = store.assign_review(item_id, None if clear else to)
        except ReviewConflict as exc:
            _conflict(exc)
    whom = item["assignee"] or "nobody"
    err_console.print(Text(f"assigned review item {item['id']} to {whom}"))


@review_app.command("export")
def export_command(
    job: Annotated[str, job_option("Which job's items.")],
    output: Annotated[
        Path, typer.Option("--output", "-o", metavar="FILE", help="Golden JSONL to write.")
    ],
    passages: Annotated[
        Path | None,
        unset_option(
            "--passages",
            metavar="FILE",
            help="JSONL with passage_id and text (e.g. a tier golden file), for items "
            "whose payload has no passage text.",
        ),
    ] = None,
    tiers: Annotated[
        Path | None, tiers_option("Tier definitions (YAML/JSON) the tier decisions name.")
    ] = None,
    db: DbOpt = None,
) -> None:
    """Turn resolved review items into golden records (the human loop feeds calibration)."""
    exporting = [d.name for d in definitions() if d.evaluation and d.evaluation.from_reviews]
    if job not in exporting:
        raise ConfigError(
            f"review export is implemented for the {', '.join(exporting)} job, not {job!r}"
        )
    texts = {
        str(row["passage_id"]): str(row["text"])
        for _, row in (read_jsonl(passages) if passages else ())
        if "passage_id" in row and "text" in row
    }
    scheme = TierScheme.from_file(tiers) if tiers else DEFAULT_TIERS
    with open_db(db) as store:
        items = store.list_reviews(status=None, job=job)
        result = export_reviews(items, job, scheme=scheme, texts=texts)
    count = write_jsonl(output, result.records)
    for item_id, reason in result.skipped:
        err_console.print(Text(f"skipped review item {item_id}: {reason}"))
    if result.disputed:
        err_console.print(
            Text(
                f"left out {_count(len(result.disputed), 'item')} whose reviewers disagree and "
                f"that nobody has adjudicated yet ({_ids([str(i) for i in result.disputed])}): "
                "evidex review adjudicate ID -d DECISION"
            )
        )
    err_console.print(Text(f"wrote {count} golden record(s) to {output}"))


def _conflict(exc: ReviewConflict) -> NoReturn:
    err_console.print(Text(f"conflict: {exc}"), style="bold red", soft_wrap=True)
    raise typer.Exit(EXIT_USAGE)


def _summary(item: dict[str, Any]) -> list[tuple[str, str]]:
    rows = [
        ("id", str(item["id"])),
        ("job", item["job"]),
        ("status", item["status"]),
        ("risk", item["risk"]),
        ("reason", item["reason"]),
        ("run", item["run_id"]),
        ("batch", item["batch_id"] or "-"),
        ("passages", _ids(item["passage_ids"])),
        ("created", item["created_at"].isoformat(timespec="seconds")),
    ]
    if item["status"] == "resolved":
        rows += [
            ("decision", item["decision"] or ""),
            ("reviewer", item["reviewer"] or "-"),
            ("note", item["note"] or "-"),
            ("resolved", item["resolved_at"].isoformat(timespec="seconds")),
        ]
    return rows


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _ids(ids: list[str]) -> str:
    return ", ".join(ids[:10]) + (f" (+{len(ids) - 10} more)" if len(ids) > 10 else "")


def _login() -> str | None:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no login name in some containers
        return None
