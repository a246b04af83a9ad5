"""``evidex eval``, ``calibrate``, ``gate`` and ``review export`` through the real entry point,
with marker judges registered under the specs ``scripted`` and ``scoring``."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from evidex import judges
from evidex.cli import main
from evidex.errors import ConfigError
from evidex.evaluate.gate import check_gates, load_gates
from evidex.harness.ports import ReviewRequest
from evidex.store import open_store
from tests.evalkit import MARK, TIERS, MarkerJudge, ScoringJudge, golden_rows, write_golden
from tests.evalkit import write_gates as _gates


@pytest.fixture(autouse=True)
def _marker_judges(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(judges, "JUDGES", dict(judges.JUDGES))

    def marker(spec: str, **options: Any) -> MarkerJudge:
        return MarkerJudge(spec)

    def scoring(spec: str, **options: Any) -> ScoringJudge:
        if options:
            raise ConfigError(f"unexpected options {options}")
        return ScoringJudge(spec)

    judges.register_judge("scripted", marker)
    judges.register_judge("scoring", scoring)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, re.sub(r"\s+", " ", err)


def test_eval_tier_writes_the_report_and_resumes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    golden = write_golden(tmp_path / "g.jsonl")
    out = tmp_path / "r"
    args = ("eval", "tier", "--golden", str(golden), "-j", "scripted", "-o", str(out))
    code, _, err = run(capsys, *args, "--sample", "8", "--seed", "2")
    assert code == 0, err
    assert "the 0.7 bar" in err and "kappa_linear" in err and "2/2" in err  # progress bar
    report = json.loads((out / "report.json").read_text())
    assert report["run"]["items"] == 8 and report["run"]["judge_id"] == "scripted"
    assert (out / "report.md").exists() and (out / "confusion.png").exists()
    code, _, _ = run(capsys, *args, "--sample", "8", "--seed", "2")
    assert code == 0
    progress = (out / "progress.jsonl").read_text().splitlines()
    assert len(progress) == 1 + report["run"]["groups"]


def test_eval_predictions_scores_without_a_judge(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    golden = write_golden(tmp_path / "g.jsonl")
    preds = tmp_path / "p.jsonl"
    rows = golden_rows()
    preds.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "r"
    code, _, err = run(
        capsys, "eval", "--predictions", str(preds), "--golden", str(golden), "-o", str(out)
    )
    assert code == 0, err
    assert "kappa 1.000" in err and "meets the 0.7 bar" in err
    preds.write_text("".join(json.dumps(r) + "\n" for r in rows[1:]))
    code, _, err = run(
        capsys, "eval", "--predictions", str(preds), "--golden", str(golden), "-o", str(out)
    )
    assert code == 2
    assert "1 golden pair(s) have no prediction" in err and "q1/q1p0" in err


def test_a_sampled_run_is_rescored_with_the_same_sample(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    golden = write_golden(tmp_path / "g.jsonl")
    out = tmp_path / "r"
    sample = ("--sample", "8", "--seed", "2")
    args = ("eval", "tier", "--golden", str(golden), "-j", "scripted", "-o", str(out))
    code, _, err = run(capsys, *args, *sample)
    assert code == 0, err
    preds, again = out / "predictions.jsonl", tmp_path / "again"
    rescore = ("eval", "--predictions", str(preds), "--golden", str(golden), "-o", str(again))
    code, _, err = run(capsys, *rescore, *sample)
    assert code == 0, err
    first = json.loads((out / "report.json").read_text())
    report = json.loads((again / "report.json").read_text())
    assert report["run"]["items"] == 8 and report["run"]["sample"] == 8
    assert report["metrics"] == first["metrics"]
    code, _, err = run(capsys, *rescore)  # the whole golden set: the rest have no prediction
    assert code == 2 and "have no prediction" in err


def test_eval_bad_golden_file_exits_2_naming_the_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = golden_rows()[:3]
    rows[2]["tier"] = "somewhat"
    golden = write_golden(tmp_path / "g.jsonl", rows)
    code, _, err = run(
        capsys, "eval", "tier", "--golden", str(golden), "-j", "scripted", "-o", str(tmp_path / "r")
    )
    assert code == 2
    assert f"{golden}:3" in err.replace(" ", "") or f"{golden}:3" in err
    assert "somewhat" in err
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    code, _, err = run(capsys, "eval", "tier", "--golden", str(empty), "-j", "scripted")
    assert code == 2 and "empty" in err
    code, _, err = run(capsys, "eval", "--golden", str(golden))
    assert code == 2 and "name the job" in err


def test_calibrate_then_eval_warns_when_the_calibration_is_stale(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    golden = write_golden(tmp_path / "g.jsonl")
    code, _, err = run(capsys, "calibrate", "tier", "--golden", str(golden), "-j", "scoring")
    assert code == 0, err
    assert "disagreements by tier boundary" in err and "kappa 0.667" in err
    assert "fitted cut points" in err
    calibration = tmp_path / "reports" / "calibration-tier" / "calibration.json"
    assert json.loads(calibration.read_text())["judge_id"] == "scoring"
    # the default calibration file is checked: another judge makes it stale
    code, _, err = run(capsys, "eval", "tier", "--golden", str(golden), "-j", "scripted")
    assert code == 0
    assert "stale calibration" in err
    code, _, err = run(capsys, "calibrate", "rerank", "--golden", str(golden), "-j", "scoring")
    assert code == 2 and "implemented for the tier, sufficiency jobs, not 'rerank'" in err


def test_gate_runs_evaluations_and_fails_under_the_floor(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_golden(tmp_path / "g.jsonl")
    config = _gates(
        tmp_path,
        """
