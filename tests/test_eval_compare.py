"""Run against run: ``evidex eval compare`` and ``evidex gate --baseline``.

Two tier runs of scripted judges over the small golden set of :mod:`tests.evalkit` (12 pairs):
the marker judge, which disagrees with the golden tiers on 3 pairs, and a judge that grades 3
pairs otherwise (one right pair made wrong, two wrong pairs made right). The paired interval is
checked against the resampling written out here; the gate against constructed runs whose
difference is known.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sklearn.metrics import cohen_kappa_score

from evidex import judges
from evidex.errors import InputError
from evidex.evaluate.compare import compare_reports, comparison_markdown, regressed
from evidex.evaluate.golden import write_jsonl
from evidex.evaluate.run import evaluate, read_report, score_predictions
from evidex.judging import JudgeRequest
from evidex.store import SqlStore
from tests.evalkit import (
    TIERS,
    AnsweringJudge,
    MarkerJudge,
    marker_reply,
    run_cli,
    write_gates,
    write_golden,
)

# the second judge's grades where it departs from the marker judge (see tests.evalkit)
REGRADED = {
    "q1p3": "directly-supporting",  # golden directly-supporting; the marker judge said contextual
    "q1p4": "irrelevant",  # golden tangentially-related, as the marker judge said
    "q2p3": "irrelevant",  # golden irrelevant; the marker judge said tangentially-related
}


def regraded_reply(request: JudgeRequest) -> dict[str, Any]:
    reply = marker_reply(request)
    for item in reply["classifications"]:
        if item["passage_id"] in REGRADED:
            item["tier"] = REGRADED[item["passage_id"]]
            item["justification"] = f"On second reading, {item['passage_id']} is otherwise."
            if item["tier"] == TIERS[3]:
                item["key_evidence_snippet"] = None
    return reply


@pytest.fixture
def two_runs(tmp_path: Path, store: SqlStore) -> tuple[dict[str, Any], dict[str, Any]]:
    golden = write_golden(tmp_path / "golden.jsonl")
    evaluate("tier", golden, judge=MarkerJudge(), store=store, out_dir=tmp_path / "before")
    evaluate(
        "tier",
        golden,
        judge=AnsweringJudge(regraded_reply, judge_id="scripted-regraded"),
        store=store,
        out_dir=tmp_path / "after",
    )
    return read_report(tmp_path / "before"), read_report(tmp_path / "after" / "report.json")


def test_the_difference_interval_is_the_paired_bootstrap_written_out(
    two_runs: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    before, after = two_runs
    comparison = compare_reports(before, after, samples=500, seed=3)
    rows = {row["measure"]: row for row in comparison["metrics"]}

    # accuracy: each pair right (1) or wrong (0) in each run; resample the pairs, in the
    # baseline's order, with numpy's generator seeded as the comparison is
    right_before = np.array([i["score"] for i in before["items"]])
    right_after = np.array([i["score"] for i in after["items"]])
    assert right_before.sum() == 9 and right_after.sum() == 10
    rng = np.random.default_rng(3)
    n = len(right_before)
    differences = []
    for _ in range(500):
        picked = rng.integers(0, n, size=n)
        differences.append(right_after[picked].mean() - right_before[picked].mean())
    low, high = np.percentile(differences, [2.5, 97.5])
    accuracy = rows["accuracy"]
    assert accuracy["baseline"] == pytest.approx(9 / 12)
    assert accuracy["report"] == pytest.approx(10 / 12)
    assert accuracy["difference"] == pytest.approx(1 / 12)
    assert (accuracy["low"], accuracy["high"]) == pytest.approx((low, high))
    assert accuracy["samples"] == 500
    assert accuracy["verdict"] == "not significant"  # 12 pairs cannot tell

    # kappa's difference on the whole set, against scikit-learn's kappa of each run
    gold = [i["gold"] for i in before["items"]]
    kappas = [
        cohen_kappa_score(gold, [i["judgment"] for i in run["items"]], labels=TIERS)
        for run in (before, after)
    ]
    assert rows["kappa"]["difference"] == pytest.approx(kappas[1] - kappas[0])
    assert rows["kappa"]["low"] <= rows["kappa"]["difference"] <= rows["kappa"]["high"]
    # each side is the report's own figure: the two reports hold the same pairs
    for measure, row in rows.items():
        assert row["baseline"] == pytest.approx(before["metrics"][measure], nan_ok=True)
        assert row["report"] == pytest.approx(after["metrics"][measure], nan_ok=True)


def test_the_changed_items_are_listed_with_both_judgments(
    two_runs: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    comparison = compare_reports(*two_runs)
    assert comparison["unit"] == "pair"
    assert comparison["items"] == {
        "compared": 12,
        "changed": 3,
        "only_in_baseline": [],
        "only_in_report": [],
    }
    changed = {c["key"]: c for c in comparison["changed"]}
    assert list(changed) == ["q1 / q1p4", "q1 / q1p3", "q2 / q2p3"]  # worse first
    worse = changed["q1 / q1p4"]
    assert worse["effect"] == "worse" and worse["gold"] == "tangentially-related"
    assert worse["baseline"]["judgment"] == "tangentially-related"
    assert worse["baseline"]["why"] == "It says mention passage q1 4."
    assert worse["report"]["judgment"] == "irrelevant"
    assert worse["report"]["why"] == "On second reading, q1p4 is otherwise."
    assert changed["q1 / q1p3"]["effect"] == "better"
    assert changed["q1 / q1p3"]["baseline"]["judgment"] == "contextually-relevant"
    assert changed["q2 / q2p3"]["report"]["judgment"] == "irrelevant"

    page = comparison_markdown(comparison)
    assert "| `accuracy` | 0.750 | 0.833 | +0.083 |" in page
    assert "## Changed judgments: 3 of 12 pairs" in page
    assert "- **`q1 / q1p4`** (golden: tangentially-related): worse" in page
    assert "  - baseline: tangentially-related (judge): It says mention passage q1 4." in page
    assert "  - report: irrelevant (judge): On second reading, q1p4 is otherwise." in page


def test_items_held_by_one_report_only_are_left_out_with_a_warning(
    two_runs: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    before, after = two_runs
    fewer = {**after, "items": [i for i in after["items"] if not i["key"].startswith("q2")]}
    comparison = compare_reports(before, fewer)
    assert comparison["items"]["compared"] == 6
    assert len(comparison["items"]["only_in_baseline"]) == 6
    assert "over the 6 pair(s) both hold" in comparison["warnings"][0]
    accuracy = next(r for r in comparison["metrics"] if r["measure"] == "accuracy")
    assert accuracy["baseline"] == pytest.approx(5 / 6)  # q1 alone: one disagreement
    assert accuracy["report"] == pytest.approx(5 / 6)


def test_reports_that_cannot_be_paired_are_refused(
    two_runs: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    before, after = two_runs
    relabelled = [dict(i) for i in after["items"]]
    relabelled[0]["gold"] = "irrelevant"
    with pytest.raises(InputError, match=r"1 item\(s\) have different golden labels.*q1 / q1p0"):
        compare_reports(before, {**after, "items": relabelled})
    with pytest.raises(InputError, match="a tier report and the other a rerank report"):
        compare_reports(before, {**after, "job": "rerank"})
    old = {k: v for k, v in after.items() if k not in ("items", "report_format")}
    with pytest.raises(InputError, match=r"format 1.*evidex eval tier --golden .*golden\.jsonl"):
        compare_reports(before, old)


def test_a_regression_is_an_interval_wholly_beyond_the_tolerance() -> None:
    def row(low: float, high: float, better: str | None = "higher") -> dict[str, Any]:
        return {"low": low, "high": high, "better": better}

    assert regressed(row(-0.3, -0.1))
    assert not regressed(row(-0.3, 0.0))  # reaches zero: noise the golden set cannot tell
    assert not regressed(row(-0.3, -0.1), tolerance=0.2)  # reaches -0.2
    assert regressed(row(-0.3, -0.21), tolerance=0.2)
    assert regressed(row(0.1, 0.3, "lower"))  # a share that should fall, rose
    assert not regressed(row(-0.3, -0.1, "lower"))
    assert not regressed(row(-0.3, -0.1, None))  # no better direction
    assert not regressed(row(math.nan, math.nan))


# ---------------------------------------------------------------------- constructed runs


def _golden_40(tmp_path: Path) -> Path:
    rows = [
        {
            "query_id": f"q{i // 10}",
            "query": f"question {i // 10}",
            "passage_id": f"p{i}",
            "text": f"passage {i}",
            "tier": TIERS[i % 4],
        }
        for i in range(40)
    ]
    path = tmp_path / "golden40.jsonl"
    write_jsonl(path, rows)
    return path


def _run(tmp_path: Path, name: str, wrong: set[int]) -> Path:
    """A tier report of 40 pairs whose judge is wrong on the pairs ``wrong`` names (one tier
    lower, or the top tier for the bottom one)."""
    predictions = [
        {
            "query_id": f"q{i // 10}",
            "passage_id": f"p{i}",
            "tier": TIERS[(i + 1) % 4] if i in wrong else TIERS[i % 4],
            "source": "judge",
        }
        for i in range(40)
    ]
    path = tmp_path / f"{name}.jsonl"
    write_jsonl(path, predictions)
    score_predictions("tier", path, _golden_40(tmp_path), out_dir=tmp_path / name)
    return tmp_path / name / "report.json"


def test_the_gate_fails_on_a_significant_regression_and_names_metric_and_interval(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    baseline = _run(tmp_path, "baseline", set())
    _run(tmp_path, "worse", set(range(0, 40, 2)))  # half the pairs wrong: accuracy 1.0 → 0.5
    config = write_gates(
        tmp_path, '[[gate]]\nreport = "worse/report.json"\nfloors = { accuracy = 0.4 }\n'
    )
    code, out, err = run_cli(capsys, "gate", "--config", str(config), "--baseline", str(baseline))
    assert code == 1, err
    assert "against the baseline (paired bootstrap over pairs)" in out
    message = re.search(r"significant regression: (.*)", err)
    assert message, err
    assert message.group(1).startswith("accuracy went from 1.000 to 0.500 (-0.500, 95% interval")
    assert "wholly beyond the tolerance of 0" in err and str(baseline) in err
    assert "under their floor" not in err  # 0.5 is above the floor: the baseline failed it

    # within a tolerance wider than the fall, the same runs pass
    code, _, err = run_cli(
        capsys,
        "gate",
        "--config",
        str(config),
        "--baseline",
        str(baseline),
        "--tolerance",
        "0.8",
    )
    assert code == 0, err


def test_the_gate_passes_a_fall_its_interval_cannot_tell_from_noise(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _run(tmp_path, "baseline", set())
    _run(tmp_path, "slightly", {3})  # one pair of 40 now wrong
    config = write_gates(
        tmp_path,
        '[[gate]]\nreport = "slightly/report.json"\nbaseline = "baseline/report.json"\n'
        "floors = { accuracy = 0.5, kappa = 0.5 }\n",
    )
    code, out, err = run_cli(capsys, "gate", "--config", str(config))
    assert code == 0, err
    assert "-0.025" in out and "pass" in out and "FAIL" not in out


def test_the_gate_uses_each_gates_own_baseline_and_tolerance(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _run(tmp_path, "baseline", set())
    _run(tmp_path, "worse", set(range(0, 40, 2)))
    body = (
        '[[gate]]\nreport = "worse/report.json"\nbaseline = "baseline/report.json"\n'
        "tolerance = {t}\nfloors = {{ accuracy = 0.0 }}\n"
    )
    strict = write_gates(tmp_path, body.format(t=0.01))
    code, _, err = run_cli(capsys, "gate", "--config", str(strict))
    assert code == 1 and "accuracy went from 1.000 to 0.500" in err
    lenient = write_gates(tmp_path, body.format(t=0.9))
    code, _, err = run_cli(capsys, "gate", "--config", str(lenient))
    assert code == 0, err


def test_a_baseline_the_gate_cannot_use_is_a_usage_error_before_anything_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _run(tmp_path, "worse", {1})
    config = write_gates(
        tmp_path, '[[gate]]\nreport = "worse/report.json"\nfloors = { kappa = 0 }\n'
    )
    rerank = tmp_path / "rerank.json"
    rerank.write_text(json.dumps({"report_format": 2, "job": "rerank", "items": []}))
    code, _, err = run_cli(capsys, "gate", "-c", str(config), "--baseline", str(rerank))
    assert code == 2 and "is a rerank report, and no gate checks rerank" in err
    old = tmp_path / "old.json"
    old.write_text(json.dumps({"job": "tier", "metrics": {"kappa": 0.5}}))
    code, _, err = run_cli(capsys, "gate", "-c", str(config), "--baseline", str(old))
    assert code == 2 and "before reports kept their items" in err


def test_eval_compare_writes_markdown_and_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(judges, "JUDGES", dict(judges.JUDGES))
    baseline = _run(tmp_path, "baseline", {5})
    report = _run(tmp_path, "report", {5, 6, 7})

    code, out, err = run_cli(capsys, "eval", "compare", str(baseline), str(report))
    assert code == 0, err
    assert out.startswith("# Comparison: tier, run against run")
    assert "## Changed judgments: 2 of 40 pairs" in out

    md = tmp_path / "compare.md"
    code, out, err = run_cli(capsys, "eval", "compare", str(baseline), str(report), "-o", str(md))
    assert code == 0 and out == ""
    assert "2 of 40 pairs changed judgment" in err and f"wrote {md}" in err
    assert "| `accuracy` | 0.975 | 0.925 | -0.050 |" in md.read_text()

    as_json = tmp_path / "compare.json"
    code, _, err = run_cli(
        capsys, "eval", "compare", str(baseline.parent), str(report), "-o", str(as_json)
    )
    assert code == 0, err
    data = json.loads(as_json.read_text())
    assert data["baseline"]["report"] == str(baseline.parent)
    assert [c["key"] for c in data["changed"]] == ["q0 / p6", "q0 / p7"]
    assert all(c["effect"] == "worse" for c in data["changed"])
    accuracy = next(r for r in data["metrics"] if r["measure"] == "accuracy")
    assert accuracy["difference"] == pytest.approx(-0.05)

    code, out, _ = run_cli(
        capsys, "eval", "compare", str(baseline), str(report), "--format", "json"
    )
    assert code == 0 and json.loads(out)["items"]["changed"] == 2
    code, _, err = run_cli(
        capsys, "eval", "compare", str(baseline), str(report), "--format", "yaml"
    )
    assert code == 2 and "--format is markdown or json" in err
