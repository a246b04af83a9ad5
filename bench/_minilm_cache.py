"""``local:minilm`` scores of a data set's judged pairs, computed once and kept in a JSON file.

    python bench/_minilm_cache.py DATA_DIR CACHE.json [--dataset trec-dl|llmjudge] [--per-query N]

Scoring 9k pairs takes minutes on two cores; the cascade bench and the band fit read the file
instead. The file is keyed by ``query_id \\x1f passage_id`` and records the judge's model
version, so a file made by another model is refused rather than silently reused.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from evidex.evaluate.datasets import llmjudge_tier, trec_dl_tier
from evidex.evaluate.golden import TierGolden
from evidex.judges.minilm import MiniLMJudge


def records_of(data: Path, dataset: str, per_query: int | None = None) -> list[TierGolden]:
    """The judged pairs; with ``per_query``, a seeded sample of that many per query."""
    records = llmjudge_tier(data) if dataset == "llmjudge" else trec_dl_tier(data)
    if per_query is None:
        return records
    by_query: dict[str, list[TierGolden]] = {}
    for r in records:
        by_query.setdefault(r.group, []).append(r)
    rng = random.Random(0)
    return [
        r
        for members in by_query.values()
        for r in rng.sample(members, min(per_query, len(members)))
    ]


def key(record: TierGolden) -> str:
    return f"{record.group}\x1f{record.passage_id}"


def cached_scores(
    records: Sequence[TierGolden], cache: Path, judge: MiniLMJudge | None = None
) -> dict[str, float]:
    """Scores of every record, from ``cache`` when it holds them, else computed and saved."""
    judge = judge or MiniLMJudge()
    if cache.exists():
        saved = json.loads(cache.read_text(encoding="utf-8"))
        if saved.get("model_version") != judge.model_version:
            raise SystemExit(f"{cache} was scored by {saved.get('model_version')!r}; delete it")
        scores: dict[str, float] = saved["scores"]
        if all(key(r) in scores for r in records):
            return scores
    else:
        scores = {}
    by_query: dict[str, list[TierGolden]] = {}
    for r in records:
        if key(r) not in scores:
            by_query.setdefault(r.group, []).append(r)
    started = time.perf_counter()
    for done, members in enumerate(by_query.values(), 1):
        values = judge.score(members[0].query, [r.text for r in members])
        scores.update({key(r): float(v) for r, v in zip(members, values, strict=True)})
        cache.parent.mkdir(parents=True, exist_ok=True)
        cache.write_text(
            json.dumps({"model_version": judge.model_version, "scores": scores}), encoding="utf-8"
        )
        print(
            f"scored query {done}/{len(by_query)} ({time.perf_counter() - started:.0f} s)",
            file=sys.stderr,
        )
    return scores


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", type=Path)
    parser.add_argument("cache", type=Path)
    parser.add_argument("--dataset", choices=["trec-dl", "llmjudge"], default="trec-dl")
    parser.add_argument("--per-query", type=int, default=None)
    args = parser.parse_args(argv)
    records = records_of(args.data, args.dataset, args.per_query)
    scores = cached_scores(records, args.cache)
    print(f"{len(scores)} scores in {args.cache}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
