"""The command line, driven through its real entry point ``evidex.cli.main`` (and once as the
installed ``evidex`` script), with a scripted judge registered under the spec ``scripted``."""

from __future__ import annotations

import io
import json
import logging
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from evidex.cli import main
from evidex.cli._io import read_passages, redact
from evidex.errors import InputError
from evidex.judging import JudgeRequest
from evidex.store import open_store
from tests.scripted import ScriptedJudge, tier_reply

PLANTED_KEY = "sk-planted-9f8e7d6c5b4a3210"


def squash(text: str) -> str:
    """Without whitespace: rich wraps long lines (paths included) at the console width."""
    return re.sub(r"\s+", "", text)


def write_jsonl(path: Path, rows: list[Any]) -> Path:
    path.write_text("\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows) + "\n")
    return path


@pytest.fixture
def passages_file(tmp_path: Path) -> Path:
    rows = [
        {"passage_id": f"p{i}", "text": f"Passage number {i} says something about topic {i}."}
        for i in range(1, 13)
    ]
    rows[3] = {"id": "p4", "text": rows[3]["text"], "title": "T", "rank": 4, "score": 0.5}
    return write_jsonl(tmp_path / "passages.jsonl", rows)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def tier_run(
    capsys: pytest.CaptureFixture[str], passages: Path, *extra: str
) -> tuple[int, str, str]:
    """``evidex tier`` on ``passages`` with the scripted judge and the query "q"."""
    return run(capsys, "tier", "-q", "q", "-p", str(passages), "-j", "scripted", *extra)


# --------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("lines", "where", "what"),
    [
        (
            ['{"passage_id": "a", "text": "ok"}', '{"passage_id": "b", "text": '],
            ":2",
            "malformed JSON",
        ),
        (['{"passage_id": "a", "body": "no text here"}'], ":1", "no 'text' field"),
        (['["a", "b"]'], ":1", "expected a JSON object, got an array"),
        (['{"passage_id": "a", "text": "  "}'], ":1", "text must not be empty"),
        (['{"text": "no id"}'], ":1", "no 'passage_id' (or 'id') field"),
        (['{"passage_id": "a", "text": "x", "colour": "red"}'], ":1", "unknown field 'colour'"),
        (
            ['{"passage_id": "a", "text": "x"}', "", '{"id": "a", "text": "y"}'],
            ":3",
            "passage id 'a' was already used on line 1",
        ),
        ([], "", "the file is empty"),
        (["", "   "], "", "the file is empty"),
    ],
    ids=[
        "malformed",
        "no-text",
        "not-object",
        "blank-text",
        "no-id",
        "extra-field",
        "dup-id",
        "empty",
        "blank-lines-only",
    ],
)
def test_bad_passages_file_exits_2_naming_file_and_line(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    scripted: Callable[..., list[ScriptedJudge]],
    lines: list[str],
    where: str,
    what: str,
) -> None:
    built = scripted()
    path = tmp_path / "in.jsonl"
    path.write_text("\n".join(lines))
    code, out, err = run(capsys, "tier", "-q", "a question", "-p", str(path), "--judge", "scripted")
    assert code == 2
    assert out == ""
    assert squash(f"{path}{where}:") in squash(err)
    assert squash(what) in squash(err)
    assert built == []  # rejected before any judge was built


def test_bad_stdin_names_stdin_and_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO('{"passage_id": "a", "text": "x"}\nnot json\n'))
    code, _, err = run(capsys, "tier", "-q", "q", "-p", "-")
    assert code == 2
    assert "<stdin>:2:" in squash(err) and "malformedJSON" in squash(err)


def test_missing_file_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "tier", "-q", "q", "-p", str(tmp_path / "nope.jsonl"))
    assert code == 2
    assert squash(f"{tmp_path / 'nope.jsonl'}: no such file") in squash(err)


