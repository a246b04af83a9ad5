"""The sufficiency job over a cascade judge: the cheap stage settles a query on which nothing
was found, and sends every other query whole to the expensive stage."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from evidex.errors import ConfigError, JudgeUnavailable
from evidex.jobs.sufficiency import sufficiency
from evidex.judges.cascade import Band, CascadeJudge, load_band
from evidex.store import SqlStore
from tests.scripted import ScriptedJudge
from tests.test_cascade import FakeScorer, passages_scored, sent_ids

QUERY = "How much vitamin D does a child need?"
ENOUGH = {
    "sufficient": True,
    "confidence": 0.9,
    "supporting_passage_ids": ["p1"],
    "key_quotes": [{"passage_id": "p1", "quoted_text": "Passage 1 about vitamin D"}],
    "missing": [],
}


def cascade(expensive: ScriptedJudge, band: str = "0.3:0.7", **kw: float) -> CascadeJudge:
    return CascadeJudge(FakeScorer(), expensive, band=band, **kw)  # type: ignore[arg-type]


def test_nothing_on_topic_is_settled_by_the_cheap_stage_with_no_expensive_call(
    store: SqlStore,
) -> None:
    expensive = ScriptedJudge([ENOUGH])
    result = sufficiency(QUERY, passages_scored(0.1, 0.25), judge=cascade(expensive), store=store)
    assert expensive.requests == []
    assert not result.sufficient and result.judged_by == "fake:cheap"
    assert result.missing[0].startswith("heuristic (fake:cheap, a cascade's cheap stage)")
    assert "0.250, below 0.3" in result.missing[0]
    assert result.confidence == pytest.approx(0.75)
    assert result.decision.decision == "abstain"  # the default policy abstains at 0.7
    split = [e for e in result.events if e.kind == "cascade.split"]
    assert split and split[0].data["settled"] == 1
    assert result.judge_id == "cascade:fake:cheap,scripted"


def test_one_passage_on_topic_sends_the_whole_query_on(store: SqlStore) -> None:
    expensive = ScriptedJudge([ENOUGH])
    result = sufficiency(
        QUERY, passages_scored(0.1, 0.9, 0.2), judge=cascade(expensive), store=store
    )
    assert sent_ids(expensive) == ["p0", "p1", "p2"]  # every passage, not only the band's
    assert result.sufficient and result.judged_by == "scripted"
    assert result.decision.decision == "answer"
    split = [e for e in result.events if e.kind == "cascade.split"]
    assert split[0].data == {"settled": 0, "sent": 1, "best": 0.9, "none_relevant_below": 0.3}


def test_the_edge_is_its_own_setting_and_a_band_file_can_carry_it(store: SqlStore) -> None:
    expensive = ScriptedJudge([ENOUGH, ENOUGH])
    low = cascade(expensive, none_relevant_below=0.2)
    assert low.none_relevant_below() == 0.2
    sufficiency(QUERY, passages_scored(0.1, 0.25), judge=low, store=store)
    assert len(expensive.requests) == 1  # 0.25 reaches 0.2: sent on
    band = Band(low=0.3, high=0.7, none_relevant_below=0.05)
    assert CascadeJudge(FakeScorer(), expensive, band=band).none_relevant_below() == 0.05
    assert cascade(expensive, band="-inf:inf").none_relevant_below() == float("-inf")
    shipped = load_band(None, "local:minilm")
    assert shipped is not None and shipped.none_relevant_below is not None
    assert shipped.none_relevant_below < shipped.low


def test_the_option_is_read_from_the_spec_and_checked() -> None:
    judge = CascadeJudge.from_spec(
        "cascade:local:minilm,openai:m",
        none_relevant_below="0.25",
        base_url="http://127.0.0.1:9/v1",
        api_key="k",
    )
    assert judge.none_relevant_below() == 0.25
    with pytest.raises(ConfigError, match="none_relevant_below must be a number"):
        CascadeJudge.from_spec(
            "cascade:local:minilm,openai:m", none_relevant_below="low", api_key="k"
        )


class DownScorer(FakeScorer):
    """A cheap stage whose backend is down."""

    def score(self, query: str, texts: Sequence[str]) -> list[float]:
        raise JudgeUnavailable("the encoder is down")


def test_a_cheap_stage_that_fails_settles_nothing(store: SqlStore) -> None:
    expensive = ScriptedJudge([ENOUGH])
    judge = CascadeJudge(DownScorer(), expensive, band="0.3:0.7")
    result = sufficiency(QUERY, passages_scored(0.1, 0.2), judge=judge, store=store)
    assert len(expensive.requests) == 1 and result.judged_by == "scripted"
    split = [e for e in result.events if e.kind == "cascade.split"]
    assert "could not score every passage" in split[0].detail
