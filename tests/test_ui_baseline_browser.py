"""Pinning a baseline run in a real browser: headless Chromium (Debian's, via playwright)
against the service on a loopback uvicorn server, with two tier runs below its reports folder.

An admin logs in, picks the older run in the agreement page's form and pins it; the page then
reads the newest run against it: both runs named, each metric's figures, difference, interval
and verdict as :func:`evidex.evaluate.compare_reports` gives them, and the changed pairs. The
page with the comparison fits 1280x800 and 390x844 (a screenshot of each is saved in the test's
temp folder), and clearing the pin from it leaves none.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi")

from evidex.evaluate.compare import compare_reports
from evidex.service import create_app
from evidex.store import SqlStore, open_store
from tests.live_service import serve_app
from tests.test_ui_baseline import write_runs
from tests.test_ui_browser import chromium  # noqa: F401  (the browser fixture, reused)
from tests.test_ui_decide_browser import _FITS, VIEWPORTS

pytestmark = pytest.mark.network


@pytest.fixture
def served(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[SqlStore, str, tuple[dict[str, Any], dict[str, Any]]]]:
    store = open_store(f"sqlite:///{tmp_path / 'ui.db'}")
    runs = write_runs(tmp_path / "runs", store)
    monkeypatch.setenv("EVIDEX_REPORTS", str(tmp_path / "runs"))
    with serve_app(create_app(store, allowed_hosts=["127.0.0.1"])) as base:
        yield store, base, runs
    store.close()


def test_an_admin_pins_a_baseline_and_reads_the_comparison(
    chromium: Any,  # noqa: F811
    served: tuple[SqlStore, str, tuple[dict[str, Any], dict[str, Any]]],
    tmp_path: Path,
) -> None:
    store, base, (v1, v2) = served
    _, secret = store.create_key("admin", "ada")
    page = chromium.new_context(viewport={"width": 1280, "height": 800}).new_page()
    page.goto(f"{base}/ui/login")
    page.fill("#key", secret)
    page.click("button[type=submit]")
    page.wait_for_url(f"{base}/ui/")
    page.click("header nav >> text=Agreement")
    page.wait_for_url(f"{base}/ui/agreement")
    assert page.locator("#no-baseline").is_visible()

    page.select_option("#pin-report", "eval-tier-v1/report.json")
    page.click("form.pin button[type=submit]")
    page.wait_for_selector('section.baseline[data-job="tier"]')
    assert "Pinned eval-tier-v1/report.json as the tier baseline." in page.inner_text("p.notice")
    tier = page.locator('section.baseline[data-job="tier"]')
    assert "eval-tier-v1/report.json" in tier.locator("tr.run-pinned").inner_text()
    assert "eval-tier-v2/report.json" in tier.locator("tr.run-newest").inner_text()

    comparison = compare_reports(v1, v2)
    for row in comparison["metrics"]:
        shown = tier.locator(f'tr[data-measure="{row["measure"]}"]')
        assert shown.locator("td.verdict").inner_text() == row["verdict"]
        if row["low"] == row["low"]:  # a defined interval (not NaN)
            interval = f"{row['low']:+.3f} to {row['high']:+.3f}"
            assert shown.locator("td.col-interval").inner_text() == interval
            assert shown.locator("td.col-difference").inner_text() == f"{row['difference']:+.3f}"
    keys = tier.locator("table.changed tbody tr").evaluate_all(
        "rows => rows.map(r => r.dataset.key)"
    )
    assert keys == [c["key"] for c in comparison["changed"]] and keys

    for width, height in VIEWPORTS:
        page.set_viewport_size({"width": width, "height": height})
        page.reload()
        fits = page.evaluate(_FITS)
        where = f"/ui/agreement with a pinned baseline at {width}×{height}"
        assert fits["scroll"] <= fits["width"], f"{where}: the page scrolls sideways: {fits}"
        assert fits["body"] <= fits["width"], f"{where}: the body overflows: {fits}"
        assert fits["over"] == [], f"{where}: controls off the screen: {fits['over']}"
        page.screenshot(path=str(tmp_path / f"agreement-{width}x{height}.png"), full_page=True)

    tier.locator("text=Clear the pin").click()
    page.wait_for_selector("#no-baseline")
    assert store.baseline("tier") is None
