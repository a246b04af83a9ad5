"""The tier job through the ``openai:`` judge against llama-cpp-python's server on the shipped
Qwen2.5-Coder-1.5B weights: how many passages fall back, with and without splitting a batch
whose replies never validate.

    python bench/small_model_batches.py [--data ../shared/data] [--queries 10] [--per-query 10]
        [--arms split10,fixed10,fixed5] [--timeout 900] [--no-write]

The server (``python -m llama_cpp.server``, the ``llm-server`` extra) is started here on a free
loopback port and stopped at the end. ``--queries`` TREC DL 2019 queries are drawn (seeded),
and ``--per-query`` of each one's NIST-judged passages (seeded, uniform), so that one query is
one batch of 10 at the default batch size. Each arm tiers every query, cache off:

- ``split10``: the defaults (batch 10; a failing batch is split down to one passage, and the
  batch size follows the judge's replies);
- ``fixed10``: batch 10, neither split nor adapted (what the harness did before);
- ``fixed5``: batch 5, neither (the kappa to match).

For each arm: the share of passages that fell back, Cohen's kappa over the four grades
against NIST (TREC's grades 3/2/1/0 as the four tiers), the wall time, the judge calls, the
splits and the batch sizes of the replies that validated (from the audit log). Timeouts are
the defaults (a server on loopback: 900 s per request); ``--timeout`` sets the judge's and the
harness's instead. Figures go to docs/benchmarks.md,
section ``small_model_batches``.
"""

from __future__ import annotations

import argparse
import os
import random
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _report import write_section
from evidex import HarnessSettings, Passage, open_store, tier
from evidex.evaluate import datasets
from evidex.evaluate.golden import TierGolden
from evidex.evaluate.metrics import cohen_kappa
from evidex.judges import get_judge
from evidex.judges._qwen import QwenJudge
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


def run_arm(
    arm: str, pairs: list[TierGolden], base_url: str, timeout: float | None, out: Path
) -> dict[str, Any]:
    batch_size, adapt, _ = ARMS[arm]
    store = open_store(f"sqlite:///{out / f'{arm}.db'}")
    options = {} if timeout is None else {"timeout_s": timeout}
    judge = get_judge("openai:qwen", base_url=base_url, **options)
    settings = HarnessSettings(
        timeout_s=timeout, use_cache=False, split_batches=adapt, adapt_batch_size=adapt
    )
    by_query: dict[str, list[TierGolden]] = defaultdict(list)
    for pair in pairs:
        by_query[pair.query].append(pair)
    gold, pred, sources = [], [], Counter[str]()
    calls = 0
    per_query_s = []
    started = time.perf_counter()
    for number, (query, group) in enumerate(by_query.items(), 1):
        began = time.perf_counter()
        result = tier(
            query,
            [Passage(passage_id=p.passage_id, text=p.text) for p in group],
            judge=judge,
            store=store,
            settings=settings,
            batch_size=batch_size,
        )
        per_query_s.append(time.perf_counter() - began)
        by_id = {a.passage_id: a for a in result.classifications}
        for p in group:
            gold.append(p.tier)
            pred.append(by_id[p.passage_id].tier)
            sources[by_id[p.passage_id].source] += 1
        calls += result.judge_calls
        print(
            f"  {arm} query {number}/{len(by_query)}: {per_query_s[-1]:.0f} s, "
            f"{sum(a.source == 'fallback' for a in result.classifications)} fell back",
            flush=True,
        )
    wall = time.perf_counter() - started
    rows = store.audit_rows()
    sizes = Counter(len(r["labels"] or {}) for r in rows if r["status"] == "ok")
    store.close()
    total = sum(sources.values())
    return {
        "arm": arm,
        "fallback": sources["fallback"] / total,
        "fallbacks": sources["fallback"],
        "total": total,
        "kappa": cohen_kappa(gold, pred, list(DEFAULT_TIERS.names)),
        "wall_s": wall,
        "median_query_s": sorted(per_query_s)[len(per_query_s) // 2],
        "calls": calls,
        "splits": sum(r["status"] == "split" for r in rows),
        "timeouts": sum(
            r["status"] == "error" and "did not answer" in " ".join(r["errors"] or []) for r in rows
        ),
        "sizes": dict(sorted(sizes.items(), reverse=True)),
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
    args = parser.parse_args()
    arms = args.arms.split(",")
    unknown = [a for a in arms if a not in ARMS]
    if unknown:
        parser.error(f"unknown arm(s) {unknown}; choose from {sorted(ARMS)}")

    pairs = sample(
        datasets.trec_dl_tier(args.data / "trec-dl-2019"), args.queries, args.per_query, args.seed
    )
    out = Path(tempfile.mkdtemp(prefix="evidex-small-model-"))
    model = QwenJudge().model_path()
    process, base_url = start_server(model, args.threads, args.n_ctx, out / "server.log")
    load = os.getloadavg()[0]
    results = []
    try:
        for arm in arms:
            print(f"{arm}: {ARMS[arm][2]}", flush=True)
            results.append(run_arm(arm, pairs, base_url, args.timeout, out))
    finally:
        process.terminate()
        process.wait(timeout=30)

    queries = len({p.query for p in pairs})
    lines = [
        f"llama-cpp-python's server (the shipped Qwen2.5-Coder-1.5B Q4_K_M, {args.threads} "
        f"threads, n_ctx {args.n_ctx}) behind `openai:qwen`; TREC DL 2019, {queries} queries × "
        f"{args.per_query} NIST-judged passages (seed {args.seed}); cache off; timeouts "
        + ("the defaults" if args.timeout is None else f"{args.timeout:g} s per call")
        + f"; load average {load:.1f} at start.",
        "",
        "| arm | fell back | kappa (4 grades, NIST) | wall | median per query | judge calls "
        "| splits | timeouts | sizes of validated replies (size: count) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        lines.append(
            f"| {ARMS[r['arm']][2]} | {r['fallback']:.1%} ({r['fallbacks']}/{r['total']}) "
            f"| {r['kappa']:.3f} | {r['wall_s']:.0f} s | {r['median_query_s']:.0f} s "
            f"| {r['calls']} | {r['splits']} | {r['timeouts']} | {r['sizes']} |"
        )
    by_arm = {r["arm"]: r for r in results}
    if "split10" in by_arm and "fixed10" in by_arm:
        ratio = by_arm["split10"]["wall_s"] / by_arm["fixed10"]["wall_s"]
        lines += ["", f"Wall time, split / no split at batch 10: {ratio:.2f}×."]
    text = "\n".join(lines)
    print(text)
    if not args.no_write:
        title = "Small model: splitting failing batches (tier, openai: → llama-cpp server)"
        write_section("small_model_batches", title, text)


if __name__ == "__main__":
    main()
