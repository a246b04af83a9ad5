"""The sufficiency job's evaluation and calibration, found through the registry: its figures on
a hand-labelled set built here (the expected values written as the arithmetic), the
threshold fit and its out-of-set figure, CLAPnq's format, the CLI, and the agreement page and
review export reading sufficiency items through the job's review side."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from evidex import judges
from evidex.cli import main
from evidex.errors import ConfigError
from evidex.evaluate.calibrate_sufficiency import (
    calibrate_sufficiency,
    fit_abstain_confidence,
    out_of_set,
)
from evidex.evaluate.golden import SufficiencyGolden, detect_job, load_golden, write_jsonl
from evidex.evaluate.registry import EvalOptions
from evidex.evaluate.review_export import export_reviews
from evidex.evaluate.run import evaluate, load_records
from evidex.evaluate.sufficiency import decision_figures
from evidex.judging import JudgeRequest
from evidex.store import SqlStore
from tests.scripted import ScriptedJudge

# (id, gold: the passages suffice, the judge's verdict, its confidence) and, with the default
# policy (abstain at 0.7 or more, escalate below 0.5), the decision
CASES = [
    ("a1", True, True, 0.9),  # answer
    ("a2", True, False, 0.95),  # abstain: an answerable question abstained on
    ("a3", True, False, 0.6),  # escalate
    ("u1", False, False, 0.9),  # abstain
    ("u2", False, False, 0.75),  # abstain
    ("u3", False, True, 0.8),  # answer: an unanswerable question answered
    ("u4", False, False, 0.4),  # escalate (below 0.5)
]
VERDICTS = {f"question {cid}?": (said, confidence) for cid, _, said, confidence in CASES}


def golden_rows() -> list[dict[str, Any]]:
    """The CLAPnq normalised form: id, question, passages with titles, sufficient, answer."""
    return [
        {
            "id": cid,
            "question": f"question {cid}?",
            "passages": [
                {"passage_id": f"{cid}_p0", "title": "Topic", "text": f"Passage of {cid} here."}
            ],
            "sufficient": gold,
            "answer": "an answer" if gold else None,
        }
        for cid, gold, _, _ in CASES
    ]


def verdict_reply(request: JudgeRequest) -> dict[str, Any]:
    """A valid reply giving the verdict :data:`CASES` names for the request's question."""
    payload: Any = request.payload
    sufficient, confidence = VERDICTS[payload.query]
    [passage] = payload.passages
    if sufficient:
        quote = {"passage_id": passage.passage_id, "quoted_text": passage.text.split(" here")[0]}
        return {
            "sufficient": True,
            "confidence": confidence,
            "supporting_passage_ids": [passage.passage_id],
            "key_quotes": [quote],
            "missing": [],
        }
    return {
        "sufficient": False,
        "confidence": confidence,
        "supporting_passage_ids": [],
        "key_quotes": [],
        "missing": ["the fact asked for"],
    }


class VerdictJudge(ScriptedJudge):
    """Always answers with :func:`verdict_reply`."""

    def __init__(self, judge_id: str = "scripted") -> None:
        super().__init__([])
        self.judge_id = judge_id

    async def complete(self, request: JudgeRequest) -> Any:
        self.replies = [verdict_reply]
        return await super().complete(request)


@pytest.fixture
def golden(tmp_path: Path) -> Path:
    path = tmp_path / "sufficiency.jsonl"
    write_jsonl(path, golden_rows())
    return path


# ---------------------------------------------------------------------------- evaluation


