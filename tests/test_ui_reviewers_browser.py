"""Several reviewers, adjudication, assignment and the keyboard flow in a real browser: headless
Chromium (Debian's, via playwright) against the service on a loopback uvicorn server, each
person in a browser context of their own.

- Two reviewers decide the same item of every job: before deciding, neither sees the other's
  decision (page and queue); when they disagree the item goes to adjudication, which an admin
  settles from the page.
- Inter-reviewer kappa on a scripted set of 40 items (decided over the HTTP API by two
  reviewer keys) is the value computed by hand here.
- An admin assigns an item from its page; only the assignee claims it while it is assigned.
- The keyboard alone takes a reviewer from the queue through items (claim, confirm the judge,
  choose a tier, a verdict and each claim's status, a label, write a note, resolve) with no
  page reload between items; Back returns to the item before; without JavaScript the same
  forms work as whole pages.
- The new pages (a disputed item with the adjudication and assignment forms, an item waiting
  for another decision, the queue of disputed items, the agreement page with reviewers' kappa)
  fit 1280x800 and 390x844.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi")

from evidex.harness.ports import ReviewRequest
from evidex.review_policy import ReviewSettings
from evidex.service import create_app
from evidex.store import SqlStore, open_store
from tests.live_service import serve_app
from tests.test_ui_browser import chromium  # noqa: F401  (the browser fixture, reused)
from tests.test_ui_decide import Items, raise_all
from tests.test_ui_decide_browser import _FITS, VIEWPORTS

pytestmark = pytest.mark.network

DS, CR, IR = "directly-supporting", "contextually-relevant", "irrelevant"

FIRST = {"tier": ["a"], "rerank": ["a"], "classify": ["a"], "audit": ["a", "1"]}
FIRST["sufficiency"] = ["a"]
"""The first reviewer's keys per job: confirm the judge (audit: and publish)."""
SECOND = {"tier": ["r"], "rerank": ["r"], "classify": ["2"], "audit": ["a", "2"]}
SECOND["sufficiency"] = ["r"]
"""The second reviewer's keys: a decision that disagrees with the first's."""


class World:
    """A live service over one store whose items need two decisions, and a logged-in browser
    page per person."""

    def __init__(self, browser: Any, store: SqlStore, base: str) -> None:
        self.browser, self.store, self.base = browser, store, base
        self.pages: dict[str, Any] = {}

    def page(self, name: str, role: str = "reviewer", size: tuple[int, int] = (1280, 800)) -> Any:
        if name not in self.pages:
            context = self.browser.new_context(viewport={"width": size[0], "height": size[1]})
            page = context.new_page()
            _, secret = self.store.create_key(role, name)
            page.goto(f"{self.base}/ui/login")
            page.fill("#key", secret)
            page.click("button[type=submit]")
            page.wait_for_url(f"{self.base}/ui/")
            self.pages[name] = page
        return self.pages[name]


@pytest.fixture
def world(chromium: Any, tmp_path: Path) -> Iterator[tuple[World, Items]]:  # noqa: F811
    store = open_store(f"sqlite:///{tmp_path / 'two.db'}", review=ReviewSettings(decisions=2))
    items = raise_all(store)
    with serve_app(create_app(store, allowed_hosts=["127.0.0.1"])) as base:
        world = World(chromium, store, base)
        yield world, items
        for page in world.pages.values():
            page.context.close()
    store.close()


def _decide(page: Any, keys: list[str], item: int, note: str = "") -> None:
    """Keys only: the choices, a note, then Ctrl+Enter; waits until the page says the item
    moved on."""
    for key in keys:
        page.keyboard.press(key)
    if note:
        page.keyboard.press("w")
        page.keyboard.type(note)
    page.keyboard.press("Control+Enter")
    page.wait_for_selector(f"text=/(Decided|Resolved) item {item}/")


