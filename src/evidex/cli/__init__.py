"""The ``evidex`` command line: a thin layer over the library, as the HTTP service is.

Each command lives in its own public module (``tier``, ``rerank``, ``classify``, ``audit``,
``bulk``, ``eval``, ``log``, ``review``, ``demo``, ``serve``) and registers itself on :data:`app`;
the private modules hold what the commands share: ``_app`` the typer app, the error-to-exit-code
mapping and JSON output, ``_io`` the input readers, the common ``Annotated`` options and the
judge, store and progress plumbing, ``_demo_types`` and ``_demo_view`` the demo's data and its
rendering. Exit codes: 0 when every item has a result (fallbacks included), 2 on bad input or
usage, 1 on internal errors.

What it may import: the library's public modules (``evidex.jobs``, ``evidex.evaluate``,
``evidex.store``, ``evidex.types``, ``evidex.config``, ``evidex.errors`` ...), never another
package's private modules; the work itself (grading, validation, retries, storage) stays in
the library, so that the CLI, the service and a Python caller behave the same. What two
commands share goes into ``_io`` or ``_app``, not from one command module into another.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from evidex.cli._app import app

__all__ = ["app", "main"]


def __getattr__(name: str) -> object:
    """``app`` loads typer and rich on first use: ``evidex --version`` needs neither."""
    if name == "app":
        from evidex.cli._app import app

        return app
    raise AttributeError(f"module 'evidex.cli' has no attribute {name!r}")


def _register() -> None:
    """Import every public module of this package: each registers its commands on ``app``
    (the tests and the docs read the whole app; a run loads only its command)."""
    for info in pkgutil.iter_modules(__path__):
        if not info.name.startswith("_"):
            importlib.import_module(f"{__name__}.{info.name}")
    from evidex.cli._job_command import add_job_commands

    add_job_commands()  # a registered job without a command module of its own


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``evidex`` script; returns the exit code. ``evidex --version`` is
    answered before any command is loaded, and ``evidex --help`` from the table of commands
    (:mod:`evidex.cli._commands`) before typer is; otherwise only the command that runs
    imports its module, so a script that checks the version or a shell that asks for help pays
    for nothing else."""
    args = list(argv if argv is not None else sys.argv[1:])
    if args == ["--version"]:
        from evidex._version import __version__

        sys.stdout.write(f"evidex {__version__}\n")
        return 0
    if args == ["--help"]:  # what the top-level group would print, without loading typer
        from evidex.cli._commands import help_text

        sys.stdout.write(help_text())
        return 0
    from evidex.cli._app import run

    return run(args)
