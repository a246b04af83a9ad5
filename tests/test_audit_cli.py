"""``evidex audit`` in-process through the real entry point, with the scripted judge registered
as a judge spec: one answer, the batch form, exit codes and input errors naming file and line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from evidex.cli import main
from evidex.judges import JUDGES
from tests.audit_fixtures import (
    ANSWER,
    FOUNDED,
    FREE,
    PASSAGES,
    contradicted,
    inferred,
    reply,
    supported,
)
from tests.scripted import ScriptedJudge


@pytest.fixture
def judge(monkeypatch: pytest.MonkeyPatch) -> ScriptedJudge:
    scripted = ScriptedJudge()
    monkeypatch.setitem(JUDGES, "scripted", lambda spec, **options: scripted)
    return scripted


@pytest.fixture
def context(tmp_path: Path) -> Path:
    path = tmp_path / "passages.jsonl"
    lines = [json.dumps({"text": p.text, "title": p.title, "url": p.url}) for p in PASSAGES[:1]]
    lines += [json.dumps(p.text) for p in PASSAGES[1:]]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_single_answer_prints_the_audit_and_exits_0_even_when_blocked(
    judge: ScriptedJudge, context: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    judge.replies.append(reply(supported(), inferred(), contradicted()))
    code = main(
        [
            "audit",
            "--answer",
            ANSWER,
            "--passages",
            str(context),
            "--question",
            "Acme?",
            "--answer-id",
            "a-7",
            "--judge",
            "scripted",
        ]
    )
    out, err = capsys.readouterr()
    assert code == 0
    report = json.loads(out)
    assert report["answer_id"] == "a-7" and report["decision"]["decision"] == "block"
    assert report["summary"]["total_claims"] == 3 and report["summary"]["contradicted"] == 1
    assert report["claims"][0]["sources"][0]["url"] == "https://acme.example/about"
    assert "a-7: block" in err
    assert '"passage_id": "passage-3"' in judge.requests[0].messages[1].content


def test_answer_file_two_pass_high_risk_to_output_file(
    judge: ScriptedJudge, context: Path, tmp_path: Path
) -> None:
    (tmp_path / "answer.txt").write_text(FOUNDED + "\n", encoding="utf-8")
    judge.replies += [
        {"claims": [FOUNDED]},
        {
            "claims": [
                {
                    "claim_id": "claim-1",
                    **{k: v for k, v in inferred(FOUNDED).items() if k != "claim_text"},
                }
            ]
        },
    ]
    out = tmp_path / "audit.json"
    code = main(
        [
            "audit",
            "--answer-file",
            str(tmp_path / "answer.txt"),
            "-p",
            str(context),
            "--mode",
            "two-pass",
            "--risk",
            "high",
            "--judge",
            "scripted",
            "-o",
            str(out),
        ]
    )
    assert code == 0
    report = json.loads(out.read_text(encoding="utf-8"))
    assert report["mode"] == "two-pass" and report["decision"]["decision"] == "review"
    assert [r.step for r in judge.requests] == ["audit.extract", "audit.classify"]


def test_batch_form_writes_one_result_a_line(
    judge: ScriptedJudge, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def answer_of(request: Any) -> dict[str, Any]:
        return reply(supported()) if request.payload.answer == FOUNDED else reply(contradicted())

    judge.replies += [answer_of, answer_of]
    rows = [
        {"answer_id": "ok", "answer": FOUNDED, "passages": [p.model_dump() for p in PASSAGES]},
        {"answer": FREE, "question": "Price?", "passages": [p.text for p in PASSAGES]},
    ]
    batch = tmp_path / "answers.jsonl"
    batch.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    assert main(["audit", "--batch", str(batch), "--judge", "scripted"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(r["answer_id"], r["decision"]["decision"]) for r in lines] == [
        ("ok", "publish"),
        ("answer-2", "block"),
    ]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (
            '{"answer": "x"}\n{"answer": 3}\n',
            "answers.jsonl:2: expected a JSON object with an 'answer'",
        ),
        (
            '{"answer": "x", "passages": [{"id": "a"}]}\n',
            "answers.jsonl:1 passage 1: expected a JSON object with a 'text' field",
        ),
        ("{oops\n", "answers.jsonl:1: malformed JSON"),
        ('{"answer": "  "}\n', "answers.jsonl:1: the answer is empty"),
    ],
)
def test_bad_batch_file_names_file_and_line(
    judge: ScriptedJudge,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    content: str,
    message: str,
) -> None:
    path = tmp_path / "answers.jsonl"
    path.write_text(content, encoding="utf-8")
    assert main(["audit", "--batch", str(path), "--judge", "scripted"]) == 2
    assert message in capsys.readouterr().err.replace("\n", "")


def test_usage_errors_exit_2(
    judge: ScriptedJudge, context: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["audit", "--passages", str(context), "--judge", "scripted"]) == 2
    assert "exactly one of --answer or --answer-file" in capsys.readouterr().err
    assert main(["audit", "--answer", "x", "--judge", "scripted"]) == 2
    assert "--passages is required" in capsys.readouterr().err
    assert (
        main(
            [
                "audit",
                "--answer",
                "x",
                "-p",
                str(context),
                "--threshold",
                "2",
                "--judge",
                "scripted",
            ]
        )
        == 2
    )
    assert "'--threshold': Input should be less than or equal to 1" in capsys.readouterr().err
    assert judge.requests == []