[[gate]]
name = "tier agreement"
job = "tier"
golden = "g.jsonl"
judge = "scripted"
output = "out/tier"
floors = { kappa = 0.7, accuracy = 0.5 }
""",
    )
    code, out, err = run(capsys, "gate", "--config", str(config))
    assert code == 1
    assert "FAIL" in out and "pass" in out and "kappa" in out
    assert "1 of 2 gate metric(s) under their floor" in err
    assert (tmp_path / "out" / "tier" / "report.json").exists()

    # a gate reading that report, with floors it meets, passes
    config = _gates(
        tmp_path,
        '[[gate]]\nreport = "out/tier/report.json"\nfloors = { kappa = 0.6, '
        '"kappa_binary(boundary=contextually-relevant)" = 0.1 }\n',
    )
    code, out, _ = run(capsys, "gate", "--config", str(config))
    assert code == 0 and "FAIL" not in out


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ('[[gate]]\nreport = "r.json"\nfloors = { kapa = 0.7 }\n', "unknown measure 'kapa'"),
        ('[[gate]]\nreport = "r.json"\nfloors = { "nDCG" = 0.7 }\n', "needs a positive @cutoff"),
        ('[[gate]]\nreport = "r.json"\nfloor = 1\nfloors = { kappa = 0.7 }\n', "unknown keys"),
        ("[[gate]]\nfloors = { kappa = 0.7 }\n", "either 'report' or both"),
        ('[[gate]]\nreport = "r.json"\nfloors = { kappa = "high" }\n', "must be a number"),
        ("[gate\n", "not valid TOML"),
        ("title = 'x'\n", "unknown top-level keys"),
    ],
)
def test_bad_gate_configs_are_config_errors(tmp_path: Path, body: str, message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        load_gates(_gates(tmp_path, body))


def test_gate_metric_missing_from_the_report_and_undefined_values(tmp_path: Path) -> None:
    (tmp_path / "r.json").write_text(json.dumps({"metrics": {"kappa": None, "accuracy": 0.9}}))
    gates = load_gates(
        _gates(tmp_path, '[[gate]]\nreport = "r.json"\nfloors = { "nDCG@10" = 0.5 }\n')
    )
    with pytest.raises(ConfigError, match="has no metric 'nDCG@10'"):
        check_gates(gates)
    gates = load_gates(_gates(tmp_path, '[[gate]]\nreport = "r.json"\nfloors = { kappa = 0.0 }\n'))
    (result,) = check_gates(gates)
    assert result.value is None and not result.passed


def test_calibrate_warns_on_a_narrow_band_shows_progress_and_says_how_to_use_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLUMNS", "300")
    # tangentially-related (mention) sits in a sliver of scores between its neighbours
    spec = [(0, 0.9), (0, 0.88), (1, 0.6), (1, 0.51), (1, 0.5004), (2, 0.5002), (2, 0.5003)]
    spec += [(3, 0.5), (3, 0.2), (3, 0.1)]
    words = list(MARK)
    rows = [
        {
            "query_id": f"q{i % 3}",
            "query": f"question {i % 3}",
            "passage_id": f"p{i}",
            "text": f"{words[gold]} passage {i} score={score}",
            "tier": TIERS[gold],
        }
        for i, (gold, score) in enumerate(spec)
    ]
    golden = write_golden(tmp_path / "g.jsonl", rows)
    code, _, err = run(capsys, "calibrate", "tier", "--golden", str(golden), "-j", "scoring")
    assert code == 0, err
    assert "fitted cut points" in err
    assert "warning: the tangentially-related band is 0.0002 wide" in err
    out = tmp_path / "reports" / "calibration-tier"
    record = json.loads((out / "calibration.json").read_text())
    assert any("tangentially-related band" in w for w in record["warnings"])
    assert "6/6" in err  # one bar: 3 evaluation batches, then scoring the 3 queries
    used = Path("reports", "calibration-tier")
    assert f"--judge-option thresholds_path={used / 'thresholds.json'}" in err
    assert f"evidex eval tier --calibration {used / 'calibration.json'}" in err


def test_gate_checks_every_report_before_running_any_evaluation(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_golden(tmp_path / "g.jsonl")
    (tmp_path / "old.json").write_text(json.dumps({"metrics": {"accuracy": 0.9}}))
    config = _gates(
        tmp_path,
        """
