"""The tier job through the ``openai:`` judge against llama-cpp-python's server on the shipped
Qwen2.5-Coder-1.5B weights: how many passages fall back, with and without splitting a batch
whose replies never validate.

    python bench/small_model_batches.py [--data ../shared/data] [--queries 10] [--per-query 10]
        [--arms split10,fixed10,fixed5] [--timeout 900] [--section NAME] [--no-write]

The server (``python -m llama_cpp.server``, the ``llm-server`` extra) is started here on a free
loopback port and stopped at the end. ``--queries`` TREC DL 2019 queries are drawn (seeded),
and ``--per-query`` of each one's NIST-judged passages (seeded, uniform), so that one query is
one batch of 10 at the default batch size. Each arm tiers every query, cache off, the arms
taking turns per query (so that the machine's load, shared with others, falls on each alike;
the arm going first rotates, and before each arm's turn a one-token request for another query
clears the passages from the server's cached prompt, which would otherwise give the next arm
them for free):

- ``split10``: the defaults (batch 10; a failing batch is split down to one passage, and the
  batch size follows the judge's replies);
- ``fixed10``: batch 10, neither split nor adapted (what the harness did before);
- ``fixed5``: batch 5, neither (the kappa to match).

For each arm: the share of passages that fell back, Cohen's kappa over the four grades
against NIST (TREC's grades 3/2/1/0 as the four tiers) with a 95% bootstrap interval over the
queries, the wall time (its queries' times added up), the judge calls, the splits, the calls
given up (stalled, or past a whole-call limit), the sizes of the batches sent and of the
replies that validated (from the audit log); the paired bootstrap interval of the kappa
difference between the default arm and a fixed batch of 5; the default arm's deadlines at the
end. Timeouts are the defaults (the judge's deadlines, derived from its measured replies);
``--timeout`` sets a whole-call limit for the judge and the harness instead. Figures go to
docs/benchmarks.md, section ``small_model_batches`` (``--section`` names another, so a run of
some arms does not replace a run of all three).
"""

from __future__ import annotations

import argparse
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _report import write_section
from evidex import HarnessSettings, Passage, open_store, tier
from evidex.evaluate import datasets
from evidex.evaluate.golden import TierGolden
from evidex.evaluate.metrics import bootstrap_ci, cohen_kappa
from evidex.judges import get_judge
from evidex.judges._qwen import QwenJudge
from evidex.tasks.tier import DEFAULT_EXAMPLES, TierBatch, TierStep
from evidex.types import DEFAULT_TIERS

ROOT = Path(__file__).resolve().parent.parent
ARMS = {
    "split10": (10, True, "batch 10, split and adapted (default)"),
    "fixed10": (10, False, "batch 10, fixed, no split"),
    "fixed5": (5, False, "batch 5, fixed, no split"),
}


def sample(records: list[TierGolden], queries: int, per_query: int, seed: int) -> list[TierGolden]:
    by_query: dict[str, list[TierGolden]] = defaultdict(list)
    for record in records:
        by_query[record.query_id or record.query].append(record)
    rng = random.Random(seed)
    eligible = sorted(q for q, pairs in by_query.items() if len(pairs) >= per_query)
    chosen = rng.sample(eligible, min(queries, len(eligible)))
    return [r for q in chosen for r in rng.sample(by_query[q], per_query)]


