"""``evidex keys``: the service's API keys — make one, list them, revoke one."""

from __future__ import annotations

import sys
from enum import Enum
from typing import Annotated

import typer
from rich import box
from rich.console import Console
from rich.table import Table

from evidex.cli._app import app, err_console
from evidex.cli._group import Group
from evidex.cli._io import json_line, open_db
from evidex.cli._options import DbOpt, json_option
from evidex.cli._tables import print_table
from evidex.store import ROLES

__all__ = ["keys_app"]

keys_app = typer.Typer(
    help="API keys of `evidex serve`. A client key calls the job endpoints, a reviewer key works "
    "the review queue, the audit log and the web UI, an admin key manages keys. Keys are stored "
    "hashed: a key is shown once, when it is made.",
    no_args_is_help=True,
    cls=Group,
    rich_markup_mode=None,  # click's layout, as the top-level app (evidex.cli._app)
)
app.add_typer(keys_app, name="keys")


Role = Enum("Role", {role.upper(): role for role in ROLES}, type=str)  # type: ignore[misc]
"""The store's roles, as typer's choices: one list, :data:`evidex.store.ROLES`."""


@keys_app.command("create")
def create_command(
    role: Annotated[
        Role, typer.Option("--role", case_sensitive=False, help="What the key may do.")
    ],
    name: Annotated[
        str | None,
        typer.Option("--name", help="Who or what holds it; a reviewer's decisions carry it."),
    ] = None,
    db: DbOpt = None,
) -> None:
    """Make a key and print it once, as the last line (store it now: it cannot be shown again)."""
    with open_db(db) as store:
        key, secret = store.create_key(role.value, name)
    err_console.print(
        f"made {key.role} key {key.key_id} ({key.name}); send it as 'Authorization: Bearer KEY'",
        highlight=False,
    )
    sys.stdout.write(secret + "\n")


@keys_app.command("list")
def list_command(
    include_revoked: Annotated[bool, typer.Option("--all", help="Include revoked keys.")] = False,
    as_json: Annotated[bool, json_option("Print a JSON array instead of a table.")] = False,
    db: DbOpt = None,
) -> None:
    """List keys (ids, names, roles, dates; never the keys themselves)."""
    with open_db(db) as store:
        keys = store.list_keys(include_revoked=include_revoked)
    if as_json:
        sys.stdout.write(json_line([k.as_dict() for k in keys], indent=2) + "\n")
        return
    if not keys:
        err_console.print("no keys; make one with `evidex keys create --role client`")
        return
    table = Table(box=box.SIMPLE_HEAD)
    for column in ("id", "name", "role", "created", "revoked"):
        table.add_column(column, no_wrap=column != "name")
    for key in keys:
        table.add_row(
            key.key_id,
            key.name,
            key.role,
            key.created_at.strftime("%Y-%m-%d %H:%M"),
            key.revoked_at.strftime("%Y-%m-%d %H:%M") if key.revoked_at else "",
        )
    print_table(Console(), table)


@keys_app.command("revoke")
def revoke_command(
    key_id: Annotated[str, typer.Argument(help="The key's id, as `evidex keys list` shows it.")],
    db: DbOpt = None,
) -> None:
    """Revoke a key: it stops working at once here, and on other servers within 30 s."""
    with open_db(db) as store:
        key = store.revoke_key(key_id)
    err_console.print(f"revoked {key.role} key {key.key_id} ({key.name})", highlight=False)
