"""``evidex eval classify``: accuracy, macro-F1, citations against rationale passages, the
verbatim share of raw quotes, the confusion matrix, and the bad inputs of issue 6."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from evidex.judging import JudgeRequest
from tests.classify_fixtures import evidence, label, reply, unclassifiable
from tests.evalkit import AnsweringJudge, run_cli, use_judge, write_golden


def _item(cid: str, gold: str, rationale: list[str]) -> dict[str, Any]:
    return {
        "id": cid,
        "input": f"Claim {cid} about vitamin D.",
        "passages": [
            {"passage_id": f"{cid}:0", "text": f"Study {cid} measured vitamin D in adults."},
            {"passage_id": f"{cid}:1", "text": f"Levels in {cid} rose with sunlight exposure."},
        ],
        "labels": [gold],
        "rationale_ids": rationale,
    }


# SciFact labels, so the evaluator uses SciFact's taxonomy. The judge:
# c1 SUPPORT citing c1:1 (right); c2 SUPPORT citing c2:0 (gold CONTRADICT: wrong label, the
# cited passage is the rationale); c3 NOT_ENOUGH_INFO quoting c3:0 (right; an abstention's
# quote cites nothing); c4 first quotes words not in c4:0, is re-asked, then SUPPORT citing
# c4:0 (right; one of two rationale passages); c5 unclassifiable (counts as NOT_ENOUGH_INFO).
GOLDEN = [
    _item("c1", "SUPPORT", ["c1:1"]),
    _item("c2", "CONTRADICT", ["c2:0"]),
    _item("c3", "NOT_ENOUGH_INFO", []),
    _item("c4", "SUPPORT", ["c4:0", "c4:1"]),
    _item("c5", "NOT_ENOUGH_INFO", []),
]
STUDY = "measured vitamin D in adults"


def _replies() -> dict[str, list[dict[str, Any]]]:
    return {
        "c1": [reply(label("SUPPORT", 0.9, [evidence("c1:1", "rose with sunlight exposure")]))],
        "c2": [reply(label("SUPPORT", 0.8, [evidence("c2:0", STUDY, "Adults were measured.")]))],
        "c3": [reply(label("NOT_ENOUGH_INFO", 0.75, [evidence("c3:0", STUDY)]))],
        "c4": [
            reply(label("SUPPORT", 0.9, [evidence("c4:0", "measured vitamin K in children")])),
            reply(label("SUPPORT", 0.9, [evidence("c4:0", STUDY)])),
        ],
        "c5": [unclassifiable()],
    }


class ClassifyJudge(AnsweringJudge):
    """Answers each item with its scripted replies in turn (the last one repeats)."""

    def __init__(self) -> None:
        self.queue = _replies()
        super().__init__(self.next_reply)

    def next_reply(self, request: JudgeRequest) -> dict[str, Any]:
        cid = request.payload.input.split()[1]
        replies = self.queue[cid]
        return replies.pop(0) if len(replies) > 1 else replies[0]


def test_eval_classify_cli_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    judge = ClassifyJudge()
    use_judge(monkeypatch, judge)
    golden = write_golden(tmp_path / "g.jsonl", GOLDEN)
    out = tmp_path / "r"
    code, _, err = run_cli(
        capsys, "eval", "classify", "--golden", str(golden), "-j", "scripted", "-o", str(out)
    )
    assert code == 0, err
    assert "accuracy 0.800" in err and "macro_f1 0.600" in err
    report = json.loads((out / "report.json").read_text())
    met = report["metrics"]
    assert met["accuracy"] == pytest.approx(4 / 5)
    # SUPPORT: 2 right of 3 predicted, 2 gold → P 2/3, R 1, F1 0.8; CONTRADICT: none
    # predicted → 0; NOT_ENOUGH_INFO: 2 of 2 → 1
    f1_support = 2 * (2 / 3) * 1 / (2 / 3 + 1)
    assert met["macro_f1"] == pytest.approx((f1_support + 0 + 1) / 3)
    # cited: {c1:1}, {c2:0}, {}, {c4:0}, {}; rationale: {c1:1}, {c2:0}, {}, {c4:0, c4:1}, {}
    assert met["citation_precision"] == pytest.approx(3 / 3)
    assert met["citation_recall"] == pytest.approx(3 / 4)
    assert met["citation_recall(avg=macro)"] == pytest.approx((1 + 1 + 1 / 2) / 3)
    # raw quotes: c1, c2, c3, c4's rejected one and its accepted one
    assert report["quotes"] == {"verbatim": 4, "total": 5}
    assert met["verbatim_share"] == pytest.approx(4 / 5)
    assert report["confusion"]["labels"] == ["SUPPORT", "CONTRADICT", "NOT_ENOUGH_INFO"]
    assert report["confusion"]["matrix"] == [[2, 0, 0], [1, 0, 0], [0, 0, 2]]
    assert report["per_label"]["SUPPORT"]["precision"] == pytest.approx(2 / 3)
    assert report["fallbacks"] == 0 and report["sources"] == {"judge": 5}
    (worst,) = report["worst"]
    assert worst["id"] == "c2" and worst["golden"] == ["CONTRADICT"]
    assert worst["judge"] == ["SUPPORT"] and worst["confidence"] == pytest.approx(0.8)
    assert worst["rationale"].startswith("Adults were measured.")
    md = (out / "report.md").read_text()
    assert "![confusion matrix](confusion.png)" in md and "4 of 5" in md
    assert (out / "confusion.png").read_bytes()[:4] == b"\x89PNG"
    # the SciFact taxonomy and its constraints were in the prompt
    prompt = " ".join(m.content for m in judge.requests[0].messages)
    assert "NOT_ENOUGH_INFO: The passages neither show" in prompt
    assert "sentences of the abstracts it cites" in prompt


def test_a_fallback_counts_and_scoring_predictions_made_elsewhere(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    use_judge(monkeypatch, AnsweringJudge("not json at all"))
    golden = write_golden(tmp_path / "g.jsonl", GOLDEN[:2])
    out = tmp_path / "r"
    code, _, err = run_cli(
        capsys, "eval", "classify", "--golden", str(golden), "-j", "scripted", "-o", str(out)
    )
    assert code == 0, err
    report = json.loads((out / "report.json").read_text())
    assert report["fallbacks"] == 2 and any("fallbacks" in w for w in report["warnings"])
    # an unclassifiable fallback counts as NOT_ENOUGH_INFO: neither item is right
    assert report["metrics"]["accuracy"] == 0.0

    preds = tmp_path / "p.jsonl"
    preds.write_text(
        json.dumps({"id": "c1", "labels": ["SUPPORT"], "cited": ["c1:1", "c1:0"]})
        + "\n"
        + json.dumps({"id": "c2", "labels": ["CONTRADICT"], "cited": []})
        + "\n"
    )
    code, _, err = run_cli(
        capsys, "eval", "--predictions", str(preds), "--golden", str(golden), "-o", str(out)
    )
    assert code == 0, err
    report = json.loads((out / "report.json").read_text())
    assert report["metrics"]["accuracy"] == 1.0
    assert report["metrics"]["citation_precision"] == pytest.approx(1 / 2)
    assert report["metrics"]["citation_recall"] == pytest.approx(1 / 2)
    assert report["metrics"]["verbatim_share"] is None  # no raw replies to measure


def test_ids_missing_from_the_predictions_and_unknown_predicted_labels(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    golden = write_golden(tmp_path / "g.jsonl", GOLDEN)
    preds = tmp_path / "p.jsonl"
    preds.write_text(json.dumps({"id": "c1", "labels": ["SUPPORT"]}) + "\n")
    code, _, err = run_cli(
        capsys, "eval", "classify", "--predictions", str(preds), "--golden", str(golden)
    )
    assert code == 2 and "4 golden item(s) have no prediction: c2, c3, c4, c5" in err
    rows = [{"id": r["id"], "labels": ["MAYBE"]} for r in GOLDEN]
    preds.write_text("".join(json.dumps(r) + "\n" for r in rows))
    code, _, err = run_cli(
        capsys, "eval", "classify", "--predictions", str(preds), "--golden", str(golden)
    )
    assert code == 2 and "['MAYBE']" in err


def test_golden_labels_outside_the_taxonomy_name_file_and_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    judge = ClassifyJudge()
    use_judge(monkeypatch, judge)
    taxonomy = tmp_path / "labels.yaml"
    taxonomy.write_text("SUPPORT: It is shown true.\nCONTRADICT: It is shown false.\n")
    rows = [GOLDEN[0], GOLDEN[2]]  # line 2 has NOT_ENOUGH_INFO, not in this taxonomy
    golden = write_golden(tmp_path / "g.jsonl", rows)
    code, _, err = run_cli(
        capsys,
        *("eval", "classify", "--golden", str(golden), "-j", "scripted"),
        *("--labels", str(taxonomy), "-o", str(tmp_path / "r")),
    )
    assert code == 2
    assert f"{golden}:2" in err and "unknown label 'NOT_ENOUGH_INFO'" in err
    # labels that are not SciFact's and no taxonomy: the judge would have no definitions
    other = write_golden(tmp_path / "o.jsonl", [{**GOLDEN[0], "labels": ["REFUND"]}])
    code, _, err = run_cli(capsys, "eval", "classify", "--golden", str(other), "-j", "scripted")
    assert code == 2 and "--labels FILE" in err
    assert judge.requests == []


def test_eval_takes_labels_as_classify_does_and_the_old_taxonomy_flag_still_works(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    use_judge(monkeypatch, ClassifyJudge())
    taxonomy = tmp_path / "labels.yaml"
    taxonomy.write_text("SUPPORT: It is shown true.\nCONTRADICT: It is shown false.\n")
    golden = write_golden(tmp_path / "g.jsonl", [GOLDEN[2]])  # NOT_ENOUGH_INFO: not in it
    args = ("eval", "classify", "--golden", str(golden), "-j", "scripted")
    code, _, err = run_cli(capsys, *args, "--taxonomy", str(taxonomy))
    assert code == 2 and "unknown label 'NOT_ENOUGH_INFO'" in err  # the file was read
    assert "--taxonomy is deprecated; use --labels" in err
    code, _, err = run_cli(capsys, *args, "--labels", str(taxonomy), "--taxonomy", str(taxonomy))
    assert code == 2 and "give --labels only" in err
    code, out, _ = run_cli(capsys, "eval", "--help")
    assert "--labels" in out and "--taxonomy" not in out


def test_empty_classify_golden_set_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    code, _, err = run_cli(capsys, "eval", "classify", "--golden", str(empty), "-j", "scripted")
    assert code == 2 and "the golden set is empty" in err


def test_scifact_folder_is_a_classify_golden_set(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    use_judge(monkeypatch, AnsweringJudge(reply(label("SUPPORT", 0.9, [evidence("4:1", "B.")]))))
    root = tmp_path / "scifact"
    root.mkdir()
    (root / "corpus.jsonl").write_text(
        json.dumps({"doc_id": 4, "title": "t", "abstract": ["A.", "B."]}) + "\n"
    )
    (root / "claims_train.jsonl").write_text(
        json.dumps(
            {
                "id": 1,
                "claim": "B holds.",
                "evidence": {"4": [{"sentences": [1], "label": "SUPPORT"}]},
                "cited_doc_ids": [4],
            }
        )
        + "\n"
    )
    out = tmp_path / "r"
    code, _, err = run_cli(
        capsys, "eval", "classify", "--golden", str(root), "-j", "scripted", "-o", str(out)
    )
    assert code == 0, err
    report = json.loads((out / "report.json").read_text())
    assert report["metrics"]["accuracy"] == 1.0
    assert report["metrics"]["citation_precision"] == 1.0