def test_the_evaluation_measures_verdicts_and_decisions(
    golden: Path, store: SqlStore, tmp_path: Path
) -> None:
    report = evaluate(
        "sufficiency", golden, judge=VerdictJudge(), store=store, out_dir=tmp_path / "out"
    )
    met = report["metrics"]
    # insufficient: predicted for a2 a3 u1 u2 u4, gold for u1..u4, right for u1 u2 u4
    precision, recall = 3 / 5, 3 / 4
    assert met["f1(label=insufficient)"] == pytest.approx(
        2 * precision * recall / (precision + recall)
    )
    assert met["accuracy"] == pytest.approx(4 / 7)  # a1 u1 u2 u4
    assert met["abstention_rate"] == pytest.approx(3 / 7)  # a2 u1 u2
    assert met["escalation_rate"] == pytest.approx(2 / 7)  # a3 u4
    assert met["false_abstention_rate"] == pytest.approx(1 / 3)  # a2 of a1 a2 a3
    assert report["decisions"]["insufficient_answered_rate"] == pytest.approx(1 / 4)  # u3
    assert report["decisions"]["by_gold"] == {
        "sufficient": {"answer": 1, "abstain": 1, "escalate": 1},
        "insufficient": {"abstain": 2, "answer": 1, "escalate": 1},
    }
    assert [w["id"] for w in report["worst"]] == ["a2", "u3", "a3"]  # most confident first
    assert report["fallbacks"] == 0 and report["warnings"] == []
    assert "Answerable questions abstained on" in (tmp_path / "out" / "report.md").read_text()
    rows = [
        json.loads(x) for x in (tmp_path / "out" / "predictions.jsonl").read_text().splitlines()
    ]
    assert [r["decision"] for r in rows][:3] == ["answer", "abstain", "escalate"]


def test_predictions_without_a_decision_are_decided_by_the_policy(
    golden: Path, tmp_path: Path
) -> None:
    from evidex.evaluate.run import score_predictions

    predictions = tmp_path / "p.jsonl"
    write_jsonl(
        predictions,
        [{"id": c, "sufficient": said, "confidence": conf} for c, _, said, conf in CASES],
    )
    report = score_predictions(None, predictions, golden, out_dir=tmp_path / "r")
    assert report["job"] == "sufficiency"  # told from the golden file's fields
    assert report["metrics"]["abstention_rate"] == pytest.approx(3 / 7)


def test_decision_figures_on_edge_cases() -> None:
    shares = decision_figures([False, False], ["abstain", "answer"])
    assert shares["abstention_rate"] == 0.5 and shares["insufficient_answered_rate"] == 0.5
    assert (
        shares["false_abstention_rate"] != shares["false_abstention_rate"]
    )  # nan: none answerable


def test_the_clapnq_format_and_folder_load(tmp_path: Path) -> None:
    folder = tmp_path / "clapnq"
    folder.mkdir()
    write_jsonl(folder / "sufficiency_dev.jsonl", golden_rows())
    assert detect_job(folder) == "sufficiency"
    _, records = load_records("sufficiency", folder, EvalOptions())
    assert len(records) == len(CASES) and isinstance(records[0], SufficiencyGolden)
    assert records[0].passages[0].title == "Topic" and records[0].answer == "an answer"
    # ``query`` is taken for ``question`` (review export writes rows from review items)
    (tmp_path / "q.jsonl").write_text(
        json.dumps(
            {"id": "x", "query": "Q?", "passages": [{"id": "p", "text": "t"}], "sufficient": True}
        )
    )
    [row] = load_golden(tmp_path / "q.jsonl", "sufficiency")
    assert row.question == "Q?"


# ---------------------------------------------------------------------------- calibration


def _rows() -> tuple[list[bool], list[dict[str, Any]]]:
    gold = [g for _, g, _, _ in CASES]
    rows = [
        {"id": c, "sufficient": said, "confidence": conf, "source": "judge"}
        for c, _, said, conf in CASES
    ]
    return gold, rows


@pytest.mark.parametrize(
    ("target", "threshold", "feasible"),
    [
        # thresholds tried: 0.6 0.75 0.9 0.95 1.0; answerable abstained on: a2 a3 at 0.6, a2
        # from 0.75 to 0.95 (1/3), none at 1.0; unanswerable: u1 u2 up to 0.75, u1 at 0.9
        (0.02, 1.0, True),
        (0.34, 0.75, True),  # 0.6 abstains on 2/3 of the answerable: 0.75, with two right
        (0.7, 0.75, True),  # 0.6 and 0.75 abstain on u1 u2 alike: the higher wins
    ],
)
def test_the_fit_abstains_most_within_the_target(
    target: float, threshold: float, feasible: bool
) -> None:
    gold, rows = _rows()
    fit = fit_abstain_confidence(gold, rows, target=target)
    assert (fit["threshold"], fit["feasible"]) == (threshold, feasible)


