"""The rerank job around ``local:minilm``: what the harness adds to the encoder's own time.

    python bench/job_path.py [--data ../shared/data] [--pairs 1000] [--repeats 3] [--label L]
                             [--no-write]

The workload of ``bench/encoder_speed.py``'s job row: ``--pairs`` query-passage pairs drawn
with a fixed seed from the BM25 top-100 of TREC DL 2019, one pointwise ``rerank()`` call per
query (cache off, audit rows written to a fresh SQLite file), against ``judge.score`` over the
same groups. Runs interleaved round by round, medians reported; the difference is the job's
own cost (preflight, validation, the audit log). Only public names are imported, so the same
script measures an older tree (``PYTHONPATH=OLD/src``) beside the current one.
"""

from __future__ import annotations

import argparse
import functools
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import evidex
from evidex import HarnessSettings, Passage, get_judge, open_store

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _report import write_section
from rerank_dl19 import load_dl19

ROOT = Path(__file__).resolve().parent.parent


def draw(data: Path, count: int, seed: int) -> list[tuple[str, list[Passage]]]:
    """The same pairs as encoder_speed.py (same seed, same sampling), grouped by query."""
    dl19 = load_dl19(data)
    candidates = [(qid, line.rank, line.docid) for qid in dl19.qids for line in dl19.pool(qid)]
    chosen = sorted(random.Random(seed).sample(candidates, count))
    groups: dict[str, list[Passage]] = {}
    for qid, _, pid in chosen:
        groups.setdefault(qid, []).append(Passage(passage_id=pid, text=dl19.passages[pid].text))
    return [(dl19.queries[qid], items) for qid, items in groups.items()]


def timed(fn: Callable[[], object]) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--pairs", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--label", default="", help="names the section (e.g. before / after)")
    parser.add_argument("--no-write", action="store_true", help="print only")
    args = parser.parse_args(argv)

    groups = draw(args.data, args.pairs, args.seed)
    judge = get_judge("local:minilm")
    score = judge.score  # type: ignore[attr-defined]  # local:minilm scores pairs
    settings = HarnessSettings(use_cache=False, max_concurrency=1)
    tmp = tempfile.TemporaryDirectory()

    def scores() -> None:
        for query, items in groups:
            score(query, [p.text for p in items])

    def job(round_: int) -> None:
        store = open_store(f"sqlite:///{tmp.name}/job{round_}.db")
        for query, items in groups:
            evidex.rerank(
                query, items, judge=judge, store=store, strategy="pointwise",
                top_n=len(items), settings=settings,
            )  # fmt: skip
        store.close()

    scores()  # warm the encoder
    seconds: dict[str, list[float]] = {"score": [], "job": []}
    for round_ in range(args.repeats):
        seconds["score"].append(timed(scores))
        seconds["job"].append(timed(functools.partial(job, round_)))
        print(
            f"round {round_ + 1}: score {seconds['score'][-1]:.2f}s job {seconds['job'][-1]:.2f}s"
        )

    med = {k: statistics.median(v) for k, v in seconds.items()}
    calls = len(groups)
    overhead_ms = (med["job"] - med["score"]) / calls * 1000
    body = "\n".join(
        [
            f"{args.pairs} pairs in {calls} queries (one pointwise call each), medians of "
            f"{args.repeats} interleaved rounds; evidex {evidex.__version__}"
            + (f", {args.label}" if args.label else ""),
            "",
            "| path | seconds | pairs/s |",
            "|---|---|---|",
            f"| `judge.score` | {med['score']:.2f} | {args.pairs / med['score']:.1f} |",
            f"| `rerank()` job | {med['job']:.2f} | {args.pairs / med['job']:.1f} |",
            "",
            f"Job cost beyond scoring: {overhead_ms:.1f} ms per call "
            f"({(med['job'] / med['score'] - 1) * 100:.1f}% of the scoring time).",
        ]
    )
    print(body)
    if not args.no_write:
        name = "job_path" + (f"_{args.label}" if args.label else "")
        title = "Rerank job around local:minilm" + (f" ({args.label})" if args.label else "")
        write_section(name, title, body)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
