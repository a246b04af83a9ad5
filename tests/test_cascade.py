"""The cascade judge: spec and options, the band split through the harness, calibration."""

from __future__ import annotations

import asyncio
import json
import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest

import evidex
from evidex.errors import ConfigError
from evidex.evaluate.calibrate import acalibrate_tier
from evidex.evaluate.calibration import fit_band
from evidex.harness.settings import HarnessSettings
from evidex.judges import JUDGES, get_judge
from evidex.judges.cascade import Band, CascadeJudge, load_band, route_options, split_spec
from evidex.judging import Judge, JudgeReply, JudgeRequest
from evidex.pricing import Price
from evidex.store import SqlStore
from evidex.types import Passage
from tests.fake_openai_server import Reply, serve, tier_reply_for
from tests.scripted import ScriptedJudge, tier_reply

_SCORE = re.compile(r"score=([0-9.]+)")


class _Cuts:
    """Cut points of the fake scorer: 0.8 / 0.6 / 0.4 for the default four tiers."""

    def for_tiers(self, count: int) -> tuple[float, ...]:
        return (0.8, 0.6, 0.4)[: count - 1]


class FakeScorer(Judge):
    """A cheap stage whose score is written in the text (``score=0.42``); counts its calls."""

    jobs: ClassVar[frozenset[str]] = frozenset({"tier", "rerank"})

    def __init__(self, judge_id: str = "fake:cheap", version: str = "fake-1") -> None:
        super().__init__(judge_id)
        self.thresholds = _Cuts()
        self.version = version
        self.scored: list[str] = []
        self.options: dict[str, Any] = {}

    def score(self, query: str, texts: Sequence[str]) -> list[float]:
        self.scored += list(texts)
        return [float(_SCORE.search(t).group(1)) for t in texts]  # type: ignore[union-attr]

    async def complete(self, request: JudgeRequest) -> JudgeReply:
        raise AssertionError("the cheap stage is only asked to score")

    @property
    def model_version(self) -> str:
        return self.version


def passages_scored(*scores: float) -> list[Passage]:
    return [
        Passage(passage_id=f"p{i}", text=f"Passage {i} about vitamin D, score={s} here.")
        for i, s in enumerate(scores)
    ]


def cascade(
    expensive: Judge | None = None, band: str | Band | None = "0.3:0.7", **kw: Any
) -> CascadeJudge:
    return CascadeJudge(FakeScorer(**kw), expensive or ScriptedJudge(), band=band)


def sent_ids(judge: ScriptedJudge) -> list[str]:
    return [p.passage_id for r in judge.requests for p in r.payload.passages]  # type: ignore[attr-defined]


# ---------------------------------------------------------------------- spec and options


def test_spec_splits_at_the_comma_that_starts_a_judge() -> None:
    assert split_spec("cascade:local:minilm,openai:gpt-4o-mini") == (
        "local:minilm",
        "openai:gpt-4o-mini",
    )
    # colons and commas inside a stage's spec stay in it
    assert split_spec("cascade:local:minilm,openai:org/model:q4,k=v") == (
        "local:minilm",
        "openai:org/model:q4,k=v",
    )
    assert split_spec("cascade:openai:a:b,local:qwen") == ("openai:a:b", "local:qwen")
    for bad in ("cascade:local:minilm", "cascade:,openai:x", "cascade:local:minilm,gpt"):
        with pytest.raises(ConfigError, match="cascade:CHEAP,EXPENSIVE"):
            split_spec(bad)


def test_options_reach_the_stage_they_belong_to() -> None:
    own, cheap, expensive = route_options(
        "local:minilm",
        "openai:m",
        {
            "band": "0.1:0.2",
            "cheap.threads": 1,
            "expensive.temperature": 0.5,
            "base_url": "http://127.0.0.1:9/v1",
            "api_key": "k",
            "timeout_s": 3,
        },
    )
    assert own == {"band": "0.1:0.2"}
    assert cheap == {"threads": 1}
    assert expensive == {
        "temperature": 0.5,
        "base_url": "http://127.0.0.1:9/v1",
        "api_key": "k",
        "timeout_s": 3,
    }
    # the endpoint goes to whichever stage is the openai: one
    _, cheap, expensive = route_options("openai:small", "local:qwen", {"base_url": "u"})
    assert cheap == {"base_url": "u"} and expensive == {}


