"""``evidex eval`` for rerank, classify and audit with the embedded judges on the shared data.

    python bench/eval_jobs.py [--jobs rerank,classify,audit] [--classify-sample 10]
                              [--audit-sample 10] [--top-n 100]

Each job runs through :func:`evidex.evaluate.run.evaluate`, the code behind ``evidex eval``
(the equivalent commands are printed in the report), with its default embedded judge:
``local:minilm`` (pointwise) for rerank over all 43 TREC DL 2019 queries, ``local:qwen`` for
classify on a seeded SciFact sample and for audit on a seeded WiCE dev sample (with an
8192-token window: WiCE claims come with up to ~30 evidence chunks). The published
reference points of ``../shared/data/README.md`` are printed beside the figures. Reports go to
``reports/bench-eval-JOB/``; figures to docs/benchmarks.md, section ``eval-jobs``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _report import write_section
from evidex.evaluate.registry import EvalOptions
from evidex.evaluate.run import evaluate

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = {"rerank": "trec-dl-2019", "classify": "scifact", "audit": "wice"}
# WiCE answers come with up to ~30 evidence chunks: local:qwen needs its 8192-token window
JUDGE_OPTIONS = {"audit": {"n_ctx": 8192}}
REFERENCE = {
    "rerank": "MS MARCO MiniLM cross-encoders reach nDCG@10 ≈ 0.74 reranking BM25 top-100; "
    "BM25 alone 0.5058",
    "classify": "none published in the data README for this setting",
    "audit": "GPT-4 reaches F1 ≈ 61 on WiCE claims (supported vs the rest)",
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--jobs", default="rerank,classify,audit")
    parser.add_argument("--classify-sample", type=int, default=10)
    parser.add_argument("--audit-sample", type=int, default=10)
    parser.add_argument("--top-n", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    jobs = [j.strip() for j in args.jobs.split(",") if j.strip()]
    samples = {"rerank": None, "classify": args.classify_sample, "audit": args.audit_sample}
    blocks = []
    for job in jobs:
        extra: dict[str, object] = {"top_n": args.top_n} if job == "rerank" else {}
        out = ROOT / "reports" / f"bench-eval-{job}"
        load = os.getloadavg()[0]
        started = time.perf_counter()
        report = evaluate(
            job,
            args.data / FOLDERS[job],
            out_dir=out,
            sample=samples[job],
            options=EvalOptions(seed=args.seed, extra=extra),
            judge_options=JUDGE_OPTIONS.get(job),
            store=f"sqlite:///{out / 'bench.db'}",
        )
        seconds = time.perf_counter() - started
        blocks.append(_block(job, report, seconds, load, samples[job], args))
        print(f"{job}: {json.dumps(report['metrics'])[:300]} in {seconds:.0f} s")
    write_section(
        "eval-jobs",
        "evidex eval: rerank, classify and audit with the embedded judges",
        "\n\n".join(blocks),
    )


def _block(
    job: str,
    report: dict[str, object],
    seconds: float,
    load: float,
    sample: int | None,
    args: argparse.Namespace,
) -> str:
    run = report["run"]
    metrics = report["metrics"]
    assert isinstance(run, dict) and isinstance(metrics, dict)
    flags = f" --sample {sample}" if sample else ""
    if job == "rerank":
        flags += f" --top-n {args.top_n}"
    for key, value in JUDGE_OPTIONS.get(job, {}).items():
        flags += f" --judge-option {key}={value}"
    command = f"evidex eval {job} --golden {args.data / FOLDERS[job]}{flags} --seed {args.seed}"
    rows = "\n".join(
        f"| {name} | {value:.3f} |" if isinstance(value, float) else f"| {name} | {value} |"
        for name, value in sorted(metrics.items())
    )
    return (
        f"### {job} ({run['judge_id']})\n\n"
        f"Equivalent command: `{command}`  \n"
        f"{run['items']} items, {seconds:.0f} s wall for this invocation (a job resumed from "
        "the progress file of an earlier run of the same command takes ~0 s; 1-min load "
        f"average at the start {load:.1f}, 2 cores). Reference point: {REFERENCE[job]}.\n\n"
        f"| measure | value |\n|---|---:|\n{rows}"
    )


if __name__ == "__main__":
    main()
