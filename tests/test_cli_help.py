"""Every command's ``--help`` shows its help texts whole: typer's markdown mode reads ``<JOB>``
as an HTML tag and drops it, so each word a help text holds must reach the rendered page."""

from __future__ import annotations

import re
from typing import Any

import pytest
import typer
import typer.main

from evidex.cli import _register, app, main


def _commands() -> list[tuple[list[str], Any]]:
    """Every visible command and group, as its argv path and its click command (typer parses
    with its own copy of click, hence ``Any`` and duck typing)."""
    _register()
    root = typer.main.get_command(app)
    found: list[tuple[list[str], Any]] = []

    def walk(path: list[str], command: Any) -> None:
        found.append((path, command))
        if hasattr(command, "commands"):
            for name, sub in sorted(command.commands.items()):
                if not sub.hidden:
                    walk([*path, name], sub)

    walk([], root)
    return found


COMMANDS = _commands()


def _words(text: str) -> set[str]:
    """The words of a text as a reader sees them: markup quotes and escapes aside."""
    text = text.replace("\\", "").replace("`", "")
    return {w.strip(".,;:()") for w in re.split(r"[\s│╭╮╰╯─]+", text) if w.strip(".,;:()")}


@pytest.mark.parametrize(
    ("path", "command"), COMMANDS, ids=[" ".join(p) or "evidex" for p, _ in COMMANDS]
)
def test_help_shows_every_word_of_every_help_text(
    path: list[str],
    command: Any,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("COLUMNS", "400")
    assert main([*path, "--help"]) == 0
    shown = _words(capsys.readouterr().out)
    texts = [getattr(p, "help", None) for p in command.params if not getattr(p, "hidden", False)]
    texts.append((command.help or "").split("\f")[0])
    missing = {w for text in texts if text for w in _words(text)} - shown
    assert not missing, missing


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        (["tier"], "EVIDEX_JUDGE_<JOB>"),
        (["rerank"], "qid<TAB>query"),
        (["eval"], "EVIDEX_JUDGE_<JOB>"),
        (["bulk", "rerank"], "EVIDEX_JUDGE_<JOB>"),
        (["classify"], "EVIDEX_PROMPT_<JOB>"),
    ],
)
def test_angle_brackets_survive_the_help(
    path: list[str],
    expected: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("COLUMNS", "400")
    assert main([*path, "--help"]) == 0
    assert expected in capsys.readouterr().out


def test_version_prints_the_installed_version(capsys: pytest.CaptureFixture[str]) -> None:
    from evidex._version import __version__

    assert main(["--version"]) == 0
    assert capsys.readouterr().out == f"evidex {__version__}\n"