def test_an_infeasible_target_fits_the_fewest_wrong_abstentions() -> None:
    # every insufficient verdict is at 1.0, one of them on an answerable question
    fit = fit_abstain_confidence(
        [True, False],
        [
            {"sufficient": False, "confidence": 1.0, "source": "judge"},
            {"sufficient": False, "confidence": 1.0, "source": "judge"},
        ],
        target=0.0,
    )
    assert fit == {"threshold": 1.0, "feasible": False, "figures": fit["figures"]}


def test_out_of_set_leaves_each_query_out_and_fits_on_the_others() -> None:
    gold, rows = _rows()
    held = out_of_set(gold, rows, [c for c, *_ in CASES], folds=len(CASES), target=0.34)
    # left out in turn (worked by hand): a1 answer; a2 abstain (fit 0.75 without it); a3
    # escalate (fit 1.0); u1 abstain (0.75); u2 escalate (fit 0.9: 0.75 and 0.9 abstain on
    # u1 alone, the higher wins); u3 answer; u4 escalate
    assert held["folds"] == 7
    assert sorted(held["thresholds"]) == [0.75, 0.75, 0.75, 0.75, 0.9, 1.0, 1.0]
    assert held["figures"]["abstention_rate"] == pytest.approx(2 / 7)
    assert held["figures"]["false_abstention_rate"] == pytest.approx(1 / 3)
    assert held["figures"]["insufficient_abstained_rate"] == pytest.approx(1 / 4)
    assert held["figures"]["escalation_rate"] == pytest.approx(3 / 7)


def test_records_with_the_same_question_stay_in_one_fold() -> None:
    gold = [True, True, False, False]
    rows = [{"sufficient": False, "confidence": 0.9, "source": "judge"}] * 4
    held = out_of_set(gold, rows, ["q", "q", "r", "r"], folds=5)
    assert held["folds"] == 2  # two queries, so two folds however many records


def report_version(out: Path) -> str:
    return str(json.loads((out / "report.json").read_text())["run"]["prompt_version"])


def test_calibrate_fits_reports_out_of_set_and_records_the_versions(
    golden: Path, store: SqlStore, tmp_path: Path
) -> None:
    record = calibrate_sufficiency(
        golden,
        judge=VerdictJudge(),
        store=store,
        out_dir=tmp_path / "cal",
        target=0.34,
        folds=7,
    )
    fitted = record["fitted"]
    assert fitted["abstain_confidence"] == 0.75
    assert fitted["in_sample"]["abstention_rate"] == pytest.approx(3 / 7)
    assert fitted["out_of_set"]["abstention_rate"] == pytest.approx(2 / 7)
    assert fitted["out_of_set"]["by"] == "query" and fitted["out_of_set"]["folds"] == 7
    written = json.loads((tmp_path / "cal" / "calibration.json").read_text())
    assert written["job"] == "sufficiency" and written["judge_id"] == "scripted"
    assert written["model_version"] == VerdictJudge().model_version
    assert written["prompt_version"] == report_version(tmp_path / "cal")
    assert any(line.startswith("out of set (7-fold by query") for line in record["summary"])
    with pytest.raises(ConfigError, match="--budget is for cascade judges"):
        calibrate_sufficiency(golden, judge=VerdictJudge(), store=store, budget=0.5)


