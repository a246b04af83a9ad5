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
``Ctrl+Enter``. The page's script posts the decision with ``fetch`` asking for a fragment;
the server answers 303 to the next pending item of the job, whose fragment (its ``<main>``
and key legend) the script swaps into the page, moving the address with ``pushState``. One
timed interval per item runs from the first keystroke on a loaded item page to the script's
``evidex:swapped`` event, when the next item is in place: the item's resolve plus the next
item's page (page time; the bench's own checks between items are not in it). Each interval is
split with the fetch's Resource Timing: the request (the POST, its redirect and the next
item's GET, ``startTime`` to ``responseEnd``) and the rest (reading, parsing and swapping in
the fragment, and the browser's layout of it).

Checked after each item, outside the timing: the store holds the item as resolved with the
judge's grade (audit: ``publish`` with the judge's claim statuses), and the browser shows the
next item with the "Resolved item N." notice at its address. Reloads: every document request
and every main-frame navigation that is not the script's ``pushState`` is counted per item,
and a marker set on the page must still be there: a document request, or a lost marker, would
be a full page load. Reported per job: median, p90 and mean seconds per item against the
target (median <= 1.5 s).
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
from urllib.parse import urlsplit

import evidex
from evidex.jobs.sufficiency import sufficiency
from evidex.review_policy import ReviewSettings
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

_ARM = """() => {
  performance.clearResourceTimings();
  window.__swapped = new Promise(done => document.addEventListener(
    'evidex:swapped', () => done(performance.now()), {once: true}));
  document.addEventListener('keydown', () => { window.__started = performance.now(); },
                            {once: true, capture: true});
}"""
"""Before an item's first keystroke: a promise of the swap's moment, and the moment the first
key arrives."""

_TIMING = """async () => {
  const swapped = await window.__swapped;
  const fetches = performance.getEntriesByType('resource')
    .filter(r => r.initiatorType === 'fetch');
  const f = fetches[fetches.length - 1];
  return {total: swapped - window.__started, fetch: f.responseEnd - f.startTime,
          rest: swapped - f.responseEnd, bytes: f.transferSize || f.encodedBodySize,
          fetches: fetches.length};
}"""
"""After the keystrokes: when the next item was in place, and the fetch's share of it."""


