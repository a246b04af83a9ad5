"""The ``evidex`` command line: a thin layer over the library.

Each command lives in its own module and registers itself on :data:`app`. Exit codes: 0 when
every item has a result (fallbacks included), 2 on bad input or usage, 1 on internal errors.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys

from evidex.cli._app import app, run

__all__ = ["app", "main"]


def _register() -> None:
    """Import every public module of this package: each registers its commands on ``app``."""
    for info in pkgutil.iter_modules(__path__):
        if not info.name.startswith("_"):
            importlib.import_module(f"{__name__}.{info.name}")


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``evidex`` script; returns the exit code."""
    _register()
    return run(argv if argv is not None else sys.argv[1:])