@pytest.mark.parametrize("job", ["tier", "rerank", "classify", "audit", "sufficiency"])
def test_two_reviewers_decide_blind_and_an_admin_settles_their_disagreement(
    world: tuple[World, Items], job: str
) -> None:
    w, items = world
    item = items[job, "routed"]
    url = f"{w.base}/ui/item/{item}"
    ana, ben = w.page("ana"), w.page("ben")
    for page in (ana, ben):  # before anyone decides: no decision anywhere
        page.goto(url)
        assert page.locator("ul.decisions").count() == 0
        assert "0 made so far" in page.inner_text("section.decide")
    ana.goto(url)
    note = f"ana's own reading of item {item}"
    _decide(ana, FIRST[job], item, note)
    mine = w.store.review_decisions([item])[item][0]
    assert mine["note"] == note
    # ben, before deciding: one decision is in, and nothing of it shows
    ben.goto(url)
    decide = ben.inner_text("section.decide")
    assert "1 made so far" in decide and "once you have made yours" in decide
    assert ben.locator("ul.decisions").count() == 0 and note not in ben.content()
    assert ben.locator("section.decide span.decision").count() == 0
    ben.goto(f"{w.base}/ui/?status=all")
    link = ben.locator("a.item-link", has_text=re.compile(rf"^#{item}$"))
    row = ben.locator("table.queue tr", has=link)
    assert "1 of 2 decisions" in row.inner_text() and row.locator(".decision").count() == 0
    assert note not in ben.content()
    # ana, having decided: her decision, and no form to decide again
    ana.goto(url)
    assert ana.locator('ul.decisions li[data-reviewer="ana"]').count() == 1
    assert ana.locator("form.decision").count() == 0
    # ben disagrees: the item is disputed, and he now sees both decisions
    ben.goto(url)
    _decide(ben, SECOND[job], item)
    assert w.store.get_review(item)["status"] == "disputed"
    ben.goto(url)
    assert ben.locator("ul.decisions li").count() == 2
    assert "An admin settles it" in ben.inner_text("section.decide")
    assert ben.locator("form.decision").count() == 0
    # the admin settles it from the page, by keyboard too
    lead = w.page("lead", "admin")
    lead.goto(f"{w.base}/ui/?status=disputed")
    assert lead.locator("a.item-link", has_text=re.compile(rf"^#{item}$")).count() == 1
    lead.goto(url)
    assert lead.locator('form.decision[action$="/adjudicate"]').count() == 1
    _decide(lead, FIRST[job], item)
    settled = w.store.get_review(item)
    assert (settled["status"], settled["reviewer"]) == ("resolved", "lead")
    assert settled["decision"] == w.store.review_decisions([item])[item][-1]["decision"]


def _after(store: SqlStore, item: int) -> int:
    """The next pending item after ``item`` (the page a decision goes on to)."""
    return min(int(r["id"]) for r in store.list_reviews() if int(r["id"]) > item)


def test_inter_reviewer_kappa_on_40_items_is_the_hand_computed_value(
    chromium: Any,  # noqa: F811
    tmp_path: Path,
) -> None:
    import httpx

    store = open_store(f"sqlite:///{tmp_path / 'kappa.db'}", review=ReviewSettings(decisions=2))
    # (ana, ben) decisions of 40 single-passage tier items whose judge said directly-supporting:
    # ana \ ben   DS  CR  IR
    #   DS        10   2   0
    #   CR         3   8   1
    #   IR         0   2  14
    cells = {(DS, DS): 10, (DS, CR): 2, (CR, DS): 3, (CR, CR): 8, (CR, IR): 1}
    cells |= {(IR, CR): 2, (IR, IR): 14}
    votes = [pair for pair, n in cells.items() for _ in range(n)]
    assert len(votes) == 40
    ids = []
    for n in range(40):
        pid = f"k{n}"
        ids.append(
            store.add_review(
                ReviewRequest(
                    job="tier",
                    reason=f"high risk: sample {n}",
                    risk="high",
                    run_id=f"run-{n}",
                    passage_ids=[pid],
                    payload={
                        "query": f"question {n}",
                        "passages": [{"passage_id": pid, "text": f"passage {n}"}],
                        "assignment": {"passage_id": pid, "tier": DS, "source": "judge"},
                    },
                )
            )
        )
    keys = {who: store.create_key("reviewer", who)[1] for who in ("ana", "ben", "cy")}
    with serve_app(create_app(store, allowed_hosts=["127.0.0.1"])) as base:
        for who, side in (("ana", 0), ("ben", 1)):
            auth = {"Authorization": f"Bearer {keys[who]}"}
            with httpx.Client(base_url=base, headers=auth, timeout=30) as http:
                for item, pair in zip(ids, votes, strict=True):
                    # ana says DS as "accept" (the judge's grade) half the time: the same label
                    said = "accept" if who == "ana" and pair[0] == DS and item % 2 else pair[side]
                    answer = http.post(f"/review/{item}/resolve", json={"decision": said})
                    assert answer.status_code == 200, answer.text
        context = chromium.new_context(viewport={"width": 1280, "height": 800})
        page = context.new_page()
        page.goto(f"{base}/ui/login")
        page.fill("#key", keys["cy"])
        page.click("button[type=submit]")
        page.wait_for_url(f"{base}/ui/")
        page.goto(f"{base}/ui/agreement")
        row = page.locator('table.between tr[data-job="tier"]')
        observed = (10 + 8 + 14) / 40
        ana_share = {DS: 12 / 40, CR: 12 / 40, IR: 16 / 40}  # the table's row sums
        ben_share = {DS: 13 / 40, CR: 12 / 40, IR: 15 / 40}  # its column sums
        expected = sum(ana_share[t] * ben_share[t] for t in (DS, CR, IR))  # 540 / 1600
        kappa = (observed - expected) / (1 - expected)  # 0.4625 / 0.6625 = 0.6981...
        assert row.locator("td.kappa").inner_text() == f"{kappa:.3f}" == "0.698"
        assert row.locator("td.col-items").inner_text() == "40"
        assert row.locator("td.col-agree").inner_text() == "32 (80%)"
        assert row.locator("td.col-disputed").inner_text() == "8"
        low, high = (float(x) for x in row.locator("td.ci").inner_text().split("–"))
        assert low < kappa < high
        # beside the judge's kappa, on its row of the same job
        judge_row = page.locator('table.agreement tr[data-job="tier"]')
        assert judge_row.locator("td.peer-kappa").inner_text() == "0.698"
        context.close()
    store.close()


