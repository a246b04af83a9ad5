"""The cascade's out-of-set figure: query-grouped halves, the low-only rule, and what
``evidex calibrate`` reports."""

from __future__ import annotations

import asyncio
import math
from pathlib import Path

import pytest

from evidex.evaluate.calibrate import acalibrate_tier
from evidex.evaluate.calibrate_cascade import _two_fold, query_halves
from evidex.evaluate.calibration import fit_band
from evidex.evaluate.golden import TierGolden
from evidex.judges import JUDGES
from evidex.judges.cascade import CascadeJudge
from evidex.store import SqlStore
from tests.scripted import ScriptedJudge
from tests.test_cascade import FakeScorer, oracle, write_golden

NAMES = ["directly-supporting", "contextually-relevant", "tangential", "irrelevant"]


def records(queries: int, per_query: int) -> list[TierGolden]:
    return [
        TierGolden(
            query_id=f"q{q}", query=f"query {q}", passage_id=f"p{i}", text="t", tier=NAMES[i % 4]
        )
        for q in range(queries)
        for i in range(per_query)
    ]


def test_query_halves_never_split_a_query() -> None:
    groups = [f"q{i % 7}" for i in range(70)]
    first, second = query_halves(groups, seed=3)
    assert first.isdisjoint(second) and first | second == set(groups)
    assert len(first) == 3 and query_halves(groups, seed=3) == (first, second)


def test_two_fold_fits_on_one_half_and_measures_on_the_other() -> None:
    recs = records(6, 8)
    gold = [NAMES.index(r.tier) for r in recs]
    scores = [1.0 - g / 4 + 0.01 * (i % 3) for i, g in enumerate(gold)]
    # the cheap stage is right below 0.5 and wrong above it (calls everything the top grade)
    cheap = [0 if s >= 0.5 else g for s, g in zip(scores, gold, strict=True)]
    two = _two_fold(recs, scores, cheap, gold, gold, NAMES, 0.02, 0.8, seed=0, open_above=True)
    assert len(two["folds"]) == 2
    for fold in two["folds"]:
        assert set(fold["fit_queries"]).isdisjoint(fold["measured_queries"])
        assert len(fold["fit_queries"]) + len(fold["measured_queries"]) == 6
        assert math.isinf(fold["high"])  # the upper grades are never settled
        assert fold["kappa_interval"][0] <= fold["kappa"] <= fold["kappa_interval"][1]
    assert two["out_of_set"]["pairs"] == len(recs) and two["out_of_set"]["queries"] == 6
    assert two["kappa_two_fold"] == pytest.approx(1.0)  # the wrong highs all went to the oracle


def test_fit_band_open_above_fits_the_low_bound_only() -> None:
    scores = [0.1, 0.2, 0.3, 0.6, 0.7, 0.8, 0.9, 0.95]
    gold = [3, 3, 3, 1, 0, 1, 0, 0]
    cheap = [3, 3, 3, 0, 0, 0, 0, 0]  # right below, wrong on two of the highs
    two_sided = fit_band(scores, cheap, gold, gold, 4, budget=0.5)
    low_only = fit_band(scores, cheap, gold, gold, 4, budget=0.75, open_above=True)
    assert math.isinf(low_only["high"]) and low_only["low"] == 0.6
    assert low_only["kappa"] == pytest.approx(1.0) and low_only["rule"].startswith("low only")
    assert two_sided["rule"] == "two-sided band"


def test_calibrate_records_and_chooses_by_the_out_of_set_figure(
    tmp_path: Path, store: SqlStore
) -> None:
    golden = write_golden(tmp_path / "golden.jsonl")
    judge = CascadeJudge(FakeScorer(), ScriptedJudge([oracle] * 20), band="0:1")
    record = asyncio.run(
        acalibrate_tier(golden, judge=judge, store=store, out_dir=tmp_path / "cal", budget=0.5)
    )
    fitted = record["fitted"]
    assert record["kappa"] == fitted["kappa_two_fold"] == fitted["out_of_set"]["kappa"]
    assert set(fitted["rules_out_of_set"]) == {"two-sided band", "low only (upper edge +inf)"}
    best = max(r["out_of_set"]["kappa"] for r in fitted["rules_out_of_set"].values())
    assert fitted["out_of_set"]["kappa"] == best
    assert "kappa_in_sample" in fitted and len(fitted["folds"]) == 2


def test_cli_prints_the_out_of_set_figure(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from evidex.cli import main

    monkeypatch.setitem(JUDGES, "fakecheap", lambda spec, **o: FakeScorer(spec))
    monkeypatch.setitem(JUDGES, "oracle", lambda spec, **o: ScriptedJudge([oracle] * 20))
    golden = write_golden(tmp_path / "golden.jsonl")
    argv = ["calibrate", "tier", "--golden", str(golden), "-j", "cascade:fakecheap,oracle"]
    assert main([*argv, "--budget", "0.5", "-o", str(tmp_path / "cal")]) == 0
    err = " ".join(capsys.readouterr().err.split())
    assert "out of set (fit on one half of the queries, measured on the other" in err
    assert "95% CI" in err and "measured on 2" in err and "in sample" not in err
