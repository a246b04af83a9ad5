"""``evidex eval rerank``: nDCG@10 / P@10 / MRR of the judge's rankings beside retrieval order,
resuming after an interruption, scoring predictions made elsewhere, and gates on nDCG@10."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import pytest

from evidex.evaluate.registry import EvalOptions
from evidex.evaluate.run import PROGRESS_FILE, evaluate
from evidex.judging import JudgeRequest
from evidex.store import SqlStore, open_store
from tests.evalkit import AnsweringJudge, run_cli, use_judge, write_golden

# Two queries. q1: retrieval order a, b, c with grades 0, 2, 1; the judge puts b, c, a.
# q2: retrieval order x, y with grades 1, 0 (z, graded 3, was never retrieved); the judge
# puts y first, a loss against retrieval order.
GOLDEN = [
    {
        "query_id": "q1",
        "query": "what makes bread rise",
        "candidates": [
            {"passage_id": "a", "text": "Bread shops open early. s=0.1"},
            {"passage_id": "b", "text": "Yeast makes carbon dioxide that lifts dough. s=0.9"},
            {"passage_id": "c", "text": "Baking powder is another leavening agent. s=0.5"},
        ],
        "grades": {"a": 0, "b": 2, "c": 1},
    },
    {
        "query_id": "q2",
        "query": "when do tulips flower",
        "candidates": [
            {"passage_id": "x", "text": "Tulips bloom in spring. s=0.2"},
            {"passage_id": "y", "text": "Tulip bulbs once cost a fortune. s=0.8"},
        ],
        "grades": {"x": 1, "y": 0, "z": 3},
    },
]


def _log_gain(grade: int, rank: int) -> float:
    return grade / math.log2(rank + 1)


# hand arithmetic, linear gain, trec_eval's ideal list from every judged grade
Q1_IDEAL = _log_gain(2, 1) + _log_gain(1, 2)
Q1_JUDGE = (_log_gain(2, 1) + _log_gain(1, 2)) / Q1_IDEAL  # b, c, a
Q1_BASE = (_log_gain(2, 2) + _log_gain(1, 3)) / Q1_IDEAL  # a, b, c
Q2_IDEAL = _log_gain(3, 1) + _log_gain(1, 2)
Q2_JUDGE = _log_gain(1, 2) / Q2_IDEAL  # y, x
Q2_BASE = _log_gain(1, 1) / Q2_IDEAL  # x, y


def score_reply(request: JudgeRequest) -> dict[str, Any]:
    """The pointwise score step's reply: the ``s=`` number written in each passage."""
    return {
        "scores": [
            {
                "passage_id": p.passage_id,
                "relevance_score": float(p.text.split("s=")[1]),
                "justification": f"It says {p.text.split('.')[0]}.",
            }
            for p in request.payload.passages
        ]
    }


