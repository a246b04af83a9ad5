"""Chaining: ``select_context`` follows the sufficiency decision, so a pipeline abstains before
generating; on ``answer`` it keeps the tier selection and flags the supporting passages."""

from __future__ import annotations

import asyncio
import os
from typing import Any

import pytest

from evidex.errors import InputError
from evidex.jobs.select import select_context
from evidex.jobs.sufficiency import SufficiencyResult, sufficiency
from evidex.jobs.tier import TierResult, tier
from evidex.judging import JudgeRequest
from evidex.store import SqlStore
from evidex.types import Passage
from tests.scripted import ScriptedJudge, tier_reply

QUERY = "Who founded Tesla, and when?"
PASSAGES = [
    Passage(passage_id="p1", text="Tesla was founded in 2003."),
    Passage(passage_id="p2", text="Martin Eberhard and Marc Tarpenning founded Tesla."),
    Passage(passage_id="p3", text="Tesla makes electric cars in several countries."),
    Passage(passage_id="p4", text="Bananas are yellow."),
]
TIERS = {
    "p1": "directly-supporting",
    "p2": "directly-supporting",
    "p3": "contextually-relevant",
    "p4": "irrelevant",
}


def graded(request: JudgeRequest) -> dict[str, Any]:
    return tier_reply(request, **{pid: {"tier": tier} for pid, tier in TIERS.items()})


@pytest.fixture
def tiered(store: SqlStore) -> TierResult:
    return tier(QUERY, PASSAGES, judge=ScriptedJudge([graded]), store=store)


def checked(store: SqlStore, reply: dict[str, Any]) -> SufficiencyResult:
    return sufficiency(QUERY, PASSAGES, judge=ScriptedJudge([reply]), store=store)


ENOUGH = {
    "sufficient": True,
    "confidence": 0.9,
    "supporting_passage_ids": ["p1", "p2"],
    "key_quotes": [
        {"passage_id": "p1", "quoted_text": "founded in 2003"},
        {"passage_id": "p2", "quoted_text": "Martin Eberhard and Marc Tarpenning"},
    ],
    "missing": [],
}
LACKING = {
    "sufficient": False,
    "confidence": 0.9,
    "supporting_passage_ids": ["p1"],
    "key_quotes": [],
    "missing": ["who founded Tesla"],
}


def test_the_signature_without_a_sufficiency_result_is_unchanged(tiered: TierResult) -> None:
    context = select_context(tiered, "standard", 4000)
    assert [i.passage_id for i in context.items] == ["p1", "p2", "p3"]
    assert context.decision is None and context.generate
    assert all(i.supporting is None for i in context.items)


def test_an_abstain_decision_leaves_no_context_and_says_why(
    tiered: TierResult, store: SqlStore
) -> None:
    check = checked(store, LACKING)
    assert check.decision.decision == "abstain"
    context = select_context(tiered, "standard", 4000, sufficiency=check)
    assert not context.generate and context.decision == "abstain"
    assert context.items == [] and context.tokens_used == 0 and context.text() == ""
    assert [(x.passage_id, x.reason) for x in context.left_out] == [
        (pid, "sufficiency") for pid in ("p1", "p2", "p3", "p4")
    ]
    assert context.missing == ["who founded Tesla"]
    assert "who founded Tesla" in context.reasons[0]


def test_an_escalated_fallback_leaves_no_context_either(
    tiered: TierResult, store: SqlStore
) -> None:
    judge = ScriptedJudge(["not json"] * 3)
    check = sufficiency(QUERY, PASSAGES, judge=judge, store=store)
    assert check.source == "fallback"
    context = select_context(tiered, sufficiency=check)
    assert context.decision == "escalate" and not context.generate and context.items == []
    assert "fallback" in context.reasons[0]


def test_an_answer_keeps_the_tier_selection_and_flags_the_supporting_passages(
    tiered: TierResult, store: SqlStore
) -> None:
    context = select_context(tiered, "standard", 4000, sufficiency=checked(store, ENOUGH))
    assert context.generate and context.decision == "answer"
    assert [(i.passage_id, i.supporting) for i in context.items] == [
        ("p1", True),
        ("p2", True),
        ("p3", False),
    ]
    assert context.supporting_left_out == []


def test_supporting_only_keeps_the_passages_the_verdict_rests_on(
    tiered: TierResult, store: SqlStore
) -> None:
    context = select_context(
        tiered, "broad", 4000, sufficiency=checked(store, ENOUGH), supporting_only=True
    )
    assert [i.passage_id for i in context.items] == ["p1", "p2"]
    assert ("p3", "not_supporting") in [(x.passage_id, x.reason) for x in context.left_out]
    with pytest.raises(InputError, match="supporting_only needs the sufficiency result"):
        select_context(tiered, supporting_only=True)


def test_a_supporting_passage_the_budget_leaves_out_is_named(
    tiered: TierResult, store: SqlStore
) -> None:
    context = select_context(
        tiered, "strict", 4000, sufficiency=checked(store, ENOUGH), count_tokens=len
    )
    assert [i.passage_id for i in context.items] == ["p1", "p2"]
    tight = select_context(
        tiered, "strict", 30, sufficiency=checked(store, ENOUGH), count_tokens=len
    )
    assert [i.passage_id for i in tight.items] == ["p1"]
    assert tight.supporting_left_out == ["p2"]