def test_error_text_is_not_read_as_markup(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "run[bold].jsonl"
    path.write_text("[1, 2]\n")
    code, _, err = run(capsys, "tier", "-q", "q", "-p", str(path))
    assert code == 2
    assert f"{path}:1: expected a JSON object, got an array" in err


@pytest.mark.parametrize("query", ["", "   "])
def test_empty_query_exits_2(
    query: str, passages_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(capsys, "tier", "-q", query, "-p", str(passages_file))
    assert code == 2
    assert "--query:thequeryisempty" in squash(err)


def test_unknown_judge_spec_exits_2_and_lists_known_judges(
    passages_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(capsys, "tier", "-q", "q", "-p", str(passages_file), "--judge", "gpt5")
    assert code == 2
    assert "unknownjudge'gpt5'" in squash(err)
    assert "local:minilm" in err and "openai:MODEL" in err


def test_base_url_with_a_local_judge_is_refused(
    passages_file: Path,
    capsys: pytest.CaptureFixture[str],
    scripted: Callable[..., list[ScriptedJudge]],
) -> None:
    scripted()
    code, _, err = tier_run(capsys, passages_file, "--base-url", "http://127.0.0.1:9/v1")
    assert code == 2
    assert "--base-url applies to openai: judges only" in err


@pytest.mark.parametrize(
    ("spec", "takes"),
    [
        ("openai:gpt-4o-mini", True),
        ("cascade:local:minilm,openai:gpt-4o-mini", True),
        ("cascade:local:minilm,local:qwen", False),
        ("local:minilm", False),
    ],
)
def test_base_url_is_taken_by_an_openai_judge_or_a_cascade_with_an_openai_stage(
    spec: str, takes: bool
) -> None:
    """One rule for the job commands and the demo: a cascade without an openai: stage has
    nowhere to send the URL, so it is refused like any other local judge."""
    from evidex.cli._judge import make_judge, takes_base_url
    from evidex.errors import ConfigError

    assert takes_base_url(spec) is takes
    if not takes:
        with pytest.raises(ConfigError, match="--base-url applies to openai: judges only"):
            make_judge(spec, "tier", ["http://127.0.0.1:9/v1"])


def test_judge_options_reach_the_judge_and_a_misspelled_one_exits_2(
    passages_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = f"sqlite:///{passages_file.parent / 'audit.db'}"
    base = ("tier", "-q", "topic 3", "-p", str(passages_file), "-j", "local:minilm", "--db", db)
    code, out, err = run(capsys, *base, "--judge-option", "compute=float32")
    assert code == 0, err
    store = open_store(db)
    rows = store.audit_rows(run_id=json.loads(out)["run_id"])
    store.close()
    assert rows and all("float32 compute" in row["model_version"] for row in rows)

    code, _, err = run(capsys, *base, "--judge-option", "compute=fp16")
    assert code == 2 and "compute" in err
    code, _, err = run(capsys, *base, "--judge-option", "computes=float32")
    assert code == 2 and "computes" in err
    code, _, err = run(capsys, *base, "--judge-option", "float32")
    assert code == 2 and "KEY=VALUE" in err


def test_without_judge_the_configured_judge_of_the_job_runs(
    passages_file: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    scripted: Callable[..., list[ScriptedJudge]],
) -> None:
    scripted()
    monkeypatch.setenv("EVIDEX_JUDGE_TIER", "scripted")
    code, out, err = run(capsys, "tier", "-q", "q", "-p", str(passages_file))
    assert code == 0, err
    assert json.loads(out)["judge_id"] == "scripted"


@pytest.mark.parametrize(
    ("extra", "what"),
    [
        (["--batch-size", "3"], "'--batch-size': Input should be greater than or equal to 5"),
        (["--budget", "100"], "give --policy too"),
        (["--risk", "extreme"], "--risk"),
        (["--policy", "loose"], "--policy"),
    ],
)
def test_bad_options_exit_2(
    extra: list[str],
    what: str,
    passages_file: Path,
    capsys: pytest.CaptureFixture[str],
    scripted: Callable[..., list[ScriptedJudge]],
) -> None:
    scripted()
    code, out, err = tier_run(capsys, passages_file, *extra)
    assert code == 2
    assert out == ""
    assert squash(what) in squash(err)


def test_bad_tiers_file_exits_2_naming_it(
    tmp_path: Path, passages_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tiers = tmp_path / "tiers.yaml"
    tiers.write_text("- name: only-one\n  definition: a single tier\n")
    code, _, err = run(capsys, "tier", "-q", "q", "-p", str(passages_file), "--tiers", str(tiers))
    assert code == 2
    assert squash(f"{tiers}: invalid tier definitions") in squash(err)


def test_an_unexpected_failure_exits_1(
    passages_file: Path,
    capsys: pytest.CaptureFixture[str],
    scripted: Callable[..., list[ScriptedJudge]],
) -> None:
    scripted(RuntimeError("the judge crashed"))
    code, out, err = tier_run(capsys, passages_file, "--batch-size", "15")
    assert code == 1
    assert out == ""
    assert "RuntimeError: the judge crashed" in err


# --------------------------------------------------------------------------- success path


def test_tier_prints_every_passage_once_with_provenance(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], scripted: Callable[..., list[ScriptedJudge]]
) -> None:
    rows = [{"passage_id": f"p{i}", "text": f"Fact {i} about the question."} for i in range(1, 8)]
    rows.append({"passage_id": "p8", "text": "Fact 2 about  the question."})  # p2's text again
    path = write_jsonl(tmp_path / "in.jsonl", rows)
    built = scripted(
        lambda r: tier_reply(r, p3={"tier": "irrelevant", "key_evidence_snippet": None})
    )

    code, out, err = run(
        capsys, "tier", "-q", "What facts are there?", "-p", str(path), "-j", "scripted"
    )

    assert code == 0, err
    report = json.loads(out)
    ids = [c["passage_id"] for c in report["classifications"]]
    assert ids == [f"p{i}" for i in range(1, 9)]
    by_id = {c["passage_id"]: c for c in report["classifications"]}
    for c in report["classifications"]:
        assert set(c) >= {
            "passage_id",
            "tier",
            "justification",
            "key_evidence_snippet",
            "source",
            "reason",
        }
        assert c["source"] == "judge" and c["reason"] is None
    assert by_id["p3"]["tier"] == "irrelevant" and by_id["p3"]["key_evidence_snippet"] is None
    assert by_id["p8"]["duplicate_of"] == "p2"
    assert report["tier_summary"] == {
        "directly_supporting_count": 7,
        "contextually_relevant_count": 0,
        "tangentially_related_count": 0,
        "irrelevant_count": 1,
    }
    assert [e["kind"] for e in report["events"]] == ["duplicates_removed"]
    assert report["review_item_ids"] == []
    assert "context" not in report
    # the judge saw each distinct passage exactly once, in one batch: no progress bar
    (judge,) = built
    assert [p.passage_id for r in judge.requests for p in r.payload.passages] == ids[:7]
    assert "batches" not in err


def test_multi_batch_run_shows_a_progress_bar_on_stderr(
    passages_file: Path,
    capsys: pytest.CaptureFixture[str],
    scripted: Callable[..., list[ScriptedJudge]],
) -> None:
    built = scripted(tier_reply, tier_reply, tier_reply)
    code, out, err = tier_run(capsys, passages_file, "--batch-size", "5")
    assert code == 0, err
    assert len(built[0].requests) == 3
    assert "tier" in err and "3/3 batches" in err
    assert len(json.loads(out)["classifications"]) == 12  # stdout stays pure JSON


def test_a_single_long_call_shows_a_heartbeat_on_a_terminal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from rich.console import Console

    from evidex import judges
    from evidex.cli import _app

    monkeypatch.setattr(judges, "JUDGES", dict(judges.JUDGES))
    judges.register_judge("slow", lambda spec, **o: ScriptedJudge([tier_reply], delay_s=1.6))
    screen = io.StringIO()
    terminal = Console(file=screen, force_terminal=True, width=120)
    monkeypatch.setattr(_app, "err_console", terminal)
    rows = [{"passage_id": f"p{i}", "text": f"Passage {i} on topic {i}."} for i in range(3)]
    passages = write_jsonl(tmp_path / "three.jsonl", rows)
    code, out, err = run(capsys, "tier", "-q", "q", "-p", str(passages), "-j", "slow")
    assert code == 0, err
    assert len(json.loads(out)["classifications"]) == 3  # one batch: one judge call
    shown = screen.getvalue()
    assert "tier: waiting for the judge" in shown
    assert "0:00:01" in shown  # the elapsed time ticks while the call runs


def test_policy_adds_the_selected_context_and_output_file(
    tmp_path: Path,
    passages_file: Path,
    capsys: pytest.CaptureFixture[str],
    scripted: Callable[..., list[ScriptedJudge]],
) -> None:
    def reply(request: JudgeRequest) -> dict[str, Any]:
        return tier_reply(
            request,
            p1={"tier": "contextually-relevant"},
            p2={"tier": "irrelevant", "key_evidence_snippet": None},
        )

    scripted(reply, reply)
    target = tmp_path / "out.json"
    code, out, err = tier_run(
        capsys, passages_file, "--policy", "strict", "--budget", "40", "-o", str(target)
    )
    assert code == 0, err
    assert out == ""
    context = json.loads(target.read_text())["context"]
    assert context["policy"] == "strict" and context["token_budget"] == 40
    # every passage is ~13 tokens: three of the ten top-tier passages fit in 40
    assert [i["passage_id"] for i in context["items"]] == ["p3", "p4", "p5"]
    left = {g["passage_id"]: g["reason"] for g in context["left_out"]}
    assert left["p1"] == left["p2"] == "policy"
    assert left["p6"] == "budget"
    assert len(context["items"]) + len(left) == 12


@pytest.mark.parametrize(
    ("target", "what"),
    [("missing/out.json", "does not exist"), ("afile/out.json", "not a directory"), (".", "")],
)
def test_an_output_that_cannot_be_written_exits_2_before_any_judging(
    target: str,
    what: str,
    tmp_path: Path,
    passages_file: Path,
    capsys: pytest.CaptureFixture[str],
    scripted: Callable[..., list[ScriptedJudge]],
) -> None:
    (tmp_path / "afile").write_text("x")
    built = scripted(tier_reply, tier_reply)
    code, out, err = tier_run(capsys, passages_file, "-o", str(tmp_path / target))
    assert code == 2 and out == ""
    assert "Traceback" not in err and "internal error" not in err
    assert what in squash(err) or what in err
    assert "--output" in err or "cannot write" in err
    assert all(not judge.requests for judge in built)  # nothing was judged


def test_custom_tiers_and_examples_files(
    tmp_path: Path,
    passages_file: Path,
    capsys: pytest.CaptureFixture[str],
    scripted: Callable[..., list[ScriptedJudge]],
) -> None:
    tiers = tmp_path / "tiers.yaml"
    tiers.write_text(
        "tiers:\n  - {name: useful, definition: helps answer}\n"
        "  - {name: useless, definition: does not help}\nfallback_tier: useful\n"
    )
    examples = tmp_path / "examples.jsonl"
    write_jsonl(
        examples,
        [
            {
                "query": "Q?",
                "passage": "P.",
                "tier": "useless",
                "justification": "It is about something else.",
            }
        ],
    )
    built = scripted(lambda r: tier_reply(r, tier="useful"), lambda r: tier_reply(r, tier="useful"))
    code, out, err = tier_run(
        capsys, passages_file, "--tiers", str(tiers), "--examples", str(examples)
    )
    assert code == 0, err
    assert json.loads(out)["tier_summary"] == {"useful_count": 12, "useless_count": 0}
    prompt = built[0].requests[0].messages[1].content
    assert "It is about something else." in prompt


# --------------------------------------------------------------------------- fallback and review


def test_fallback_exits_0_with_source_and_review_items_then_review_round_trip(
    passages_file: Path,
    capsys: pytest.CaptureFixture[str],
    scripted: Callable[..., list[ScriptedJudge]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("COLUMNS", "250")
    monkeypatch.setenv("EVIDEX_SPLIT_BATCHES", "0")  # the spec's ladder alone: three attempts
    scripted("not JSON at all", "still not JSON", "{broken")
    code, out, err = tier_run(capsys, passages_file, "--batch-size", "15")
    assert code == 0, err
    report = json.loads(out)
    assert len(report["classifications"]) == 12
    for c in report["classifications"]:
        assert c["source"] == "fallback"
        assert c["tier"] == "contextually-relevant"
        assert "invalid JSON" in c["reason"]
    (item_id,) = report["review_item_ids"]
    assert f"reviewitems{item_id}" in squash(err)

    code, out, _ = run(capsys, "review", "list", "--json")
    assert code == 0
    (item,) = json.loads(out)  # one JSON array, like GET /review
    assert item["id"] == item_id and item["status"] == "pending" and item["job"] == "tier"
    assert item["passage_ids"] == [f"p{i}" for i in range(1, 13)]

    code, out, _ = run(capsys, "review", "list")
    assert code == 0 and "fallback after 3 attempt(s)" in out and report["run_id"] in out

    code, out, _ = run(capsys, "review", "show", str(item_id))
    assert code == 0
    assert "fallback after 3 attempt(s)" in out and "{broken" in out and "pending" in out

    code, _, err = run(
        capsys,
        "review",
        "resolve",
        str(item_id),
        "--decision",
        "irrelevant",
        "--note",
        "off-topic batch",
        "--reviewer",
        "alice",
    )
    assert code == 0
    assert f"resolved review item {item_id}: 'irrelevant' by alice" in " ".join(err.split())

    code, out, err = run(capsys, "review", "list")
    assert code == 0 and out == "" and "no pending review items" in err
    code, out, _ = run(capsys, "review", "list", "--status", "resolved", "--json")
    (resolved,) = json.loads(out)
    assert resolved["decision"] == "irrelevant" and resolved["reviewer"] == "alice"
    assert resolved["note"] == "off-topic batch" and resolved["resolved_at"]
    code, out, _ = run(capsys, "review", "show", str(item_id), "--json")
    assert json.loads(out)["status"] == "resolved"

    code, _, err = run(capsys, "review", "resolve", str(item_id), "--decision", "accept")
    assert code == 2 and "already resolved" in err
    code, _, err = run(capsys, "review", "show", "999")
    assert code == 2 and "no review item with id 999" in err


# --------------------------------------------------------------------------- audit log


def test_log_shows_the_rows_of_a_run(
    passages_file: Path,
    capsys: pytest.CaptureFixture[str],
    scripted: Callable[..., list[ScriptedJudge]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("COLUMNS", "250")
    bad = {"classifications": []}
    scripted(bad, tier_reply, tier_reply)  # batch 1 is invalid once, then both succeed
    code, out, _ = tier_run(capsys, passages_file, "--batch-size", "6")
    assert code == 0
    run_id = json.loads(out)["run_id"]

    code, out, _ = run(capsys, "log", "--json", "--run", run_id)
    assert code == 0
    rows = json.loads(out)  # one JSON array, like GET /log
    assert sorted(r["status"] for r in rows) == ["invalid", "ok", "ok"]
    for row in rows:
        assert row["run_id"] == run_id and row["judge_id"] == "scripted"
        assert row["prompt_version"] and row["raw_output"] and row["time"].endswith("+00:00")
    (invalid,) = [r for r in rows if r["status"] == "invalid"]
    assert any("is missing; every passage must be graded" in e for e in invalid["errors"])

    code, out, _ = run(capsys, "log", "--run", run_id)
    assert code == 0
    assert out.count(run_id) == 3
    assert "invalid #1" in out and "ok #2" in out and "100+20" in out
    assert rows[0]["prompt_version"][:8] in out and "is missing; every passage" in out

    monkeypatch.setenv("COLUMNS", "80")  # a narrow terminal: fewer columns, named in the caption
    code, out, _ = run(capsys, "log", "--run", run_id)
    assert code == 0 and out.count(run_id) == 3 and "invalid #1" in out
    assert "not shown at this width: step, prompt, latency, tokens" in out
    assert "100+20" not in out

    code, out, _ = run(capsys, "log", "--json", "--last", "1")
    assert len(json.loads(out)) == 1
    code, out, err = run(capsys, "log", "--job", "audit")
    assert code == 0 and out == "" and "no audit-log rows match" in err


# --------------------------------------------------------------------------- secrets and verbose


def test_verbose_logs_the_run_and_never_shows_the_api_key(
    passages_file: Path,
    capsys: pytest.CaptureFixture[str],
    scripted: Callable[..., list[ScriptedJudge]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", PLANTED_KEY)
    leaky = logging.getLogger("evidex.judges.leaky")

    def careless_reply(request: JudgeRequest) -> dict[str, Any]:
        # a backend that logs its credentials: the CLI must mask them all the same
        leaky.debug("calling with key %s", os.environ["OPENAI_API_KEY"])
        return tier_reply(request)

    scripted(careless_reply, careless_reply)
    code, out, err = tier_run(
        capsys, passages_file, "--verbose", "--db", f"sqlite:///{passages_file.parent}/v.db"
    )
    assert code == 0
    assert PLANTED_KEY not in out + err
    assert "calling with key ***" in err  # the line was shown, masked
    assert "judge scripted" in err and "v.db" in err
    assert re.search(r"tier tier \S+-b000 ok attempt 1 \d+ ms tokens 100\+20", err)
    # the handler is gone afterwards: nothing leaks into later commands
    assert not logging.getLogger("evidex").handlers


def test_openai_judge_end_to_end_never_shows_the_api_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The real openai: judge against a loopback server that echoes the credentials it got,
    once in a retryable error and once in a fatal one: neither --verbose nor the error line
    shows the key."""
    from tests.fake_openai_server import Reply, Status, serve

    monkeypatch.setenv("OPENAI_API_KEY", PLANTED_KEY)
    path = write_jsonl(tmp_path / "in.jsonl", [{"passage_id": "a", "text": "Off topic."}])
    reply = {
        "classifications": [
            {
                "passage_id": "a",
                "tier": "irrelevant",
                "justification": "It says only that it is off topic.",
                "key_evidence_snippet": None,
            }
        ]
    }
    argv = ["tier", "-q", "q", "-p", str(path), "-j", "openai:test-model", "--verbose"]
    with serve() as server:
        server.add(Status(500, "upstream failed for {auth}"), Reply(json.dumps(reply)))
        code, out, err = run(capsys, *argv, "--base-url", server.base_url)
        assert code == 0, err
        assert json.loads(out)["classifications"][0]["source"] == "judge"
        # verbose shows both exchanges, the echoed credentials masked
        assert "error attempt 1" in err and "HTTP 500: upstream failed for Bearer ***" in err
        assert "ok attempt 2" in err

        server.add(Status(401, "Incorrect API key provided: {auth}"))
        argv[2] = "another question"  # not the cached one
        code2, out2, err2 = run(capsys, *argv[:-1], "--base-url", server.base_url)
        assert code2 == 2, err2
        assert all(
            r.headers["authorization"] == f"Bearer {PLANTED_KEY}" for r in server.chat_requests
        )
    assert PLANTED_KEY not in out + err + out2 + err2


def test_redact_masks_secret_env_values_and_url_passwords(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", PLANTED_KEY)
    monkeypatch.setenv("SOME_TOKEN", "tok-123456")
    monkeypatch.setenv("EDITOR", "vim-editor")
    text = f"key={PLANTED_KEY} t=tok-123456 e=vim-editor db=postgresql://bob:hunter22@db/x"
    assert redact(text) == "key=*** t=*** e=vim-editor db=postgresql://bob:***@db/x"


# --------------------------------------------------------------------------- reader


def test_read_passages_accepts_aliases_optional_fields_bom_and_unicode_separators(
    tmp_path: Path,
) -> None:
    path = tmp_path / "p.jsonl"
    text = (
        '\ufeff{"id": 7, "text": "one\u2028line", "title": "T", "url": "u", "rank": 1, '
        '"score": 0.9, "metadata": {"k": 1}}\r\n\n{"passage_id": "b", "text": "two"}\n'
    )
    path.write_text(text, encoding="utf-8")
    first, second = read_passages(path)
    assert first.passage_id == "7" and first.text == "one\u2028line" and first.metadata == {"k": 1}
    assert second.passage_id == "b"


def test_read_passages_rejects_non_utf8(tmp_path: Path) -> None:
    path = tmp_path / "latin1.jsonl"
    path.write_bytes('{"passage_id": "a", "text": "caf\xe9"}'.encode("latin-1"))
    with pytest.raises(InputError, match="not UTF-8"):
        read_passages(path)


# The demo command is tested in tests/test_demo.py.


# --------------------------------------------------------------------------- help


@pytest.mark.parametrize(
    ("command", "options"),
    [
        (
            ["tier"],
            [
                "--query",
                "--passages",
                "--judge",
                "--risk",
                "--batch-size",
                "--tiers",
                "--examples",
                "--db",
                "--base-url",
                "--policy",
                "--budget",
                "--output",
                "--verbose",
                "OPENAI_API_KEY",
                "stdin",
            ],
        ),
        (["log"], ["--last", "--run", "--job", "--json", "--db"]),
        (["review", "list"], ["--status", "--job", "--json", "--db"]),
        (["review", "show"], ["ID", "--json", "--db"]),
        (["review", "resolve"], ["ID", "--decision", "--note", "--reviewer", "--db"]),
        (["review", "claim"], ["--job", "--lease", "--reviewer", "--json", "--db"]),
        (["review", "release"], ["ID", "--reviewer", "--db"]),
        (
            ["demo"],
            [
                "--judge",
                "--rerank-judge",
                "--tier-judge",
                "--audit-judge",
                "--classify-judge",
                "--base-url",
                "--budget",
                "--output",
                "--db",
                "--verbose",
            ],
        ),
    ],
)
def test_help_explains_each_option(
    command: list[str],
    options: list[str],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    code, out, _ = run(capsys, *command, "--help")
    assert code == 0
    for option in options:
        assert option in out, option
    # each option's row carries a help text after its flags and metavar (on the next line when
    # they fill the first column)
    for option in (o for o in options if o.startswith("--")):
        row = re.search(
            rf"^ +(?:-\w, )?{option}\b[^\n]*?(?: {{2,}}(\S[^\n]*)|\n +(\S[^\n]*))", out, re.M
        )
        assert row is not None, option
        assert len((row.group(1) or row.group(2)).split()) >= 3, row.group(0)


def test_review_without_subcommand_shows_its_commands(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "review")
    assert code in (0, 2)
    assert all(word in out + err for word in ("list", "show", "resolve"))


# --------------------------------------------------------------------------- installed script


def evidex_script() -> str:
    return str(Path(sys.executable).parent / "evidex")


def test_installed_script_help() -> None:
    proc = subprocess.run([evidex_script(), "--help"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    for command in ("tier", "log", "review", "demo"):
        assert command in proc.stdout


def test_installed_script_exits_2_on_bad_input(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"passage_id": "a", "text": "fine"}\n{"passage_id": "b"}\n')
    proc = subprocess.run(
        [evidex_script(), "tier", "--query", "q", "--passages", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "COLUMNS": "300"},
    )
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert f"{path}:2: the passage has no 'text' field" in proc.stderr
