"""The command line against bad and huge input: bytes that are not UTF-8 exit 2 whether they
come from a file or from stdin, text that is not valid Unicode exits 2 naming where, a text over
the service's limit is read and fitted to the judge; and every ``--json`` list is one JSON
array, the shape the API returns."""

from __future__ import annotations

import io
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from evidex.cli import main
from evidex.preflight import MAX_TEXT_CHARS
from tests.scripted import ScriptedJudge, tier_reply
from tests.test_cli import run, squash, write_jsonl

NOT_UTF8 = b'{"passage_id": "a", "text": "caf\xe9"}\n'


@pytest.fixture
def passages_file(tmp_path: Path) -> Path:
    rows = [{"passage_id": f"p{i}", "text": f"Passage {i} is about vitamin D."} for i in range(3)]
    return write_jsonl(tmp_path / "passages.jsonl", rows)


def _stdin(monkeypatch: pytest.MonkeyPatch, data: bytes) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data), encoding="utf-8"))


def test_bytes_that_are_not_utf8_exit_2_from_stdin_as_from_a_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "latin1.jsonl"
    path.write_bytes(NOT_UTF8)
    code, out, err = run(capsys, "tier", "-q", "q", "-p", str(path), "-j", "scripted")
    assert (code, out) == (2, "")
    assert squash(f"{path}: not UTF-8 text (byte 32)") in squash(err)
    _stdin(monkeypatch, NOT_UTF8)
    code, out, err = run(capsys, "tier", "-q", "q", "-p", "-", "-j", "scripted")
    assert (code, out) == (2, "")
    assert squash("<stdin>: not UTF-8 text (byte 32)") in squash(err)
    assert "Traceback" not in err


def test_stdin_is_read_as_utf8_whatever_the_locale(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    scripted: Callable[..., list[ScriptedJudge]],
) -> None:
    scripted(tier_reply)
    data = '{"passage_id": "a", "text": "Caf\u00e9 au lait has vitamin D."}\n'.encode()
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data), encoding="ascii"))
    code, out, _ = run(capsys, "tier", "-q", "q", "-p", "-", "-j", "scripted")
    assert code == 0
    assert json.loads(out)["classifications"][0]["passage_id"] == "a"


def test_a_lone_surrogate_in_a_passage_exits_2_naming_the_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_jsonl(tmp_path / "p.jsonl", ['{"passage_id": "a", "text": "ok"}', ""])
    path.write_text(path.read_text() + '{"passage_id": "b", "text": "x\\ud800"}\n')
    code, _, err = run(capsys, "tier", "-q", "q", "-p", str(path), "-j", "scripted")
    assert code == 2
    assert squash(f"{path}:3: text: holds a lone surrogate (U+D800)") in squash(err)


def test_a_query_that_is_not_unicode_exits_2(
    capsys: pytest.CaptureFixture[str],
    passages_file: Path,
    scripted: Callable[..., list[ScriptedJudge]],
) -> None:
    built = scripted(tier_reply)
    # an argument with bytes that are not UTF-8 reaches Python as lone surrogates
    query = b"caf\xe9".decode("utf-8", "surrogateescape")
    code, out, err = run(capsys, "tier", "-q", query, "-p", str(passages_file), "-j", "scripted")
    assert (code, out) == (2, "")
    assert squash("the query holds a lone surrogate (U+DCE9)") in squash(err)
    assert [j.requests for j in built] == [[]]  # refused before any judge call


