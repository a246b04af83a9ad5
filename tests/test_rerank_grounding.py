"""The rerank grounding check with the scripted judge: answered, not answered (a review item),
the check's own fallback (visible, and a review item), and off by default (no extra call)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import pytest

from evidex.harness.runner import HarnessSettings
from evidex.jobs.rerank import RerankResult, rerank
from evidex.judging import JudgeRequest, TierPayload
from evidex.store import SqlStore
from evidex.types import Passage
from tests.scripted import Reply, ScriptedJudge, rank_reply, tier_reply

FAST = HarnessSettings(backoff_s=0.0)
QUERY = "how much vitamin D do adults need?"
ORDER = ["p2", "p6", "p1"]


def _run(
    store: SqlStore, passages: Sequence[Passage], *replies: Reply, **kw: Any
) -> tuple[RerankResult, ScriptedJudge]:
    judge = ScriptedJudge([rank_reply(ORDER), *replies])
    kw.setdefault("check_grounding", True)
    kw.setdefault("settings", FAST)
    result = rerank(
        QUERY,
        passages,
        judge=judge,
        store=store,
        strategy="allpairs",
        top_k=3,
        **kw,
    )
    return result, judge


def _tiers(**by_id: str) -> Reply:
    """A tier reply: contextually-relevant for every passage except those named."""

    def reply(request: JudgeRequest) -> dict[str, Any]:
        overrides = {pid: {"tier": tier} for pid, tier in by_id.items()}
        return tier_reply(request, "contextually-relevant", **overrides)

    return reply


def test_top_k_with_a_directly_supporting_passage_answers_the_query(
    store: SqlStore, passages: list[Passage]
) -> None:
    result, judge = _run(store, passages, _tiers(p6="directly-supporting"))

    assert len(judge.requests) == 2
    check = judge.requests[1]
    assert isinstance(check.payload, TierPayload)
    assert [p.passage_id for p in check.payload.passages] == ORDER  # the top-k, in rank order
    g = result.grounding
    assert g is not None and g.answered and g.supporting == ["p6"] and g.checked == ORDER
    assert g.source == "judge" and g.tiers["p2"] == "contextually-relevant"
    assert "p6" in g.reason
    assert result.review_item_ids == []
    assert result.metrics.grounding_answered is True
    assert result.metrics.grounding_supporting == 1 and result.metrics.grounding_source == "judge"
    assert result.judge_calls == 2  # the check's call is counted in the result's totals
    rows = store.audit_rows(run_id=result.run_id, step="rerank.grounding")
    assert len(rows) == 1 and rows[0]["job"] == "rerank"
    note = store.audit_rows(run_id=result.run_id, step="rerank_metrics")[0]
    assert note["detail"]["grounding_answered"] is True


def test_top_k_that_does_not_answer_goes_to_review(
    store: SqlStore, passages: list[Passage]
) -> None:
    result, _ = _run(store, passages, _tiers())

    g = result.grounding
    assert g is not None and not g.answered and g.supporting == [] and g.source == "judge"
    assert g.reason == "none of the top 3 passages is directly-supporting"
    assert result.metrics.grounding_answered is False
    assert len(result.review_item_ids) == 1
    item = store.get_review(result.review_item_ids[0])
    assert item["job"] == "rerank" and item["reason"].startswith("grounding: the top 3")
    assert item["payload"]["grounding"]["checked"] == ORDER
    assert [p["passage_id"] for p in item["payload"]["passages"]] == sorted(ORDER)
    assert result.source == "judge"  # the ranking itself is the judge's


def test_the_checks_fallback_is_visible_and_never_a_pass(
    store: SqlStore, passages: list[Passage]
) -> None:
    result, judge = _run(store, passages, *["not json"] * 10)

    # the ranking, the tier step's three attempts on the top 3, then its halves (2 and 1): one
    # attempt for the pair, which splits again, and two for each passage asked alone
    assert len(judge.requests) == 1 + 3 + 1 + 2 * 3
    g = result.grounding
    assert g is not None and not g.answered and g.source == "fallback"
    assert g.fallback_reason and "fell back" in g.reason
    assert result.metrics.grounding_source == "fallback"
    # the harness's item for the failed exchange, and the job's for the unanswered query
    items = [store.get_review(i) for i in result.review_item_ids]
    assert len(items) == 2
    assert any(i["reason"].endswith("(the check fell back)") for i in items)
    rows = store.audit_rows(run_id=result.run_id, step="rerank.grounding")
    statuses = Counter(r["status"] for r in rows)
    assert statuses == {"invalid": 10, "split": 2, "fallback": 3}


def test_off_by_default_no_extra_call(store: SqlStore, passages: list[Passage]) -> None:
    result, judge = _run(store, passages, _tiers(), check_grounding=False)
    assert len(judge.requests) == 1
    assert result.grounding is None and result.metrics.grounding_answered is None
    assert store.audit_rows(run_id=result.run_id, step="rerank.grounding") == []
    assert "grounding" in result.report() and result.report()["grounding"] is None


def test_grounding_is_cached_like_any_exchange(store: SqlStore, passages: list[Passage]) -> None:
    first, _ = _run(store, passages, _tiers(p2="directly-supporting"))
    second, judge = _run(store, passages)
    assert judge.requests == []
    assert second.grounding is not None and second.grounding.source == "cache"
    assert second.grounding.supporting == first.grounding.supporting == ["p2"]  # type: ignore[union-attr]


def test_outcomes_are_counted_in_the_process_metrics(
    store: SqlStore, passages: list[Passage]
) -> None:
    from evidex.harness.metrics import metrics

    fresh = HarnessSettings(backoff_s=0.0, use_cache=False)
    before = metrics().snapshot()["rerank_grounding"]
    _run(store, passages, _tiers(p2="directly-supporting"), settings=fresh)
    _run(store, passages, _tiers(), settings=fresh)
    _run(store, passages, "bad", "bad", "bad", settings=fresh)
    _run(store, passages, settings=fresh, check_grounding=False)
    after = metrics().snapshot()["rerank_grounding"]
    for outcome in ("answered", "not_answered", "fallback"):
        assert after.get(outcome, 0) - before.get(outcome, 0) == 1, outcome


def test_an_adapter_passes_the_option_and_shows_the_verdict(store: SqlStore) -> None:
    """The LangChain compressor (the adapters share one core) takes check_grounding as a rerank
    option; every kept document carries the query's verdict under metadata["evidex"]."""
    pytest.importorskip("langchain_core", reason="pip install 'evidex[langchain]'")
    from langchain_core.documents import Document

    from evidex.integrations.langchain import EvidexCompressor

    texts = ["Most adults need 600 IU of vitamin D a day.", "D-Day was in 1944.", "Sunlight."]
    judge = ScriptedJudge(
        [rank_reply(["passage-1"]), _tiers(**{"passage-1": "directly-supporting"})]
    )
    options = {"settings": FAST, "strategy": "allpairs", "check_grounding": True}
    compressor = EvidexCompressor(top_k=2, judge=judge, store=store, options=options)
    out = compressor.compress_documents([Document(page_content=t) for t in texts], QUERY)

    verdicts = [d.metadata["evidex"]["grounding"] for d in out]
    assert len(out) == 2 and all(v == verdicts[0] for v in verdicts)
    assert verdicts[0]["answered"] is True and verdicts[0]["supporting"] == ["passage-1"]
    assert len(judge.requests) == 2
