"""Write a benchmark's figures into its own section of docs/benchmarks.md.

Each benchmark owns the block between ``<!-- bench:NAME -->`` and ``<!-- /bench:NAME -->``;
re-running it replaces only that block, so figures and the command that made them stay together.
"""

from __future__ import annotations

import datetime as _dt
import fcntl
import platform
import shlex
import sys
from pathlib import Path

DOC = Path(__file__).resolve().parent.parent / "docs" / "benchmarks.md"
HEADER = (
    "# Benchmarks\n\n"
    "Figures measured on this project's 2-core CI-class machine; each section names the command "
    "that produced it and is rewritten when that command runs again.\n"
)


def command_line() -> str:
    """The command as a user would type it: paths inside the project or beside it (the
    shared data) written relative to the project, never as this machine's absolute paths."""
    project = str(Path(__file__).resolve().parent.parent)
    beside = str(Path(project).parent)

    def relative(arg: str) -> str:
        if arg.startswith(project + "/"):
            return arg[len(project) + 1 :]
        if arg.startswith(beside + "/"):
            return "../" + arg[len(beside) + 1 :]
        return arg

    return "python " + " ".join(shlex.quote(relative(a)) for a in sys.argv)


def write_section(name: str, title: str, body: str, command: str | None = None) -> None:
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    block = (
        f"<!-- bench:{name} -->\n## {title}\n\n"
        f"Command: `{command or command_line()}`  \n"
        f"Measured: {stamp} on {platform.machine()}, Python {platform.python_version()}\n\n"
        f"{body.strip()}\n<!-- /bench:{name} -->"
    )
    DOC.parent.mkdir(parents=True, exist_ok=True)
    with open(DOC.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        text = DOC.read_text(encoding="utf-8") if DOC.exists() else HEADER
        start, end = f"<!-- bench:{name} -->", f"<!-- /bench:{name} -->"
        if start in text and end in text:
            before, rest = text.split(start, 1)
            _, after = rest.split(end, 1)
            text = before + block + after
        else:
            text = text.rstrip("\n") + "\n\n" + block + "\n"
        DOC.write_text(text, encoding="utf-8")
    print(f"wrote section {name!r} of {DOC}")
