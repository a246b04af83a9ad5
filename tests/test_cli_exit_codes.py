"""A command's own ``typer.Exit(code)`` reaches the shell unchanged."""

from __future__ import annotations

import typer

from evidex.cli import main
from evidex.cli._app import app


def test_typer_exit_code_is_passed_on() -> None:
    name = "test-exit-three"
    if not any(c.name == name for c in app.registered_commands):

        @app.command(name, hidden=True)
        def _exit_three() -> None:
            raise typer.Exit(3)

    assert main([name]) == 3