def test_a_check_of_another_query_is_refused(tiered: TierResult, store: SqlStore) -> None:
    other = sufficiency("What is a banana?", PASSAGES, judge=ScriptedJudge([LACKING]), store=store)
    with pytest.raises(InputError, match="check the same query and passages"):
        select_context(tiered, sufficiency=other)


# ---------------------------------------------------------------------------- adapters


def test_the_adapters_keep_documents_only_when_they_suffice() -> None:
    """Through the registry (the job's ``documents``), as every framework adapter runs it."""
    from evidex.integrations._core import Grading

    texts = [p.text for p in PASSAGES]
    renamed = {"p1": "passage-1", "p2": "passage-2"}
    enough = {
        **ENOUGH,
        "supporting_passage_ids": ["passage-2", "passage-1"],
        "key_quotes": [
            {"passage_id": renamed[q["passage_id"]], "quoted_text": q["quoted_text"]}
            for q in ENOUGH["key_quotes"]
        ],
    }
    grading = Grading(
        "sufficiency", top_k=3, options={"judge": ScriptedJudge([enough]), "store": "sqlite://"}
    )
    grades = grading.grade(QUERY, texts)
    assert [g.index for g in grades] == [1, 0, 2]  # supporting first, in the judge's order
    assert [g.score for g in grades] == [0.9, 0.9, None]
    assert grades[0].grades["supporting"] and not grades[2].grades["supporting"]
    assert grades[1].grades["quotes"] == ["founded in 2003"]
    assert grades[0].grades["decision"] == "answer"
    lacking = Grading(
        "sufficiency",
        options={
            "judge": ScriptedJudge([LACKING | {"supporting_passage_ids": []}]),
            "store": "sqlite://",
        },
    )
    assert lacking.grade(QUERY, texts) == []  # abstain: nothing to generate from


def test_the_langchain_compressor_runs_the_check_before_generating() -> None:
    pytest.importorskip("langchain_core", reason="pip install 'evidex[langchain]'")
    from langchain_core.documents import Document

    from evidex.integrations.langchain import EvidexCompressor

    docs = [Document(p.text, metadata={"source": p.passage_id}) for p in PASSAGES]
    lacking = ScriptedJudge([LACKING | {"supporting_passage_ids": []}])
    compressor = EvidexCompressor(job="sufficiency", judge=lacking, store="sqlite://")
    assert compressor.compress_documents(docs, QUERY) == []
    with pytest.raises(ValueError, match="'sufficiency'"):
        EvidexCompressor(job="classify")


def test_the_haystack_filter_runs_the_check_before_generating_in_a_pipeline() -> None:
    os.environ.setdefault("HAYSTACK_TELEMETRY_ENABLED", "False")  # read when it is imported
    pytest.importorskip("haystack", reason="pip install 'evidex[haystack]'")
    from haystack import Document, Pipeline

    from evidex.integrations.haystack import EvidexFilter

    docs = [
        Document(id=p.passage_id, content=p.text, meta={"n": i}) for i, p in enumerate(PASSAGES)
    ]
    renamed = {"p1": "passage-1", "p2": "passage-2"}
    enough = {
        **ENOUGH,
        "supporting_passage_ids": ["passage-1", "passage-2"],
        "key_quotes": [
            {"passage_id": renamed[q["passage_id"]], "quoted_text": q["quoted_text"]}
            for q in ENOUGH["key_quotes"]
        ],
    }
    pipeline = Pipeline()
    pipeline.add_component(
        "check",
        EvidexFilter(job="sufficiency", top_k=2, judge=ScriptedJudge([enough]), store="sqlite://"),
    )
    kept = pipeline.run({"check": {"query": QUERY, "documents": docs}})["check"]["documents"]
    assert [d.id for d in kept] == ["p1", "p2"] and kept[0].meta["n"] == 0
    assert kept[0].meta["evidex"]["decision"] == "answer" and kept[0].score == 0.9
    lacking = EvidexFilter(
        job="sufficiency",
        judge=ScriptedJudge([LACKING | {"supporting_passage_ids": []}]),
        store="sqlite://",
    )
    assert asyncio.run(lacking.run_async(QUERY, docs)) == {"documents": []}
    with pytest.raises(ValueError, match="'sufficiency'"):
        EvidexFilter(job="classify")
    with pytest.raises(InputError, match="top_k must be at least 1"):
        EvidexFilter(job="sufficiency", top_k=0)
    saved = Pipeline()
    saved.add_component("check", EvidexFilter(job="sufficiency", top_k=3, store="sqlite://"))
    loaded = Pipeline.loads(saved.dumps(), allowed_modules=["evidex.integrations.haystack"])
    check = loaded.get_component("check")
    assert isinstance(check, EvidexFilter) and (check.job, check.top_k) == ("sufficiency", 3)