[[gate]]
job = "tier"
golden = "g.jsonl"
judge = "scripted"
output = "out/tier"
floors = { kappa = 0.7 }

[[gate]]
name = "rerank quality"
report = "reports/eval-rerank/report.json"
floors = { "nDCG@10" = 0.6 }

[[gate]]
report = "old.json"
floors = { kappa = 0.5 }
""",
    )
    code, out, err = run(capsys, "gate", "--config", str(config))
    assert code == 2 and out == ""
    assert "gate 'rerank quality'" in err and "reports/eval-rerank/report.json" in err
    assert "does not exist" in err
    assert "old.json has no metric 'kappa'" in err  # every problem at once
    assert not (tmp_path / "out").exists()  # nothing was evaluated first


def test_gate_cli_bad_config_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = _gates(tmp_path, '[[gate]]\nreport = "r.json"\nfloors = { kapa = 0.7 }\n')
    code, _, err = run(capsys, "gate", "--config", str(config))
    assert code == 2 and "unknown measure 'kapa'" in err


def test_review_export_writes_golden_records(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = f"sqlite:///{tmp_path / 'review.db'}"
    store = open_store(db)
    try:
        item = store.add_review(
            ReviewRequest(
                job="tier",
                reason="fallback",
                run_id="r",
                passage_ids=["p1", "p2"],
                payload={"query": "vitamin D dose"},
            )
        )
        store.resolve_review(item, decision="irrelevant")
    finally:
        store.close()
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(json.dumps({"passage_id": "p1", "text": "D-Day landings."}) + "\n")
    out = tmp_path / "golden.jsonl"
    code, _, err = run(
        capsys,
        "review",
        "export",
        "--job",
        "tier",
        "-o",
        str(out),
        "--passages",
        str(corpus),
        "--db",
        db,
    )
    assert code == 0, err
    assert "wrote 1 golden record(s)" in err and "no text for passage 'p2'" in err
    (record,) = [json.loads(line) for line in out.read_text().splitlines()]
    assert record == {
        "query": "vitamin D dose",
        "passage_id": "p1",
        "text": "D-Day landings.",
        "tier": "irrelevant",
    }
    # the export is a golden file that evidex eval reads
    code, _, err = run(
        capsys,
        "eval",
        "tier",
        "--golden",
        str(out),
        "-j",
        "scripted",
        "-o",
        str(tmp_path / "e"),
        "--db",
        db,
    )
    assert code == 0, err


def test_a_gate_passes_its_job_and_judge_options_to_the_evaluation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from evidex.evaluate import run as run_module
    from evidex.types import TierScheme

    (tmp_path / "tiers.yaml").write_text(
        "- name: useful\n  definition: answers the query\n"
        "- name: useless\n  definition: does not answer it\n",
        encoding="utf-8",
    )
    seen: dict[str, Any] = {}

    def spy(job: str, golden: Path, **kwargs: Any) -> dict[str, Any]:
        seen.update(kwargs, job=job, golden=golden)
        return {"metrics": {"kappa": 0.8}}

    monkeypatch.setattr(run_module, "evaluate", spy)
    gates = load_gates(
        _gates(
            tmp_path,
            '[[gate]]\njob = "tier"\ngolden = "g.jsonl"\njudge = "local:minilm"\n'
            'options = { tiers = "tiers.yaml", batch_size = 5 }\n'
            'judge_options = { compute = "float32" }\nfloors = { kappa = 0.7 }\n',
        )
    )
    (result,) = check_gates(gates)

    assert result.passed
    extra = seen["options"].extra
    assert isinstance(extra["tiers"], TierScheme) and extra["batch_size"] == 5
    assert [t.name for t in extra["tiers"].tiers] == ["useful", "useless"]
    assert seen["judge_options"] == {"compute": "float32"}
    with pytest.raises(ConfigError, match="'options' must be a table"):
        load_gates(
            _gates(tmp_path, '[[gate]]\nreport = "r.json"\noptions = 3\nfloors = { kappa = 0.5 }\n')
        )


def test_base_url_reaches_the_judge_of_eval_and_calibrate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--base-url` on eval and calibrate, as on every job command (it was only reachable as
    --judge-option base_url=...)."""
    seen: list[dict[str, Any]] = []

    def openai_like(spec: str, **options: Any) -> ScoringJudge:
        seen.append(options)
        return ScoringJudge(spec)

    judges.register_judge("fakeopenai", openai_like)
    golden = write_golden(tmp_path / "g.jsonl")
    for command in ("eval", "calibrate"):
        code, _, err = run(
            capsys,
            command,
            "tier",
            "--golden",
            str(golden),
            "-j",
            "fakeopenai:m",
            "--base-url",
            "http://127.0.0.1:9/v1",
            "-o",
            str(tmp_path / command),
        )
        assert code == 0, err
    assert seen and all(o.get("base_url") == "http://127.0.0.1:9/v1" for o in seen)