def test_the_cli_evaluates_and_calibrates_sufficiency(
    golden: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setattr(judges, "JUDGES", dict(judges.JUDGES))
    judges.register_judge("scripted", lambda spec, **options: VerdictJudge(spec))
    judges.register_judge("other", lambda spec, **options: VerdictJudge(spec))
    monkeypatch.chdir(tmp_path)
    args = ("--golden", str(golden), "-j", "scripted")
    assert main(["calibrate", "sufficiency", *args, "--target", "0.34"]) == 0
    err = re.sub(r"\s+", " ", capsys.readouterr().err)
    assert "fitted abstain_confidence 0.75" in err
    assert "out of set (5-fold by query" in err
    assert "--abstain-confidence 0.75" in err
    assert (tmp_path / "reports" / "calibration-sufficiency" / "calibration.json").is_file()
    assert main(["eval", "sufficiency", *args]) == 0
    err = re.sub(r"\s+", " ", capsys.readouterr().err)
    assert "f1(label=insufficient) 0.667" in err and "false_abstention_rate 0.333" in err
    assert "stale calibration" not in err
    assert main(["eval", "sufficiency", "--golden", str(golden), "-j", "other"]) == 0
    assert "stale calibration" in capsys.readouterr().err  # the default record is checked


# ---------------------------------------------------------------------------- review side


def _escalated(store: SqlStore) -> list[int]:
    """Escalated verdicts in the review queue: a3 and u4 (unsure), with a real run behind."""
    from evidex.jobs.sufficiency import sufficiency_many

    items = [
        {"id": r["id"], "query": r["question"], "passages": r["passages"]} for r in golden_rows()
    ]
    results = sufficiency_many(items, judge=VerdictJudge(), store=store)
    return [i for r in results for i in r.review_item_ids]


def test_the_agreement_page_shows_sufficiency_through_its_review_side(
    store: SqlStore, tmp_path: Path
) -> None:
    pytest.importorskip("fastapi")
    pytest.importorskip("jinja2")
    from fastapi.testclient import TestClient

    from evidex.service import create_app
    from evidex.service._ui_agreement import agreement

    a3, u4 = _escalated(store)  # the judge said insufficient to both
    store.resolve_review(a3, decision="sufficient", reviewer="ana")  # (gold, judge) = (S, I)
    store.resolve_review(u4, decision="accept", reviewer="ana")  # (I, I)
    items = store.list_reviews(status="resolved")
    [row] = agreement(items, store.run_provenance(i["run_id"] for i in items), tmp_path)
    assert (row.job, row.items, row.pairs, row.labels) == (
        "sufficiency",
        2,
        2,
        ["sufficient", "insufficient"],
    )
    # one agreement in two; the judge said insufficient both times, so chance agreement is
    # the reviewers' share of insufficient (1/2): kappa (1/2 - 1/2) / (1 - 1/2)
    assert row.kappa == pytest.approx(0.0)

    client = TestClient(create_app(store, judges={}, allowed_hosts=["testserver"]))
    _, secret = store.create_key("reviewer", "ana")
    page = client.get("/ui/login").text
    csrf = re.search(r'name="csrf" value="([^"]+)"', page)
    assert csrf
    client.post(
        "/ui/login",
        data={"key": secret, "csrf": csrf.group(1), "next": "/ui/"},
        follow_redirects=False,
    )
    html = client.get("/ui/agreement").text
    found = re.search(r'<tr data-job="sufficiency"[^>]*>(.*?)</tr>', html, re.S)
    assert found, html
    assert 'class="num col-pairs">2<' in found.group(1)
    assert 'class="num kappa">0.000<' in found.group(1)


def test_review_decisions_export_as_golden_rows_the_evaluation_reads(
    store: SqlStore, tmp_path: Path
) -> None:
    a3, u4 = _escalated(store)
    store.resolve_review(a3, decision="reject", reviewer="ana")  # not insufficient: sufficient
    store.resolve_review(u4, decision="insufficient", reviewer="ana")
    exported = export_reviews(store.list_reviews(status="resolved"), "sufficiency")
    assert exported.skipped == []
    write_jsonl(tmp_path / "g.jsonl", exported.records)
    records = load_golden(tmp_path / "g.jsonl", "sufficiency")
    assert [(r.question, r.sufficient) for r in records] == [
        ("question a3?", True),
        ("question u4?", False),
    ]
