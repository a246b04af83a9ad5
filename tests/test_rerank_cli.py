"""``evidex rerank`` in process, through the real entry point: the one-query JSON form, the TREC
batch form, and bad input that names the file and line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evidex import judges
from evidex.cli import main
from tests.scripted import ScriptedJudge
from tests.test_rerank import rank_reply


@pytest.fixture
def scripted(monkeypatch: pytest.MonkeyPatch) -> ScriptedJudge:
    judge = ScriptedJudge()
    monkeypatch.setitem(judges.JUDGES, "scripted", lambda spec, **options: judge)
    return judge


def _jsonl(path: Path, rows: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _passages(tmp_path: Path) -> Path:
    return _jsonl(
        tmp_path / "p.jsonl",
        [
            {"id": "a", "text": "Vitamin D is made in skin exposed to sunlight."},
            {"id": "b", "text": "Adults need 600 IU of vitamin D a day."},
            {"id": "c", "text": "The landings took place in June 1944."},
        ],
    )


def test_one_query_prints_the_ranking(
    tmp_path: Path, scripted: ScriptedJudge, capsys: pytest.CaptureFixture[str]
) -> None:
    scripted.replies = [rank_reply(["b", "a", "c"])]
    code = main(
        [
            "rerank",
            "--query",
            "how much vitamin D",
            "--passages",
            str(_passages(tmp_path)),
            "--judge",
            "scripted",
            "--strategy",
            "allpairs",
            "--top-k",
            "2",
        ]
    )
    out = json.loads(capsys.readouterr().out)
    assert code == 0
    assert [r["passage_id"] for r in out["ranked_passages"]] == ["b", "a"]
    assert out["strategy"] == "allpairs" and out["source"] == "judge"
    assert out["metrics"]["candidate_count"] == 3


def test_fallback_is_reported_on_stderr_and_exit_is_0(
    tmp_path: Path, scripted: ScriptedJudge, capsys: pytest.CaptureFixture[str]
) -> None:
    scripted.replies = ["not json", "still not json"]
    out_file = tmp_path / "out.json"
    code = main(
        [
            "rerank", "-q", "vitamin", "-p", str(_passages(tmp_path)), "-j", "scripted",
            "-s", "allpairs", "-o", str(out_file),
        ]
    )  # fmt: skip
    captured = capsys.readouterr()
    assert code == 0
    assert "fell back to retrieval order" in captured.err
    data = json.loads(out_file.read_text())
    assert data["source"] == "fallback" and data["review_item_ids"]
    assert [r["passage_id"] for r in data["ranked_passages"]] == ["a", "b", "c"]


def test_trec_batch_form(
    tmp_path: Path, scripted: ScriptedJudge, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run.trec"
    run.write_text(
        "q1 Q0 a 1 9.0 bm25\nq1 Q0 zz 2 8.0 bm25\nq1 Q0 b 3 7.0 bm25\nq1 Q0 c 4 6.0 bm25\n"
        "q2 Q0 c 1 3.0 bm25\nq2 Q0 a 2 2.0 bm25\n"
    )
    queries = tmp_path / "queries.tsv"
    queries.write_text("q1\thow much vitamin D\nq2\twhen were the landings\n")
    scripted.replies = [rank_reply(["b", "a", "c"]), rank_reply(["c", "a"])]
    out = tmp_path / "out.trec"
    code = main(
        [
            "rerank", "--run", str(run), "--queries", str(queries), "-p", str(_passages(tmp_path)),
            "-j", "scripted", "-s", "allpairs", "-o", str(out),
        ]
    )  # fmt: skip
    assert code == 0, capsys.readouterr().err
    lines = [line.split() for line in out.read_text().splitlines()]
    assert [(q, d, r) for q, _, d, r, _, _ in lines] == [
        ("q1", "b", "1"),
        ("q1", "a", "2"),
        ("q1", "c", "3"),
        ("q1", "zz", "4"),  # no text: kept below the reranked ones
        ("q2", "c", "1"),
        ("q2", "a", "2"),
    ]
    scores = [float(s) for q, _, _, _, s, _ in lines if q == "q1"]
    assert scores == sorted(scores, reverse=True)
    assert "1 run entries had no text" in capsys.readouterr().err


def test_bad_inputs_exit_2_with_file_and_line(
    tmp_path: Path, scripted: ScriptedJudge, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "a", "text": "ok"}\n{"id": "b"}\n')
    assert main(["rerank", "-q", "x", "-p", str(bad), "-j", "scripted"]) == 2
    assert f"{bad}:2" in capsys.readouterr().err

    run = tmp_path / "run.trec"
    run.write_text("q1 Q0 a 1 9.0 bm25\nq1 Q0 b one 8.0 bm25\n")
    queries = tmp_path / "q.tsv"
    queries.write_text("q1\tvitamin\n")
    args = ["rerank", "--run", str(run), "--queries", str(queries), "-p", str(_passages(tmp_path))]
    assert main([*args, "-j", "scripted"]) == 2
    assert f"{run}:2" in capsys.readouterr().err

    assert main(["rerank", "--run", str(run), "-p", str(bad)]) == 2
    assert "needs both --run and --queries" in capsys.readouterr().err
    assert main(["rerank", "-q", " ", "-p", str(_passages(tmp_path)), "-j", "scripted"]) == 2
    assert "query is empty" in capsys.readouterr().err


def test_the_trec_run_carries_the_models_scores(
    tmp_path: Path, scripted: ScriptedJudge, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run.trec"
    run.write_text(
        "q1 Q0 a 1 9.0 bm25\nq1 Q0 b 2 8.0 bm25\nq1 Q0 c 3 7.0 bm25\nq1 Q0 zz 4 6 bm25\n"
    )
    queries = tmp_path / "queries.tsv"
    queries.write_text("q1\thow much vitamin D\n")
    given = {"a": 0.4125, "b": 0.8317, "c": 0.0703}
    scripted.replies = [
        {
            "scores": [
                {"passage_id": pid, "relevance_score": s, "justification": f"{pid} fits."}
                for pid, s in given.items()
            ]
        }
    ]
    out = tmp_path / "out.trec"
    code = main(
        [
            "rerank", "--run", str(run), "--queries", str(queries), "-p", str(_passages(tmp_path)),
            "-j", "scripted", "-s", "pointwise", "-o", str(out),
        ]
    )  # fmt: skip
    assert code == 0, capsys.readouterr().err
    lines = [line.split() for line in out.read_text().splitlines()]
    assert [(d, float(s)) for _, _, d, _, s, _ in lines[:3]] == [
        ("b", 0.8317),
        ("a", 0.4125),
        ("c", 0.0703),
    ]
    assert lines[3][2] == "zz" and float(lines[3][4]) < 0.0703  # no text: below, still descending


def test_trec_scores_descend_with_the_rank_where_the_model_gives_none_or_disagrees() -> None:
    from evidex.cli.rerank import descending_scores

    assert descending_scores([0.9, 0.5, 0.1]) == [0.9, 0.5, 0.1]
    fixed = descending_scores([0.9, None, 0.95, 0.2])
    assert fixed[0] == 0.9 and fixed[3] == 0.2
    assert fixed == sorted(fixed, reverse=True) and len(set(fixed)) == 4
    assert descending_scores([None, None, None]) == [3.0, 2.0, 1.0]  # no score at all