def test_eval_rerank_cli_reports_judge_and_retrieval_order(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    judge = AnsweringJudge(score_reply)
    use_judge(monkeypatch, judge)
    golden = write_golden(tmp_path / "g.jsonl", GOLDEN)
    out = tmp_path / "r"
    code, _, err = run_cli(
        capsys, "eval", "rerank", "--golden", str(golden), "-j", "scripted", "-o", str(out)
    )
    assert code == 0, err
    assert "nDCG@10 0.587 (retrieval order" in err
    report = json.loads((out / "report.json").read_text())
    met, base = report["metrics"], report["baseline"]
    assert met["nDCG@10"] == pytest.approx((Q1_JUDGE + Q2_JUDGE) / 2)
    assert base["nDCG@10"] == pytest.approx((Q1_BASE + Q2_BASE) / 2)
    assert report["lift"]["value"] == pytest.approx((Q1_JUDGE - Q1_BASE + Q2_JUDGE - Q2_BASE) / 2)
    # P@10 divides by 10 even with fewer candidates; rel=2 counts only grade 2 and up
    assert met["P@10"] == pytest.approx((2 / 10 + 1 / 10) / 2)
    assert met["P(rel=2)@10"] == pytest.approx((1 / 10 + 0 / 10) / 2)
    assert met["RR"] == pytest.approx((1 / 1 + 1 / 2) / 2)
    assert base["RR"] == pytest.approx((1 / 2 + 1 / 1) / 2)
    assert met["RR(rel=2)"] == pytest.approx((1 / 1 + 0) / 2)
    ci = report["intervals"]["nDCG@10"]
    assert ci["low"] <= met["nDCG@10"] <= ci["high"]
    assert [w["query_id"] for w in report["worst"]] == ["q2"]  # q1 gained, q2 lost
    assert report["worst"][0]["top"][0] == {
        "passage_id": "y",
        "grade": 0,
        "justification": "It says Tulip bulbs once cost a fortune.",
        "text": "Tulip bulbs once cost a fortune. s=0.8",
    }
    assert report["strategies"] == {"pointwise": 2} and report["sources"] == {"judge": 2}
    md = (out / "report.md").read_text()
    assert "| `nDCG@10` | " in md and "Worst queries" in md and "'when do tulips flower'" in md
    rows = [json.loads(x) for x in (out / "predictions.jsonl").read_text().splitlines()]
    assert [r["ranking"] for r in rows] == [["b", "c", "a"], ["y", "x"]]
    # every call was the pointwise score prompt, one per query
    assert len(judge.requests) == 2
    assert {r.step for r in judge.requests} == {"rerank.score"}


def test_eval_rerank_strategy_and_cut_flags_reach_the_job(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    judge = AnsweringJudge(score_reply)
    use_judge(monkeypatch, judge)
    golden = write_golden(tmp_path / "g.jsonl", GOLDEN)
    out = tmp_path / "r"
    code, _, err = run_cli(
        capsys,
        *("eval", "rerank", "--golden", str(golden), "-j", "scripted", "-o", str(out)),
        *("--top-n", "2", "--strategy", "pointwise"),
    )
    assert code == 0, err
    # only the first two candidates of q1 are reranked: b, a, then c kept below
    rows = [json.loads(x) for x in (out / "predictions.jsonl").read_text().splitlines()]
    assert rows[0]["ranking"] == ["b", "a", "c"]
    code, _, err = run_cli(
        capsys,
        *("eval", "rerank", "--golden", str(golden), "-j", "scripted", "-o", str(out)),
        *("--strategy", "sideways"),
    )
    assert code == 2 and "strategy: input should be 'allpairs'" in err


class _Interrupted(Exception):
    pass


def test_an_interrupted_rerank_evaluation_resumes_without_asking_again(
    tmp_path: Path, store: SqlStore
) -> None:
    golden = write_golden(tmp_path / "g.jsonl", GOLDEN)
    out = tmp_path / "r"

    def stop_on_q2(request: JudgeRequest) -> dict[str, Any]:
        if request.payload.query == "when do tulips flower":
            raise _Interrupted("power cut")
        return score_reply(request)

    with pytest.raises(_Interrupted):
        evaluate("rerank", golden, judge=AnsweringJudge(stop_on_q2), store=store, out_dir=out)
    progress = (out / PROGRESS_FILE).read_text().splitlines()
    assert len(progress) == 2 and json.loads(progress[1])["group"] == "q1"

    # a fresh store: no cache to lean on, so only the progress file can skip q1
    fresh = open_store(f"sqlite:///{tmp_path / 'fresh.db'}")
    try:
        judge = AnsweringJudge(score_reply)
        report = evaluate("rerank", golden, judge=judge, store=fresh, out_dir=out)
    finally:
        fresh.close()
    assert [r.payload.query for r in judge.requests] == ["when do tulips flower"]
    assert report["metrics"]["nDCG@10"] == pytest.approx((Q1_JUDGE + Q2_JUDGE) / 2)
    # other options are another run: its progress is not reused
    again = AnsweringJudge(score_reply)
    evaluate(
        "rerank",
        golden,
        judge=again,
        store=store,
        out_dir=out,
        options=EvalOptions(extra={"top_n": 2}),
    )
    assert len(again.requests) == 2


def test_rerank_predictions_made_elsewhere_and_missing_queries(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    golden = write_golden(tmp_path / "g.jsonl", GOLDEN)
    preds = tmp_path / "p.jsonl"
    preds.write_text(
        json.dumps({"query_id": "q1", "ranking": ["b", "c", "a"]})
        + "\n"
        + json.dumps({"query": "when do tulips flower", "ranking": ["z", "x"]})
        + "\n"
    )
    out = tmp_path / "r"
    code, _, err = run_cli(
        capsys,
        "eval",
        "rerank",
        "--predictions",
        str(preds),
        "--golden",
        str(golden),
        "-o",
        str(out),
    )
    assert code == 0, err
    report = json.loads((out / "report.json").read_text())
    # q2 ranked z (grade 3, never retrieved) then x: the ideal order
    assert report["metrics"]["nDCG@10"] == pytest.approx((Q1_JUDGE + 1.0) / 2)
    assert report["run"]["predictions"] == str(preds)

    preds.write_text(json.dumps({"query_id": "q1", "ranking": ["b", "c", "a"]}) + "\n")
    code, _, err = run_cli(
        capsys, "eval", "rerank", "--predictions", str(preds), "--golden", str(golden)
    )
    assert code == 2 and "1 golden query(s) have no prediction: q2" in err
    preds.write_text(
        json.dumps({"query_id": "q1", "ranking": "b c a"})
        + "\n"
        + json.dumps({"query_id": "q2", "ranking": ["x"]})
        + "\n"
    )
    code, _, err = run_cli(
        capsys, "eval", "rerank", "--predictions", str(preds), "--golden", str(golden)
    )
    assert code == 2 and "needs 'ranking'" in err


def test_empty_rerank_golden_set_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    use_judge(monkeypatch, AnsweringJudge(score_reply))
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n\n")
    code, _, err = run_cli(capsys, "eval", "rerank", "--golden", str(empty), "-j", "scripted")
    assert code == 2 and "the golden set is empty" in err


def test_trec_dl_folder_is_a_rerank_golden_set(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    use_judge(monkeypatch, AnsweringJudge(score_reply))
    dl = tmp_path / "dl"
    dl.mkdir()
    (dl / "queries.tsv").write_text("7\twhat makes bread rise\n")
    (dl / "qrels.txt").write_text("7 0 11 2\n7 0 12 0\n")
    (dl / "passages.jsonl").write_text(
        json.dumps({"pid": "11", "text": "Yeast lifts dough. s=0.9"})
        + "\n"
        + json.dumps({"pid": "12", "text": "Shops open early. s=0.1"})
        + "\n"
    )
    (dl / "bm25_top100.run").write_text("7 Q0 12 1 9.0 bm25\n7 Q0 11 2 8.0 bm25\n")
    out = tmp_path / "r"
    code, _, err = run_cli(
        capsys, "eval", "rerank", "--golden", str(dl), "-j", "scripted", "-o", str(out)
    )
    assert code == 0, err
    report = json.loads((out / "report.json").read_text())
    assert report["metrics"]["nDCG@10"] == pytest.approx(1.0)
    assert report["baseline"]["nDCG@10"] == pytest.approx(_log_gain(2, 2) / _log_gain(2, 1))
    # the folder's digest is the progress fingerprint: a re-run does nothing new
    code, _, _ = run_cli(
        capsys, "eval", "rerank", "--golden", str(dl), "-j", "scripted", "-o", str(out)
    )
    assert code == 0 and len((out / PROGRESS_FILE).read_text().splitlines()) == 2


def _gates(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "gates.toml"
    path.write_text(body, encoding="utf-8")
    return path


def test_gates_on_ndcg_pass_and_fail_with_the_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    use_judge(monkeypatch, AnsweringJudge(score_reply))
    write_golden(tmp_path / "g.jsonl", GOLDEN)
    # judge nDCG@10 is (1 + 0.174) / 2 = 0.587
    passing = _gates(
        tmp_path,
        '[[gate]]\nname = "rerank quality"\njob = "rerank"\ngolden = "g.jsonl"\n'
        'judge = "scripted"\noutput = "out/rerank"\n'
        'floors = { "nDCG@10" = 0.55, "P@10" = 0.1 }\n',
    )
    code, out, err = run_cli(capsys, "gate", "--config", str(passing))
    assert code == 0, err
    assert "rerank quality" in out and "nDCG@10" in out and "FAIL" not in out
    assert (tmp_path / "out" / "rerank" / "report.json").exists()

    failing = _gates(
        tmp_path,
        '[[gate]]\nreport = "out/rerank/report.json"\n'
        'floors = { "nDCG@10" = 0.9, "RR(rel=2)" = 0.4 }\n',
    )
    code, out, err = run_cli(capsys, "gate", "--config", str(failing))
    assert code == 1
    table = re.sub(r"\s+", " ", out)
    assert re.search(r"nDCG@10 │ 0\.587 │ 0\.9 │ FAIL", table), table
    assert re.search(r"RR\(rel=2\) │ 0\.500 │ 0\.4 │ pass", table), table
    assert "1 of 2 gate metric(s) under their floor" in err


@pytest.mark.slow
def test_eval_rerank_with_the_embedded_minilm_judge(tmp_path: Path, store: SqlStore) -> None:
    rows = [
        {
            "query_id": "w",
            "query": "at what temperature does water boil",
            "candidates": [
                {"passage_id": "off", "text": "The stock market fell sharply on Monday."},
                {"passage_id": "on", "text": "Water boils at 100 degrees Celsius at sea level."},
            ],
            "grades": {"off": 0, "on": 2},
        }
    ]
    golden = write_golden(tmp_path / "g.jsonl", rows)
    report = evaluate("rerank", golden, judge="local:minilm", store=store, out_dir=tmp_path / "r")
    assert report["run"]["judge_id"] == "local:minilm"
    assert report["metrics"]["nDCG@10"] == pytest.approx(1.0)  # on, off
    assert report["baseline"]["nDCG@10"] == pytest.approx(_log_gain(2, 2) / _log_gain(2, 1))
    assert report["strategies"] == {"pointwise": 1} and report["sources"] == {"judge": 1}
