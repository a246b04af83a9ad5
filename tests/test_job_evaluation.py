"""How a job is evaluated is part of its definition: each job's evaluation is found through the
registry, and runs and scores on a small golden set built here (no shared data needed).

Also the framework adapters' rule (which documents a job keeps), read from the same place.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from evidex.errors import ConfigError, InputError
from evidex.evaluate.golden import write_jsonl
from evidex.evaluate.measures import parse_measure
from evidex.evaluate.registry import EvalOptions, get_evaluator
from evidex.evaluate.run import evaluate, score_predictions
from evidex.jobs import Evaluation, definition, definitions
from evidex.store import SqlStore
from tests.evalkit import AnsweringJudge, MarkerJudge, golden_rows

EVALUATED = [d.name for d in definitions() if d.evaluation is not None]

_PASSAGE = {"passage_id": "s0", "text": "The sky is blue on a clear day."}
GOLDEN: dict[str, list[dict[str, Any]]] = {
    "tier": golden_rows(),
    "rerank": [
        {
            "query_id": "q1",
            "query": "what colour is the sky",
            "candidates": [
                {"passage_id": "a", "text": "Grass is green."},
                {"passage_id": "b", "text": "The sky is blue on a clear day."},
            ],
            "grades": {"a": 0, "b": 2},
        }
    ],
    "classify": [
        {
            "id": "c1",
            "input": "The sky is blue.",
            "passages": [_PASSAGE],
            "labels": ["SUPPORT"],
            "rationale_ids": ["s0"],
        },
        {
            "id": "c2",
            "input": "The sky is green.",
            "passages": [_PASSAGE],
            "labels": ["CONTRADICT"],
            "rationale_ids": ["s0"],
        },
    ],
    "audit": [
        {
            "id": "a1",
            "answer": "The sky is blue.",
            "passages": [_PASSAGE],
            "claims": [
                {
                    "claim_text": "The sky is blue.",
                    "classification": "fully_supported",
                    "supporting_context_ids": ["s0"],
                }
            ],
        }
    ],
    "sufficiency": [
        {
            "id": "s1",
            "question": "What colour is the sky?",
            "passages": [_PASSAGE],
            "sufficient": True,
        },
        {
            "id": "s2",
            "question": "How tall is the sky?",
            "passages": [_PASSAGE],
            "sufficient": False,
        },
    ],
}
PREDICTIONS: dict[str, list[dict[str, Any]]] = {
    "tier": [
        {"query_id": r["query_id"], "passage_id": r["passage_id"], "tier": r["tier"]}
        for r in golden_rows()
    ],
    "rerank": [{"query_id": "q1", "ranking": ["b", "a"], "source": "judge"}],
    "classify": [
        {"id": "c1", "labels": ["SUPPORT"], "cited": ["s0"], "source": "judge"},
        {"id": "c2", "labels": ["SUPPORT"], "cited": [], "source": "judge"},
    ],
    "audit": [
        {
            "id": "a1",
            "claims": [{"claim_text": "The sky is blue.", "classification": "fully_supported"}],
            "source": "judge",
        }
    ],
    "sufficiency": [
        {"id": "s1", "sufficient": True, "confidence": 0.9, "decision": "answer"},
        {"id": "s2", "sufficient": False, "confidence": 0.9, "decision": "abstain"},
    ],
}


def _evaluation(job: str) -> Evaluation:
    evaluation = definition(job).evaluation
    assert evaluation is not None, f"{job} declares no evaluation"
    return evaluation


def _golden(tmp_path: Path, job: str) -> Path:
    path = tmp_path / f"{job}.jsonl"
    write_jsonl(path, GOLDEN[job])
    return path


def test_the_four_jobs_declare_an_evaluation_and_each_has_a_golden_set_here() -> None:
    assert {"tier", "rerank", "classify", "audit"} <= set(EVALUATED)
    assert set(EVALUATED) <= set(GOLDEN), "add the new job's small golden set here"


@pytest.mark.parametrize("job", EVALUATED)
def test_the_evaluation_names_its_evaluator_golden_rows_and_measures(job: str) -> None:
    evaluation = _evaluation(job)
    evaluator = get_evaluator(job)
    assert evaluator.job == job
    assert type(evaluator).__name__ == evaluation.evaluator.rpartition(":")[2]
    assert issubclass(evaluation.golden_type(), BaseModel)
    assert evaluation.measures, f"{job} declares no measure"
    for measure in evaluation.measures:
        assert str(parse_measure(measure)) == measure, f"{measure} is not canonical"


@pytest.mark.parametrize("job", EVALUATED)
def test_the_evaluator_reads_the_declared_golden_rows(tmp_path: Path, job: str) -> None:
    records = get_evaluator(job).load(_golden(tmp_path, job), EvalOptions())
    assert records and all(isinstance(r, _evaluation(job).golden_type()) for r in records)


@pytest.mark.parametrize("job", EVALUATED)
def test_scoring_predictions_reports_every_declared_measure(tmp_path: Path, job: str) -> None:
    predictions = tmp_path / "predictions.jsonl"
    write_jsonl(predictions, PREDICTIONS[job])
    report = score_predictions(
        job, predictions, _golden(tmp_path, job), out_dir=tmp_path / "report"
    )
    assert report["job"] == job
    assert set(_evaluation(job).measures) <= set(report["metrics"])
    written = json.loads((tmp_path / "report" / "report.json").read_text(encoding="utf-8"))
    assert set(_evaluation(job).measures) <= set(written["metrics"])


@pytest.mark.parametrize("job", EVALUATED)
def test_a_report_keeps_its_items_and_they_give_its_metrics(tmp_path: Path, job: str) -> None:
    """What ``evidex eval compare`` relies on: the items of a written report, read back,
    give every metric the report states (so a comparison's two sides are the reports')."""
    predictions = tmp_path / "predictions.jsonl"
    write_jsonl(predictions, PREDICTIONS[job])
    score_predictions(job, predictions, _golden(tmp_path, job), out_dir=tmp_path / "report")
    written = json.loads((tmp_path / "report" / "report.json").read_text(encoding="utf-8"))
    assert written["report_format"] == 2
    assert len(written["items"]) == len(GOLDEN[job])
    assert len({item["key"] for item in written["items"]}) == len(written["items"])
    for item in written["items"]:
        assert {"key", "gold", "judgment", "why", "score", "source"} <= set(item)
    figures = get_evaluator(job).figures(written["items"], written)
    assert set(figures) == set(written["metrics"])
    for measure, value in written["metrics"].items():
        assert figures[measure] == pytest.approx(value, nan_ok=True) or (
            value is None and math.isnan(figures[measure])
        ), measure


@pytest.mark.parametrize("job", EVALUATED)
def test_every_evaluation_runs_with_a_judge_whose_replies_never_validate(
    tmp_path: Path, store: SqlStore, job: str
) -> None:
    """The whole run (predict, score, write) for each job, found through the registry; the
    judge's fallbacks are reported as such, never as its grades."""
    judge = AnsweringJudge("this is not JSON")
    report = evaluate(
        job, _golden(tmp_path, job), judge=judge, store=store, out_dir=tmp_path / "out"
    )
    assert report["run"]["job"] == job
    assert set(_evaluation(job).measures) <= set(report["metrics"])
    assert any("fallback" in w for w in report["warnings"]), report["warnings"]
    assert (tmp_path / "out" / "report.md").is_file()


