"""One review item of every job, raised by real runs on the scripted judge: each by a fallback
(replies that never validate) and each by a routing rule (high risk, or rerank's grounding
check). The review contract tests and the browser test open them."""

from __future__ import annotations

from typing import Any

import evidex
from evidex.harness.runner import HarnessSettings
from evidex.judging import JudgeRequest
from evidex.store import SqlStore
from evidex.types import Passage
from tests import audit_fixtures as af
from tests import classify_fixtures as cf
from tests.scripted import ScriptedJudge, rank_reply, tier_reply

FAST = HarnessSettings(backoff_s=0.0)
QUERY = "How much vitamin D does an adult need each day?"
PASSAGES = [
    Passage(passage_id="who-2023", text="Adults aged 19 to 70 need 600 IU of vitamin D a day."),
    Passage(passage_id="nih-fact", text="Vitamin D helps the body absorb calcium from food."),
    Passage(passage_id="blog-sun", text="Ten minutes of midday sun may be enough in summer."),
]
BAD = ["not JSON"] * 12
"""Enough invalid replies for every attempt of a fallback: a batch's own, then its split parts'."""


def _relevant(request: JudgeRequest) -> dict[str, Any]:
    return tier_reply(request, "contextually-relevant")


def raise_items(store: SqlStore) -> dict[tuple[str, str], int]:
    """(job, "fallback" | "routed") → the review item's id."""
    run: dict[str, Any] = {"store": store, "settings": FAST}
    items: dict[tuple[str, str], int] = {}

    def one(key: tuple[str, str], ids: list[int]) -> None:
        assert len(ids) == 1, (key, ids)
        items[key] = ids[0]

    tier = evidex.tier(QUERY, PASSAGES, judge=ScriptedJudge([tier_reply]), risk="high", **run)
    one(("tier", "routed"), tier.review_item_ids[:1])
    tier = evidex.tier("Is sunlight enough?", PASSAGES, judge=ScriptedJudge(BAD), **run)
    one(("tier", "fallback"), tier.review_item_ids)

    judge = ScriptedJudge([rank_reply(["nih-fact", "who-2023"]), _relevant])
    ranked = evidex.rerank(
        QUERY, PASSAGES, judge=judge, strategy="allpairs", top_k=2, check_grounding=True, **run
    )
    one(("rerank", "routed"), ranked.review_item_ids)
    ranked = evidex.rerank(
        "Sun or pills?", PASSAGES, judge=ScriptedJudge(BAD), strategy="allpairs", **run
    )
    one(("rerank", "fallback"), ranked.review_item_ids)

    low = cf.reply(cf.label(confidence=0.5))
    labelled = evidex.classify(
        cf.INPUT, cf.PASSAGES, cf.TAXONOMY, judge=ScriptedJudge([low]), risk="high", **run
    )
    one(("classify", "routed"), labelled.review_item_ids)
    labelled = evidex.classify(
        "Where is my parcel?",
        cf.PASSAGES,
        cf.TAXONOMY,
        judge=ScriptedJudge(BAD),
        risk="medium",
        **run,
    )
    one(("classify", "fallback"), labelled.review_item_ids)

    judge = ScriptedJudge([af.reply(af.supported(), af.inferred())])
    audited = evidex.audit(
        f"{af.FOUNDED} {af.CEO}", af.PASSAGES, question=af.QUESTION, judge=judge, risk="high", **run
    )
    one(("audit", "routed"), audited.review_item_ids)
    audited = evidex.audit(
        af.ANSWER, af.PASSAGES, question=af.QUESTION, judge=ScriptedJudge(BAD), **run
    )
    one(("audit", "fallback"), audited.review_item_ids)
    return items
