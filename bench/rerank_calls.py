"""Comparisons needed to find the top-10 of 30 candidates, and the nDCG@10 reached, per sort.

    python bench/rerank_calls.py [--data ../shared/data] [--noise 0 0.1 0.2] [--n 30] [--k 10]

This measures the algorithms, not a model: the comparator is simulated from the TREC DL 2019
qrels. For each judged query, the first ``--n`` BM25 candidates with a text are the input (in
BM25 order; unjudged = grade 0). Comparing two passages of different grades names the higher
one, except that with probability ``noise`` the answer is flipped; two passages of the same
grade get a coin toss. Each pair's answer is drawn once per query and noise level (seeded), so
every algorithm sees the same comparator.

- all pairs: every one of the n(n-1)/2 pairs compared once, ranked by wins (Copeland);
- pairwise tournament (the ``pairwise`` strategy's sort): top-k by knockout with replays,
  the other candidates in BM25 order below;
- BM25 order (no comparison) for reference.

A comparison here is one pair decision; the ``pairwise`` strategy asks the judge twice per
comparison (both orders), which doubles its calls but not this count.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import statistics
import sys
from collections.abc import Sequence
from itertools import combinations
from pathlib import Path

import ir_measures
from ir_measures import nDCG

from evidex.cli.rerank import read_run
from evidex.jobs._rank_algos import tournament_top_k

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _report import write_section
from rerank_dl19 import load_passages, load_qrels

ROOT = Path(__file__).resolve().parent.parent
MEASURE = nDCG @ 10


class Comparator:
    """Grade-based answers with seeded noise; counts the distinct pairs it was asked."""

    def __init__(self, grades: dict[str, int], noise: float, seed: str) -> None:
        self.grades, self.noise, self.seed = grades, noise, seed
        self.asked: set[frozenset[str]] = set()

    def _draw(self, a: str, b: str) -> float:
        lo, hi = sorted((a, b))
        digest = hashlib.sha256(f"{self.seed}|{lo}|{hi}".encode()).digest()
        return int.from_bytes(digest[:8], "big") / 2**64

    def better(self, a: str, b: str) -> str:
        self.asked.add(frozenset((a, b)))
        lo, hi = sorted((a, b))
        u = self._draw(a, b)
        ga, gb = self.grades.get(a, 0), self.grades.get(b, 0)
        if ga == gb:
            return lo if u < 0.5 else hi
        right = a if ga > gb else b
        wrong = b if right == a else a
        return wrong if u < self.noise else right


def all_pairs(ids: Sequence[str], cmp: Comparator) -> list[str]:
    wins = dict.fromkeys(ids, 0)
    for a, b in combinations(ids, 2):
        wins[cmp.better(a, b)] += 1
    position = {pid: i for i, pid in enumerate(ids)}
    return sorted(ids, key=lambda p: (-wins[p], position[p]))


def tournament(ids: Sequence[str], cmp: Comparator, k: int) -> list[str]:
    async def better(a: str, b: str) -> str:
        return cmp.better(a, b)

    top = asyncio.run(tournament_top_k(list(ids), k, better))
    return top + [p for p in ids if p not in set(top)]


def as_run(order: Sequence[str]) -> dict[str, float]:
    return {pid: float(len(order) - i) for i, pid in enumerate(order)}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--noise", type=float, nargs="+", default=[0.0, 0.1, 0.2])
    parser.add_argument("--n", type=int, default=30)
    parser.add_argument("--k", type=int, default=10)
    args = parser.parse_args(argv)

    root = args.data / "trec-dl-2019"
    qrels = load_qrels(root / "qrels.txt")
    texts = load_passages(root / "passages.jsonl")
    bm25 = read_run(root / "bm25_top100.run")
    inputs = {
        q: [r.docid for r in bm25[q] if r.docid in texts][: args.n] for q in qrels if q in bm25
    }
    total_pairs = args.n * (args.n - 1) // 2

    def ndcg(runs: dict[str, dict[str, float]]) -> float:
        return float(ir_measures.calc_aggregate([MEASURE], qrels, runs)[MEASURE])

    rows = []
    baseline = ndcg({q: as_run(ids) for q, ids in inputs.items()})
    for noise in args.noise:
        runs_all, runs_tour = {}, {}
        counts_all, counts_tour = [], []
        for q, ids in inputs.items():
            cmp = Comparator(qrels[q], noise, f"{q}|{noise}")
            runs_all[q] = as_run(all_pairs(ids, cmp))
            counts_all.append(len(cmp.asked))
            cmp = Comparator(qrels[q], noise, f"{q}|{noise}")
            runs_tour[q] = as_run(tournament(ids, cmp, args.k))
            counts_tour.append(len(cmp.asked))
        full, tour = ndcg(runs_all), ndcg(runs_tour)
        rows.append(
            f"| {noise:.2f} | {full:.4f} | {statistics.mean(counts_all):.0f} | {tour:.4f} "
            f"| {statistics.mean(counts_tour):.1f} "
            f"({statistics.mean(counts_tour) / total_pairs:.1%}) | {tour / full:.1%} |"
        )
        print(rows[-1])

    body = "\n".join(
        [
            "Measures the sorting algorithms, not a model: the comparator is simulated from "
            f"the TREC DL 2019 qrels ({len(inputs)} queries, first {args.n} BM25 candidates "
            "with a text; different grades → the higher one, flipped with probability `noise`; "
            "equal grades → a seeded coin toss). nDCG@10, linear gain, ir-measures. "
            f"BM25 order without any comparison: {baseline:.4f}.",
            "",
            f"| noise | all pairs nDCG@10 | comparisons | pairwise tournament top-{args.k} "
            "nDCG@10 | comparisons (share of all pairs) | tournament / all pairs |",
            "|---|---|---|---|---|---|",
            *rows,
        ]
    )
    write_section("rerank_calls", f"Rerank: comparisons to find the top-{args.k} of {args.n}", body)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
