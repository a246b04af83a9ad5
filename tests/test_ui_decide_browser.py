"""Reviewers decide safely and fast, in a real browser (headless Chromium against the service
on a loopback server) over one item of every job, routed and fallen back: resolving with
nothing chosen is stopped and names the field, a fallback item offers no "confirm the judge",
an audit item has no verdict and no claim status preselected, ``a`` confirms the judge's grade
where there is one, and every page fits a laptop (1280×800) and a phone (390×844)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi")

from evidex.service import create_app
from evidex.store import SqlStore, open_store
from tests.live_service import serve_app
from tests.test_ui_browser import chromium  # noqa: F401  (the browser fixture, reused)
from tests.test_ui_decide import ROUTES, Items, raise_all

pytestmark = pytest.mark.network

FIELD = {
    "tier": "the tier",
    "rerank": "the ranking",
    "classify": "the label",
    "audit": "the verdict",
    "sufficiency": "the verdict",
}
"""The field a page names when resolving with nothing chosen."""

CONFIRMED: dict[str, Any] = {
    "tier": "accept",
    "rerank": "accept",
    "classify": "accept",
    "sufficiency": "accept",
    "audit": {
        "verdict": "publish",
        "claims": {"claim-1": "fully_supported", "claim-2": "inferred"},
    },
}
"""What a routed item records after ``a`` (and, for audit, the verdict the policy left open)."""


@pytest.fixture
def served(chromium: Any, tmp_path: Path) -> Iterator[tuple[SqlStore, Items, str, Any]]:  # noqa: F811
    store = open_store(f"sqlite:///{tmp_path / 'decide.db'}")
    items = raise_all(store)
    _, secret = store.create_key("reviewer", "alice")
    app = create_app(store, allowed_hosts=["127.0.0.1"])
    with serve_app(app) as base:
        context = chromium.new_context(viewport={"width": 1280, "height": 800})
        page = context.new_page()
        page.goto(f"{base}/ui/login")
        page.fill("#key", secret)
        page.click("button[type=submit]")
        page.wait_for_url(f"{base}/ui/")
        yield store, items, base, page
        context.close()
    store.close()


def _picked(page: Any) -> list[str]:
    """Every choice the decision form holds: checked radios and boxes, chosen selects, ranks."""
    return list(
        page.eval_on_selector(
            "form.decision",
            """f => [
              ...[...f.querySelectorAll('input[type=radio]:checked, input[type=checkbox]:checked')]
                .map(e => e.name + '=' + e.value),
              ...[...f.querySelectorAll('select, input[type=number]')].filter(e => e.value)
                .map(e => e.name + '=' + e.value)]""",
        )
    )


@pytest.mark.parametrize(("job", "route"), ROUTES)
def test_resolving_with_nothing_chosen_is_stopped_naming_the_field(
    served: tuple[SqlStore, Items, str, Any], job: str, route: str
) -> None:
    store, items, base, page = served
    item = items[job, route]
    page.goto(f"{base}/ui/item/{item}")
    assert _picked(page) == [], f"{job} {route}: preselected {_picked(page)}"
    page.click("form.decision button[type=submit]")
    alert = page.locator("#missing")
    alert.wait_for(state="visible")
    assert f"Choose {FIELD[job]} before resolving" in alert.inner_text()
    assert page.url.endswith(f"/ui/item/{item}")  # nothing was posted
    page.keyboard.press("Control+Enter")  # nor from the keyboard
    assert page.url.endswith(f"/ui/item/{item}") and alert.is_visible()
    assert store.get_review(item)["status"] == "pending"


@pytest.mark.parametrize("job", list(FIELD))
def test_a_fallback_item_offers_no_confirm_of_the_judge(
    served: tuple[SqlStore, Items, str, Any], job: str
) -> None:
    store, items, base, page = served
    item = items[job, "fallback"]
    page.goto(f"{base}/ui/item/{item}")
    decide = page.inner_text("section.decide")
    assert "no judge grade to confirm" in decide
    assert "confirm the judge" not in decide and "accept the judge" not in decide
    assert page.locator("form.decision [data-judge]").count() == 0
    assert "confirm the judge" not in page.inner_text("footer.keys")
    page.keyboard.press("a")
    assert _picked(page) == []
    assert store.get_review(item)["status"] == "pending"


@pytest.mark.parametrize("route", ["routed", "fallback"])
def test_an_audit_item_holds_no_preselected_verdict_or_claim_status(
    served: tuple[SqlStore, Items, str, Any], route: str
) -> None:
    _, items, base, page = served
    page.goto(f"{base}/ui/item/{items['audit', route]}")
    radios = page.locator('form.decision input[name="verdict"]')
    assert [radios.nth(i).get_attribute("value") for i in range(radios.count())] == [
        "publish",
        "block",
        "reject",
    ]
    assert all(not radios.nth(i).is_checked() for i in range(radios.count()))
    selects = page.locator('form.decision select[name^="claim_"]')
    assert selects.count() >= 2
    for i in range(selects.count()):
        assert selects.nth(i).input_value() == ""
        options = selects.nth(i).locator("option").all_inner_texts()
        assert options[1:] == [
            "fully_supported",
            "partially_supported",
            "inferred",
            "unsupported",
            "contradicted",
        ]
    # a verdict with a claim left open is stopped, naming the claim
    page.check('input[name="verdict"][value="publish"]')
    selects.nth(0).select_option("unsupported")
    page.click("form.decision button[type=submit]")
    page.locator("#missing").wait_for(state="visible")
    assert "Choose the status of claim 2" in page.inner_text("#missing")


@pytest.mark.parametrize("job", list(FIELD))
def test_a_confirms_the_judges_grade(served: tuple[SqlStore, Items, str, Any], job: str) -> None:
    store, items, base, page = served
    item = items[job, "routed"]
    page.goto(f"{base}/ui/item/{item}")
    assert "confirm the judge" in page.inner_text("footer.keys")
    page.keyboard.press("a")
    assert _picked(page), f"{job}: a confirmed nothing"
    if job == "audit":  # the policy said "review": the verdict is the reviewer's
        assert _picked(page) == ["claim_0=fully_supported", "claim_1=inferred"]
        page.click("form.decision button[type=submit]")
        assert "Choose the verdict" in page.inner_text("#missing")
        page.locator("h1").click()
        page.keyboard.press("1")  # publish, from the keyboard too
    page.click("#note")
    page.keyboard.press("Control+Enter")
    page.wait_for_selector(f"text=Resolved item {item}.")
    decision = store.get_review(item)["decision"]
    assert (json.loads(decision) if job == "audit" else decision) == CONFIRMED[job]


@pytest.mark.parametrize(("job", "route"), ROUTES)
def test_every_verdict_has_a_key_that_chooses_it(
    served: tuple[SqlStore, Items, str, Any], job: str, route: str
) -> None:
    _, items, base, page = served
    page.goto(f"{base}/ui/item/{items[job, route]}")
    radios = page.locator('form.decision input[name="verdict"]')
    assert radios.count() >= 2
    keyed: dict[str, str] = {}
    for i in range(radios.count()):
        radio = radios.nth(i)
        key, value = radio.get_attribute("data-key"), radio.get_attribute("value") or ""
        judge = radio.get_attribute("data-judge") is not None
        assert key or judge, f"{job} {route}: the verdict {value!r} has no key"
        if key:
            assert key not in keyed, f"{job}: {key!r} chooses both {keyed[key]!r} and {value!r}"
            keyed[key] = value
    for key, value in keyed.items():
        page.locator("h1").click()  # nothing focused
        page.keyboard.press(key)
        assert page.locator(f'input[name="verdict"][value="{value}"]').is_checked(), (job, key)
        assert f"<kbd>{key}</kbd>" in page.inner_html("form.decision")


def test_a_in_a_focused_field_replaces_the_choice_there_only(
    served: tuple[SqlStore, Items, str, Any],
) -> None:
    _, items, base, page = served
    page.goto(f"{base}/ui/item/{items['audit', 'routed']}")
    first, second = page.locator('select[name="claim_0"]'), page.locator('select[name="claim_1"]')
    first.select_option("contradicted")
    second.select_option("unsupported")
    page.locator("h1").click()  # nothing focused: a fills only what is not chosen
    page.keyboard.press("a")
    assert (first.input_value(), second.input_value()) == ("contradicted", "unsupported")
    second.focus()
    page.keyboard.press("a")
    assert (first.input_value(), second.input_value()) == ("contradicted", "inferred")


# ---------------------------------------------------------------------------- viewports

VIEWPORTS = [(1280, 800), (390, 844)]

_FITS = """() => {
  const width = document.documentElement.clientWidth;
  const over = [...document.querySelectorAll(
      'main a, main button, main input:not([type=hidden]), main select, main textarea, header a')]
    .filter(e => e.offsetParent !== null && !e.closest('.table-wrap, details:not([open])'))
    .filter(e => {
      const r = e.getBoundingClientRect();
      return r.left < -1 || r.right > width + 1;
    })
    .map(e => e.outerHTML.slice(0, 80));
  return {width: width, scroll: document.documentElement.scrollWidth,
          body: document.body.scrollWidth, over: over};
}"""


@pytest.mark.parametrize(("width", "height"), VIEWPORTS)
def test_every_page_fits_the_screen(
    served: tuple[SqlStore, Items, str, Any], width: int, height: int
) -> None:
    store, items, base, page = served
    page.set_viewport_size({"width": width, "height": height})
    store.resolve_review(items["tier", "routed"], decision="accept", reviewer="alice")
    paths = ["/ui/", "/ui/agreement", "/ui/login", "/ui/item/999999"]
    paths += [f"/ui/item/{items[job, route]}" for job, route in ROUTES if (job, route) != (
        "tier", "routed")]  # fmt: skip
    for path in paths:
        page.goto(f"{base}{path}")
        fits = page.evaluate(_FITS)
        where = f"{path} at {width}×{height}"
        assert fits["scroll"] <= fits["width"], f"{where}: the page scrolls sideways: {fits}"
        assert fits["body"] <= fits["width"], f"{where}: the body overflows: {fits}"
        assert fits["over"] == [], f"{where}: controls off the screen: {fits['over']}"
        if path.startswith("/ui/item/") and not path.endswith("/999999"):
            resolve = page.locator("form.decision button[type=submit]")
            resolve.scroll_into_view_if_needed()
            box = resolve.bounding_box()
            assert box and box["x"] >= 0 and box["x"] + box["width"] <= width, where
            assert box["y"] >= 0 and box["y"] + box["height"] <= height, where
        if path == "/ui/":
            assert re.search(r"alice\s+1", page.inner_text("section.today")), where
