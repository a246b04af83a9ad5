"""The typer app, error-to-exit-code mapping and shared output helpers."""

from __future__ import annotations

import functools
import json
import logging
import os
import re
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from evidex.cli._commands import DESCRIPTION, ROOT_OPTIONS
from evidex.cli._group import LazyGroup
from evidex.errors import ConfigError, EvidexError, UsageError

app = typer.Typer(
    cls=LazyGroup,
    name="evidex",
    help=DESCRIPTION,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    # click's own help layout, not rich's panels: it joins a docstring paragraph's lines and
    # reflows it to the terminal, wraps between words and never cuts an option's name (rich's
    # table did at 80 columns: "--count-inferr…"), and the top-level help imports no rich.
    rich_markup_mode=None,
    # as wide as the terminal (click stops at 80 columns otherwise); every command inherits it
    context_settings={"max_content_width": 10_000},
)
LazyGroup.source = app

if TYPE_CHECKING:
    from rich.console import Console

    err_console: Console


@functools.cache
def _stderr() -> Console:
    from rich.console import Console

    return Console(stderr=True)


def __getattr__(name: str) -> Any:
    """``err_console``, the stderr console of every command, made on first use: ``evidex
    --help`` then imports no rich."""
    if name == "err_console":
        return _stderr()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _show_version(value: bool) -> None:
    if value:
        from evidex._version import __version__

        sys.stdout.write(f"evidex {__version__}\n")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            callback=_show_version,
            is_eager=True,
            help=ROOT_OPTIONS["--version"],
        ),
    ] = False,
) -> None:
    """The options of ``evidex`` itself (its help is :func:`evidex.cli._commands.help_text`)."""


EXIT_OK, EXIT_INTERNAL, EXIT_USAGE = 0, 1, 2

TWO_WORD_COMMANDS = frozenset({"eval compare"})
"""Commands named by two words whose first is also a command of its own: ``evidex eval JOB``
takes any word as its job, so ``evidex eval compare`` is registered under its whole name and
the two words of the command line are joined into it before parsing."""


def joined(argv: list[str]) -> list[str]:
    """``argv`` with the two words of a :data:`TWO_WORD_COMMANDS` command joined into one."""
    if len(argv) >= 2 and f"{argv[0]} {argv[1]}" in TWO_WORD_COMMANDS:
        return [f"{argv[0]} {argv[1]}", *argv[2:]]
    return argv


def run(argv: list[str]) -> int:
    """Run the app and map errors to exit codes: usage/input → 2, anything else → 1."""
    argv = joined(argv)
    try:
        # Without standalone mode, click returns the code of a ``typer.Exit(code)`` instead of
        # exiting: pass it on, so commands such as ``gate`` can signal a missed floor.
        code = app(args=argv, prog_name="evidex", standalone_mode=False)
    except UsageError as exc:
        _complain("error", exc)
        return EXIT_USAGE
    except EvidexError as exc:
        _complain("failed", exc)
        return EXIT_INTERNAL
    except typer.Exit as exc:
        return int(exc.exit_code or 0)
    except typer.Abort:
        _stderr().print("aborted")
        return EXIT_INTERNAL
    except Exception as exc:  # click's usage errors and the truly unexpected
        import click

        if isinstance(exc, click.exceptions.UsageError):
            exc.show()
            return EXIT_USAGE
        if isinstance(exc, click.exceptions.ClickException):
            exc.show()
            return exc.exit_code
        if isinstance(exc, typer.TyperException) and hasattr(exc, "show"):
            # typer >= 0.2x parses with its own copy of click: a bad option value or a missing
            # option arrives here, carrying click's exit code (2 for usage errors).
            exc.show()
            return int(getattr(exc, "exit_code", EXIT_INTERNAL))
        logging.getLogger("evidex").exception("internal error")
        _complain("internal error", f"{type(exc).__name__}: {exc}")
        return EXIT_INTERNAL
    return code if isinstance(code, int) else EXIT_OK


def _complain(label: str, message: object) -> None:
    """One stderr line per error. The message is redacted, escaped (text such as
    ``evidex[llm]`` is not rich markup) and not hard-wrapped, so paths and hints survive pipes
    and greps whole."""
    from rich.markup import escape

    _stderr().print(
        f"[bold red]{label}:[/] {escape(redact(str(message)))}", highlight=False, soft_wrap=True
    )


_SECRET_NAME = re.compile(r"(API_?KEY|TOKEN|SECRET|PASSWORD|PASSWD)", re.IGNORECASE)
_URL_PASSWORD = re.compile(r"(://[^:/@\s]+:)[^@\s]+@")
MASK = "***"


def redact(text: str) -> str:
    """``text`` with secrets masked: values of secret-looking environment variables (API keys,
    tokens, passwords) and the password part of URLs."""
    for name, value in os.environ.items():
        if len(value) >= 6 and _SECRET_NAME.search(name) and value in text:
            text = text.replace(value, MASK)
    return _URL_PASSWORD.sub(rf"\1{MASK}@", text)


def renamed(new: str, value: Any, old: str, old_value: Any) -> Any:
    """The value of option ``new``, taking the value of its former spelling ``old`` (a hidden
    option kept for scripts) with a deprecation note on stderr; both at once is an error."""
    if old_value is None:
        return value
    if value is not None:
        raise ConfigError(f"{old} is the old spelling of {new}: give {new} only")
    from rich.text import Text

    _stderr().print(
        Text(f"warning: {old} is deprecated; use {new} (the same option)", style="yellow")
    )
    return old_value


def writable_output(output: Path | None) -> Path | None:
    """Check, before any judging, that ``output`` can be written (a typer callback of
    ``--output``): its folder exists and takes files, and it is not a folder itself. Else a
    :class:`ConfigError` (exit 2) rather than a traceback once every judgment has been paid for.
    """
    if output is None or str(output) == "-":
        return output
    folder = output.parent
    problem = None
    if output.is_dir():
        problem = f"{output} is a directory; name a file in it"
    elif not folder.exists():
        problem = f"the folder {folder} does not exist"
    elif not folder.is_dir():
        problem = f"{folder} is not a directory"
    elif not os.access(folder, os.W_OK | os.X_OK) or (
        output.exists() and not os.access(output, os.W_OK)
    ):
        problem = f"no permission to write {output}"
    if problem:
        raise ConfigError(f"cannot write --output {output}: {problem}")
    return output


def write_json(data: Any, output: Path | None) -> None:
    """Write JSON to ``output`` or stdout (stdout stays machine-readable: no rich markup)."""
    text = json.dumps(data, indent=2, ensure_ascii=False, default=str)
    if output is None or str(output) == "-":
        sys.stdout.write(text + "\n")
    else:
        output.write_text(text + "\n", encoding="utf-8")
        _stderr().print(f"wrote {output}")


def write_lines(lines: Iterable[str], output: Path | None, wrote: str | None = None) -> None:
    """Write text lines (JSON lines, a TREC run) to ``output`` or stdout; ``wrote`` is what
    stderr says after writing a file (default: ``wrote FILE``)."""
    text = "".join(line + "\n" for line in lines)
    if output is None or str(output) == "-":
        sys.stdout.write(text)
    else:
        output.write_text(text, encoding="utf-8")
        _stderr().print(wrote or f"wrote {output}")
