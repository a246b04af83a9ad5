"""The command groups of ``evidex``: :class:`Group`, which lists each command by the first
sentence of its help, whole, and the top-level :class:`LazyGroup`, whose commands are loaded
when one runs (click's lazy group pattern, on typer's group).

``evidex --help`` lists :func:`~evidex.cli._commands.commands` by their table lines without
importing any command module (each pulls in the jobs, the store, the judges' registry...);
``evidex JOB ...`` imports the one module that registers ``JOB`` and builds its command as
typer would, so ``evidex JOB --help`` shows its full option help.
"""

from __future__ import annotations

import importlib
from typing import Any, ClassVar

import typer
import typer.main
from typer.core import TyperCommand, TyperGroup

from evidex.cli._commands import commands, help_text

__all__ = ["Group", "LazyGroup", "load_command"]


class Group(TyperGroup):
    """A typer group whose command list gives each command's first sentence whole, wrapped
    between words (click cuts it to the line with "..."), or its own short help."""

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        rows = []
        for name in self.list_commands(ctx):
            command = self.get_command(ctx, name)
            if command is not None and not command.hidden:
                rows.append((name, command.get_short_help_str(limit=_WHOLE)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


_WHOLE = 10_000
"""A short-help limit no first sentence reaches."""


class LazyGroup(Group):
    """A typer group that lists the command table and builds a command when it is run."""

    source: ClassVar[typer.Typer | None] = None
    """The typer app whose commands the modules register (``evidex.cli._app.app`` sets it)."""

    def format_help(self, ctx: Any, formatter: Any) -> None:
        """The help :func:`~evidex.cli._commands.help_text` writes, which ``evidex --help``
        prints without loading typer (:func:`evidex.cli.main`)."""
        formatter.write(help_text(formatter.width))

    def list_commands(self, ctx: Any) -> list[str]:
        table = commands()
        return [*table, *(name for name in self.commands if name not in table)]

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        """The command as ``evidex --help`` lists it: its table line (the real command, when a
        name has no line)."""
        entry = commands().get(cmd_name)
        if entry is None:
            return self.commands.get(cmd_name)
        return TyperCommand(name=cmd_name, short_help=entry.help, callback=None)

    def resolve_command(self, ctx: Any, args: list[str]) -> tuple[Any, Any, list[str]]:
        """The command that runs: loaded from its module (the listed one stands in for it
        until then)."""
        name, command, rest = super().resolve_command(ctx, args)
        if name is not None and name in commands():
            command = self.commands.get(name) or load_command(self._source(), name)
            self.commands[name] = command
        return name, command, rest

    def _source(self) -> typer.Typer:
        if self.source is None:
            raise RuntimeError("LazyGroup.source is not set: evidex.cli._app sets it")
        return self.source


def load_command(app: typer.Typer, name: str) -> Any:
    """The click command ``name`` of ``app`` as typer builds it, after importing the module
    that registers it (for a job without a module of its own, :mod:`evidex.cli._job_command`,
    which makes its command from its definition)."""
    importlib.import_module(commands()[name].module)
    return typer.main.get_command(app).commands[name]  # type: ignore[attr-defined]
