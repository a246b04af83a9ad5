"""Reviewers decide safely and fast, on the server side: no control of a decision comes
preselected, a form with a choice left out is refused (422 naming the field) and nothing is
stored, the store refuses a decision that leaves a passage or a claim out, a fallback item
offers no judge grade to confirm, the queue shows each item's real age and how many items each
reviewer resolved today."""

from __future__ import annotations

import json
import re
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi")

from fastapi.testclient import TestClient

from evidex.errors import InputError
from evidex.jobs.sufficiency import sufficiency
from evidex.service import create_app
from evidex.service._ui_views import format_age
from evidex.store import SqlStore, open_store
from evidex.store import _schema as schema
from evidex.store._util import now
from tests.review_items import raise_items
from tests.scripted import ScriptedJudge
from tests.test_sufficiency import PASSAGES as SUFFICIENCY_PASSAGES
from tests.test_sufficiency import QUERY as SUFFICIENCY_QUERY
from tests.test_sufficiency import lacking
from tests.test_ui import _csrf, logged_in, tier_item

Items = dict[tuple[str, str], int]


def raise_all(store: SqlStore) -> Items:
    """One item of every job, routed and fallen back (sufficiency's too)."""
    items = raise_items(store)
    routed = sufficiency(
        SUFFICIENCY_QUERY, SUFFICIENCY_PASSAGES, judge=ScriptedJudge([lacking(0.6)]), store=store
    )
    fallback = sufficiency(
        "Which year was the Model S first sold?",
        SUFFICIENCY_PASSAGES,
        judge=ScriptedJudge(["not json"] * 3),
        store=store,
    )
    (items["sufficiency", "routed"],) = routed.review_item_ids
    (items["sufficiency", "fallback"],) = fallback.review_item_ids
    return items


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> tuple[SqlStore, Items, TestClient]:
    store = open_store(f"sqlite:///{tmp_path_factory.mktemp('decide') / 'ui.db'}")
    items = raise_all(store)
    client = TestClient(create_app(store, allowed_hosts=["testserver"]))
    logged_in(client, store)
    yield store, items, client
    store.close()


def _decision_form(html: str) -> str:
    found = re.search(r'<form method="post" action="/ui/item/\d+/resolve".*?</form>', html, re.S)
    assert found, "the page has no decision form"
    return found.group(0)


def _post(client: TestClient, item: int, data: dict[str, Any]) -> Any:
    page = client.get(f"/ui/item/{item}")
    return client.post(f"/ui/item/{item}/resolve", data={"csrf": _csrf(page.text), **data})


# ---------------------------------------------------------------------------- nothing preselected

ROUTES = [(j, r) for j in ("tier", "rerank", "classify", "audit", "sufficiency") for r in
          ("routed", "fallback")]  # fmt: skip


@pytest.mark.parametrize(("job", "route"), ROUTES)
def test_no_decision_control_comes_preselected(
    world: tuple[SqlStore, Items, TestClient], job: str, route: str
) -> None:
    _, items, client = world
    form = _decision_form(client.get(f"/ui/item/{items[job, route]}").text)
    assert not re.search(r"\bchecked\b", form), f"{job} {route}: a choice is preselected"
    assert not re.search(r"\bselected\b", form), f"{job} {route}: a select is preselected"
    assert not re.search(r'name="rank_p\d+"[^>]*\bvalue=', form), "a rank is prefilled"
    if route == "fallback":
        assert "data-judge" not in form, f"{job}: a fallback offers a judge grade to confirm"
        assert "no judge grade to confirm" in form
    else:
        assert "data-judge" in form, f"{job}: the judge's grade cannot be confirmed"
        assert "<kbd>a</kbd> confirms" in form


def test_an_audit_item_offers_publish_block_reject_and_the_five_classes(
    world: tuple[SqlStore, Items, TestClient],
) -> None:
    _, items, client = world
    form = _decision_form(client.get(f"/ui/item/{items['audit', 'routed']}").text)
    verdicts = re.findall(r'name="verdict" value="([^"]+)"', form)
    assert verdicts == ["publish", "block", "reject"]
    selects = re.findall(r'<select name="claim_\d+".*?</select>', form, re.S)
    assert len(selects) == 2
    for select in selects:
        assert re.findall(r'<option value="([^"]*)"', select) == [
            "",
            "fully_supported",
            "partially_supported",
            "inferred",
            "unsupported",
            "contradicted",
        ]
    assert re.findall(r'data-judge="([^"]+)"', form) == ["fully_supported", "inferred"]


# ---------------------------------------------------------------------------- refusals