def test_the_tier_evaluation_measures_a_judge_that_answers(tmp_path: Path, store: SqlStore) -> None:
    report = evaluate(
        "tier", _golden(tmp_path, "tier"), judge=MarkerJudge(), store=store, out_dir=tmp_path
    )
    # the marker judge disagrees on 3 of the 12 golden pairs (see tests.evalkit)
    assert report["metrics"]["accuracy"] == pytest.approx(9 / 12)


def test_calibration_and_review_export_are_found_through_the_evaluation() -> None:
    from evidex.evaluate.calibrate import calibrate_tier
    from evidex.evaluate.calibrate_sufficiency import calibrate_sufficiency

    assert _evaluation("tier").calibrator() is calibrate_tier
    assert _evaluation("sufficiency").calibrator() is calibrate_sufficiency
    assert _evaluation("rerank").calibrator() is None
    assert all(_evaluation(job).from_reviews for job in ("tier", "rerank", "classify", "audit"))


def test_a_wrong_import_path_in_an_evaluation_is_a_config_error() -> None:
    broken = Evaluation(measures=("accuracy",), golden="evidex.nowhere:Row", evaluator="x:Y")
    with pytest.raises(ConfigError, match=r"cannot import 'evidex\.nowhere:Row'"):
        broken.golden_type()


def test_a_job_without_an_evaluator_is_named_with_those_that_have_one() -> None:
    known = ", ".join(sorted(EVALUATED))
    with pytest.raises(ConfigError, match=f"no evaluator for job 'summarise'.*: {known}$"):
        get_evaluator("summarise")


# ---------------------------------------------------------------------- adapters


def test_adapters_run_the_jobs_that_say_which_documents_they_keep() -> None:
    from evidex.integrations._core import Grading, adapted_jobs

    assert adapted_jobs() == [d.name for d in definitions() if d.documents is not None]
    assert set(adapted_jobs()) == {"tier", "rerank", "sufficiency"}
    with pytest.raises(InputError, match="job must be 'tier' or 'rerank' or 'sufficiency', got"):
        Grading("audit")  # type: ignore[arg-type]
