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
