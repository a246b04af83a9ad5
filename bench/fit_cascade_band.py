"""Fit the shipped default band of ``cascade:local:minilm,...`` on LLMJudge dev data.

    python bench/fit_cascade_band.py LLMJUDGE_DIR [--cache FILE] [--per-query 60] [--write]

No strong judge's answers are recorded for LLMJudge dev, so the default cannot be the band that
keeps a given LLM's kappa (that is what ``evidex calibrate tier --judge cascade:...`` fits on
your golden set, with your expensive judge). The default settles only what the encoder gets
right by itself, measured against the assessors: the low end, where at least ``--precision``
(default 75%: three in four) of the dev pairs scoring below the bound are graded 0 (and the
encoder says irrelevant there), and the high end, where at least that share of the pairs
scoring at or above the bound are graded 2 or 3. Every pair in between goes to the expensive
judge. On 1,500 dev pairs (60 per query) a stricter rule leaves little to settle: at 90% the
band sends 93% of the pairs on, at 80% 83%, at 75% 39%. With ``--write`` the band goes to
``src/evidex/data/cascade/band.json``, with how it was fitted.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Sequence
from pathlib import Path

from _minilm_cache import cached_scores, key, records_of
from evidex.judges.cascade import Band
from evidex.judges.minilm import MiniLMJudge

SHIPPED = Path(__file__).resolve().parent.parent / "src" / "evidex" / "data" / "cascade"


def fit(scores: Sequence[float], grades: Sequence[int], cut: float, precision: float) -> Band:
    """The band of the module docstring; ``cut`` is the encoder's lowest cut point."""
    pairs = sorted(zip(scores, grades, strict=True))
    low = -math.inf
    zeros = 0
    for i, (s, g) in enumerate(pairs):
        # the bound s settles pairs[:i]: all below s
        if i and s <= cut and zeros / i >= precision and s > pairs[i - 1][0]:
            low = s
        zeros += g == 0
    high = math.inf
    relevant = 0
    for i in range(len(pairs) - 1, -1, -1):
        s, g = pairs[i]
        relevant += g >= 2
        above = len(pairs) - i
        if relevant / above >= precision and (i == 0 or pairs[i - 1][0] < s):
            high = s
    return Band(low=low, high=max(high, low))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", type=Path)
    parser.add_argument(
        "--cache", type=Path, default=Path("reports/cascade/minilm_llmjudge_dev.json")
    )
    parser.add_argument("--per-query", type=int, default=60)
    parser.add_argument("--precision", type=float, default=0.75)
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args(argv)
    records = records_of(args.data, "llmjudge", args.per_query)
    judge = MiniLMJudge()
    scores = cached_scores(records, args.cache, judge)
    values = [scores[key(r)] for r in records]
    grades = [int(r.grade or 0) for r in records]
    cut = min(judge.thresholds.for_tiers(4))
    band = fit(values, grades, cut, args.precision)
    sent = sum(band.uncertain(s) for s in values)
    below = [g for s, g in zip(values, grades, strict=True) if s < band.low]
    facts = {
        "dataset": "llmjudge dev",
        "pairs": len(records),
        "queries": len({r.group for r in records}),
        "per_query": args.per_query,
        "rule": f"settle below low where >= {args.precision:.0%} of pairs are graded 0, and at "
        f"or above high where >= {args.precision:.0%} are graded 2-3; the rest is sent on",
        "share_sent": round(sent / len(records), 4),
        "share_graded_0_below_low": round(sum(g == 0 for g in below) / len(below), 4)
        if below
        else None,
        "script": "bench/fit_cascade_band.py",
    }
    # the edge for whole-query jobs is fitted apart (bench/sufficiency_cascade.py): kept
    before = json.loads((SHIPPED / "band.json").read_text(encoding="utf-8")).get("local:minilm", {})
    kept = before.get("fit", {}).get("none_relevant_below")
    shipped = Band(
        low=band.low,
        high=band.high,
        cheap="local:minilm",
        cheap_version=judge.model_version,
        none_relevant_below=before.get("none_relevant_below"),
        fit={**facts, **({"none_relevant_below": kept} if kept else {})},
    )
    print(json.dumps(shipped.to_json(), indent=2))
    if args.write:
        SHIPPED.mkdir(parents=True, exist_ok=True)
        (SHIPPED / "band.json").write_text(
            json.dumps({"local:minilm": shipped.to_json()}, indent=2) + "\n", encoding="utf-8"
        )
        print(f"wrote {SHIPPED / 'band.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