def test_an_assigned_item_is_claimed_only_by_its_assignee(world: tuple[World, Items]) -> None:
    w, items = world
    target = items["tier", "routed"]
    lead = w.page("lead", "admin")
    lead.goto(f"{w.base}/ui/item/{target}")
    lead.fill("#assign-to", "ben")
    lead.click('form.assign button[type=submit]:not([name="unassign"])')
    lead.wait_for_selector("dd.assignee")
    assert lead.inner_text("dd.assignee") == "ben"
    assert w.store.get_review(target)["assignee"] == "ben"
    ana, ben = w.page("ana"), w.page("ben")
    # ana: not hers to decide; her claims never take it
    ana.goto(f"{w.base}/ui/item/{target}")
    assert "only they may decide it" in ana.inner_text("section.decide")
    assert ana.locator("form.decision").count() == 0
    ana.goto(f"{w.base}/ui/")
    assert ana.locator("#assigned-count").count() == 0
    claimed_by_ana = []
    for _ in range(3):
        ana.goto(f"{w.base}/ui/")
        ana.keyboard.press("c")
        ana.wait_for_function("() => location.pathname.startsWith('/ui/item/')")
        claimed_by_ana.append(int(ana.url.split("/ui/item/")[1].split("?")[0]))
    assert target not in claimed_by_ana
    # ben: counted as his, and his first claim
    ben.goto(f"{w.base}/ui/")
    assert ben.inner_text("#assigned-count") == "1"
    ben.keyboard.press("c")
    ben.wait_for_function(f"() => location.pathname === '/ui/item/{target}'")
    assert "Claimed by you" in ben.inner_text("section.decide")


def test_the_keyboard_alone_moves_through_items_without_a_reload(
    world: tuple[World, Items],
) -> None:
    w, items = world
    ana = w.page("ana")
    ana.goto(f"{w.base}/ui/?job=tier")
    ana.evaluate("() => { window.__same_document = 'yes'; }")
    ana.keyboard.press("c")  # claim the next free item: the first tier item
    first = items["tier", "routed"]
    ana.wait_for_function(f"() => location.pathname === '/ui/item/{first}'")
    ana.wait_for_selector("text=Claimed by you")
    ana.keyboard.press("a")  # confirm the judge
    ana.keyboard.press("w")  # write a note
    ana.keyboard.type("matches the number in the passage")
    ana.keyboard.press("Escape")  # back to the keys
    ana.keyboard.press("1")  # then choose the tier by its key instead
    ana.keyboard.press("Enter")
    ana.wait_for_selector(f"text=Decided item {first}")
    decision = w.store.review_decisions([first])[first][0]
    assert decision["note"] == "matches the number in the passage"
    assert decision["decision"] == DS  # "1" chose the first tier over the confirmed grade
    second = _after(w.store, first)
    assert ana.url.split("?")[0].endswith(f"/ui/item/{second}")  # the address followed
    assert ana.evaluate("() => window.__same_document") == "yes"  # no page was loaded
    ana.keyboard.press("3")
    ana.keyboard.press("Control+Enter")
    ana.wait_for_selector(f"text=Decided item {second}")
    assert ana.evaluate("() => window.__same_document") == "yes"
    ana.go_back()
    ana.wait_for_function(f"() => location.pathname === '/ui/item/{second}'")
    ana.wait_for_selector(f"h1:has-text('#{second}')")
    ana.go_back()
    ana.wait_for_function(f"() => location.pathname === '/ui/item/{first}'")
    ana.wait_for_selector(f"h1:has-text('#{first}')")
    assert ana.evaluate("() => window.__same_document") == "yes"


