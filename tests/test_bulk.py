"""``evidex bulk``: every job over a JSONL of tasks, bad lines reported with their line
number, resume by id, a torn last line repaired, and a real ``kill -9`` mid-run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from evidex.bulk import run_bulk
from evidex.bulk.checkpoint import scan_output
from evidex.cli import main
from evidex.judging import JudgeRequest
from tests import audit_fixtures as af
from tests import classify_fixtures as cf
from tests.scripted import ScriptedJudge, tier_reply

ROOT = Path(__file__).resolve().parent.parent


def write_jsonl(path: Path, rows: list[Any]) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    text = path.read_text(encoding="utf-8")
    assert text == "" or text.endswith("\n"), "the last line is torn"
    return [json.loads(line) for line in text.splitlines()]


def tier_task(i: int, passages: int = 2) -> dict[str, Any]:
    return {
        "id": f"t{i}",
        "query": f"what is topic {i}",
        "passages": [
            {"passage_id": f"p{j}", "text": f"Passage {j} of task {i} is about topic {i + j}."}
            for j in range(passages)
        ],
    }


def tier_judge(n: int = 1000, delay_s: float = 0.0) -> ScriptedJudge:
    return ScriptedJudge([tier_reply] * n, delay_s=delay_s)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def db(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'bulk.db'}"


# ---------------------------------------------------------------------------- every job


def test_tier_writes_one_result_per_task_with_its_id(tmp_path: Path, db: str) -> None:
    tasks = write_jsonl(tmp_path / "in.jsonl", [tier_task(i) for i in range(12)])
    judge = tier_judge()
    stats = run_bulk("tier", tasks, tmp_path / "out.jsonl", judge=judge, store=db, concurrency=3)
    rows = read_jsonl(tmp_path / "out.jsonl")
    assert sorted(r["id"] for r in rows) == sorted(f"t{i}" for i in range(12))
    assert all(next(iter(r)) == "id" for r in rows)
    assert {len(r["classifications"]) for r in rows} == {2}
    assert (stats.done, stats.errors, stats.skipped, stats.fallbacks) == (12, 0, 0, 0)
    assert stats.calls == 12 and stats.usage.prompt_tokens == 1200
    assert not (tmp_path / "out.errors.jsonl").exists()


def test_rerank_with_minilm(tmp_path: Path, db: str) -> None:
    tasks = write_jsonl(tmp_path / "in.jsonl", [tier_task(i, 3) for i in range(3)])
    run_bulk("rerank", tasks, tmp_path / "out.jsonl", judge="local:minilm", store=db, top_k=2)
    rows = read_jsonl(tmp_path / "out.jsonl")
    assert sorted(r["id"] for r in rows) == ["t0", "t1", "t2"]
    assert all(len(r["ranked_passages"]) == 3 and r["top_k"] == 2 for r in rows)


def test_rerank_with_a_scoring_judge(tmp_path: Path, db: str) -> None:
    """The rerank job through bulk, judged by a cheap scorer (pointwise; no model load)."""

    class Overlap(ScriptedJudge):
        def score(self, query: str, texts: Any) -> list[float]:
            words = set(query.split())
            return [float(len(words & set(t.split()))) for t in texts]

    judge = Overlap()
    tasks = write_jsonl(tmp_path / "in.jsonl", [tier_task(i, 3) for i in range(4)])
    run_bulk("rerank", tasks, tmp_path / "out.jsonl", judge=judge, store=db)
    rows = read_jsonl(tmp_path / "out.jsonl")
    assert sorted(r["id"] for r in rows) == ["t0", "t1", "t2", "t3"]
    assert all(len(r["ranked_passages"]) == 3 for r in rows)


def test_classify_takes_the_taxonomy_once_for_the_run(tmp_path: Path, db: str) -> None:
    passages = [p.model_dump(mode="json") for p in cf.PASSAGES]
    tasks = write_jsonl(
        tmp_path / "in.jsonl",
        [{"id": i, "input": cf.INPUT, "passages": passages} for i in range(5)],
    )
    judge = ScriptedJudge([cf.reply()] * 5)
    taxonomy = {t.name: t.description for t in cf.TAXONOMY.labels}
    stats = run_bulk(
        "classify", tasks, tmp_path / "out.jsonl", judge=judge, store=db, taxonomy=taxonomy
    )
    rows = read_jsonl(tmp_path / "out.jsonl")
    assert sorted(r["id"] for r in rows) == [0, 1, 2, 3, 4]
    assert {tuple(c["label"] for c in r["classifications"]) for r in rows} == {("REFUND",)}
    assert stats.done == 5


def test_audit_answer_id_defaults_to_the_task_id(tmp_path: Path, db: str) -> None:
    passages = [p.model_dump(mode="json") for p in af.PASSAGES]
    tasks = write_jsonl(
        tmp_path / "in.jsonl",
        [
            {"id": f"a{i}", "answer": af.FOUNDED, "passages": passages, "question": af.QUESTION}
            for i in range(3)
        ],
    )
    judge = ScriptedJudge([af.reply(af.supported())] * 3)
    run_bulk("audit", tasks, tmp_path / "out.jsonl", judge=judge, store=db)
    rows = read_jsonl(tmp_path / "out.jsonl")
    assert sorted((r["id"], r["answer_id"]) for r in rows) == [(f"a{i}", f"a{i}") for i in range(3)]
    assert {r["summary"]["fully_supported"] for r in rows} == {1}


# ---------------------------------------------------------------------------- bad lines


def test_bad_lines_go_to_the_errors_file_and_the_run_goes_on(
    tmp_path: Path, db: str, scripted: Callable[..., list[ScriptedJudge]], capsys: Any
) -> None:
    scripted(*[tier_reply] * 50)
    rows: list[Any] = [
        tier_task(1),
        "not json",
        tier_task(2),
        {"query": "no id", "passages": [{"passage_id": "p", "text": "x"}]},
        {"id": ["a"], "query": "q", "passages": [{"passage_id": "p", "text": "x"}]},
        {"id": "e1", "query": "q", "passages": "not a list"},
        {"id": "e2", "query": "", "passages": [{"passage_id": "p", "text": "x"}]},
        {"id": "e3", "query": "q", "passages": [{"passage_id": "p", "text": ""}]},
        tier_task(1),
        [1, 2],
        "",
        {
            "id": "e4",
            "query": "q",
            "passages": [{"id": "p", "text": "a"}, {"id": "p", "text": "b"}],
        },
        tier_task(3),
    ]
    tasks = write_jsonl(tmp_path / "in.jsonl", rows)
    out = tmp_path / "out.jsonl"
    code, _, err = run(
        capsys, "bulk", "tier", "-i", str(tasks), "-o", str(out), "-j", "scripted", "--db", db
    )
    assert code == 0, err
    assert sorted(r["id"] for r in read_jsonl(out)) == ["t1", "t2", "t3"]
    errors = {e["line"]: e for e in read_jsonl(tmp_path / "out.errors.jsonl")}
    assert sorted(errors) == [2, 4, 5, 6, 7, 8, 9, 10, 12]
    assert "malformed JSON" in errors[2]["error"]
    assert "no 'id'" in errors[4]["error"]
    assert "string or an integer" in errors[5]["error"]
    assert (errors[6]["id"], errors[7]["id"], errors[8]["id"]) == ("e1", "e2", "e3")
    assert errors[9]["kind"] == "duplicate" and errors[9]["id"] == "t1"
    assert "JSON object" in errors[10]["error"]
    assert errors[12]["kind"] == "refused" and "unique" in errors[12]["error"]
    assert "9 line(s) could not be run" in err.replace("\n", " ")
    assert "3 done" in err


def test_errors_go_to_the_named_file(
    tmp_path: Path, db: str, scripted: Callable[..., list[ScriptedJudge]], capsys: Any
) -> None:
    scripted(*[tier_reply] * 5)
    tasks = write_jsonl(tmp_path / "in.jsonl", [tier_task(1), "{"])
    errors = tmp_path / "bad.jsonl"
    argv = ["bulk", "tier", "-i", str(tasks), "-o", str(tmp_path / "o.jsonl"), "-j", "scripted"]
    code, _, _ = run(capsys, *argv, "--db", db, "--errors", str(errors))
    assert code == 0
    assert [e["line"] for e in read_jsonl(errors)] == [2]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--ray-address", "auto"], "go with --engine ray"),
        (["--concurrency", "0"], "concurrency"),
        (["--batch-size", "99"], "--batch-size"),
    ],
)
def test_usage_errors_exit_2(
    tmp_path: Path,
    db: str,
    scripted: Callable[..., list[ScriptedJudge]],
    capsys: Any,
    extra: list[str],
    message: str,
) -> None:
    scripted(*[tier_reply] * 5)
    tasks = write_jsonl(tmp_path / "in.jsonl", [tier_task(1)])
    out = tmp_path / "o.jsonl"
    argv = ["bulk", "tier", "-i", str(tasks), "-o", str(out), "-j", "scripted", "--db", db]
    code, _, err = run(capsys, *argv, *extra)
    assert code == 2
    assert message in err
    assert not out.exists() or out.read_text() == ""


def test_an_unreadable_input_exits_2(tmp_path: Path, capsys: Any) -> None:
    code, _, err = run(
        capsys, "bulk", "tier", "-i", str(tmp_path / "nope.jsonl"), "-o", str(tmp_path / "o")
    )
    assert code == 2 and "no such file" in err


def test_an_internal_error_stops_the_run_with_exit_1_and_keeps_what_was_written(
    tmp_path: Path, db: str, scripted: Callable[..., list[ScriptedJudge]], capsys: Any
) -> None:
    def boom(request: JudgeRequest) -> Any:
        raise RuntimeError("bug in the judge")

    scripted(*[tier_reply] * 3, boom, *[tier_reply] * 10)
    tasks = write_jsonl(tmp_path / "in.jsonl", [tier_task(i, 1) for i in range(8)])
    out = tmp_path / "o.jsonl"
    argv = ["bulk", "tier", "-i", str(tasks), "-o", str(out), "-j", "scripted", "--db", db]
    code, _, err = run(capsys, *argv, "--concurrency", "1")
    assert code == 1, err
    assert [r["id"] for r in read_jsonl(out)] == ["t0", "t1", "t2"]
    scripted(*[tier_reply] * 10)
    code, _, err = run(capsys, *argv)
    assert code == 0
    assert sorted(r["id"] for r in read_jsonl(out)) == [f"t{i}" for i in range(8)]
    assert "3 skipped as already done" in err


# ---------------------------------------------------------------------------- resume


def test_resume_skips_the_ids_already_in_the_output(tmp_path: Path, db: str) -> None:
    tasks = write_jsonl(tmp_path / "in.jsonl", [tier_task(i) for i in range(10)])
    out = tmp_path / "out.jsonl"
    run_bulk("tier", tasks, out, judge=tier_judge(), store=db)
    kept = out.read_text().splitlines(keepends=True)[:4]
    out.write_text("".join(kept))
    done = {json.loads(line)["id"] for line in kept}
    judge = tier_judge()
    stats = run_bulk("tier", tasks, out, judge=judge, store=db, settings=_no_cache())
    assert (stats.skipped, stats.done) == (4, 6)
    assert len(judge.requests) == 6
    seen = {r.payload.query for r in judge.requests}
    assert not any(f"topic {i[1:]}" in q for q in seen for i in done)
    assert Counter(r["id"] for r in read_jsonl(out)) == Counter(f"t{i}" for i in range(10))


def _no_cache() -> Any:
    from evidex.harness.settings import HarnessSettings

    return HarnessSettings(use_cache=False)


def test_a_torn_last_line_is_cut_and_its_task_runs_again(tmp_path: Path, db: str) -> None:
    tasks = write_jsonl(tmp_path / "in.jsonl", [tier_task(i) for i in range(6)])
    out = tmp_path / "out.jsonl"
    run_bulk("tier", tasks, out, judge=tier_judge(), store=db)
    lines = out.read_text().splitlines(keepends=True)
    torn = lines[5][: len(lines[5]) // 2]
    out.write_text("".join(lines[:5]) + torn)
    stats = run_bulk("tier", tasks, out, judge=tier_judge(), store=db)
    assert stats.truncated_bytes == len(torn.encode())
    assert (stats.skipped, stats.done) == (5, 1)
    assert Counter(r["id"] for r in read_jsonl(out)) == Counter(f"t{i}" for i in range(6))


def test_a_whole_json_line_without_its_newline_counts_as_torn(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    out.write_text('{"id": "a"}\n{"id": "b"}')
    scanned = scan_output(out)
    assert scanned.done == {"a"} and out.read_text() == '{"id": "a"}\n'


def test_a_bad_line_in_the_middle_of_the_output_is_refused(tmp_path: Path, db: str) -> None:
    from evidex.errors import InputError

    out = tmp_path / "out.jsonl"
    text = '{"id": "a"}\ngarbage\n{"id": "b"}\n'
    out.write_text(text)
    with pytest.raises(InputError, match="line 2 is not a result line"):
        scan_output(out)
    assert out.read_text() == text


def test_a_second_run_on_the_same_output_is_refused_while_the_first_holds_it(
    tmp_path: Path,
) -> None:
    from evidex.bulk.checkpoint import AppendLog
    from evidex.errors import ConfigError

    first = AppendLog(tmp_path / "out.jsonl", lock=True)
    try:
        with pytest.raises(ConfigError, match="another run"):
            AppendLog(tmp_path / "out.jsonl", lock=True)
    finally:
        first.close()


def test_the_input_is_read_line_by_line(
    tmp_path: Path, db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No whole-file read of the input: tasks are pulled as the window frees."""
    tasks = write_jsonl(tmp_path / "in.jsonl", [tier_task(i, 1) for i in range(30)])
    pulled: list[int] = []
    in_flight: list[int] = []
    judge = tier_judge(delay_s=0.001)
    from evidex.bulk import stream

    original = stream.TaskFeed._item

    def spy(self: stream.TaskFeed, number: int, raw: bytes) -> Any:
        pulled.append(number)
        in_flight.append(number - len(read_jsonl(tmp_path / "out.jsonl")))
        return original(self, number, raw)

    monkeypatch.setattr(stream.TaskFeed, "_item", spy)
    run_bulk("tier", tasks, tmp_path / "out.jsonl", judge=judge, store=db, concurrency=3)
    assert pulled == list(range(1, 31))
    assert max(in_flight) <= 4