NOTHING = [
    ("tier", "routed", "choose the tier"),
    ("tier", "fallback", "choose the tier"),
    ("rerank", "routed", "choose the ranking"),
    ("rerank", "fallback", "choose the ranking"),
    ("classify", "routed", "choose the label"),
    ("classify", "fallback", "choose the label"),
    ("audit", "routed", "choose the verdict"),
    ("audit", "fallback", "choose the verdict"),
    ("sufficiency", "routed", "choose the verdict"),
    ("sufficiency", "fallback", "choose the verdict"),
]


@pytest.mark.parametrize(("job", "route", "named"), NOTHING)
def test_resolving_with_nothing_chosen_is_a_422_naming_the_field(
    world: tuple[SqlStore, Items, TestClient], job: str, route: str, named: str
) -> None:
    store, items, client = world
    response = _post(client, items[job, route], {"note": "looked at it"})
    assert response.status_code == 422, response.text
    assert named in response.text and "nothing was recorded" in response.text
    assert store.get_review(items[job, route])["status"] == "pending"


PARTIAL = [
    ("audit", "routed", {"verdict": "publish", "claim_0": "fully_supported"}, "status of claim 2"),
    ("audit", "fallback", {"verdict": "block"}, "status of claim 1"),
    ("rerank", "fallback", {"verdict": "ranking", "rank_p0": "1", "rank_p2": "2"}, "rank of"),
    (
        "rerank",
        "fallback",
        {"verdict": "ranking", "rank_p0": "1", "rank_p1": "1", "rank_p2": "2"},
        "rank 1 is given to who-2023, nih-fact",
    ),
    ("rerank", "fallback", {"verdict": "accept"}, "no judge ranking to confirm"),
    ("classify", "routed", {"verdict": "labels"}, "choose a label"),
    ("classify", "fallback", {"verdict": "accept"}, "no judge label to confirm"),
    ("tier", "fallback", {"verdict": "accept"}, "no judge grade to confirm"),
    ("tier", "fallback", {"verdict": "reject", "tier_p0": "irrelevant"}, "the tier of nih-fact"),
    ("sufficiency", "fallback", {"verdict": "accept"}, "gave no verdict"),
]


@pytest.mark.parametrize(("job", "route", "data", "named"), PARTIAL)
def test_a_choice_left_out_is_refused_naming_it(
    world: tuple[SqlStore, Items, TestClient],
    job: str,
    route: str,
    data: dict[str, str],
    named: str,
) -> None:
    store, items, client = world
    response = _post(client, items[job, route], data)
    assert response.status_code == 422, response.text
    assert named in response.text.replace("&#39;", "'")
    assert store.get_review(items[job, route])["status"] == "pending"


def test_every_choice_made_resolves(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path / 'ok.db'}")
    items = raise_all(store)
    client = TestClient(create_app(store, allowed_hosts=["testserver"]))
    logged_in(client, store)
    chosen = {
        ("audit", "routed"): {
            "verdict": "block",
            "claim_0": "fully_supported",
            "claim_1": "contradicted",
        },
        ("audit", "fallback"): {"verdict": "reject"},
        ("rerank", "fallback"): {"rank_p0": "2", "rank_p1": "3", "rank_p2": "1"},
        ("classify", "fallback"): {"label": "SHIPPING"},
        ("tier", "fallback"): {"verdict": "irrelevant", "tier_p0": "directly-supporting"},
        ("sufficiency", "fallback"): {"verdict": "sufficient"},
    }
    for key, data in chosen.items():
        response = _post(client, items[key], data)
        assert response.status_code == 200 and "Resolved item" in response.text, key
    decided = {key: store.get_review(items[key])["decision"] for key in chosen}
    assert json.loads(decided["audit", "routed"]) == {
        "verdict": "block",
        "claims": {"claim-1": "fully_supported", "claim-2": "contradicted"},
    }
    assert decided["audit", "fallback"] == "reject"
    assert json.loads(decided["rerank", "fallback"]) == ["blog-sun", "who-2023", "nih-fact"]
    assert decided["classify", "fallback"] == "SHIPPING"
    assert json.loads(decided["tier", "fallback"]) == {
        "who-2023": "directly-supporting",
        "nih-fact": "irrelevant",
        "blog-sun": "irrelevant",
    }
    assert decided["sufficiency", "fallback"] == "sufficient"
    store.close()