def test_get_judge_builds_both_stages_with_their_options(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    built: dict[str, dict[str, Any]] = {}

    def cheap_factory(spec: str, **options: Any) -> Judge:
        built[spec] = options
        return FakeScorer(spec)

    def expensive_factory(spec: str, **options: Any) -> Judge:
        built[spec] = options
        return ScriptedJudge()

    monkeypatch.setitem(JUDGES, "fakecheap", cheap_factory)  # type: ignore[arg-type]
    monkeypatch.setitem(JUDGES, "fakeexp", expensive_factory)  # type: ignore[arg-type]
    judge = get_judge("cascade:fakecheap,fakeexp:m", **{"cheap.x": 1, "y": 2, "band": "0:1"})
    assert isinstance(judge, CascadeJudge)
    assert built == {"fakecheap": {"x": 1}, "fakeexp:m": {"y": 2}}
    assert (judge.band.low, judge.band.high) == (0.0, 1.0)
    assert judge.judge_id == "cascade:fakecheap,scripted"
    with pytest.raises(ConfigError, match="band= or band_path="):
        get_judge("cascade:fakecheap,fakeexp:m", band="0:1", band_path="x.json")


def test_a_cheap_stage_that_cannot_score_is_refused() -> None:
    with pytest.raises(ConfigError, match="must score passages"):
        CascadeJudge(ScriptedJudge(), ScriptedJudge())


def test_base_url_reaches_the_openai_stage(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(JUDGES, "fakecheap", lambda spec, **o: FakeScorer(spec))
    with serve() as server:
        server.default = Reply(tier_reply_for)
        judge = get_judge(
            "cascade:fakecheap,openai:test-model",
            base_url=server.base_url,
            api_key="sk-test",
            band="0.3:0.7",
        )
        result = evidex.tier("vitamin D", passages_scored(0.1, 0.5, 0.9), judge=judge)
    assert len(server.chat_requests) == 1
    assert "p1" in server.chat_requests[0].text and "p0" not in server.chat_requests[0].text
    assert [a.judged_by for a in result.classifications] == [
        "fakecheap",
        "openai:test-model",
        "fakecheap",
    ]


# ---------------------------------------------------------------------- the split


def test_confident_items_never_reach_the_expensive_judge(store: SqlStore) -> None:
    expensive = ScriptedJudge([lambda r: tier_reply(r, "contextually-relevant")])
    judge = cascade(expensive)
    result = evidex.tier(
        "vitamin D", passages_scored(0.1, 0.5, 0.95, 0.3, 0.69), judge=judge, store=store
    )
    assert sent_ids(expensive) == ["p1", "p3", "p4"]  # 0.3 is in [0.3, 0.7), 0.7 would not be
    by_id = {a.passage_id: a for a in result.classifications}
    assert by_id["p0"].tier == "irrelevant" and by_id["p0"].judged_by == "fake:cheap"
    assert by_id["p2"].tier == "directly-supporting" and by_id["p2"].judged_by == "fake:cheap"
    assert "settled by fake:cheap" in by_id["p2"].justification
    assert {by_id[p].judged_by for p in ("p1", "p3", "p4")} == {"scripted"}
    assert {by_id[p].tier for p in ("p1", "p3", "p4")} == {"contextually-relevant"}
    # each stage's audit rows name its judge; the split is noted with the ids sent on
    rows = store.audit_rows(run_id=result.run_id)
    assert {r["judge_id"] for r in rows if r["status"] == "ok"} == {"fake:cheap", "scripted"}
    split = [e for e in result.events if e.kind == "cascade.split"]
    assert split and split[0].passage_ids == ["p1", "p3", "p4"]


def test_band_items_get_the_harness_reasks_and_fallback(store: SqlStore) -> None:
    expensive = ScriptedJudge(["not json", {"classifications": []}, "still not json"])
    result = evidex.tier(
        "vitamin D", passages_scored(0.5, 0.9), judge=cascade(expensive), store=store
    )
    assert len(expensive.requests) == 3  # the first try and the tier spec's two re-asks
    assert "invalid JSON" in expensive.requests[1].messages[-1].content
    band_item, settled = result.classifications
    assert band_item.source == "fallback" and band_item.judged_by == "scripted"
    assert settled.source == "judge" and settled.judged_by == "fake:cheap"
    assert result.review_item_ids  # the fallback went to review
    assert result.judge_calls == 4  # one cheap call and three expensive attempts


def test_results_report_the_calls_and_cost_saved(store: SqlStore) -> None:
    expensive = ScriptedJudge([tier_reply] * 3)
    settings = HarnessSettings(prices={"scripted": Price(input=1000.0, output=1000.0)})
    scores = [0.5] * 4 + [0.05] * 16  # 4 uncertain, 16 clearly irrelevant
    result = evidex.tier(
        "vitamin D",
        passages_scored(*scores),
        judge=cascade(expensive),
        store=store,
        settings=settings,
        batch_size=10,
    )
    report = result.cascade
    assert report is not None
    assert (report.items, report.settled, report.sent) == (20, 16, 4)
    assert report.expensive_calls == 1 and report.calls_saved == 1  # 2 batches alone, 1 sent
    expensive_cost = (100 + 20) * 1000.0 / 1_000_000  # one call of the scripted judge's usage
    assert result.cost == pytest.approx(expensive_cost)  # the cheap stage is not priced
    assert report.cost_saved == pytest.approx(expensive_cost / 4 * 16)
    assert report.model_dump(mode="json")["band"] == [0.3, 0.7]


def score_reply(scores: dict[str, float]) -> Any:
    def reply(request: JudgeRequest) -> dict[str, Any]:
        ids = [p.passage_id for p in request.payload.passages]  # type: ignore[attr-defined]
        return {
            "scores": [
                {"passage_id": i, "relevance_score": scores[i], "justification": f"said {i}"}
                for i in ids
            ]
        }

    return reply


def test_pointwise_rerank_orders_only_the_band_by_the_expensive_judge(store: SqlStore) -> None:
    # cheap scores: p0 0.9 (above the band), p1 0.5, p2 0.6 (band), p3 0.1 (below)
    expensive = ScriptedJudge([score_reply({"p1": 0.95, "p2": 0.2})])
    result = evidex.rerank(
        "vitamin D",
        passages_scored(0.9, 0.5, 0.6, 0.1),
        judge=cascade(expensive),
        strategy="pointwise",
        store=store,
    )
    assert sent_ids(expensive) == ["p1", "p2"]
    ranked = result.ranked_passages
    assert [r.passage_id for r in ranked] == ["p0", "p1", "p2", "p3"]
    assert [r.judged_by for r in ranked] == ["fake:cheap", "scripted", "scripted", "fake:cheap"]
    split = [e for e in result.events if e.kind == "cascade.split"]
    assert split and split[0].data["sent"] == 2


def test_pointwise_rerank_keeps_the_retrieval_order_when_the_band_falls_back(
    store: SqlStore,
) -> None:
    expensive = ScriptedJudge(["not json", "not json"])
    result = evidex.rerank(
        "vitamin D",
        passages_scored(0.1, 0.5, 0.9),
        judge=cascade(expensive),
        strategy="pointwise",
        store=store,
    )
    assert len(expensive.requests) == 2  # the score step's first try and its re-ask
    assert [r.passage_id for r in result.ranked_passages] == ["p0", "p1", "p2"]
    assert {r.source for r in result.ranked_passages} == {"fallback"}


def test_other_jobs_pass_through_to_the_expensive_judge() -> None:
    expensive = ScriptedJudge([{"anything": 1}])
    judge = cascade(expensive)
    assert judge.supports("classify") and judge.supports("audit")
    assert not CascadeJudge(FakeScorer(), _TierOnly(), band="0:1").supports("audit")


class _TierOnly(ScriptedJudge):
    jobs: ClassVar[frozenset[str]] = frozenset({"tier"})
    reads_prompts: ClassVar[bool] = False  # answers its listed job only


# ---------------------------------------------------------------------- the band


def test_default_band_is_used_before_calibration() -> None:
    shipped = load_band(None, "local:minilm")
    assert shipped is not None and shipped.low < shipped.high
    judge = CascadeJudge(FakeScorer("local:minilm"), ScriptedJudge())
    assert judge.band == shipped and judge.band_source == "shipped default"
    assert judge.warnings == []
    # a cheap judge without a shipped default sends everything on: never wrong, saves nothing
    unknown = CascadeJudge(FakeScorer("fake:other"), ScriptedJudge())
    assert (unknown.band.low, unknown.band.high) == (-math.inf, math.inf)


def test_band_parsing_and_files(tmp_path: Path) -> None:
    assert Band.parse("-inf:0.5").low == -math.inf
    for bad in ("0.5", "0.7:0.3", "a:b"):
        with pytest.raises(ConfigError, match="LOW:HIGH"):
            Band.parse(bad)
    path = tmp_path / "band.json"
    path.write_text(json.dumps(Band(low=-math.inf, high=0.5).to_json()))
    assert json.loads(path.read_text())["low"] is None
    assert load_band(path, "x") == Band(low=-math.inf, high=0.5)
    path.write_text("{}")
    with pytest.raises(ConfigError, match="not a cascade band file"):
        load_band(path, "x")


def test_a_band_fitted_with_other_models_is_stale(tmp_path: Path, store: SqlStore) -> None:
    path = tmp_path / "cascade_band.json"
    band = Band(low=0.3, high=0.7, cheap_version="fake-1", expensive_version="scripted")
    path.write_text(json.dumps(band.to_json()))
    fresh = CascadeJudge(FakeScorer(), ScriptedJudge(), band=load_band(path, "fake:cheap"))
    assert fresh.warnings == []
    stale = CascadeJudge(
        FakeScorer(version="fake-2"),
        ScriptedJudge([tier_reply]),
        band=load_band(path, "fake:cheap"),
        band_source=str(path),
    )
    assert len(stale.warnings) == 1 and "fake-2" in stale.warnings[0]
    result = evidex.tier("vitamin D", passages_scored(0.5), judge=stale, store=store)
    assert [e.kind for e in result.events if e.kind.startswith("cascade.stale")] == [
        "cascade.stale_band"
    ]


def test_fit_band_picks_the_smallest_band_that_meets_the_target() -> None:
    # the cheap judge is right except on the scores 0.4-0.6; the expensive one is always right
    scores = [i / 20 for i in range(20)]
    gold = [0 if s >= 0.5 else 1 for s in scores]
    cheap = [1 - g if 0.4 <= s < 0.6 else g for s, g in zip(scores, gold, strict=True)]
    fitted = fit_band(scores, cheap, gold, gold, 2, target=0.0, candidates=20)
    assert (fitted["low"], fitted["high"]) == (0.4, 0.6)
    assert fitted["share_sent"] == pytest.approx(4 / 20)
    assert fitted["kappa"] == pytest.approx(1.0) == fitted["kappa_expensive"]
    # a looser target sends fewer: one wrong item of four kept is within 0.25
    loose = fit_band(scores, cheap, gold, gold, 2, target=0.25, candidates=20)
    assert loose["share_sent"] < fitted["share_sent"] and loose["kappa"] >= 0.75


def noisy_golden(queries: int = 12) -> tuple[list[float], list[int], list[int], list[str]]:
    """Twelve queries of twenty pairs: the cheap judge is wrong on a few pairs whose scores fall
    in the middle, more of them on some queries than on others; the expensive one is right."""
    rng = np.random.default_rng(3)
    scores: list[float] = []
    cheap: list[int] = []
    gold: list[int] = []
    groups: list[str] = []
    for q in range(queries):
        wrong = 0.1 + 0.3 * (q % 3)  # how often the cheap judge errs in the middle
        for s in rng.uniform(0, 1, 20).tolist():
            g = 0 if s >= 0.5 else 1
            flip = 0.3 <= s < 0.7 and rng.uniform() < wrong
            scores.append(s)
            gold.append(g)
            cheap.append(1 - g if flip else g)
            groups.append(f"q{q}")
    return scores, cheap, gold, groups


def test_fit_band_margin_widens_the_band_on_a_noisy_golden_set() -> None:
    scores, cheap, gold, groups = noisy_golden()
    point = fit_band(scores, cheap, gold, gold, 2, target=0.05)
    margin = fit_band(scores, cheap, gold, gold, 2, target=0.05, groups=groups, resamples=200)
    # the point estimate just meets the target; the 5th percentile of the resamples needs more
    assert point["kappa"] >= point["kappa_expensive"] - 0.05
    assert margin["share_sent"] > point["share_sent"]
    assert margin["low"] <= point["low"] and margin["high"] >= point["high"]
    assert margin["margin"]["kappa_loss_bound"] >= -0.05
    assert margin["margin"]["resamples"] == 200 and "margin" not in point
    again = fit_band(scores, cheap, gold, gold, 2, target=0.05, groups=groups, resamples=200)
    assert again == margin  # seeded: the fit is deterministic
    with pytest.raises(ValueError, match="query"):
        fit_band(scores, cheap, gold, gold, 2, resamples=10)


def test_fit_band_with_a_budget_keeps_the_best_kappa_within_it() -> None:
    # as above, the cheap judge errs on 0.4-0.6; a budget of 2 in 20 fixes half of those errors
    scores = [i / 20 for i in range(20)]
    gold = [0 if s >= 0.5 else 1 for s in scores]
    cheap = [1 - g if 0.4 <= s < 0.6 else g for s, g in zip(scores, gold, strict=True)]
    fitted = fit_band(scores, cheap, gold, gold, 2, budget=0.1, candidates=20)
    assert fitted["share_sent"] == pytest.approx(2 / 20)
    assert fitted["budget"] == 0.1 and "target" not in fitted
    sent = [s for s in scores if fitted["low"] <= s < fitted["high"]]
    assert len(sent) == 2 and all(0.4 <= s < 0.6 for s in sent)
    # every error sent costs no more than the budget allows, and nothing more is sent
    whole = fit_band(scores, cheap, gold, gold, 2, budget=0.5, candidates=20)
    assert (whole["low"], whole["high"]) == (0.4, 0.6) and whole["kappa"] == pytest.approx(1.0)
    for bad in (0.0, 1.5):
        with pytest.raises(ValueError, match="budget"):
            fit_band(scores, cheap, gold, gold, 2, budget=bad)


def test_fit_band_budget_margin_keeps_the_share_on_new_queries() -> None:
    # queries differ in how many of their pairs score in the middle: on a resample heavy in
    # such queries, the band of the point estimate would send more than the budget
    rng = np.random.default_rng(5)
    scores: list[float] = []
    cheap: list[int] = []
    gold: list[int] = []
    groups: list[str] = []
    for q in range(12):
        middle = 0.2 + 0.5 * (q % 2)  # the share of this query's pairs scored 0.3-0.7
        for _ in range(20):
            s = rng.uniform(0.3, 0.7) if rng.uniform() < middle else rng.choice([0.1, 0.9])
            g = 0 if s >= 0.5 else 1
            scores.append(float(s))
            gold.append(g)
            cheap.append(1 - g if 0.3 <= s < 0.7 and rng.uniform() < 0.5 else g)
            groups.append(f"q{q}")
    point = fit_band(scores, cheap, gold, gold, 2, budget=0.3)
    margin = fit_band(scores, cheap, gold, gold, 2, budget=0.3, groups=groups, resamples=200)
    assert point["share_sent"] <= 0.3 and margin["share_sent"] < point["share_sent"]
    assert margin["margin"]["share_bound"] <= 0.3 + 1e-9
    assert margin["margin"]["rule"].startswith("95th percentile of the share sent")
    assert fit_band(scores, cheap, gold, gold, 2, budget=0.3, groups=groups, resamples=200) == (
        margin
    )


def write_golden(path: Path) -> Path:
    """Four queries of six pairs; the tier is written in the score (below 0.5: irrelevant)."""
    rows = []
    for q in range(4):
        for i, s in enumerate((0.1, 0.2, 0.45, 0.55, 0.9, 0.95)):
            rows.append(
                {
                    "query_id": f"q{q}",
                    "query": f"query {q}",
                    "passage_id": f"p{i}",
                    "text": f"Passage {i} of query {q}, score={s} here.",
                    "tier": "irrelevant" if s < 0.5 else "directly-supporting",
                }
            )
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def oracle(request: JudgeRequest) -> dict[str, Any]:
    """The expensive judge of the calibration tests: always the golden tier."""
    passages = request.payload.passages  # type: ignore[attr-defined]
    return tier_reply(
        request,
        **{
            p.passage_id: {
                "tier": "irrelevant"
                if float(_SCORE.search(p.text).group(1)) < 0.5  # type: ignore[union-attr]
                else "directly-supporting"
            }
            for p in passages
        },
    )


def test_calibrate_tier_fits_and_records_the_band(tmp_path: Path, store: SqlStore) -> None:
    golden = write_golden(tmp_path / "golden.jsonl")
    judge = CascadeJudge(FakeScorer(), ScriptedJudge([oracle] * 20), band="0:1")
    record = asyncio.run(
        acalibrate_tier(golden, judge=judge, store=store, out_dir=tmp_path / "cal", target=0.0)
    )
    fitted = record["fitted"]
    # the cheap cut points put 0.45 and 0.55 in the middle tiers: only those need the oracle
    assert (fitted["low"], fitted["high"]) == (0.45, 0.9)
    assert fitted["share_sent"] == pytest.approx(2 / 6)
    assert fitted["kappa"] == pytest.approx(1.0)
    saved = json.loads((tmp_path / "cal" / "cascade_band.json").read_text())
    assert saved["cheap_version"] == "fake-1" and saved["expensive_version"] == "scripted"
    assert record["judge_id"] == judge.judge_id
    assert record["model_version"] == "fake-1 -> scripted"
    assert saved["fit"]["margin"]["resamples"] == 200  # the fit is made with the safety margin
    band = load_band(tmp_path / "cal" / "cascade_band.json", "fake:cheap")
    calibrated = CascadeJudge(FakeScorer(), ScriptedJudge(), band=band)
    assert calibrated.band.low == 0.45 and calibrated.warnings == []


@pytest.fixture
def calibrate_argv(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """``evidex calibrate tier`` of a fake cascade over :func:`write_golden`'s golden set."""
    monkeypatch.setitem(JUDGES, "fakecheap", lambda spec, **o: FakeScorer(spec))
    monkeypatch.setitem(JUDGES, "oracle", lambda spec, **o: ScriptedJudge([oracle] * 20))
    golden = write_golden(tmp_path / "golden.jsonl")
    return ["calibrate", "tier", "--golden", str(golden), "-j", "cascade:fakecheap,oracle"]


def test_cli_calibrates_a_cascade_and_says_how_to_use_the_band(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], calibrate_argv: list[str]
) -> None:
    from evidex.cli import main

    out = tmp_path / "cal"
    code = main([*calibrate_argv, "--target", "0", "-o", str(out)])
    err = " ".join(capsys.readouterr().err.split())
    assert code == 0, err
    assert "band [0.45, 0.9)" in err and "expensive alone 1" in err
    assert "--judge-option band_path=" in err and (out / "cascade_band.json").exists()


def test_cli_calibrates_a_cascade_to_a_budget_of_calls(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], calibrate_argv: list[str]
) -> None:
    from evidex.cli import main

    out = tmp_path / "cal"
    # the cheap stage errs on 0.45 and 0.55 only (2 pairs in 6): a budget of one in six
    # sends one of them, the better one for kappa
    code = main([*calibrate_argv, "--budget", "0.17", "-o", str(out)])
    err = " ".join(capsys.readouterr().err.split())
    assert code == 0, err
    assert "best kappa with at most 17% of the items sent" in err
    saved = json.loads((out / "cascade_band.json").read_text())["fit"]
    assert saved["budget"] == 0.17 and saved["share_sent"] == pytest.approx(1 / 6)
    assert saved["margin"]["share_bound"] <= 0.17
    assert main([*calibrate_argv, "--budget", "0.5", "--target", "0.01", "-o", str(out)]) != 0
    assert "not both" in " ".join(capsys.readouterr().err.split())
    assert main([*calibrate_argv, "--budget", "0", "-o", str(out)]) != 0
    assert "cheap stage alone" in " ".join(capsys.readouterr().err.split())


# ---------------------------------------------------------------------- the demo


def test_demo_shows_the_cascade_split_and_a_labelled_preview(store: SqlStore) -> None:
    from evidex.cli.demo import _cascade_view

    judge = cascade(ScriptedJudge([tier_reply]))
    result = evidex.tier("q", passages_scored(0.5, 0.1, 0.9, 0.05), judge=judge, store=store)
    view = _cascade_view(judge, result, "q")
    assert view is not None and not view.preview
    assert (view.settled, view.sent, view.calls_alone, view.calls_sent) == (3, 1, 1, 1)
    # over an encoder alone: the shipped band on its scores, marked as a preview
    encoder = FakeScorer("local:minilm")
    alone = result.model_copy(update={"cascade": None})
    preview = _cascade_view(encoder, alone, "q")
    band = load_band(None, "local:minilm")
    assert preview is not None and preview.preview and preview.expensive is None and band
    assert preview.sent == sum(band.uncertain(s) for s in (0.5, 0.1, 0.9, 0.05))
    assert _cascade_view(ScriptedJudge(), alone, "q") is None


def test_the_spend_line_names_the_split_and_the_calls_saved(store: SqlStore) -> None:
    from evidex.cli._spend import spend_line

    expensive = ScriptedJudge([tier_reply])
    result = evidex.tier(
        "q", passages_scored(*([0.5] * 2 + [0.05] * 10)), judge=cascade(expensive), store=store
    )
    line = spend_line([result])
    assert "cascade: 10 settled by fake:cheap, 2 sent to scripted, 1 call(s) saved" in line