# ---------------------------------------------------------------------------- kill -9

SCRIPTED_MAIN = """
import sys
from evidex import judges
from evidex.cli import main
from tests.scripted import ScriptedJudge, tier_reply
judges.register_judge(
    "scripted", lambda spec, **o: ScriptedJudge([tier_reply] * 100000, delay_s=0.01)
)
sys.exit(main(sys.argv[1:]))
"""


def _kill_and_resume(argv: list[str], out: Path, ids: list[str], kill_after: int) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        argv, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        if out.exists() and out.read_bytes().count(b"\n") >= kill_after:
            break
        time.sleep(0.02)
    assert proc.poll() is None, "the run ended before it could be killed"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL
    before = out.read_bytes().count(b"\n")
    assert kill_after <= before < len(ids)
    again = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr
    rows = read_jsonl(out)  # every line valid JSON, none torn
    assert Counter(r["id"] for r in rows) == Counter(ids)  # each task exactly once
    assert "skipped as already done" in again.stderr


def test_kill_9_mid_run_then_resume_gives_each_task_exactly_once(tmp_path: Path) -> None:
    ids = [f"t{i}" for i in range(400)]
    tasks = write_jsonl(tmp_path / "in.jsonl", [tier_task(i, 1) for i in range(400)])
    out = tmp_path / "out.jsonl"
    argv = [sys.executable, "-c", SCRIPTED_MAIN, "bulk", "tier", "-i", str(tasks)]
    argv += ["-o", str(out), "-j", "scripted", "--db", f"sqlite:///{tmp_path / 'k.db'}"]
    _kill_and_resume([*argv, "--concurrency", "8"], out, ids, kill_after=100)


def test_kill_9_of_evidex_bulk_tier_with_minilm(tmp_path: Path) -> None:
    """The real command and the real encoder: SIGKILL once lines exist, rerun, exactly once
    (about 10 s here: 200 one-passage tasks)."""
    n = 200
    ids = [f"t{i}" for i in range(n)]
    tasks = write_jsonl(tmp_path / "in.jsonl", [tier_task(i, 1) for i in range(n)])
    out = tmp_path / "out.jsonl"
    evidex = str(Path(sys.executable).parent / "evidex")
    argv = [evidex, "bulk", "tier", "-i", str(tasks), "-o", str(out), "-j", "local:minilm"]
    argv += ["--db", f"sqlite:///{tmp_path / 'k.db'}", "--concurrency", "2"]
    _kill_and_resume(argv, out, ids, kill_after=20)
