"""nDCG@10 of the rerank job on TREC DL 2019 passage (43 judged queries, BM25 top-100).

    python bench/rerank_dl19.py [--data ../shared/data] [--llm-queries 5] [--llm-top-n 10]
                                [--llm-judge local:qwen] [--llm-strategy allpairs] [--no-llm]

Systems, all through the real ``rerank()`` job with the cache off:

- BM25 alone: the run as shipped, and the same run restricted to candidates that have a text.
- ``pointwise`` with ``local:minilm`` over every candidate with a text (top_n = 100).
- an LLM strategy (``allpairs`` by default) with ``local:qwen`` over the first ``--llm-top-n``
  candidates of the MiniLM ranking (the cheap first stage), on ``--llm-queries`` queries drawn
  with a fixed seed; BM25 and MiniLM are reported on the same sample for comparison.

Candidates without text: ``passages.jsonl`` holds the text of every judged passage, so a BM25
candidate without text is unjudged (gain 0). We rerank only the candidates with text, in BM25
order, and score the reranked list alone. nDCG@10 uses trec_eval's linear gain (the grade
0-3), computed with ir-measures. Seconds per query are wall time of the job call.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import ir_measures
from ir_measures import nDCG

from evidex.cli.rerank import RunLine, read_queries, read_run
from evidex.harness.runner import HarnessSettings
from evidex.jobs.rerank import RerankResult, rerank
from evidex.judges import get_judge
from evidex.judging import Judge
from evidex.store import SqlStore, open_store
from evidex.types import Passage

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _report import write_section

ROOT = Path(__file__).resolve().parent.parent
MEASURE = nDCG @ 10
Run = dict[str, dict[str, float]]


def load_qrels(path: Path) -> dict[str, dict[str, int]]:
    qrels: dict[str, dict[str, int]] = {}
    for line in path.read_text().splitlines():
        if line.strip():
            qid, _, pid, grade = line.split()
            qrels.setdefault(qid, {})[pid] = int(grade)
    return qrels


def load_passages(path: Path) -> dict[str, Passage]:
    rows = (json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line)
    return {str(r["pid"]): Passage(passage_id=str(r["pid"]), text=r["text"]) for r in rows}


@dataclass(frozen=True)
class DL19:
    """TREC DL 2019 passage as the benchmarks read it; ``qids`` are the judged queries that
    have a BM25 run, sorted."""

    queries: dict[str, str]
    qrels: dict[str, dict[str, int]]
    bm25: dict[str, list[RunLine]]
    passages: dict[str, Passage]
    qids: list[str]

    def pool(self, qid: str) -> list[RunLine]:
        """The BM25 candidates of ``qid`` that have a text, in BM25 order."""
        return [r for r in self.bm25[qid] if r.docid in self.passages]


def load_dl19(data: Path) -> DL19:
    root = data / "trec-dl-2019"
    queries = read_queries(root / "queries.tsv")
    qrels = load_qrels(root / "qrels.txt")
    bm25 = read_run(root / "bm25_top100.run")
    passages = load_passages(root / "passages.jsonl")
    qids = sorted(q for q in qrels if q in queries and q in bm25)
    return DL19(queries, qrels, bm25, passages, qids)


def ndcg(qrels: dict[str, dict[str, int]], run: Run, qids: Sequence[str]) -> float:
    chosen = {q: run[q] for q in qids if q in run}
    return float(
        ir_measures.calc_aggregate([MEASURE], {q: qrels[q] for q in qids}, chosen)[MEASURE]
    )


def as_run(lines: Sequence[RunLine]) -> dict[str, float]:
    return {r.docid: r.score for r in lines}


def ranked_run(result: RerankResult) -> dict[str, float]:
    n = len(result.ranked_passages)
    return {r.passage_id: float(n - r.rank + 1) for r in result.ranked_passages}


def rerank_all(
    name: str,
    qids: Sequence[str],
    candidates: Callable[[str], list[Passage]],
    queries: dict[str, str],
    call: Callable[[str, list[Passage]], RerankResult],
) -> tuple[Run, list[float], list[RerankResult]]:
    run: Run = {}
    seconds: list[float] = []
    results = []
    for i, qid in enumerate(qids, 1):
        started = time.perf_counter()
        result = call(queries[qid], candidates(qid))
        seconds.append(time.perf_counter() - started)
        run[qid] = ranked_run(result)
        results.append(result)
        print(f"{name}: {i}/{len(qids)} {qid} {seconds[-1]:.1f}s source={result.source}")
    return run, seconds, results


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--llm-queries", type=int, default=5)
    parser.add_argument("--llm-top-n", type=int, default=10)
    parser.add_argument("--llm-judge", default="local:qwen")
    parser.add_argument("--llm-strategy", default="allpairs")
    parser.add_argument("--no-llm", action="store_true", help="skip the LLM stage")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    load = os.getloadavg()[0]
    dl19 = load_dl19(args.data)
    queries, qrels, bm25, texts, qids = (
        dl19.queries, dl19.qrels, dl19.bm25, dl19.passages, dl19.qids
    )  # fmt: skip

    def with_text(qid: str) -> list[Passage]:
        return [
            texts[r.docid].model_copy(update={"rank": r.rank, "score": r.score})
            for r in bm25[qid]
            if r.docid in texts
        ]

    bm25_full = {q: as_run(bm25[q]) for q in qids}
    bm25_text = {q: {p.passage_id: p.score or 0.0 for p in with_text(q)} for q in qids}
    kept = sum(len(bm25_text[q]) for q in qids)
    total = sum(len(bm25_full[q]) for q in qids)

    settings = HarnessSettings(use_cache=False, max_concurrency=1)
    tmp = tempfile.TemporaryDirectory()
    store = open_store(f"sqlite:///{tmp.name}/bench.db")

    def pointwise(judge: Judge) -> Callable[[str, list[Passage]], RerankResult]:
        def run(query: str, cands: list[Passage]) -> RerankResult:
            return rerank(
                query, cands, judge=judge, store=store, strategy="pointwise", top_n=100,
                settings=settings,
            )  # fmt: skip

        return run

    minilm = pointwise(get_judge("local:minilm"))
    minilm_run, minilm_s, minilm_results = rerank_all("minilm", qids, with_text, queries, minilm)
    by_qid = dict(zip(qids, minilm_results, strict=True))
    float32 = pointwise(get_judge("local:minilm", compute="float32"))
    float32_run, float32_s, _ = rerank_all("minilm-float32", qids, with_text, queries, float32)

    rows = [
        ("BM25 (run as shipped, 100 candidates)", ndcg(qrels, bm25_full, qids), "-"),
        ("BM25, candidates with text only", ndcg(qrels, bm25_text, qids), "-"),
        (
            "pointwise, local:minilm (top_n 100)",
            ndcg(qrels, minilm_run, qids),
            f"{statistics.mean(minilm_s):.2f}",
        ),
        (
            'pointwise, local:minilm with compute="float32" (top_n 100)',
            ndcg(qrels, float32_run, qids),
            f"{statistics.mean(float32_s):.2f}",
        ),
    ]
    body = [
        f"TREC DL 2019 passage, {len(qids)} judged queries, BM25 top-100 candidates: {kept} of "
        f"{total} have a text and are reranked; the other {total - kept} are unjudged (gain 0) "
        "and left out. nDCG@10 with trec_eval's linear gain (ir-measures). Every system runs "
        "through `rerank()` with the cache off, one query at a time.",
        "",
        "| system | nDCG@10 | s/query |",
        "|---|---|---|",
        *[f"| {name} | {value:.4f} | {secs} |" for name, value, secs in rows],
    ]

    body += [
        "",
        f"Seconds per query are wall time on {os.cpu_count()} cores; 1-minute load average "
        f"when the run started: {load:.1f}. The default `local:minilm` computes in int8; "
        '`compute="float32"` runs the shipped graph as it is (see encoder_speed).',
    ]
    write_section("rerank_dl19", "Rerank: nDCG@10 on TREC DL 2019", "\n".join(body))
    if not args.no_llm:  # its own section, so a run without it keeps the last LLM figures
        llm = llm_stage(args, qids, queries, qrels, bm25_text, minilm_run, by_qid, texts, store)
        write_section(
            "rerank_dl19_llm", "Rerank: an LLM stage over local:minilm on TREC DL 2019",
            "\n".join(llm),
        )  # fmt: skip
    store.close()
    tmp.cleanup()
    return 0


def llm_stage(
    args: argparse.Namespace,
    qids: Sequence[str],
    queries: dict[str, str],
    qrels: dict[str, dict[str, int]],
    bm25_text: Run,
    minilm_run: Run,
    by_qid: dict[str, RerankResult],
    texts: dict[str, Passage],
    store: SqlStore,
) -> list[str]:
    """The LLM strategy on a fixed sample, over the MiniLM top ``--llm-top-n``."""
    sample = sorted(random.Random(args.seed).sample(list(qids), args.llm_queries))
    try:
        judge: Judge = get_judge(args.llm_judge)
    except Exception as exc:  # report the reason in the figures instead of guessing
        return ["", f"LLM stage not run: {args.llm_judge} is unavailable here ({exc})."]
    settings = HarnessSettings(use_cache=False, max_concurrency=1, timeout_s=900)

    def first_stage(qid: str) -> list[Passage]:
        top = by_qid[qid].ids()[: args.llm_top_n]
        return [texts[pid].model_copy(update={"rank": i}) for i, pid in enumerate(top, 1)]

    def llm(query: str, cands: list[Passage]) -> RerankResult:
        return rerank(
            query, cands, judge=judge, store=store, strategy=args.llm_strategy,
            top_n=args.llm_top_n, top_k=args.llm_top_n, settings=settings,
        )  # fmt: skip

    llm_run, llm_s, results = rerank_all("llm", sample, first_stage, queries, llm)
    merged = {
        q: {**minilm_run[q], **{pid: 1000.0 + s for pid, s in llm_run[q].items()}} for q in sample
    }
    fallbacks = sum(r.source == "fallback" for r in results)
    calls = sum(r.judge_calls for r in results)
    flags = sum(len(r.metrics.justification_flags) for r in results)
    return [
        "",
        f"LLM stage: `{args.llm_strategy}` with `{args.llm_judge}` over the MiniLM top "
        f"{args.llm_top_n} (the rest keep the MiniLM order below), on {len(sample)} queries "
        f"drawn with seed {args.seed}: {', '.join(sample)}. {calls} judge calls, "
        f"{fallbacks} ranking(s) fell back to the input order, {flags} justification(s) "
        "flagged by the heuristic.",
        "",
        "| system (same sample) | nDCG@10 | s/query |",
        "|---|---|---|",
        f"| BM25, candidates with text only | {ndcg(qrels, bm25_text, sample):.4f} | - |",
        f"| pointwise, local:minilm | {ndcg(qrels, minilm_run, sample):.4f} | - |",
        f"| minilm → {args.llm_strategy}, {args.llm_judge} | {ndcg(qrels, merged, sample):.4f} "
        f"| {statistics.mean(llm_s):.1f} (LLM stage only) |",
    ]


if __name__ == "__main__":
    raise SystemExit(main())