def test_without_javascript_every_form_still_works(chromium: Any, tmp_path: Path) -> None:  # noqa: F811
    store = open_store(f"sqlite:///{tmp_path / 'nojs.db'}", review=ReviewSettings())
    items = raise_all(store)
    _, secret = store.create_key("reviewer", "ana")
    with serve_app(create_app(store, allowed_hosts=["127.0.0.1"])) as base:
        context = chromium.new_context(java_script_enabled=False)
        page = context.new_page()
        page.goto(f"{base}/ui/login")
        page.fill("#key", secret)
        page.click("button[type=submit]")
        page.wait_for_url(f"{base}/ui/")
        page.goto(f"{base}/ui/?job=tier")
        with page.expect_navigation():
            page.click("form.claim-next button")
        first = items["tier", "routed"]
        assert page.url.endswith(f"/ui/item/{first}")
        with page.expect_navigation():  # nothing chosen: the server refuses it, naming it
            page.click("form.decision button[type=submit]")
        assert "choose the tier" in page.inner_text("section.decide")
        page.check(f'input[name="verdict"][value="{IR}"]')
        page.fill("#note", "no script")
        with page.expect_navigation():
            page.click("form.decision button[type=submit]")
        assert f"Resolved item {first}." in page.inner_text("main")
        assert page.url.split("?")[0].endswith(f"/ui/item/{_after(store, first)}")
        resolved = store.get_review(first)
        assert (resolved["decision"], resolved["note"]) == (IR, "no script")
        context.close()
    store.close()


@pytest.mark.parametrize(("width", "height"), VIEWPORTS)
def test_the_new_pages_fit_the_screen(world: tuple[World, Items], width: int, height: int) -> None:
    w, items = world
    disputed, waiting = items["audit", "routed"], items["classify", "routed"]
    for item, votes in ((disputed, ["publish", "block"]), (waiting, ["accept"])):
        for who, vote in zip(("x", "y")[: len(votes)], votes, strict=True):
            decision = vote
            if w.store.get_review(item)["job"] == "audit":
                claims = {"claim-1": "fully_supported", "claim-2": "inferred"}
                decision = json.dumps({"verdict": vote, "claims": claims})
            w.store.resolve_review(item, decision=decision, reviewer=who)
    w.store.assign_review(items["tier", "routed"], "x")
    lead = w.page("lead", "admin", size=(width, height))
    x = w.page("x", size=(width, height))
    views = [
        (lead, f"/ui/item/{disputed}"),
        (lead, f"/ui/item/{items['tier', 'routed']}"),
        (lead, "/ui/?status=disputed"),
        (lead, "/ui/agreement"),
        (x, f"/ui/item/{waiting}"),
        (x, "/ui/"),
    ]
    for page, path in views:
        page.set_viewport_size({"width": width, "height": height})
        page.goto(f"{w.base}{path}")
        fits = page.evaluate(_FITS)
        where = f"{path} at {width}x{height}"
        assert fits["scroll"] <= fits["width"], f"{where}: the page scrolls sideways: {fits}"
        assert fits["over"] == [], f"{where}: controls off the screen: {fits['over']}"
        for control in ("form.decision button[type=submit]", "form.assign button"):
            for i in range(page.locator(control).count()):
                button = page.locator(control).nth(i)
                button.scroll_into_view_if_needed()
                box = button.bounding_box()
                assert box and box["x"] >= 0 and box["x"] + box["width"] <= width, where
                assert box["y"] >= 0 and box["y"] + box["height"] <= height, where
    assert re.search(r"Assigned to you: 1 pending item", x.inner_text("main"))


def test_claim_statuses_and_labels_are_chosen_from_the_keyboard(
    world: tuple[World, Items],
) -> None:
    """An audit verdict and each claim's status, and a classify label, with keys only: the
    verdict's key, then Tab to each claim's status and its first letter; a label's box is
    Tab and Space."""
    w, items = world
    ana = w.page("ana")
    audit = items["audit", "routed"]
    ana.goto(f"{w.base}/ui/item/{audit}")
    ana.keyboard.press("2")  # block the answer
    ana.keyboard.press("Tab")  # out of the verdicts, to claim 1's status
    ana.keyboard.press("u")  # unsupported
    ana.keyboard.press("Tab")
    ana.keyboard.press("c")  # contradicted
    ana.keyboard.press("Control+Enter")
    ana.wait_for_selector(f"text=Decided item {audit}")
    decided = json.loads(w.store.review_decisions([audit])[audit][0]["decision"])
    assert decided == {
        "verdict": "block",
        "claims": {"claim-1": "unsupported", "claim-2": "contradicted"},
    }
    classify = items["classify", "fallback"]
    ana.goto(f"{w.base}/ui/item/{classify}")
    ana.keyboard.press("1")  # the label(s) ticked below
    ana.keyboard.press("Tab")  # the first label of the taxonomy
    ana.keyboard.press("Space")
    ana.keyboard.press("Control+Enter")
    ana.wait_for_selector(f"text=Decided item {classify}")
    first_label = w.store.get_review(classify)["payload"]["labels"][0]
    assert w.store.review_decisions([classify])[classify][0]["decision"] == first_label