def test_a_text_longer_than_the_services_limit_is_read_and_fitted_to_the_judge(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    passages_file: Path,
    scripted: Callable[..., list[ScriptedJudge]],
) -> None:
    """A long document on the user's own disk is the library's case, not the service's: it is
    read whole and preflight cuts it to the judge's window, with a truncated event."""
    scripted(tier_reply)
    long = "word " * (MAX_TEXT_CHARS // 5 + 1)
    path = write_jsonl(tmp_path / "long.jsonl", [{"passage_id": "a", "text": long}])
    code, out, err = run(capsys, "tier", "-q", "q", "-p", str(path), "-j", "scripted")
    assert code == 0, err
    result = json.loads(out)
    assert result["classifications"][0]["passage_id"] == "a"
    assert any(e["kind"] == "truncated" for e in result["events"])
    labels = tmp_path / "labels.yaml"
    labels.write_text("- label: a\n  description: the first\n- label: b\n  description: two\n")
    answer = tmp_path / "input.txt"
    answer.write_text(long)
    code, _, err = run(
        capsys,
        "classify",
        "--input-file",
        str(answer),
        "-p",
        str(passages_file),
        "--labels",
        str(labels),
        "-j",
        "scripted",
    )
    assert f"at most {MAX_TEXT_CHARS} characters" not in err


# --------------------------------------------------------------------------- --max-text-chars

JOB_COMMANDS = [
    ["tier"],
    ["rerank"],
    ["classify"],
    ["audit"],
    ["sufficiency"],
    *(["bulk", job] for job in ("tier", "rerank", "classify", "audit", "sufficiency")),
]


@pytest.mark.parametrize("command", JOB_COMMANDS, ids=" ".join)
def test_every_job_command_has_the_max_text_chars_flag(command: list[str]) -> None:
    import typer.main

    from evidex.cli import _register, app

    _register()
    found: Any = typer.main.get_command(app)
    for name in command:
        found = found.commands[name]
    [flag] = [p for p in found.params if "--max-text-chars" in p.opts]
    assert flag.default is None and "Default: any length" in (flag.help or "")


def _long_inputs(tmp_path: Path) -> dict[str, list[str]]:
    """Each job command on input whose one long text (80 characters) is a passage's."""
    long = "Vitamin D is made in the skin when sunlight reaches it, then stored in fat. " * 1
    assert len(long) > 60
    passages = write_jsonl(
        tmp_path / "p.jsonl",
        [{"passage_id": "a", "text": "Short."}, {"passage_id": "b", "text": long}],
    )
    labels = tmp_path / "labels.yaml"
    labels.write_text("- label: a\n  description: the first\n- label: b\n  description: two\n")
    p = ["-p", str(passages)]
    return {
        "tier": ["tier", "-q", "q", *p],
        "rerank": ["rerank", "-q", "q", *p],
        "classify": ["classify", "--input", "hi", *p, "--labels", str(labels)],
        "audit": ["audit", "--answer", "Vitamin D is made in skin.", *p],
        "sufficiency": ["sufficiency", "-q", "q", *p],
    }


def test_max_text_chars_refuses_a_longer_text_naming_the_field_and_the_flag(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    scripted: Callable[..., list[ScriptedJudge]],
) -> None:
    built = scripted()
    for job, argv in _long_inputs(tmp_path).items():
        code, out, err = run(capsys, *argv, "-j", "scripted", "--max-text-chars", "60")
        assert (code, out) == (2, ""), (job, err)
        said = squash(err)
        assert squash("passages.1.text: at most 60 characters (got 76)") in said, (job, err)
        assert squash("raise --max-text-chars") in said, (job, err)
    assert all(j.requests == [] for j in built)  # refused before any judge call


def test_a_bulk_line_over_max_text_chars_is_a_bad_line_naming_the_flag(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    scripted: Callable[..., list[ScriptedJudge]],
) -> None:
    scripted(tier_reply)
    tasks = write_jsonl(
        tmp_path / "in.jsonl",
        [
            {"id": 1, "query": "q", "passages": [{"passage_id": "a", "text": "Short."}]},
            {"id": 2, "query": "q", "passages": [{"passage_id": "a", "text": "x" * 61}]},
        ],
    )
    out = tmp_path / "out.jsonl"
    argv = ["bulk", "tier", "-i", str(tasks), "-o", str(out), "-j", "scripted"]
    code, _, err = run(capsys, *argv, "--max-text-chars", "60")
    assert code == 0, err
    assert [json.loads(line)["id"] for line in out.read_text().splitlines()] == [1]
    [bad] = [json.loads(line) for line in (tmp_path / "out.errors.jsonl").read_text().splitlines()]
    assert bad["id"] == 2 and "at most 60 characters (got 61)" in bad["error"]
    assert bad["kind"] == "refused" and "--max-text-chars" in bad["error"]


def test_without_the_flag_every_job_command_fits_the_long_text_to_the_judge(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    scripted: Callable[..., list[ScriptedJudge]],
) -> None:
    """A text longer than the judge reads is cut to its window, with a ``truncated`` event, by
    every job command, as by the library; the limit is the user's choice, not a default."""
    built = scripted()
    long = "Vitamin D is made in the skin. " * 2000  # some 15,000 tokens, over the window
    passages = write_jsonl(tmp_path / "long.jsonl", [{"passage_id": "a", "text": long}])
    for argv in _long_inputs(tmp_path).values():
        argv = [passages.as_posix() if a.endswith("p.jsonl") else a for a in argv]
        code, out, err = run(capsys, *argv, "-j", "scripted")
        assert code == 0, (argv, err)
        assert '"kind": "truncated"' in out, argv
    assert all(j.requests for j in built) and len(built) == 5


def test_the_library_takes_the_same_limits() -> None:
    import evidex
    from evidex.errors import InputError
    from evidex.preflight import InputLimits

    with pytest.raises(InputError, match=r"passages\.0: at most 5 characters \(got 6\)"):
        evidex.tier("q", ["sixsix"], limits=InputLimits(max_text_chars=5), judge="scripted")
    with pytest.raises(InputError, match=r"item 1: query: at most 5 characters"):
        evidex.tier_many(
            [{"query": "q", "passages": ["a"]}, {"query": "longer", "passages": ["a"]}],
            limits=InputLimits(max_text_chars=5),
            judge="scripted",
        )


# --------------------------------------------------------------------------- one JSON shape


def test_every_json_list_of_the_cli_is_the_array_the_api_returns(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    passages_file: Path,
    scripted: Callable[..., list[ScriptedJudge]],
) -> None:
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from evidex.service import create_app
    from evidex.store import open_store

    db = f"sqlite:///{tmp_path / 'shared.db'}"
    with_db = ["--db", db]
    scripted("nope", "nope", "nope")  # a fallback: one review item, and audit-log rows
    code, out, _ = run(
        capsys, "tier", "-q", "q", "-p", str(passages_file), "-j", "scripted", *with_db
    )
    assert code == 0, out
    assert main(["keys", "create", "--role", "reviewer", "--name", "ana", *with_db]) == 0
    capsys.readouterr()
    store = open_store(db)
    client = TestClient(create_app(store, auth="off", allowed_hosts=["testserver"]))
    pairs = [
        (["review", "list", "--json", "--status", "all"], "/review?status=all"),
        (["log", "--json", "--last", "5"], "/log?last=5"),
        (["keys", "list", "--json"], "/keys"),
    ]
    for argv, path in pairs:
        code, out, _ = run(capsys, *argv, *with_db)
        assert code == 0
        printed = json.loads(out)  # one document: a JSON array, not JSON Lines
        assert isinstance(printed, list) and printed, argv
        assert printed == client.get(path).json(), argv
    store.close()
