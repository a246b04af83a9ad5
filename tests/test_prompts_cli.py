"""``--prompt FILE`` on every job command and ``evidex rerank --check-grounding``, through the
real entry point with the scripted judge."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from evidex.tasks.tier import TIER_TEMPLATE
from tests.scripted import ScriptedJudge, rank_reply, tier_reply
from tests.test_cli import run, squash, write_jsonl

QUERY = "how long is the grace period?"


@pytest.fixture
def passages_file(tmp_path: Path) -> Path:
    rows = [
        {"passage_id": f"p{i}", "text": f"Passage {i} says the period is {i} s."} for i in range(5)
    ]
    return write_jsonl(tmp_path / "passages.jsonl", rows)


@pytest.mark.parametrize("job", ["tier", "rerank", "classify", "audit"])
def test_every_job_command_takes_a_prompt_file(
    capsys: pytest.CaptureFixture[str], job: str
) -> None:
    code, out, _ = run(capsys, job, "--help")
    assert code == 0 and "--prompt" in out


def test_tier_prompt_file_reaches_the_judge_and_versions_the_result(
    tmp_path: Path,
    passages_file: Path,
    capsys: pytest.CaptureFixture[str],
    scripted: Callable[..., list[ScriptedJudge]],
) -> None:
    prompt = tmp_path / "prompt.txt"
    prompt.write_text("For the on-call engineer. [QUERY]\n[PASSAGES]\n", encoding="utf-8")
    built = scripted(tier_reply)
    code, out, err = run(
        capsys, "tier", "-q", QUERY, "-p", str(passages_file), "-j", "scripted",
        "--prompt", str(prompt), "--db", f"sqlite:///{tmp_path / 'e.db'}",
    )  # fmt: skip
    assert code == 0, err
    user = built[0].requests[0].messages[1].content
    assert user.startswith("For the on-call engineer.") and QUERY in user
    assert json.loads(out)["prompt_version"] != TIER_TEMPLATE.version


def test_a_bad_prompt_file_exits_2_before_any_call(
    tmp_path: Path,
    passages_file: Path,
    capsys: pytest.CaptureFixture[str],
    scripted: Callable[..., list[ScriptedJudge]],
) -> None:
    prompt = tmp_path / "prompt.txt"
    prompt.write_text("Grade [QUERY] using [PASAGES]\n", encoding="utf-8")
    built = scripted(tier_reply)
    code, out, err = run(
        capsys, "rerank", "-q", QUERY, "-p", str(passages_file), "-j", "scripted",
        "--strategy", "allpairs", "--prompt", str(prompt),
    )  # fmt: skip
    assert code == 2 and out == ""
    assert squash(f"{prompt}: unknown placeholder [PASAGES] for the rerank prompt") in squash(err)
    assert squash("[PASSAGES]") in squash(err)  # the allowed ones are listed
    assert all(j.requests == [] for j in built)


def test_rerank_check_grounding_reports_and_warns(
    tmp_path: Path,
    passages_file: Path,
    capsys: pytest.CaptureFixture[str],
    scripted: Callable[..., list[ScriptedJudge]],
) -> None:
    scripted(rank_reply(["p3", "p1"]), lambda r: tier_reply(r, "tangentially-related"))
    code, out, err = run(
        capsys, "rerank", "-q", QUERY, "-p", str(passages_file), "-j", "scripted",
        "--strategy", "allpairs", "-k", "2", "--check-grounding",
        "--db", f"sqlite:///{tmp_path / 'e.db'}",
    )  # fmt: skip
    assert code == 0, err
    report = json.loads(out)
    assert report["grounding"]["answered"] is False
    assert report["grounding"]["checked"] == ["p3", "p1"]
    assert len(report["review_item_ids"]) == 1
    assert squash("do not answer it") in squash(err) and squash("routed to review") in squash(err)


def test_classify_and_audit_prompt_files_reach_the_judge(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    scripted: Callable[..., list[ScriptedJudge]],
) -> None:
    from tests import audit_fixtures as af
    from tests import classify_fixtures as cf
    from tests.test_classify_cli import LABELS_YAML

    db = ["--db", f"sqlite:///{tmp_path / 'e.db'}"]
    prompt = tmp_path / "classify.yaml"
    prompt.write_text("system: Route tickets.\nuser: '[LABELS] [INPUT] [CONTEXT]'\n")
    labels = tmp_path / "labels.yaml"
    labels.write_text(LABELS_YAML)
    passages = write_jsonl(tmp_path / "cp.jsonl", [p.model_dump() for p in cf.PASSAGES])
    built = scripted(cf.reply())
    code, _, err = run(
        capsys, "classify", "--input", cf.INPUT, "--passages", str(passages),
        "--labels", str(labels), "-j", "scripted", "--prompt", str(prompt), *db,
    )  # fmt: skip
    assert code == 0, err
    assert built[-1].requests[0].messages[0].content == "Route tickets."
    assert built[-1].requests[0].messages[1].content.startswith("- REFUND:")

    answer = tmp_path / "answer.txt"
    answer.write_text(af.FOUNDED)
    context = write_jsonl(tmp_path / "ctx.jsonl", [p.model_dump() for p in af.PASSAGES])
    audit_prompt = tmp_path / "audit.txt"
    audit_prompt.write_text("Audit this. [ANSWER]\n[CONTEXT]\n")
    built = scripted(af.reply(af.supported()))
    code, _, err = run(
        capsys, "audit", "--answer-file", str(answer), "--passages", str(context),
        "-j", "scripted", "--prompt", str(audit_prompt), *db,
    )  # fmt: skip
    assert code == 0, err
    assert built[-1].requests[0].messages[1].content.startswith("Audit this.")
