"""Tier agreement of an LLM judge (default ``local:qwen``) on LLMJudge dev, beside ``local:minilm``
on the very same pairs.

    python bench/tier_agreement_llm.py [--queries 5] [--per-query 8] [--judge local:qwen]

An LLM judge on a CPU grades a few pairs a minute, so the sample is drawn by query: ``--queries``
queries (seeded), then ``--per-query`` of each query's graded pairs (seeded, uniform, so the
grade mix is the data's own). Drawing whole batches from one query lets the tier job send them
in batches of 5 that share the query's prompt prefix. Both judges run through
``evidex.evaluate.run.evaluate`` (the code behind ``evidex eval tier``), cache off; kappa
intervals are a 95% percentile bootstrap over pairs. Figures go to docs/benchmarks.md, section
``tier_agreement_llm``.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _report import write_section
from eval_tier import _section
from evidex.evaluate import datasets
from evidex.evaluate.golden import TierGolden, write_jsonl
from evidex.evaluate.registry import EvalOptions
from evidex.evaluate.run import evaluate
from evidex.harness.runner import HarnessSettings
from evidex.judges import get_judge
from evidex.store import open_store

ROOT = Path(__file__).resolve().parent.parent


def sample_by_query(
    records: list[TierGolden], queries: int, per_query: int, seed: int
) -> list[TierGolden]:
    by_query: dict[str, list[TierGolden]] = defaultdict(list)
    for record in records:
        by_query[record.query_id or record.query].append(record)
    rng = random.Random(seed)
    chosen = rng.sample(sorted(by_query), min(queries, len(by_query)))
    sample: list[TierGolden] = []
    for qid in chosen:
        pairs = by_query[qid]
        sample.extend(rng.sample(pairs, min(per_query, len(pairs))))
    return sample


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--queries", type=int, default=5)
    parser.add_argument("--per-query", type=int, default=8)
    parser.add_argument("--judge", default="local:qwen")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds per judge call")
    args = parser.parse_args()

    records = datasets.llmjudge_tier(args.data / "llmjudge")
    sample = sample_by_query(records, args.queries, args.per_query, args.seed)
    out = Path(tempfile.mkdtemp(prefix="evidex-tier-llm-"))
    golden = out / "sample.golden.jsonl"
    write_jsonl(golden, sample)
    store = open_store(f"sqlite:///{out / 'bench.db'}")
    settings = HarnessSettings(timeout_s=args.timeout, use_cache=False)
    options = EvalOptions(seed=args.seed, extra={"batch_size": 5})
    load_before = os.getloadavg()[0]

    sections = []
    for spec in (args.judge, "local:minilm"):
        started = time.perf_counter()
        report = evaluate(
            "tier",
            golden,
            judge=get_judge(spec),
            store=store,
            out_dir=out / spec.replace(":", "-"),
            options=options,
            settings=settings,
        )
        seconds = time.perf_counter() - started
        fallbacks = report.get("sources", {}).get("fallback", 0)
        sections.append(_section(f"`{spec}`", report, seconds, f"{fallbacks} fallback passages"))
        print(f"{spec}: kappa {report['metrics']['kappa']:.3f} in {seconds:.0f} s")
    store.close()

    body = (
        f"LLMJudge dev, {len(sample)} graded pairs: {args.queries} queries drawn with seed "
        f"{args.seed}, {args.per_query} pairs of each drawn uniformly. Tier batches of 5, cache "
        f"off; 1-min load average at the start {load_before:.1f} (2 cores). NIST grades 3/2/1/0 "
        "mapped to directly-supporting / contextually-relevant / tangentially-related / "
        "irrelevant. The sample is small: read the intervals, not the point values.\n\n"
        "Reference point from the data README: the best LLMJudge submissions (GPT-4o- and "
        "Llama-70B-class judges) reach Cohen's kappa ≈ 0.28 over the four grades.\n\n"
        + "\n\n".join(sections)
    )
    write_section("tier_agreement_llm", "Tier agreement of local:qwen (LLMJudge dev sample)", body)


if __name__ == "__main__":
    main()
