"""``evidex classify`` through its real entry point, with a scripted judge registered."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from evidex.cli import main
from evidex.judging import JudgeRequest
from evidex.store import open_store
from tests.classify_fixtures import INPUT, PASSAGES, evidence, label, reply, unclassifiable
from tests.fake_openai_server import Reply, serve

LABELS_YAML = """\
labels:
  - name: REFUND
    description: The customer asks for their money back.
  - name: SHIPPING
    description: The message is about delivery, tracking or a late parcel.
  - name: OTHER
    description: Anything else.
"""


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    labels = tmp_path / "labels.yaml"
    labels.write_text(LABELS_YAML)
    passages = tmp_path / "passages.jsonl"
    passages.write_text("".join(json.dumps(p.model_dump()) + "\n" for p in PASSAGES))
    return {"labels": labels, "passages": passages, "dir": tmp_path}


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def single(files: dict[str, Path], *extra: str) -> list[str]:
    return [
        "classify",
        "--input",
        INPUT,
        "--passages",
        str(files["passages"]),
        "--labels",
        str(files["labels"]),
        "--judge",
        "scripted",
        *extra,
    ]


def test_one_input_prints_the_spec_schema(
    capsys: pytest.CaptureFixture[str], scripted: Any, files: dict[str, Path]
) -> None:
    built = scripted(reply())
    code, out, _ = run(capsys, *single(files))
    (judge,) = built
    assert code == 0
    result = json.loads(out)
    for key in ("classifications", "unclassifiable", "unclassifiable_reason", "evidence_gaps"):
        assert key in result
    assert result["classifications"][0]["label"] == "REFUND"
    assert result["source"] == "judge" and result["review"] == []
    assert judge.requests[0].payload.multi_label is False


def test_options_reach_the_job_and_the_review_reason_is_stored(
    capsys: pytest.CaptureFixture[str], scripted: Any, files: dict[str, Path]
) -> None:
    built = scripted(reply(label(confidence=0.5)))
    db = files["dir"] / "run.db"
    output = files["dir"] / "out.json"
    argv = single(
        files,
        "--multi-label",
        "--threshold",
        "0.8",
        "--risk",
        "high",
        "--constraint",
        "Prefer SHIPPING for tracking questions.",
        "--db",
        f"sqlite:///{db}",
        "-o",
        str(output),
    )
    code, out, err = run(capsys, *argv)
    (judge,) = built
    assert code == 0 and out == ""
    result = json.loads(output.read_text())
    assert result["risk"] == "high" and result["threshold"] == 0.8 and result["multi_label"]
    payload = judge.requests[0].payload
    assert payload.multi_label is True and payload.risk == "high"
    assert "Prefer SHIPPING for tracking questions." in judge.requests[0].messages[0].content
    (decision,) = result["review"]
    store = open_store(f"sqlite:///{db}")
    try:
        item = store.get_review(decision["review_item_id"])
    finally:
        store.close()
    assert item["reason"] == "confidence 0.5 for label REFUND is below the threshold 0.8"
    assert "routed to the review queue" in err


def test_input_file(
    capsys: pytest.CaptureFixture[str], scripted: Any, files: dict[str, Path]
) -> None:
    built = scripted(reply())
    text = files["dir"] / "ticket.txt"
    text.write_text("Where is my refund?\n")
    argv = [
        "classify",
        "--input-file",
        str(text),
        "--passages",
        str(files["passages"]),
        "--labels",
        str(files["labels"]),
        "--judge",
        "scripted",
    ]
    assert run(capsys, *argv)[0] == 0
    (judge,) = built
    assert judge.requests[0].payload.input == "Where is my refund?\n"


def test_input_file_is_read_like_the_answer_file(
    capsys: pytest.CaptureFixture[str], scripted: Any, files: dict[str, Path]
) -> None:
    """The text-or-file pair reads its file as every input: BOM and CR line ends dropped, and
    a file that is not UTF-8 is an input error naming it (exit 2), not an internal error."""
    built = scripted(reply())
    text = files["dir"] / "ticket.txt"
    text.write_bytes("\ufeffWhere is my refund?\r\nSix weeks.\r\n".encode())
    argv = [*single(files)[3:], "--input-file", str(text)]
    assert run(capsys, "classify", *argv)[0] == 0
    assert built[0].requests[0].payload.input == "Where is my refund?\nSix weeks.\n"
    text.write_bytes(b"caf\xe9\n")
    code, _, err = run(capsys, "classify", *argv)
    assert code == 2 and "ticket.txt: not UTF-8 text" in " ".join(err.split())


def test_a_fallback_exits_zero_and_warns(
    capsys: pytest.CaptureFixture[str], scripted: Any, files: dict[str, Path]
) -> None:
    bad = reply(label("CANCEL"))
    scripted(bad, bad)
    code, out, err = run(capsys, *single(files, "--risk", "medium"))
    result = json.loads(out)
    assert code == 0 and result["source"] == "fallback" and result["unclassifiable"]
    assert "fell back to unclassifiable" in err and len(result["review"]) == 1


def test_batch_writes_one_line_per_input_in_order(
    capsys: pytest.CaptureFixture[str], scripted: Any, files: dict[str, Path]
) -> None:
    def answer(request: JudgeRequest) -> dict[str, Any]:
        return reply() if "money" in request.payload.input else unclassifiable()

    built = scripted(answer, answer, answer)
    rows = [
        {"id": f"t{i}", "input": text, "passages": [p.model_dump() for p in PASSAGES]}
        for i, text in enumerate([INPUT, "Hello there", "I want my money back"], 1)
    ]
    batch = files["dir"] / "batch.jsonl"
    batch.write_text("".join(json.dumps(r) + "\n" for r in rows))
    code, out, _ = run(
        capsys,
        "classify",
        "--batch",
        str(batch),
        "--labels",
        str(files["labels"]),
        "--judge",
        "scripted",
    )
    (judge,) = built
    assert code == 0
    results = [json.loads(line) for line in out.splitlines()]
    assert [r["id"] for r in results] == ["t1", "t2", "t3"]
    assert [r["unclassifiable"] for r in results] == [False, True, False]
    assert len(judge.requests) == 3


def test_consistency_option_reports_agreement(
    capsys: pytest.CaptureFixture[str], scripted: Any, files: dict[str, Path]
) -> None:
    built = scripted(reply(), reply(), reply(label(confidence=0.6)), unclassifiable())
    code, out, _ = run(capsys, *single(files, "--consistency", "2"))
    (judge,) = built
    assert code == 0
    report = json.loads(out)
    assert len(report["runs"]) == 4 and len(judge.requests) == 4
    assert report["modal_labels"] == ["REFUND"] and report["agreement"] == 0.75
    assert report["repeat_agreement"] == 1.0 and report["shuffle_agreement"] == 0.5


# --------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("content", "where", "message"),
    [
        ("labels: []\n", "labels.yaml", "at least one"),
        ("A: first\nB: [unclosed\n", "labels.yaml:", "not valid YAML"),
        ("", "labels.yaml", "file is empty"),
    ],
)
def test_bad_taxonomy_files_exit_2_naming_the_file(
    capsys: pytest.CaptureFixture[str],
    scripted: Any,
    files: dict[str, Path],
    content: str,
    where: str,
    message: str,
) -> None:
    built = scripted(reply())
    files["labels"].write_text(content)
    code, _, err = run(capsys, *single(files))
    flat = " ".join(err.split())
    assert code == 2 and message in flat and where in flat.replace("\n", "")
    assert built == [], "the taxonomy is read before any judge is built"


def test_bad_batch_line_names_file_and_line(
    capsys: pytest.CaptureFixture[str], scripted: Any, files: dict[str, Path]
) -> None:
    scripted(reply())
    batch = files["dir"] / "batch.jsonl"
    good = {"id": "a", "input": INPUT, "passages": [p.model_dump() for p in PASSAGES]}
    bad = {"id": "b", "input": INPUT, "passages": [{"id": "x"}]}
    batch.write_text(json.dumps(good) + "\n" + json.dumps(bad) + "\n")
    code, _, err = run(
        capsys,
        "classify",
        "--batch",
        str(batch),
        "--labels",
        str(files["labels"]),
        "--judge",
        "scripted",
    )
    assert code == 2 and "batch.jsonl:2" in "".join(err.split()) and "text" in err


@pytest.mark.parametrize(
    "extra",
    [
        ["--input-file", "x.txt"],  # both --input and --input-file
        ["--consistency", "0"],
        ["--threshold", "1.5"],
    ],
)
def test_usage_errors_exit_2(
    capsys: pytest.CaptureFixture[str], scripted: Any, files: dict[str, Path], extra: list[str]
) -> None:
    scripted(reply())
    assert run(capsys, *single(files, *extra))[0] == 2


def test_the_default_judge_names_the_llm_extra_when_missing(
    capsys: pytest.CaptureFixture[str], files: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "llama_cpp", None)  # import llama_cpp → ImportError
    argv = [
        "classify",
        "--input",
        INPUT,
        "--passages",
        str(files["passages"]),
        "--labels",
        str(files["labels"]),
    ]
    code, _, err = run(capsys, *argv)
    assert code == 2 and "pip install 'evidex[llm]'" in " ".join(err.split())


def test_the_quickstart_example_files_run(
    capsys: pytest.CaptureFixture[str], scripted: Any
) -> None:
    root = Path(__file__).resolve().parent.parent / "examples" / "classify"
    answer = reply(
        label(
            "REFUND_ELIGIBLE",
            support=[evidence("policy-1", "refunded in full on request")],
        )
    )
    built = scripted(answer, answer, answer)
    argv = ["classify", "--labels", str(root / "labels.yaml"), "--judge", "scripted"]
    code, out, _ = run(
        capsys,
        *argv,
        "--input",
        "Lost parcel, 6 weeks.",
        "--passages",
        str(root / "passages.jsonl"),
    )
    assert code == 0 and json.loads(out)["classifications"][0]["label"] == "REFUND_ELIGIBLE"
    code, out, _ = run(capsys, *argv, "--batch", str(root / "batch.jsonl"))
    assert code == 0 and [json.loads(x)["id"] for x in out.splitlines()] == [
        "ticket-1",
        "ticket-2",
    ]
    assert len(built) == 2


@pytest.mark.network
def test_classify_runs_against_an_openai_compatible_server(
    capsys: pytest.CaptureFixture[str], files: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-classify-123456")
    fabricated = reply(label(support=[evidence("p1", "Refunds are always paid")]))
    with serve() as server:
        server.add(Reply(json.dumps(fabricated)))
        server.add(Reply("Here you go:\n```json\n" + json.dumps(reply()) + "\n```"))
        argv = [*single(files)[:-2], "--judge", "openai:test-model", "--base-url", server.base_url]
        code, out, _ = run(capsys, *argv)
        sent = server.chat_requests
    assert code == 0
    result = json.loads(out)
    assert result["source"] == "judge" and result["judge_calls"] == 2
    assert result["classifications"][0]["label"] == "REFUND"
    assert len(sent) == 2 and "is not verbatim in passage 'p1'" in sent[1].messages[-2]["content"]
    schema = sent[0].body["response_format"]["json_schema"]["schema"]
    assert schema["properties"]["classifications"]["maxItems"] == 1