@dataclass
class Job:
    name: str
    first_load_s: float = 0.0
    seconds: list[float] = field(default_factory=list)
    in_page_s: list[float] = field(default_factory=list)
    fetch_s: list[float] = field(default_factory=list)
    swap_s: list[float] = field(default_factory=list)
    navigations: list[int] = field(default_factory=list)
    documents: list[int] = field(default_factory=list)
    requests: list[int] = field(default_factory=list)
    assets: list[int] = field(default_factory=list)
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
    counts = {"nav": 0, "doc": 0, "req": 0, "asset": 0}
    main = page.main_frame
    pushed = {"path": ""}

    def on_nav(frame: Any) -> None:
        # the script's pushState is a same-document navigation to the item it swapped in
        if frame == main and urlsplit(frame.url).path != pushed["path"]:
            counts["nav"] += 1

    def on_request(request: Any) -> None:
        if request.resource_type == "document":
            counts["doc"] += 1
        elif "/ui/static/" in request.url:
            counts["asset"] += 1
        else:
            counts["req"] += 1

    started = time.perf_counter()
    page.goto(f"{base}/ui/item/{ids[0]}?job={job}", wait_until="load")
    out.first_load_s = time.perf_counter() - started
    page.on("framenavigated", on_nav)
    page.on("request", on_request)
    try:
        for at, item in enumerate(ids[:n]):
            if not page.url.split("?")[0].endswith(f"/ui/item/{item}"):
                raise SystemExit(f"{job}: expected item {item}, the browser is at {page.url}")
            page.evaluate("() => { window.__bench = 1; }")
            page.evaluate(_ARM)
            counts.update(nav=0, doc=0, req=0, asset=0)
            following = ids[at + 1] if at + 1 < len(ids) else None
            pushed["path"] = f"/ui/item/{following}"
            started = time.perf_counter()
            for key in _keys(job):
                page.keyboard.press(key)
            page.keyboard.press("Control+Enter")
            timing = page.evaluate(_TIMING)
            out.seconds.append(time.perf_counter() - started)
            out.in_page_s.append(timing["total"] / 1000)
            out.fetch_s.append(timing["fetch"] / 1000)
            out.swap_s.append(timing["rest"] / 1000)
            out.page_bytes.append(int(timing["bytes"]))
            out.navigations.append(counts["nav"])
            out.documents.append(counts["doc"])
            out.requests.append(counts["req"])
            out.assets.append(counts["asset"])
            if page.evaluate("() => window.__bench") != 1:
                raise SystemExit(f"{job}: item {item}: the page was loaded anew")
            review = store.get_review(item)
            decision = review["decision"]
            got = json.loads(decision) if job == "audit" else decision
            if review["status"] != "resolved" or got != CONFIRMED[job]:
                raise SystemExit(f"{job}: item {item} is {review['status']}: {decision!r}")
            if f"Resolved item {item}." not in page.inner_text("main"):
                raise SystemExit(f"{job}: no 'Resolved item {item}.' notice at {page.url}")
            if following is not None and not page.url.split("?")[0].endswith(f"/{following}"):
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
            f"{statistics.mean(s):.3f} | {max(s):.3f} | {_ms(j.in_page_s)} | {_ms(j.fetch_s)} | "
            f"{_ms(j.swap_s)} | {j.first_load_s:.3f} | {met} |"
        )
    return (
        "| job | items | median s | p90 s | mean s | max s | in the page ms (median) | "
        "resolve + next fragment fetch ms | read, parse, swap ms | first goto s | "
        "median <= 1.5 s |\n"
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
        store = open_store(db, review=ReviewSettings())  # one decision per item
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
    requests = {n for j in results for n in j.requests}
    assets = {n for j in results for n in j.assets}
    reloads = navs != {0} or docs != {0}
    page_kb = statistics.median([b for j in results for b in j.page_bytes]) / 1024
    verdict = "met" if all(statistics.median(j.seconds) <= TARGET_S for j in results) else "not met"
    body = (
        f"A reviewer's page time per routed review item, keyboard only, in headless Chromium "
        f"(Debian's, via playwright, 1280×800) against `evidex serve` on loopback "
        f"(`--server {args.server}`), SQLite store holding {raised} pending items at the "
        f"start. Per item: from the first keystroke on the loaded item page (`a`, then "
        f"`Ctrl+Enter`; audit: `a`, `1` for publish, `Ctrl+Enter`) until the next item is in "
        f"place: the page's script posts the decision, follows the server's redirect to the "
        f"next item's fragment and swaps it in (see the script's docstring). The seconds "
        f"columns are measured from the bench's side (keystrokes sent over playwright "
        f"included); \"in the page\" is the browser's own clock from the first keystroke's "
        f"arrival to the swap. "
        f"Load average up to {load:.1f} on {os.cpu_count()} cores while measuring (other work "
        f"shared the machine).\n\n" + table(results) + "\n\n"
        f"All {len(every)} items: median {statistics.median(every):.3f} s, p90 {p90(every):.3f} "
        f"s, mean {statistics.mean(every):.3f} s; every item resolved with the judge's grade "
        f"and the browser on the next item.\n\n"
        f"Page reloads between items: {'yes' if reloads else 'none'}. Counted per item: "
        f"document requests {sorted(docs)}, main-frame navigations other than the script's "
        f"pushState {sorted(navs)}, other requests {sorted(requests)} (the POST and its "
        f"redirected GET of the fragment), requests for `ui.css`/`ui.js` {sorted(assets)}; a "
        f"marker set on the page survived every item. The fragment of an item is about "
        f"{page_kb:.0f} KiB.\n\n"
        f"Target: median <= {TARGET_S:g} s of page time per item, each job: {verdict}."
    )
    print(body)
    if not args.no_write:
        write_section("review_throughput", "Review UI: page time per item, keyboard only", body)
    return 0


if __name__ == "__main__":
    sys.exit(main())