def start_server(model: Path, threads: int, n_ctx: int, log: Path) -> tuple[Any, str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    command = [
        sys.executable, "-m", "llama_cpp.server", "--model", str(model),
        "--model_alias", "qwen", "--host", "127.0.0.1", "--port", str(port),
        "--n_ctx", str(n_ctx), "--n_threads", str(threads),
    ]  # fmt: skip
    with log.open("wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}/v1"
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"llama_cpp.server exited:\n{log.read_text()[-2000:]}")
        try:
            if httpx.get(f"{base}/models", timeout=2).status_code == 200:
                return process, base
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    process.kill()
    raise SystemExit("llama_cpp.server did not start within 180 s")


@dataclass
class Arm:
    """One arm's judge, store and figures, kept across the queries it is run on."""

    name: str
    judge: Any
    store: Any
    settings: HarnessSettings
    gold: list[str] = field(default_factory=list)
    pred: list[str] = field(default_factory=list)
    sources: Counter[str] = field(default_factory=Counter)
    calls: int = 0
    per_query_s: list[float] = field(default_factory=list)
    per_query: list[tuple[list[str], list[str]]] = field(default_factory=list)
    """Each query's (NIST grades, predicted tiers), for the bootstrap over queries."""


def make_arm(name: str, base_url: str, timeout: float | None, out: Path) -> Arm:
    _, adapt, _ = ARMS[name]
    options = {} if timeout is None else {"timeout_s": timeout}
    return Arm(
        name=name,
        judge=get_judge("openai:qwen", base_url=base_url, **options),
        store=open_store(f"sqlite:///{out / f'{name}.db'}"),
        settings=HarnessSettings(
            timeout_s=timeout, use_cache=False, split_batches=adapt, adapt_batch_size=adapt
        ),
    )


def run_query(arm: Arm, group: list[TierGolden]) -> None:
    began = time.perf_counter()
    result = tier(
        group[0].query,
        [Passage(passage_id=p.passage_id, text=p.text) for p in group],
        judge=arm.judge,
        store=arm.store,
        settings=arm.settings,
        batch_size=ARMS[arm.name][0],
    )
    arm.per_query_s.append(time.perf_counter() - began)
    by_id = {a.passage_id: a for a in result.classifications}
    gold = [p.tier for p in group]
    pred = [by_id[p.passage_id].tier for p in group]
    arm.gold += gold
    arm.pred += pred
    arm.per_query.append((gold, pred))
    for p in group:
        arm.sources[by_id[p.passage_id].source] += 1
    arm.calls += result.judge_calls
    fell = sum(a.source == "fallback" for a in result.classifications)
    print(f"    {arm.name}: {arm.per_query_s[-1]:.0f} s, {fell} fell back", flush=True)


def flush_prefix(base_url: str) -> None:
    """One token for a tier prompt of another query: llama.cpp reuses the longest common
    prefix of the prompt it read last, so the next arm reads this query's passages as the
    first arm did instead of getting them almost free, and keeps the instructions and worked
    examples every query shares, as a run of queries does."""
    passage = Passage(passage_id="x", text="x")
    batch = TierBatch("(another query)", (passage,), DEFAULT_TIERS, DEFAULT_EXAMPLES)
    messages = [{"role": m.role, "content": m.content} for m in TierStep().request(batch).messages]
    body = {"model": "qwen", "messages": messages, "max_tokens": 1}
    httpx.post(f"{base_url}/chat/completions", json=body, timeout=3600).raise_for_status()


def kappa(units: Sequence[tuple[list[str], list[str]]]) -> float:
    gold = [g for pair in units for g in pair[0]]
    pred = [p for pair in units for p in pair[1]]
    return cohen_kappa(gold, pred, list(DEFAULT_TIERS.names))


def figures(arm: Arm) -> dict[str, Any]:
    rows = arm.store.audit_rows()
    validated = Counter(len(r["labels"] or {}) for r in rows if r["status"] == "ok")
    # the batches as the run cut them (split parts are rows of batch ids ending .N)
    sent = Counter(
        (r["detail"] or {}).get("items")
        for r in rows
        if r["status"] in ("ok", "invalid", "error")
        and r["attempt"] == 1
        and "." not in str(r["batch_id"]).rpartition("-b")[2]
    )
    errors = [" ".join(r["errors"] or []) for r in rows if r["status"] == "error"]
    total = sum(arm.sources.values())
    interval = bootstrap_ci(arm.per_query, kappa, samples=2000)
    return {
        "arm": arm.name,
        "fallback": arm.sources["fallback"] / total,
        "fallbacks": arm.sources["fallback"],
        "total": total,
        "kappa": interval,
        "wall_s": sum(arm.per_query_s),
        "median_query_s": statistics.median(arm.per_query_s),
        "calls": arm.calls,
        "splits": sum(r["status"] == "split" for r in rows),
        "stalls": sum("stalled" in e or "began no reply" in e for e in errors),
        "timeouts": sum("did not answer" in e for e in errors),
        "errors": len(errors),
        "sent": dict(sorted(((k, v) for k, v in sent.items() if k), reverse=True)),
        "validated": dict(sorted(validated.items(), reverse=True)),
        "pace": arm.judge.pool.endpoints[0].pace.state(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--queries", type=int, default=10)
    parser.add_argument("--per-query", type=int, default=10)
    parser.add_argument("--arms", default="split10,fixed10,fixed5")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--timeout", type=float, default=None)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--n-ctx", type=int, default=8192)
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument(
        "--section", default="small_model_batches", help="the docs/benchmarks.md section"
    )
    args = parser.parse_args()
    names = args.arms.split(",")
    unknown = [a for a in names if a not in ARMS]
    if unknown:
        parser.error(f"unknown arm(s) {unknown}; choose from {sorted(ARMS)}")

    pairs = sample(
        datasets.trec_dl_tier(args.data / "trec-dl-2019"), args.queries, args.per_query, args.seed
    )
    by_query: dict[str, list[TierGolden]] = defaultdict(list)
    for pair in pairs:
        by_query[pair.query].append(pair)
    out = Path(tempfile.mkdtemp(prefix="evidex-small-model-"))
    print(f"audit logs and server log in {out}", flush=True)
    model = QwenJudge().model_path()
    process, base_url = start_server(model, args.threads, args.n_ctx, out / "server.log")
    load_start = os.getloadavg()
    arms = [make_arm(name, base_url, args.timeout, out) for name in names]
    try:
        for number, group in enumerate(by_query.values()):
            # the arms take turns going first, and each starts without the last one's prompt
            turn = arms[number % len(arms) :] + arms[: number % len(arms)]
            print(f"query {number + 1}/{len(by_query)}: {group[0].query}", flush=True)
            for arm in turn:
                flush_prefix(base_url)
                run_query(arm, group)
    finally:
        process.terminate()
        process.wait(timeout=30)
    load_end = os.getloadavg()
    text = report(arms, args, len(by_query), (load_start, load_end))
    print(text)
    if not args.no_write:
        title = "Small model: splitting failing batches (tier, openai: → llama-cpp server)"
        write_section(args.section, title, text)


def report(arms: list[Arm], args: argparse.Namespace, queries: int, load: tuple[Any, Any]) -> str:
    """The section's text: the setup, one row per arm, the ratios and intervals."""
    results = [figures(arm) for arm in arms]
    for arm in arms:
        arm.store.close()
    load_start, load_end = load

    def loads(found: tuple[float, float, float]) -> str:
        return " / ".join(f"{x:.2f}" for x in found)

    lines = [
        f"llama-cpp-python's server (the shipped Qwen2.5-Coder-1.5B Q4_K_M, {args.threads} "
        f"thread(s), n_ctx {args.n_ctx}, its default settings) behind `openai:qwen`; TREC DL "
        f"2019, {queries} queries × {args.per_query} NIST-judged passages (seed "
        f"{args.seed}); cache off; timeouts "
        + ("the defaults" if args.timeout is None else f"{args.timeout:g} s per call")
        + ". The arms are interleaved per query, taking turns to go first, each query of each "
        "arm after a one-token request for another query that clears the passages from the "
        "server's cached prompt. Load average "
        f"(1, 5, 15 min) at start {loads(load_start)}, at end {loads(load_end)}.",
        "",
        "| arm | fell back | kappa (4 grades, NIST) [95% CI over queries] | wall | median "
        "per query | judge calls | splits | stalls / timeouts | batches sent (size: count) | "
        "validated replies (size: count) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        k = r["kappa"]
        lines.append(
            f"| {ARMS[r['arm']][2]} | {r['fallback']:.1%} ({r['fallbacks']}/{r['total']}) "
            f"| {k.value:.3f} [{k.low:.3f}, {k.high:.3f}] | {r['wall_s']:.0f} s "
            f"| {r['median_query_s']:.0f} s | {r['calls']} | {r['splits']} "
            f"| {r['stalls']} / {r['timeouts']} | {r['sent']} | {r['validated']} |"
        )
    by_arm = {arm.name: arm for arm in arms}
    shown = {r["arm"]: r for r in results}
    if "split10" in shown and "fixed10" in shown:
        ratio = shown["split10"]["wall_s"] / shown["fixed10"]["wall_s"]
        lines += ["", f"Wall time, split / no split at batch 10: {ratio:.2f}×."]
    if "split10" in by_arm and "fixed5" in by_arm:
        a, b = by_arm["split10"], by_arm["fixed5"]
        paired = list(zip(a.per_query, b.per_query, strict=True))
        diff = bootstrap_ci(paired, lambda u: kappa([x for x, _ in u]) - kappa([y for _, y in u]))
        lines.append(
            f"Kappa, split and adapted minus fixed batch of 5: {diff.value:+.3f} (95% CI "
            f"{diff.low:+.3f} to {diff.high:+.3f}, paired bootstrap over the queries)."
        )
    if "split10" in shown:
        pace = shown["split10"]["pace"]
        lines.append(
            f"The default arm's deadlines at the end, derived from {pace['measured']} measured "
            f"replies: first token {pace['first_token_s']:.0f} s, idle gap {pace['idle_s']:.0f} s."
        )
    return "\n".join(lines)


if __name__ == "__main__":
    main()
