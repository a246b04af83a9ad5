"""A reviewer's page time per review item, in a real headless Chromium, keyboard only.

    nice python bench/review_throughput.py [--items 50] [--server process|thread] [--backlog 0]
                                           [--no-write]

For each job (tier, rerank, classify, audit, sufficiency) ``--items`` distinct routed items
(plus one, so the last timed resolve lands on an item page too) are raised in a fresh SQLite
store by real job runs on the tests' scripted judge (``tests.scripted.ScriptedJudge``), each
run with its own query or question so no two are deduplicated: routed by high risk (tier,
classify, audit), by the grounding check (rerank) or by low confidence (sufficiency), so every
item carries a judge grade. The service runs on loopback as ``evidex serve`` in its own
process (``--server thread``: the tests' in-process uvicorn instead); Debian's
``/usr/bin/chromium`` is driven by playwright with the browser tests' flags, at 1280×800. A
reviewer key logs in through ``/ui/login``. ``--backlog N`` leaves N more pending tier items
in the queue, raised after every worked item (so never landed on): the item page and the
resolve each read the whole pending queue (for the filters' counts and the next item), so the
page time grows with the queue.

Per job the first item is opened with ``page.goto(/ui/item/ID?job=JOB)`` (its load is
reported apart); then each item is worked with scripted keystrokes only: ``a`` (confirm the
judge's grade), ``Ctrl+Enter`` (resolve). An audit item whose policy said "review" has no
verdict for ``a`` to confirm, so its flow is ``a`` (the claim statuses), ``1`` (publish),
``Ctrl+Enter``. The resolve posts the form and the server answers 303 to the next
pending item of the job, so one timed interval per item runs from the first keystroke on a
loaded item page to the ``load`` event of the next item's page: the item's resolve plus one
page load (page time; the bench's own checks between items are not in it). Each interval is
split with the new page's Navigation Timing: the resolve POST (``redirectStart`` to
``redirectEnd``), the next page's GET (``fetchStart`` to ``responseEnd``) and its parsing with
``ui.css``/``ui.js`` until ``load``.

Checked after each item, outside the timing: the store holds the item as resolved with the
judge's grade (audit: ``publish`` with the judge's claim statuses), and the browser landed on
the next item with the "Resolved item N." notice. Reloads: every main-frame navigation and
every document request is counted per item, and the new document's navigation type is read;
one navigation (the form's POST and its redirected GET) and type ``navigate`` is the expected
form-post flow; more navigations, or a ``reload`` type, would be an extra full page reload.
Reported per job: median, p90 and mean seconds per item against the target (median <= 1.5 s).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import evidex
from evidex.jobs.sufficiency import sufficiency
from evidex.service import create_app
from evidex.store import SqlStore, open_store

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the tests' helpers

from tests import audit_fixtures as af
from tests import classify_fixtures as cf
from tests.live_service import serve_app, serve_process
from tests.review_items import FAST, PASSAGES, QUERY
from tests.scripted import ScriptedJudge, rank_reply, tier_reply
from tests.test_sufficiency import PASSAGES as SUFFICIENCY_PASSAGES
from tests.test_sufficiency import QUERY as SUFFICIENCY_QUERY
from tests.test_sufficiency import lacking
from tests.test_ui_browser import CHROMIUM, CHROMIUM_ARGS
from tests.test_ui_decide_browser import CONFIRMED

from _report import write_section

TARGET_S = 1.5
JOBS = ("tier", "rerank", "classify", "audit", "sufficiency")
VIEWPORT = {"width": 1280, "height": 800}

# ---------------------------------------------------------------------------- items


def _routed_run(store: SqlStore, job: str, i: int) -> list[int]:
    """The review items of one routed run of ``job``, its input varied by ``i``."""
    run: dict[str, Any] = {"store": store, "settings": FAST}
    if job == "tier":
        result: Any = evidex.tier(
            f"{QUERY} (case {i})",
            PASSAGES[:1],
            judge=ScriptedJudge([tier_reply]),
            risk="high",
            **run,
        )
    elif job == "rerank":
        relevant = functools.partial(tier_reply, tier="contextually-relevant")
        judge = ScriptedJudge([rank_reply(["nih-fact", "who-2023"]), relevant])
        result = evidex.rerank(
            f"{QUERY} (case {i})",
            PASSAGES,
            judge=judge,
            strategy="allpairs",
            top_k=2,
            check_grounding=True,
            **run,
        )
    elif job == "classify":
        judge = ScriptedJudge([cf.reply(cf.label(confidence=0.5))])
        result = evidex.classify(
            f"{cf.INPUT} Order {1000 + i}.",
            cf.PASSAGES,
            cf.TAXONOMY,
            judge=judge,
            risk="high",
            **run,
        )
    elif job == "audit":
        judge = ScriptedJudge([af.reply(af.supported(), af.inferred())])
        result = evidex.audit(
            f"{af.FOUNDED} {af.CEO}",
            af.PASSAGES,
            question=f"{af.QUESTION} (case {i})",
            judge=judge,
            risk="high",
            **run,
        )
    else:
        result = sufficiency(
            f"{SUFFICIENCY_QUERY} (case {i})",
            SUFFICIENCY_PASSAGES,
            judge=ScriptedJudge([lacking(0.6)]),
            store=store,
        )
    return list(result.review_item_ids)


def raise_routed(store: SqlStore, job: str, count: int) -> list[int]:
    """``count`` distinct routed items of ``job`` (one per run), in id order."""
    ids: list[int] = []
    for i in range(count):
        got = _routed_run(store, job, i)
        if len(got) != 1:
            raise SystemExit(f"{job} run {i} raised {len(got)} review items, not 1")
        ids += got
    if len(set(ids)) != count:
        raise SystemExit(f"{job}: {count} runs raised only {len(set(ids))} distinct items")
    return sorted(ids)


# ---------------------------------------------------------------------------- the browser

_TIMING = """() => {
  const n = performance.getEntriesByType('navigation')[0];
  const res = performance.getEntriesByType('resource').map(r => r.name.split('/').pop());
  return {type: n.type, redirects: n.redirectCount, redirect: n.redirectEnd - n.redirectStart,
          fetch: n.responseEnd - n.fetchStart, load: n.loadEventEnd - n.responseEnd,
          total: n.loadEventEnd, bytes: n.transferSize, resources: res};
}"""


@dataclass
class Job:
    name: str
    first_load_s: float = 0.0
    seconds: list[float] = field(default_factory=list)
    resolve_s: list[float] = field(default_factory=list)
    fetch_s: list[float] = field(default_factory=list)
    load_s: list[float] = field(default_factory=list)
    navigations: list[int] = field(default_factory=list)
    documents: list[int] = field(default_factory=list)
    assets: list[int] = field(default_factory=list)
    cached: list[int] = field(default_factory=list)
    types: set[str] = field(default_factory=set)
    page_bytes: list[int] = field(default_factory=list)


@contextmanager
def service(db: str, kind: str) -> Iterator[str]:
    if kind == "process":
        with serve_process(db, env={"EVIDEX_CONFIG": os.devnull}) as base:
            yield base
        return
    store = open_store(db)
    try:
        with serve_app(create_app(store, allowed_hosts=["127.0.0.1"])) as base:
            yield base
    finally:
        store.close()


def _keys(job: str) -> list[str]:
    """The keystrokes before the final Ctrl+Enter that resolves."""
    if job == "audit":  # the policy left the verdict open: `1` chooses publish
        return ["a", "1"]
    return ["a"]


def work_job(page: Any, base: str, store: SqlStore, job: str, ids: list[int], n: int) -> Job:
    out = Job(job)
    counts = {"nav": 0, "doc": 0, "asset": 0, "cached": 0}
    main = page.main_frame
    # the browser's own account of which requests its cache answered (no network round trip)
    cdp = page.context.new_cdp_session(page)
    cdp.send("Network.enable")
    cdp.on(
        "Network.requestServedFromCache",
        lambda _: counts.__setitem__("cached", counts["cached"] + 1),
    )

    def on_nav(frame: Any) -> None:
        if frame == main:
            counts["nav"] += 1

    def on_request(request: Any) -> None:
        if request.resource_type == "document":
            counts["doc"] += 1
        elif "/ui/static/" in request.url:
            counts["asset"] += 1

    page.on("framenavigated", on_nav)
    page.on("request", on_request)
    started = time.perf_counter()
    page.goto(f"{base}/ui/item/{ids[0]}?job={job}", wait_until="load")
    out.first_load_s = time.perf_counter() - started
    try:
        for at, item in enumerate(ids[:n]):
            if not page.url.split("?")[0].endswith(f"/ui/item/{item}"):
                raise SystemExit(f"{job}: expected item {item}, the browser is at {page.url}")
            page.evaluate("() => { window.__bench = 1; }")
            counts.update(nav=0, doc=0, asset=0, cached=0)
            started = time.perf_counter()
            for key in _keys(job):
                page.keyboard.press(key)
            with page.expect_navigation(wait_until="load"):
                page.keyboard.press("Control+Enter")
            out.seconds.append(time.perf_counter() - started)
            out.navigations.append(counts["nav"])
            out.documents.append(counts["doc"])
            out.assets.append(counts["asset"])
            out.cached.append(counts["cached"])
            timing = page.evaluate(_TIMING)
            if page.evaluate("() => window.__bench === 1"):
                raise SystemExit(f"{job}: item {item}: the page did not change")
            out.types.add(timing["type"])
            out.resolve_s.append(timing["redirect"] / 1000)
            out.fetch_s.append(timing["fetch"] / 1000)
            out.load_s.append(timing["load"] / 1000)
            out.page_bytes.append(int(timing["bytes"]))
            review = store.get_review(item)
            decision = review["decision"]
            got = json.loads(decision) if job == "audit" else decision
            if review["status"] != "resolved" or got != CONFIRMED[job]:
                raise SystemExit(f"{job}: item {item} is {review['status']}: {decision!r}")
            if f"Resolved item {item}." not in page.inner_text("main"):
                raise SystemExit(f"{job}: no 'Resolved item {item}.' notice at {page.url}")
            if at + 1 < len(ids) and not page.url.split("?")[0].endswith(f"/{ids[at + 1]}"):
                raise SystemExit(f"{job}: after {item} the browser is at {page.url}")
    finally:
        page.remove_listener("framenavigated", on_nav)
        page.remove_listener("request", on_request)
    return out


# ---------------------------------------------------------------------------- report


def p90(values: Sequence[float]) -> float:
    return statistics.quantiles(values, n=10, method="inclusive")[-1]


def _ms(values: Sequence[float]) -> str:
    return f"{statistics.median(values) * 1000:.0f}"


def table(jobs: Sequence[Job]) -> str:
    rows = []
    for j in jobs:
        s = j.seconds
        met = "met" if statistics.median(s) <= TARGET_S else "not met"
        rows.append(
            f"| {j.name} | {len(s)} | {statistics.median(s):.3f} | {p90(s):.3f} | "
            f"{statistics.mean(s):.3f} | {max(s):.3f} | {_ms(j.resolve_s)} | {_ms(j.fetch_s)} | "
            f"{_ms(j.load_s)} | {j.first_load_s:.3f} | {met} |"
        )
    return (
        "| job | items | median s | p90 s | mean s | max s | resolve POST ms (median) | "
        "next page GET ms | parse + assets to load ms | first goto s | median <= 1.5 s |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|\n" + "\n".join(rows)
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=50, help="timed items per job")
    parser.add_argument("--server", choices=["process", "thread"], default="process")
    parser.add_argument(
        "--backlog", type=int, default=0, help="extra pending items left in the queue (not worked)"
    )
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args(argv)
    if not CHROMIUM.exists():
        raise SystemExit(f"no Chromium at {CHROMIUM} (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    say: Callable[[str], None] = functools.partial(print, file=sys.stderr, flush=True)
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        db = f"sqlite:///{Path(tmp) / 'review.db'}"
        store = open_store(db)
        started = time.perf_counter()
        ids = {job: raise_routed(store, job, args.items + 1) for job in JOBS}
        for i in range(args.backlog):  # later ids than every worked item: never landed on
            _routed_run(store, "tier", 1_000_000 + i)
        raised = sum(map(len, ids.values())) + args.backlog
        say(f"raised {raised} items in {time.perf_counter() - started:.1f} s")
        _, secret = store.create_key("reviewer", "bench-reviewer")
        results: list[Job] = []
        with service(db, args.server) as base, sync_playwright() as p:
            browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
            try:
                context = browser.new_context(viewport=VIEWPORT)
                page = context.new_page()
                page.goto(f"{base}/ui/login")
                page.fill("#key", secret)
                page.click("button[type=submit]")
                page.wait_for_url(f"{base}/ui/")
                # one untimed look at an item: the server's templates and the browser warm up
                page.goto(f"{base}/ui/item/{ids['tier'][-1]}", wait_until="load")
                for job in JOBS:
                    result = work_job(page, base, store, job, ids[job], args.items)
                    results.append(result)
                    say(
                        f"{job}: median {statistics.median(result.seconds):.3f} s, "
                        f"p90 {p90(result.seconds):.3f} s over {len(result.seconds)} items"
                    )
                    load = max(load, os.getloadavg()[0])
                context.close()
            finally:
                browser.close()
        store.close()
    every = [s for j in results for s in j.seconds]
    navs = {n for j in results for n in j.navigations}
    docs = {n for j in results for n in j.documents}
    assets = {n for j in results for n in j.assets}
    cached = {n for j in results for n in j.cached}
    types = set().union(*(j.types for j in results))
    reloads = navs != {1} or types != {"navigate"}
    page_kb = statistics.median([b for j in results for b in j.page_bytes]) / 1024
    verdict = "met" if all(statistics.median(j.seconds) <= TARGET_S for j in results) else "not met"
    body = (
        f"A reviewer's page time per routed review item, keyboard only, in headless Chromium "
        f"(Debian's, via playwright, 1280×800) against `evidex serve` on loopback "
        f"(`--server {args.server}`), SQLite store holding {raised} pending items at the "
        f"start. Per item: from the first keystroke on the loaded item page (`a`, then "
        f"`Ctrl+Enter`; audit: `a`, `1` for publish, `Ctrl+Enter`) to the `load` event of the "
        f"next item's page, which the "
        f"resolve redirects to: one resolve plus one page load (see the script's docstring). "
        f"Load average up to {load:.1f} on {os.cpu_count()} cores while measuring (other work "
        f"shared the machine).\n\n" + table(results) + "\n\n"
        f"All {len(every)} items: median {statistics.median(every):.3f} s, p90 {p90(every):.3f} "
        f"s, mean {statistics.mean(every):.3f} s; every item resolved with the judge's grade "
        f"and the browser on the next item.\n\n"
        f"Page reloads between items: {'yes' if reloads else 'none beyond the form post'}. "
        f"Counted per item: main-frame navigations {sorted(navs)}, document requests "
        f"{sorted(docs)} (the POST and its redirected GET), navigation types {sorted(types)}; "
        f"each item is a new document (a marker set on the page was gone), as a server-rendered "
        f"form post is: `ui.css` and `ui.js` are asked for by every item page "
        f"({sorted(assets)} per item), and the browser's cache answered {sorted(cached)} of "
        f"them per item (they are served cacheable under a content digest), "
        f"the item page itself about {page_kb:.0f} KiB.\n\n"
        f"Target: median <= {TARGET_S:g} s of page time per item, each job: {verdict}."
    )
    print(body)
    if not args.no_write:
        write_section("review_throughput", "Review UI: page time per item, keyboard only", body)
    return 0


if __name__ == "__main__":
    sys.exit(main())
