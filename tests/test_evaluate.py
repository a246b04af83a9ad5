"""The evaluation layer: golden formats and loaders, the resumable tier evaluation, scoring
predictions made elsewhere, calibration, consistency and the review export."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evidex.errors import ConfigError, InputError
from evidex.evaluate import datasets
from evidex.evaluate.calibrate import calibrate_tier
from evidex.evaluate.calibration import (
    check_calibration,
    fit_thresholds,
    tier_of_score,
)
from evidex.evaluate.consistency import tier_consistency
from evidex.evaluate.golden import detect_job, load_golden, load_qrels, load_run
from evidex.evaluate.registry import EvalOptions, get_evaluator
from evidex.evaluate.review_export import export_tier_reviews
from evidex.evaluate.run import PROGRESS_FILE, evaluate, score_predictions
from evidex.harness.ports import ReviewRequest
from evidex.store import SqlStore
from evidex.types import Passage
from tests.evalkit import TIERS, MarkerJudge, ScoringJudge, golden_rows, write_golden

# ---------------------------------------------------------------------- golden files


def test_golden_tier_file_loads_and_groups(tmp_path: Path) -> None:
    records = load_golden(write_golden(tmp_path / "g.jsonl"), "tier")
    assert len(records) == 12
    assert {r.group for r in records} == {"q1", "q2"}
    assert detect_job(tmp_path / "g.jsonl") == "tier"


def _write(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_unknown_tier_label_names_file_and_line(tmp_path: Path) -> None:
    rows = golden_rows()[:2]
    rows[1]["tier"] = "very-relevant"
    path = _write(tmp_path / "g.jsonl", [json.dumps(r) for r in rows])
    with pytest.raises(InputError, match="very-relevant") as info:
        load_golden(path, "tier")
    assert info.value.where == f"{path}:2"


def test_empty_golden_set_is_an_input_error(tmp_path: Path) -> None:
    path = _write(tmp_path / "g.jsonl", ["", "  "])
    with pytest.raises(InputError, match="empty"):
        load_golden(path, "tier")
    with pytest.raises(InputError, match="empty"):
        detect_job(path)


def test_bad_json_unknown_field_and_duplicate_pair_name_their_line(tmp_path: Path) -> None:
    row = golden_rows()[0]
    path = _write(tmp_path / "a.jsonl", [json.dumps(row), "{not json"])
    with pytest.raises(InputError, match="not valid JSON") as info:
        load_golden(path, "tier")
    assert info.value.where == f"{path}:2"
    path = _write(tmp_path / "b.jsonl", [json.dumps({**row, "tierr": "x"})])
    with pytest.raises(InputError, match="tierr"):
        load_golden(path, "tier")
    path = _write(tmp_path / "c.jsonl", [json.dumps(row), json.dumps(row)])
    with pytest.raises(InputError, match="first on line 1") as info:
        load_golden(path, "tier")
    assert info.value.where == f"{path}:2"


def test_other_job_formats_validate(tmp_path: Path) -> None:
    passages = [{"passage_id": "s1", "text": "Water boils at 100 C."}]
    rerank = {"query": "q", "candidates": passages, "grades": {"s1": 2}}
    classify = {
        "id": "c1",
        "input": "x",
        "passages": passages,
        "labels": ["SUPPORT"],
        "rationale_ids": ["s1"],
    }
    audit = {
        "id": "a1",
        "answer": "Water boils at 100 C.",
        "passages": passages,
        "claims": [
            {
                "claim_text": "Water boils at 100 C.",
                "classification": "fully_supported",
                "supporting_context_ids": ["s1"],
            }
        ],
    }
    for job, row in (("rerank", rerank), ("classify", classify), ("audit", audit)):
        path = _write(tmp_path / f"{job}.jsonl", [json.dumps(row)])
        assert detect_job(path) == job
        assert len(load_golden(path, job)) == 1
    bad = {**audit, "claims": [{**audit["claims"][0], "classification": "mostly_true"}]}  # type: ignore[dict-item]
    with pytest.raises(InputError, match="mostly_true"):
        load_golden(_write(tmp_path / "bad.jsonl", [json.dumps(bad)]), "audit")


def test_qrels_and_run_loaders(tmp_path: Path) -> None:
    qrels = _write(tmp_path / "qrels.txt", ["q1 0 d1 2", "q1 0 d2 0", "", "q2 0 d9 3"])
    assert load_qrels(qrels) == {"q1": {"d1": 2, "d2": 0}, "q2": {"d9": 3}}
    run = _write(tmp_path / "run.txt", ["q1 Q0 d1 1 12.5 bm25", "q1 Q0 d2 2 11 bm25"])
    assert load_run(run) == {"q1": {"d1": 12.5, "d2": 11.0}}


def test_malformed_qrels_and_run_lines_are_named(tmp_path: Path) -> None:
    qrels = _write(tmp_path / "qrels.txt", ["q1 0 d1 2", "q1 0 d2"])
    with pytest.raises(InputError, match="4 columns") as info:
        load_qrels(qrels)
    assert info.value.where == f"{qrels}:2"
    qrels = _write(tmp_path / "q2.txt", ["q1 0 d1 high"])
    with pytest.raises(InputError, match="integer grade"):
        load_qrels(qrels)
    run = _write(tmp_path / "run.txt", ["q1 Q0 d1 1 abc tag"])
    with pytest.raises(InputError, match="6 columns") as info:
        load_run(run)
    assert info.value.where == f"{run}:1"


# ---------------------------------------------------------------------- shared data layouts


def _jsonl(path: Path, rows: list[dict[str, object]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def test_llmjudge_and_trec_dl_layouts_become_tier_and_rerank_golden(tmp_path: Path) -> None:
    lj = tmp_path / "llmjudge"
    lj.mkdir()
    (lj / "queries.tsv").write_text("q1\tdog age by teeth\n", encoding="utf-8")
    (lj / "qrels_dev.txt").write_text("q1 0 p1 3\nq1 0 p2 0\nq1 0 p3 1\n", encoding="utf-8")
    _jsonl(lj / "passages.jsonl", [{"docid": f"p{i}", "doc": f"text {i}"} for i in (1, 2, 3)])
    tiers = {r.passage_id: (r.tier, r.grade) for r in datasets.llmjudge_tier(lj)}
    assert tiers == {
        "p1": ("directly-supporting", 3),
        "p2": ("irrelevant", 0),
        "p3": ("tangentially-related", 1),
    }

    dl = tmp_path / "dl"
    dl.mkdir()
    (dl / "queries.tsv").write_text("7\twhat is x\n", encoding="utf-8")
    (dl / "qrels.txt").write_text("7 Q0 11 2\n7 Q0 12 0\n", encoding="utf-8")
    _jsonl(dl / "passages.jsonl", [{"pid": "11", "text": "eleven"}, {"pid": "12", "text": "xii"}])
    (dl / "bm25_top100.run").write_text(
        "7 Q0 12 1 9.0 bm25\n7 Q0 99 2 8.0 bm25\n7 Q0 11 3 7.0 bm25\n", encoding="utf-8"
    )
    assert [r.tier for r in datasets.trec_dl_tier(dl)] == ["contextually-relevant", "irrelevant"]
    (rerank,) = datasets.trec_dl_rerank(dl)
    assert [c.passage_id for c in rerank.candidates] == ["12", "11"]  # 99 has no text
    assert rerank.grades == {"11": 2, "12": 0}
    (judged,) = datasets.trec_dl_rerank(dl, pool="judged")
    assert [c.passage_id for c in judged.candidates] == ["11", "12"]


def test_wice_and_scifact_layouts_become_audit_and_classify_golden(tmp_path: Path) -> None:
    _jsonl(
        tmp_path / "wice" / "oracle_chunks" / "dev.jsonl",
        [
            {
                "label": "partially_supported",
                "claim": "Arnold runs Media Play News.",
                "evidence": ["Media Play News.", "Arnold, Publisher."],
                "meta": {"id": "dev1", "chunk_idx": [2, 5], "oracle_idx": [5]},
            }
        ],
    )
    (audit,) = datasets.wice_audit(tmp_path / "wice")
    assert audit.id == "dev1#1"
    assert [p.passage_id for p in audit.passages] == ["s2", "s5"]
    assert audit.claims[0].classification == "partially_supported"
    assert audit.claims[0].supporting_context_ids == ["s5"]

    _jsonl(
        tmp_path / "scifact" / "corpus.jsonl",
        [{"doc_id": 4, "title": "t", "abstract": ["First.", "Second."]}],
    )
    _jsonl(
        tmp_path / "scifact" / "claims_train.jsonl",
        [
            {
                "id": 1,
                "claim": "A.",
                "evidence": {"4": [{"sentences": [1], "label": "SUPPORT"}]},
                "cited_doc_ids": [4],
            },
            {"id": 2, "claim": "B.", "evidence": {}, "cited_doc_ids": [4]},
        ],
    )
    first, second = datasets.scifact_classify(tmp_path / "scifact")
    assert first.labels == ["SUPPORT"] and first.rationale_ids == ["4:1"]
    assert [p.passage_id for p in first.passages] == ["4:0", "4:1"]
    assert second.labels == ["NOT_ENOUGH_INFO"] and second.rationale_ids == []


# ---------------------------------------------------------------------- evaluation runs


def test_tier_evaluation_report(tmp_path: Path, store: SqlStore) -> None:
    golden = write_golden(tmp_path / "g.jsonl")
    out = tmp_path / "report"
    report = evaluate("tier", golden, judge=MarkerJudge(), store=store, out_dir=out)

    # 9 of 12 agree; gold marginals (5,2,2,3)/12, judge's (3,3,3,3)/12
    po, pe = 9 / 12, (5 * 3 + 2 * 3 + 2 * 3 + 3 * 3) / 144
    assert report["metrics"]["kappa"] == pytest.approx((po - pe) / (1 - pe))
    assert report["metrics"]["accuracy"] == pytest.approx(9 / 12)
    assert report["bar"] == {"measure": "kappa", "floor": 0.7, "passed": False}
    ci = report["intervals"]["kappa"]
    assert ci["low"] <= report["metrics"]["kappa"] <= ci["high"]
    assert report["confusion"]["matrix"][0] == [3, 1, 0, 1]
    assert report["worst"][0]["passage_id"] == "q2p5"  # three tiers apart comes first
    assert report["worst"][0]["justification"].startswith("It says offtopic")
    assert report["boundaries"]["far"] == 1
    assert report["sources"] == {"judge": 12}
    assert report["per_tier"]["directly-supporting"]["recall"] == pytest.approx(3 / 5)

    saved = json.loads((out / "report.json").read_text())
    assert saved["metrics"]["kappa"] == pytest.approx(report["metrics"]["kappa"])
    md = (out / "report.md").read_text()
    assert "is below the 0.7 bar" in md and "95% CI" in md
    assert "![confusion matrix](confusion.png)" in md
    assert (out / "confusion.png").read_bytes()[:4] == b"\x89PNG"
    assert len((out / "predictions.jsonl").read_text().splitlines()) == 12


def test_sampling_is_seeded(tmp_path: Path, store: SqlStore) -> None:
    golden = write_golden(tmp_path / "g.jsonl")
    a = evaluate(
        "tier",
        golden,
        judge=MarkerJudge(),
        store=store,
        out_dir=tmp_path / "a",
        sample=5,
        options=EvalOptions(seed=3),
    )
    evaluate(
        "tier",
        golden,
        judge=MarkerJudge(),
        store=store,
        out_dir=tmp_path / "b",
        sample=5,
        options=EvalOptions(seed=3),
    )
    assert a["run"]["items"] == 5
    ids = [
        [
            json.loads(x)["passage_id"]
            for x in (tmp_path / d / "predictions.jsonl").read_text().splitlines()
        ]
        for d in ("a", "b")
    ]
    assert ids[0] == ids[1] and len(ids[0]) == 5


class _Interrupted(Exception):
    pass


def test_an_interrupted_evaluation_resumes_where_it_stopped(
    tmp_path: Path, store: SqlStore
) -> None:
    golden = write_golden(tmp_path / "g.jsonl")
    out = tmp_path / "report"

    class StopsOnSecondQuery(MarkerJudge):
        async def complete(self, request):  # type: ignore[no-untyped-def]
            if request.payload.query == "question q2":
                raise _Interrupted("power cut")
            return await super().complete(request)

    with pytest.raises(_Interrupted):
        evaluate(
            "tier",
            golden,
            judge=StopsOnSecondQuery(),
            store=store,
            out_dir=out,
            options=EvalOptions(extra={"batch_size": 5}),
        )
    progress = (out / PROGRESS_FILE).read_text().splitlines()
    assert len(progress) == 2 and json.loads(progress[1])["group"] == "q1"

    judge = MarkerJudge()
    report = evaluate(
        "tier",
        golden,
        judge=judge,
        store=store,
        out_dir=out,
        options=EvalOptions(extra={"batch_size": 5}),
    )
    assert {r.payload.query for r in judge.requests} == {"question q2"}
    assert report["run"]["items"] == 12
    # a third run has nothing left to do
    again = MarkerJudge()
    evaluate(
        "tier",
        golden,
        judge=again,
        store=store,
        out_dir=out,
        options=EvalOptions(extra={"batch_size": 5}),
    )
    assert again.requests == []


def test_progress_of_another_run_is_not_reused(tmp_path: Path, store: SqlStore) -> None:
    golden = write_golden(tmp_path / "g.jsonl")
    out = tmp_path / "report"
    evaluate("tier", golden, judge=MarkerJudge(), store=store, out_dir=out, sample=6)
    judge = MarkerJudge()
    report = evaluate("tier", golden, judge=judge, store=store, out_dir=out, sample=8)
    assert report["run"]["items"] == 8
    assert len((out / "predictions.jsonl").read_text().splitlines()) == 8


def test_fallbacks_are_counted_and_warned(tmp_path: Path, store: SqlStore) -> None:
    from tests.scripted import ScriptedJudge

    golden = write_golden(tmp_path / "g.jsonl", golden_rows()[:6])
    judge = ScriptedJudge(["not json"] * 3)
    report = evaluate("tier", golden, judge=judge, store=store, out_dir=tmp_path / "r")
    assert report["sources"] == {"fallback": 6}
    assert any("fallbacks" in w for w in report["warnings"])


def test_scoring_predictions_made_elsewhere(tmp_path: Path) -> None:
    golden = write_golden(tmp_path / "g.jsonl")
    preds = tmp_path / "p.jsonl"
    rows = [
        {"query_id": r["query_id"], "passage_id": r["passage_id"], "tier": r["tier"]}
        for r in golden_rows()
    ]
    _jsonl(preds, rows)  # type: ignore[arg-type]
    report = score_predictions(None, preds, golden, out_dir=tmp_path / "r")
    assert report["metrics"]["kappa"] == pytest.approx(1.0)
    assert report["worst"] == []

    _jsonl(preds, rows[:-2])  # type: ignore[arg-type]
    with pytest.raises(InputError, match=r"2 golden pair\(s\) have no prediction.*q2/q2p4"):
        score_predictions("tier", preds, golden, out_dir=tmp_path / "r")
    _jsonl(preds, [{**rows[0], "tier": "maybe"}, *rows[1:]])  # type: ignore[arg-type]
    with pytest.raises(InputError, match="'maybe'"):
        score_predictions("tier", preds, golden, out_dir=tmp_path / "r")


def test_single_label_golden_set_reports_kappa_as_undefined(tmp_path: Path) -> None:
    rows = [dict(r, tier="irrelevant") for r in golden_rows()[:4]]
    golden = write_golden(tmp_path / "g.jsonl", rows)
    preds = tmp_path / "p.jsonl"
    _jsonl(
        preds,
        [
            {"query_id": r["query_id"], "passage_id": r["passage_id"], "tier": r["tier"]}
            for r in rows
        ],
    )
    report = score_predictions("tier", preds, golden, out_dir=tmp_path / "r")
    assert json.loads((tmp_path / "r" / "report.json").read_text())["metrics"]["kappa"] is None
    assert report["bar"]["passed"] is False
    assert "undefined (a single label)" in (tmp_path / "r" / "report.md").read_text()
    assert any("single tier" in w for w in report["warnings"])


def test_unknown_job_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="no evaluator for job 'summarise'"):
        get_evaluator("summarise")


# ---------------------------------------------------------------------- calibration


def test_fit_thresholds_recovers_separable_cut_points() -> None:
    scores = [0.95, 0.9, 0.7, 0.65, 0.4, 0.35, 0.1, 0.05]
    gold = [0, 0, 1, 1, 2, 2, 3, 3]
    cuts, kappa = fit_thresholds(scores, gold, 4)
    assert kappa == pytest.approx(1.0)
    assert [tier_of_score(s, cuts) for s in scores] == gold
    assert cuts == sorted(cuts, reverse=True)


@pytest.mark.parametrize("weights", [None, "linear"])
def test_fitted_kappa_is_the_kappa_of_the_fitted_cut_points(weights: str | None) -> None:
    import random

    from evidex.evaluate.metrics import cohen_kappa

    rng = random.Random(4)
    gold = [rng.randrange(4) for _ in range(300)]
    scores = [1 - g / 4 + rng.gauss(0, 0.2) for g in gold]
    cuts, kappa = fit_thresholds(scores, gold, 4, weights=weights)  # type: ignore[arg-type]
    predicted = [TIERS[tier_of_score(s, cuts)] for s in scores]
    recomputed = cohen_kappa([TIERS[g] for g in gold], predicted, TIERS, weights)  # type: ignore[arg-type]
    assert kappa == pytest.approx(recomputed)
    # no single cut point moved to a neighbouring score does better
    assert kappa >= cohen_kappa(
        [TIERS[g] for g in gold],
        [TIERS[tier_of_score(s, [cuts[0] + 0.05, *cuts[1:]])] for s in scores],
        TIERS,
        weights,  # type: ignore[arg-type]
    )


def test_calibration_records_versions_fits_and_goes_stale(tmp_path: Path, store: SqlStore) -> None:
    golden = write_golden(tmp_path / "g.jsonl")
    out = tmp_path / "cal"
    record = calibrate_tier(golden, judge=ScoringJudge(), store=store, out_dir=out)
    assert record["judge_id"] == "scripted"
    assert record["model_version"] == "scripted"
    assert len(record["prompt_version"]) == 16
    assert record["kappa"] == pytest.approx(2 / 3)
    assert record["boundaries"]["adjacent"][0]["down"] == 1
    fitted = record["fitted"]
    assert fitted["kappa"] >= record["kappa"]
    thresholds = json.loads((out / "thresholds.json").read_text())
    assert thresholds["cut_points"] == fitted["cut_points"]
    assert thresholds["sentence_weight"] == 0.5
    saved = out / "calibration.json"
    assert json.loads(saved.read_text())["judge_id"] == "scripted"

    assert check_calibration(saved, "scripted", "scripted", record["prompt_version"]) == []
    stale = check_calibration(saved, "scripted", "scripted-2", record["prompt_version"])
    assert len(stale) == 1 and "model version" in stale[0] and "recalibrate" in stale[0]
    report = evaluate(
        "tier",
        golden,
        judge=MarkerJudge("other"),
        store=store,
        out_dir=tmp_path / "e",
        calibration=saved,
    )
    assert any("judge id 'scripted'" in w for w in report["warnings"])
    assert "stale calibration" in (tmp_path / "e" / "report.md").read_text()


# ---------------------------------------------------------------------- consistency


def test_consistency_reruns_shuffled_and_resplit(store: SqlStore) -> None:
    passages = [
        Passage(passage_id=f"p{i}", text=f"{w} text {i}")
        for i, w in enumerate(["answer", "background", "mention", "offtopic"] * 3)
    ]
    judge = MarkerJudge()
    report = tier_consistency([("q", passages)], judge, store=store, runs=3, seed=1)
    assert report["kappa"] == [pytest.approx(1.0), pytest.approx(1.0)]
    assert report["agreement"] == 1.0 and report["unstable"] == []
    sizes = sorted(len(r.payload.passages) for r in judge.requests)
    assert sizes == [2, 2, 5, 5, 5, 7, 10]  # batches of 10, 5 and 7: nothing came from cache
    orders = {tuple(p.passage_id for p in r.payload.passages) for r in judge.requests}
    assert len(orders) == 7


def test_consistency_reports_position_dependent_labels(store: SqlStore) -> None:
    from evidex.judging import JudgeRequest
    from tests.scripted import ScriptedJudge

    class FirstIsBest(ScriptedJudge):
        """Grades the first passage of each batch as the answer: a position bias."""

        async def complete(self, request: JudgeRequest):  # type: ignore[no-untyped-def]
            def reply(req: JudgeRequest) -> dict[str, object]:
                items = [
                    {
                        "passage_id": p.passage_id,
                        "tier": TIERS[0] if i == 0 else TIERS[3],
                        "justification": "position",
                        "key_evidence_snippet": p.text[:4],
                    }
                    for i, p in enumerate(req.payload.passages)
                ]
                return {"classifications": items}

            self.replies = [reply]
            return await super().complete(request)

    passages = [Passage(passage_id=f"p{i}", text=f"text number {i}") for i in range(10)]
    report = tier_consistency([("q", passages)], FirstIsBest([]), store=store, runs=2)
    assert report["agreement"] < 1.0
    assert report["unstable"]


def test_eval_with_consistency_adds_the_metric(tmp_path: Path, store: SqlStore) -> None:
    golden = write_golden(tmp_path / "g.jsonl")
    report = evaluate(
        "tier", golden, judge=MarkerJudge(), store=store, out_dir=tmp_path / "r", consistency=True
    )
    assert report["metrics"]["consistency_kappa"] == pytest.approx(1.0)
    assert "## Consistency" in (tmp_path / "r" / "report.md").read_text()


# ---------------------------------------------------------------------- review export


def _resolved(store: SqlStore, decision: str, payload: dict[str, object], ids: list[str]) -> int:
    item = store.add_review(
        ReviewRequest(job="tier", reason="test", run_id="r1", passage_ids=ids, payload=payload)
    )
    store.resolve_review(item, decision=decision)
    return item


def test_review_export_turns_decisions_into_golden_records(store: SqlStore) -> None:
    assignment = {"passage_id": "p1", "tier": "directly-supporting", "text": "Most adults..."}
    _resolved(store, "accept", {"query": "vitamin D dose", "assignment": assignment}, ["p1"])
    _resolved(store, "irrelevant", {"query": "vitamin D dose", "fallback": {}}, ["p2", "p3"])
    _resolved(store, "reject", {"query": "vitamin D dose", "assignment": assignment}, ["p1"])
    _resolved(store, json.dumps({"p4": "tangentially-related"}), {"query": "q"}, ["p4"])
    _resolved(store, "accept", {"query": "q", "fallback": {}}, ["p5"])
    store.add_review(ReviewRequest(job="tier", reason="pending", run_id="r", payload={}))

    result = export_tier_reviews(
        store.list_reviews(status="resolved", job="tier"),
        texts={"p2": "D-Day.", "p4": "Sunlight."},
    )
    got = [(r.query, r.passage_id, r.tier) for r in result.records]
    assert got == [
        ("vitamin D dose", "p1", "directly-supporting"),
        ("vitamin D dose", "p2", "irrelevant"),
        ("q", "p4", "tangentially-related"),
    ]
    reasons = " | ".join(reason for _, reason in result.skipped)
    assert "no text for passage 'p3'" in reasons
    assert "'reject'" in reasons and "fallback" in reasons


def test_the_public_evaluation_surface_is_pinned() -> None:
    import evidex.evaluate

    assert evidex.evaluate.__all__ == [
        "EvalOptions",
        "Evaluator",
        "Gate",
        "GateResult",
        "GatesFailed",
        "Measure",
        "acalibrate_tier",
        "aevaluate",
        "atier_consistency",
        "calibrate_tier",
        "check_calibration",
        "check_gates",
        "compare_reports",
        "detect_job",
        "evaluate",
        "fit_thresholds",
        "get_evaluator",
        "load_gates",
        "load_golden",
        "load_qrels",
        "load_run",
        "parse_measure",
        "read_report",
        "register_evaluator",
        "run_gates",
        "score_predictions",
        "tier_consistency",
        "write_jsonl",
    ]
    assert all(hasattr(evidex.evaluate, name) for name in evidex.evaluate.__all__)


def test_the_confusion_picture_shows_counts_and_row_shares(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("matplotlib")
    import matplotlib.pyplot as plt
    import numpy as np

    from evidex.evaluate import plots

    drawn: list[object] = []
    monkeypatch.setattr(plt, "close", drawn.append)  # keep the figure to read its cells
    matrix = np.array([[2, 1, 0], [0, 0, 0], [1, 1, 2]], dtype=np.int64)
    assert plots.confusion_png(matrix, ["a", "b", "c"], tmp_path / "c.png", "t")
    assert (tmp_path / "c.png").read_bytes()[:4] == b"\x89PNG"
    (figure,) = drawn
    counts, shares = figure.axes[:2]  # type: ignore[attr-defined]
    assert [t.get_text() for t in counts.texts][:3] == ["2", "1", "0"]
    cells = [t.get_text() for t in shares.texts]
    assert cells[:3] == ["0.67", "0.33", "0.00"]  # each golden row sums to 1
    assert cells[3:6] == ["–", "–", "–"]  # a label nobody had: no share to show
    assert cells[6:9] == ["0.25", "0.25", "0.50"]
    assert "row" in shares.get_title()
    monkeypatch.undo()
    plt.close("all")