def test_the_store_refuses_a_decision_that_leaves_a_claim_or_a_passage_out(
    world: tuple[SqlStore, Items, TestClient],
) -> None:
    store, items, _ = world
    audit, tier = items["audit", "routed"], items["tier", "fallback"]
    refused = [
        (audit, json.dumps({"verdict": "publish", "claims": {"claim-1": "inferred"}}), "claim-2"),
        (audit, json.dumps({"verdict": "publish", "claims": {}}), "maps this item"),
        (audit, json.dumps({"verdict": "review", "claims": {"claim-1": "inferred"}}), "allowed"),
        (audit, "publish", "names a status for every claim"),
        (audit, "review", "allowed"),
        (audit, json.dumps({"claim-1": "inferred", "claim-2": ""}), "claim-2"),
        (tier, json.dumps({"who-2023": "irrelevant", "nih-fact": None}), "nih-fact"),
        (tier, json.dumps({"who-2023": "irrelevant"}), "nih-fact"),
    ]
    for item, decision, named in refused:
        with pytest.raises(InputError, match=named):
            store.resolve_review(item, decision=decision)
        assert store.get_review(item)["status"] == "pending"


def test_an_audit_verdict_with_every_claim_pairs_and_exports_its_statuses(tmp_path: Path) -> None:
    from evidex.evaluate.review_export import export_reviews
    from evidex.jobs import review_kind

    store = open_store(f"sqlite:///{tmp_path / 'audit.db'}")
    item = raise_all(store)["audit", "routed"]
    decision = json.dumps(
        {"verdict": "publish", "claims": {"claim-1": "fully_supported", "claim-2": "unsupported"}}
    )
    resolved = store.resolve_review(item, decision=decision, reviewer="ana")
    pairs, _ = review_kind("audit").pairs(resolved)
    assert sorted(pairs) == [("fully_supported", "fully_supported"), ("unsupported", "inferred")]
    (record,) = export_reviews([resolved], "audit").records
    assert [c.classification for c in record.claims] == ["fully_supported", "unsupported"]
    store.close()


# ---------------------------------------------------------------------------- age, today


def test_format_age_says_the_real_age() -> None:
    assert format_age(0) == "<1 min"
    assert format_age(-5) == "<1 min"  # a clock a little behind
    assert format_age(59.9) == "<1 min"
    assert format_age(60) == "1 min"
    assert format_age(4 * 60 + 59) == "4 min"
    assert format_age(3599) == "59 min"
    assert format_age(3600) == "1 h"
    assert format_age(2 * 3600 + 59 * 60) == "2 h"
    assert format_age(86399) == "23 h"
    assert format_age(86400) == "1 d"
    assert format_age(3 * 86400 + 23 * 3600) == "3 d"
    assert format_age(400 * 86400) == "400 d"


def _created(store: SqlStore, item: int, ago: timedelta) -> None:
    q = schema.review_queue
    with store.engine.begin() as conn:
        conn.execute(q.update().where(q.c.id == item).values(created_at=now() - ago))


def test_the_queue_shows_each_items_real_age(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path / 'age.db'}")
    client = TestClient(create_app(store, allowed_hosts=["testserver"]))
    logged_in(client, store)
    ages = {"a": timedelta(minutes=4, seconds=10), "b": timedelta(hours=2, minutes=5)}
    ages["c"] = timedelta(days=3, hours=1)
    for pid, ago in ages.items():
        _created(store, tier_item(store, run_id=f"r-{pid}", pid=pid), ago)
    page = client.get("/ui/").text
    cells = re.findall(r'<td class="age"[^>]*>([^<]*)</td>', page)
    assert cells == ["4 min", "2 h", "3 d"]
    assert "1h" not in cells
    # the filter still groups by bucket
    assert re.search(r'name="age" value="1h"', page) and re.search(r'name="age" value="7d"', page)
    store.close()


def test_the_queue_shows_how_many_items_each_reviewer_resolved_today(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path / 'today.db'}")
    client = TestClient(create_app(store, allowed_hosts=["testserver"]))
    logged_in(client, store)
    assert "Nobody has resolved an item today" in client.get("/ui/").text
    ids = [tier_item(store, run_id=f"r{i}", pid=f"p{i}") for i in range(6)]
    for item, who in zip(ids, ["ana", "ben", "ana", "ana", "ben", "cy"], strict=True):
        store.resolve_review(item, decision="irrelevant", reviewer=who)
    d = schema.review_decisions
    with store.engine.begin() as conn:  # cy's was the day before yesterday: not today's
        conn.execute(
            d.update().where(d.c.item_id == ids[5]).values(decided_at=now() - timedelta(days=2))
        )
    assert store.resolved_by_reviewer(now() - timedelta(hours=1)) == {"ana": 3, "ben": 2}
    page = client.get("/ui/").text
    found = re.findall(
        r'<li data-reviewer="([^"]*)"><span class="name">[^<]*</span> <strong class="n">(\d+)<',
        page,
    )
    assert found == [("ana", "3"), ("ben", "2")]
    store.close()
