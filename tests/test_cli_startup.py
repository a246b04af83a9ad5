"""``evidex --help`` lists every command from one table without importing a command module, the
table says what the modules register, and a command's own ``--help`` is still its full help.

The time these take is measured by ``bench/startup.py`` (docs/benchmarks.md, ``startup``), not
here; these tests hold what makes them cheap.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from typing import Any

import pytest
import typer.main

from evidex.cli import _register, app
from evidex.cli._commands import ROOT_OPTIONS, commands
from evidex.jobs import definition, job_names
from tests.test_architecture import HEAVY


def _run(code: str, **env: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, **env},
    )
    return done.stdout


def _registered() -> dict[str, Any]:
    """Every command as evidex's modules register it (all of them imported; a command a test
    added to the app is left out)."""
    _register()
    commands = typer.main.get_command(app).commands  # type: ignore[attr-defined]
    return {n: c for n, c in commands.items() if _module(c).startswith("evidex.cli")}


def _module(command: Any) -> str:
    """The module that registered a command: its callback's, or its first subcommand's."""
    if command.callback is not None:
        return str(command.callback.__module__)
    return _module(next(iter(command.commands.values())))


def _words(text: str) -> str:
    return " ".join(text.split())


def test_the_table_lists_what_the_modules_register() -> None:
    table, registered = commands(), _registered()
    assert list(table) == [*job_names(), *(n for n in table if n not in job_names())]
    assert set(table) == set(registered), "add a command to evidex.cli._commands, or drop it"
    for name, entry in table.items():
        command = registered[name]
        assert _module(command) == entry.module, name
        first = _words((command.help or "").split("\n\n")[0])
        assert first.startswith(_words(entry.help).rstrip(".")), (name, first)


def test_a_jobs_summary_is_its_registered_one() -> None:
    for name in job_names():
        assert commands()[name].help == definition(name).summary


def test_the_top_level_help_imports_no_command_module_and_nothing_heavy() -> None:
    probe = (
        "import sys; from evidex.cli import main; code = main(['--help']); "
        "print(code, sorted(m for m in sys.modules if m.startswith(('evidex.cli.', 'evidex.jobs',"
        " 'evidex.store', 'evidex.judges', 'rich', 'pydantic', 'typer', 'click')) or m in "
        f"{HEAVY!r}))"
    )
    last = _run(probe, COLUMNS="100").strip().splitlines()[-1]
    code, loaded = last.split(" ", 1)
    assert code == "0"
    assert json.loads(loaded.replace("'", '"')) == ["evidex.cli._commands"]


@pytest.mark.parametrize("columns", ["80", "132"])
def test_the_quick_help_is_what_the_app_prints(columns: str) -> None:
    """``evidex --help`` answered before typer loads is the top-level group's own help, and
    names the options the app has, with their help."""
    quick = _run("from evidex.cli import main; main(['--help'])", COLUMNS=columns)
    slow = _run("from evidex.cli._app import run; run(['--help'])", COLUMNS=columns)
    assert quick == slow
    root = typer.main.get_command(app)
    options = {o: p.help for p in root.get_params(root.context_class(root)) for o in p.opts}
    assert options == ROOT_OPTIONS


def test_the_top_level_help_lists_every_command_with_its_line() -> None:
    out = _run("from evidex.cli import main; main(['--help'])", COLUMNS="80")
    listed = out.split("Commands:", 1)[1]
    for name, entry in commands().items():
        assert re.search(rf"^  {re.escape(name)}  ", listed, re.M), name
        assert _words(entry.help) in _words(listed), name


@pytest.mark.parametrize("job", job_names())
def test_a_job_commands_own_help_is_its_full_option_help(job: str) -> None:
    """In a fresh process, as a shell runs it: only that command's module is loaded, and its
    help names every option of the job's Options model and the shared run flags."""
    out = _run(f"from evidex.cli import main; main([{job!r}, '--help'])", COLUMNS="200")
    assert out.startswith(f"Usage: evidex {job} [OPTIONS]")
    flags = [o for p in _registered()[job].params if not p.hidden for o in p.opts]
    assert {"--judge", "--judge-option", "--db", "--output", "--max-text-chars"} <= set(flags)
    assert len(flags) > 10
    for flag in flags:
        assert re.search(rf"(^|[\s,/]){re.escape(flag)}\b", out), flag


def test_a_command_runs_with_only_its_module_loaded() -> None:
    probe = (
        "import sys; from evidex.cli import main; code = main(['log', '--last', '1']); "
        "print(code, sorted(m for m in sys.modules if m.startswith('evidex.cli.')))"
    )
    tmp = os.environ.get("EVIDEX_DB", "")
    last = _run(probe, EVIDEX_DB=tmp).strip().splitlines()[-1]
    code, loaded = last.split(" ", 1)
    assert code == "0"
    modules = json.loads(loaded.replace("'", '"'))
    assert "evidex.cli.log" in modules
    assert not {f"evidex.cli.{m}" for m in ("tier", "audit", "demo", "eval", "serve")} & set(
        modules
    )
