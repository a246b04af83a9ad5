"""Take the review UI's screenshots for the README and the docs site (``docs/screenshots/``).

    .venv/bin/python docs/screenshots.py

A real service: ``evidex serve`` as its own process on a free loopback port, over a temp SQLite
store whose review items a real tier run routed there (the embedded ``local:minilm`` judge at
high risk, so every top-tier grade waits for a person). Headless Chromium (Debian's
``/usr/bin/chromium``, driven by playwright; never a downloaded browser) logs in with a
reviewer key, filters the queue, opens an item, claims it, picks a tier with a key, resolves two
items and opens the agreement page, taking ``ui-queue.png``, ``ui-item.png`` and
``ui-agreement.png`` on the way. Nothing leaves this machine.
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the tests' server helper, as the service benchmarks use it

from tests.live_service import serve_process  # noqa: E402

import evidex  # noqa: E402
from evidex.store import open_store  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"]
QUERIES = {
    "How much vitamin D does an adult need each day?": [
        {
            "passage_id": "nih-fact",
            "title": "Vitamin D fact sheet",
            "text": "Adults need 600 IU of vitamin D each day. After age 70 the recommended "
            "amount rises to 800 IU.",
        },
        {
            "passage_id": "who-2023",
            "title": "Dietary reference intakes",
            "text": "The daily amount of vitamin D an adult needs is 600 IU (15 micrograms); "
            "most people get some from sunlight and fortified foods.",
        },
        {
            "passage_id": "blog-sun",
            "title": "Sunlight and you",
            "text": "Ten minutes of midday sun may be enough for fair-skinned people in summer.",
        },
        {
            "passage_id": "calcium",
            "title": "Bone health",
            "text": "Vitamin D helps the body absorb calcium, which keeps bones strong.",
        },
    ],
    "Can vitamin D supplements prevent colds?": [
        {
            "passage_id": "trial-2017",
            "title": "Supplement trials",
            "text": "Vitamin D supplements can prevent colds: daily supplements reduced colds "
            "and other respiratory infections in a 2017 meta-analysis, mostly in people who "
            "were deficient.",
        },
        {
            "passage_id": "cold-care",
            "title": "Treating a cold",
            "text": "Rest and fluids are the usual advice for a common cold.",
        },
    ],
}


def seed(db: str) -> str:
    """Route review items with a real high-risk tier run; returns a reviewer key."""
    store = open_store(db)
    for query, passages in QUERIES.items():
        evidex.tier(query, passages, judge="local:minilm", store=store, risk="high")
    _, secret = store.create_key("reviewer", "ana")
    store.close()
    return secret


def shoot(base: str, secret: str, out: Path) -> None:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 860})
        page.goto(f"{base}/ui/login")
        page.fill("#key", secret)
        page.click("button[type=submit]")
        page.wait_for_url(f"{base}/ui/")

        page.check('fieldset[data-facet="reason"] input[value="high risk"]')
        page.click("aside.filters button[type=submit]")
        page.wait_for_url(re.compile(r".*reason=high\+risk.*"))
        page.screenshot(path=str(out / "ui-queue.png"), full_page=True)

        page.keyboard.press("j")
        page.keyboard.press("Enter")
        page.wait_for_url(re.compile(r".*/ui/item/\d+.*"))
        page.click("text=Claim it (work on it)")
        page.wait_for_selector("text=Claimed by you")
        page.keyboard.press("2")
        page.fill("#note", "background: the dose is for adults under 70 only")
        page.focus('input[name="verdict"][data-key="2"]')
        page.screenshot(path=str(out / "ui-item.png"), full_page=True)
        page.keyboard.press("Enter")
        page.wait_for_selector("text=Resolved item")

        page.keyboard.press("a")  # the next item of the filter: confirm the judge's tier
        page.click("#note")
        page.keyboard.press("Control+Enter")
        page.wait_for_selector("text=Resolved item")

        page.goto(f"{base}/ui/agreement")
        page.wait_for_selector('tr[data-job="tier"]')
        page.screenshot(path=str(out / "ui-agreement.png"), full_page=True)
        browser.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "screenshots")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        db = f"sqlite:///{Path(tmp) / 'review.db'}"
        secret = seed(db)
        with serve_process(db, env={"EVIDEX_DB": db}) as base:
            shoot(base, secret, args.out)
    for name in ("ui-queue", "ui-item", "ui-agreement"):
        print(args.out / f"{name}.png")


if __name__ == "__main__":
    main()
