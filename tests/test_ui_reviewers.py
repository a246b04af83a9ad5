"""Several reviewers, adjudication and assignment in the review UI's pages (in-process; the
browser tests drive the same pages in Chromium): a reviewer's page and the queue show no other
reviewer's decision of a pending item before they have decided it; a disagreement shows as
disputed, and only an admin gets the form that settles it; an admin assigns an item from its
page, the assignee's queue counts it, and nobody else may decide it; a page asked for as a
fragment answers its main part only."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("jinja2")

from fastapi.testclient import TestClient

from evidex.review_policy import ReviewSettings
from evidex.service import create_app
from evidex.store import SqlStore, open_store
from tests.test_ui import CR, DS, IRR, _csrf, login, tier_item


class Reviewers:
    """One logged-in browser session per name, over one store and app."""

    def __init__(self, store: SqlStore) -> None:
        self.store = store
        self.app = create_app(store, allowed_hosts=["testserver"])
        self.clients: dict[str, TestClient] = {}

    def __call__(self, name: str, role: str = "reviewer") -> TestClient:
        if name not in self.clients:
            client = TestClient(self.app)
            _, secret = self.store.create_key(role, name)
            assert login(client, secret).status_code == 303
            self.clients[name] = client
        return self.clients[name]


def _post(client: TestClient, path: str, page: str, data: dict[str, str]) -> Any:
    return client.post(path, data={"csrf": _csrf(client.get(page).text), **data})


@pytest.fixture
def world(tmp_path: Path) -> Any:
    store = open_store(f"sqlite:///{tmp_path / 'ui.db'}", review=ReviewSettings(decisions=2))
    yield store, Reviewers(store)
    store.close()


def _decide_section(html: str) -> str:
    found = re.search(r'<section class="decide">.*?</section>', html, re.S)
    assert found
    return found.group(0)


def test_two_reviewers_decide_blind_and_a_disagreement_goes_to_an_admin(world: Any) -> None:
    store, people = world
    item = tier_item(store)
    page = f"/ui/item/{item}"
    ana, ben = people("ana"), people("ben")
    note = "the snippet names the effect"
    done = _post(ana, f"{page}/resolve", page, {"verdict": "accept", "note": note})
    assert done.status_code == 200 and f"Decided item {item}: it waits for 1 more" in done.text
    # ben sees that one decision is in, not what it is
    seen = ben.get(page).text
    assert note not in seen and 'data-reviewer="ana"' not in seen
    assert "1 made so far" in seen and 'action="/ui/item/' in _decide_section(seen)
    for listing in (ben.get("/ui/").text, ben.get("/ui/?status=all").text):
        assert note not in listing and "accept" not in listing and "1 of 2 decisions" in listing
    # ana sees her own, and no form to decide again
    hers = _decide_section(ana.get(page).text)
    assert note in hers and "You have decided this item" in hers and "<form" not in hers
    again = _post(ana, f"{page}/resolve", page, {"verdict": IRR})
    assert again.status_code == 409 and "ana has decided" in again.text
    # ben disagrees: disputed, both decisions visible, only an admin may settle it
    out = _post(ben, f"{page}/resolve", page, {"verdict": IRR, "note": "off topic"})
    assert out.status_code == 200 and "its reviewers disagree" in out.text
    assert store.get_review(item)["status"] == "disputed"
    section = _decide_section(ben.get(page).text)
    assert note in section and "off topic" in section and "An admin settles it" in section
    assert "/adjudicate" not in section
    refused = ben.post(
        f"{page}/adjudicate", data={"csrf": _csrf(ben.get(page).text), "verdict": CR}
    )
    assert refused.status_code == 403
    lead = people("lead", "admin")
    assert "1" in lead.get("/ui/?status=disputed").text.split('id="total">')[1][:3]
    form = _decide_section(lead.get(page).text)
    assert f'action="/ui/item/{item}/adjudicate"' in form
    assert not re.search(r"\bchecked\b", form)  # nothing preselected here either
    missing = _post(lead, f"{page}/adjudicate", page, {"note": "x"})
    assert missing.status_code == 422 and "choose the tier" in missing.text
    settled = _post(lead, f"{page}/adjudicate", page, {"verdict": CR, "note": "background"})
    assert settled.status_code == 200 and f"Resolved item {item}." in settled.text
    row = store.get_review(item)
    assert (row["status"], row["decision"], row["reviewer"]) == ("resolved", CR, "lead")
    assert "(adjudication)" in settled.text


def test_an_admin_assigns_from_the_page_and_only_the_assignee_decides(world: Any) -> None:
    store, people = world
    first, second = tier_item(store, run_id="r1", pid="p1"), tier_item(store, run_id="r2", pid="p2")
    page = f"/ui/item/{second}"
    ana, lead = people("ana"), people("lead", "admin")
    assert "Assign to" not in ana.get(page).text  # a reviewer's page has no assignment form
    assert _post(ana, f"{page}/assign", page, {"assign_to": "ana"}).status_code == 403
    shown = lead.get(page).text
    assert '<option value="ana">' in shown and '<option value="lead">' in shown
    assert _post(lead, f"{page}/assign", page, {"assign_to": "ben"}).status_code == 200
    assert store.get_review(second)["assignee"] == "ben"
    # not ana's to decide; ben's queue counts it, and a claim gives it to him first
    blocked = _decide_section(ana.get(page).text)
    assert "Assigned to <strong>ben</strong>" in blocked and "/resolve" not in blocked
    refused = _post(ana, f"{page}/resolve", page, {"verdict": IRR})
    assert refused.status_code == 409 and "ben" in refused.text
    ben = people("ben")
    queue = ben.get("/ui/").text
    assert re.search(r'id="assigned-count">1<', queue)
    assert 'id="assigned-count"' not in ana.get("/ui/").text
    filtered = ana.get("/ui/?assignee=ben").text
    assert re.findall(r'class="item-link" href="/ui/item/(\d+)', filtered) == [str(second)]
    nobody = ana.get("/ui/?assignee=nobody").text
    assert re.findall(r'class="item-link" href="/ui/item/(\d+)', nobody) == [str(first)]
    claimed = ben.post("/ui/claim", data={"csrf": _csrf(queue)}, follow_redirects=False).headers[
        "location"
    ]
    assert claimed == f"/ui/item/{second}"
    unassigned = _post(lead, f"{page}/assign", page, {"unassign": "1"})
    assert unassigned.status_code == 200 and store.get_review(second)["assignee"] is None


def test_a_fragment_is_the_pages_main_part_only(world: Any) -> None:
    store, people = world
    item = tier_item(store)
    ana = people("ana")
    whole = ana.get(f"/ui/item/{item}")
    part = ana.get(f"/ui/item/{item}", headers={"X-Evidex-Fragment": "1"})
    assert whole.headers["vary"] == part.headers["vary"] == "X-Evidex-Fragment"
    assert "<html" in whole.text and '<header class="top">' in whole.text
    assert "<html" not in part.text and '<header class="top">' not in part.text
    assert "<script" not in part.text and "<head>" not in part.text
    assert part.text.count("<main") == 1 and 'data-page="item"' in part.text
    assert f'data-title="Review item {item} · evidex"' in part.text
    assert '<footer class="keys">' in part.text
    # a decision posted as the script posts it lands on the next item's fragment
    other = tier_item(store, run_id="r2", pid="p2")
    moved = ana.post(
        f"/ui/item/{item}/resolve",
        data={"csrf": _csrf(whole.text), "verdict": DS},
        headers={"X-Evidex-Fragment": "1"},
    )
    assert moved.url.path == f"/ui/item/{other}" and "<html" not in moved.text
    assert f"Decided item {item}" in moved.text
